//go:build cuda

package gpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// randomPubsub makes subscriptions and events over names of every type,
// with every operator that applies, numbers as integers and floats, and
// events with unknown names, repeated names and values of another class.
func randomPubsub(rng *rand.Rand, ports, filters, maxCons, nev int) ([]pubsub.Spec, []pubsub.Event) {
	const names = 12
	words := []string{"", "a", "ab", "abc", "b", "ba", "abcd", "xyz", "zzzz", "hello", "help", "lo", "abcdefgh", "abcdefghij", "helloworld", "bcdefghi"}
	typeOf := func(n int) pubsub.Type {
		return []pubsub.Type{pubsub.TypeInt, pubsub.TypeFloat, pubsub.TypeString, pubsub.TypeBool}[n%4]
	}
	value := func(n int, other bool) pubsub.Value {
		t := typeOf(n)
		if other {
			t = typeOf(rng.IntN(4))
		}
		switch t {
		case pubsub.TypeInt:
			return pubsub.Int(int64(rng.IntN(7)) - 3)
		case pubsub.TypeFloat:
			return pubsub.Float(float64(rng.IntN(13)-6) / 2)
		case pubsub.TypeString:
			return pubsub.Str(words[rng.IntN(len(words))])
		}
		return pubsub.Bool(rng.IntN(2) == 0)
	}
	var specs []pubsub.Spec
	for f := 0; f < filters; f++ {
		k := 1 + rng.IntN(maxCons)
		var flt pubsub.Filter
		for i := 0; i < k; i++ {
			n := rng.IntN(names)
			v := value(n, false)
			if v.Type == pubsub.TypeInt && rng.IntN(2) == 0 {
				v = pubsub.Float(float64(v.Int) + 0.5*float64(rng.IntN(2)))
			}
			var op pubsub.Op
			for {
				op = pubsub.Op(rng.IntN(9))
				if op.Applies(v.Type) {
					break
				}
			}
			flt = append(flt, pubsub.Constraint{Name: fmt.Sprintf("n%d", n), Op: op, Value: v})
		}
		specs = append(specs, pubsub.Spec{Port: uint32(1 + rng.IntN(ports)), Filters: []pubsub.Filter{flt}})
	}
	evs := make([]pubsub.Event, nev)
	for i := range evs {
		for _, n := range rng.Perm(names)[:1+rng.IntN(6)] {
			evs[i].Attrs = append(evs[i].Attrs, pubsub.Attr{Name: fmt.Sprintf("n%d", n), Value: value(n, rng.IntN(8) == 0)})
		}
		if rng.IntN(10) == 0 {
			evs[i].Attrs = append(evs[i].Attrs, pubsub.Attr{Name: "unknown", Value: pubsub.Int(1)})
		}
	}
	return specs, evs
}

func pubsubTable(t *testing.T, specs []pubsub.Spec) *pubsub.Table {
	tb := pubsub.New()
	if _, err := tb.AddSpecs(specs); err != nil {
		t.Fatal(err)
	}
	return tb
}

func comparePubsub(t *testing.T, name string, m *CUDAMatcher, tb *pubsub.Table, evs []pubsub.Event) {
	t.Helper()
	got, err := m.Match(evs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := tb.MatchBatch(evs, nil)
	matched := 0
	for i := range evs {
		if !slices.Equal(got[i], want[i]) && len(got[i])+len(want[i]) > 0 {
			t.Fatalf("%s: event %d %v: gpu %v, cpu %v", name, i, evs[i].String(), got[i], want[i])
		}
		if len(want[i]) > 0 {
			matched++
		}
	}
	t.Logf("%s: %d events equal (%d match some port); %s", name, len(evs), matched, m.Describe())
}

// TestCUDAPubsubRandom compares the GPU's answers with the CPU matcher's on
// random subscriptions and events (filters of up to 5 and up to 40
// constraints, batches of one event, several blocks each, and large ones),
// and checks the deciding slots: one per delivery, each credited to a
// subscription of the port (pubsub.Table.CountSlots).
func TestCUDAPubsubRandom(t *testing.T) {
	c := newTestCUDA(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, maxCons := range []int{5, 40} {
		specs, evs := randomPubsub(rng, 70, 3000, maxCons, 5000)
		tb := pubsubTable(t, specs)
		m, err := c.PubsubMatcher(tb.Layout(), 2)
		if err != nil {
			t.Fatal(err)
		}
		comparePubsub(t, fmt.Sprintf("random maxCons=%d", maxCons), m, tb, evs)
		for i := 0; i < 50; i++ {
			got, err := m.Match(evs[i:i+1], nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := tb.Match(&evs[i]); !slices.Equal(got[0], want) && len(got[0])+len(want) > 0 {
				t.Fatalf("single event %d: gpu %v, cpu %v", i, got[0], want)
			}
		}
		before := matchSum(tb)
		got, slots, complete, err := m.MatchSlots(evs, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		delivered := 0
		for _, ps := range got {
			delivered += len(ps)
		}
		// Dozens of deliveries per event here: a batch brings back at
		// most hitCap slots and says whether they are all there.
		if len(slots) > delivered || complete != (len(slots) == delivered) || (delivered > 0 && len(slots) == 0) {
			t.Fatalf("%d deciding slots (complete %v) for %d deliveries", len(slots), complete, delivered)
		}
		// One event at a time (at most 70 deliveries, fewer than a
		// batch of one brings back): every slot comes back.
		slots, delivered = slots[:0], 0
		for i := 0; i < 20; i++ {
			var ok bool
			if got, slots, ok, err = m.MatchSlots(evs[i:i+1], got, slots); err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Fatalf("event %d: slots incomplete", i)
			}
			delivered += len(got[0])
		}
		if len(slots) != delivered {
			t.Fatalf("20 events: %d deciding slots for %d deliveries", len(slots), delivered)
		}
		tb.CountSlots(slots)
		if d := matchSum(tb) - before; d != uint64(delivered) {
			t.Errorf("counters rose by %d for %d deliveries", d, delivered)
		}
		m.Close()
	}
}

// TestCUDAPubsubWideEvents compares the GPU with the CPU on events of more
// attributes than the kernel keeps in shared memory (read from device
// memory instead) and on events whose strings exceed its shared string
// buffer, in batches of one and of many.
func TestCUDAPubsubWideEvents(t *testing.T) {
	c := newTestCUDA(t)
	rng := rand.New(rand.NewPCG(31, 32))
	const names = 120
	long := func() string {
		b := make([]byte, 200+rng.IntN(56))
		for i := range b {
			b[i] = "abc"[rng.IntN(3)]
		}
		return string(b)
	}
	value := func(n int) pubsub.Value {
		if n%2 == 0 {
			return pubsub.Int(int64(rng.IntN(5)))
		}
		if rng.IntN(3) == 0 {
			return pubsub.Str(long())
		}
		return pubsub.Str([]string{"a", "ab", "abc", "b"}[rng.IntN(4)])
	}
	var specs []pubsub.Spec
	for f := 0; f < 4000; f++ {
		var flt pubsub.Filter
		for _, n := range rng.Perm(names)[:1+rng.IntN(3)] {
			v := value(n)
			op := []pubsub.Op{pubsub.OpEq, pubsub.OpNe, pubsub.OpLt, pubsub.OpGe}[rng.IntN(4)]
			if v.Type == pubsub.TypeString && rng.IntN(2) == 0 {
				op, v = []pubsub.Op{pubsub.OpPrefix, pubsub.OpSuffix, pubsub.OpContains}[rng.IntN(3)], pubsub.Str(v.Str[:min(len(v.Str), 2)])
			}
			flt = append(flt, pubsub.Constraint{Name: fmt.Sprintf("w%d", n), Op: op, Value: v})
		}
		specs = append(specs, pubsub.Spec{Port: uint32(1 + rng.IntN(40)), Filters: []pubsub.Filter{flt}})
	}
	evs := make([]pubsub.Event, 600)
	for i := range evs {
		k := []int{3, 20, 40, 64, 65, names}[i%6] // 64: ATTR_CAP
		for _, n := range rng.Perm(names)[:k] {
			evs[i].Attrs = append(evs[i].Attrs, pubsub.Attr{Name: fmt.Sprintf("w%d", n), Value: value(n)})
		}
	}
	tb := pubsubTable(t, specs)
	m, err := c.PubsubMatcher(tb.Layout(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	comparePubsub(t, "wide events", m, tb, evs)
	for i := 0; i < 40; i++ {
		got, err := m.Match(evs[i:i+1], nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := tb.Match(&evs[i]); !slices.Equal(got[0], want) && len(got[0])+len(want) > 0 {
			t.Fatalf("single wide event %d: gpu %v, cpu %v", i, got[0], want)
		}
	}
}

func matchSum(tb *pubsub.Table) uint64 {
	var n uint64
	for _, s := range tb.List() {
		n += s.Matches
	}
	return n
}

// TestCUDAPubsubScenario compares the answers on CCM's default scenario
// (10 interfaces, about 1M constraints) and benchmarks it: events/s in
// batches of 16K and 1K (4 streams, 8 batches in flight; kernel only and
// end to end), single-event latency, and the CPU matcher on one core.
func TestCUDAPubsubScenario(t *testing.T) {
	c := newTestCUDA(t)
	sc := pubsub.DefaultScenario()
	tb := pubsubTable(t, sc.Subscriptions())
	m, err := c.PubsubMatcher(tb.Layout(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	evs := sc.Events(20000)
	comparePubsub(t, "CCM default scenario", m, tb, evs)
	got, slots, complete, err := m.MatchSlots(evs, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	delivered := 0
	for _, ps := range got {
		delivered += len(ps)
	}
	if !complete || len(slots) != delivered {
		t.Errorf("%d deciding slots (complete %v) for %d deliveries", len(slots), complete, delivered)
	}
	if testing.Short() {
		return
	}
	t0 := time.Now()
	tb.MatchBatch(evs[:2000], nil)
	cpu := 2000 / time.Since(t0).Seconds()
	for _, per := range []int{16 << 10, 1 << 10} {
		const nb = 8
		var bs []*EventBatch
		for i := 0; i < nb; i++ {
			b, err := m.NewEventBatch(per, 8*per, 64*per)
			if err != nil {
				t.Fatal(err)
			}
			defer m.FreeEventBatch(b)
			if k := EncodeEvents(b, m.Names(), evs[(i*per)%len(evs):][:min(per, len(evs)-(i*per)%len(evs))]); k == 0 {
				t.Fatal("nothing encoded")
			}
			bs = append(bs, b)
		}
		if err := m.Submit(bs[0]); err != nil {
			t.Fatal(err)
		}
		if err := m.Wait(bs[0]); err != nil {
			t.Fatal(err)
		}
		ms, err := m.KernelTime(bs[0], 10)
		if err != nil {
			t.Fatal(err)
		}
		rounds := max(2, 200000/(per*nb))
		n := 0
		t0 := time.Now()
		for i := 0; i < rounds*nb; i++ {
			b := bs[i%nb]
			if i >= nb {
				if err := m.Wait(b); err != nil {
					t.Fatal(err)
				}
			}
			if err := m.Submit(b); err != nil {
				t.Fatal(err)
			}
			n += b.N
		}
		for _, b := range bs {
			if err := m.Wait(b); err != nil {
				t.Fatal(err)
			}
		}
		e2e := float64(n) / time.Since(t0).Seconds()
		t.Logf("BENCH pubsub CCM default (%d filters, %d constraints) on %s: batches of %d: kernel %.2f M events/s (%.3f ms per batch), end to end %.2f M events/s; CPU matcher one core %.3f M events/s; GPU/CPU %.0fx",
			tb.Stats().Filters, tb.Stats().Constraints, c.Device(), bs[0].N, float64(bs[0].N)/ms/1e3, ms, e2e/1e6, cpu/1e6, e2e/cpu)
	}
	// Single-event latency: encode, submit, wait, decode.
	b, err := m.NewEventBatch(1, 16, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer m.FreeEventBatch(b)
	var lat []time.Duration
	for i := 0; i < 2000; i++ {
		t0 := time.Now()
		EncodeEvents(b, m.Names(), evs[i:i+1])
		if err := m.Submit(b); err != nil {
			t.Fatal(err)
		}
		if err := m.Wait(b); err != nil {
			t.Fatal(err)
		}
		got, err := DecodePorts(nil, b, m.Ports())
		if err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if want := tb.Match(&evs[i]); !slices.Equal(got[0], want) && len(got[0])+len(want) > 0 {
			t.Fatalf("single event %d: gpu %v, cpu %v", i, got[0], want)
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms1, _ := m.KernelTime(b, 100)
	t.Logf("BENCH pubsub CCM default single event on %s: latency p50 %.1f µs, p99 %.1f µs (encode, copy in, kernel, copy out, decode); kernel alone %.1f µs",
		c.Device(), float64(lat[len(lat)/2].Nanoseconds())/1e3, float64(lat[len(lat)*99/100].Nanoseconds())/1e3, ms1*1e3)
}

// TestCUDAPubsubUpdate keeps the device's layout up to date through the
// table's bubble updates (CUDAMatcher.Update, the path gswitchd takes) over
// rounds of adds and removals, and compares the GPU with the CPU matcher
// after each; at the end a filter of 21 constraints on a new name, and a
// new port.
func TestCUDAPubsubUpdate(t *testing.T) {
	for _, mode := range []string{"live", "eager", "staged", "sync"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(UpdateModeEnv, mode)
			testPubsubUpdate(t)
		})
	}
}

// testPubsubUpdate is TestCUDAPubsubUpdate in the update mode the
// environment selects (the bubbles staged and copied in one call, or a
// synchronous copy per run).
func testPubsubUpdate(t *testing.T) {
	c := newTestCUDA(t)
	rng := rand.New(rand.NewPCG(21, 22))
	specs, evs := randomPubsub(rng, 20, 2000, 5, 3000)
	more, _ := randomPubsub(rng, 20, 200, 5, 0)
	tb := pubsubTable(t, specs)
	dev := pubsub.NewDevice(tb)
	dev.Mirror().Sync()
	m, err := c.PubsubMatcher(dev.Layout(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	full, bubbles := 0, 0
	for round := 0; round < 20; round++ {
		if round%3 != 2 {
			s := more[rng.IntN(len(more))]
			if _, err := tb.Add(s.Port, s.Filters); err != nil {
				t.Fatal(err)
			}
		} else {
			subs := tb.List()
			for i := 0; i < 5; i++ {
				tb.Remove(subs[rng.IntN(len(subs))].ID)
			}
		}
		u := dev.Update(tb)
		if u.Full != nil {
			full++
		} else {
			bubbles += len(u.Bubbles)
		}
		if err := m.Update(u, dev.Layout().Names); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		comparePubsub(t, fmt.Sprintf("update round %d", round), m, tb, evs)
	}
	if bubbles == 0 {
		t.Error("no update went out as bubbles")
	}
	var wide pubsub.Filter
	for i := 0; i < 20; i++ {
		wide = append(wide, pubsub.Constraint{Name: fmt.Sprintf("n%d", i%12), Op: pubsub.OpNe, Value: pubsub.Int(int64(100 + i))})
	}
	wide = append(wide, pubsub.Constraint{Name: "fresh", Op: pubsub.OpNe, Value: pubsub.Float(0.25)})
	if _, err := tb.Add(3, []pubsub.Filter{wide}); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.Add(1234, []pubsub.Filter{{{Name: "n1", Op: pubsub.OpGe, Value: pubsub.Int(-1 << 40)}}}); err != nil {
		t.Fatal(err)
	}
	if err := m.Update(dev.Update(tb), dev.Layout().Names); err != nil {
		t.Fatal(err)
	}
	comparePubsub(t, "after a wide filter with a new name and a new port", m, tb, evs)
	// A stale generation is refused.
	if err := m.Update(bubble.Update{Generation: 99, Bubbles: []bubble.Bubble{{}}}, dev.Layout().Names); err == nil {
		t.Error("bubbles of another generation accepted")
	}
	t.Logf("%d full images, %d bubbles", full, bubbles)
}

// TestCUDAPubsubSmall compares the small-batch path (batches of 1 to
// SmallBatchEvents events, one cgo call, pre-allocated memory) in each mode
// with the CPU matcher, its deciding slots with the deliveries, and its
// answers after bubble updates and a full reload (which drops the path).
func TestCUDAPubsubSmall(t *testing.T) {
	c := newTestCUDA(t)
	rng := rand.New(rand.NewPCG(41, 42))
	nev := 1500
	if testing.Short() { // under compute-sanitizer
		nev = 200
	}
	specs, evs := randomPubsub(rng, 40, 3000, 5, nev)
	more, _ := randomPubsub(rng, 60, 100, 5, 0)
	for _, mode := range []SmallMode{SmallCopy, SmallMapped, SmallFlag, SmallGraph, SmallOff} {
		tb := pubsubTable(t, specs)
		dev := pubsub.NewDevice(tb)
		dev.Mirror().Sync()
		m, err := c.PubsubMatcher(dev.Layout(), 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SetSmallMode(mode); err != nil {
			t.Fatal(err)
		}
		check := func(what string) {
			t.Helper()
			var out [][]uint32
			var slots []uint32
			delivered := 0
			for lo := 0; lo < len(evs); {
				n := min(1+rng.IntN(SmallBatchEvents), len(evs)-lo)
				var ok bool
				before := len(slots)
				if out, slots, ok, err = m.MatchSlots(evs[lo:lo+n], out, slots); err != nil {
					t.Fatalf("%v %s: %v", mode, what, err)
				}
				if len(out) != n {
					t.Fatalf("%v %s: %d answers for %d events", mode, what, len(out), n)
				}
				batch := 0
				for i := range out {
					want := tb.Match(&evs[lo+i])
					if !slices.Equal(out[i], want) && len(out[i])+len(want) > 0 {
						t.Fatalf("%v %s: event %d %v: gpu %v, cpu %v", mode, what, lo+i, evs[lo+i].String(), out[i], want)
					}
					batch += len(want)
				}
				// The deciding slots come back complete up to hitCap(n);
				// past it the matcher says so (its caller counts on the
				// CPU).
				added := len(slots) - before
				switch {
				case ok && added != batch:
					t.Fatalf("%v %s: events %d..%d: %d deciding slots for %d deliveries", mode, what, lo, lo+n, added, batch)
				case !ok && (batch <= hitCap(n) || added > hitCap(n)):
					t.Fatalf("%v %s: events %d..%d: slots incomplete with %d deliveries (%d back, room for %d)", mode, what, lo, lo+n, batch, added, hitCap(n))
				}
				delivered += batch
				lo += n
			}
			if err := m.SmallError(); err != nil {
				t.Fatalf("%v: small-batch path not made: %v", mode, err)
			}
			st := m.SmallTimes()
			if (mode != SmallOff) != (st.Wait > 0) {
				t.Errorf("%v %s: small-batch times %+v", mode, what, st)
			}
			t.Logf("%v %s: %d events, %d deliveries; last small call %+v", mode, what, len(evs), delivered, st)
		}
		check("fresh")
		for i := 0; i < 5; i++ {
			s := more[rng.IntN(len(more))]
			if _, err := tb.Add(s.Port, s.Filters); err != nil {
				t.Fatal(err)
			}
			if err := m.Update(dev.Update(tb), dev.Layout().Names); err != nil {
				t.Fatal(err)
			}
		}
		check("after updates")
		if err := m.Load(tb.Layout()); err != nil {
			t.Fatal(err)
		}
		check("after a reload")
		if err := m.SetSmallSplits(3); err != nil {
			t.Fatal(err)
		}
		check("3 blocks per event")
		m.Close()
	}
}

// TestCUDAPubsubLiveChurn matches batches (two in flight, over the
// matcher's streams) while another goroutine changes the subscriptions and
// applies each change as a live update (no pause of the matching: bubble
// updates are scattered on the device between batches); a change that
// needs a whole image waits for the batches (the test's gate, as
// eventfwd.Hybrid's lock). Every batch is then compared, bit for bit, with
// the CPU matcher over the subscriptions of the version the batch saw
// (EventBatch.seen), and every fourth with the brute-force evaluator too.
// New names and a new port arrive during the churn.
//
// It runs in both live modes: "live" (the pending words scattered before
// each batch) and "eager" (a scatter per update).
func TestCUDAPubsubLiveChurn(t *testing.T) {
	for _, mode := range []string{"live", "eager", "ahead"} {
		t.Run(mode, func(t *testing.T) {
			t.Setenv(UpdateModeEnv, mode)
			testPubsubLiveChurn(t)
		})
	}
}

func testPubsubLiveChurn(t *testing.T) {
	c := newTestCUDA(t)
	rng := rand.New(rand.NewPCG(51, 52))
	specs, evs := randomPubsub(rng, 20, 1500, 5, 2048)
	more, _ := randomPubsub(rng, 20, 300, 5, 0)
	for i := range 4 { // filters on names no subscription had, one on a new port
		name := fmt.Sprintf("fresh%d", i)
		more = append(more, pubsub.Spec{Port: uint32(900 + i), Filters: []pubsub.Filter{{{Name: name, Op: pubsub.OpGe, Value: pubsub.Int(2)}}}})
		for k := i; k < len(evs); k += 7 {
			evs[k].Attrs = append(evs[k].Attrs, pubsub.Attr{Name: name, Value: pubsub.Int(int64(k % 5))})
		}
	}
	tb := pubsubTable(t, specs)
	dev := pubsub.NewDevice(tb)
	dev.Mirror().Sync()
	m, err := c.PubsubMatcher(dev.Layout(), 4)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()

	var vmu sync.Mutex
	m.live.mu.Lock()
	versions := map[uint64][]pubsub.Spec{m.live.seq: tb.Specs()}
	m.live.mu.Unlock()
	var gate sync.RWMutex // a whole image waits for the batches
	stop := make(chan struct{})
	churnErr := make(chan error, 1)
	var changes, fulls, live atomic.Int64
	go func() {
		r := rand.New(rand.NewPCG(53, 54))
		var ids []pubsub.ID
		for i := 0; ; i++ {
			select {
			case <-stop:
				churnErr <- nil
				return
			default:
			}
			if i%2 == 0 || len(ids) == 0 {
				s := more[r.IntN(len(more))]
				id, err := tb.Add(s.Port, s.Filters)
				if err != nil {
					churnErr <- err
					return
				}
				ids = append(ids, id)
			} else {
				k := r.IntN(len(ids))
				if err := tb.Remove(ids[k]); err != nil {
					churnErr <- err
					return
				}
				ids = slices.Delete(ids, k, k+1)
			}
			snap := tb.Specs()
			u := dev.Update(tb)
			if u.Full != nil {
				gate.Lock()
			}
			err := m.Update(u, dev.Layout().Names)
			m.live.mu.Lock()
			v := m.live.seq
			m.live.mu.Unlock()
			if u.Full != nil {
				gate.Unlock()
				fulls.Add(1)
			} else {
				live.Add(1)
			}
			if err != nil {
				churnErr <- err
				return
			}
			vmu.Lock()
			versions[v] = snap
			vmu.Unlock()
			changes.Add(1)
			time.Sleep(100 * time.Microsecond)
		}
	}()

	type result struct {
		seen  uint64
		lo    int
		ports [][]uint32
	}
	const per = 256
	var results []result
	var bs [2]*EventBatch
	for i := range bs {
		if bs[i], err = m.NewEventBatch(per, 8*per, 64*per); err != nil {
			t.Fatal(err)
		}
		defer m.FreeEventBatch(bs[i])
	}
	submit := func(b *EventBatch, lo int) error {
		for {
			st := m.state.Load()
			if k := EncodeEvents(b, st.names, evs[lo:lo+per]); k != per {
				return fmt.Errorf("%d events of %d encoded", k, per)
			}
			b.namesVer = st.namesVer
			if err := m.Submit(b); err != errStaleNames {
				return err
			}
		}
	}
	// At least 40 rounds, at most 150 or a second (the check below
	// builds a CPU table per version seen).
	deadline := time.Now().Add(time.Second)
	for round := 0; round < 150 && (time.Now().Before(deadline) || round < 40); round++ {
		gate.RLock()
		los := [2]int{(2 * round * per) % len(evs), ((2*round + 1) * per) % len(evs)}
		for i, b := range bs {
			if i == 1 && round%4 == 1 {
				// The second batch as a call's (MatchSlots) that began
				// before an update made after the first batch's
				// scatter: the update may stay pending (mayDefer).
				m.live.mu.Lock()
				b.since = m.live.seq
				m.live.mu.Unlock()
				for t0 := time.Now(); time.Since(t0) < 20*time.Millisecond; time.Sleep(50 * time.Microsecond) {
					m.live.mu.Lock()
					moved := m.live.seq > b.since
					m.live.mu.Unlock()
					if moved {
						break
					}
				}
			} else {
				b.since = 0
			}
			if err := submit(b, los[i]); err != nil {
				t.Fatal(err)
			}
		}
		for i, b := range bs {
			if err := m.Wait(b); err != nil {
				t.Fatal(err)
			}
			out := make([][]uint32, per)
			if err := decodeInto(out, b, m.state.Load().ports); err != nil {
				t.Fatal(err)
			}
			results = append(results, result{b.seen, los[i], out})
		}
		gate.RUnlock()
	}
	close(stop)
	if err := <-churnErr; err != nil {
		t.Fatal(err)
	}
	cpu := map[uint64]*pubsub.Table{}
	seen := map[uint64]bool{}
	for i, r := range results {
		s, ok := versions[r.seen]
		if !ok {
			t.Fatalf("batch %d saw version %d, which no change published", i, r.seen)
		}
		tv := cpu[r.seen]
		if tv == nil {
			tv = pubsubTable(t, s)
			cpu[r.seen] = tv
		}
		seen[r.seen] = true
		want := tv.MatchBatch(evs[r.lo:r.lo+per], nil)
		for k := range want {
			if !slices.Equal(r.ports[k], want[k]) && len(r.ports[k])+len(want[k]) > 0 {
				t.Fatalf("batch %d (version %d), event %d %s: gpu %v, cpu %v", i, r.seen, r.lo+k, evs[r.lo+k].String(), r.ports[k], want[k])
			}
			if i%4 == 0 {
				if b := pubsub.BruteMatch(s, &evs[r.lo+k]); !slices.Equal(want[k], b) && len(want[k])+len(b) > 0 {
					t.Fatalf("batch %d (version %d), event %d: cpu %v, brute %v", i, r.seen, r.lo+k, want[k], b)
				}
			}
		}
	}
	if live.Load() == 0 || len(seen) < 10 {
		t.Fatalf("%d live updates, %d versions seen by the batches: the churn did not overlap the matching", live.Load(), len(seen))
	}
	m.live.mu.Lock()
	deferred := m.live.deferred
	m.live.mu.Unlock()
	if deferred == 0 && updateMode() == "live" {
		t.Fatal("no batch left an update pending: the deferral (mayDefer) was not exercised")
	}
	t.Logf("%d batches of %d events equal to the CPU at their version; %d changes (%d live updates, %d whole images), %d versions seen, %d batches deferred updates",
		len(results), per, changes.Load(), live.Load(), fulls.Load(), len(seen), deferred)
}
