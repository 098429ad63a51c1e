package gpu

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
)

// The conformance cases below run unchanged on every Backend: the CPU one
// here, the CUDA one under the build tag cuda. Each compares the backend's
// answers bit for bit with the lpm.Table's own lookups, at the start and after
// every synced round of updates.

func randomPrefix(rng *rand.Rand, fam lpm.Family) netip.Prefix {
	if fam == lpm.IPv4 {
		l := []int{8, 12, 16, 19, 20, 22, 23, 24, 24, 24, 24, 28, 32}[rng.IntN(13)]
		if rng.IntN(50) == 0 {
			l = rng.IntN(33)
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], rng.Uint32())
		return netip.PrefixFrom(netip.AddrFrom4(b), l).Masked()
	}
	l := []int{16, 29, 32, 36, 40, 44, 48, 48, 48, 56, 64, 96, 128}[rng.IntN(13)]
	if rng.IntN(50) == 0 {
		l = rng.IntN(129)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], 0x2000_0000_0000_0000|rng.Uint64()>>4)
	binary.BigEndian.PutUint64(b[8:], rng.Uint64())
	return netip.PrefixFrom(netip.AddrFrom16(b), l).Masked()
}

func randomRoutes(rng *rand.Rand, fam lpm.Family, n int) []lpm.Route {
	rs := make([]lpm.Route, n)
	for i := range rs {
		rs[i] = lpm.Route{Prefix: randomPrefix(rng, fam), NextHop: 1 + rng.Uint32N(1<<20)}
	}
	return rs
}

func addr4(a netip.Addr) uint32 { b := a.As4(); return binary.BigEndian.Uint32(b[:]) }

func addr6(a netip.Addr) lpm.Addr6 {
	b := a.As16()
	return lpm.Addr6{Hi: binary.BigEndian.Uint64(b[:8]), Lo: binary.BigEndian.Uint64(b[8:])}
}

// probe is a batch of addresses of one family: half drawn from the table's
// prefixes, half uniform.
type probe struct {
	v4 []uint32
	v6 []lpm.Addr6
}

func newProbe(fam lpm.Family, ps []netip.Prefix, n int, seed uint64) probe {
	as := append(lpm.TableAddrs(ps, n/2, seed), lpm.RandomAddrs(fam, n-n/2, seed+1)...)
	var p probe
	for _, a := range as {
		if fam == lpm.IPv4 {
			p.v4 = append(p.v4, addr4(a))
		} else {
			p.v6 = append(p.v6, addr6(a))
		}
	}
	return p
}

// compare looks the probe up in the backend and in the table and fails on the
// first difference.
func compare(t *testing.T, b Backend, id TableID, tab *lpm.Table, p probe, what string) {
	t.Helper()
	n := len(p.v4) + len(p.v6)
	got, want := make([]uint32, n), make([]uint32, n)
	var err error
	if tab.Family() == lpm.IPv4 {
		err = b.LookupLPM4(id, p.v4, got)
		tab.LookupBatch4(p.v4, want)
	} else {
		err = b.LookupLPM6(id, p.v6, got)
		tab.LookupBatch6(p.v6, want)
	}
	if err != nil {
		t.Fatalf("%s: %s lookup: %v", what, b.Name(), err)
	}
	batch := batchLPM(t, b, id, tab.Family(), p, what)
	for i := range want {
		if batch[i] != want[i] {
			t.Fatalf("%s: %s batch: key %d: got %d, table says %d", what, b.Name(), i, batch[i], want[i])
		}
		if got[i] != want[i] {
			if tab.Family() == lpm.IPv4 {
				t.Fatalf("%s: %s: address %#08x: got %d, table says %d", what, b.Name(), p.v4[i], got[i], want[i])
			}
			t.Fatalf("%s: %s: address %#x: got %d, table says %d", what, b.Name(), p.v6[i], got[i], want[i])
		}
	}
}

func kindOf(fam lpm.Family) Kind {
	if fam == lpm.IPv4 {
		return LPM4
	}
	return LPM6
}

// lifeCase loads tab into b, then applies updates in rounds (each synced and
// applied as one Update), comparing after the load and every round. It
// returns how many Updates were whole images and how many bubbles.
func lifeCase(t *testing.T, b Backend, id TableID, tab *lpm.Table, ps []netip.Prefix, ups []lpm.Update, rounds, nprobe int, seed uint64) (fulls, bubbles int) {
	t.Helper()
	u := tab.Mirror().Sync()
	if err := b.Load(id, kindOf(tab.Family()), u.Full); err != nil {
		t.Fatalf("load: %v", err)
	}
	p := newProbe(tab.Family(), ps, nprobe, seed)
	compare(t, b, id, tab, p, "after load")
	per := (len(ups) + rounds - 1) / max(rounds, 1)
	apply := func(r int) {
		u := tab.Mirror().Sync()
		if u.Full != nil {
			fulls++
		}
		bubbles += len(u.Bubbles)
		if err := b.Apply(id, u); err != nil {
			t.Fatalf("round %d: apply: %v", r, err)
		}
	}
	for r := 0; r < rounds && r*per < len(ups); r++ {
		// Odd rounds sync and apply three times before the comparison, so
		// that Updates touching the same words queue up between lookups
		// (the last write must win).
		step := per
		if r%2 == 1 {
			step = max(1, (per+2)/3)
		}
		round := ups[r*per : min((r+1)*per, len(ups))]
		for i, up := range round {
			var err error
			if up.Withdraw {
				err = tab.Delete(up.Prefix)
			} else {
				err = tab.Insert(up.Prefix, up.NextHop)
			}
			if err != nil {
				t.Fatalf("round %d: table update %+v: %v", r, up, err)
			}
			if (i+1)%step == 0 && i+1 < len(round) {
				apply(r)
			}
		}
		apply(r)
		compare(t, b, id, tab, p, "after update round")
	}
	return fulls, bubbles
}

// randomUpdates returns n updates for a table built from routes: withdrawals
// of present prefixes, announcements of new ones, next-hop changes.
func randomUpdates(rng *rand.Rand, fam lpm.Family, routes []lpm.Route, n int) []lpm.Update {
	present := map[netip.Prefix]bool{}
	var list []netip.Prefix
	for _, r := range routes {
		if !present[r.Prefix] {
			present[r.Prefix] = true
			list = append(list, r.Prefix)
		}
	}
	ups := make([]lpm.Update, 0, n)
	for len(ups) < n {
		switch rng.IntN(3) {
		case 0: // withdraw
			if len(list) == 0 {
				continue
			}
			i := rng.IntN(len(list))
			p := list[i]
			list[i] = list[len(list)-1]
			list = list[:len(list)-1]
			delete(present, p)
			ups = append(ups, lpm.Update{Withdraw: true, Prefix: p})
		case 1: // announce a new prefix
			p := randomPrefix(rng, fam)
			if !present[p] {
				present[p] = true
				list = append(list, p)
			}
			ups = append(ups, lpm.Update{Prefix: p, NextHop: 1 + rng.Uint32N(1<<20)})
		default: // change a next hop
			if len(list) == 0 {
				continue
			}
			ups = append(ups, lpm.Update{Prefix: list[rng.IntN(len(list))], NextHop: 1 + rng.Uint32N(1<<20)})
		}
	}
	return ups
}

func prefixesOf(rs []lpm.Route) []netip.Prefix {
	ps := make([]netip.Prefix, len(rs))
	for i, r := range rs {
		ps[i] = r.Prefix
	}
	return ps
}

// testRandomLPM is the random-table case for one family: a table of nroutes
// random routes with little head-room (so some rounds outgrow it and arrive
// as whole images of a new generation), nrounds rounds of updates.
func testRandomLPM(t *testing.T, b Backend, fam lpm.Family, nroutes, nups, rounds int) {
	rng := rand.New(rand.NewPCG(uint64(fam), 42))
	routes := randomRoutes(rng, fam, nroutes)
	tab, err := lpm.Build(fam, routes, lpm.Options{HeadRoom: 0.05, MinFree: 8})
	if err != nil {
		t.Fatal(err)
	}
	ups := randomUpdates(rng, fam, routes, nups)
	fulls, bubbles := lifeCase(t, b, TableID(fam), tab, prefixesOf(routes), ups, rounds, 1<<16, 7)
	t.Logf("%s %v: %d routes, %d updates in %d rounds: %d whole images, %d bubbles; %d bytes on the backend",
		b.Name(), fam, tab.Len(), len(ups), rounds, fulls, bubbles, b.MemoryUsed())
	if fulls == 0 || bubbles == 0 {
		t.Errorf("the case should exercise both whole images and bubbles: %d, %d", fulls, bubbles)
	}
}

// testRealLPM runs the real BGP table of one family with an update trace
// derived from it.
func testRealLPM(t *testing.T, b Backend, fam lpm.Family, ps []netip.Prefix, nups, rounds, nprobe int) {
	routes := make([]lpm.Route, len(ps))
	for i, p := range ps {
		routes[i] = lpm.Route{Prefix: p, NextHop: lpm.SyntheticNextHop(p)}
	}
	tab, err := lpm.Build(fam, routes, lpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ups := lpm.UpdateTrace(ps, nups, 3)
	fulls, bubbles := lifeCase(t, b, 100+TableID(fam), tab, ps, ups, rounds, nprobe, 11)
	t.Logf("%s real %v: %d prefixes, strides %v, %d updates in %d rounds: %d whole images, %d bubbles",
		b.Name(), fam, tab.Len(), tab.Strides(), len(ups), rounds, fulls, bubbles)
}

// testRejects checks that bad calls and bad updates return errors and change
// nothing.
func testRejects(t *testing.T, b Backend) {
	rng := rand.New(rand.NewPCG(9, 9))
	routes := randomRoutes(rng, lpm.IPv4, 2000)
	tab, err := lpm.Build(lpm.IPv4, routes, lpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const id = 77
	full := tab.Mirror().Sync().Full
	if err := b.Load(id, LPM4, full); err != nil {
		t.Fatal(err)
	}
	if err := b.Load(id+1, LPM6, full); !errors.Is(err, ErrKind) {
		t.Errorf("loading an IPv4 image as LPM6: %v", err)
	}
	p := newProbe(lpm.IPv4, prefixesOf(routes), 4096, 1)
	out := make([]uint32, len(p.v4))
	if err := b.LookupLPM4(id+2, p.v4, out); !errors.Is(err, ErrNoTable) {
		t.Errorf("lookup in a missing table: %v", err)
	}
	if err := b.LookupLPM6(id, make([]lpm.Addr6, 4), out); !errors.Is(err, ErrKind) {
		t.Errorf("IPv6 lookup in an IPv4 table: %v", err)
	}
	if err := b.LookupLPM4(id, p.v4, out[:10]); !errors.Is(err, ErrShortOut) {
		t.Errorf("short output: %v", err)
	}
	if err := b.LookupLPM4(id, nil, nil); err != nil {
		t.Errorf("empty lookup: %v", err)
	}
	gen := full.Generation
	lv1 := uint32(len(full.Words[1]))
	l2nodes := uint32(len(full.Words[3])) >> full.Words[0][5]
	good := bubble.Bubble{Region: 1, Offset: 0, Value: 5 << 8}
	bad := []bubble.Update{
		{Generation: gen + 1, Bubbles: []bubble.Bubble{good}},                                            // wrong generation
		{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: 1, Offset: lv1, Value: 0}}},            // outside a region
		{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: 9, Offset: 0, Value: 0}}},              // no such region
		{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: 0, Offset: 2, Value: 3}}},              // meta
		{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: 1, Offset: 1, Value: 1<<8 | 9}}},       // jump past the last level
		{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: 2, Offset: 1, Value: 0<<8 | 1}}},       // jump to its own level
		{Generation: gen, Bubbles: []bubble.Bubble{good, {Region: 1, Offset: 1, Value: l2nodes<<8 | 2}}}, // node past the level's end
		{Generation: gen, Full: bubble.NewImage([]string{"meta"}, []int{3})},                             // corrupt image
	}
	for i, u := range bad {
		if err := b.Apply(id, u); err == nil {
			t.Errorf("bad update %d accepted", i)
		}
		compare(t, b, id, tab, p, "after a rejected update")
	}
	// A good bubble on its own is accepted and seen.
	if err := b.Apply(id, bubble.Update{Generation: gen, Bubbles: []bubble.Bubble{good}}); err != nil {
		t.Fatalf("good bubble: %v", err)
	}
	if err := b.LookupLPM4(id, []uint32{0}, out[:1]); err != nil || out[0] != 5 {
		t.Errorf("after writing next hop 5 into root entry 0: got %d, %v", out[0], err)
	}
}

// batchLPM looks the probe up through a Batch (of a capacity above the
// probe's size) and returns the results.
func batchLPM(t *testing.T, b Backend, id TableID, fam lpm.Family, p probe, what string) []uint32 {
	t.Helper()
	n, kind, width := len(p.v4), LPM4, 1
	if fam == lpm.IPv6 {
		n, kind, width = len(p.v6), LPM6, 4
	}
	bt, err := b.NewBatch(kind, width, n+7)
	if err != nil {
		t.Fatalf("%s: %s: NewBatch: %v", what, b.Name(), err)
	}
	defer bt.Free()
	if fam == lpm.IPv4 {
		copy(bt.Keys, p.v4)
	} else {
		copy(bt.Addrs6(), p.v6)
	}
	bt.N = n
	if err := b.Submit(id, bt); err != nil {
		t.Fatalf("%s: %s: Submit: %v", what, b.Name(), err)
	}
	if err := bt.Wait(); err != nil {
		t.Fatalf("%s: %s: batch: %v", what, b.Name(), err)
	}
	return append([]uint32(nil), bt.Out[:n]...)
}

// testMixedUpdateSizes applies, between two lookups, Updates of a few
// bubbles and Updates of at least bigUpdate (which the CUDA backend orders
// into a chunk of their own, without its lock) in every order, the later
// ones rewriting words of the earlier: the backend must end in the table's
// state, each word with its last value.
func testMixedUpdateSizes(t *testing.T, b Backend, fam lpm.Family) {
	rng := rand.New(rand.NewPCG(uint64(fam), 77))
	routes := randomRoutes(rng, fam, 8000)
	tab, err := lpm.Build(fam, routes, lpm.Options{HeadRoom: 2, MinFree: 4096, GarbageThreshold: 0.95})
	if err != nil {
		t.Fatal(err)
	}
	id := TableID(300 + int(fam))
	u := tab.Mirror().Sync()
	if err := b.Load(id, kindOf(fam), u.Full); err != nil {
		t.Fatalf("load: %v", err)
	}
	p := newProbe(fam, prefixesOf(routes), 1<<15, 5)
	ups := randomUpdates(rng, fam, routes, 40000)
	var last netip.Prefix // the prefix the latest update touched
	step := func(n int) {
		for i := 0; i < n; i++ {
			var up lpm.Update
			if _, ok := tab.Get(last); n == 1 && ok {
				// A small one rewrites words of the latest big one: a new
				// next hop for a prefix it announced (present prefixes
				// stay as randomUpdates expects them).
				up = lpm.Update{Prefix: last, NextHop: 1 + rng.Uint32N(1<<20)}
			} else {
				up, ups = ups[0], ups[1:]
			}
			if up.Withdraw {
				err = tab.Delete(up.Prefix)
			} else {
				err = tab.Insert(up.Prefix, up.NextHop)
			}
			if err != nil {
				t.Fatalf("table update %+v: %v", up, err)
			}
			if !up.Withdraw {
				last = up.Prefix
			}
		}
	}
	var small, big int
	for r, plan := range []string{"sbs", "ssb", "bb", "bss", "sbsbs", "b"} {
		for _, c := range plan {
			n := 1
			if c == 'b' {
				n = 2000
			}
			step(n)
			u := tab.Mirror().Sync()
			switch {
			case u.Full != nil:
				t.Fatalf("plan %d: a whole image: the case needs bubbles", r)
			case c == 'b' && len(u.Bubbles) < bigUpdate:
				t.Fatalf("plan %d: a big update of %d bubbles, want at least %d", r, len(u.Bubbles), bigUpdate)
			case c == 's' && len(u.Bubbles) >= bigUpdate:
				t.Fatalf("plan %d: a small update of %d bubbles", r, len(u.Bubbles))
			case c == 'b':
				big++
			default:
				small++
			}
			if err := b.Apply(id, u); err != nil {
				t.Fatalf("plan %d: apply: %v", r, err)
			}
		}
		compare(t, b, id, tab, p, "after plan "+plan)
	}
	t.Logf("%s %v: %d small and %d big updates (at least %d bubbles) between lookups", b.Name(), fam, small, big, bigUpdate)
}
