//go:build cuda

package gpu

/*
#include <cuda.h>
#include <stdlib.h>

// gs_upload_runs makes ctx current on the calling thread, waits for the
// nst streams sts (idle, as a rule: the caller's batches are done), queues
// n copies (src[i] -> dst[i], bytes[i] bytes, from page-locked memory) in
// stream up and waits for them.
static CUresult gs_upload_runs(CUcontext ctx, int nst, CUstream *sts, CUstream up, int n, CUdeviceptr *dst,
	void **src, size_t *bytes)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	for (int i = 0; i < nst; i++)
		if ((r = cuStreamSynchronize(sts[i])) != CUDA_SUCCESS)
			return r;
	for (int i = 0; i < n; i++)
		if ((r = cuMemcpyHtoDAsync(dst[i], src[i], bytes[i], up)) != CUDA_SUCCESS)
			return r;
	return cuStreamSynchronize(up);
}
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/tables/bubble"
)

// The two earlier ways of bringing bubbles to the device, kept for
// comparison (GSWITCH_PUBSUB_UPDATE; the default is "live",
// pubsub_live_cuda.go). Both wait for every queued batch first, so the
// caller must keep batches out while they run (eventfwd.Hybrid takes its
// lock exclusively for them):
//
//   - "staged": the changed runs of words are gathered into a page-locked
//     staging buffer, queued as asynchronous copies in one stream and
//     waited for, in one cgo call on the caller's goroutine;
//   - "sync": a synchronous copy per run on the context's goroutine.

// UpdateModeEnv selects how bubbles reach the device: "live" (the
// default), "ahead", "eager", "staged" or "sync".
const UpdateModeEnv = "GSWITCH_PUBSUB_UPDATE"

// updateMode returns the bubble update mode the environment selects.
func updateMode() string {
	switch v := os.Getenv(UpdateModeEnv); v {
	case "eager", "ahead", "staged", "sync":
		return v
	}
	return "live"
}

// updateStaged applies bubbles u (not a full image) to the kept image and
// copies their runs to the device (m.updMu held).
func (m *CUDAMatcher) updateStaged(u bubble.Update, names map[string]uint32) error {
	if m.c.closed.Load() {
		return ErrClosed
	}
	if m.host == nil || m.host.Generation != u.Generation {
		return fmt.Errorf("%w: pubsub bubbles of generation %d for a device layout of another", ErrBadUpdate, u.Generation)
	}
	runs := bubbleRuns(u.Bubbles, 32)
	words := 0
	for _, r := range runs {
		words += int(r.hi - r.lo)
	}
	if int64(4*words) > m.stage.n {
		if err := m.c.do(func() error {
			m.stage.free()
			var err error
			m.stage, err = allocHost(max(4*int64(words), 64<<10))
			return err
		}); err != nil {
			return err
		}
	}
	if err := m.host.Apply(u.Bubbles); err != nil {
		return fmt.Errorf("%w: %v", ErrBadUpdate, err)
	}
	w := m.host.Words
	n, ns := len(runs), len(m.streams)
	mem := C.malloc(C.size_t(8 * (3*n + ns + 3)))
	defer C.free(mem)
	dst := unsafe.Slice((*C.CUdeviceptr)(mem), n+1)
	src := unsafe.Slice((*unsafe.Pointer)(unsafe.Add(mem, 8*(n+1))), n+1)
	nb := unsafe.Slice((*C.size_t)(unsafe.Add(mem, 16*(n+1))), n+1)
	sts := unsafe.Slice((*C.CUstream)(unsafe.Add(mem, 24*(n+1))), ns)
	stage := wordsAt(m.stage.p, int(m.stage.n/4))
	off := 0
	for i, r := range runs {
		k := copy(stage[off:], w[r.region][r.lo:r.hi])
		dst[i] = cDev(m.img.p + cu.DevicePtr(4*(m.base[r.region]+int64(r.lo))))
		src[i] = unsafe.Add(m.stage.p, 4*off)
		nb[i] = C.size_t(4 * k)
		off += k
	}
	for i, s := range m.streams {
		sts[i] = cStream(s)
	}
	runtime.LockOSThread()
	r := C.gs_upload_runs(cContext(m.c.ctx), C.int(ns), &sts[0], cStream(m.streams[0]), C.int(n), &dst[0], &src[0], &nb[0])
	runtime.UnlockOSThread()
	if !cuOK(r) {
		return fmt.Errorf("gpu: cuda: %v", cuErr(r))
	}
	m.publish(m.nextState(names))
	return nil
}
