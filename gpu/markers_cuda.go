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
// on the caller's goroutine (the context made current on its thread), and
// several goroutines may submit and wait for batches of their own at once
// (MarkerPipeline does); setting up and freeing hop to the CUDA backend's
// owning goroutine.
//
// The fixed-window kernels (w 16, 32, 48, 64) cut each payload into
// segments, a thread each (the kernel's parts): enough threads to fill the
// GPU with a small batch, at the price of hashing ceil((w-1)/32)·32 bytes
// again per segment. Parts, when set before the first Submit, fixes their
// number (1..64); 0 picks it per batch (markerParts).
//
// BlockingWait, when set before NewBatch, makes Wait on that batch sleep
// until the batch is done instead of spinning on a core (CUDA's default):
// for many goroutines waiting at once beside goroutines that need the
// cores (MarkerPipeline's fillers), at the price of a wake-up latency.
//
// Via is how batches by reference (a Region) reach the device: ViaCopy
// (the default: the copy engine moves runs of frames out of the region
// with 2-D copies, markers_copy_cuda.go) or ViaGather (rabin_gather reads
// the region over PCIe); set it while no batch by reference is in flight.
// GatherWarps, when set before the first Submit, is the warps per SM of
// rabin_gather (0: gatherWarpsPerSM); Gather16 launches rabin_gather16
// instead on the gather path (loads from each payload's own 16-byte word
// rather than whole 128-byte lines: the variant measured against).
type RabinMarkers struct {
	Parts        int
	BlockingWait bool
	Via          RegionVia
	GatherWarps  int
	Gather16     bool

	c       *CUDA
	m       *rabin.Marker
	mod     cu.Module
	fn      cu.Function
	gfn     cu.Function // rabin_gather (batches by reference)
	gfn16   cu.Function // rabin_gather16
	ptx     string
	tabs    devBuf
	shift   int
	streams []cu.Stream
	rr      atomic.Uint32
	owned   bool // Close closes c too (OpenMarkers made it)
	once    sync.Once
	cstats  copyCounters
}

type markerTwin struct {
	// The index: the offsets then the lengths, capacity words each, so
	// that one copy moves both (the offsets and the first N lengths);
	// then the sources of a batch by reference (a gather copies the
	// offsets, the lengths and the first N sources).
	hbuf, hidx, hbm hostBuf
	dbuf, didx, dbm devBuf
	capacity        int
	ev              cu.Event
	submitted       bool
	cp              *copyTwin // the copy path's staging (batches by reference, ViaCopy)
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
		if r.gfn, err = r.mod.Function("rabin_gather"); err != nil {
			return fmt.Errorf("gpu: cuda: kernel rabin_gather: %v", err)
		}
		if r.gfn16, err = r.mod.Function("rabin_gather16"); err != nil {
			return fmt.Errorf("gpu: cuda: kernel rabin_gather16: %v", err)
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
	if bytes < 0 || payloads < 0 || bytes > 1<<31-64 || payloads > 1<<24 {
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
		}{{&t.hbuf, &t.dbuf, packedBytes(bytes)}, {&t.hidx, &t.didx, 12 * int64(payloads)}, {&t.hbm, &t.dbm, bmBytes}} {
			if *a.h, err = allocHost(max(a.n, 4)); err != nil {
				return err
			}
			if *a.d, err = r.c.alloc(a.n); err != nil {
				return err
			}
		}
		flags := cu.DisableTiming
		if r.BlockingWait {
			flags |= cu.BlockingSyncEvent
		}
		t.ev, err = cu.MakeEvent(flags)
		return err
	})
	if err != nil {
		r.c.do(func() error { t.release(r.c); return nil })
		return nil, err
	}
	t.capacity = payloads
	return &MarkerBatch{Buf: t.hbuf.bytes(int64(bytes)), Offs: wordsAt(t.hidx.p, payloads),
		Lens:   wordsAt(unsafe.Add(t.hidx.p, 4*payloads), payloads),
		Srcs:   wordsAt(unsafe.Add(t.hidx.p, 8*payloads), payloads),
		Bitmap: wordsAt(t.hbm.p, rabin.BitmapWords(bytes)), impl: t}, nil
}

func (t *markerTwin) release(c *CUDA) {
	for _, h := range []*hostBuf{&t.hbuf, &t.hidx, &t.hbm} {
		h.free()
	}
	for _, d := range []*devBuf{&t.dbuf, &t.didx, &t.dbm} {
		c.free(d)
	}
	t.cp.release(c)
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

// markerBlock is the block of a launch over n threads: small enough that
// each SM gets four blocks where n allows (fewer, larger blocks leave some
// SMs a block more than others: 20,000 payloads in 4 segments ran 15%
// slower in blocks of 256 than of 128 on an H200).
func markerBlock(n, sms int) int {
	b := 256
	for b > 32 && n < 4*sms*b {
		b /= 2
	}
	return b
}

// markerThreadsPerSM is how many threads a launch of the fixed-window
// kernels aims at per SM: a quarter of the 2,048 resident threads already
// hides the look-ups' latency, and the shared-memory look-ups, not the
// latency, bound the kernel past that (H200, 2026-11-26: 20,000 payloads
// in 4 segments 4.1 Tbit/s, in 8 4.0, 131,072 payloads in 1 segment 4.7
// and in 4 segments 4.6).
const markerThreadsPerSM = 512

// markerParts is the number of segments per payload for a batch of n
// payloads: 1 for the generic kernel, else enough threads for
// markerThreadsPerSM on each SM, at most 8.
func (r *RabinMarkers) markerParts(n int) int {
	if rabinKernel(r.m.W) == "rabin_markers" || n < 1 {
		return 1
	}
	if r.Parts > 0 {
		return min(r.Parts, 64)
	}
	return min(max((markerThreadsPerSM*r.c.sms+n-1)/n, 1), 8)
}

// launchShape returns the grid, block and parts of a launch over b.
func (r *RabinMarkers) launchShape(b *MarkerBatch) (grid, block, parts int) {
	parts = r.markerParts(b.N)
	block = markerBlock(b.N*parts, r.c.sms)
	return (b.N*parts + block - 1) / block, block, parts
}

// packedBytes is the bytes of a batch of n packed bytes that are copied
// in: n rounded up to the 32-byte block the kernels load whole.
func packedBytes(n int) int64 { return int64(n+rabin.PackAlign-1) / rabin.PackAlign * rabin.PackAlign }

// Submit queues b's copy-in (bytes, offsets, lengths), the kernel and the
// bitmap's copy-out in the next stream; for a batch by reference (a
// Region), the copy-in of its index, rabin_gather into the device's
// compact buffer (reading the region itself, ViaGather, or a staging
// buffer the copy engine's runs filled first, ViaCopy), the kernel and
// the copy-out.
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
	if b.Region != nil {
		submit := r.submitCopy
		if r.Via == ViaGather {
			submit = r.submitGather
		}
		if err := submit(b, t); err != nil {
			b.err = fmt.Errorf("gpu: cuda: markers: %v", err)
			return b.err
		}
		t.submitted = true
		return nil
	}
	clear(t.hbuf.bytes(packedBytes(b.Bytes))[b.Bytes:]) // the block past the last payload, copied in whole
	grid, block, parts := r.launchShape(b)
	a := newCArgs(11)
	defer a.free()
	params := r.params(a, t, b, parts)
	st := r.nextStream()
	copies := []auxCopy{{t.dbuf.p, t.hbuf.p, packedBytes(b.Bytes)}, {t.didx.p, t.hidx.p, 4 * int64(t.capacity+b.N)}}
	outs := []auxOut{{t.hbm.p, t.dbm.p, 4 * int64(rabin.BitmapWords(b.Bytes))}}
	if err := r.c.auxQueue(st, copies, nil, r.fn, grid, block, 0, params, outs, t.ev, cu.Event{}); err != nil {
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
	if b.Region != nil && r.Via == ViaCopy {
		// Its index went to the copy path's own device twin.
		return 0, fmt.Errorf("gpu: cuda: kernel time of a batch by reference through the copy path")
	}
	grid, block, parts := r.launchShape(b)
	a := newCArgs(11)
	defer a.free()
	params := r.params(a, t, b, parts)
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
func (r *RabinMarkers) params(a *cArgs, t *markerTwin, b *MarkerBatch, parts int) []unsafe.Pointer {
	return r.paramsAt(a, t, b, parts, uint64(t.didx.p), uint64(t.didx.p)+4*uint64(t.capacity))
}

// paramsAt is params with the offsets and lengths at device addresses
// offs and lens.
func (r *RabinMarkers) paramsAt(a *cArgs, t *markerTwin, b *MarkerBatch, parts int, offs, lens uint64) []unsafe.Pointer {
	return []unsafe.Pointer{a.u64(uint64(t.dbuf.p)), a.u64(offs), a.u64(lens),
		a.u32(uint32(b.N)), a.u64(uint64(r.tabs.p)), a.u32(uint32(r.m.W)), a.u32(uint32(r.shift)),
		a.u32(uint32(r.m.Mask())), a.u32(uint32(r.m.Mask() >> 32)), a.u64(uint64(t.dbm.p)), a.u32(uint32(parts))}
}

// Streams returns the number of streams batches go over.
func (r *RabinMarkers) Streams() int { return len(r.streams) }

// PartsFor returns the segments per payload a batch of n payloads is
// launched with.
func (r *RabinMarkers) PartsFor(n int) int { return r.markerParts(n) }

// CopyRates measures the PCIe copy bandwidth between page-locked host
// memory and the device on this context (the end-to-end ceiling of any
// batch that is copied in and out): iters copies of bytes bytes each way,
// timed with CUDA events after a warm-up, in GB/s (10^9 bytes/s).
func (c *CUDA) CopyRates(bytes int64, iters int) (h2d, d2h float64, err error) {
	if bytes < 1 || iters < 1 {
		return 0, 0, fmt.Errorf("gpu: cuda: copy rates over %d bytes, %d copies", bytes, iters)
	}
	err = c.do(func() error {
		h, err := allocHost(bytes)
		if err != nil {
			return err
		}
		defer h.free()
		clear(h.bytes(bytes))
		d, err := c.alloc(bytes)
		if err != nil {
			return err
		}
		defer c.free(&d)
		st, err := cu.MakeStream(cu.NonBlocking)
		if err != nil {
			return fmt.Errorf("gpu: cuda: stream: %v", err)
		}
		defer st.Destroy()
		up, err := timeEvents(st, iters, func(st cu.Stream) error { return cu.MemcpyHtoDAsync(d.p, h.p, bytes, st) })
		if err != nil {
			return fmt.Errorf("gpu: cuda: copy in: %v", err)
		}
		down, err := timeEvents(st, iters, func(st cu.Stream) error { return cu.MemcpyDtoHAsync(h.p, d.p, bytes, st) })
		if err != nil {
			return fmt.Errorf("gpu: cuda: copy out: %v", err)
		}
		h2d, d2h = float64(bytes)/(up*1e6), float64(bytes)/(down*1e6)
		return nil
	})
	return h2d, d2h, err
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
