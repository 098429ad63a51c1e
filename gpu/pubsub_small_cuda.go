//go:build cuda

package gpu

/*
#include <cuda.h>
#include <stdlib.h>
#include <time.h>

static long long gs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// gs_small_run matches one small batch in one call, the context made
// current on the calling thread: in bytes copied from hin to din (none in
// the mapped mode, where the kernel reads hin itself), zpre words at zptr
// zeroed before the launch (after an error), the launch, obytes copied
// from dout to hout, the record of ev, zpost words at zptr zeroed for the
// next batch (behind the record: off the answer's path), then a spin on ev.
// ns[0] gets the nanoseconds spent queueing, ns[1] those spent waiting.
static CUresult gs_small_run(CUcontext ctx, CUstream st, CUdeviceptr din, void *hin, size_t in,
	CUdeviceptr zptr, size_t zpre, size_t zpost, CUfunction fn, unsigned grid, unsigned block, void **params,
	void *hout, CUdeviceptr dout, size_t obytes, CUevent ev, long long *ns)
{
	long long t0 = gs_now_ns();
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if (in > 0 && (r = cuMemcpyHtoDAsync(din, hin, in, st)) != CUDA_SUCCESS)
		return r;
	if (zpre > 0 && (r = cuMemsetD32Async(zptr, 0, zpre, st)) != CUDA_SUCCESS)
		return r;
	if ((r = cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, st, params, NULL)) != CUDA_SUCCESS)
		return r;
	if ((r = cuMemcpyDtoHAsync(hout, dout, obytes, st)) != CUDA_SUCCESS)
		return r;
	if ((r = cuEventRecord(ev, st)) != CUDA_SUCCESS)
		return r;
	if (zpost > 0 && (r = cuMemsetD32Async(zptr, 0, zpost, st)) != CUDA_SUCCESS)
		return r;
	long long t1 = gs_now_ns();
	while ((r = cuEventQuery(ev)) == CUDA_ERROR_NOT_READY)
		;
	ns[0] = t1 - t0;
	ns[1] = gs_now_ns() - t1;
	return r;
}

static CUresult gs_host_dev_ptr(void *h, CUdeviceptr *d)
{
	return cuMemHostGetDevicePointer(d, h, 0);
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// The small-batch path (batches of up to SmallBatchEvents events, a single
// event's match above all): one pre-allocated batch per matcher with its
// own stream, its kernel arguments in C memory written in place, and one
// cgo call that queues the batch and spins on its event (gs_small_run), so
// that the path allocates nothing but the answer's ports. Two modes:
//
//   - SmallCopy: the batch (offsets, attributes, strings, zeroed answers)
//     goes to the device in one copy, then the launch and the copy back of
//     the answers — three operations in the stream;
//   - SmallMapped: the kernel reads the batch from page-locked host memory
//     mapped into the device's address space (no copy in), its answers are
//     zeroed after the copy back, behind the event the caller waits for —
//     two operations on the answer's path;
//   - SmallFlag: as SmallCopy in, then the kernel itself writes the
//     answers to mapped host memory and a flag word the host polls (no
//     copy back, no event; pubsub_flag_cuda.go);
//   - SmallGraph: SmallFlag with its copy and launch in one CUDA graph,
//     its copy's size and kernel's parameters set in the executable graph
//     before each cuGraphLaunch.
//
// SmallTimes breaks the last call down (encoding, queueing, waiting,
// decoding) for bench pubsub.

// smallPath is the matcher's small-batch state (guarded by its mutex; made
// on first use, dropped with the layout).
type smallPath struct {
	mu      sync.Mutex
	mode    SmallMode
	st      cu.Stream
	ev      cu.Event
	b       *EventBatch // the host side: Off, Attrs, Str in hin (mapped) or separate
	hin     hostBuf     // copy: the packed batch; mapped: the batch the kernel reads
	hinDev  cu.DevicePtr
	din     devBuf       // copy, flag: the packed batch on the device; mapped: the answers
	houtDev cu.DevicePtr // flag: hout's device address
	seq     uint32       // flag: the last batch's sequence number
	args    *cArgs
	pp      unsafe.Pointer // C array of the kernel's argument pointers
	fnFlag  cu.Function    // flag: pubsub_match_flag
	done    devBuf         // flag: the kernel's count of finished blocks
	graph   smallGraph     // graph: made on the first batch
	hout    hostBuf
	ns      unsafe.Pointer // C array of 2 int64: queue and wait times
	dirty   bool           // mapped: the answers are not known to be zero; flag: nor the done word
	last    SmallTimes
}

// Small-batch capacity: attributes and string bytes.
const (
	smallAttrs = 64 * SmallBatchEvents
	smallStr   = 16 << 10
	// smallParams is the room for kernel arguments (the flag kernel's 19).
	smallParams = 24
)

// SetSmallMode selects the small-batch mode (dropping the current path).
func (m *CUDAMatcher) SetSmallMode(mode SmallMode) error {
	if mode < SmallOff || mode > SmallGraph {
		return fmt.Errorf("gpu: small-batch mode %d", mode)
	}
	return m.c.do(func() error {
		m.dropSmall()
		m.smallErr.Store(nil)
		m.smallMode = mode
		return nil
	})
}

// SetSmallSplits sets the blocks per event of small batches, 0..256 (0:
// splits' rule); call it before matching.
func (m *CUDAMatcher) SetSmallSplits(n int) error {
	if n < 0 || n > 256 {
		return fmt.Errorf("gpu: %d blocks per event: want 0..256", n)
	}
	m.smallSplits = n
	return nil
}

// SmallTimes returns the parts of the last small-batch call.
func (m *CUDAMatcher) SmallTimes() SmallTimes {
	s := m.small.Load()
	if s == nil {
		return SmallTimes{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// SmallError returns why the small-batch path could not be set up (then
// small batches go the pooled way), or nil.
func (m *CUDAMatcher) SmallError() error {
	if e := m.smallErr.Load(); e != nil {
		return *e
	}
	return nil
}

// SmallMode returns the small-batch mode.
func (m *CUDAMatcher) SmallMode() SmallMode { return m.smallMode }

// dropSmall frees the small-batch path (on the owning goroutine, every
// stream idle or about to be).
func (m *CUDAMatcher) dropSmall() {
	s := m.small.Swap(nil)
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Synchronize()
	s.free(m.c)
}

func (s *smallPath) free(c *CUDA) {
	s.hin.free()
	s.hout.free()
	c.free(&s.din)
	c.free(&s.done)
	s.graph.free()
	if s.ev != (cu.Event{}) {
		cu.DestroyEvent(&s.ev)
	}
	if s.st != (cu.Stream{}) {
		s.st.Destroy()
	}
	if s.args != nil {
		s.args.free()
		C.free(s.pp)
		C.free(s.ns)
	}
}

// smallOutWords is the answer words of a small batch.
func (m *CUDAMatcher) smallOutWords() int {
	return m.portWords*SmallBatchEvents + 1 + hitCap(SmallBatchEvents)
}

// getSmall returns the small-batch path, made on first use.
func (m *CUDAMatcher) getSmall() (*smallPath, error) {
	if s := m.small.Load(); s != nil {
		return s, nil
	}
	var s *smallPath
	err := m.c.do(func() error {
		if s = m.small.Load(); s != nil {
			return nil
		}
		s = &smallPath{mode: m.smallMode, args: newCArgs(smallParams), pp: C.malloc(8 * smallParams), ns: C.malloc(16)}
		ok := false
		defer func() {
			if !ok {
				s.free(m.c)
			}
		}()
		var err error
		if s.st, err = cu.MakeStream(cu.NonBlocking); err != nil {
			return fmt.Errorf("gpu: cuda: stream: %v", err)
		}
		if s.ev, err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return fmt.Errorf("gpu: cuda: event: %v", err)
		}
		ow := int64(m.smallOutWords())
		if s.hout, err = allocHost(flagWordOff(ow) + 128); err != nil {
			return err
		}
		inBytes := int64(4*(SmallBatchEvents+1)+4*AttrWords*smallAttrs+smallStr) + 64
		if s.mode == SmallMapped {
			if s.hin, err = allocHost(inBytes); err != nil {
				return err
			}
			var d C.CUdeviceptr
			if r := C.gs_host_dev_ptr(s.hin.p, &d); !cuOK(r) {
				return fmt.Errorf("gpu: cuda: mapped host memory: %v", cuErr(r))
			}
			s.hinDev = cu.DevicePtr(d)
			if s.din, err = m.c.alloc(4 * ow); err != nil {
				return err
			}
			if err := cu.MemsetD32(s.din.p, 0, ow); err != nil {
				return fmt.Errorf("gpu: cuda: %v", err)
			}
			off := wordsAt(s.hin.p, SmallBatchEvents+1)
			attrs := wordsAt(unsafe.Add(s.hin.p, 4*(SmallBatchEvents+1)), AttrWords*smallAttrs)
			str := unsafe.Slice((*byte)(unsafe.Add(s.hin.p, 4*(SmallBatchEvents+1)+4*AttrWords*smallAttrs)), smallStr)
			s.b = &EventBatch{Off: off, Attrs: attrs, Str: str, Out: wordsAt(s.hout.p, int(ow)), PortWords: m.portWords}
		} else {
			if s.hin, err = allocHost(packBytes); err != nil {
				return err
			}
			if s.din, err = m.c.alloc(packBytes); err != nil {
				return err
			}
			s.b = &EventBatch{Off: make([]uint32, SmallBatchEvents+1), Attrs: make([]uint32, AttrWords*smallAttrs),
				Str: make([]byte, smallStr), Out: wordsAt(s.hout.p, int(ow)), PortWords: m.portWords}
			if s.mode == SmallFlag || s.mode == SmallGraph {
				if err := m.setupFlag(s); err != nil {
					return err
				}
			}
		}
		// Under live.mu: a later scatter finds the path stored (and makes
		// its stream wait for it); an earlier one is the last this stream
		// waits for.
		m.live.mu.Lock()
		defer m.live.mu.Unlock()
		if err := m.orderSmall(s.st); err != nil {
			return err
		}
		ok = true
		m.small.Store(s)
		return nil
	})
	return s, err
}

// matchSmall matches evs (at most SmallBatchEvents) on the small-batch
// path; done is false when the path cannot take them (busy, off, too
// large), and the caller goes the pooled way.
func (m *CUDAMatcher) matchSmall(evs []pubsub.Event, out [][]uint32, slots []uint32) (res [][]uint32, s2 []uint32, complete, done bool, err error) {
	if m.smallMode == SmallOff || len(evs) > SmallBatchEvents || len(evs) == 0 {
		return out, slots, false, false, nil
	}
	if m.smallErr.Load() != nil {
		return out, slots, false, false, nil
	}
	s, err := m.getSmall()
	if err != nil { // the pooled way from now on; SmallError says why
		m.smallErr.CompareAndSwap(nil, &err)
		return out, slots, false, false, nil
	}
	if !s.mu.TryLock() {
		return out, slots, false, false, nil
	}
	defer s.mu.Unlock()
	if m.small.Load() != s || m.c.closed.Load() {
		return out, slots, false, false, nil
	}
	// The whole call (a few µs of queueing, the kernel, the wait) under
	// live.mu, the pending updates' words scattered first: an update waits
	// for it, and the batch sees the words, names and ports of one
	// version.
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	if err := m.flushLocked(s.st, -1); err != nil {
		return out, slots, false, true, err
	}
	if err := m.orderSmall(s.st); err != nil {
		return out, slots, false, true, err
	}
	t0 := time.Now()
	b := s.b
	st := m.state.Load()
	if k := EncodeEvents(b, st.names, evs); k < len(evs) {
		return out, slots, false, false, nil
	}
	if _, err := m.checkBatch(b, SmallBatchEvents); err != nil {
		return out, slots, false, true, err
	}
	t1 := time.Now()
	ow := int64(m.portWords) * int64(b.N)
	obytes := 4 * (ow + 1 + int64(hitCap(b.N)))
	a := s.args
	a.n = 0
	var params []unsafe.Pointer
	var din cu.DevicePtr
	var in int64
	var dout cu.DevicePtr
	var zpre, zpost int64
	sp := m.splits(b.N)
	if m.smallSplits > 0 {
		sp = m.smallSplits
	}
	if s.mode == SmallMapped {
		d := uint64(s.hinDev)
		pa := uint64(4 * (SmallBatchEvents + 1))
		ps := pa + 4*AttrWords*smallAttrs
		dout = s.din.p
		params = m.params(a, b, d, d+pa, d+ps, uint64(dout), sp)
		zpost = int64(m.smallOutWords())
		if s.dirty {
			zpre = zpost
		}
	} else {
		pa, ps, po, n, ok := m.pack(s.hin, b)
		if !ok {
			return out, slots, false, false, nil
		}
		d := uint64(s.din.p)
		params = m.params(a, b, d, d+uint64(pa), d+uint64(ps), d+uint64(po), sp)
		din, in, dout = s.din.p, n, s.din.p+cu.DevicePtr(po)
	}
	ns := unsafe.Slice((*C.longlong)(s.ns), 2)
	if s.mode == SmallFlag || s.mode == SmallGraph {
		if err := m.runFlag(s, params, in, b.N*sp); err != nil {
			s.dirty = true
			return out, slots, false, true, err
		}
	} else {
		pp := unsafe.Slice((*unsafe.Pointer)(s.pp), smallParams)
		copy(pp, params)
		runtime.LockOSThread()
		r := C.gs_small_run(cContext(m.c.ctx), cStream(s.st), cDev(din), s.hin.p, C.size_t(in), cDev(s.din.p),
			C.size_t(zpre), C.size_t(zpost), cFunc(m.fn), C.uint(b.N*sp), C.uint(pubsubBlock), &pp[0],
			s.hout.p, cDev(dout), C.size_t(obytes), cEvent(s.ev), &ns[0])
		runtime.UnlockOSThread()
		if !cuOK(r) {
			s.dirty = true
			return out, slots, false, true, fmt.Errorf("gpu: cuda: matching: %v", cuErr(r))
		}
	}
	s.dirty = false
	t2 := time.Now()
	if cap(out) >= len(evs) {
		out = out[:len(evs)]
	} else {
		out = make([][]uint32, len(evs))
	}
	if err := decodeFlat(out, b, st.ports); err != nil {
		return out, slots, false, true, err
	}
	var ok bool
	slots, ok = appendHits(slots, b)
	s.last = SmallTimes{Encode: t1.Sub(t0).Nanoseconds(), Queue: int64(ns[0]), Wait: int64(ns[1]), Decode: time.Since(t2).Nanoseconds()}
	return out, slots, ok, true, nil
}

var _ SmallPath = (*CUDAMatcher)(nil)
