package lpm

import (
	"errors"
	"math"
	"net/netip"
	"testing"
)

// tableSnapshot is what a failed call must leave as it was, beside the
// image (compared with a clone).
type tableSnapshot struct {
	pending int
	len     int
	answers []uint32
}

func snapshot(tb *Table, probes []netip.Addr) tableSnapshot {
	s := tableSnapshot{pending: tb.Mirror().Pending(), len: tb.Len()}
	for _, a := range probes {
		nh, _ := tb.Lookup(a)
		s.answers = append(s.answers, nh)
	}
	return s
}

// TestInvalidInputsChangeNothing: every invalid insert or delete returns an
// error of the right kind and leaves image, bubbles and lookups as they were.
func TestInvalidInputsChangeNothing(t *testing.T) {
	for _, fam := range []Family{IPv4, IPv6} {
		g := newPrefixGen(fam, 5)
		var routes []Route
		for i := 0; i < 50; i++ {
			routes = append(routes, Route{g.prefix(), uint32(i + 1)})
		}
		tb, err := Build(fam, routes, Options{})
		mustOK(t, err)
		tb.Mirror().Sync()
		mustOK(t, tb.Insert(g.prefix(), 3)) // leave a bubble pending
		probes := g.probes(keysOf(map[netip.Prefix]uint32{routes[0].Prefix: 1}))
		before := snapshot(tb, probes)
		imgBefore := tb.Mirror().Image().Clone()

		other := netip.MustParsePrefix("10.0.0.0/8")
		hostBits := netip.MustParsePrefix("10.1.0.0/8")
		if fam == IPv4 {
			other = netip.MustParsePrefix("2001:db8::/32")
			hostBits = netip.PrefixFrom(netip.MustParseAddr("10.1.0.0"), 8)
		} else {
			hostBits = netip.PrefixFrom(netip.MustParseAddr("2001:db8::1"), 32)
		}
		absent := netip.PrefixFrom(g.anchors[0], fam.Width())
		if _, ok := tb.Get(absent); ok {
			mustOK(t, tb.Delete(absent))
			before, imgBefore = snapshot(tb, probes), tb.Mirror().Image().Clone()
		}
		valid := routes[0].Prefix
		cases := []struct {
			name string
			err  error
			call func() error
		}{
			{"insert invalid prefix", ErrInvalidPrefix, func() error { return tb.Insert(netip.Prefix{}, 1) }},
			{"insert other family", ErrFamily, func() error { return tb.Insert(other, 1) }},
			{"insert host bits", ErrInvalidPrefix, func() error { return tb.Insert(hostBits, 1) }},
			{"insert next hop 0", ErrNextHop, func() error { return tb.Insert(valid, 0) }},
			{"insert next hop 2^24", ErrNextHop, func() error { return tb.Insert(valid, 1<<24) }},
			{"delete invalid prefix", ErrInvalidPrefix, func() error { return tb.Delete(netip.Prefix{}) }},
			{"delete other family", ErrFamily, func() error { return tb.Delete(other) }},
			{"delete host bits", ErrInvalidPrefix, func() error { return tb.Delete(hostBits) }},
			{"delete absent", ErrNotFound, func() error { return tb.Delete(absent) }},
		}
		for _, c := range cases {
			err := c.call()
			if !errors.Is(err, c.err) {
				t.Errorf("%v %s: error %v, want %v", fam, c.name, err, c.err)
			}
			if d := tb.Mirror().Image().Diff(imgBefore); d != "" {
				t.Fatalf("%v %s changed the image: %s", fam, c.name, d)
			}
			after := snapshot(tb, probes)
			if after.pending != before.pending || after.len != before.len {
				t.Fatalf("%v %s changed the table: %+v -> %+v", fam, c.name, before, after)
			}
			for i := range after.answers {
				if after.answers[i] != before.answers[i] {
					t.Fatalf("%v %s changed a lookup", fam, c.name)
				}
			}
		}
	}
}

// TestBuildRejects: bad routes and bad options fail the build.
func TestBuildRejects(t *testing.T) {
	p4 := netip.MustParsePrefix("10.0.0.0/8")
	p6 := netip.MustParsePrefix("2001:db8::/32")
	cases := []struct {
		name   string
		fam    Family
		routes []Route
		opts   Options
		err    error
	}{
		{"family 0", 0, nil, Options{}, ErrFamily},
		{"other family", IPv4, []Route{{p6, 1}}, Options{}, ErrFamily},
		{"host bits", IPv4, []Route{{netip.PrefixFrom(netip.MustParseAddr("10.0.0.1"), 8), 1}}, Options{}, ErrInvalidPrefix},
		{"next hop 0", IPv6, []Route{{p6, 0}}, Options{}, ErrNextHop},
		{"strides sum", IPv4, nil, Options{Strides: []int{16, 8}}, ErrOptions},
		{"stride too wide", IPv4, nil, Options{Strides: []int{25, 7}}, ErrOptions},
		{"stride over MaxStride", IPv4, nil, Options{Strides: []int{16, 16}, MaxStride: 8}, ErrOptions},
		{"levels vs strides", IPv4, nil, Options{Strides: []int{16, 16}, Levels: 3}, ErrOptions},
		{"too few levels", IPv6, nil, Options{Levels: 5}, ErrOptions},
		{"too many levels", IPv4, nil, Options{Levels: 33}, ErrOptions},
		{"MaxStride", IPv4, nil, Options{MaxStride: 25}, ErrOptions},
		{"HeadRoom NaN", IPv4, nil, Options{HeadRoom: math.NaN()}, ErrOptions},
		{"threshold Inf", IPv4, nil, Options{GarbageThreshold: math.Inf(1)}, ErrOptions},
		{"too large", IPv4, []Route{{p4, 1}, {netip.MustParsePrefix("10.1.2.3/32"), 2}}, Options{Strides: []int{8, 24}, MinFree: 100}, ErrTooLarge},
	}
	for _, c := range cases {
		if _, err := Build(c.fam, c.routes, c.opts); !errors.Is(err, c.err) {
			t.Errorf("%s: error %v, want %v", c.name, err, c.err)
		}
	}
}

// TestInsertRebuildFailureChangesNothing: when an insert needs a rebuild
// that cannot be done, it fails and the table is as before.
func TestInsertRebuildFailureChangesNothing(t *testing.T) {
	defer func(old int) { maxLevelWords = old }(maxLevelWords)
	maxLevelWords = 1 << 16 // a level may hold one node of 2^16 words
	tb, err := Build(IPv4, nil, Options{Strides: []int{16, 16}, MinFree: 1, HeadRoom: -1})
	mustOK(t, err)
	// Level 1 has room for its one node; a prefix under another /16 needs a
	// second one, and the rebuild's level would exceed the limit.
	mustOK(t, tb.Insert(netip.MustParsePrefix("10.1.1.0/24"), 1))
	img := tb.Mirror().Image().Clone()
	err = tb.Insert(netip.MustParsePrefix("11.1.1.0/24"), 2)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error %v, want ErrTooLarge", err)
	}
	if d := tb.Mirror().Image().Diff(img); d != "" || tb.Len() != 1 {
		t.Fatalf("failed insert changed the table: %s, Len %d", d, tb.Len())
	}
	if _, ok := tb.Get(netip.MustParsePrefix("11.1.1.0/24")); ok {
		t.Fatalf("failed insert left its prefix in the set")
	}
}

// TestStridesAreOptimal compares Algorithm 3 with an exhaustive search on
// small widths: same widest level, then same total transactions.
func TestStridesAreOptimal(t *testing.T) {
	g := newPrefixGen(IPv4, 1)
	for trial := 0; trial < 40; trial++ {
		width := 6 + g.rng.IntN(10)
		c := strideCost{capacity: make([]uint64, width)}
		c.capacity[0] = 1
		for b := 1; b < width; b++ {
			c.capacity[b] = uint64(g.rng.IntN(1 << g.rng.IntN(12)))
		}
		for levels := 1; levels <= 5; levels++ {
			for _, ms := range []int{2, 4, 24} {
				got, err := chooseStrides(width, levels, ms, c)
				bestMax, bestSum, ok := exhaustive(width, levels, ms, c)
				if !ok {
					if err == nil {
						t.Fatalf("width %d L %d ms %d: got %v, exhaustive finds none", width, levels, ms, got)
					}
					continue
				}
				mustOK(t, err)
				gm, gs := layoutCost(got, c)
				if sum(got) != width || len(got) != levels || gm != bestMax || gs != bestSum {
					t.Fatalf("width %d L %d ms %d: %v costs (%d, %d), best (%d, %d)", width, levels, ms, got, gm, gs, bestMax, bestSum)
				}
			}
		}
	}
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func layoutCost(strides []int, c strideCost) (uint64, uint64) {
	var mx, total uint64
	off := 0
	for _, s := range strides {
		mx = max(mx, c.bytes(off, s))
		total += c.transactions(off, s)
		off += s
	}
	return mx, total
}

// exhaustive tries every composition of width into levels parts.
func exhaustive(width, levels, ms int, c strideCost) (uint64, uint64, bool) {
	bestMax, bestSum, found := uint64(math.MaxUint64), uint64(math.MaxUint64), false
	var rec func(prefix []int, left int)
	rec = func(prefix []int, left int) {
		if len(prefix) == levels {
			if left != 0 {
				return
			}
			m, s := layoutCost(prefix, c)
			if m < bestMax || (m == bestMax && s < bestSum) {
				bestMax, bestSum, found = m, s, true
			}
			return
		}
		for s := 1; s <= min(ms, left); s++ {
			rec(append(prefix, s), left-s)
		}
	}
	rec(nil, width)
	return bestMax, bestSum, found
}

// TestNodeCounts checks D[b] on a small hand-made set.
func TestNodeCounts(t *testing.T) {
	var keys []pkey
	for _, s := range []string{"10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "10.2.0.0/16", "192.168.0.0/16", "0.0.0.0/0"} {
		k, err := keyOf(IPv4, netip.MustParsePrefix(s))
		mustOK(t, err)
		keys = append(keys, k)
	}
	sortByAddr(keys)
	d := nodeCounts(32, keys)
	// b=0: every prefix but /0 is longer -> 1 truncation; b=8: 10.1/16,
	// 10.1.2/24, 10.2/16, 192.168/16 -> {10, 192}; b=16: 10.1.2/24 -> 1.
	want := map[int]int{0: 1, 1: 2, 8: 2, 9: 2, 15: 3, 16: 1, 23: 1, 24: 0, 31: 0}
	for b, n := range want {
		if d[b] != n {
			t.Errorf("D[%d] = %d, want %d", b, d[b], n)
		}
	}
}
