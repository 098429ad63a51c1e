//go:build cuda

package gpu

/*
#include <cuda.h>
#include <string.h>

// gs_copy_seg is copySeg.
typedef struct {
	unsigned long long src, dst, pitch, width, height;
} gs_copy_seg;

// gs_copy_segs queues the copies of n runs in stream st: runs of one row
// as plain copies, the others as 2-D copies, from the registered host
// memory at region to the staging buffer at stage.
static CUresult gs_copy_segs(CUstream st, const char *region, CUdeviceptr stage, const gs_copy_seg *segs, int n)
{
	for (int i = 0; i < n; i++) {
		const gs_copy_seg *s = &segs[i];
		CUresult r;
		if (s->height == 1) {
			r = cuMemcpyHtoDAsync(stage + s->dst, region + s->src, s->width, st);
		} else {
			CUDA_MEMCPY2D c;
			memset(&c, 0, sizeof c);
			c.srcMemoryType = CU_MEMORYTYPE_HOST;
			c.srcHost = region + s->src;
			c.srcPitch = s->pitch;
			c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
			c.dstDevice = stage + s->dst;
			c.dstPitch = s->width;
			c.WidthInBytes = s->width;
			c.Height = s->height;
			r = cuMemcpy2DAsync(&c, st);
		}
		if (r != CUDA_SUCCESS)
			return r;
	}
	return CUDA_SUCCESS;
}

// gs_copy_queue queues, in stream st with ctx made current on the calling
// thread, a batch of the markers whose payloads the copy engine moves out
// of registered host memory: the copy of the index (hidx -> didx, nidx
// bytes: offsets, lengths and staging offsets), the runs' copies, rabin_gather (gfn: the staging buffer
// into the compact buffer), the markers kernel (mfn), the copy of the
// bitmap out (dbm -> hbm, nbm bytes) and the record of ev.
static CUresult gs_copy_queue(CUcontext ctx, CUstream st, CUdeviceptr didx, void *hidx, size_t nidx,
	const char *region, CUdeviceptr stage,
	const gs_copy_seg *segs, int nsegs,
	CUfunction gfn, unsigned ggrid, unsigned gblock, void **gparams,
	CUfunction mfn, unsigned mgrid, unsigned mblock, void **mparams,
	void *hbm, CUdeviceptr dbm, size_t nbm, CUevent ev)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = cuMemcpyHtoDAsync(didx, hidx, nidx, st)) != CUDA_SUCCESS)
		return r;
	if ((r = gs_copy_segs(st, region, stage, segs, nsegs)) != CUDA_SUCCESS)
		return r;
	if ((r = cuLaunchKernel(gfn, ggrid, 1, 1, gblock, 1, 1, 0, st, gparams, NULL)) != CUDA_SUCCESS)
		return r;
	if ((r = cuLaunchKernel(mfn, mgrid, 1, 1, mblock, 1, 1, 0, st, mparams, NULL)) != CUDA_SUCCESS)
		return r;
	if ((r = cuMemcpyDtoHAsync(hbm, dbm, nbm, st)) != CUDA_SUCCESS)
		return r;
	return cuEventRecord(ev, st);
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/tables/rabin"
)

// copyTwin is a batch's state for the copy path: the staging buffer on
// the device, the batch's index as the copy path sends it (page-locked,
// and its device twin: the N offsets, the N lengths, then the N staging
// offsets, so that one copy moves all three: every copy the engine runs
// costs a gap beside its bytes), and the runs of its last Submit.
type copyTwin struct {
	dstage   devBuf
	stageCap int64
	hidx     hostBuf // 3 x capacity words
	didx     devBuf
	segs     []copySeg
}

// CopyStats counts what the copy path moved since the RabinMarkers were
// made: runs (2-D copies, or plain ones of one row), the payload bytes and
// the bytes copied (payloads plus what the runs' rows hold past them).
type CopyStats struct {
	Runs, PayloadBytes, CopiedBytes int64
}

type copyCounters struct {
	runs, payload, copied atomic.Int64
}

// CopyStats returns the copy path's counters.
func (r *RabinMarkers) CopyStats() CopyStats {
	return CopyStats{Runs: r.cstats.runs.Load(), PayloadBytes: r.cstats.payload.Load(), CopiedBytes: r.cstats.copied.Load()}
}

// copyTwinOf returns t's copy state, allocated on first use (the staging
// buffer, twice the batch's packed bytes, and the index).
func (r *RabinMarkers) copyTwinOf(t *markerTwin, bufBytes int) (*copyTwin, error) {
	if t.cp != nil {
		return t.cp, nil
	}
	n := stageBytes(bufBytes)
	if n > 1<<32-1 {
		return nil, fmt.Errorf("a batch of %d bytes: the copy path's staging offsets are 32-bit", bufBytes)
	}
	cp := &copyTwin{stageCap: n}
	err := r.c.do(func() error {
		var err error
		if cp.dstage, err = r.c.alloc(max(n, 16)); err != nil {
			return err
		}
		n := max(12*int64(t.capacity), 12)
		if cp.hidx, err = allocHost(n); err != nil {
			r.c.free(&cp.dstage)
			return err
		}
		if cp.didx, err = r.c.alloc(n); err != nil {
			cp.hidx.free()
			r.c.free(&cp.dstage)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.cp = cp
	return cp, nil
}

func (cp *copyTwin) release(c *CUDA) {
	if cp == nil {
		return
	}
	cp.hidx.free()
	c.free(&cp.didx)
	c.free(&cp.dstage)
}

// submitCopy queues b, a batch by reference, through the copy engine in
// the next stream: the index (offsets, lengths, staging offsets) in, the
// runs' copies, rabin_gather from the staging buffer to the compact one, the
// markers kernel, the bitmap out.
func (r *RabinMarkers) submitCopy(b *MarkerBatch, t *markerTwin) error {
	if _, ok := b.Region.impl.(*regionTwin); !ok {
		return fmt.Errorf("a host region these markers did not register")
	}
	cp, err := r.copyTwinOf(t, len(b.Buf))
	if err != nil {
		return err
	}
	n := b.N
	idx := wordsAt(cp.hidx.p, 3*n)
	copy(idx, b.Offs[:n])
	copy(idx[n:], b.Lens[:n])
	stage := idx[2*n:]
	var staged int
	cp.segs, staged = planCopies(cp.segs, stage, b.Srcs[:b.N], b.Lens[:b.N], len(b.Region.Mem))
	if int64(staged) > cp.stageCap {
		return fmt.Errorf("copy path: %d staging bytes for a buffer of %d", staged, cp.stageCap)
	}
	payload := int64(0)
	for _, l := range b.Lens[:b.N] {
		payload += int64(l)
	}
	r.cstats.runs.Add(int64(len(cp.segs)))
	r.cstats.payload.Add(payload)
	r.cstats.copied.Add(int64(staged))

	grid, block, parts := r.launchShape(b)
	ggrid, gblock := r.gatherShape(b.N)
	ma, ga := newCArgs(11), newCArgs(6)
	defer ma.free()
	defer ga.free()
	offs, lens, srcs := uint64(cp.didx.p), uint64(cp.didx.p)+4*uint64(n), uint64(cp.didx.p)+8*uint64(n)
	mp := r.paramsAt(ma, t, b, parts, offs, lens)
	gp := []unsafe.Pointer{ga.u64(uint64(cp.dstage.p)), ga.u64(srcs), ga.u64(offs), ga.u64(lens), ga.u32(uint32(n)), ga.u64(uint64(t.dbuf.p))}
	pp := cParams(mp, gp)
	defer C.free(unsafe.Pointer(&pp[0]))
	st := r.nextStream()
	var segp *C.gs_copy_seg
	if len(cp.segs) > 0 {
		segp = (*C.gs_copy_seg)(unsafe.Pointer(&cp.segs[0]))
	}
	runtime.LockOSThread()
	res := C.gs_copy_queue(cContext(r.c.ctx), cStream(st), cDev(cp.didx.p), cp.hidx.p, C.size_t(12*n),
		(*C.char)(unsafe.Pointer(&b.Region.Mem[0])), cDev(cp.dstage.p), segp, C.int(len(cp.segs)),
		cFunc(r.gfn), C.uint(ggrid), C.uint(gblock), &pp[len(mp)],
		cFunc(r.fn), C.uint(grid), C.uint(block), &pp[0],
		t.hbm.p, cDev(t.dbm.p), C.size_t(4*rabin.BitmapWords(b.Bytes)), cEvent(t.ev))
	runtime.UnlockOSThread()
	if !cuOK(res) {
		return cuErr(res)
	}
	return nil
}

// CopyTime times iters rounds of the copy engine's runs alone for b (a
// batch by reference, submitted through the copy path and waited for
// once) with CUDA events: the rate at which the copy engine moves the
// payloads out of the registered region. It returns the milliseconds per
// round.
func (r *RabinMarkers) CopyTime(b *MarkerBatch, iters int) (float64, error) {
	t, err := r.twin(b)
	if err != nil {
		return 0, err
	}
	if b.Region == nil || b.N == 0 || t.cp == nil || len(t.cp.segs) == 0 {
		return 0, fmt.Errorf("gpu: cuda: copy time of a batch not submitted through the copy path")
	}
	cp := t.cp
	region := (*C.char)(unsafe.Pointer(&b.Region.Mem[0]))
	var ms float64
	err = r.c.do(func() error {
		ms, err = timeEvents(r.streams[0], iters, func(st cu.Stream) error {
			if res := C.gs_copy_segs(cStream(st), region, cDev(cp.dstage.p), (*C.gs_copy_seg)(unsafe.Pointer(&cp.segs[0])), C.int(len(cp.segs))); !cuOK(res) {
				return cuErr(res)
			}
			return nil
		})
		return err
	})
	return ms, err
}
