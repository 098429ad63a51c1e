//go:build cuda

package gpu

import (
	"sync"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/flow"
)

// TestCUDACoalescer: concurrent callers' lookups in shared batches on the
// GPU (an Engine over device 0, min-batch 256) give the CPU backend's
// answers, key for key, and the batches reach the device.
func TestCUDACoalescer(t *testing.T) {
	const id = 9
	cpu, proj, keys := coalesceTable(t, id)
	im, _, _ := coalesceImage(t)
	devs, err := OpenCUDA([]int{0})
	if err != nil {
		t.Fatalf("no GPU: %v", err)
	}
	e := NewEngine(EngineConfig{Devices: devs, MinBatch: 256})
	defer e.Close()
	if err := e.Load(id, Flow, im); err != nil {
		t.Fatal(err)
	}
	want := make([]flow.RuleID, len(keys))
	if err := cpu.LookupFlow(id, flow.PackSoA(keys, proj, nil), len(keys), want); err != nil {
		t.Fatal(err)
	}
	c, err := NewCoalescer(e, CoalescerConfig{MaxBatch: 2048, MinBatch: 256, MaxDelay: 100 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var soa []uint32
			out := make([]flow.RuleID, 256)
			for r := range 200 {
				n := 1 + (g*37+r*11)%256
				lo := (g*512 + r*97) % (len(keys) - n)
				soa = flow.PackSoA(keys[lo:lo+n], proj, soa)
				c.Enter()
				err := c.LookupFlow(id, soa, n, out)
				c.Leave()
				if err != nil {
					t.Errorf("caller %d: %v", g, err)
					return
				}
				for i := range n {
					if out[i] != want[lo+i] {
						t.Errorf("caller %d round %d key %d: rule %d, want %d", g, r, i, out[i], want[lo+i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	s, es := c.Stats(), e.Stats()
	t.Logf("coalescer %+v; engine keys cpu %d device %d", s, es.KeysOnCPU, es.KeysOnDevice)
	for _, x := range c.Stages() {
		t.Logf("stage %-8v n=%d mean=%v p50<=%v p99<=%v", x.Stage, x.N(), x.Mean(), x.Quantile(0.5), x.Quantile(0.99))
	}
	if es.KeysOnDevice == 0 || s.Batches == 0 {
		t.Fatal("no shared batch reached the device")
	}
}

// TestCUDAConcurrentLookups: eight goroutines look up slices of the
// traffic in the CUDA backend at once, small ones (a lookup slot each)
// and, from one of them, lookups above a slot (the chunked pipeline, under
// the write lock) with a 4096-key chunk; every answer is the CPU
// backend's, key for key, and the small lookups held several slots at
// once (they were not serialised).
func TestCUDAConcurrentLookups(t *testing.T) {
	const id = 9
	cpu, proj, keys := coalesceTable(t, id)
	im, _, _ := coalesceImage(t)
	devs, err := OpenCUDA([]int{0})
	if err != nil {
		t.Fatalf("no GPU: %v", err)
	}
	c := devs[0].(*CUDA)
	defer c.Close()
	if err := c.SetStreams(4, 4096); err != nil {
		t.Fatal(err)
	}
	if err := c.Load(id, Flow, im); err != nil {
		t.Fatal(err)
	}
	want := make([]flow.RuleID, len(keys))
	if err := cpu.LookupFlow(id, flow.PackSoA(keys, proj, nil), len(keys), want); err != nil {
		t.Fatal(err)
	}
	big := make([]flow.Key, 0, 3*len(keys)) // above a chunk: the pipeline path
	for range 3 {
		big = append(big, keys...)
	}
	bigSoA := flow.PackSoA(big, proj, nil)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var soa []uint32
			out := make([]flow.RuleID, len(big))
			for r := range 300 {
				if g == 0 && r%50 == 0 {
					if err := c.LookupFlow(id, bigSoA, len(big), out); err != nil {
						t.Errorf("big lookup: %v", err)
						return
					}
					for i := range big {
						if out[i] != want[i%len(keys)] {
							t.Errorf("big lookup key %d: rule %d, want %d", i, out[i], want[i%len(keys)])
							return
						}
					}
					continue
				}
				n := 1 + (g*53+r*29)%2048
				lo := (g*512 + r*97) % (len(keys) - n)
				soa = flow.PackSoA(keys[lo:lo+n], proj, soa)
				if err := c.LookupFlow(id, soa, n, out); err != nil {
					t.Errorf("caller %d: %v", g, err)
					return
				}
				for i := range n {
					if out[i] != want[lo+i] {
						t.Errorf("caller %d round %d key %d: rule %d, want %d", g, r, i, out[i], want[lo+i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	c.smu.Lock()
	slots := 0
	for _, free := range c.slots {
		slots += len(free)
	}
	c.smu.Unlock()
	st := backendStages.Stats()[StageSlot]
	t.Logf("%d lookup slots made; slot wait n=%d mean=%v p99<=%v", slots, st.N(), st.Mean(), st.Quantile(0.99))
	if slots < 2 {
		t.Fatalf("%d lookup slot(s): the concurrent lookups were serialised", slots)
	}
}
