//go:build cuda

package re

import (
	"testing"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rabin"
)

// TestRunGPU: bench re --backend gpu on a small batch: the device's bitmap
// equals the CPU's, and both rates are measured.
func TestRunGPU(t *testing.T) {
	if c, err := gpu.NewCUDA(0); err != nil {
		t.Skipf("SKIPPED: no usable CUDA device, bench re --backend gpu is not tested: %v", err)
	} else {
		c.Close()
	}
	rs, err := run(t, "--backend", "gpu", "--measure", "markers", "--payloads", "20000", "--rounds", "3")
	if err != nil {
		t.Fatal(err)
	}
	var g0 *Result
	for i := range rs {
		if rs[i].Backend == "gpu" {
			g0 = &rs[i]
		}
	}
	if g0 == nil || !g0.Identical || g0.Gbps <= 0 || g0.GbpsKernel <= 0 || g0.GPU == "" {
		t.Fatalf("results %+v: want an identical GPU result with rates", rs)
	}
	t.Logf("%s: end to end %.1f Gbit/s, kernel %.1f Gbit/s, CPU %.2f Gbit/s", g0.GPU, g0.Gbps, g0.GbpsKernel, g0.GbpsCPU)
	// The seam refuses what the kernel cannot take.
	g, err := NewGPUMarkers(rabin.DefaultPol, 32, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Bitmap(make([]byte, 64), []uint32{0}, nil, make([]uint32, 2)); err == nil {
		t.Error("mismatched offsets and lengths accepted")
	}
}
