package pubsub

import (
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCountSlotsWithoutLock: CountSlots credits a subscription's slots,
// credits nothing for a removed one's, returns while a writer holds the
// table's lock (it would deadlock here if it took it), and runs beside
// changes and bulk adds that grow the slots (run it under -race).
func TestCountSlotsWithoutLock(t *testing.T) {
	sc := DefaultScenario()
	sc.FiltersMin, sc.FiltersMax = 200, 300
	specs := sc.Subscriptions()
	tb := New()
	if _, err := tb.AddSpecs(specs[:len(specs)/2]); err != nil {
		t.Fatal(err)
	}
	id, err := tb.Add(3, specs[0].Filters)
	if err != nil {
		t.Fatal(err)
	}
	slots := tb.subs.get(id).slots
	tb.mu.Lock()
	tb.CountSlots(slots) // the write lock is held: must not wait for it
	tb.CountSlots([]uint32{1 << 30})
	tb.mu.Unlock()
	if s, _ := tb.Get(id); s.Matches != uint64(len(slots)) {
		t.Fatalf("%d matches credited, want %d", s.Matches, len(slots))
	}
	sub := tb.subs.get(id)
	if err := tb.Remove(id); err != nil {
		t.Fatal(err)
	}
	tb.CountSlots(slots)
	if n := sub.matches.Load(); n != uint64(len(slots)) {
		t.Fatalf("a removed subscription was credited: %d", n)
	}

	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(1))
		buf := make([]uint32, 64)
		for !stop.Load() {
			for i := range buf {
				buf[i] = uint32(rng.Intn(4 * len(specs)))
			}
			tb.CountSlots(buf)
		}
	}()
	rng := rand.New(rand.NewSource(2))
	var ids []ID
	for i := 0; i < 300; i++ {
		if i%100 == 50 {
			if _, err := tb.AddSpecs(specs[len(specs)/2+i : len(specs)/2+i+len(specs)/8]); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if i%2 == 0 || len(ids) == 0 {
			s := specs[rng.Intn(len(specs))]
			id, err := tb.Add(s.Port, s.Filters[:1])
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		} else {
			if err := tb.Remove(ids[0]); err != nil {
				t.Fatal(err)
			}
			ids = ids[1:]
		}
	}
	stop.Store(true)
	wg.Wait()
	checkIndex(t, tb)
}
