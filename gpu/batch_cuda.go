//go:build cuda

package gpu

/*
#include <cuda.h>
#include <string.h>

// gs_submit queues one batch in stream st with one cgo call: its key
// segments copied in (nseg segments of seg bytes, stride bytes apart on both
// sides: one for LPM and full flow batches, P for a flow batch holding fewer
// packets than its capacity, then in one two-dimensional copy, not P), the
// lookup kernel over n keys (every lookup kernel takes img, desc, nl, keys,
// out, n, stride), the results copied out, then, with a flag (a word of
// pinned host memory, 0: none), seq written to it once all that is done
// (cuStreamWriteValue32, after a memory fence: the results are in host
// memory before the flag), and the batch's event recorded. With seg and
// outBytes 0 nothing is copied: din and dout are then the batch's
// page-locked host memory, mapped (zeroCopyMax).
static CUresult gs_submit(CUstream st, CUfunction fn, unsigned grid, unsigned block, unsigned smem,
	CUdeviceptr img, CUdeviceptr desc, int nl,
	CUdeviceptr din, const void *hin, size_t seg, int nseg, size_t segStride,
	CUdeviceptr dout, void *hout, size_t outBytes, int n, int stride, CUevent ev,
	CUdeviceptr flag, unsigned seq)
{
	CUresult r = CUDA_SUCCESS;
	if (nseg > 1 && seg > 0) {
		CUDA_MEMCPY2D c;
		memset(&c, 0, sizeof c);
		c.srcMemoryType = CU_MEMORYTYPE_HOST;
		c.srcHost = hin;
		c.srcPitch = segStride;
		c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
		c.dstDevice = din;
		c.dstPitch = segStride;
		c.WidthInBytes = seg;
		c.Height = nseg;
		r = cuMemcpy2DAsync(&c, st);
	} else if (nseg == 1 && seg > 0) {
		r = cuMemcpyHtoDAsync(din, hin, seg, st);
	}
	if (r != CUDA_SUCCESS)
		return r;
	void *params[] = {&img, &desc, &nl, &din, &dout, &n, &stride};
	r = cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, smem, st, params, NULL);
	if (r != CUDA_SUCCESS)
		return r;
	if (outBytes > 0 && (r = cuMemcpyDtoHAsync(hout, dout, outBytes, st)) != CUDA_SUCCESS)
		return r;
	if (flag != 0) {
		r = cuStreamWriteValue32(st, flag, seq, CU_STREAM_WRITE_VALUE_DEFAULT);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return cuEventRecord(ev, st);
}

// gs_probe_flag writes 1 to flag in stream st and waits for the stream: it
// tells whether the device takes stream memory operations on pinned host
// memory.
static CUresult gs_probe_flag(CUstream st, CUdeviceptr flag)
{
	CUresult r = cuStreamWriteValue32(st, flag, 1, CU_STREAM_WRITE_VALUE_DEFAULT);
	if (r != CUDA_SUCCESS)
		return r;
	return cuStreamSynchronize(st);
}

// gs_smem_optin lets fn launch with up to bytes of dynamic shared memory.
static CUresult gs_smem_optin(CUfunction fn, int bytes)
{
	return cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
}

// gs_smem_max returns the most dynamic shared memory a block of ordinal may
// opt into.
static int gs_smem_max(int ordinal)
{
	CUdevice dev;
	int v = 0;
	if (cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS)
		return 0;
	if (cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev) != CUDA_SUCCESS)
		return 0;
	return v;
}

// gs_host_devptr returns the device address of pinned host memory p.
static CUresult gs_host_devptr(CUdeviceptr *d, void *p)
{
	return cuMemHostGetDevicePointer(d, p, 0);
}

// gs_wait makes ctx current on the calling thread and waits for ev.
static CUresult gs_wait(CUcontext ctx, CUevent ev)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	return cuEventSynchronize(ev);
}

// gs_query makes ctx current on the calling thread and asks whether ev has
// completed (CUDA_SUCCESS, CUDA_ERROR_NOT_READY, or an error).
static CUresult gs_query(CUcontext ctx, CUevent ev)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	return cuEventQuery(ev);
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// The gorgonia.org/cu handle types are single C handles; these views give
// this package's cgo the same handles.
func cStream(s cu.Stream) C.CUstream      { return *(*C.CUstream)(unsafe.Pointer(&s)) }
func cFunc(f cu.Function) C.CUfunction    { return *(*C.CUfunction)(unsafe.Pointer(&f)) }
func cEvent(e cu.Event) C.CUevent         { return *(*C.CUevent)(unsafe.Pointer(&e)) }
func cContext(x cu.CUContext) C.CUcontext { return *(*C.CUcontext)(unsafe.Pointer(&x)) }
func cDev(p cu.DevicePtr) C.CUdeviceptr   { return C.CUdeviceptr(p) }
func cuErr(r C.CUresult) error {
	var name *C.char
	if C.cuGetErrorName(r, &name) != C.CUDA_SUCCESS || name == nil {
		return fmt.Errorf("CUDA error %d", int(r))
	}
	return fmt.Errorf("%s (%d)", C.GoString(name), int(r))
}
func cuOK(r C.CUresult) bool                   { return r == C.CUDA_SUCCESS }
func wordsAt(p unsafe.Pointer, n int) []uint32 { return unsafe.Slice((*uint32)(p), n) }

// cudaBatch is what the CUDA backend keeps of a Batch: its pinned key and
// result memory, their device twins, and an event recorded after the
// batch's copy-out.
type cudaBatch struct {
	c         *CUDA
	hin, hout hostBuf
	din, dout devBuf
	done      cu.Event
	// flag is a word of pinned host memory the stream writes fseq to once
	// the batch's results are in (waitFlag; nil without: the other wait
	// modes, or a device without stream memory operations).
	flag      hostBuf
	fseq      uint32
	st        cu.Stream // a lookup slot's own stream (see CUDA.slot); else none: the streams in turn
	seq       uint64    // the scatters queued before it (CUDA.sseq), all done once it is
	empty     bool      // submitted with N == 0: nothing queued
	submitErr error
	// rslot is the batch's resident mailbox slot (-1: none), and rposted
	// whether its last Submit went there (resident_cuda.go).
	rslot   int
	rposted bool
}

// NewBatch allocates a batch in page-locked host memory with device buffers
// of the same size (see Batch).
func (c *CUDA) NewBatch(kind Kind, width, capacity int) (*Batch, error) {
	if err := checkNewBatch(kind, width, capacity); err != nil {
		return nil, err
	}
	var b *Batch
	err := c.do(func() error {
		var err error
		b, err = c.newBatch(kind, width, capacity)
		return err
	})
	return b, err
}

// newBatch runs on the owning goroutine.
func (c *CUDA) newBatch(kind Kind, width, capacity int) (*Batch, error) {
	if c.res != nil {
		// An allocation may wait for the whole device, and a kernel
		// launched before it does not know the new memory (compute-sanitizer
		// then reports its reads as out of bounds): the kernel is stopped,
		// and c.mu keeps a waiter from launching it again meanwhile.
		c.mu.Lock()
		defer c.mu.Unlock()
		c.res.stop()
	}
	cb := &cudaBatch{c: c, rslot: -1}
	inB, outB := int64(4*width)*int64(capacity), int64(4*capacity)
	var err error
	if cb.hin, err = allocHost(max(inB, 4)); err == nil {
		if cb.hout, err = allocHost(outB); err == nil {
			if cb.din, err = c.alloc(inB); err == nil {
				if cb.dout, err = c.alloc(outB); err == nil && waitMode == waitFlag && c.memOps {
					if cb.flag, err = allocHost(64); err == nil { // a cache line of its own
						*(*uint32)(cb.flag.p) = 0 // fseq starts at 1
					}
				}
				if err == nil {
					flags := cu.DisableTiming
					if waitMode != waitSpin {
						flags |= cu.BlockingSyncEvent
					}
					cb.done, err = cu.MakeEvent(flags)
				}
			}
		}
	}
	if err != nil {
		cb.release()
		return nil, fmt.Errorf("gpu: cuda: batch of %d keys: %v", capacity, err)
	}
	if c.res != nil && kind == Flow && cb.flag.n != 0 {
		cb.rslot = c.res.take()
	}
	b := &Batch{Kind: kind, Width: width, Cap: capacity, impl: cb,
		Keys: wordsAt(cb.hin.p, width*capacity), Out: wordsAt(cb.hout.p, capacity)}
	return b, nil
}

func (cb *cudaBatch) release() {
	cb.c.res.stop() // the frees below wait for the whole device
	if cb.rslot >= 0 {
		cb.c.res.put(cb.rslot)
		cb.rslot = -1
	}
	cb.hin.free()
	cb.hout.free()
	cb.flag.free()
	cb.c.free(&cb.din)
	cb.c.free(&cb.dout)
	if cb.done != (cu.Event{}) {
		cu.DestroyEvent(&cb.done)
	}
}

func (cb *cudaBatch) free(*Batch) {
	cb.c.do(func() error { cb.release(); return nil })
}

// wait runs on the caller's goroutine: the context is made current on its
// thread for the event's synchronisation.
func (cb *cudaBatch) wait(*Batch) error {
	if cb.submitErr != nil || cb.empty {
		return cb.submitErr
	}
	if cb.rposted {
		cb.rposted = false
		if err := cb.c.residentWait(cb); err != nil {
			return err
		}
	} else if err := cb.streamWait(); err != nil {
		return err
	}
	for d := cb.c.doneSeq.Load(); d < cb.seq && !cb.c.doneSeq.CompareAndSwap(d, cb.seq); d = cb.c.doneSeq.Load() {
	}
	return nil
}

// streamWait waits for a batch queued in a stream: its flag word, else its
// event, as waitMode says.
func (cb *cudaBatch) streamWait() error {
	ctx, ev := cContext(cb.c.ctx), cEvent(cb.done)
	var r C.CUresult
	switch {
	case cb.flag.n != 0:
		r = flagWait((*uint32)(cb.flag.p), cb.fseq, ctx, ev)
	case waitMode == waitYield || waitMode == waitFlag:
		r = yieldWait(ctx, ev)
	default:
		r = C.gs_wait(ctx, ev)
	}
	if !cuOK(r) {
		return fmt.Errorf("gpu: cuda: lookup: %v", cuErr(r))
	}
	return nil
}

// ready reports whether the batch's results are in (or it failed, or
// nothing was queued), without waiting: its flag word, else its event.
func (cb *cudaBatch) ready(*Batch) bool {
	if cb.submitErr != nil || cb.empty {
		return true
	}
	if cb.rposted {
		return cb.c.residentReady(cb)
	}
	if cb.flag.n != 0 {
		return atomic.LoadUint32((*uint32)(cb.flag.p)) == cb.fseq
	}
	return C.gs_query(cContext(cb.c.ctx), cEvent(cb.done)) != C.CUDA_ERROR_NOT_READY
}

// yieldWait polls ev, yielding the processor to the other goroutines
// between polls, for at most yieldFor, then sleeps in the driver (the
// event is blocking-sync in this mode) — see waitMode. Polls are at least
// pollEvery apart (a poll is a cgo call and a driver query, about a
// microsecond): while other goroutines run, the waiter yields in between
// without asking the device.
func yieldWait(ctx C.CUcontext, ev C.CUevent) C.CUresult {
	t0 := time.Now()
	var last time.Duration
	for {
		if d := time.Since(t0); d >= yieldFor {
			return C.gs_wait(ctx, ev)
		} else if last == 0 || d-last >= pollEvery {
			last = max(d, 1)
			if r := C.gs_query(ctx, ev); r != C.CUDA_ERROR_NOT_READY {
				return r
			}
		}
		runtime.Gosched()
	}
}

// flagWait waits for the word at flag to read seq (the stream's write
// after the batch's copy-out), yielding the processor to the other
// goroutines between reads: a read is a load from host memory, no cgo
// call and no driver. After yieldFor it sleeps in the driver on the
// batch's event (blocking-sync), which also returns the error of a batch
// the device failed (its stream stops before the write).
func flagWait(flag *uint32, seq uint32, ctx C.CUcontext, ev C.CUevent) C.CUresult {
	t0 := time.Now()
	for i := 0; atomic.LoadUint32(flag) != seq; i++ {
		if i&15 == 15 && time.Since(t0) >= yieldFor {
			return C.gs_wait(ctx, ev)
		}
		runtime.Gosched()
	}
	return C.CUDA_SUCCESS
}

// Submit queues b's lookups in table id (see Backend): after any queued
// bubbles' scatter, its copy-in, kernel and copy-out in the next stream in
// turn, all on the caller's goroutine with the context made current on its
// thread, under the mutex that orders them after every Apply that returned.
func (c *CUDA) Submit(id TableID, b *Batch) error {
	var cb *cudaBatch
	if b != nil {
		cb, _ = b.impl.(*cudaBatch)
	}
	if cb == nil || cb.c != c {
		return fmt.Errorf("gpu: cuda: submit of a batch this backend did not make")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.tableLocked(id)
	if err != nil {
		return err
	}
	if err := checkSubmit(b, t.kind, t.keyWidth()); err != nil {
		return err
	}
	cb.empty, cb.submitErr, cb.rposted = b.N == 0, nil, false
	b.sub = true
	if b.N == 0 {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if r := C.cuCtxSetCurrent(cContext(c.ctx)); !cuOK(r) {
		cb.submitErr = fmt.Errorf("gpu: cuda: %v", cuErr(r))
		return nil
	}
	if err := c.flushLocked(); err != nil {
		cb.submitErr = err
		return nil
	}
	cb.seq = c.sseq
	if r := c.res; r != nil && cb.rslot >= 0 && r.takes(t, b.N) && r.scattered(c.sseq) {
		cb.submitErr = r.post(t, b, cb, c.rver)
		return nil
	}
	st := cb.st
	if st == cu.NoStream {
		c.rr++
		st = c.streams[c.rr%len(c.streams)]
	}
	cb.submitErr = c.queue(st, t, b, cb)
	return nil
}

// queue queues b in st (see gs_submit); the caller holds c.mu.
func (c *CUDA) queue(st cu.Stream, t *cudaTable, b *Batch, cb *cudaBatch) error {
	fn, nl, threads := c.fn4, t.nl, b.N
	switch t.kind {
	case LPM6:
		fn = c.fn6
	case Flow:
		mode := flowMode(t.flay, b.N)
		fn, nl, threads = t.ffn, int64(mode), flowThreads(mode, b.N)
	}
	seg, nseg, stride := 4*int64(b.Width)*int64(b.N), 1, int64(0)
	if t.kind == Flow && b.N < b.Cap {
		// SoA columns are Cap words apart: copy the P filled column parts.
		seg, nseg, stride = 4*int64(b.N), b.Width, 4*int64(b.Cap)
	}
	grid := c.gridFor(fn, threads)
	if t.grid > 0 {
		grid = max(1, min((threads+blockSize-1)/blockSize, t.grid))
	}
	var flag C.CUdeviceptr
	if cb.flag.n != 0 {
		cb.fseq++
		flag = C.CUdeviceptr(uintptr(cb.flag.p)) // pinned memory: the same address on the device (unified addressing)
	}
	din, dout, outBytes := cDev(cb.din.p), cDev(cb.dout.p), 4*int64(b.N)
	if t.kind == Flow && b.N <= zeroCopyMax {
		// The kernel reads the keys and writes the results in the
		// batch's pinned host memory (the same addresses on the device).
		din, dout = C.CUdeviceptr(uintptr(cb.hin.p)), C.CUdeviceptr(uintptr(cb.hout.p))
		seg, outBytes = 0, 0
	}
	r := C.gs_submit(cStream(st), cFunc(fn), C.uint(grid), blockSize, C.uint(t.smem),
		cDev(t.img.p), cDev(t.desc.p), C.int(nl),
		din, cb.hin.p, C.size_t(seg), C.int(nseg), C.size_t(stride),
		dout, cb.hout.p, C.size_t(outBytes), C.int(b.N), C.int(b.Cap), cEvent(cb.done),
		flag, C.uint(cb.fseq))
	if !cuOK(r) {
		return fmt.Errorf("gpu: cuda: queueing a batch of %d: %v", b.N, cuErr(r))
	}
	return nil
}

// gridFor returns the grid of a launch of fn over n items: one thread per
// item, capped at what the device holds resident at once (the occupancy of
// fn at blockSize threads per block); the kernels loop grid-stride.
func (c *CUDA) gridFor(fn cu.Function, n int) int {
	limit := c.maxGrid
	if g, ok := c.occ[fn]; ok {
		limit = g
	}
	return max(1, min((n+blockSize-1)/blockSize, limit))
}

// smemOptIn lets fn launch with up to bytes of dynamic shared memory (above
// the default 48 KB a kernel must opt in).
func smemOptIn(fn cu.Function, bytes int) error {
	if r := C.gs_smem_optin(cFunc(fn), C.int(bytes)); !cuOK(r) {
		return fmt.Errorf("gpu: cuda: %d bytes of shared memory: %v", bytes, cuErr(r))
	}
	return nil
}

// smemMax returns the most shared memory a block of device ordinal may opt
// into (0 if the driver does not say).
func smemMax(ordinal int) int { return int(C.gs_smem_max(C.int(ordinal))) }

// hostDevPtr returns the device address of pinned host memory p (mapped
// into the device's address space: with unified addressing, the same value).
func hostDevPtr(p unsafe.Pointer) (cu.DevicePtr, error) {
	var d C.CUdeviceptr
	if r := C.gs_host_devptr(&d, p); !cuOK(r) {
		return 0, fmt.Errorf("gpu: cuda: device address of pinned memory: %v", cuErr(r))
	}
	return cu.DevicePtr(d), nil
}

// probeFlags reports whether stream st can write a completion flag into
// pinned host memory (cuStreamWriteValue32; see waitFlag), by doing it
// once; it runs on the owning goroutine.
func probeFlags(st cu.Stream) bool {
	h, err := allocHost(64)
	if err != nil {
		return false
	}
	defer h.free()
	*(*uint32)(h.p) = 0
	r := C.gs_probe_flag(cStream(st), C.CUdeviceptr(uintptr(h.p)))
	return cuOK(r) && atomic.LoadUint32((*uint32)(h.p)) == 1
}
