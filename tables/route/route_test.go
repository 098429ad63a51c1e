package route

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
)

// TestRandomOperations runs random adds, replacements, deletes and resyncs on
// both families and compares, after every step of a batch, the table and a
// mirror fed only by OnChange with the brute-force reference.
func TestRandomOperations(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{
		{"default", Options{}},
		// No head-room: the tries rebuild all the time, so the mirror
		// receives whole images as well as bubbles.
		{"rebuilds", Options{LPM4: lpm.Options{HeadRoom: -1, MinFree: -1}, LPM6: lpm.Options{HeadRoom: -1, MinFree: -1}}},
		{"reuse-soon", Options{ReuseAfter: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := newRand(1)
			var m mirror
			opts := c.opts
			opts.OnChange = m.apply(t)
			tb, err := New(7, opts)
			mustOK(t, err)
			ref := newReference()
			var addrs []netip.Addr
			for range 400 {
				addrs = append(addrs, randomAddr(rng, true), randomAddr(rng, false))
			}
			for step := range 30 {
				for range 40 {
					randomOp(t, rng, tb, ref)
				}
				if step%10 == 9 {
					resync(t, rng, tb, ref)
				}
				checkTable(t, tb, ref, &m, addrs)
			}
			st := tb.Stats()
			t.Logf("%+v", st)
			if st.Adds == 0 || st.Deletes == 0 || st.Changes == 0 {
				t.Fatalf("the random operations did not exercise every kind: %+v", st)
			}
		})
	}
}

// randomOp applies one random operation to the table and the reference.
func randomOp(t *testing.T, rng *rand.Rand, tb *Table, ref *reference) {
	t.Helper()
	r := randomRoute(rng, tb.ID(), rng.IntN(2) == 0)
	if _, ok := ref.routes[r.Prefix]; ok && rng.IntN(2) == 0 {
		mustOK(t, tb.Delete(r.Prefix))
		delete(ref.routes, r.Prefix)
		return
	}
	mustOK(t, tb.Add(r))
	ref.routes[r.Prefix] = r
}

// resync replaces the table with a random mix of its routes (kept, changed)
// and new ones, leaving some out.
func resync(t *testing.T, rng *rand.Rand, tb *Table, ref *reference) {
	t.Helper()
	next := newReference()
	for p, r := range ref.routes {
		switch rng.IntN(4) {
		case 0: // dropped
		case 1:
			r2 := randomRoute(rng, tb.ID(), p.Addr().Is4())
			r2.Prefix = p
			next.routes[p] = r2
		default:
			next.routes[p] = r
		}
	}
	for range 20 {
		r := randomRoute(rng, tb.ID(), rng.IntN(2) == 0)
		next.routes[r.Prefix] = r
	}
	mustOK(t, tb.Replace(next.sorted()))
	*ref = *next
}

// TestReplaceMinimal checks that Replace changes exactly the routes that
// differ: the counts of adds, changes and deletes, the counters of the routes
// left alone, and no update at all for an identical set.
func TestReplaceMinimal(t *testing.T) {
	rng := newRand(2)
	calls := 0
	tb, err := New(1, Options{OnChange: func(lpm.Family, bubble.Update) { calls++ }})
	mustOK(t, err)
	ref := newReference()
	for len(ref.routes) < 2000 {
		r := randomRoute(rng, 1, rng.IntN(2) == 0)
		ref.routes[r.Prefix] = r
	}
	mustOK(t, tb.Replace(ref.sorted()))
	if st := tb.Stats(); st.Adds != 2000 || st.Deletes != 0 || st.Changes != 0 || calls != 2 {
		t.Fatalf("initial load: %+v, %d OnChange calls (want 2000 adds, one update per family)", st, calls)
	}
	for _, e := range tb.List() {
		e.Count(0, 1, 100)
	}

	before, calls0 := tb.Stats(), calls
	mustOK(t, tb.Replace(ref.sorted()))
	if st := tb.Stats(); st.Adds != before.Adds || st.Changes != before.Changes || st.Deletes != before.Deletes || calls != calls0 || st.Publications != before.Publications {
		t.Fatalf("an identical Replace changed something: %+v -> %+v, OnChange calls %d -> %d", before, st, calls0, calls)
	}

	next := newReference()
	var kept, changed, deleted, added []netip.Prefix
	for p, r := range ref.routes {
		switch {
		case len(deleted) < 100:
			deleted = append(deleted, p)
		case len(changed) < 150:
			r.NextHops = append([]NextHop(nil), r.NextHops...)
			r.NextHops[0].Weight += 10
			next.routes[p] = r
			changed = append(changed, p)
		default:
			next.routes[p] = r
			kept = append(kept, p)
		}
	}
	for len(added) < 70 {
		r := randomRoute(rng, 1, rng.IntN(2) == 0)
		if _, ok := ref.routes[r.Prefix]; !ok && next.routes[r.Prefix].Prefix != r.Prefix {
			next.routes[r.Prefix] = r
			added = append(added, r.Prefix)
		}
	}
	before = tb.Stats()
	mustOK(t, tb.Replace(next.sorted()))
	st := tb.Stats()
	if d := (st.Adds - before.Adds); d != 70 {
		t.Errorf("adds %d, want 70", d)
	}
	if d := (st.Changes - before.Changes); d != 150 {
		t.Errorf("changes %d, want 150", d)
	}
	if d := (st.Deletes - before.Deletes); d != 100 {
		t.Errorf("deletes %d, want 100", d)
	}
	for _, p := range append(kept, changed...) {
		e, _ := tb.Get(p)
		if pk, by, _ := e.Counters(); pk != 1 || by != 100 {
			t.Fatalf("%v: counters %d/%d after the resync, want 1/100 (kept)", p, pk, by)
		}
	}
	for _, p := range added {
		e, _ := tb.Get(p)
		if pk, _, _ := e.Counters(); pk != 0 {
			t.Fatalf("%v: new route starts with %d packets", p, pk)
		}
	}
	checkTable(t, tb, next, nil, nil)
}

// TestReplaceKeepsSlot checks that replacing a route keeps its slot (no trie
// change) and its counters, and those of the next hops that remain.
func TestReplaceKeepsSlot(t *testing.T) {
	var calls int
	tb, err := New(0, Options{OnChange: func(lpm.Family, bubble.Update) { calls++ }})
	mustOK(t, err)
	p := netip.MustParsePrefix("10.0.0.0/8")
	a, b := NextHop{Gateway: netip.MustParseAddr("192.0.2.1"), Port: 1, Weight: 1}, NextHop{Gateway: netip.MustParseAddr("192.0.2.2"), Port: 2, Weight: 1}
	mustOK(t, tb.Add(Route{Prefix: p, NextHops: []NextHop{a, b}, Source: SourceStatic}))
	e1, _ := tb.Get(p)
	e1.Count(0, 1, 10)
	e1.Count(1, 2, 20)
	calls0 := calls
	c := NextHop{Gateway: netip.MustParseAddr("192.0.2.3"), Port: 3, Weight: 2}
	mustOK(t, tb.Add(Route{Prefix: p, NextHops: []NextHop{c, b}, Source: SourceStatic}))
	e2, _ := tb.Get(p)
	if e2 == e1 || e2.Slot() != e1.Slot() || calls != calls0 {
		t.Fatalf("replace: entry %p slot %d -> %p slot %d, %d image updates (want a new entry, same slot, none)", e1, e1.Slot(), e2, e2.Slot(), calls-calls0)
	}
	if tb.Entry(e1.Slot()) != e2 {
		t.Fatal("the slot does not name the new entry")
	}
	pk, by, nh := e2.Counters()
	if pk != 3 || by != 30 || nh[0].Packets != 0 || nh[1].Packets != 2 || nh[1].Bytes != 20 {
		t.Fatalf("counters after replace: %d/%d %+v", pk, by, nh)
	}
	// The old entry, still held by a datapath, counts into the same route.
	e1.Count(1, 1, 1)
	if pk, _, nh := e2.Counters(); pk != 4 || nh[1].Packets != 3 {
		t.Fatalf("counts through the old entry are lost: %d %+v", pk, nh)
	}
}

// TestSlotReuse checks that a deleted route's slot keeps naming the deleted
// entry and is handed out again only after ReuseAfter publications.
func TestSlotReuse(t *testing.T) {
	tb, err := New(0, Options{ReuseAfter: 3})
	mustOK(t, err)
	route := func(s string) Route {
		return Route{Prefix: netip.MustParsePrefix(s), NextHops: []NextHop{{Port: 1, Weight: 1}}, Source: SourceKernel}
	}
	mustOK(t, tb.Add(route("10.0.0.0/8")))
	old, _ := tb.Get(netip.MustParsePrefix("10.0.0.0/8"))
	mustOK(t, tb.Delete(old.Prefix))
	if tb.Entry(old.Slot()) != old {
		t.Fatal("a deleted route's slot no longer names it")
	}
	if _, ok := tb.Lookup(netip.MustParseAddr("10.1.2.3")); ok {
		t.Fatal("the deleted route still matches")
	}
	var slots []uint32
	for i := range 5 {
		mustOK(t, tb.Add(route(fmt.Sprintf("11.%d.0.0/16", i))))
		e, _ := tb.Get(netip.MustParsePrefix(fmt.Sprintf("11.%d.0.0/16", i)))
		slots = append(slots, e.Slot())
	}
	// Publications after the delete: the adds of 11.0 and 11.1 (2 < 3), so
	// 11.2's add (the third) is the first that may take the held slot.
	for i, s := range slots {
		if (s == old.Slot()) != (i == 3) {
			t.Fatalf("slots %v: the deleted route's slot %d must be reused by the 4th add exactly", slots, old.Slot())
		}
	}
}

// TestValidation checks that every invalid route, from Add, Replace and
// Delete, is refused with ErrInvalid and leaves the table as it was.
func TestValidation(t *testing.T) {
	calls := 0
	tb, err := New(5, Options{PortOK: func(p uint32) bool { return p <= 10 }, OnChange: func(lpm.Family, bubble.Update) { calls++ }})
	mustOK(t, err)
	gw4, gw6 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")
	good := Route{Table: 5, Prefix: netip.MustParsePrefix("10.0.0.0/8"), NextHops: []NextHop{{Gateway: gw4, Port: 1, Weight: 1}}, Source: SourceStatic}
	mustOK(t, tb.Add(good))
	mustOK(t, tb.Add(Route{Table: 5, Prefix: netip.MustParsePrefix("2001:db8::/32"), NextHops: []NextHop{{Gateway: gw6, Port: 2, Weight: 1}}, Source: SourceKernel}))

	with := func(f func(r *Route)) Route {
		r := good.Clone()
		r.Prefix = netip.MustParsePrefix("10.1.0.0/16")
		f(&r)
		return r
	}
	bad := map[string]Route{
		"other table":        with(func(r *Route) { r.Table = 6 }),
		"invalid prefix":     with(func(r *Route) { r.Prefix = netip.Prefix{} }),
		"host bits":          with(func(r *Route) { r.Prefix = netip.MustParsePrefix("10.1.2.3/16") }),
		"zone":               with(func(r *Route) { r.Prefix = netip.PrefixFrom(netip.MustParseAddr("fe80::%eth0"), 64) }),
		"no next hop":        with(func(r *Route) { r.NextHops = nil }),
		"too many":           with(func(r *Route) { r.NextHops = make([]NextHop, MaxNextHops+1) }),
		"family":             with(func(r *Route) { r.NextHops[0].Gateway = gw6 }),
		"4in6 gateway":       with(func(r *Route) { r.NextHops[0].Gateway = netip.MustParseAddr("::ffff:192.0.2.1") }),
		"unspecified":        with(func(r *Route) { r.NextHops[0].Gateway = netip.IPv4Unspecified() }),
		"multicast":          with(func(r *Route) { r.NextHops[0].Gateway = netip.MustParseAddr("224.0.0.1") }),
		"gateway zone":       with(func(r *Route) { r.NextHops[0].Gateway = netip.MustParseAddr("fe80::1%eth0") }),
		"port 0":             with(func(r *Route) { r.NextHops[0].Port = 0 }),
		"port beyond max":    with(func(r *Route) { r.NextHops[0].Port = MaxPort + 1 }),
		"unknown port":       with(func(r *Route) { r.NextHops[0].Port = 11 }),
		"weight 0":           with(func(r *Route) { r.NextHops[0].Weight = 0 }),
		"weight too large":   with(func(r *Route) { r.NextHops[0].Weight = MaxWeight + 1 }),
		"duplicate next hop": with(func(r *Route) { r.NextHops = append(r.NextHops, r.NextHops[0]) }),
		"unknown source":     with(func(r *Route) { r.Source = "bgp" }),
		"no source":          with(func(r *Route) { r.Source = "" }),
	}
	snap := func() (string, Stats) {
		s := fmt.Sprint(tb.Routes())
		v4, v6 := tb.LPM(lpm.IPv4).Mirror(), tb.LPM(lpm.IPv6).Mirror()
		st := tb.Stats()
		st.Rejected = 0
		return s + fmt.Sprint(v4.Pending(), v6.Pending(), v4.Image().Generation, v6.Image().Generation, v4.Writes, v6.Writes), st
	}
	s0, st0 := snap()
	calls0 := calls
	for name, r := range bad {
		err := tb.Add(r)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Add: %v, want ErrInvalid", name, err)
		}
		t.Logf("%s: %v", name, err)
		err = tb.Replace([]Route{good, r})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Replace: %v, want ErrInvalid", name, err)
		}
	}
	if err := tb.Replace([]Route{good, good}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a prefix given twice: Replace: %v, want ErrInvalid", err)
	}
	for _, p := range []netip.Prefix{{}, netip.MustParsePrefix("10.1.2.3/8")} {
		if err := tb.Delete(p); !errors.Is(err, ErrInvalid) {
			t.Errorf("Delete(%v): %v, want ErrInvalid", p, err)
		}
	}
	if err := tb.Delete(netip.MustParsePrefix("10.2.0.0/16")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Delete of an absent prefix: %v, want ErrNotFound", err)
	}
	if s, st := snap(); s != s0 || st != st0 || calls != calls0 {
		t.Fatalf("rejected input changed the table:\n%s %+v\n%s %+v\nOnChange calls %d -> %d", s0, st0, s, st, calls0, calls)
	}
	if st := tb.Stats(); st.Rejected != uint64(2*len(bad)+3) {
		t.Errorf("Rejected = %d, want %d", st.Rejected, 2*len(bad)+3)
	}
}

// TestPick checks ECMP: the same hash picks the same next hop, and the split
// follows the weights (statistically, generous bounds), for random hashes
// and for consecutive ones.
func TestPick(t *testing.T) {
	tb, err := New(0, Options{})
	mustOK(t, err)
	var hs []NextHop
	weights := []uint32{1, 2, 3, 10}
	for i, w := range weights {
		hs = append(hs, NextHop{Gateway: netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), Port: 1, Weight: w})
	}
	mustOK(t, tb.Add(Route{Prefix: netip.MustParsePrefix("0.0.0.0/0"), NextHops: hs, Source: SourceKernel}))
	e, ok := tb.Lookup(netip.MustParseAddr("8.8.8.8"))
	if !ok {
		t.Fatal("no route")
	}
	rng := newRand(3)
	for _, seq := range []bool{false, true} {
		counts := make([]int, len(hs))
		const n = 400000
		for i := range n {
			h := uint32(i)
			if !seq {
				h = rng.Uint32()
			}
			nh, idx := e.Pick(h)
			if nh != hs[idx] {
				t.Fatalf("Pick returned %v with index %d", nh, idx)
			}
			if nh2, idx2 := e.Pick(h); idx2 != idx || nh2 != nh {
				t.Fatalf("Pick(%d) not stable: %d then %d", h, idx, idx2)
			}
			counts[idx]++
		}
		for i, w := range weights {
			want := float64(n) * float64(w) / 16
			if math.Abs(float64(counts[i])-want) > 0.05*want+50 {
				t.Errorf("sequential %v: next hop %d (weight %d) took %d of %d, want about %.0f", seq, i, w, counts[i], n, want)
			}
		}
	}
	// One next hop: always it.
	mustOK(t, tb.Add(Route{Prefix: netip.MustParsePrefix("10.0.0.0/8"), NextHops: hs[:1], Source: SourceKernel}))
	e, _ = tb.Lookup(netip.MustParseAddr("10.0.0.1"))
	for h := range uint32(1000) {
		if _, i := e.Pick(h * 7919); i != 0 {
			t.Fatal("a single next hop was not picked")
		}
	}
}

// TestConcurrentReaders runs lookups, Entry, counting and listing in several
// goroutines while one writer adds, replaces, deletes and resyncs (run with
// -race). Every entry a reader gets must cover its address and be a route
// the writer installed at some point.
func TestConcurrentReaders(t *testing.T) {
	tb, err := New(0, Options{ReuseAfter: 4})
	mustOK(t, err)
	var installed sync.Map // *Entry of every route ever added -> true (checked by Route)
	rng := newRand(4)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := newRand(uint64(10 + g))
			leaves := make([]uint32, 64)
			out := make([]*Entry, 64)
			for n := 0; !stop.Load() || n < 1000; n++ {
				a := randomAddr(r, n%2 == 0)
				if e, ok := tb.Lookup(a); ok {
					if !e.Covers(a) {
						errs <- fmt.Errorf("Lookup(%v) returned %v", a, e.Route)
						return
					}
					if _, ok := installed.Load(e.Prefix); !ok {
						errs <- fmt.Errorf("Lookup(%v) returned a route never installed: %v", a, e.Route)
						return
					}
					_, i := e.Pick(r.Uint32())
					e.Count(i, 1, 64)
					e.Counters()
					leaves[n%64] = e.Slot()
				}
				if n%64 == 63 {
					tb.Entries(leaves, out)
					for i, e := range out {
						if leaves[i] == 0 && e == nil {
							continue
						}
						if e == nil || e.Slot() != leaves[i] {
							errs <- fmt.Errorf("Entries: slot %d names %v", leaves[i], e)
							return
						}
					}
				}
				if n%500 == 0 {
					tb.List()
					tb.Stats()
				}
			}
		}()
	}
	ref := newReference()
	for i := range 3000 {
		r := randomRoute(rng, 0, rng.IntN(2) == 0)
		installed.Store(r.Prefix, true)
		if _, ok := ref.routes[r.Prefix]; ok && rng.IntN(2) == 0 {
			mustOK(t, tb.Delete(r.Prefix))
			delete(ref.routes, r.Prefix)
		} else {
			mustOK(t, tb.Add(r))
			ref.routes[r.Prefix] = r
		}
		if i%1000 == 999 {
			mustOK(t, tb.Replace(ref.sorted()[:len(ref.routes)/2]))
			ref = newReference()
			for _, r := range tb.Routes() {
				ref.routes[r.Prefix] = r
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	checkTable(t, tb, ref, nil, nil)
}

// TestAttach checks that a consumer attached to a table already holding
// routes, loading Attach's images and then applying the hook's updates,
// follows the table exactly.
func TestAttach(t *testing.T) {
	rng := newRand(5)
	tb, err := New(3, Options{})
	mustOK(t, err)
	ref := newReference()
	for range 300 {
		randomOp(t, rng, tb, ref)
	}
	var m mirror
	m.im[0], m.im[1] = tb.Attach(m.apply(t))
	var addrs []netip.Addr
	for range 300 {
		addrs = append(addrs, randomAddr(rng, true), randomAddr(rng, false))
	}
	checkTable(t, tb, ref, &m, addrs)
	for range 300 {
		randomOp(t, rng, tb, ref)
	}
	resync(t, rng, tb, ref)
	checkTable(t, tb, ref, &m, addrs)
	// Detached, the consumer gets nothing; Sync hands out what it missed.
	tb.Attach(nil)
	for range 50 {
		randomOp(t, rng, tb, ref)
	}
	for _, fam := range []lpm.Family{lpm.IPv4, lpm.IPv6} {
		u := tb.Sync(fam)
		m.apply(t)(fam, u)
	}
	checkTable(t, tb, ref, &m, addrs)
}
