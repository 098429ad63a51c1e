package gpu

import (
	"sync"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/flow"
)

// TestStageHist: observations land in the bucket of their bound, the sum
// and quantiles follow, and concurrent observers lose nothing.
func TestStageHist(t *testing.T) {
	var h StageHist
	h.Observe(StageLookup, 500*time.Nanosecond) // <= 1µs
	h.Observe(StageLookup, 3*time.Microsecond)  // <= 4µs
	h.Observe(StageLookup, time.Second)         // +Inf
	h.Observe(StageForm, -time.Second)          // counts as 0
	h.Observe(NumStages, time.Second)           // ignored
	st := h.Stats()
	lk := st[StageLookup]
	if lk.N() != 3 || lk.Counts[0] != 1 || lk.Counts[2] != 1 || lk.Counts[nStageBounds] != 1 {
		t.Fatalf("lookup counts %v", lk.Counts)
	}
	if lk.Sum != time.Second+3500*time.Nanosecond {
		t.Fatalf("sum %v", lk.Sum)
	}
	if q := lk.Quantile(0.5); q != 4*time.Microsecond {
		t.Fatalf("p50 %v, want 4µs", q)
	}
	if q := lk.Quantile(1); q != 2*stageBounds[nStageBounds-1] {
		t.Fatalf("p100 %v", q)
	}
	if st[StageForm].N() != 1 || st[StageForm].Counts[0] != 1 || st[StageForm].Sum != 0 {
		t.Fatalf("form %+v", st[StageForm])
	}
	if st[StageStart].N() != 0 || st[StageStart].Quantile(0.99) != 0 || st[StageStart].Mean() != 0 {
		t.Fatal("empty stage not empty")
	}
	if StageHandBack.String() != "handback" || Stage(-1).String() != "unknown" {
		t.Fatal("stage names")
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				h.Observe(StageStart, 10*time.Microsecond)
			}
		}()
	}
	wg.Wait()
	if n := h.Stats()[StageStart].N(); n != 8000 {
		t.Fatalf("%d observations, want 8000", n)
	}
}

// TestCoalescerStages: a Coalescer's shared batches are timed in each of
// its stages, and a batch shared by several callers times their hand-back.
func TestCoalescerStages(t *testing.T) {
	const id = 3
	cpu, proj, keys := coalesceTable(t, id)
	c, err := NewCoalescer(cpu, CoalescerConfig{MaxBatch: 4096, MinBatch: 64, MaxDelay: 200 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	// The four callers are active from before the first lookup to after
	// their last (activeCallers), so that a caller alone in the
	// Coalescer cannot close its batch as the only active one when the
	// goroutines happen to run one after the other: its batch waits for
	// the others (or its delay).
	activeCallers(c, 4, func(g int) {
		out := make([]flow.RuleID, 16)
		for r := range 50 {
			lo := (g*300 + r*17) % (len(keys) - 16)
			soa := flow.PackSoA(keys[lo:lo+16], proj, nil)
			if err := c.LookupFlow(id, soa, 16, out); err != nil {
				t.Error(err)
			}
		}
	})
	s := c.Stats()
	st := c.Stages()
	for _, k := range []Stage{StageForm, StageStart, StageLookup} {
		if st[k].N() != s.Batches {
			t.Errorf("stage %v: %d observations, %d batches", k, st[k].N(), s.Batches)
		}
	}
	if s.Callers == s.Batches {
		t.Errorf("no batch was shared: %+v", s)
	}
	if want := s.Callers - s.Batches; st[StageHandBack].N() != want {
		t.Errorf("handback: %d observations, want %d (callers %d, batches %d)", st[StageHandBack].N(), want, s.Callers, s.Batches)
	}
	for _, x := range st {
		t.Logf("%-8v n=%d mean=%v p50<=%v p99<=%v", x.Stage, x.N(), x.Mean(), x.Quantile(0.5), x.Quantile(0.99))
	}
}
