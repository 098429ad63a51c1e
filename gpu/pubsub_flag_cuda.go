//go:build cuda

package gpu

/*
#include <cuda.h>
#include <string.h>
#include <time.h>

static long long gs_flag_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// gs_flag_wait spins on the mapped word flag until it holds seq; every
// 4096 spins it asks the stream whether the kernel failed (or ended
// without writing the flag).
static CUresult gs_flag_wait(CUstream st, volatile unsigned *flag, unsigned seq)
{
	unsigned spins = 0;
	while (*flag != seq) {
		if ((++spins & 4095) == 0) {
			CUresult r = cuStreamQuery(st);
			if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
				return r;
			if (r == CUDA_SUCCESS && *flag != seq)
				return CUDA_ERROR_ILLEGAL_STATE;
		}
	}
	__sync_synchronize();
	return CUDA_SUCCESS;
}

static void gs_copy_params(CUDA_MEMCPY3D *c, void *hin, CUdeviceptr din, size_t in)
{
	memset(c, 0, sizeof *c);
	c->srcMemoryType = CU_MEMORYTYPE_HOST;
	c->srcHost = hin;
	c->dstMemoryType = CU_MEMORYTYPE_DEVICE;
	c->dstDevice = din;
	c->WidthInBytes = in;
	c->Height = 1;
	c->Depth = 1;
}

static void gs_kernel_params(CUDA_KERNEL_NODE_PARAMS *k, CUfunction fn, unsigned grid, unsigned block, void **params)
{
	memset(k, 0, sizeof *k);
	k->func = fn;
	k->gridDimX = grid;
	k->gridDimY = 1;
	k->gridDimZ = 1;
	k->blockDimX = block;
	k->blockDimY = 1;
	k->blockDimZ = 1;
	k->kernelParams = params;
}

// gs_small_graph_make builds the graph mode's graph, the context current
// on the calling thread: a copy node (hin to din) and the kernel node
// after it, parameters from params; out: the graph, its executable and
// the two nodes.
static CUresult gs_small_graph_make(CUcontext ctx, void *hin, CUdeviceptr din, CUfunction fn, unsigned block,
	void **params, CUgraph *g, CUgraphExec *x, CUgraphNode *cn, CUgraphNode *kn)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = cuGraphCreate(g, 0)) != CUDA_SUCCESS)
		return r;
	CUDA_MEMCPY3D c;
	gs_copy_params(&c, hin, din, 4);
	if ((r = cuGraphAddMemcpyNode(cn, *g, NULL, 0, &c, ctx)) != CUDA_SUCCESS)
		return r;
	CUDA_KERNEL_NODE_PARAMS k;
	gs_kernel_params(&k, fn, 1, block, params);
	if ((r = cuGraphAddKernelNode(kn, *g, cn, 1, &k)) != CUDA_SUCCESS)
		return r;
	return cuGraphInstantiate(x, *g, 0);
}

// gs_small_run_graph is gs_small_run_flag through the graph: the copy
// node's size and the kernel node's grid and parameters set in the
// executable graph, one cuGraphLaunch, then the spin on flag.
static CUresult gs_small_run_graph(CUcontext ctx, CUstream st, CUgraphExec x, CUgraphNode cn, CUgraphNode kn,
	CUdeviceptr din, void *hin, size_t in, CUdeviceptr zdone, CUfunction fn, unsigned grid, unsigned block,
	void **params, volatile unsigned *flag, unsigned seq, long long *ns)
{
	long long t0 = gs_flag_now_ns();
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	CUDA_MEMCPY3D c;
	gs_copy_params(&c, hin, din, in);
	if ((r = cuGraphExecMemcpyNodeSetParams(x, cn, &c, ctx)) != CUDA_SUCCESS)
		return r;
	CUDA_KERNEL_NODE_PARAMS k;
	gs_kernel_params(&k, fn, grid, block, params);
	if ((r = cuGraphExecKernelNodeSetParams(x, kn, &k)) != CUDA_SUCCESS)
		return r;
	if (zdone != 0 && (r = cuMemsetD32Async(zdone, 0, 1, st)) != CUDA_SUCCESS)
		return r;
	if ((r = cuGraphLaunch(x, st)) != CUDA_SUCCESS)
		return r;
	long long t1 = gs_flag_now_ns();
	if ((r = gs_flag_wait(st, flag, seq)) != CUDA_SUCCESS)
		return r;
	ns[0] = t1 - t0;
	ns[1] = gs_flag_now_ns() - t1;
	return CUDA_SUCCESS;
}

static void gs_small_graph_free(CUgraph g, CUgraphExec x)
{
	if (x != NULL)
		cuGraphExecDestroy(x);
	if (g != NULL)
		cuGraphDestroy(g);
}

// gs_small_run_flag matches one small batch in the flag mode, the context
// made current on the calling thread: in bytes copied from hin to din, the
// done word at zdone zeroed first when zdone is not 0 (after an error),
// the launch of pubsub_match_flag, then a spin on the mapped word flag
// until the kernel's last block writes seq there (gs_flag_wait).
// ns[0] gets the nanoseconds spent queueing, ns[1] those spent waiting.
static CUresult gs_small_run_flag(CUcontext ctx, CUstream st, CUdeviceptr din, void *hin, size_t in,
	CUdeviceptr zdone, CUfunction fn, unsigned grid, unsigned block, void **params,
	volatile unsigned *flag, unsigned seq, long long *ns)
{
	long long t0 = gs_flag_now_ns();
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (in > 0 && (r = cuMemcpyHtoDAsync(din, hin, in, st)) != CUDA_SUCCESS)
		return r;
	if (zdone != 0 && (r = cuMemsetD32Async(zdone, 0, 1, st)) != CUDA_SUCCESS)
		return r;
	if ((r = cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, st, params, NULL)) != CUDA_SUCCESS)
		return r;
	long long t1 = gs_flag_now_ns();
	if ((r = gs_flag_wait(st, flag, seq)) != CUDA_SUCCESS)
		return r;
	ns[0] = t1 - t0;
	ns[1] = gs_flag_now_ns() - t1;
	return CUDA_SUCCESS;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"
)

// The flag mode of the small-batch path: the batch goes in as in the copy
// mode (one copy of offsets, attributes, strings and zeroed answers), and
// kernel pubsub_match_flag's last block copies the answers (the events'
// port words, the hit count and the slots it brought) into the page-locked
// answer buffer, mapped into the device, then writes the batch's sequence
// number to a flag word after them; the host spins on that word. Two
// operations in the stream, no copy back and no event.

// smallGraph is the graph mode's graph: the copy node, then the kernel
// node.
type smallGraph struct {
	g    C.CUgraph
	x    C.CUgraphExec
	copy C.CUgraphNode
	kern C.CUgraphNode
}

func (g *smallGraph) free() {
	C.gs_small_graph_free(g.g, g.x)
	*g = smallGraph{}
}

// flagWordOff is the byte offset of the flag word in the answer buffer,
// past the answers and on a cache line of its own.
func flagWordOff(ow int64) int64 { return (4*ow + 127) &^ 127 }

// setupFlag loads pubsub_match_flag and makes the done word and the answer
// buffer's device address (on the owning goroutine).
func (m *CUDAMatcher) setupFlag(s *smallPath) error {
	fn, err := m.mod.Function("pubsub_match_flag")
	if err != nil {
		return fmt.Errorf("gpu: cuda: kernel pubsub_match_flag (PTX older than the flag mode?): %v", err)
	}
	s.fnFlag = fn
	if s.done, err = m.c.alloc(4); err != nil {
		return err
	}
	if err := cu.MemsetD32(s.done.p, 0, 1); err != nil {
		return fmt.Errorf("gpu: cuda: %v", err)
	}
	var d C.CUdeviceptr
	if r := C.cuMemHostGetDevicePointer(&d, s.hout.p, 0); !cuOK(r) {
		return fmt.Errorf("gpu: cuda: mapped host memory: %v", cuErr(r))
	}
	s.houtDev = cu.DevicePtr(d)
	// Page-locked memory comes uninitialised: a flag that happened to
	// hold the first sequence number would end the first wait at once.
	*(*uint32)(unsafe.Add(s.hout.p, flagWordOff(int64(m.smallOutWords())))) = 0
	s.seq = 0
	return nil
}

// runFlag queues and waits for a packed batch in the flag mode: params
// are pubsub_match's 15 (in s.args), to which it adds the flag kernel's.
func (m *CUDAMatcher) runFlag(s *smallPath, params []unsafe.Pointer, in int64, grid int) error {
	ow := int64(m.smallOutWords())
	s.seq++
	if s.seq == 0 {
		s.seq = 1
	}
	flag := (*C.uint)(unsafe.Add(s.hout.p, flagWordOff(ow)))
	a := s.args
	params = append(params, a.u64(uint64(s.done.p)), a.u64(uint64(s.houtDev)),
		a.u64(uint64(s.houtDev)+uint64(flagWordOff(ow))), a.u32(s.seq))
	pp := unsafe.Slice((*unsafe.Pointer)(s.pp), smallParams)
	copy(pp, params)
	ns := unsafe.Slice((*C.longlong)(s.ns), 2)
	var zdone cu.DevicePtr
	if s.dirty {
		zdone = s.done.p
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var r C.CUresult
	if s.mode == SmallGraph {
		g := &s.graph
		if g.x == nil {
			if r = C.gs_small_graph_make(cContext(m.c.ctx), s.hin.p, cDev(s.din.p), cFunc(s.fnFlag), C.uint(pubsubBlock),
				&pp[0], &g.g, &g.x, &g.copy, &g.kern); !cuOK(r) {
				g.free()
				return fmt.Errorf("gpu: cuda: small-batch graph: %v", cuErr(r))
			}
		}
		r = C.gs_small_run_graph(cContext(m.c.ctx), cStream(s.st), g.x, g.copy, g.kern, cDev(s.din.p), s.hin.p,
			C.size_t(in), cDev(zdone), cFunc(s.fnFlag), C.uint(grid), C.uint(pubsubBlock), &pp[0], flag, C.uint(s.seq), &ns[0])
	} else {
		r = C.gs_small_run_flag(cContext(m.c.ctx), cStream(s.st), cDev(s.din.p), s.hin.p, C.size_t(in), cDev(zdone),
			cFunc(s.fnFlag), C.uint(grid), C.uint(pubsubBlock), &pp[0], flag, C.uint(s.seq), &ns[0])
	}
	if !cuOK(r) {
		return fmt.Errorf("gpu: cuda: matching: %v", cuErr(r))
	}
	return nil
}
