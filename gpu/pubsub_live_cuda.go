//go:build cuda

package gpu

/*
#include <cuda.h>

// gs_live_scatter queues a scatter of pending words with ctx current on
// the calling thread: stream up waits for everything queued so far in the
// nrec streams sts[0..nrec) (an event recorded in each, sev[i]), then
// bubble_scatter (fn, params, grid blocks of 256) writes the words, done is
// recorded after it, and the streams sts[nrec..nall) wait for done before
// whatever is queued in them next. Nothing waits on the host. With fn
// NULL only the first part is queued: up waits for the nrec streams (the
// matching stream of a batch whose kernel scatters, pubsub_match_upd).
static CUresult gs_live_scatter(CUcontext ctx, int nrec, int nall, CUstream *sts, CUevent *sev, CUstream up,
	CUfunction fn, unsigned grid, void **params, CUevent done)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	for (int i = 0; i < nrec; i++) {
		if ((r = cuEventRecord(sev[i], sts[i])) != CUDA_SUCCESS)
			return r;
		if ((r = cuStreamWaitEvent(up, sev[i], 0)) != CUDA_SUCCESS)
			return r;
	}
	if (fn == NULL)
		return CUDA_SUCCESS;
	if ((r = cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, up, params, NULL)) != CUDA_SUCCESS)
		return r;
	if ((r = cuEventRecord(done, up)) != CUDA_SUCCESS)
		return r;
	for (int i = nrec; i < nall; i++)
		if ((r = cuStreamWaitEvent(sts[i], done, 0)) != CUDA_SUCCESS)
			return r;
	return CUDA_SUCCESS;
}

// gs_live_wait_value makes st wait (on the device) until the word at addr
// reaches v (wrap-safe: (int32)(*addr - v) >= 0).
static CUresult gs_live_wait_value(CUcontext ctx, CUstream st, CUdeviceptr addr, cuuint32_t v)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	return cuStreamWaitValue32(st, addr, v, CU_STREAM_WAIT_VALUE_GEQ);
}

// gs_live_alloc makes ctx current on the calling thread and allocates n
// bytes of page-locked memory, with its device address.
static CUresult gs_live_alloc(CUcontext ctx, void **p, size_t n, CUdeviceptr *d)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	if ((r = cuMemAllocHost(p, n)) != CUDA_SUCCESS)
		return r;
	return cuMemHostGetDevicePointer(d, *p, 0);
}

// gs_live_free frees page-locked memory with ctx current.
static CUresult gs_live_free(CUcontext ctx, void *p)
{
	CUresult r = cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS)
		return r;
	return cuMemFreeHost(p);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// Live updates: a change's bubbles reach the device while batches are
// matched, with no host-side wait and no pause of the matching.
//
// Update (bubbles, the default mode "live") applies the bubbles to the
// kept host image and adds their (global word offset, value) pairs to the
// pending pairs, in a page-locked buffer (one of liveRing, reused once the
// scatter that read it has fired; a word written again keeps one pair, its
// latest value), and publishes the name table and ports that go with them:
// no device call. The next batch queued (Submit, the small-batch path,
// KernelTime) first scatters every pending pair, reading the pairs in
// place from the mapped buffer, in its own stream: Submit's batch in its
// own kernel (pubsub_match_upd of kernels/pubsub.cu: the block that runs
// first writes the words while the others wait for it, so the caller
// queues no launch of its own; fuseLocked), the others with a
// bubble_scatter of kernels/gamt.cu before their work. Either is ordered
// after everything already queued in the other matching streams (an
// event recorded in each that had work queued since the previous
// scatter) and before everything queued in them afterwards (each waits
// for the event recorded after the latest scatter, or for the fused
// kernel's published epoch, before its
// next batch): one scatter per batch for all the changes since the
// previous one, and each batch sees the whole of an update or none of it;
// a batch queued after Update returns sees it. Nothing waits on the host.
// Work the host has seen finish (Wait: a batch's event fired) needs no
// order: its stream is no longer dirty, and once every scatter is seen
// finished a stream skips the wait for the latest (liveUpdates.finished),
// so a single matching goroutine, which waits for each batch before it
// queues the next, queues no cross-stream waits at all.
// A batch of a call (MatchSlots; EventBatch.since, the version the call
// began at) may leave pending the pairs of updates made after the call
// began, when its names are the ones the device's words go with
// (mayDefer): it is matched against the words as they stand (version
// flushedSeq, at or after the call's start), and the call's next batches
// or the next call scatter them. A call split over goroutines (its parts
// in several streams) so makes one scatter, at its first batch, and a
// part never waits for another part in flight for the sake of a change
// made meanwhile.
// Mode
// "eager" queues each update's scatter at once on an update stream of its
// own, with the same ordering (one scatter per update: what the churn
// benchmark compares). Whole images (a new generation) still wait for the
// device to be idle (Update, Load).
//
// The host side goes with the words: the name table and the ports of the
// image a batch is matched against are published with the update (state,
// an atomic pointer), under live.mu. Names are only added within a
// generation and get a new map when one is (pubsub.Device), so a batch
// encoded for an older map is refused by Submit (errStaleNames) and
// encoded again; ports are only appended, so a batch decodes with the
// ports read after it was queued.
//
// Locks: updMu (serializes Updates) > live.mu, which guards the pending
// pairs, the ring, seq and last and is held by whoever queues work on the
// device (Submit while it queues a batch, the small-batch path for its
// whole call, a few µs of queueing and its kernel; an update while it adds
// its pairs). The small path's own mutex is taken before live.mu. live.seq
// counts the versions of the words published (Submit stores it in the
// batch, for the tests to compare each batch with the table at the same
// version); every change of the state a batch is matched against counts,
// whole images included (publish).

// liveRing is the staging buffers of live updates: a flush waits for the
// scatter of the flush liveRing before it only if that has not yet run.
const liveRing = 8

// livePairs is the pending pairs a staging buffer holds at first.
const livePairs = 16 << 10

// errStaleNames: a batch was encoded for a name table a live update
// replaced since (matchRange encodes it again).
var errStaleNames = errors.New("gpu: cuda: event batch encoded for an older name table")

// liveState is the host side of the words on the device: the name table
// events are encoded by, its version, and the ports region's ports.
type liveState struct {
	names    map[string]uint32
	namesVer uint64
	ports    []uint32
}

// liveUpdates is a matcher's live-update state.
type liveUpdates struct {
	mu  sync.Mutex // held while work is queued on the device or pairs added
	seq uint64     // versions of the words published (mu)
	// The version the device's words are at once the scatters queued so
	// far have run, and the name table version they go with; the version
	// of the first update whose pairs are pending (mu).
	flushedSeq, flushedNames, pendFrom uint64
	deferred                           uint64     // batches queued with pairs left pending (mayDefer; for the tests)
	last                               cu.Event   // the latest scatter's done event (mu; zero before the first)
	up                                 cu.Stream  // the update stream: eager scatters only
	sev                                []cu.Event // per matching stream: recorded before a scatter
	ring                               [liveRing]liveStage
	k                                  int              // the ring's buffer the pending pairs are in (mu)
	pn                                 int              // pending pairs (mu)
	pidx                               map[uint32]int32 // pending pairs by global offset (mu)
	nver                               uint64           // name table versions handed out (updMu or the owning goroutine in load)
	ctx                                cu.CUContext
	// Ordering (mu): scatters queued; per matching stream, whether work
	// was queued in it since the latest scatter (it is then ordered
	// before the next) and the scatters it was ordered after; the same
	// count for the small-batch path's stream.
	flushes     uint64
	dirty       []bool
	waited      []uint64
	smallWaited uint64
	// Completion (mu), what the host has seen finish: per matching
	// stream, the works queued in it (orderStream counts them); doneFl,
	// the scatters that a batch seen finished (Wait) was ordered after.
	// A stream whose latest work is seen finished is not dirty (a
	// scatter need not wait for it), and once every scatter queued is
	// seen finished a stream need not wait for the latest (a single
	// matching goroutine, which waits for each batch before the next,
	// queues no cross-stream waits then).
	queued []uint64
	doneFl uint64
	// Scatters in the batch's kernel (pubsub_match_upd, fuseLocked):
	// per matching stream a pair of device words (the kernel's ticket
	// and the epoch its writer publishes) and the stream's latest epoch
	// (mu). When the latest scatter was one of them, lastFused is set and
	// a stream that must follow it waits for the word lastTick to reach
	// lastEpoch instead of for last.
	tick      devBuf
	epoch     []uint32
	lastFused bool
	lastTick  cu.DevicePtr
	lastEpoch uint32
}

// liveStage is one staging buffer: cap offsets, then cap values, read by
// the scatter through the buffer's device address.
type liveStage struct {
	p    unsafe.Pointer
	dev  cu.DevicePtr
	cap  int
	done cu.Event
	used bool // done recorded, maybe not yet fired
}

// init makes the update stream and events (on the owning goroutine).
func (l *liveUpdates) init(c *CUDA, streams int) error {
	l.ctx = c.ctx
	l.pidx = map[uint32]int32{}
	var err error
	if l.up, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("gpu: cuda: stream: %v", err)
	}
	for i := 0; i < streams; i++ {
		ev, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			return fmt.Errorf("gpu: cuda: event: %v", err)
		}
		l.sev = append(l.sev, ev)
	}
	l.dirty, l.waited, l.queued = make([]bool, streams), make([]uint64, streams), make([]uint64, streams)
	l.epoch = make([]uint32, streams)
	if l.tick, err = c.alloc(int64(8 * streams)); err != nil {
		return err
	}
	if err := cu.MemsetD32(l.tick.p, 0, int64(2*streams)); err != nil {
		return fmt.Errorf("gpu: cuda: zeroing the scatter tickets: %v", err)
	}
	for i := range l.ring {
		if l.ring[i].done, err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return fmt.Errorf("gpu: cuda: event: %v", err)
		}
	}
	return nil
}

// free releases them (on the owning goroutine, after the streams are idle).
func (l *liveUpdates) free(c *CUDA) {
	if l.up != (cu.Stream{}) {
		l.up.Synchronize()
		l.up.Destroy()
		l.up = cu.Stream{}
	}
	for i := range l.sev {
		cu.DestroyEvent(&l.sev[i])
	}
	l.sev = nil
	c.free(&l.tick)
	for i := range l.ring {
		s := &l.ring[i]
		if s.p != nil {
			C.gs_live_free(cContext(l.ctx), s.p)
			s.p, s.cap = nil, 0
		}
		if s.done != (cu.Event{}) {
			cu.DestroyEvent(&s.done)
		}
	}
}

// waitLast makes st wait for the latest scatter (l.mu held).
func (l *liveUpdates) waitLast(st cu.Stream) error {
	if l.lastFused {
		runtime.LockOSThread()
		r := C.gs_live_wait_value(cContext(l.ctx), cStream(st), C.CUdeviceptr(l.lastTick), C.cuuint32_t(l.lastEpoch))
		runtime.UnlockOSThread()
		if !cuOK(r) {
			return fmt.Errorf("gpu: cuda: stream wait: %v", cuErr(r))
		}
		return nil
	}
	if l.last == (cu.Event{}) {
		return nil
	}
	if err := st.Wait(l.last, 0); err != nil {
		return fmt.Errorf("gpu: cuda: stream wait: %v", err)
	}
	return nil
}

// orderStream orders matching stream i after every scatter queued, before
// work is queued in it (l.mu held; no wait when every scatter is seen
// finished), marks it as having work since the latest scatter and counts
// the work.
func (m *CUDAMatcher) orderStream(i int) error {
	l := &m.live
	if l.waited[i] < l.flushes {
		if l.doneFl < l.flushes {
			if err := l.waitLast(m.streams[i]); err != nil {
				return err
			}
		}
		l.waited[i] = l.flushes
	}
	l.dirty[i] = true
	l.queued[i]++
	return nil
}

// finished records that the work queued numbered q in stream i, ordered
// after the scatters up to fl, is seen finished (l.mu held).
func (l *liveUpdates) finished(i int, q, fl uint64) {
	if l.queued[i] == q {
		l.dirty[i] = false
	}
	l.doneFl = max(l.doneFl, fl)
}

// orderSmall orders the small-batch path's stream after every scatter
// queued (l.mu held; its calls wait for their work under l.mu, so it never
// has work in flight when a scatter is queued).
func (m *CUDAMatcher) orderSmall(st cu.Stream) error {
	l := &m.live
	if l.smallWaited < l.flushes {
		if l.doneFl < l.flushes {
			if err := l.waitLast(st); err != nil {
				return err
			}
		}
		l.smallWaited = l.flushes
	}
	return nil
}

// nextNamesVer returns a new name table version.
func (m *CUDAMatcher) nextNamesVer() uint64 {
	m.live.nver++
	return m.live.nver
}

// nextState returns the state after an update with name table names: the
// same version when the map is the same one, the ports read from the kept
// image (a new slice only when they changed). updMu held.
func (m *CUDAMatcher) nextState(names map[string]uint32) *liveState {
	old := m.state.Load()
	st := &liveState{names: names, namesVer: old.namesVer, ports: old.ports}
	if !sameMap(old.names, names) {
		st.namesVer = m.nextNamesVer()
	}
	w := m.host.Words
	if np := int(w[pubsub.RegionHeader][pubsub.HdrPorts]); np != len(old.ports) {
		st.ports = append([]uint32(nil), w[pubsub.RegionPorts][:np]...)
	} else {
		for i, p := range old.ports {
			if w[pubsub.RegionPorts][i] != p {
				st.ports = append([]uint32(nil), w[pubsub.RegionPorts][:np]...)
				break
			}
		}
	}
	return st
}

// publish makes st the state of the words on the device and counts a
// version (the caller made the device's words st's, with no batch in
// flight, or holds live.mu and queued them).
func (m *CUDAMatcher) publish(st *liveState) {
	m.live.mu.Lock()
	m.state.Store(st)
	m.live.seq++
	m.live.flushedSeq, m.live.flushedNames = m.live.seq, st.namesVer
	m.live.mu.Unlock()
}

// sameMap says whether a and b are the same map (not equal contents).
func sameMap(a, b map[string]uint32) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

// idle waits for every stream of the matcher, the update stream's
// scatters included (on the owning goroutine). Pending pairs are dropped:
// the caller loads a whole image next.
func (m *CUDAMatcher) idle() error {
	for _, s := range m.streams {
		if err := s.Synchronize(); err != nil {
			return err
		}
	}
	m.live.mu.Lock()
	m.live.dropPending()
	m.live.mu.Unlock()
	if m.live.up != (cu.Stream{}) {
		return m.live.up.Synchronize()
	}
	return nil
}

func (l *liveUpdates) dropPending() {
	l.pn = 0
	if len(l.pidx) > 4096 {
		l.pidx = map[uint32]int32{}
	} else {
		clear(l.pidx)
	}
}

// UpdatesLive says whether Update writes bubbles while batches are matched
// (the update modes "live", the default, and "eager"): eventfwd.Hybrid
// then lets its batches go on during a bubble update, and holds them only
// for a whole image.
func (m *CUDAMatcher) UpdatesLive() bool {
	switch updateMode() {
	case "live", "eager", "ahead":
		return true
	}
	return false
}

// updateLive applies bubbles u (not a whole image) as a live update (see
// above; m.updMu held): pending pairs, scattered before the next batch
// (mode live), or at once in the update stream (eager) or in the matching
// stream the next batch will take (ahead).
func (m *CUDAMatcher) updateLive(u bubble.Update, names map[string]uint32, mode string) error {
	if m.c.closed.Load() {
		return ErrClosed
	}
	if m.host == nil || m.host.Generation != u.Generation {
		return fmt.Errorf("%w: pubsub bubbles of generation %d for a device layout of another", ErrBadUpdate, u.Generation)
	}
	if err := m.host.Apply(u.Bubbles); err != nil {
		return fmt.Errorf("%w: %v", ErrBadUpdate, err)
	}
	st := m.nextState(names)
	l := &m.live
	l.mu.Lock()
	defer l.mu.Unlock()
	empty := l.pn == 0
	if err := m.addPendingLocked(u.Bubbles); err != nil {
		return err
	}
	m.state.Store(st)
	l.seq++
	if empty {
		l.pendFrom = l.seq
	}
	switch mode {
	case "eager":
		if err := m.flushLocked(l.up, -1); err != nil {
			return err
		}
	case "ahead":
		// The stream Submit takes next (rr+1): a batch that took its
		// stream already and waits for l.mu is ordered after the
		// scatter by orderStream all the same.
		i := int(m.rr.Load()+1) % len(m.streams)
		if err := m.flushLocked(m.streams[i], i); err != nil {
			return err
		}
	}
	return nil
}

// addPendingLocked adds the pairs of bs, with their values in the kept
// image (l.mu held).
func (m *CUDAMatcher) addPendingLocked(bs []bubble.Bubble) error {
	l := &m.live
	s := &l.ring[l.k]
	if s.used {
		// The scatter that read this buffer liveRing flushes ago: long
		// done as a rule.
		if err := s.done.Synchronize(); err != nil {
			return fmt.Errorf("gpu: cuda: live update: %v", err)
		}
		s.used = false
	}
	if need := l.pn + len(bs); need > s.cap {
		n := max(2*s.cap, need, livePairs)
		var p unsafe.Pointer
		var d C.CUdeviceptr
		runtime.LockOSThread()
		r := C.gs_live_alloc(cContext(l.ctx), &p, C.size_t(8*n), &d)
		runtime.UnlockOSThread()
		if !cuOK(r) {
			return fmt.Errorf("gpu: cuda: live update staging of %d pairs: %v", n, cuErr(r))
		}
		if s.p != nil {
			copy(unsafe.Slice((*uint32)(p), n), unsafe.Slice((*uint32)(s.p), l.pn))
			copy(unsafe.Slice((*uint32)(unsafe.Add(p, 4*n)), n), unsafe.Slice((*uint32)(unsafe.Add(s.p, 4*s.cap)), l.pn))
			runtime.LockOSThread()
			C.gs_live_free(cContext(l.ctx), s.p)
			runtime.UnlockOSThread()
		}
		s.p, s.dev, s.cap = p, cu.DevicePtr(d), n
	}
	offs := unsafe.Slice((*uint32)(s.p), s.cap)
	vals := unsafe.Slice((*uint32)(unsafe.Add(s.p, 4*s.cap)), s.cap)
	w := m.host.Words
	for _, b := range bs {
		g := uint32(m.base[b.Region]) + b.Offset
		v := w[b.Region][b.Offset]
		if i, ok := l.pidx[g]; ok {
			vals[i] = v
			continue
		}
		l.pidx[g] = int32(l.pn)
		offs[l.pn], vals[l.pn] = g, v
		l.pn++
	}
	return nil
}

// flushLocked queues the scatter of the pending pairs in stream up (l.mu
// held; nothing when none are pending), matching stream upIdx or -1 (the
// update stream, the small-batch path's): after everything already queued
// in the other matching streams (those with work queued since the latest
// scatter), and, through orderStream and orderSmall, before everything
// queued in them afterwards.
func (m *CUDAMatcher) flushLocked(up cu.Stream, upIdx int) error {
	l := &m.live
	if l.pn == 0 {
		return nil
	}
	s := &l.ring[l.k]
	a := newCArgs(4)
	defer a.free()
	params := []unsafe.Pointer{a.u64(uint64(m.img.p)), a.u64(uint64(s.dev)), a.u64(uint64(s.dev) + uint64(4*s.cap)), a.u32(uint32(l.pn))}
	grid := min((l.pn+pubsubBlock-1)/pubsubBlock, 1024)
	if err := m.orderAfterDirty(up, upIdx, m.c.scat, grid, params, s.done); err != nil {
		return err
	}
	l.last, l.lastFused = s.done, false
	l.flushed(upIdx, m.state.Load().namesVer)
	return nil
}

// orderAfterDirty queues in stream up (matching stream upIdx or -1) the
// waits for the work queued so far in the other matching streams that are
// dirty and, with fn set, the scatter fn (grid blocks, params) and the
// record of done: gs_live_scatter, one cgo call (l.mu held).
func (m *CUDAMatcher) orderAfterDirty(up cu.Stream, upIdx int, fn cu.Function, grid int, params []unsafe.Pointer, done cu.Event) error {
	l := &m.live
	dirty := 0
	for i, d := range l.dirty {
		if d && i != upIdx {
			dirty++
		}
	}
	if fn == (cu.Function{}) && dirty == 0 {
		return nil // nothing to queue: no C memory, no cgo call (the fused batch's usual case)
	}
	nst := len(m.streams) + 1
	mem := C.malloc(C.size_t(8 * (2*nst + len(params) + 1)))
	defer C.free(mem)
	cs := unsafe.Slice((*C.CUstream)(mem), nst)
	ce := unsafe.Slice((*C.CUevent)(unsafe.Add(mem, 8*nst)), nst)
	n := 0
	for i, st := range m.streams {
		if i != upIdx && l.dirty[i] {
			cs[n], ce[n] = cStream(st), cEvent(l.sev[i])
			n++
		}
	}
	pp := unsafe.Slice((*unsafe.Pointer)(unsafe.Add(mem, 8*2*nst)), len(params)+1)
	copy(pp, params)
	runtime.LockOSThread()
	r := C.gs_live_scatter(cContext(m.c.ctx), C.int(n), C.int(n), &cs[0], &ce[0], cStream(up),
		cFunc(fn), C.uint(grid), &pp[0], cEvent(done))
	runtime.UnlockOSThread()
	if !cuOK(r) {
		return fmt.Errorf("gpu: cuda: live update: %v", cuErr(r))
	}
	return nil
}

// flushed records that the pending pairs' scatter is queued, in matching
// stream upIdx or -1 (l.mu held; l.last and lastFused set by the caller):
// the streams wait for it before their next work (orderStream), and their
// work so far is ordered before it.
func (l *liveUpdates) flushed(upIdx int, namesVer uint64) {
	l.flushedSeq, l.flushedNames = l.seq, namesVer
	l.ring[l.k].used = true
	l.k = (l.k + 1) % liveRing
	l.flushes++
	clear(l.dirty)
	if upIdx >= 0 {
		// The scatter is in this stream: its next work follows it, and
		// the next scatter must follow that.
		l.waited[upIdx] = l.flushes
		l.dirty[upIdx] = true
	}
	l.dropPending()
}

// fuseLocked prepares the scatter of the pending pairs inside the kernel
// of the batch Submit queues in matching stream si (pubsub_match_upd; l.mu
// held, pairs pending): it orders the stream after the dirty streams' work
// and returns the kernel's extra arguments (in a) and the event to record
// after the kernel (the staging buffer's). The caller queues the batch
// and then calls fused.
func (m *CUDAMatcher) fuseLocked(si int, a *cArgs) ([]unsafe.Pointer, cu.Event, uint32, error) {
	l := &m.live
	s := &l.ring[l.k]
	if err := m.orderAfterDirty(m.streams[si], si, cu.Function{}, 0, nil, cu.Event{}); err != nil {
		return nil, cu.Event{}, 0, err
	}
	// The epoch is used up even if the batch then fails to queue: a later
	// one never reuses it (its waiters would not wait).
	l.epoch[si]++
	epoch := l.epoch[si]
	tick := uint64(l.tick.p) + uint64(8*si)
	return []unsafe.Pointer{a.u64(uint64(m.img.p)), a.u64(uint64(s.dev)), a.u64(uint64(s.dev) + uint64(4*s.cap)),
		a.u32(uint32(l.pn)), a.u64(tick), a.u32(epoch)}, s.done, epoch, nil
}

// fused records that the batch in stream si, queued after fuseLocked,
// carries the scatter (published as epoch) (l.mu held).
func (m *CUDAMatcher) fused(si int, epoch uint32) {
	l := &m.live
	l.lastFused, l.lastTick, l.lastEpoch = true, l.tick.p+cu.DevicePtr(8*si+4), epoch
	l.flushed(si, m.state.Load().namesVer)
}

// mayDefer says whether batch b, about to be queued, may leave the
// pending pairs pending (l.mu held): every pending update was made after
// the call that queues b began (b.since), and b's names are the ones the
// device's words go with. Such a batch is matched against the words as
// they stand (the version flushedSeq), which is the state of the table at
// or after the call's start: a caller that matches many batches in one
// call (MatchSlots' parts) makes one scatter for the call, not one per
// batch, and a batch in flight in another stream never holds it back.
func (l *liveUpdates) mayDefer(b *EventBatch) bool {
	return b.since != 0 && l.pendFrom > b.since && b.namesVer != 0 && b.namesVer == l.flushedNames
}
