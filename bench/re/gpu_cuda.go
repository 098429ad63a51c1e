//go:build cuda

package re

import (
	"fmt"
	"os"
	"syscall"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rabin"
)

// In the cuda build the benchmark's GPU seam is package gpu's RabinMarkers
// (kernels/rabin.cu) on device 0, end to end through a gpu.MarkerPipeline.
func init() { NewGPUMarkers = openGPUMarkers }

// cudaMarkers is GPUMarkers over gpu.RabinMarkers: a MarkerPipeline for
// the end-to-end figure, and one page-locked batch, grown to the largest
// buffer it was given, for the kernel alone.
type cudaMarkers struct {
	c   *gpu.CUDA
	r   *gpu.RabinMarkers
	p   *gpu.MarkerPipeline
	opt GPUOptions
	b   *gpu.MarkerBatch
	n   int // payloads of the last kernel-only batch

	ring []byte              // RxRing's mapping
	h    *gpu.HostRegion     // its registration
	pg   *gpu.MarkerPipeline // the gather path's
}

func openGPUMarkers(pol rabin.Pol, window, bits int, opt GPUOptions) (GPUMarkers, error) {
	m, err := rabin.NewMarker(pol, window, bits)
	if err != nil {
		return nil, err
	}
	if opt.GatherFillers == 0 { // for callers that leave the gather path's shape out
		opt.GatherFillers = DefaultGatherFillers
	}
	if opt.GatherBatchBytes == 0 {
		opt.GatherBatchBytes = DefaultGatherBatchBytes
	}
	c, err := gpu.NewCUDA(0)
	if err != nil {
		return nil, err
	}
	r, err := c.RabinMarkers(m, opt.Streams)
	if err != nil {
		c.Close()
		return nil, err
	}
	r.BlockingWait = opt.Sleep
	r.GatherWarps, r.Gather16 = opt.GatherWarps, opt.Gather16
	// A batch's index (offsets and lengths) is copied in with it, sized
	// for payloads of 1 KiB on average: a batch of shorter ones is cut by
	// its count before its bytes.
	p, err := gpu.NewMarkerPipeline(r, gpu.PipelineConfig{Fillers: opt.Fillers, BatchBytes: opt.BatchBytes,
		BatchPayloads: opt.BatchBytes >> 10, FlatStart: opt.FlatStart, RampDown: opt.RampDown})
	if err != nil {
		r.Close()
		c.Close()
		return nil, err
	}
	return &cudaMarkers{c: c, r: r, p: p, opt: opt}, nil
}

// Bitmap runs the payloads through the pipeline.
func (g *cudaMarkers) Bitmap(payloads [][]byte, bitmap []uint32) error {
	return g.p.Bitmap(payloads, bitmap)
}

// load copies the packed payloads into the kernel-only batch (grown if
// needed).
func (g *cudaMarkers) load(buf []byte, offs, lens []uint32) (*gpu.MarkerBatch, error) {
	if len(offs) != len(lens) {
		return nil, fmt.Errorf("bench re: %d offsets for %d lengths", len(offs), len(lens))
	}
	if g.b == nil || len(g.b.Buf) < len(buf) || len(g.b.Offs) < len(offs) {
		if g.b != nil {
			g.r.FreeBatch(g.b)
			g.b = nil
		}
		b, err := g.r.NewBatch(len(buf), len(offs))
		if err != nil {
			return nil, err
		}
		g.b = b
	}
	b := g.b
	b.Region = nil
	copy(b.Buf, buf)
	copy(b.Offs, offs)
	copy(b.Lens, lens)
	b.N, b.Bytes = len(offs), len(buf)
	g.n = b.N
	return b, nil
}

// KernelSeconds times the kernel alone (CUDA events) on the buffer.
func (g *cudaMarkers) KernelSeconds(buf []byte, offs, lens []uint32, iters int) (float64, error) {
	b, err := g.load(buf, offs, lens)
	if err != nil {
		return 0, err
	}
	if err := g.r.Submit(b); err != nil {
		return 0, err
	}
	if err := g.r.Wait(b); err != nil {
		return 0, err
	}
	ms, err := g.r.KernelTime(b, iters)
	return ms / 1e3, err
}

// CopyGbps measures pinned copies of 256 MiB each way.
func (g *cudaMarkers) CopyGbps() (h2d, d2h float64, err error) {
	h2d, d2h, err = g.c.CopyRates(256<<20, 8)
	return h2d * 8, d2h * 8, err
}

// Device names the GPU and the kernel.
func (g *cudaMarkers) Device() string { return g.c.Device() + ", " + g.r.Kernel() }

// Shape describes the pipelines and the kernel-only launch.
func (g *cudaMarkers) Shape() string {
	wait := "spinning"
	if g.opt.Sleep {
		wait = "asleep"
	}
	start := "first batches an eighth"
	if g.opt.FlatStart {
		start = "first batches whole"
	}
	if g.opt.RampDown {
		start += ", last batches at most half of what is left"
	}
	return fmt.Sprintf("pack: %d fillers, batches of %d KiB; gather and copy: %d fillers, batches of %d KiB, %s %d warps/SM; all: %s, %d streams, waits %s; kernel alone: %d payloads in %d segments each",
		g.opt.Fillers, g.opt.BatchBytes>>10, g.opt.GatherFillers, g.opt.GatherBatchBytes>>10, g.r.GatherKernel(), g.r.GatherWarpsPerSM(),
		start, g.r.Streams(), wait, g.n, g.r.PartsFor(g.n))
}

// RxRing maps n bytes of anonymous memory (rounded up to a page; outside
// the Go heap) and registers them with the device.
func (g *cudaMarkers) RxRing(n int) ([]byte, error) {
	if g.ring != nil {
		return nil, fmt.Errorf("bench re: one receive ring per GPU backend")
	}
	page := os.Getpagesize()
	mem, err := syscall.Mmap(-1, 0, (n+page-1)/page*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_POPULATE)
	if err != nil {
		return nil, fmt.Errorf("bench re: mapping a receive ring of %d bytes: %v", n, err)
	}
	h, err := g.r.RegisterHost(mem)
	if err != nil {
		syscall.Munmap(mem)
		return nil, err
	}
	pg, err := gpu.NewMarkerPipeline(g.r, gpu.PipelineConfig{Fillers: g.opt.GatherFillers, BatchBytes: g.opt.GatherBatchBytes,
		BatchPayloads: g.opt.GatherBatchBytes >> 10, FlatStart: g.opt.FlatStart, RampDown: g.opt.RampDown})
	if err != nil {
		g.r.UnregisterHost(h)
		syscall.Munmap(mem)
		return nil, err
	}
	g.ring, g.h, g.pg = mem, h, pg
	return mem[:n], nil
}

// via is the RegionVia of a by-reference path.
func via(path string) (gpu.RegionVia, error) {
	switch path {
	case "gather":
		return gpu.ViaGather, nil
	case "copy":
		return gpu.ViaCopy, nil
	}
	return 0, fmt.Errorf("bench re: path %q by reference: want gather or copy", path)
}

// BitmapRing runs the payloads, by reference into the ring, through the
// pipeline by the path's way in.
func (g *cudaMarkers) BitmapRing(path string, srcs, lens []uint32, bitmap []uint32) error {
	if g.h == nil {
		return fmt.Errorf("bench re: no receive ring")
	}
	v, err := via(path)
	if err != nil {
		return err
	}
	g.r.Via = v // no batch by reference is in flight between calls
	return g.pg.BitmapRegion(g.h, srcs, lens, bitmap)
}

// RingSeconds times the path's way in alone (rabin_gather, or the copy
// engine's runs) over all the payloads, by reference into the ring, in
// the kernel-only batch.
func (g *cudaMarkers) RingSeconds(path string, srcs, lens []uint32, iters int) (float64, error) {
	if g.h == nil || len(srcs) != len(lens) {
		return 0, fmt.Errorf("bench re: %s alone over %d sources, %d lengths (or no receive ring)", path, len(srcs), len(lens))
	}
	v, err := via(path)
	if err != nil {
		return 0, err
	}
	packed := 0
	for _, l := range lens {
		packed = (packed+rabin.PackAlign-1)/rabin.PackAlign*rabin.PackAlign + int(l)
	}
	if _, err := g.load(make([]byte, packed), make([]uint32, len(srcs)), make([]uint32, len(srcs))); err != nil {
		return 0, err
	}
	b := g.b
	b.Reset()
	b.Region = g.h
	defer func() { b.Region = nil }()
	for k := range srcs {
		if !b.AddRef(srcs[k], int(lens[k])) {
			return 0, fmt.Errorf("bench re: payload %d does not fit the kernel-only batch", k)
		}
	}
	g.r.Via = v
	if err := g.r.Submit(b); err != nil {
		return 0, err
	}
	if err := g.r.Wait(b); err != nil {
		return 0, err
	}
	var ms float64
	if v == gpu.ViaGather {
		ms, err = g.r.GatherTime(b, iters)
	} else {
		ms, err = g.r.CopyTime(b, iters)
	}
	return ms / 1e3, err
}

// CopyCounts returns the copy path's counters.
func (g *cudaMarkers) CopyCounts() (runs, payload, copied int64) {
	st := g.r.CopyStats()
	return st.Runs, st.PayloadBytes, st.CopiedBytes
}

// Close frees the batches, the receive ring, the kernel's resources and
// the device.
func (g *cudaMarkers) Close() {
	if g.b != nil {
		g.r.FreeBatch(g.b)
	}
	if g.h != nil {
		g.pg.Close()
		g.r.UnregisterHost(g.h)
		syscall.Munmap(g.ring)
	}
	g.p.Close()
	g.r.Close()
	g.c.Close()
}
