//go:build cuda

package gpu

/*
#include <cuda.h>
#include <stdlib.h>

// gs_gather_queue queues, in stream st with ctx made current on the calling
// thread, a batch of the markers whose payloads the device reads out of
// registered host memory: the copy of the index (hidx -> didx, nidx bytes),
// the gather kernel (gfn: the payloads into the device's compact buffer),
// the markers kernel (mfn), the copy of the bitmap out (dbm -> hbm, nbm
// bytes) and the record of ev.
static CUresult gs_gather_queue(CUcontext ctx, CUstream st, CUdeviceptr didx, void *hidx, size_t nidx,
	CUfunction gfn, unsigned ggrid, unsigned gblock, void **gparams,
	CUfunction mfn, unsigned mgrid, unsigned mblock, void **mparams,
	void *hbm, CUdeviceptr dbm, size_t nbm, CUevent ev)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = cuMemcpyHtoDAsync(didx, hidx, nidx, st)) != CUDA_SUCCESS)
		return r;
	if ((r = cuLaunchKernel(gfn, ggrid, 1, 1, gblock, 1, 1, 0, st, gparams, NULL)) != CUDA_SUCCESS)
		return r;
	if ((r = cuLaunchKernel(mfn, mgrid, 1, 1, mblock, 1, 1, 0, st, mparams, NULL)) != CUDA_SUCCESS)
		return r;
	if ((r = cuMemcpyDtoHAsync(hbm, dbm, nbm, st)) != CUDA_SUCCESS)
		return r;
	return cuEventRecord(ev, st);
}

// gs_host_register registers n bytes at p (page-locked, mapped) and returns
// the device's address of them.
static CUresult gs_host_register(void *p, size_t n, CUdeviceptr *dp)
{
	CUresult r = cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
	if (r != CUDA_SUCCESS)
		return r;
	r = cuMemHostGetDevicePointer(dp, p, 0);
	if (r != CUDA_SUCCESS)
		cuMemHostUnregister(p);
	return r;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/tables/rabin"
)

// The markers' batches by reference (MarkerBatch.AddRef): the payloads
// stay where they were received, in host memory registered with the device
// (RegisterHost: cuMemHostRegister, mapped), and the kernel rabin_gather
// reads them over PCIe into the batch's compact buffer on the device, a
// warp per payload, before the markers kernel runs on it. The host writes
// only the index (12 bytes a payload); the payloads cross the bus once, by
// the GPU's own reads, instead of being copied into a page-locked batch by
// the CPU first and then by the copy engine.

// regionTwin is a HostRegion's registration.
type regionTwin struct {
	dev cu.DevicePtr // the device's address of Mem[0]
}

// gatherWarpsPerSM is the warps of the gather kernel per SM: a payload of
// 1,460 bytes a warp, all its loads issued before the first use; 16 warps
// an SM keep some 3 MB of reads in flight on 132 SMs, far past what PCIe's
// latency needs, and leave room for the markers kernel of another stream.
const gatherWarpsPerSM = 16

// RegisterHost registers mem with the device (cuMemHostRegister, page-locked
// and mapped). mem must lie outside the Go heap (a mapped receive ring, or
// syscall.Mmap's memory) and stay mapped until UnregisterHost: the device
// reads it while batches that refer to it are in flight.
func (r *RabinMarkers) RegisterHost(mem []byte) (*HostRegion, error) {
	if err := checkRegion(mem); err != nil {
		return nil, err
	}
	t := &regionTwin{}
	err := r.c.do(func() error {
		var dp C.CUdeviceptr
		if res := C.gs_host_register(unsafe.Pointer(&mem[0]), C.size_t(len(mem)), &dp); !cuOK(res) {
			return fmt.Errorf("gpu: cuda: registering %d bytes of host memory: %v", len(mem), cuErr(res))
		}
		t.dev = cu.DevicePtr(dp)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if t.dev%16 != 0 {
		r.c.do(func() error { C.cuMemHostUnregister(unsafe.Pointer(&mem[0])); return nil })
		return nil, fmt.Errorf("gpu: cuda: host region mapped at %#x: want 16-byte alignment", uint64(t.dev))
	}
	return &HostRegion{Mem: mem, impl: t}, nil
}

// UnregisterHost unregisters h.
func (r *RabinMarkers) UnregisterHost(h *HostRegion) error {
	if h == nil {
		return nil
	}
	if _, ok := h.impl.(*regionTwin); !ok {
		return fmt.Errorf("gpu: cuda: a host region these markers did not register")
	}
	h.impl = nil
	return r.c.do(func() error {
		if res := C.cuMemHostUnregister(unsafe.Pointer(&h.Mem[0])); !cuOK(res) {
			return fmt.Errorf("gpu: cuda: unregistering host memory: %v", cuErr(res))
		}
		return nil
	})
}

// gatherFn is the gather kernel batches by reference are launched with.
func (r *RabinMarkers) gatherFn() cu.Function {
	if r.Gather16 {
		return r.gfn16
	}
	return r.gfn
}

// GatherKernel names it.
func (r *RabinMarkers) GatherKernel() string {
	if r.Gather16 {
		return "rabin_gather16"
	}
	return "rabin_gather"
}

// GatherWarpsPerSM returns the warps per SM rabin_gather is launched with.
func (r *RabinMarkers) GatherWarpsPerSM() int {
	if r.GatherWarps > 0 {
		return r.GatherWarps
	}
	return gatherWarpsPerSM
}

// gatherShape returns the grid and block of rabin_gather over n payloads.
func (r *RabinMarkers) gatherShape(n int) (grid, block int) {
	const block0 = 256
	warps := min(n, r.GatherWarpsPerSM()*r.c.sms)
	return (warps*32 + block0 - 1) / block0, block0
}

// gatherParams stores rabin_gather's arguments for batch b in a.
func (r *RabinMarkers) gatherParams(a *cArgs, t *markerTwin, rt *regionTwin, b *MarkerBatch) []unsafe.Pointer {
	idx := uint64(t.didx.p)
	return []unsafe.Pointer{a.u64(uint64(rt.dev)), a.u64(idx + 8*uint64(t.capacity)), a.u64(idx),
		a.u64(idx + 4*uint64(t.capacity)), a.u32(uint32(b.N)), a.u64(uint64(t.dbuf.p))}
}

// submitGather queues b, a batch by reference, in the next stream.
func (r *RabinMarkers) submitGather(b *MarkerBatch, t *markerTwin) error {
	rt, ok := b.Region.impl.(*regionTwin)
	if !ok {
		return fmt.Errorf("gpu: cuda: markers: a host region these markers did not register")
	}
	grid, block, parts := r.launchShape(b)
	ggrid, gblock := r.gatherShape(b.N)
	ma, ga := newCArgs(11), newCArgs(6)
	defer ma.free()
	defer ga.free()
	mp, gp := r.params(ma, t, b, parts), r.gatherParams(ga, t, rt, b)
	pp := cParams(mp, gp)
	defer C.free(unsafe.Pointer(&pp[0]))
	st := r.nextStream()
	// The index: offsets, lengths (capacity words each), then the first N
	// sources.
	nidx := 4 * (2*int64(t.capacity) + int64(b.N))
	runtime.LockOSThread()
	res := C.gs_gather_queue(cContext(r.c.ctx), cStream(st), cDev(t.didx.p), t.hidx.p, C.size_t(nidx),
		cFunc(r.gatherFn()), C.uint(ggrid), C.uint(gblock), &pp[len(mp)],
		cFunc(r.fn), C.uint(grid), C.uint(block), &pp[0],
		t.hbm.p, cDev(t.dbm.p), C.size_t(4*rabin.BitmapWords(b.Bytes)), cEvent(t.ev))
	runtime.UnlockOSThread()
	if !cuOK(res) {
		return cuErr(res)
	}
	return nil
}

// cParams lays two kernels' parameter arrays (the markers kernel's, then
// the gather's) one after the other in C memory, which the caller frees
// with C.free once the launches are queued.
func cParams(a, b []unsafe.Pointer) []unsafe.Pointer {
	pp := unsafe.Slice((*unsafe.Pointer)(C.malloc(C.size_t(8*(len(a)+len(b))))), len(a)+len(b))
	copy(pp, a)
	copy(pp[len(a):], b)
	return pp
}

// nextStream is the stream of the next batch, in turn.
func (r *RabinMarkers) nextStream() cu.Stream {
	return r.streams[int(r.rr.Add(1))%len(r.streams)]
}

// GatherTime times iters launches of rabin_gather alone over b (a batch by
// reference, submitted and waited for once) with CUDA events: the rate at
// which the GPU reads payloads out of registered host memory. It returns
// the milliseconds per launch.
func (r *RabinMarkers) GatherTime(b *MarkerBatch, iters int) (float64, error) {
	t, err := r.twin(b)
	if err != nil {
		return 0, err
	}
	if b.Region == nil || b.N == 0 {
		return 0, fmt.Errorf("gpu: cuda: gather time of a batch without payloads by reference")
	}
	rt, ok := b.Region.impl.(*regionTwin)
	if !ok {
		return 0, fmt.Errorf("gpu: cuda: a host region these markers did not register")
	}
	grid, block := r.gatherShape(b.N)
	a := newCArgs(6)
	defer a.free()
	params := r.gatherParams(a, t, rt, b)
	var ms float64
	err = r.c.do(func() error {
		ms, err = timeEvents(r.streams[0], iters, func(st cu.Stream) error {
			return r.gatherFn().Launch(grid, 1, 1, block, 1, 1, 0, st, params)
		})
		return err
	})
	return ms, err
}

var _ RegionMarkers = (*RabinMarkers)(nil)
