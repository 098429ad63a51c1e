//go:build cuda

package pipeline

import (
	"testing"

	"github.com/gswitch/gswitch/gpu"
)

// gpuEngine opens GPU 0 with min-batch 1: every lookup batch, LPM and
// flow, runs on the device.
func gpuEngine(tb testing.TB) *gpu.Engine {
	tb.Helper()
	eng, err := gpu.Open("gpu", nil, 1, nil)
	if err != nil {
		tb.Fatalf("no GPU: %v", err)
	}
	tb.Cleanup(func() { eng.Close() })
	return eng
}

// TestCUDALPMShapeRandomFlowMods is the random FLOW_MOD property test with
// the LPM images on a GPU, kept by their bubbles (and whole images after
// rebuilds): every LPM lookup batch runs on the device and must give the
// flow table's rule.
func TestCUDALPMShapeRandomFlowMods(t *testing.T) {
	var engs []*gpu.Engine
	runShapeRandom(t, func(tb testing.TB) *gpu.Engine {
		e := gpuEngine(tb)
		engs = append(engs, e)
		return e
	}, 2)
	for i, e := range engs {
		st := e.Stats()
		t.Logf("engine %d: %+v", i, st)
		if st.KeysOnDevice == 0 || st.Fallbacks != 0 || len(st.Devices) == 0 || !st.Devices[0].Up || len(st.Devices[0].CPUOnly) != 0 {
			t.Errorf("engine %d: lookups did not all run on the GPU: %+v", i, st)
		}
	}
}

// BenchmarkCUDALPMShapedTable is BenchmarkLPMShapedTable with every
// lookup on the GPU (slice API, host copies included), at the pipeline's
// default batch and at larger ones.
func BenchmarkCUDALPMShapedTable(b *testing.B) {
	benchShaped(b, gpuEngine(b), 256, 4096, 16384)
}

// TestCUDAAsyncSameFates is TestAsyncSameFatesInOrder with the lookups in
// shared batches on the GPU (min-batch 1: every batch on the device).
func TestCUDAAsyncSameFates(t *testing.T) {
	eng := gpuEngine(t)
	r := newCoalescedRigOn(t, 3, eng, eng, 3, 1)
	testAsyncSameFates(t, r, false)
	if s := r.sw.cfg.Coalescer.Stats(); s.Batches == 0 || s.Callers == 0 || s.InFlight != 0 {
		t.Errorf("coalescer stats %+v", s)
	}
	if s := eng.Stats(); s.KeysOnDevice == 0 {
		t.Fatalf("engine stats %+v: no key looked up on the device", s)
	}
}

// TestCUDAProcessPartsSameFates is TestProcessPartsSameFates with the
// parts' lookups on the GPU (a datapath worker's run, min-batch 1: every
// table stage's one lookup on the device): the same fates as Process on
// the CPU, port by port.
func TestCUDAProcessPartsSameFates(t *testing.T) {
	eng := gpuEngine(t)
	testProcessPartsSameFates(t, func() *rig { return newRigOn(t, 4, FailSecure, eng) })
	if s := eng.Stats(); s.KeysOnDevice == 0 || s.Fallbacks != 0 {
		t.Fatalf("engine stats %+v: the parts were not looked up on the device", s)
	}
}

// TestCUDAWorkerRunsInFlight is TestWorkerRunsInFlightSameFates and
// TestWorkerRunInFlightSeesChange with the runs' first lookups in flight
// on the GPU (min-batch 1): the same frames leave by the same ports in the
// same order as a synchronous worker's on the CPU, and a FLOW_MOD whose
// bubbles reach the device while a lookup is in flight decides that
// run's frames; then the same fates with the lookups in a Gatherer's
// shared batches.
func TestCUDAWorkerRunsInFlight(t *testing.T) {
	eng := gpuEngine(t)
	testWorkerRunsInFlight(t, withAsyncRules(t, newRigOn(t, 4, FailSecure, eng)))
	testWorkerRunSeesChange(t, withAsyncRules(t, newRigOn(t, 4, FailSecure, eng)))
	shared := withAsyncRules(t, newRigOn(t, 4, FailSecure, eng)) // in a Gatherer's shared batches
	gatherOn(t, shared)
	testWorkerRunsInFlight(t, shared)
	if s := eng.Stats(); s.KeysOnDevice == 0 || s.Fallbacks != 0 {
		t.Fatalf("engine stats %+v: the runs were not looked up on the device", s)
	}
}
