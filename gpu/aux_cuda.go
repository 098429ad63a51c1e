//go:build cuda

package gpu

/*
#include <cuda.h>
#include <stdlib.h>

// gs_aux_queue queues, in stream st with the context made current on the
// calling thread: ncopy host-to-device copies (hsrc[i] -> ddst[i], nbytes[i]
// bytes, zero-length ones skipped), nzero device words zeroed (zptr[i],
// zwords[i]), one launch of fn (params; none if grid is 0), the record of
// evk right after it (when evk is not NULL), nout device-to-host copies
// (osrc[i] -> odst[i], obytes[i]) and the record of ev: the shape of every
// batch of the markers, matching and filter kernels.
static CUresult gs_aux_queue(CUcontext ctx, CUstream st, int ncopy, CUdeviceptr *ddst, void **hsrc, size_t *nbytes,
	int nzero, CUdeviceptr *zptr, size_t *zwords,
	CUfunction fn, unsigned grid, unsigned block, unsigned smem, void **params,
	int nout, void **odst, CUdeviceptr *osrc, size_t *obytes, CUevent ev, CUevent evk)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	for (int i = 0; i < ncopy; i++) {
		if (nbytes[i] == 0)
			continue;
		r = cuMemcpyHtoDAsync(ddst[i], hsrc[i], nbytes[i], st);
		if (r != CUDA_SUCCESS)
			return r;
	}
	for (int i = 0; i < nzero; i++) {
		if (zwords[i] == 0)
			continue;
		r = cuMemsetD32Async(zptr[i], 0, zwords[i], st);
		if (r != CUDA_SUCCESS)
			return r;
	}
	if (grid > 0) {
		r = cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, smem, st, params, NULL);
		if (r != CUDA_SUCCESS)
			return r;
		if (evk != NULL && (r = cuEventRecord(evk, st)) != CUDA_SUCCESS)
			return r;
	}
	for (int i = 0; i < nout; i++) {
		if (obytes[i] == 0)
			continue;
		r = cuMemcpyDtoHAsync(odst[i], osrc[i], obytes[i], st);
		if (r != CUDA_SUCCESS)
			return r;
	}
	return cuEventRecord(ev, st);
}

// gs_aux_wait makes ctx current on the calling thread and waits for ev.
static CUresult gs_aux_wait(CUcontext ctx, CUevent ev)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	return cuEventSynchronize(ev);
}
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"
)

// The helpers the markers, matching and filter kernels share: their
// modules are loaded on first use (loadAux; a build whose PTX for them is
// missing still runs the tables' kernels), and each of their batches is
// queued with one cgo call (auxQueue) on the caller's goroutine, the
// context made current on its thread, like Submit's.

// loadAux loads the module base (rabin, pubsub, filter, resident) from
// $GSWITCH_PTX_DIR or the embedded PTX, sm90 on compute capability 9.x and
// compute80 elsewhere. It runs on the owning goroutine.
func (c *CUDA) loadAux(base string, sm90, compute80 string) (cu.Module, string, error) {
	dev, err := cu.CurrentDevice()
	if err != nil {
		return cu.Module{}, "", fmt.Errorf("gpu: cuda: %v", err)
	}
	major, err := dev.Attribute(cu.ComputeCapabilityMajor)
	if err != nil {
		return cu.Module{}, "", fmt.Errorf("gpu: cuda: %v", err)
	}
	ptx, which := compute80, base+"_compute80.ptx"
	if major == 9 && os.Getenv(PTXForceEnv) != "compute80" {
		ptx, which = sm90, base+"_sm90.ptx"
	}
	if dir := os.Getenv(PTXDirEnv); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, which))
		if err != nil {
			return cu.Module{}, "", fmt.Errorf("gpu: cuda: %v", err)
		}
		ptx = string(b)
	}
	if len(ptx) == 0 {
		return cu.Module{}, "", fmt.Errorf("gpu: cuda: kernels/%s is empty: build it with make kernels on a machine with nvcc", which)
	}
	m, err := cu.LoadData(ptx)
	if err != nil {
		return cu.Module{}, "", fmt.Errorf("gpu: cuda: loading %s: %v", which, err)
	}
	return m, which, nil
}

// auxCopy is one copy of a queued batch (host to device for the inputs,
// device to host for the outputs) or, among the zeroed, n words of dst.
type auxCopy struct {
	dst cu.DevicePtr
	src unsafe.Pointer
	n   int64
}

// auxOut is one device-to-host copy of a queued batch.
type auxOut struct {
	dst unsafe.Pointer
	src cu.DevicePtr
	n   int64
}

// auxQueue queues the copies in, the zeroing of zero (dst, n words), a
// launch of fn over grid blocks of block threads with params (each a
// pointer to the argument's value, in C memory: cArgs), the record of evk
// after the kernel (a zero Event: none), the copies out and the record of
// ev, in st.
func (c *CUDA) auxQueue(st cu.Stream, copies []auxCopy, zero []auxCopy, fn cu.Function, grid, block, smem int,
	params []unsafe.Pointer, outs []auxOut, ev, evk cu.Event) error {
	// cgo: memory passed to C may not hold Go pointers, so the pointer
	// arrays live in C memory.
	n, z, o := len(copies), len(zero), len(outs)
	slots := 3*(n+1) + 2*(z+1) + 3*(o+1) + len(params) + 1
	mem := C.malloc(C.size_t(8 * slots))
	defer C.free(mem)
	at := 0
	next := func(k int) unsafe.Pointer { p := unsafe.Add(mem, 8*at); at += k; return p }
	dd := unsafe.Slice((*C.CUdeviceptr)(next(n+1)), n+1)
	hs := unsafe.Slice((*unsafe.Pointer)(next(n+1)), n+1)
	nb := unsafe.Slice((*C.size_t)(next(n+1)), n+1)
	zp := unsafe.Slice((*C.CUdeviceptr)(next(z+1)), z+1)
	zw := unsafe.Slice((*C.size_t)(next(z+1)), z+1)
	od := unsafe.Slice((*unsafe.Pointer)(next(o+1)), o+1)
	osrc := unsafe.Slice((*C.CUdeviceptr)(next(o+1)), o+1)
	ob := unsafe.Slice((*C.size_t)(next(o+1)), o+1)
	pp := unsafe.Slice((*unsafe.Pointer)(next(len(params)+1)), len(params)+1)
	for i, cp := range copies {
		dd[i], hs[i], nb[i] = cDev(cp.dst), cp.src, C.size_t(cp.n)
	}
	for i, zc := range zero {
		zp[i], zw[i] = cDev(zc.dst), C.size_t(zc.n)
	}
	for i, oc := range outs {
		od[i], osrc[i], ob[i] = oc.dst, cDev(oc.src), C.size_t(oc.n)
	}
	copy(pp, params)
	runtime.LockOSThread()
	r := C.gs_aux_queue(cContext(c.ctx), cStream(st), C.int(n), &dd[0], &hs[0], &nb[0], C.int(z), &zp[0], &zw[0],
		cFunc(fn), C.uint(grid), C.uint(block), C.uint(smem), &pp[0], C.int(o), &od[0], &osrc[0], &ob[0], cEvent(ev), cEvent(evk))
	runtime.UnlockOSThread()
	if !cuOK(r) {
		return cuErr(r)
	}
	return nil
}

// auxWait waits for ev on the caller's goroutine.
func (c *CUDA) auxWait(ev cu.Event) error {
	runtime.LockOSThread()
	r := C.gs_aux_wait(cContext(c.ctx), cEvent(ev))
	runtime.UnlockOSThread()
	if !cuOK(r) {
		return cuErr(r)
	}
	return nil
}

// cArgs holds kernel arguments in C memory: each Add returns the pointer
// cuLaunchKernel takes for it.
type cArgs struct {
	mem unsafe.Pointer
	n   int
}

func newCArgs(max int) *cArgs { return &cArgs{mem: C.malloc(C.size_t(8 * max))} }

func (a *cArgs) free() { C.free(a.mem) }

// u64 stores an 8-byte argument (a device pointer, a 64-bit value).
func (a *cArgs) u64(v uint64) unsafe.Pointer {
	p := unsafe.Add(a.mem, 8*a.n)
	*(*uint64)(p) = v
	a.n++
	return p
}

// u32 stores a 4-byte argument (an int, a 32-bit value).
func (a *cArgs) u32(v uint32) unsafe.Pointer {
	p := unsafe.Add(a.mem, 8*a.n)
	*(*uint32)(p) = v
	a.n++
	return p
}

// timeEvents times iters calls of launch in st with CUDA events, after one
// untimed warm-up call, and returns the milliseconds per call. It runs on
// the goroutine that owns the context.
func timeEvents(st cu.Stream, iters int, launch func(st cu.Stream) error) (float64, error) {
	iters = max(iters, 1)
	start, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, err
	}
	defer cu.DestroyEvent(&start)
	stop, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, err
	}
	defer cu.DestroyEvent(&stop)
	if err := launch(st); err != nil {
		return 0, err
	}
	if err := start.Record(st); err != nil {
		return 0, err
	}
	for i := 0; i < iters; i++ {
		if err := launch(st); err != nil {
			return 0, err
		}
	}
	if err := stop.Record(st); err != nil {
		return 0, err
	}
	if err := stop.Synchronize(); err != nil {
		return 0, err
	}
	total, err := start.Elapsed(stop)
	return total / float64(iters), err
}
