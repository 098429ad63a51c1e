package pubsub

import (
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkIndex checks the index's bookkeeping of tombstones and tails: every
// slot is live (info != 0), pending (removed, with tombstones left) or
// free, never two of them; the tombstones on the names' lists are exactly
// the pending slots' counts; after a change no array has a tail longer
// than tailMax; no live slot is on the free list.
func checkIndex(t *testing.T, tb *Table) {
	t.Helper()
	tb.mu.RLock()
	defer tb.mu.RUnlock()
	for s := range tb.meta {
		if got := tb.owners.get(uint32(s)); got != tb.meta[s].owner {
			t.Fatalf("slot %d: owners has %p, meta %p", s, got, tb.meta[s].owner)
		}
	}
	free := map[uint32]bool{}
	for _, s := range tb.free {
		if free[s] {
			t.Fatalf("slot %d twice on the free list", s)
		}
		free[s] = true
		if tb.info[s] != 0 {
			t.Fatalf("free slot %d is live", s)
		}
		if _, ok := tb.pend[s]; ok {
			t.Fatalf("free slot %d is pending", s)
		}
	}
	tombs := map[uint32]int32{}
	for _, ni := range tb.names {
		if len(ni.tomb) >= ni.n {
			t.Fatalf("name %q: %d tombstones of %d entries left unpurged", ni.name, len(ni.tomb), ni.n)
		}
		for _, te := range ni.tomb {
			tombs[te.s]++
		}
		tails := func(n, sortedN int) {
			if n-sortedN > tailMax {
				t.Fatalf("name %q: unsorted tail of %d entries", ni.name, n-sortedN)
			}
		}
		for r := range ni.ints {
			tails(len(ni.ints[r].a), ni.ints[r].sortedN)
			tails(len(ni.floats[r].a), ni.floats[r].sortedN)
			tails(len(ni.strs[r].a), ni.strs[r].sortedN)
			if !slices.IsSortedFunc(ni.ints[r].a[:ni.ints[r].sortedN], cmpEnt[intEnt]) ||
				!slices.IsSortedFunc(ni.floats[r].a[:ni.floats[r].sortedN], cmpEnt[floatEnt]) ||
				!slices.IsSortedFunc(ni.strs[r].a[:ni.strs[r].sortedN], cmpEnt[strEnt]) {
				t.Fatalf("name %q: sorted part out of order", ni.name)
			}
		}
	}
	if len(tombs) != len(tb.pend) {
		t.Fatalf("%d slots with tombstones, %d pending", len(tombs), len(tb.pend))
	}
	for s, n := range tombs {
		if tb.pend[s] != n {
			t.Fatalf("slot %d: %d tombstones, pending %d", s, n, tb.pend[s])
		}
		if tb.info[s] != 0 {
			t.Fatalf("pending slot %d is live", s)
		}
	}
}

// TestChurnAgainstBrute makes single subscription changes (the path of a
// subscription API call: short tails, tombstones, purges, free slots taken
// again) on a table with a base of subscriptions, and compares Match,
// MatchBatch and the device layout kept up to date by Device.Update with
// the brute-force evaluator after every few changes.
func TestChurnAgainstBrute(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		g := randGen{rand.New(rand.NewSource(100 + seed))}
		ports := 2 + g.r.Intn(6)
		var base []Spec
		for n := 300 + g.r.Intn(300); n > 0; n-- {
			base = append(base, g.spec(ports))
		}
		tb := tableOf(t, base)
		dev := NewDevice(tb)
		var ids []ID
		for step := 0; step < 600; step++ {
			switch op := g.r.Intn(20); {
			case op < 9 || len(ids) == 0:
				s := g.spec(ports)
				id, err := tb.Add(s.Port, s.Filters)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			case op < 18:
				i := g.r.Intn(len(ids))
				if err := tb.Remove(ids[i]); err != nil {
					t.Fatal(err)
				}
				ids = slices.Delete(ids, i, i+1)
			case op < 19:
				// an old subscription of the base
				subs := tb.List()
				id := subs[g.r.Intn(len(subs))].ID
				if err := tb.Remove(id); err != nil {
					t.Fatal(err)
				}
				ids = slices.DeleteFunc(ids, func(x ID) bool { return x == id })
			default:
				s := g.spec(ports)
				if _, _, err := tb.SetPort(s.Port, s.Filters); err != nil {
					t.Fatal(err)
				}
				ids = ids[:0]
				for _, sub := range tb.List() {
					ids = append(ids, sub.ID)
				}
			}
			dev.Update(tb)
			if step%5 != 0 {
				continue
			}
			checkIndex(t, tb)
			checkEvents(t, tb, dev.Layout(), g, 20, fmt.Sprintf("seed %d step %d", seed, step))
		}
		// Everything removed: every slot comes back free, no name is left.
		for _, sub := range tb.List() {
			if err := tb.Remove(sub.ID); err != nil {
				t.Fatal(err)
			}
		}
		checkIndex(t, tb)
		if len(tb.names) != 0 || len(tb.pend) != 0 || len(tb.free) != len(tb.info) {
			t.Fatalf("seed %d: emptied table keeps %d names, %d pending slots, %d of %d slots free", seed, len(tb.names), len(tb.pend), len(tb.free), len(tb.info))
		}
	}
}

// TestSortedTail checks the lazy fix and the tail merge of a sorted array
// on their own: an array stays equal to its sorted reference.
func TestSortedTail(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	var c sorted[intEnt]
	var ref []intEnt
	dead := make([]bool, 4096)
	next := uint32(0)
	for step := 0; step < 3000; step++ {
		switch op := r.Intn(10); {
		case op < 6:
			e := intEnt{int64(r.Intn(50)), next}
			next++
			c.add(e)
			ref = append(ref, e)
		default:
			if len(ref) == 0 {
				continue
			}
			k := r.Intn(min(len(ref), 5)) + 1
			for range k {
				i := r.Intn(len(ref))
				dead[ref[i].s] = true
				ref = slices.Delete(ref, i, i+1)
			}
			c.mark()
		}
		lazy := r.Intn(4) > 0
		c.fix(dead, lazy)
		clear(dead)
		if !slices.IsSortedFunc(c.a[:c.sortedN], cmpEnt[intEnt]) {
			t.Fatalf("step %d: sorted part out of order", step)
		}
		if n := len(c.a) - c.sortedN; n > tailMax || !lazy && n != 0 {
			t.Fatalf("step %d: tail of %d entries (lazy %v)", step, n, lazy)
		}
		got := slices.Clone(c.a)
		slices.SortFunc(got, cmpEnt[intEnt])
		want := slices.Clone(ref)
		slices.SortFunc(want, cmpEnt[intEnt])
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: entries %v, want %v", step, got, want)
		}
	}
}

// TestChangeVisibleOnceAcknowledged is the API's barrier: once Add
// returns, every match that starts afterwards (on any goroutine) sees the
// subscription, and once Remove returns none does; while other goroutines
// churn other ports and match batches against the brute-force evaluator
// (run with -race).
func TestChangeVisibleOnceAcknowledged(t *testing.T) {
	tb, evs, want := stableTable(t, 11, 200, 100)
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var churned atomic.Int64
	// churn on ports 100..103
	bg.Add(1)
	go func() {
		defer bg.Done()
		wr := randGen{rand.New(rand.NewSource(12))}
		var ids []ID
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			// paced (20 µs apart, busy: a sleep's granularity varies):
			// a writer back to back would hold off everyone else
			for t0 := time.Now(); time.Since(t0) < 20*time.Microsecond; {
			}
			if n%2 == 0 || len(ids) == 0 {
				s := wr.spec(4)
				id, err := tb.Add(s.Port+100, s.Filters)
				if err != nil {
					t.Error(err)
					return
				}
				ids = append(ids, id)
			} else {
				i := wr.r.Intn(len(ids))
				tb.Remove(ids[i])
				ids = slices.Delete(ids, i, i+1)
			}
			churned.Add(1)
		}
	}()
	// batches on the stable ports
	bg.Add(1)
	go func() {
		defer bg.Done()
		var out [][]uint32
		for {
			select {
			case <-stop:
				return
			default:
			}
			out = tb.MatchBatch(evs, out)
			for i := range evs {
				got := slices.DeleteFunc(slices.Clone(out[i]), func(p uint32) bool { return p >= 100 })
				if !slices.Equal(got, want[i]) {
					t.Errorf("event %d: %v, want %v", i, got, want[i])
					return
				}
			}
		}
	}()
	// The barrier: a marker subscription on port 7, checked by another
	// goroutine after each acknowledgement.
	type ack struct {
		k     int64
		there bool
	}
	acks, done := make(chan ack), make(chan struct{})
	errs := make(chan string, 1)
	var mw sync.WaitGroup
	mw.Add(1)
	go func() {
		defer mw.Done()
		for a := range acks {
			e := Event{Attrs: []Attr{{Name: "marker", Value: Int(a.k)}}}
			got := tb.Match(&e)
			if slices.Contains(got, 7) != a.there {
				select {
				case errs <- "marker " + e.String():
				default:
				}
			}
			done <- struct{}{}
		}
	}()
	// At least 100 markers, and on until the churn made 100 changes.
	for k := int64(0); k < 100 || k < 20000 && churned.Load() < 100; k++ {
		id, err := tb.Add(7, []Filter{{{Name: "marker", Op: OpEq, Value: Int(k)}}})
		if err != nil {
			t.Fatal(err)
		}
		acks <- ack{k, true}
		<-done
		if err := tb.Remove(id); err != nil {
			t.Fatal(err)
		}
		acks <- ack{k, false}
		<-done
	}
	close(acks)
	mw.Wait()
	if n := churned.Load(); n < 100 {
		t.Fatalf("the churn made %d changes during the markers", n)
	}
	close(stop)
	bg.Wait()
	select {
	case e := <-errs:
		t.Fatalf("a change not visible once acknowledged: %s", e)
	default:
	}
	checkIndex(t, tb)
}
