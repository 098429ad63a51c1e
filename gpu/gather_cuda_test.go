//go:build cuda

package gpu

import "testing"

// TestCUDAGatherer is TestGathererExact with the shared batches on the GPU
// (an Engine over device 0, min-batch 1: every batch on the device): each
// share's results are the CPU backend's, key for key, and the keys went
// to the device.
func TestCUDAGatherer(t *testing.T) {
	cpu, proj, keys := coalesceTable(t, 0)
	e := gatherEngine(t)
	testGathererExact(t, e, cpu, proj, keys)
	if s := e.Stats(); s.KeysOnDevice == 0 || s.Fallbacks != 0 {
		t.Fatalf("engine stats %+v: the shared batches were not looked up on the device", s)
	}
}

// BenchmarkCUDASharedLookups is BenchmarkSharedLookups with the lookups on
// the GPU (min-batch 1): a device call per caller (direct), shared batches
// that callers block for (coalescer), and shared batches that callers poll
// (gatherer); ns/op is per lookup of 32 keys, keys/batch how many keys
// each device call carried.
func BenchmarkCUDASharedLookups(b *testing.B) {
	_, proj, keys := coalesceTable(b, 0)
	benchSharedLookups(b, gatherEngine(b), proj, keys)
}

// gatherEngine is an Engine over device 0 with min-batch 1 and
// coalesceImage's table as table 0, closed at the test's end.
func gatherEngine(tb testing.TB) *Engine {
	tb.Helper()
	im, _, _ := coalesceImage(tb)
	devs, err := OpenCUDA([]int{0})
	if err != nil {
		tb.Fatalf("no GPU: %v", err)
	}
	e := NewEngine(EngineConfig{Devices: devs, MinBatch: 1})
	tb.Cleanup(func() { e.Close() })
	if err := e.Load(0, Flow, im); err != nil {
		tb.Fatal(err)
	}
	return e
}
