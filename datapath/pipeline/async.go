package pipeline

import (
	"time"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
)

// A datapath worker's runs in flight (Config.WorkerInFlight above 0).
//
// A synchronous worker (RunWorker) runs its batches to the end before it
// reads again: it waits for the device's answer to its first table's
// lookup, 30–55 µs a run on an H200, and reads nothing meanwhile. With
// runs in flight the worker instead, when its batches close:
//
//  1. parses the frames into the run's own packets (admit) and, under the
//     switch's read lock, packs their first table's keys into a batch in
//     the backend's memory (a gpu.Batch: pinned host memory on CUDA) and
//     submits it (Classifier's Submit), or with a Config.Gatherer into
//     its share of a shared batch, noting the write generation
//     (Switch.wgen); then it goes back to its rings;
//  2. between reads it finishes, oldest first, every run whose lookup is
//     in (gpu.Batch.Ready: a load of the word the device writes after
//     the results): under the read lock again, the tables run with the
//     first table's results as looked up, the other tables looked up as a
//     synchronous run looks them up, and the run transmits;
//  3. when its rings are empty, or Config.WorkerInFlight runs are in
//     flight, it waits for the oldest run's lookup (gpu.Batch.Wait).
//
// Nothing is handed to another goroutine: a run is read, looked up, acted
// on and sent by the worker that owns its queues, and its runs finish in
// the order they were closed, so a queue's frames leave in the order they
// arrived.
//
// The read lock is not held while a lookup is in flight: a worker that
// held it across, and took it again for its next run, would deadlock
// with a writer waiting between the two (Go's RWMutex lets no reader in
// past a waiting writer). A change made in between moves wgen; the run
// then looks its first table up again under the lock (counted:
// BatchStats' Relooked), so its frames meet the tables as they are when
// it decides, as a synchronous run's do. A lookup that fails is answered
// the same way.

// workerRun is one run of a datapath worker from its close to its
// transmit: its packets and send queues (a worker of its own, kept from
// run to run), the queues' batchers that hold its frames, and the batch
// of its first table's lookup.
type workerRun struct {
	w      *worker
	held   []*batcher
	gb     *gpu.Batch // the first table's keys and results (nil: none made yet)
	share  gpu.Share  // with a Config.Gatherer: the run's place in a shared batch, in place of gb
	looked bool       // gb (or share) is submitted with the run's packets' keys, under write generation gen
	gen    uint64
}

// asyncRuns is the state of a worker with runs in flight (rxWorker.async;
// nil: synchronous runs).
type asyncRuns struct {
	bc     gpu.BatchBackend // the Classifier
	max    int              // runs in flight at most (Config.WorkerInFlight)
	flight []*workerRun     // submitted, oldest first
	spare  []*workerRun
	empty  []*batcher // batchers to give a queue whose batch a run took
}

// submit closes the worker's open batches into a run and starts its first
// table's lookup (see above); when max runs are in flight already the
// oldest is finished first.
func (w *rxWorker) submit() {
	a, s := w.async, w.s
	if len(a.flight) >= a.max {
		w.finishOldest()
	}
	var r *workerRun
	if k := len(a.spare); k > 0 {
		r, a.spare = a.spare[k-1], a.spare[:k-1]
	} else {
		r = &workerRun{w: newWorker(s)}
	}
	pw := r.w
	pw.begin()
	pw.direct = true
	closed := time.Now().UnixNano()
	for i := range w.qs {
		q := &w.qs[i]
		if len(q.b.frames) == 0 {
			continue
		}
		frames := w.closeQueue(q, closed)
		r.held = append(r.held, q.b) // its frames stay there until the run has sent them
		if k := len(a.empty); k > 0 {
			q.b, a.empty = a.empty[k-1], a.empty[:k-1]
		} else {
			q.b = newBatcher(s.cfg.BatchSize)
		}
		if len(frames) > 0 {
			pw.admit(q.no, frames)
		}
	}
	w.oldest = time.Time{}
	w.lookAhead(r)
	a.flight = append(a.flight, r)
}

// lookAhead submits the lookup of r's packets in the first table, under
// the read lock, when a synchronous run would look them up there through
// the Classifier: not in standalone mode, not an LPM-shaped table.
func (w *rxWorker) lookAhead(r *workerRun) {
	s, pw, a := w.s, r.w, w.async
	r.looked = false
	n := len(pw.pkts)
	if n == 0 || len(s.tables) == 0 {
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	tab := s.tables[0]
	if s.standalone() || tab.lpm != nil && tab.lpm.Serves() {
		return
	}
	width := len(tab.proj)
	// The keys go into the run's share of a shared batch, or into its own.
	var sh gpu.Share
	var dst []uint32
	var stride int
	ga := s.cfg.Gatherer
	if ga != nil {
		var err error
		if sh, err = ga.Reserve(gpu.TableID(tab.id), width, n); err != nil {
			s.batches.relooked.Add(1)
			return
		}
		dst, stride = sh.Keys(), sh.Stride()
	} else {
		if r.gb == nil || r.gb.Width != width || r.gb.Cap < n {
			r.gb.Free()
			gb, err := a.bc.NewBatch(gpu.Flow, width, max(n, len(w.qs)*s.cfg.BatchSize))
			if err != nil {
				r.gb = nil
				s.batches.relooked.Add(1)
				return
			}
			r.gb = gb
		}
		dst, stride = r.gb.Keys, r.gb.Cap
	}
	pw.allAtFirst()
	pw.packSoAInto(tab.proj, dst, stride)
	if ga != nil {
		ga.Packed(sh)
		r.share = sh
	} else {
		r.gb.N = n
		if err := a.bc.Submit(gpu.TableID(tab.id), r.gb); err != nil {
			s.batches.relooked.Add(1)
			return
		}
	}
	r.looked, r.gen = true, s.wgen.Load()
}

// allAtFirst sets idx to every packet: all are at the first table, none
// has run an action, so none is dropped or dirty (pipeline's idx there).
func (w *worker) allAtFirst() {
	w.idx = w.idx[:0]
	for i := range w.pkts {
		w.idx = append(w.idx, i)
	}
}

// done reports, without waiting, whether r's lookup ahead is in (or it
// has none).
func (r *workerRun) done(ga *gpu.Gatherer) bool {
	switch {
	case !r.looked:
		return true
	case r.share.Valid():
		return ga.Ready(r.share)
	}
	return r.gb.Ready()
}

// reap finishes, oldest first, the runs in flight whose lookups are in.
func (w *rxWorker) reap() {
	a := w.async
	for len(a.flight) > 0 {
		if !a.flight[0].done(w.s.cfg.Gatherer) {
			return
		}
		w.finishOldest()
	}
}

// drainRuns finishes every run in flight and frees the runs' batches.
func (w *rxWorker) drainRuns() {
	a := w.async
	for len(a.flight) > 0 {
		w.finishOldest()
	}
	for _, r := range a.spare {
		r.gb.Free()
		r.gb = nil
	}
}

// finishOldest waits for the oldest run's lookup and runs it to its
// transmit: the tables (the first with the results looked up ahead
// unless a change came since, see classify), the actions, the sends;
// then its frames' latencies are recorded and its batchers go back.
func (w *rxWorker) finishOldest() {
	a, s := w.async, w.s
	r := a.flight[0]
	copy(a.flight, a.flight[1:])
	a.flight[len(a.flight)-1] = nil
	a.flight = a.flight[:len(a.flight)-1]
	pw := r.w
	ga := s.cfg.Gatherer
	if r.looked {
		r.looked = false
		var err error
		var res []flow.RuleID
		if r.share.Valid() {
			err, res = ga.Wait(r.share), r.share.Results()
		} else {
			err, res = r.gb.Wait(), r.gb.Rules()[:r.gb.N]
		}
		if err == nil {
			pw.pre, pw.preGen = res, r.gen
		} else {
			s.batches.relooked.Add(1)
			s.log.Error("pipeline: a worker's lookup ahead failed; looked up again", "err", err)
		}
	}
	pw.decide()
	pw.pre = nil
	if r.share.Valid() { // its results are copied (or not wanted): the share goes back
		ga.Release(r.share)
		r.share = gpu.Share{}
	}
	pw.flush()
	done := time.Now()
	for _, b := range r.held {
		s.observeBatch(b, done)
		b.reset()
		a.empty = append(a.empty, b)
	}
	clear(r.held)
	r.held = r.held[:0]
	a.spare = append(a.spare, r)
}

// lookedAhead copies the first table's results looked up ahead (pre) into
// w.res when they are still the table's answer: the same packets, and no
// change since they were submitted (mu is held for reading). It reports
// whether it did; either way pre is used up.
func (w *worker) lookedAhead(tab *table) bool {
	pre := w.pre
	w.pre = nil
	if tab.id != 0 || len(pre) != len(w.idx) || w.s.wgen.Load() != w.preGen {
		w.s.batches.relooked.Add(1)
		return false
	}
	copy(w.res, pre)
	w.s.batches.ahead.Add(1)
	return true
}

// packSoAInto packs the keys of the packets of w.idx as packSoA does,
// into columns stride words apart (a gpu.Batch's layout: stride is its
// Cap); dst holds len(words)*stride words at least.
func (w *worker) packSoAInto(words []int, dst []uint32, stride int) {
	for j, wd := range words {
		if wd < 0 || wd >= flow.KeyWords {
			clear(dst[j*stride : j*stride+len(w.idx)])
		}
	}
	for k, i := range w.idx {
		key := &w.pkts[i].key
		for j, wd := range words {
			if wd >= 0 && wd < flow.KeyWords {
				dst[j*stride+k] = key[wd]
			}
		}
	}
}
