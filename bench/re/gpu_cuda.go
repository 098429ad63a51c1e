//go:build cuda

package re

import (
	"fmt"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rabin"
)

// In the cuda build the benchmark's GPU seam is package gpu's RabinMarkers
// (kernels/rabin.cu) on device 0.
func init() { NewGPUMarkers = openGPUMarkers }

// cudaMarkers is GPUMarkers over gpu.RabinMarkers: one page-locked batch,
// grown to the largest buffer it was given.
type cudaMarkers struct {
	c *gpu.CUDA
	r *gpu.RabinMarkers
	b *gpu.MarkerBatch
}

func openGPUMarkers(pol rabin.Pol, window, bits int) (GPUMarkers, error) {
	m, err := rabin.NewMarker(pol, window, bits)
	if err != nil {
		return nil, err
	}
	c, err := gpu.NewCUDA(0)
	if err != nil {
		return nil, err
	}
	r, err := c.RabinMarkers(m, 4)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &cudaMarkers{c: c, r: r}, nil
}

// load copies the packed payloads into the batch (grown if needed).
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
	return b, nil
}

// Bitmap copies the buffer in, runs the kernel and copies the bitmap out.
func (g *cudaMarkers) Bitmap(buf []byte, offs, lens []uint32, bitmap []uint32) error {
	b, err := g.load(buf, offs, lens)
	if err != nil {
		return err
	}
	if err := g.r.Submit(b); err != nil {
		return err
	}
	if err := g.r.Wait(b); err != nil {
		return err
	}
	copy(bitmap, b.Bitmap[:rabin.BitmapWords(len(buf))])
	return nil
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

// Device names the GPU.
func (g *cudaMarkers) Device() string { return g.c.Device() + ", " + g.r.Kernel() }

// Close frees the batch, the kernel's resources and the device.
func (g *cudaMarkers) Close() {
	if g.b != nil {
		g.r.FreeBatch(g.b)
	}
	g.r.Close()
	g.c.Close()
}
