package pipeline

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/gpu"
)

// RxQueue is one receive queue for a datapath worker: port No's queue Src
// (an *afpacket.Queue, or an *afpacket.Port for its queue 0).
type RxQueue struct {
	No  uint32
	Src BlockReader
}

// pollable is a source whose readiness a worker waits for together with
// its other queues' (afpacket.Queue.PollFD): the descriptor to poll(2),
// -1 when it has none.
type pollable interface{ PollFD() int }

// workerSlack is the timer slack of a worker's thread: the kernel may
// end its sleep to a batch's deadline this much late (Linux's default is
// 50 µs, as much as the whole default --max-delay).
const workerSlack = time.Microsecond

// RunWorker is a datapath worker: one goroutine that serves several
// receive queues, in place of a RunPort per queue. It reads every queue's
// ring without waiting (ReadBlock(0)), gathers each queue's frames into
// its own batch, and when a batch is full (Config.BatchSize) or the
// oldest frame of the worker's batches has waited Config.MaxDelay it runs
// them all through the switch together (processParts): each table stage
// makes one lookup for the packets of every queue of the worker, straight
// to the Classifier, which sends it to a device from the table's floor,
// and each output port gets one Send. The lookup is synchronous: while a
// device answers, the worker's rings fill, and the next batches hold what
// came meanwhile. With Config.WorkerInFlight above 0 the first table's
// lookup is submitted instead and the worker reads on, finishing its runs
// in order as their results come in (async.go).
//
// Nothing is handed between goroutines: a frame is read, looked up, acted
// on and sent by the worker that owns its queue, so a queue's frames (and,
// as the fanout keeps a flow on one queue, a flow's) leave in the order
// they arrived, and a frame's latency has no wake-up in it but the
// worker's own. With a batch open it reads on as long as the rings have
// frames; when they have none it waits, in the kernel (a blocking system
// call, its thread's timer slack first set to workerSlack), not in the
// runtime's timers: on frame rings it sleeps until the batch's deadline
// and then reads what came (one wake-up per batch, not per frame); on
// block rings, which hand over nothing before their block timeout (at
// least 1 ms) unless a block fills, it runs the batches at once when the
// deadline is less than that away, and polls for a block otherwise. With
// no batch open it polls every queue's socket at once (poll(2) on PollFD,
// at most idlePoll, so a cancelled context is seen); a source without
// PollFD is read again after a sleep of Config.MaxDelay. With
// Config.WorkerEager a batch closes as soon as the rings are empty and a
// run may start, not at its deadline (Config.MaxDelay still bounds it
// while every run is in flight).
//
// A queue's receive stages run on the worker, before the switch (a port
// split by SetRxSplit is not split here). RunWorker returns nil when ctx
// is done or every queue is closed, else a read error. A queue belongs to
// one worker: the caller deals the queues out (the agent's --rx-workers).
func (s *Switch) RunWorker(ctx context.Context, queues []RxQueue) error {
	w := &rxWorker{s: s, blocks: true, poll: true}
	for _, q := range queues {
		wq := rxWorkerQueue{no: q.No, src: q.Src, b: newBatcher(s.cfg.BatchSize)}
		wq.poll, _ = q.Src.(pollable)
		w.poll = w.poll && wq.poll != nil
		w.blocks = w.blocks && ringOf(q.Src) == afpacket.RingBlocks
		w.qs = append(w.qs, wq)
	}
	w.live = len(w.qs)
	if bc, ok := s.cfg.Classifier.(gpu.BatchBackend); ok && s.cfg.WorkerInFlight > 0 {
		w.async = &asyncRuns{bc: bc, max: s.cfg.WorkerInFlight}
		defer w.drainRuns()
	}
	for ctx.Err() == nil && w.live > 0 {
		got, err := w.readAll()
		if err != nil {
			return err
		}
		inFlight := w.async != nil && len(w.async.flight) > 0
		if inFlight {
			w.reap()
			inFlight = len(w.async.flight) > 0
		}
		if w.oldest.IsZero() { // no batch open
			if inFlight {
				if got == 0 { // nothing to read: the oldest run's lookup is what comes next
					w.finishOldest()
				}
				continue
			}
			w.idle()
			continue
		}
		wait := s.cfg.MaxDelay - time.Since(w.oldest)
		switch {
		case wait <= 0:
			w.run(&s.batches.delay)
		case got > 0:
			// Read on while the rings have frames: under load the batches
			// fill, and a frame that waited in a ring does not wait again.
		case s.cfg.WorkerEager && (w.async == nil || len(w.async.flight) < w.async.max):
			// Config.WorkerEager: the rings are empty and a run may start
			// (go in flight, or run at once): close the batch now, not at
			// its deadline (group commit: the frames that come while its
			// lookup is on the device form the next run, and with every
			// run in flight the open batch grows until one finishes).
			w.run(&s.batches.delay)
		case inFlight:
			// The rings are empty: wait for the oldest run's lookup
			// (tens of µs) rather than sleep to the open batch's deadline.
			w.finishOldest()
		case w.blocks && wait < minBlockTimeout:
			// No block comes before the deadline unless one fills:
			// take what is here now (RunPort's rule).
			w.run(&s.batches.delay)
		case w.blocks:
			if !w.pollFor(wait) {
				sleep(wait)
			}
		default:
			sleep(wait)
		}
	}
	if !w.oldest.IsZero() {
		w.run(&s.batches.delay)
	}
	return nil
}

// ringOf is src's ring layout: frames unless it says otherwise.
func ringOf(src BlockReader) afpacket.RingMode {
	if fr, ok := src.(frameRing); ok {
		return fr.Ring()
	}
	return afpacket.RingFrames
}

// rxWorker is RunWorker's state, the worker goroutine's alone.
type rxWorker struct {
	s      *Switch
	qs     []rxWorkerQueue
	live   int       // queues not closed
	oldest time.Time // when the oldest frame of the open batches was read; zero: no batch holds a frame
	blocks bool      // every queue has a block ring
	poll   bool      // every queue has a PollFD
	parts  []rxPart
	fds    []unix.PollFd
	runs   uint64     // runs with frames, for the one in runPartEvery timed by part
	async  *asyncRuns // runs in flight (Config.WorkerInFlight; async.go); nil: synchronous runs
}

type rxWorkerQueue struct {
	no     uint32
	src    BlockReader
	poll   pollable
	b      *batcher
	closed bool
}

// readAll reads what every live queue has ready, without waiting, into
// the queues' batches, and runs the worker's batches whenever one is
// full. It returns the number of frames read.
func (w *rxWorker) readAll() (int, error) {
	var f afpacket.Frame
	got := 0
	for i := range w.qs {
		q := &w.qs[i]
		if q.closed {
			continue
		}
		blk, err := q.src.ReadBlock(0)
		if err != nil {
			if errors.Is(err, afpacket.ErrClosed) {
				q.closed = true
				w.live--
				continue
			}
			return got, err
		}
		if blk == nil {
			continue
		}
		now := time.Now()
		for blk.Next(&f) {
			got++
			if !q.b.add(&f, now) {
				w.s.offloadDrops.Add(1)
			} else if w.oldest.IsZero() {
				w.oldest = now
			}
			if q.b.full() {
				w.run(&w.s.batches.full)
			}
		}
		blk.Release()
	}
	return got, nil
}

// run runs every open batch of the worker through the switch as one
// (processParts), records their frames' latencies and empties them;
// reason counts the run (the batch closes' full or delay).
func (w *rxWorker) run(reason *atomic.Uint64) {
	s := w.s
	reason.Add(1)
	if w.async != nil {
		w.submit()
		return
	}
	closed := time.Now().UnixNano()
	w.parts = w.parts[:0]
	for i := range w.qs {
		q := &w.qs[i]
		if len(q.b.frames) == 0 {
			continue
		}
		if frames := w.closeQueue(q, closed); len(frames) > 0 {
			w.parts = append(w.parts, rxPart{no: q.no, frames: frames})
		}
	}
	if len(w.parts) > 0 {
		w.runs++
		s.processParts(w.parts, w.runs%runPartEvery == 0)
	}
	clear(w.parts)
	done := time.Now()
	for i := range w.qs {
		if q := &w.qs[i]; len(q.b.frames) > 0 {
			s.observeBatch(q.b, done)
			q.b.reset()
		}
	}
	w.oldest = time.Time{}
}

// closeQueue closes queue q's open batch at closed (its frames have a
// batch, see run), counts it a worker's, and returns what its receive
// stages leave of its frames.
func (w *rxWorker) closeQueue(q *rxWorkerQueue, closed int64) [][]byte {
	q.b.closed = closed
	w.s.batches.worker.Add(1)
	return w.s.rxStages(q.no, q.b)
}

// idle waits, with no batch open, until a queue has something to read
// (at most idlePoll).
func (w *rxWorker) idle() {
	if !w.pollFor(idlePoll) {
		sleep(w.s.cfg.MaxDelay)
	}
}

// pollFor waits until a live queue's socket is readable, for at most d.
// It reports false when it could not poll (a queue without PollFD).
func (w *rxWorker) pollFor(d time.Duration) bool {
	if !w.poll {
		return false
	}
	w.fds = w.fds[:0]
	for i := range w.qs {
		if q := &w.qs[i]; !q.closed {
			if fd := q.poll.PollFD(); fd >= 0 {
				w.fds = append(w.fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			}
		}
	}
	if len(w.fds) == 0 { // closed meanwhile: the next read says so
		return true
	}
	ts := unix.NsecToTimespec(int64(d))
	setSlack()
	_, _ = unix.Ppoll(w.fds, &ts, nil) // EINTR and the like: the loop reads and looks again
	return true
}

// sleep sleeps d in the kernel (a blocking system call), not in the Go
// runtime's timers, whose idle wait ends on the millisecond (see
// internal/kick).
func sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := unix.NsecToTimespec(int64(d))
	setSlack()
	_ = unix.Nanosleep(&ts, nil) // interrupted: the loop looks again
}

// setSlack sets the timer slack of the thread the caller runs on to
// workerSlack (a thread's, kept until changed; best effort: a failure
// only makes the next sleep end later). The worker's goroutine is not
// locked to a thread, so it sets it before each sleep, on the thread that
// sleeps: a goroutine locked to its thread hands its processor over at
// every runtime.Gosched of the device's completion wait, two thread
// wake-ups a poll (with the worker locked, its run stage took 109–119 µs
// at the p50 against 76–89 µs unlocked: H200 machine, 2026-11-26, 128K
// rules in 512 classes at 500 kframes/s, 4 workers).
func setSlack() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(workerSlack), 0, 0, 0) }
