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
	if es.KeysOnDevice == 0 || s.Batches == 0 {
		t.Fatal("no shared batch reached the device")
	}
}
