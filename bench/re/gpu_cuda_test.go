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
	paths := map[string]bool{}
	for _, g0 := range rs {
		if g0.Backend != "gpu" {
			continue
		}
		paths[g0.GPUPath] = true
		if !g0.Identical || g0.Gbps <= 0 || g0.GbpsKernel <= 0 || g0.GPU == "" {
			t.Fatalf("result %+v: want an identical GPU result with rates", g0)
		}
		if g0.GbpsH2D <= 0 || g0.GbpsD2H <= 0 || (g0.GPUPath == "gather") != (g0.GbpsGather > 0) || (g0.GPUPath == "copy") != (g0.GbpsCopy > 0) {
			t.Errorf("PCIe copy rates %v, %v, gather alone %v, copies alone %v: want each measured", g0.GbpsH2D, g0.GbpsD2H, g0.GbpsGather, g0.GbpsCopy)
		}
		if g0.GPUPath == "copy" && (g0.CopyRuns < 1 || g0.CopyExtra < 0 || g0.CopyExtra > 0.05) {
			t.Errorf("copy path: %d copies a round, %.3f extra bytes: want runs of frames, at most 5%% extra (1,460 of a 1,472-byte row)", g0.CopyRuns, g0.CopyExtra)
		}
		t.Logf("%s, path %s: end to end %.1f Gbit/s, kernel %.1f Gbit/s, gather alone %.1f Gbit/s, copies alone %.1f Gbit/s (%d a round, %.1f%% extra bytes), CPU %.2f Gbit/s, PCIe pinned copy in %.0f Gbit/s, out %.0f Gbit/s; %s",
			g0.GPU, g0.GPUPath, g0.Gbps, g0.GbpsKernel, g0.GbpsGather, g0.GbpsCopy, g0.CopyRuns, 100*g0.CopyExtra, g0.GbpsCPU, g0.GbpsH2D, g0.GbpsD2H, g0.GPUShape)
	}
	if !paths["pack"] || !paths["gather"] || !paths["copy"] {
		t.Fatalf("results %+v: want the pack, gather and copy paths", rs)
	}
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
	if err := g.BitmapRing("copy", []uint32{0}, []uint32{100}, make([]uint32, 4)); err == nil {
		t.Error("BitmapRing without a ring accepted")
	}
	if _, err := g.RxRing(4096); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"gather", "copy"} {
		if err := g.BitmapRing(path, []uint32{4000}, []uint32{100}, make([]uint32, 4)); err == nil {
			t.Errorf("%s: a payload past the ring's end accepted", path)
		}
	}
	if err := g.BitmapRing("pack", []uint32{0}, []uint32{100}, make([]uint32, 4)); err == nil {
		t.Error("BitmapRing by path pack accepted")
	}
}
