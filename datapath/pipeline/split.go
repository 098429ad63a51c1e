package pipeline

import (
	"fmt"
	"sync/atomic"
	"time"
)

// splitDepth is how many closed batches of a split port's receive queue
// may wait for (or be in) its process goroutine before the reader waits.
const splitDepth = 3

// SetRxSplit splits port no's receive path over two goroutines per
// receive queue (from the next RunPort of the port on): the queue's reader
// (RunPort) reads the ring, gathers the batch and runs the port's receive
// stages on it; a goroutine of the queue's own then runs what they left
// through the switch (Process: lookups, actions, transmit), while the
// reader goes on with the next batch. It is for ports whose stages are
// heavy (redundancy elimination's decoder: a CRC and a copy of every
// payload), so that the stages and the switch's work run on two cores.
// The batches are processed in the order they were closed, one at a time,
// so a flow's frames stay in order; at most splitDepth closed batches are
// unfinished before the reader waits for one (back-pressure: the ring
// fills and the kernel counts what it drops, RxOverErr). RunPort's end
// processes the batches handed before it returns.
//
// With a Coalescer (a device), the split applies to the batches a receive
// queue runs on the synchronous path (while no table is coalesced: the
// queue runner hands them to its split runner, lookups straight to the
// Classifier); while a table is coalesced the queue runner's flight
// goroutines already run the stages on the reader and the rest on
// themselves (InFlight of 2 or more). Either way a batch transmits only
// after those handed before it on the other path (each path is drained
// before the other takes a batch).
func (s *Switch) SetRxSplit(no uint32, on bool) error {
	sp := s.ports[no]
	if sp == nil {
		return fmt.Errorf("pipeline: no port %d", no)
	}
	sp.split.Store(on)
	return nil
}

// splitRunner is a split port's receive queue's process goroutine (loop)
// and its hand-off from the reader (hand).
//
// Ownership: a batcher belongs to RunPort while it is open and while hand
// runs its stages, to loop from the hand-off until loop puts it back on
// free; splitDepth+1 batchers circulate.
type splitRunner struct {
	s      *Switch
	no     uint32
	direct bool          // lookups straight to the Classifier (the queue runner's synchronous path)
	work   chan splitJob // closed batches in order (cap splitDepth)
	free   chan *batcher // empty batchers (cap splitDepth+1)
	done   chan struct{} // closed when loop returns

	unfinished atomic.Int64  // batches handed and not yet processed (hand raises, loop lowers)
	idle       chan struct{} // cap 1: loop brought unfinished to 0 (a wake-up for drain)
}

// splitJob is a handed batch and what its stages left of its frames.
type splitJob struct {
	b      *batcher
	frames [][]byte
}

// newSplitRunner starts port no's split runner; with direct its lookups
// bypass the Coalescer.
func (s *Switch) newSplitRunner(no uint32, direct bool) *splitRunner {
	r := &splitRunner{s: s, no: no, direct: direct, work: make(chan splitJob, splitDepth),
		free: make(chan *batcher, splitDepth+1), done: make(chan struct{}), idle: make(chan struct{}, 1)}
	for range splitDepth + 1 {
		r.free <- newBatcher(s.cfg.BatchSize)
	}
	go r.loop()
	return r
}

// hand runs the closed batch b's receive stages on the reader, hands what
// they left to loop and returns an empty batcher (waiting for one while
// loop holds all the others).
func (r *splitRunner) hand(b *batcher) *batcher {
	r.s.batches.split.Add(1)
	frames := r.s.rxStages(r.no, b)
	if len(frames) == 0 { // the stages took them all
		r.s.observeBatch(b, time.Now())
		b.reset()
		return b
	}
	r.unfinished.Add(1)
	handOff(&r.s.batches, r.work, splitJob{b: b, frames: frames})
	return r.s.batches.takeFree(r.free)
}

// drain waits until every batch handed so far has been processed.
func (r *splitRunner) drain() {
	for r.unfinished.Load() > 0 {
		<-r.idle // a stale wake-up only makes the loop look again
	}
}

// loop processes the handed batches in order until stop.
func (r *splitRunner) loop() {
	defer close(r.done)
	for j := range r.work {
		r.s.process(r.no, j.frames, nil, nil, r.direct)
		r.s.observeBatch(j.b, time.Now())
		j.b.reset()
		if r.unfinished.Add(-1) == 0 {
			select {
			case r.idle <- struct{}{}:
			default:
			}
		}
		r.free <- j.b
	}
}

// stop processes the batches handed so far and ends loop.
func (r *splitRunner) stop() {
	close(r.work)
	<-r.done
}
