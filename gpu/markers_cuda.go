//go:build cuda

package gpu

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/kernels"
	"github.com/gswitch/gswitch/tables/rabin"
)

// OpenMarkers returns the Markers of backend "cpu", "gpu" (device 0; an
// error if it does not open) or "auto" (device 0 if it opens, else the
// CPU).
func OpenMarkers(backend string, m *rabin.Marker) (Markers, error) {
	switch backend {
	case "cpu":
		return CPUMarkers{m}, nil
	case "gpu", "auto":
		c, err := NewCUDA(0)
		if err == nil {
			var rm *RabinMarkers
			if rm, err = c.RabinMarkers(m, 4); err == nil {
				rm.owned = true
				return rm, nil
			}
			c.Close()
		}
		if backend == "auto" {
			return CPUMarkers{m}, nil
		}
		return nil, err
	}
	return nil, fmt.Errorf("gpu: markers backend %q: want auto, cpu or gpu", backend)
}

// RabinMarkers computes marker bitmaps on the GPU (kernels/rabin.cu): the
// tables in device memory, batches in page-locked host memory with device
// twins, queued round robin over its own streams so that the copy-in,
// kernel and copy-out of consecutive batches overlap. Submit and Wait run
// on the caller's goroutine (the context made current on its thread);
// setting up and freeing hop to the CUDA backend's owning goroutine.
type RabinMarkers struct {
	c       *CUDA
	m       *rabin.Marker
	mod     cu.Module
	fn      cu.Function
	ptx     string
	tabs    devBuf
	shift   int
	streams []cu.Stream
	rr      atomic.Uint32
	owned   bool // Close closes c too (OpenMarkers made it)
	once    sync.Once
}

type markerTwin struct {
	hbuf, hoffs, hlens, hbm hostBuf
	dbuf, doffs, dlens, dbm devBuf
	ev                      cu.Event
	submitted               bool
}

// rabinKernel names the kernel for window w: a fixed-window one where
// rabin.cu has it.
func rabinKernel(w int) string {
	switch w {
	case 16, 32, 48, 64:
		return fmt.Sprintf("rabin_markers_w%d", w)
	}
	return "rabin_markers"
}

// RabinMarkers loads the markers kernel (on first use of the module) and
// uploads m's tables; batches go over streams streams (1..16).
func (c *CUDA) RabinMarkers(m *rabin.Marker, streams int) (*RabinMarkers, error) {
	if streams < 1 || streams > 16 {
		return nil, fmt.Errorf("gpu: cuda: markers over %d streams: want 1..16", streams)
	}
	r := &RabinMarkers{c: c, m: m}
	tabs, shift := m.TableWords()
	r.shift = shift
	err := c.do(func() error {
		var err error
		if r.mod, r.ptx, err = c.loadAux("rabin", kernels.Rabinsm90, kernels.Rabincompute80); err != nil {
			return err
		}
		if r.fn, err = r.mod.Function(rabinKernel(m.W)); err != nil {
			return fmt.Errorf("gpu: cuda: kernel %s: %v", rabinKernel(m.W), err)
		}
		if r.tabs, err = c.alloc(8 * 512); err != nil {
			return err
		}
		if err := cu.MemcpyHtoD(r.tabs.p, unsafe.Pointer(&tabs[0]), 8*512); err != nil {
			return fmt.Errorf("gpu: cuda: %v", err)
		}
		for i := 0; i < streams; i++ {
			s, err := cu.MakeStream(cu.NonBlocking)
			if err != nil {
				return fmt.Errorf("gpu: cuda: stream: %v", err)
			}
			r.streams = append(r.streams, s)
		}
		return nil
	})
	if err != nil {
		r.release()
		return nil, err
	}
	return r, nil
}

// Name returns "cuda".
func (r *RabinMarkers) Name() string { return "cuda" }

// Kernel returns the kernel's name and the PTX it came from.
func (r *RabinMarkers) Kernel() string { return rabinKernel(r.m.W) + " (" + r.ptx + ")" }

// NewBatch allocates a batch in page-locked memory and its device twin.
func (r *RabinMarkers) NewBatch(bytes, payloads int) (*MarkerBatch, error) {
	if bytes < 0 || payloads < 0 || bytes > 1<<31 {
		return nil, fmt.Errorf("gpu: marker batch of %d bytes, %d payloads", bytes, payloads)
	}
	t := &markerTwin{}
	bmBytes := int64(4 * rabin.BitmapWords(bytes))
	err := r.c.do(func() error {
		var err error
		for _, a := range []struct {
			h *hostBuf
			d *devBuf
			n int64
		}{{&t.hbuf, &t.dbuf, int64(bytes)}, {&t.hoffs, &t.doffs, 4 * int64(payloads)},
			{&t.hlens, &t.dlens, 4 * int64(payloads)}, {&t.hbm, &t.dbm, bmBytes}} {
			if *a.h, err = allocHost(max(a.n, 4)); err != nil {
				return err
			}
			if *a.d, err = r.c.alloc(a.n); err != nil {
				return err
			}
		}
		t.ev, err = cu.MakeEvent(cu.DisableTiming)
		return err
	})
	if err != nil {
		r.c.do(func() error { t.release(r.c); return nil })
		return nil, err
	}
	return &MarkerBatch{Buf: t.hbuf.bytes(int64(bytes)), Offs: wordsAt(t.hoffs.p, payloads), Lens: wordsAt(t.hlens.p, payloads),
		Bitmap: wordsAt(t.hbm.p, rabin.BitmapWords(bytes)), impl: t}, nil
}

func (t *markerTwin) release(c *CUDA) {
	for _, h := range []*hostBuf{&t.hbuf, &t.hoffs, &t.hlens, &t.hbm} {
		h.free()
	}
	for _, d := range []*devBuf{&t.dbuf, &t.doffs, &t.dlens, &t.dbm} {
		c.free(d)
	}
	if t.ev != (cu.Event{}) {
		cu.DestroyEvent(&t.ev)
	}
}

// FreeBatch frees b's host and device memory.
func (r *RabinMarkers) FreeBatch(b *MarkerBatch) {
	if t, ok := b.impl.(*markerTwin); ok {
		r.c.do(func() error { t.release(r.c); return nil })
		b.impl = nil
	}
}

func (r *RabinMarkers) twin(b *MarkerBatch) (*markerTwin, error) {
	t, _ := b.impl.(*markerTwin)
	if t == nil {
		return nil, fmt.Errorf("gpu: cuda: a marker batch these markers did not make")
	}
	return t, nil
}

// markerBlock is the block of a launch over n payloads: small enough that
// the blocks cover every SM twice where n allows (one thread per payload).
func markerBlock(n, sms int) int {
	b := 256
	for b > 32 && n < 2*sms*b {
		b /= 2
	}
	return b
}

// Submit queues b's copy-in (bytes, offsets, lengths), the kernel and the
// bitmap's copy-out in the next stream.
func (r *RabinMarkers) Submit(b *MarkerBatch) error {
	t, err := r.twin(b)
	if err != nil {
		return err
	}
	t.submitted = false
	if b.err = b.check(); b.err != nil {
		return b.err
	}
	if b.N == 0 {
		return nil
	}
	if r.c.closed.Load() {
		return ErrClosed
	}
	block := markerBlock(b.N, r.c.sms)
	grid := (b.N + block - 1) / block
	a := newCArgs(10)
	defer a.free()
	params := r.params(a, t, b)
	st := r.streams[int(r.rr.Add(1))%len(r.streams)]
	copies := []auxCopy{{t.dbuf.p, t.hbuf.p, int64(b.Bytes)}, {t.doffs.p, t.hoffs.p, 4 * int64(b.N)},
		{t.dlens.p, t.hlens.p, 4 * int64(b.N)}}
	outs := []auxOut{{t.hbm.p, t.dbm.p, 4 * int64(rabin.BitmapWords(b.Bytes))}}
	if err := r.c.auxQueue(st, copies, nil, r.fn, grid, block, 0, params, outs, t.ev); err != nil {
		b.err = fmt.Errorf("gpu: cuda: markers: %v", err)
		return b.err
	}
	t.submitted = true
	return nil
}

// Wait waits for b's bitmap.
func (r *RabinMarkers) Wait(b *MarkerBatch) error {
	t, err := r.twin(b)
	if err != nil {
		return err
	}
	if b.err != nil || !t.submitted {
		return b.err
	}
	t.submitted = false
	if err := r.c.auxWait(t.ev); err != nil {
		b.err = fmt.Errorf("gpu: cuda: markers: %v", err)
	}
	return b.err
}

// KernelTime times iters launches of the kernel alone over b (already
// submitted and waited for once, so its bytes are on the device) with CUDA
// events and returns the milliseconds per launch.
func (r *RabinMarkers) KernelTime(b *MarkerBatch, iters int) (float64, error) {
	t, err := r.twin(b)
	if err != nil {
		return 0, err
	}
	if b.N == 0 {
		return 0, nil
	}
	block := markerBlock(b.N, r.c.sms)
	grid := (b.N + block - 1) / block
	a := newCArgs(10)
	defer a.free()
	params := r.params(a, t, b)
	var ms float64
	err = r.c.do(func() error {
		ms, err = timeEvents(r.streams[0], iters, func(st cu.Stream) error {
			return r.fn.Launch(grid, 1, 1, block, 1, 1, 0, st, params)
		})
		return err
	})
	return ms, err
}

// params stores the kernel's arguments for batch b in a.
func (r *RabinMarkers) params(a *cArgs, t *markerTwin, b *MarkerBatch) []unsafe.Pointer {
	return []unsafe.Pointer{a.u64(uint64(t.dbuf.p)), a.u64(uint64(t.doffs.p)), a.u64(uint64(t.dlens.p)),
		a.u32(uint32(b.N)), a.u64(uint64(r.tabs.p)), a.u32(uint32(r.m.W)), a.u32(uint32(r.shift)),
		a.u32(uint32(r.m.Mask())), a.u32(uint32(r.m.Mask() >> 32)), a.u64(uint64(t.dbm.p))}
}

// Close frees the tables and streams (and the CUDA backend, if
// OpenMarkers started it).
func (r *RabinMarkers) Close() error {
	var err error
	r.once.Do(func() {
		r.release()
		if r.owned {
			err = r.c.Close()
		}
	})
	return err
}

func (r *RabinMarkers) release() {
	r.c.do(func() error {
		for i := range r.streams {
			r.streams[i].Destroy()
		}
		r.streams = nil
		r.c.free(&r.tabs)
		if r.mod != (cu.Module{}) {
			r.mod.Unload()
		}
		return nil
	})
}

var _ Markers = (*RabinMarkers)(nil)

// deviceMarkers returns RabinMarkers on b when it is a CUDA backend.
func deviceMarkers(b Backend, m *rabin.Marker) (Markers, error) {
	c, ok := b.(*CUDA)
	if !ok {
		return nil, ErrNoMarkersGPU
	}
	return c.RabinMarkers(m, 4)
}
