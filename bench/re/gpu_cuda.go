//go:build cuda

package re

import (
	"fmt"

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
}

func openGPUMarkers(pol rabin.Pol, window, bits int, opt GPUOptions) (GPUMarkers, error) {
	m, err := rabin.NewMarker(pol, window, bits)
	if err != nil {
		return nil, err
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
	// A batch's index (offsets and lengths) is copied in with it, sized
	// for payloads of 1 KiB on average: a batch of shorter ones is cut by
	// its count before its bytes.
	p, err := gpu.NewMarkerPipeline(r, gpu.PipelineConfig{Fillers: opt.Fillers, BatchBytes: opt.BatchBytes,
		BatchPayloads: opt.BatchBytes >> 10, FlatStart: opt.FlatStart})
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

// Shape describes the pipeline and the kernel-only launch.
func (g *cudaMarkers) Shape() string {
	wait := "spinning"
	if g.opt.Sleep {
		wait = "asleep"
	}
	start := "first batches an eighth"
	if g.opt.FlatStart {
		start = "first batches whole"
	}
	return fmt.Sprintf("%d fillers, batches of %d KiB (%s), %d streams, waits %s; kernel alone: %d payloads in %d segments each",
		g.opt.Fillers, g.opt.BatchBytes>>10, start, g.r.Streams(), wait, g.n, g.r.PartsFor(g.n))
}

// Close frees the batches, the kernel's resources and the device.
func (g *cudaMarkers) Close() {
	if g.b != nil {
		g.r.FreeBatch(g.b)
	}
	g.p.Close()
	g.r.Close()
	g.c.Close()
}
