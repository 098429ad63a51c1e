package pipeline

import (
	"sync/atomic"
	"time"
)

// batchBounds are the upper bounds of the batch-size histogram's buckets
// (frames per batch); a last bucket holds the larger batches.
var batchBounds = [...]int{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536}

// batchStats counts the batches Process ran: how many, how many frames,
// a histogram of their sizes, and why the port loop closed them.
type batchStats struct {
	count   atomic.Uint64
	frames  atomic.Uint64
	buckets [len(batchBounds) + 1]atomic.Uint64
	full    atomic.Uint64 // closed by RunPort at Config.BatchSize frames (a datapath worker: its runs, one a full batch)
	delay   atomic.Uint64 // closed by RunPort when the oldest frame had waited Config.MaxDelay (or the ring was idle; a worker: its other runs)
	// With a Coalescer, where RunPort ran its closed batches (rx.go,
	// queueRunner.next): itself, lookups straight to the Classifier
	// (direct), or handed to the queue's runner (shared).
	direct atomic.Uint64
	shared atomic.Uint64
	split  atomic.Uint64 // handed to a split port's process goroutine (split.go)
	worker atomic.Uint64 // run by a datapath worker with its other queues' (workers.go)
	// A receive queue's reader waiting to hand a closed batch over or for
	// an empty one (its runner holds Config.Depth unfinished batches, or a
	// split port's process goroutine is behind): the waits and their time.
	// Its ring fills meanwhile; a ring that overflows while the switch's
	// cores are not all busy shows here.
	stalls  atomic.Uint64
	stallNs atomic.Int64
	// A queue's batches in flight transmit in order (process's turn): the
	// hand-overs from one batch's transmit to the next's, and the time the
	// queue's transmit stood idle between them, split by why: the next
	// batch was ready and waiting, and its goroutine had to be woken
	// (wake), or it had not come to its transmit (lookup: its lookups and
	// actions, or, under light traffic, its batch not yet closed).
	handovers    atomic.Uint64
	handoverWake atomic.Int64
	handoverLook atomic.Int64
	// A datapath worker's runs in flight (async.go): runs whose first
	// table's results, looked up ahead, were used (ahead), and runs that
	// looked it up again (relooked: a change came while it was in flight,
	// or the lookup ahead could not be made or failed).
	ahead    atomic.Uint64
	relooked atomic.Uint64
}

// monoEpoch and monoNs: a monotonic clock in nanoseconds, for tokens that
// carry a time between goroutines.
var monoEpoch = time.Now()

func monoNs() int64 { return int64(time.Since(monoEpoch)) }

// takeTurn takes the token the batch before this one put in turn after its
// transmit (the time it did, monoNs), and counts the hand-over: the time
// from the token to now is the queue's transmit idle between the two
// batches, waiting for this batch's goroutine to wake (the token came
// while it waited) or for its lookups (the token was there already).
func (b *batchStats) takeTurn(turn <-chan int64) {
	var t int64
	waited := false
	select {
	case t = <-turn:
	default:
		t, waited = <-turn, true
	}
	d := max(monoNs()-t, 0)
	b.handovers.Add(1)
	if waited {
		b.handoverWake.Add(d)
	} else {
		b.handoverLook.Add(d)
	}
}

// stalled counts a wait of a reader's hand-off that began at since.
func (b *batchStats) stalled(since time.Time) {
	b.stalls.Add(1)
	b.stallNs.Add(int64(time.Since(since)))
}

// handOff sends v on ch, a reader's hand-off to its runner, counting the
// wait in st when ch is full.
func handOff[T any](st *batchStats, ch chan<- T, v T) {
	select {
	case ch <- v:
		return
	default:
	}
	t0 := time.Now()
	ch <- v
	st.stalled(t0)
}

// takeFree returns an empty batcher from free, counting the wait when
// there is none yet.
func (b *batchStats) takeFree(free chan *batcher) *batcher {
	select {
	case x := <-free:
		return x
	default:
	}
	t0 := time.Now()
	x := <-free
	b.stalled(t0)
	return x
}

func (b *batchStats) observe(n int) {
	b.count.Add(1)
	b.frames.Add(uint64(n))
	i := 0
	for i < len(batchBounds) && n > batchBounds[i] {
		i++
	}
	b.buckets[i].Add(1)
}

// BatchStats is a snapshot of the batches the switch processed.
type BatchStats struct {
	Batches uint64 // batches run through the pipeline
	Frames  uint64 // frames in them
	// Bounds and Counts: Counts[i] batches had at most Bounds[i] frames
	// (and more than Bounds[i-1]); the last count is for larger batches.
	Bounds []int
	Counts []uint64
	Full   uint64 // batches a port loop closed because they were full
	Delay  uint64 // batches a port loop closed at the maximum delay
	// With a Coalescer: batches a port loop ran itself on the synchronous
	// path (Direct: no table was served by a device) and batches it handed
	// to its queue's runner, the shared-batch path (Shared).
	Direct uint64
	Shared uint64
	// Split: batches of ports split by SetRxSplit whose receive stages
	// ran on the port loop and the rest on the queue's process goroutine.
	Split uint64
	// Worker: batches a datapath worker (RunWorker) ran together with
	// the batches of its other receive queues.
	Worker uint64
	// Stalls: times a receive queue's reader waited to hand a closed
	// batch over or for an empty one (Config.Depth batches unfinished, or
	// a split port's process goroutine behind); StallTime: how long in all.
	Stalls    uint64
	StallTime time.Duration
	// Handovers: a queue's transmits of batches in flight that followed
	// the transmit of the batch before (Config.InFlight above 1); the
	// queue's transmit idle between the two, HandoverWake while the next
	// batch's goroutine was woken (it was ready and waiting), HandoverLookup
	// while the next batch had not come to its transmit (its lookups and
	// actions, or, under light traffic, its batch not yet closed).
	Handovers      uint64
	HandoverWake   time.Duration
	HandoverLookup time.Duration
	// With a datapath worker's runs in flight (Config.WorkerInFlight):
	// runs that used their first table's lookup made ahead (Ahead), and
	// runs that looked that table up again when they decided (Relooked: a
	// change of the tables came while the lookup was in flight, or it
	// could not be made or failed).
	Ahead    uint64
	Relooked uint64
}

// BatchStats returns the batch counters.
func (s *Switch) BatchStats() BatchStats {
	b := &s.batches
	st := BatchStats{Batches: b.count.Load(), Frames: b.frames.Load(), Bounds: batchBounds[:],
		Full: b.full.Load(), Delay: b.delay.Load(), Direct: b.direct.Load(), Shared: b.shared.Load(), Split: b.split.Load(), Worker: b.worker.Load(), Counts: make([]uint64, len(b.buckets)),
		Stalls: b.stalls.Load(), StallTime: time.Duration(b.stallNs.Load()),
		Handovers: b.handovers.Load(), HandoverWake: time.Duration(b.handoverWake.Load()), HandoverLookup: time.Duration(b.handoverLook.Load()),
		Ahead: b.ahead.Load(), Relooked: b.relooked.Load()}
	for i := range b.buckets {
		st.Counts[i] = b.buckets[i].Load()
	}
	return st
}
