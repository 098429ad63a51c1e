//go:build cuda

package gpu

/*
#include <cuda.h>

// gs_live_scatter queues one live update with ctx current on the calling
// thread: the update stream up waits for everything queued so far in the
// nrec streams sts[0..nrec) (an event recorded in each, sev[i]), then
// bubble_scatter (fn, params, grid blocks of 256) writes the update's
// words, done is recorded after it, and every stream sts[0..nall) waits for
// done before whatever is queued in it next. Nothing waits on the host.
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
	if ((r = cuLaunchKernel(fn, grid, 1, 1, 256, 1, 1, 0, up, params, NULL)) != CUDA_SUCCESS)
		return r;
	if ((r = cuEventRecord(done, up)) != CUDA_SUCCESS)
		return r;
	for (int i = 0; i < nall; i++)
		if ((r = cuStreamWaitEvent(sts[i], done, 0)) != CUDA_SUCCESS)
			return r;
	return CUDA_SUCCESS;
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
// kept host image, writes their (global word offset, value) pairs into a
// page-locked staging buffer (one of liveRing, reused once the scatter that
// read it has fired) and, holding the barrier (live.bar) exclusively for
// one cgo call, queues on the matcher's update stream: a wait for
// everything already queued in the matching streams (an event recorded in
// each), bubble_scatter (kernels/gamt.cu) reading the pairs in place from
// the mapped staging, an event after it, and a wait for that event in
// every matching stream and the small-batch path's stream. So on the
// device the scatter runs after every batch queued before the update and
// before every batch queued after it: each batch sees the whole of an
// update or none of it, and a batch queued after Update returns sees it.
// The matching goroutines never wait for an update on the host, but for
// the barrier's one cgo call if they queue a batch at that moment (Submit
// holds the barrier shared while it queues; the small-batch path for its
// whole call, a few µs of queueing and its kernel). Whole images (a new
// generation) still wait for the device to be idle (Update, Load).
//
// The host side goes with the words: the name table and the ports of the
// image a batch is matched against are published with the update (state,
// an atomic pointer), under the barrier. Names are only added within a
// generation and get a new map when one is (pubsub.Device), so a batch
// encoded for an older map is refused by Submit (errStaleNames) and
// encoded again; ports are only appended, so a batch decodes with the
// ports read after it was matched.
//
// Lock order: updMu (serializes Updates) > live.bar > the small path's mu
// is never taken under bar (matchSmall takes bar under it). m.live.seq
// counts the updates queued (written under bar held exclusively, read under
// it shared: Submit stores it in the batch, for the tests to compare each
// batch with the table at the same version); every change of the state a
// batch is matched against counts, whole images included (publish).

// liveRing is the staging buffers of live updates: an update waits for the
// scatter of the update liveRing before it only if that has not yet run.
const liveRing = 8

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
	bar  sync.RWMutex // held shared while a batch is queued, exclusively while an update is
	seq  uint64       // versions of the words published (bar)
	last cu.Event     // the latest update's done event (bar; zero before the first)
	up   cu.Stream    // the update stream: scatters only
	sev  []cu.Event   // per matching stream: recorded before a scatter
	ring [liveRing]liveStage
	k    int    // the ring's next buffer (updMu)
	nver uint64 // name table versions handed out (updMu or the owning goroutine in load)
}

// liveStage is one staging buffer: offsets, then values, read by the
// scatter through the buffer's device address.
type liveStage struct {
	h    hostBuf
	dev  cu.DevicePtr
	done cu.Event
	used bool // done recorded, maybe not yet fired
}

// init makes the update stream and events (on the owning goroutine).
func (l *liveUpdates) init(streams int) error {
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
	for i := range l.ring {
		l.ring[i].h.free()
		if l.ring[i].done != (cu.Event{}) {
			cu.DestroyEvent(&l.ring[i].done)
		}
	}
}

// waitLast makes st wait for the latest live update's scatter (l.bar held).
func (l *liveUpdates) waitLast(st cu.Stream) error {
	if l.seq == 0 || l.last == (cu.Event{}) {
		return nil
	}
	if err := st.Wait(l.last, 0); err != nil {
		return fmt.Errorf("gpu: cuda: stream wait: %v", err)
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
// flight or under the barrier).
func (m *CUDAMatcher) publish(st *liveState) {
	m.live.bar.Lock()
	m.state.Store(st)
	m.live.seq++
	m.live.bar.Unlock()
}

// sameMap says whether a and b are the same map (not equal contents).
func sameMap(a, b map[string]uint32) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

// idle waits for every stream of the matcher, the update stream's
// scatters included (on the owning goroutine).
func (m *CUDAMatcher) idle() error {
	for _, s := range m.streams {
		if err := s.Synchronize(); err != nil {
			return err
		}
	}
	if m.live.up != (cu.Stream{}) {
		return m.live.up.Synchronize()
	}
	return nil
}

// UpdatesLive says whether Update writes bubbles while batches are matched
// (the default update mode, "live"): eventfwd.Hybrid then lets its batches
// go on during a bubble update, and holds them only for a whole image.
func (m *CUDAMatcher) UpdatesLive() bool { return updateMode() == "live" }

// updateLive applies bubbles u (not a whole image) as a live update (see
// above; m.updMu held).
func (m *CUDAMatcher) updateLive(u bubble.Update, names map[string]uint32) error {
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
	n := len(u.Bubbles)
	if n == 0 {
		m.publish(st)
		return nil
	}
	l := &m.live
	s := &l.ring[l.k]
	if s.used {
		// The scatter that read this buffer liveRing updates ago: long
		// done as a rule.
		if err := s.done.Synchronize(); err != nil {
			return fmt.Errorf("gpu: cuda: live update: %v", err)
		}
		s.used = false
	}
	if int64(8*n) > s.h.n {
		if err := m.c.do(func() error {
			if err := growHost(&s.h, max(int64(8*n), 64<<10)); err != nil {
				return err
			}
			var err error
			s.dev, err = hostDevPtr(s.h.p)
			return err
		}); err != nil {
			return err
		}
	}
	// Offsets first, the values n words later: the value of each word as
	// the kept image has it after the update (a word written twice gets
	// its last value from both writes).
	h := unsafe.Slice((*uint32)(s.h.p), 2*n)
	w := m.host.Words
	for i, b := range u.Bubbles {
		h[i] = uint32(m.base[b.Region]) + b.Offset
		h[n+i] = w[b.Region][b.Offset]
	}
	a := newCArgs(4)
	defer a.free()
	params := []unsafe.Pointer{a.u64(uint64(m.img.p)), a.u64(uint64(s.dev)), a.u64(uint64(s.dev) + uint64(4*n)), a.u32(uint32(n))}
	grid := min((n+pubsubBlock-1)/pubsubBlock, 1024)

	l.bar.Lock()
	defer l.bar.Unlock()
	nrec := len(m.streams)
	sts := make([]C.CUstream, 0, nrec+1)
	for _, st := range m.streams {
		sts = append(sts, cStream(st))
	}
	if sp := m.small.Load(); sp != nil {
		sts = append(sts, cStream(sp.st))
	}
	mem := C.malloc(C.size_t(8 * (2*len(sts) + len(params) + 2)))
	defer C.free(mem)
	cs := unsafe.Slice((*C.CUstream)(mem), len(sts))
	copy(cs, sts)
	ce := unsafe.Slice((*C.CUevent)(unsafe.Add(mem, 8*len(sts))), nrec+1)
	for i := 0; i < nrec; i++ {
		ce[i] = cEvent(l.sev[i])
	}
	pp := unsafe.Slice((*unsafe.Pointer)(unsafe.Add(mem, 8*(2*len(sts)+1))), len(params))
	copy(pp, params)
	runtime.LockOSThread()
	r := C.gs_live_scatter(cContext(m.c.ctx), C.int(nrec), C.int(len(sts)), &cs[0], &ce[0], cStream(l.up),
		cFunc(m.c.scat), C.uint(grid), &pp[0], cEvent(s.done))
	runtime.UnlockOSThread()
	if !cuOK(r) {
		return fmt.Errorf("gpu: cuda: live update: %v", cuErr(r))
	}
	s.used = true
	l.last = s.done
	l.k = (l.k + 1) % liveRing
	l.seq++
	m.state.Store(st)
	return nil
}
