package lpm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// prefixGen makes random prefixes biased like real tables and clustered
// around a few anchor addresses, so a small set holds chains of nested
// prefixes, siblings and duplicates.
type prefixGen struct {
	fam     Family
	rng     *rand.Rand
	anchors []netip.Addr
}

func newPrefixGen(fam Family, seed uint64) *prefixGen {
	g := &prefixGen{fam: fam, rng: rand.New(rand.NewPCG(seed, 7))}
	g.anchors = RandomAddrs(fam, 6, seed)
	return g
}

// length draws a prefix length: mostly the real tables' bulk, sometimes the
// extremes (/0, the full width) and everything between.
func (g *prefixGen) length() int {
	w := g.fam.Width()
	r := g.rng.IntN(100)
	switch {
	case r < 3:
		return 0
	case r < 10:
		return w
	case r < 30:
		return g.rng.IntN(w + 1)
	}
	if g.fam == IPv4 {
		return []int{8, 12, 16, 18, 20, 21, 22, 23, 24, 24, 24, 24, 28, 32}[g.rng.IntN(14)]
	}
	return []int{16, 24, 29, 32, 32, 36, 40, 44, 48, 48, 48, 56, 64, 96, 127}[g.rng.IntN(15)]
}

// prefix returns an anchor with a few random bits flipped just above the
// length, masked to it.
func (g *prefixGen) prefix() netip.Prefix {
	l := g.length()
	hi, lo := addrBits(g.anchors[g.rng.IntN(len(g.anchors))])
	for b := max(0, l-6); b < l; b++ {
		if g.rng.IntN(2) == 0 {
			continue
		}
		if b < 64 {
			hi ^= 1 << (63 - b)
		} else {
			lo ^= 1 << (127 - b)
		}
	}
	p, _ := addrFromBits(g.fam, hi, lo).Prefix(l)
	return p
}

// probes returns addresses worth looking up for a prefix set: each prefix's
// first and last address and the ones just outside, a random one inside, and
// random addresses near the anchors and anywhere.
func (g *prefixGen) probes(ps []netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, p := range ps {
		first := p.Addr()
		last := lastAddr(p)
		out = append(out, first, last, first.Prev(), last.Next())
		out = append(out, TableAddrs([]netip.Prefix{p}, 1, g.rng.Uint64())...)
	}
	for _, a := range g.anchors {
		out = append(out, a, a.Next(), a.Prev())
	}
	out = append(out, RandomAddrs(g.fam, 64, g.rng.Uint64())...)
	return slices.DeleteFunc(out, func(a netip.Addr) bool { return !a.IsValid() })
}

func lastAddr(p netip.Prefix) netip.Addr {
	hi, lo := addrBits(p.Addr())
	mh, ml := maskBits(^uint64(0), ^uint64(0), p.Bits())
	return addrFromBits(familyOf(p.Addr()), hi|^mh, lo|^ml)
}

// linearLookup is the slowest possible LPM: scan every prefix.
func linearLookup(routes map[netip.Prefix]uint32, a netip.Addr) (uint32, bool) {
	best, nh := -1, uint32(0)
	for p, v := range routes {
		if p.Contains(a) && p.Bits() > best {
			best, nh = p.Bits(), v
		}
	}
	return nh, best >= 0
}

// checkAgainst compares the table with the reference and the linear scan on
// every probe.
func checkAgainst(t *testing.T, tb *Table, ref *Reference, routes map[netip.Prefix]uint32, probes []netip.Addr) {
	t.Helper()
	if tb.Len() != ref.Len() || tb.Len() != len(routes) {
		t.Fatalf("Len: table %d, reference %d, routes %d", tb.Len(), ref.Len(), len(routes))
	}
	for _, a := range probes {
		got, gok := tb.Lookup(a)
		want, wok := ref.Lookup(a)
		lin, lok := linearLookup(routes, a)
		if want != lin || wok != lok {
			t.Fatalf("reference %v -> %d,%v but linear scan %d,%v", a, want, wok, lin, lok)
		}
		if got != want || gok != wok {
			t.Fatalf("lookup %v: got %d,%v want %d,%v (strides %v)", a, got, gok, want, wok, tb.Strides())
		}
	}
	checkBatch(t, tb, probes)
	if err := checkCounts(tb); err != nil {
		t.Fatal(err)
	}
}

// checkBatch checks that the batch lookups agree with the single ones.
func checkBatch(t *testing.T, tb *Table, probes []netip.Addr) {
	t.Helper()
	out := make([]uint32, len(probes))
	if tb.Family() == IPv4 {
		tb.LookupBatch4(words4(probes), out)
	} else {
		tb.LookupBatch6(words6(probes), out)
	}
	for i, a := range probes {
		if want, _ := tb.Lookup(a); out[i] != want {
			t.Fatalf("batch lookup %v: %d, single %d", a, out[i], want)
		}
	}
}

// checkCounts recomputes every node's prefix count and every level's garbage
// from the prefix set and compares them with the table's metadata.
func checkCounts(tb *Table) error {
	tr := tb.tr
	counts := make([][]int32, len(tr.lv))
	for j, l := range tr.lv {
		counts[j] = make([]int32, l.nodes)
	}
	for k := range tb.set {
		n := uint32(0)
		for j := 0; j < int(tr.lvOf[k.l]); j++ {
			e := tr.lv[j].w[tr.entry(j, n, k)]
			if e&0xff != uint32(j+1) {
				return fmt.Errorf("prefix %v: level %d entry %#x is not a pointer to level %d", k.prefix(tb.fam), j, e, j+1)
			}
			n = e >> 8
			counts[j+1][n]++
		}
	}
	for j, l := range tr.lv {
		garbage := 0
		for n := 0; n < l.nodes; n++ {
			if j > 0 && counts[j][n] == 0 {
				garbage++
			}
			if j > 0 && counts[j][n] != l.count[n] {
				return fmt.Errorf("level %d node %d: count %d, recomputed %d", j, n, l.count[n], counts[j][n])
			}
		}
		if garbage != l.garbage {
			return fmt.Errorf("level %d: garbage %d, recomputed %d", j, l.garbage, garbage)
		}
	}
	return nil
}

// testOptions are the layouts the property tests run on; "tight" has no
// head-room to speak of and compacts eagerly, so rebuilds happen all the time.
func testOptions(fam Family) map[string]Options {
	tight := Options{HeadRoom: -1, MinFree: 1, GarbageThreshold: 0.05}
	if fam == IPv4 {
		return map[string]Options{
			"auto":      {MinFree: 4},
			"tight":     tight,
			"levels2":   {Levels: 2, MinFree: 2},
			"strides":   {Strides: []int{3, 5, 7, 1, 16}, MinFree: 2},
			"bytes":     {Strides: []int{8, 8, 8, 8}, MinFree: 2},
			"singles":   {Strides: slices.Repeat([]int{1}, 32), MinFree: 1},
			"tightauto": {Levels: 4, HeadRoom: -1, MinFree: -1, GarbageThreshold: -1},
		}
	}
	return map[string]Options{
		"auto":    {MinFree: 2},
		"tight":   tight,
		"strides": {Strides: []int{16, 8, 8, 8, 8, 16, 16, 16, 16, 16}, MinFree: 1},
		"wide":    {Strides: slices.Repeat([]int{16}, 8), MinFree: 1},
		"odd":     {Strides: []int{1, 2, 3, 5, 7, 11, 13, 9, 7, 12, 10, 11, 9, 12, 6, 10}, MinFree: 1},
	}
}

// TestRandomOperations runs random interleavings of inserts, deletes and
// next-hop changes on small clustered prefix sets of both families, checking
// after every batch: lookups against the reference and a linear scan, batch
// lookups, the metadata, and a mirror kept up to date only by Sync.
func TestRandomOperations(t *testing.T) {
	for _, fam := range []Family{IPv4, IPv6} {
		for name, opts := range testOptions(fam) {
			t.Run(fmt.Sprintf("%v/%s", fam, name), func(t *testing.T) {
				runRandomOperations(t, fam, opts, 5)
			})
		}
	}
}

func runRandomOperations(t *testing.T, fam Family, opts Options, seeds int) {
	rebuilds := 0
	for seed := uint64(1); seed <= uint64(seeds); seed++ {
		g := newPrefixGen(fam, seed*100+uint64(fam))
		routes := map[netip.Prefix]uint32{}
		var initial []Route
		for i := 0; i < 20; i++ {
			p, nh := g.prefix(), uint32(g.rng.IntN(300)+1)
			initial = append(initial, Route{p, nh})
			routes[p] = nh // the last duplicate wins
		}
		tb, err := Build(fam, initial, opts)
		if err != nil {
			t.Fatal(err)
		}
		ref := NewReference(fam)
		for p, nh := range routes {
			mustOK(t, ref.Insert(p, nh))
		}
		var ms mirrorState
		for batch := 0; batch < 12; batch++ {
			for op := 0; op < 25; op++ {
				randomOp(t, g, tb, ref, routes)
			}
			probes := g.probes(keysOf(routes))
			checkAgainst(t, tb, ref, routes, probes)
			ms.sync(t, tb, probes)
		}
		rebuilds += tb.Stats().Rebuilds
	}
	if opts.GarbageThreshold == 0.05 && rebuilds == 0 {
		t.Errorf("the tight layout never rebuilt: the generation change went untested")
	}
}

// randomOp applies one random operation to the table, the reference and the
// route map.
func randomOp(t *testing.T, g *prefixGen, tb *Table, ref *Reference, routes map[netip.Prefix]uint32) {
	t.Helper()
	r := g.rng.IntN(100)
	present := keysOf(routes)
	switch {
	case r < 50 || len(present) == 0:
		p, nh := g.prefix(), uint32(g.rng.IntN(MaxNextHop)+1)
		mustOK(t, tb.Insert(p, nh))
		mustOK(t, ref.Insert(p, nh))
		routes[p] = nh
	case r < 80:
		p := present[g.rng.IntN(len(present))]
		mustOK(t, tb.Delete(p))
		mustOK(t, ref.Delete(p))
		delete(routes, p)
	case r < 95:
		p, nh := present[g.rng.IntN(len(present))], uint32(g.rng.IntN(4)+1)
		mustOK(t, tb.Insert(p, nh))
		mustOK(t, ref.Insert(p, nh))
		routes[p] = nh
	default:
		p := g.prefix()
		if _, ok := routes[p]; !ok {
			if err := tb.Delete(p); !errors.Is(err, ErrNotFound) {
				t.Fatalf("delete of absent %v: %v", p, err)
			}
		}
	}
}

func keysOf(routes map[netip.Prefix]uint32) []netip.Prefix {
	ps := make([]netip.Prefix, 0, len(routes))
	for p := range routes {
		ps = append(ps, p)
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return ps
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestDefaultRouteAndHostRoutes covers the two ends: /0 over a populated
// table, deleted again, and full-length prefixes.
func TestDefaultRouteAndHostRoutes(t *testing.T) {
	for _, fam := range []Family{IPv4, IPv6} {
		g := newPrefixGen(fam, 9)
		tb, err := New(fam, Options{MinFree: 2})
		mustOK(t, err)
		ref := NewReference(fam)
		routes := map[netip.Prefix]uint32{}
		add := func(p netip.Prefix, nh uint32) {
			mustOK(t, tb.Insert(p, nh))
			mustOK(t, ref.Insert(p, nh))
			routes[p] = nh
		}
		del := func(p netip.Prefix) {
			mustOK(t, tb.Delete(p))
			mustOK(t, ref.Delete(p))
			delete(routes, p)
		}
		for i := 0; i < 30; i++ {
			a := RandomAddrs(fam, 1, uint64(i))[0]
			host, _ := a.Prefix(fam.Width())
			add(host, uint32(i+1))
		}
		for i := 0; i < 30; i++ {
			add(g.prefix(), uint32(i+100))
		}
		zero, _ := g.anchors[0].Prefix(0)
		add(zero, 7)
		checkAgainst(t, tb, ref, routes, g.probes(keysOf(routes)))
		add(zero, 8) // next-hop change of the default route
		checkAgainst(t, tb, ref, routes, g.probes(keysOf(routes)))
		del(zero)
		checkAgainst(t, tb, ref, routes, g.probes(keysOf(routes)))
		if nh, ok := tb.Lookup(g.anchors[0]); ok != (nh != 0) {
			t.Fatalf("Lookup ok %v with next hop %d", ok, nh)
		}
	}
}

// TestEmptyTable: nothing matches, everything is well formed.
func TestEmptyTable(t *testing.T) {
	for _, fam := range []Family{IPv4, IPv6} {
		tb, err := New(fam, Options{})
		mustOK(t, err)
		for _, a := range RandomAddrs(fam, 100, 1) {
			if nh, ok := tb.Lookup(a); ok || nh != 0 {
				t.Fatalf("empty table: %v -> %d", a, nh)
			}
		}
		if _, err := NewView(tb.Mirror().Image()); err != nil {
			t.Fatal(err)
		}
		s := tb.Stats()
		if s.Prefixes != 0 || s.Levels != len(s.Strides) || s.BytesPerPrefix != 0 || s.ImageBytes == 0 {
			t.Fatalf("stats of an empty table: %+v", s)
		}
	}
}

// TestWrongFamilyLookups: addresses of the other family, the zero Addr and
// views of the other family match nothing.
func TestWrongFamilyLookups(t *testing.T) {
	all4, _ := netip.ParsePrefix("0.0.0.0/0")
	all6, _ := netip.ParsePrefix("::/0")
	t4, err := Build(IPv4, []Route{{all4, 1}}, Options{})
	mustOK(t, err)
	t6, err := Build(IPv6, []Route{{all6, 2}}, Options{})
	mustOK(t, err)
	a4, a6 := netip.MustParseAddr("1.2.3.4"), netip.MustParseAddr("2001:db8::1")
	mapped := netip.MustParseAddr("::ffff:1.2.3.4")
	cases := []struct {
		tb   *Table
		a    netip.Addr
		want uint32
	}{
		{t4, a4, 1}, {t4, a6, 0}, {t4, mapped, 0}, {t4, netip.Addr{}, 0},
		{t6, a6, 2}, {t6, a4, 0}, {t6, mapped, 2}, {t6, netip.Addr{}, 0},
	}
	for _, c := range cases {
		if got, _ := c.tb.Lookup(c.a); got != c.want {
			t.Errorf("%v table, %v: %d, want %d", c.tb.Family(), c.a, got, c.want)
		}
	}
	if t4.Lookup6(1, 2) != 0 || t6.Lookup4(5) != 0 {
		t.Errorf("a lookup of the other family matched")
	}
	out := []uint32{9, 9}
	t4.LookupBatch6([]Addr6{{1, 2}, {3, 4}}, out)
	if out[0] != 0 || out[1] != 0 {
		t.Errorf("batch of the other family: %v", out)
	}
	t6.LookupBatch4([]uint32{1, 2}, out)
	if out[0] != 0 || out[1] != 0 {
		t.Errorf("batch of the other family: %v", out)
	}
}

// TestLookupsDoNotAllocate: the lookup paths are allocation-free.
func TestLookupsDoNotAllocate(t *testing.T) {
	for _, fam := range []Family{IPv4, IPv6} {
		g := newPrefixGen(fam, 3)
		var routes []Route
		for i := 0; i < 200; i++ {
			routes = append(routes, Route{g.prefix(), uint32(i + 1)})
		}
		tb, err := Build(fam, routes, Options{})
		mustOK(t, err)
		addrs := g.probes(nil)
		w4, w6 := words4(onlyFamily(addrs, IPv4)), words6(addrs)
		out := make([]uint32, len(addrs))
		allocs := testing.AllocsPerRun(20, func() {
			for _, a := range addrs {
				tb.Lookup(a)
			}
			tb.LookupBatch4(w4, out)
			tb.LookupBatch6(w6, out)
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per run", fam, allocs)
		}
	}
}

func onlyFamily(addrs []netip.Addr, fam Family) []netip.Addr {
	var out []netip.Addr
	for _, a := range addrs {
		if familyOf(a) == fam {
			out = append(out, a)
		}
	}
	return out
}

// TestViewOfClone: a View over a copy of the image answers like the table,
// and keeps following bubbles applied to it.
func TestViewOfClone(t *testing.T) {
	g := newPrefixGen(IPv6, 4)
	tb, err := New(IPv6, Options{})
	mustOK(t, err)
	u := tb.Mirror().Sync()
	var img = u.Full
	v, err := NewView(img)
	mustOK(t, err)
	var ps []netip.Prefix
	for i := 0; i < 40; i++ {
		p := g.prefix()
		ps = append(ps, p)
		mustOK(t, tb.Insert(p, uint32(i+1)))
	}
	if tb.Stats().Rebuilds != 0 {
		t.Skip("the inserts rebuilt the table; this test needs one generation")
	}
	u = tb.Mirror().Sync()
	mustOK(t, u.ApplyTo(&img))
	for _, a := range g.probes(ps) {
		if want, _ := tb.Lookup(a); viewLookup(v, a) != want {
			t.Fatalf("%v: view %d, table %d", a, viewLookup(v, a), want)
		}
	}
	if v.Generation() != tb.View().Generation() || v.Family() != IPv6 || v.Levels() != len(tb.Strides()) {
		t.Fatalf("view metadata differs")
	}
}
