//go:build cuda

package gpu

/*
#include <cuda.h>

static CUresult gs_resident_stream(CUstream *st) { return cuStreamCreate(st, CU_STREAM_NON_BLOCKING); }

// gs_resident_launch zeroes the launch's shared state (the module's
// rs_grid, 16 bytes at state), launches the resident kernel, a block per
// slot, and after it has ended writes seq to the word end.
static CUresult gs_resident_launch(CUfunction fn, CUstream st, unsigned grid, unsigned block, unsigned smem,
	CUdeviceptr slots, unsigned long long idle, CUdeviceptr state, CUdeviceptr end, unsigned seq)
{
	void *params[] = {&slots, &idle};
	CUresult r = cuMemsetD32Async(state, 0, 4, st);
	if (r != CUDA_SUCCESS)
		return r;
	r = cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, smem, st, params, NULL);
	if (r != CUDA_SUCCESS)
		return r;
	return cuStreamWriteValue32(st, end, seq, CU_STREAM_WRITE_VALUE_DEFAULT);
}

// gs_resident_smem lets fn launch with the most dynamic shared memory
// that leaves room for its static shared memory within the device's
// opt-in limit, at most want bytes, and returns that in *got.
static CUresult gs_resident_smem(CUfunction fn, int optin, int want, int *got)
{
	int st = 0;
	CUresult r = cuFuncGetAttribute(&st, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);
	if (r != CUDA_SUCCESS)
		return r;
	*got = optin - st < want ? optin - st : want;
	if (*got < 0)
		*got = 0;
	return cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, *got);
}

static CUresult gs_write_value(CUstream st, CUdeviceptr p, unsigned v)
{
	return cuStreamWriteValue32(st, p, v, CU_STREAM_WRITE_VALUE_DEFAULT);
}

static CUresult gs_stream_sync(CUstream st) { return cuStreamSynchronize(st); }
static CUresult gs_stream_query(CUstream st) { return cuStreamQuery(st); }

static void gs_stream_destroy(CUstream st) { cuStreamDestroy(st); }
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/internal/spin"
	"github.com/gswitch/gswitch/kernels"
)

// Resident lookups (kernels/resident.cu): a kernel that stays on the
// device, a block per mailbox slot, takes a small flow lookup from its
// slot in page-locked host memory and answers in the batch's memory and
// completion word. A Submit of at most residentKeys keys in a batch that
// holds a slot is two stores into the slot (the fields, then the request
// number): no kernel launch, no driver call, no stream; the caller's Wait
// and Ready read the batch's completion word as in the flag wait mode.
// The kernel leaves once no slot has had a request for its idle time (all
// its blocks together) and is launched again by the first Submit (or
// Wait) that finds none alive, so the device is not held by a switch with
// no traffic, and under traffic no lookup waits for a launch. A driver
// call that waits for the whole device (a free) would wait for it: Close,
// the backend's device frees and its batches' allocations stop it first (an allocation under
// CUDA.mu, so that no waiter launches it again meanwhile: a kernel does
// not know memory allocated after its launch under compute-sanitizer).
//
// Lock order: a Submit's post, a waiter's relaunch and an allocation's
// stop hold CUDA.mu (after lmu and smu, before pmu, as every CUDA.mu
// holder); the slots' free list has its own mutex (fmu), taken last.
//
// Ordering with updates: a batch is posted only when the update stream
// has written, after its last scatter, the number of scatters queued so
// far (resident.scat): every bubble applied before the Submit is on the
// device; otherwise it goes through a stream as before, ordered after the
// scatters by their event. And a kernel serves one version of the tables
// (CUDA.rver, the count of image loads and scatters): a post of a newer
// version stops the live kernel and launches another, whose SMs' caches
// start empty (see resident.cu).
//
// ResidentConfig turns them on (NewCUDAConfig; the agent's
// --resident-lookups); its zero value takes the environment's:
// GSWITCH_CUDA_RESIDENT=N turns them on with N slots (0, the default: off;
// "on": 64); GSWITCH_CUDA_RESIDENT_IDLE_US sets the idle time after which
// the kernel leaves (2000); GSWITCH_CUDA_RESIDENT_PAUSE the waiter's
// pauses between reads (residentPause).
var residentSlots = func() int {
	switch v := os.Getenv("GSWITCH_CUDA_RESIDENT"); v {
	case "", "off":
		return 0
	case "on":
		return 64
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1024 {
			return 0
		}
		return n
	}
}()

// residentPause is the resident wait's pauses between two reads of the
// completion word (GSWITCH_CUDA_RESIDENT_PAUSE, 0 to 4096; 0, the
// default: a runtime.Gosched between reads). With pauses, the wait
// yields (Gosched) at every residentYieldEvery-th read only.
var residentPause = func() int {
	n, err := strconv.Atoi(os.Getenv("GSWITCH_CUDA_RESIDENT_PAUSE"))
	if err != nil || n < 0 || n > 4096 {
		return 0
	}
	return n
}()

const residentYieldEvery = 4

var residentIdle = func() time.Duration {
	us, err := strconv.Atoi(os.Getenv("GSWITCH_CUDA_RESIDENT_IDLE_US"))
	if err != nil || us < 1 || us > 10_000_000 {
		return 2 * time.Millisecond
	}
	return time.Duration(us) * time.Microsecond
}()

// The slot's words (RS_* of resident.cu).
const (
	rsReq, rsStop, rsDone, rsN, rsStride, rsFseq = 0, 1, 2, 3, 4, 5
	rsImg, rsDesc, rsKeys, rsOut, rsFlag, rsVer  = 6, 8, 10, 12, 14, 16
	rsSvc                                        = 18 // 64-bit: request << 32 | staged << 31 | the kernel's service ns
	rsWords                                      = 32
	residentKeys                                 = 64  // RS_MAXN
	residentThreads                              = 512 // RS_THREADS
)

// How long a resident wait goes before it asks the stream for an error
// (a kernel that faulted never answers), and before it gives up.
const (
	residentCheck   = time.Second
	residentTimeout = 10 * time.Second
)

type resident struct {
	mod   cu.Module
	fn    C.CUfunction
	state C.CUdeviceptr // the module's rs_grid: the launch's last request time and leaving flag
	st    C.CUstream
	mail  hostBuf // the slots
	end   hostBuf // the launch number the stream writes after each launch
	scat  hostBuf // the scatter number the update stream writes after each scatter
	n     int
	idle  time.Duration // with no request this long the kernel leaves
	smem  int           // the launch's dynamic shared memory: a table whose staging needs more is not posted

	launched atomic.Uint32 // launches queued (written under CUDA.mu)
	kver     uint64        // the tables' version of the last launch (guarded by CUDA.mu)
	broken   atomic.Bool   // a launch failed: Submits take the streams
	posts    atomic.Uint64
	launches atomic.Uint64

	fmu  sync.Mutex
	free []int    // slots no batch holds
	reqs []uint32 // per slot: the last request number posted (guarded by CUDA.mu)
}

// newResident loads the resident module (loadAux: $GSWITCH_PTX_DIR or the
// embedded PTX) and allocates n slots; it runs on the owning goroutine.
// The kernel gets smem bytes of dynamic shared memory (a table's staging,
// see flowLayout.stagePlan), or what the device's opt-in limit optin leaves.
func (c *CUDA) newResident(n int, idle time.Duration, smem, optin int) (*resident, error) {
	mod, which, err := c.loadAux("resident", kernels.Residentsm90, kernels.Residentcompute80)
	if err != nil {
		return nil, fmt.Errorf("gpu: cuda: resident lookups: %v", err)
	}
	fn, err := mod.Function("flow_resident")
	var state cu.DevicePtr
	var size int64
	if err == nil {
		state, size, err = mod.Global("rs_grid")
		if err == nil && size != 16 {
			err = fmt.Errorf("rs_grid is %d bytes, want 16", size)
		}
	}
	if err != nil {
		mod.Unload()
		return nil, fmt.Errorf("gpu: cuda: resident lookups: %s: %v", which, err)
	}
	r := &resident{mod: mod, fn: cFunc(fn), state: C.CUdeviceptr(state), n: n, idle: idle, reqs: make([]uint32, n)}
	var got C.int
	if res := C.gs_resident_smem(r.fn, C.int(optin), C.int(smem), &got); !cuOK(res) {
		mod.Unload()
		return nil, fmt.Errorf("gpu: cuda: resident lookups: shared memory: %v", cuErr(res))
	}
	r.smem = int(got)
	if res := C.gs_resident_stream(&r.st); !cuOK(res) {
		mod.Unload()
		return nil, fmt.Errorf("gpu: cuda: resident lookups: stream: %v", cuErr(res))
	}
	if r.mail, err = allocHost(int64(4 * rsWords * n)); err == nil {
		if r.end, err = allocHost(64); err == nil {
			r.scat, err = allocHost(64)
		}
	}
	if err != nil {
		r.close()
		return nil, err
	}
	clear(r.mail.bytes(r.mail.n))
	*(*uint32)(r.end.p), *(*uint32)(r.scat.p) = 0, 0
	for i := n - 1; i >= 0; i-- {
		r.free = append(r.free, i)
	}
	return r, nil
}

// close stops the kernel and releases everything (owning goroutine).
func (r *resident) close() {
	if r.mail.n != 0 && r.end.n != 0 { // launched only once both are made
		r.stop()
	}
	C.gs_stream_destroy(r.st)
	r.mod.Unload()
	r.mail.free()
	r.end.free()
	r.scat.free()
}

func (r *resident) slot(i int) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Add(r.mail.p, 4*rsWords*i)), rsWords)
}

// take returns a free slot, or -1.
func (r *resident) take() int {
	r.fmu.Lock()
	defer r.fmu.Unlock()
	if len(r.free) == 0 {
		return -1
	}
	i := r.free[len(r.free)-1]
	r.free = r.free[:len(r.free)-1]
	return i
}

func (r *resident) put(i int) {
	if i < 0 {
		return
	}
	r.fmu.Lock()
	r.free = append(r.free, i)
	r.fmu.Unlock()
}

// alive reports whether the last launch has not ended (the stream writes
// its number after it).
func (r *resident) alive() bool {
	return atomic.LoadUint32((*uint32)(r.end.p)) != r.launched.Load()
}

// scattered reports whether the update stream has done the scatters
// numbered up to seq.
func (r *resident) scattered(seq uint64) bool {
	return atomic.LoadUint32((*uint32)(r.scat.p)) == uint32(seq)
}

// noteScatter queues, after the scatters in stream st, the write of their
// number seq (CUDA.scatter, under CUDA.mu).
func (r *resident) noteScatter(st C.CUstream, seq uint64) error {
	if res := C.gs_write_value(st, C.CUdeviceptr(uintptr(r.scat.p)), C.uint(uint32(seq))); !cuOK(res) {
		return fmt.Errorf("gpu: cuda: resident lookups: scatter mark: %v", cuErr(res))
	}
	return nil
}

// launch launches the kernel for version ver of the tables; the caller
// holds CUDA.mu with the context current on its thread.
func (r *resident) launch(ver uint64) error {
	r.kver = ver
	for i := range r.n {
		atomic.StoreUint32(&r.slot(i)[rsStop], 0)
	}
	seq := r.launched.Add(1)
	res := C.gs_resident_launch(r.fn, r.st, C.uint(r.n), residentThreads, C.uint(r.smem),
		C.CUdeviceptr(uintptr(r.mail.p)), C.ulonglong(r.idle.Nanoseconds()), r.state,
		C.CUdeviceptr(uintptr(r.end.p)), C.uint(seq))
	if !cuOK(res) {
		r.broken.Store(true)
		return fmt.Errorf("gpu: cuda: resident lookups: launch: %v", cuErr(res))
	}
	r.launches.Add(1)
	return nil
}

// stop makes a live kernel leave and waits until it has (owning
// goroutine, before a device free and at Close; a post of a newer
// version, under CUDA.mu). A nil r (resident lookups off) has none.
func (r *resident) stop() {
	if r == nil || !r.alive() {
		return
	}
	for i := range r.n {
		atomic.StoreUint32(&r.slot(i)[rsStop], 1)
	}
	C.gs_stream_sync(r.st)
}

// takes reports whether a batch of n keys for table t may be posted.
func (r *resident) takes(t *cudaTable, n int) bool {
	return t.kind == Flow && n <= residentKeys && t.smem <= r.smem && !r.broken.Load()
}

// post fills b's slot and posts it; the caller (Submit) holds CUDA.mu with
// the context current, and ver is the tables' version (CUDA.rver).
func (r *resident) post(t *cudaTable, b *Batch, cb *cudaBatch, ver uint64) error {
	s := r.slot(cb.rslot)
	cb.fseq++
	put64 := func(i int, v uint64) { s[i], s[i+1] = uint32(v), uint32(v>>32) }
	s[rsN], s[rsStride], s[rsFseq] = uint32(b.N), uint32(b.Cap), cb.fseq
	put64(rsImg, uint64(t.img.p))
	put64(rsDesc, uint64(t.desc.p))
	put64(rsKeys, uint64(uintptr(cb.hin.p)))
	put64(rsOut, uint64(uintptr(cb.hout.p)))
	put64(rsFlag, uint64(uintptr(cb.flag.p)))
	put64(rsVer, ver)
	q := r.reqs[cb.rslot] + 1
	if q == 0 {
		q = 1
	}
	r.reqs[cb.rslot] = q
	atomic.StoreUint32(&s[rsReq], q) // after the fields (x86 keeps stores in order; Go's atomics are sequentially consistent)
	cb.rposted = true
	r.posts.Add(1)
	if r.alive() && r.kver != ver {
		r.stop()
	}
	if !r.alive() {
		return r.launch(ver)
	}
	return nil
}

// relaunch launches the kernel if none is alive: a posted request that a
// kernel's last moment missed (its block left before the request came).
func (c *CUDA) relaunch() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.shut {
		return ErrClosed
	}
	r := c.res
	if r.alive() {
		return nil
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if res := C.cuCtxSetCurrent(cContext(c.ctx)); !cuOK(res) {
		return fmt.Errorf("gpu: cuda: %v", cuErr(res))
	}
	return r.launch(c.rver)
}

// residentReady is cudaBatch.ready for a posted batch.
func (c *CUDA) residentReady(cb *cudaBatch) bool {
	if atomic.LoadUint32((*uint32)(cb.flag.p)) == cb.fseq {
		return true
	}
	if !c.res.alive() {
		if err := c.relaunch(); err != nil {
			cb.submitErr = err
			return true
		}
	}
	return false
}

// residentWait is cudaBatch.wait for a posted batch: it reads the
// completion word, yielding between reads, launches a kernel if none is
// alive, and after residentCheck asks the stream for a fault. (Reading
// without yielding for the first 50 µs took the datapath workers' p99 at
// 1 M from about 200 µs to 660–940: 8 workers on 8 processors, a worker
// back from a system call waits for a processor until another yields.
// Yielding costs a lookup nothing measurable: 8 callers' p50 11.2 µs
// against 11.1, BenchmarkCUDAResidentLatency; H200, 2026-11-27.)
func (c *CUDA) residentWait(cb *cudaBatch) error {
	flag := (*uint32)(cb.flag.p)
	var t0 time.Time
	for i := 0; atomic.LoadUint32(flag) != cb.fseq; i++ {
		if cb.submitErr != nil {
			return cb.submitErr
		}
		if i&15 == 15 {
			if t0.IsZero() {
				t0 = time.Now()
			}
			if !c.res.alive() {
				if err := c.relaunch(); err != nil {
					return err
				}
			}
			if d := time.Since(t0); d > residentCheck {
				if res := C.gs_stream_query(c.res.st); res != C.CUDA_ERROR_NOT_READY && !cuOK(res) {
					return fmt.Errorf("gpu: cuda: resident lookup: %v", cuErr(res))
				}
				if d > residentTimeout {
					return fmt.Errorf("gpu: cuda: resident lookup not answered in %v", d.Round(time.Millisecond))
				}
			}
		}
		if residentPause > 0 && i%residentYieldEvery != residentYieldEvery-1 {
			spin.Pause(residentPause)
		} else {
			runtime.Gosched()
		}
	}
	return nil
}

// ResidentStats reports whether resident lookups are on, the lookups
// posted to the resident kernel and its launches.
func (c *CUDA) ResidentStats() (on bool, posts, launches uint64) {
	if c.res == nil {
		return false, 0, 0
	}
	return true, c.res.posts.Load(), c.res.launches.Load()
}
