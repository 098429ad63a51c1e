//go:build cuda

package gpu

import (
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/flow"
)

// withResident turns the resident lookups on, with n slots and a life of
// life, for the backends the test starts, and back off at its end.
func withResident(t *testing.T, n int, life time.Duration) {
	t.Helper()
	oldN, oldLife := residentSlots, residentLife
	residentSlots, residentLife = n, life
	t.Cleanup(func() { residentSlots, residentLife = oldN, oldLife })
}

// residentCUDA is newTestCUDA with resident lookups on; it fails if they
// did not start.
func residentCUDA(t *testing.T, n int, life time.Duration) *CUDA {
	t.Helper()
	withResident(t, n, life)
	c := newTestCUDA(t)
	if c.res == nil || !strings.Contains(c.Device(), "resident lookups:") {
		t.Fatalf("resident lookups did not start: %s", c.Device())
	}
	return c
}

// TestCUDAResidentFlowRandom is the flow conformance of TestCUDAFlowRandom
// with resident lookups (8 slots, a life of 200 µs, so that the kernel
// ends and is launched again many times): its small lookups (1, 7 and 64
// keys after the load and after every round of updates, and the garbage
// images') are answered by the resident kernel, bit for bit as the
// flow.Table says, every update before them seen.
func TestCUDAResidentFlowRandom(t *testing.T) {
	c := residentCUDA(t, 8, 200*time.Microsecond)
	testRandomFlowAll(t, c, true)
	_, posts, launches := c.ResidentStats()
	t.Logf("resident: %d lookups posted, %d launches", posts, launches)
	if posts == 0 || launches < 2 {
		t.Fatalf("resident: %d lookups posted, %d launches: the small lookups did not go to the resident kernel, or it was never launched again", posts, launches)
	}
}

// TestCUDAResidentGatherer is TestCUDAGatherer with resident lookups (4
// slots: more batches than slots, so that some go through the streams):
// 8 goroutines' shares, exact against the CPU backend.
func TestCUDAResidentGatherer(t *testing.T) {
	c := residentCUDA(t, 4, 500*time.Microsecond)
	cpu, proj, keys := coalesceTable(t, 0)
	im, _, _ := coalesceImage(t)
	e := NewEngine(EngineConfig{Devices: []Backend{c}, MinBatch: 1})
	t.Cleanup(func() { e.Close() })
	if err := e.Load(0, Flow, im); err != nil {
		t.Fatal(err)
	}
	testGathererExact(t, e, cpu, proj, keys)
	_, posts, launches := c.ResidentStats()
	t.Logf("resident: %d lookups posted, %d launches", posts, launches)
	if posts == 0 {
		t.Fatal("no lookup went to the resident kernel")
	}
	if s := e.Stats(); s.KeysOnDevice == 0 || s.Fallbacks != 0 {
		t.Fatalf("engine stats %+v: not on the device, or fallbacks", s)
	}
}

// TestCUDAResidentClose closes a backend whose resident kernel is alive
// (a life of 1 s): Close stops it rather than waiting out its life.
func TestCUDAResidentClose(t *testing.T) {
	c := residentCUDA(t, 2, time.Second) // its cleanup's Close, after this one, does nothing
	cpu, proj, keys := coalesceTable(t, 0)
	im, _, _ := coalesceImage(t)
	if err := c.Load(0, Flow, im); err != nil {
		t.Fatal(err)
	}
	testGathererExact(t, c, cpu, proj, keys)
	// The Gatherer's Close freed its batches, which stops the kernel: a
	// lookup of 7 keys launches it again.
	soa := flow.PackSoA(keys[:7], proj, nil)
	out := make([]flow.RuleID, 7)
	if err := c.LookupFlow(0, soa, 7, out); err != nil {
		t.Fatal(err)
	}
	if !c.res.alive() {
		t.Fatal("the resident kernel is not alive after the lookups")
	}
	t0 := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Fatalf("Close took %v with a resident kernel alive", d)
	}
}
