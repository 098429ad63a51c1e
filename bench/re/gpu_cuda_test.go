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
	// 100,000 payloads (146 MB): enough batches that the pipeline's start
	// and end are a small part of a round.
	rs, err := run(t, "--backend", "gpu", "--measure", "markers", "--payloads", "100000", "--rounds", "5")
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
	if g0.GbpsH2D <= 0 || g0.GbpsD2H <= 0 {
		t.Errorf("PCIe copy rates %v, %v: want both measured", g0.GbpsH2D, g0.GbpsD2H)
	}
	t.Logf("%s: end to end %.1f Gbit/s, kernel %.1f Gbit/s, CPU %.2f Gbit/s, PCIe pinned copy in %.0f Gbit/s, out %.0f Gbit/s; %s",
		g0.GPU, g0.Gbps, g0.GbpsKernel, g0.GbpsCPU, g0.GbpsH2D, g0.GbpsD2H, g0.GPUShape)
	// The seam refuses what the kernel cannot take.
	g, err := NewGPUMarkers(rabin.DefaultPol, 32, 8, GPUOptions{Fillers: 2, BatchBytes: 64 << 10, Streams: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.KernelSeconds(make([]byte, 64), []uint32{0}, nil, 1); err == nil {
		t.Error("mismatched offsets and lengths accepted")
	}
	if err := g.Bitmap([][]byte{make([]byte, 100)}, make([]uint32, 3)); err == nil {
		t.Error("a short bitmap accepted")
	}
}
