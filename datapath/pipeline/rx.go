package pipeline

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/gpu"
)

// idlePoll bounds a wait for frames while no batch is open, so that the
// loop notices a cancelled context even on a silent port.
const idlePoll = 200 * time.Millisecond

// minBlockTimeout is the shortest block timeout of a TPACKET_V3 ring
// (afpacket.Config.BlockTimeout): a block that is not full is handed over
// no sooner.
const minBlockTimeout = time.Millisecond

// batcher collects one port's frames into a batch: copies (the actions
// edit them, and the ring block must go back to the kernel), the tag the
// kernel removed put back.
type batcher struct {
	frames  [][]byte
	rxAt    []int64 // the frames' kernel receive times (Unix ns; 0: unknown), for the latency histogram
	readAt  []int64 // when the reader took each frame out of the ring (Unix ns), for the stages' histograms
	closed  int64   // when the reader closed the batch (Unix ns; 0: not by RunPort)
	arena   []byte
	scratch []byte // the receive stages' arena (stage.go)
	oldest  time.Time
	cap     int
	// sent orders a queue's batches in flight (hand, process): after its
	// transmit a batch puts a token in its batcher's sent (capacity 1),
	// which the batch handed after it takes before transmitting. A token
	// is taken before its batcher can carry another one (the next batch
	// transmits only after taking it, and the batcher comes back for a
	// later batch only after that one's turn), so the channel is made once.
	// The token is the monotonic time it was put (monoNs), from which the
	// next batch counts the queue's transmit idle between the two
	// (batchStats.takeTurn).
	sent chan int64
}

func newBatcher(capacity int) *batcher {
	return &batcher{frames: make([][]byte, 0, capacity), arena: make([]byte, 0, capacity*2048), cap: capacity,
		sent: make(chan int64, 1)}
}

// add copies f into the batch. A frame whose sender left its checksum
// or segmentation to the device (f.CsumNotReady) is finished here, before
// any action or output sees it: its checksum completed, a GSO frame cut
// into its segments (which then count as frames of their own). It
// reports false when such a frame cannot be finished (it is dropped).
//
// A frame the ring truncated (longer than its slot, and its whole copy not
// read: afpacket's "Receive rings") is refused too: forwarding part of a
// frame would be wrong.
func (b *batcher) add(f *afpacket.Frame, now time.Time) bool {
	if len(f.Data) < f.Len {
		return false
	}
	if len(b.frames) == 0 {
		b.oldest = now
	}
	if !f.Tagged && f.CsumNotReady && f.Offload.GSOType != afpacket.GSONone {
		// A GSO frame: its segments are cut straight from the ring's copy
		// (AppendFinished leaves its input unchanged), not from a copy of
		// the whole frame in the arena first.
		var err error
		n := len(b.frames)
		if b.arena, b.frames, err = afpacket.AppendFinished(b.arena, b.frames, f.Data, f.Offload); err != nil {
			if n == 0 {
				b.oldest = time.Time{}
			}
			return false
		}
		b.stamp(f, now)
		return true
	}
	start := len(b.arena)
	b.arena = f.AppendWire(b.arena) // a tag the kernel removed put back
	frame := b.arena[start:len(b.arena):len(b.arena)]
	if f.CsumNotReady && f.Offload.Pending() {
		o := f.Offload
		if f.Tagged {
			o.Shift(vlanTagSize)
		}
		var err error
		if o.GSOType == afpacket.GSONone {
			err = afpacket.FinishChecksum(frame, o)
		} else {
			// The segments follow the (unused) copy in the arena.
			b.arena, b.frames, err = afpacket.AppendFinished(b.arena, b.frames, frame, o)
			if err == nil {
				b.stamp(f, now)
				return true
			}
		}
		if err != nil {
			b.arena = b.arena[:start]
			if len(b.frames) == 0 {
				b.oldest = time.Time{}
			}
			return false
		}
	}
	b.frames = append(b.frames, frame)
	b.stamp(f, now)
	return true
}

// stamp gives the frames added for f (one, or a GSO frame's segments) f's
// receive time and the read time now.
func (b *batcher) stamp(f *afpacket.Frame, now time.Time) {
	rx, read := rxNanos(f), now.UnixNano()
	for len(b.rxAt) < len(b.frames) {
		b.rxAt = append(b.rxAt, rx)
		b.readAt = append(b.readAt, read)
	}
}

// rxNanos is f's kernel receive time in Unix nanoseconds, 0 if it has none.
func rxNanos(f *afpacket.Frame) int64 {
	if f.Time.IsZero() {
		return 0
	}
	return f.Time.UnixNano()
}

func (b *batcher) full() bool { return len(b.frames) >= b.cap }

func (b *batcher) reset() {
	clear(b.frames)
	b.frames = b.frames[:0]
	b.rxAt = b.rxAt[:0]
	b.readAt = b.readAt[:0]
	b.closed = 0
	b.arena = b.arena[:0]
	b.scratch = b.scratch[:0]
}

// BlockReader is where RunPort reads a port's frames: one receive queue.
// *afpacket.Queue has the method, and *afpacket.Port (its queue 0).
type BlockReader interface {
	ReadBlock(timeout time.Duration) (*afpacket.Block, error)
}

// frameRing is what RunPort uses of a source with a frame ring
// (*afpacket.Queue, *afpacket.Port): its layout and Pause.
type frameRing interface {
	Ring() afpacket.RingMode
	Pause(time.Duration)
}

// RunPort is a datapath loop of port no: it reads blocks (TPACKET_V3) or runs of frames (TPACKET_V2) from
// src, gathers their frames into batches and runs each batch through the
// switch (Process) when it is full (Config.BatchSize) or its oldest frame
// has waited Config.MaxDelay (on a block ring, with a MaxDelay under the
// ring's 1 ms least block timeout: as soon as no block is ready, since
// none can come before the deadline). It returns nil when ctx is done or src is
// closed, else the read error. A port with several receive queues has one
// RunPort per queue, all with the same no: Process is safe for concurrent
// batches of one port, and the fanout keeps each flow on one queue, so a
// flow's frames are still processed in order.
//
// With a Config.Coalescer the batches are run by a goroutine of the queue's
// own (queueRunner), in the order they were closed, while RunPort goes on
// reading the ring: RunPort blocks (and the ring fills) only when
// Config.Depth closed batches are unfinished, the running one included.
// While no table is coalesced (every table on the CPU, or the device out
// of service) RunPort runs its batches itself, synchronously
// (queueRunner.next). Without a Coalescer, a port split by SetRxSplit runs
// its receive stages on RunPort and the rest on a goroutine of the
// queue's own (split.go).
func (s *Switch) RunPort(ctx context.Context, no uint32, src BlockReader) error {
	var b *batcher
	run := func(b *batcher) *batcher { s.runBatch(no, b, false); return b }
	if co := s.cfg.Coalescer; co != nil {
		q := s.newQueueRunner(no, co)
		defer q.stop()
		run = q.next
		b = <-q.free
	} else if sp := s.ports[no]; sp != nil && sp.split.Load() {
		r := s.newSplitRunner(no, false)
		defer r.stop()
		run = r.hand
		b = <-r.free
	} else {
		b = newBatcher(s.cfg.BatchSize)
	}
	fr, _ := src.(frameRing)
	blocks := fr != nil && fr.Ring() == afpacket.RingBlocks
	if fr != nil && fr.Ring() != afpacket.RingFrames {
		fr = nil
	}
	var f afpacket.Frame
	for ctx.Err() == nil {
		wait := idlePoll
		if len(b.frames) > 0 {
			wait = max(s.cfg.MaxDelay-time.Since(b.oldest), 0)
			if blocks && wait < minBlockTimeout {
				// A block ring hands its next block over when it is full
				// or its timeout (at least 1 ms) has passed, so it hands
				// over nothing more before the batch's deadline: take a
				// block that is ready already, else run the batch now. A
				// wait would end by its deadline, and cost a timer and a
				// wake-up per block.
				wait = 0
			}
		}
		var blk *afpacket.Block
		var err error
		if fr != nil && len(b.frames) > 0 && wait > 0 {
			// A frame ring wakes a waiting reader for every frame: with a
			// batch open, read what is there, and if nothing is, pause
			// until the batch's deadline and read what came meanwhile
			// (one wake-up per batch, not per frame).
			if blk, err = src.ReadBlock(0); blk == nil && err == nil {
				fr.Pause(wait)
				blk, err = src.ReadBlock(0)
			}
		} else {
			blk, err = src.ReadBlock(wait)
		}
		if err != nil {
			if errors.Is(err, afpacket.ErrClosed) {
				return nil
			}
			return err
		}
		if blk != nil {
			now := time.Now()
			for blk.Next(&f) {
				if !b.add(&f, now) {
					s.offloadDrops.Add(1)
				}
				if b.full() {
					s.batches.full.Add(1)
					b.closed = time.Now().UnixNano()
					b = run(b)
				}
			}
			blk.Release()
		}
		if len(b.frames) > 0 && (blk == nil || time.Since(b.oldest) >= s.cfg.MaxDelay) {
			s.batches.delay.Add(1)
			b.closed = time.Now().UnixNano()
			b = run(b)
		}
	}
	return nil
}

// runBatch runs a closed batch of port no through the switch, records its
// frames' latencies and empties it. With direct its lookups go to the
// Classifier even when there is a Coalescer (the synchronous path).
func (s *Switch) runBatch(no uint32, b *batcher, direct bool) {
	if !direct {
		s.receive(no, b)
	} else if frames := s.rxStages(no, b); len(frames) > 0 {
		s.process(no, frames, nil, nil, true)
	}
	s.observeBatch(b, time.Now())
	b.reset()
}

// queueRunner runs one receive queue's closed batches on goroutines of
// its own, so that the queue's RunPort keeps reading its ring while a
// batch waits for its shared device lookup. With Config.InFlight 1 one
// goroutine (loop) takes the handed batches and runs them one after the
// other. With InFlight K > 1, K goroutines of the queue (flights) run
// the batches' pipelines, up to K at once: hand, on the reader, runs a
// batch's receive stages (in order: a stage may keep per-flow state),
// chains it to the batch before it and queues it (jobs), and the flight
// goroutines take the batches in that order; each batch transmits only
// after the batch before it has (process's turn and sent channels), so
// the queue's frames leave in the order they arrived while up to K of
// its lookups are in flight. The goroutines live as long as the runner,
// and a batch passes one hand-off from the reader to the goroutine that
// runs it: a goroutine started per batch grew its stack anew each time
// (the lookups' frames are deep), and a dispatching goroutine between the
// two woke one more goroutine per batch, which together cost more CPU
// than a batch's frames themselves in batches of a few frames.
//
// While no table of the switch is coalesced (gpu.Coalescer.Coalesces: the
// Engine places every flow table on the CPU, or its device is out of
// service) the shared-batch path buys nothing, and next, which RunPort
// calls for each closed batch, runs the batch on the reader itself
// (synchronous, lookups straight to the Classifier) instead of handing it
// over, once every batch handed before has transmitted (it waits for
// them: at most Depth batches): so the queue's batches still run their
// stages and transmit in the order they were closed across a switch
// between the paths, either way. Handing the batch over instead while
// some were unfinished would, under a steady load, never let the queue
// back onto the synchronous path (the reader is always ahead).
//
// Ownership: a batcher belongs to RunPort while it is open (and while
// next runs it synchronously, or hand runs its receive stages), to the
// runner from hand until it is put back on free (loop, or the flight
// goroutine that runs it); Config.Depth+1 batchers circulate. prev, gen,
// known and coalesced belong to RunPort (hand, next); unfinished is
// RunPort's to raise (hand) and the runner's to lower (finish),
// atomically. A split port's queue runner also has a split runner for its
// synchronous path (split.go); a batcher handed to either is replaced
// from that one's free list, so each keeps its number of batchers while
// batchers move between them.
type queueRunner struct {
	s    *Switch
	no   uint32
	co   *gpu.Coalescer
	work chan *batcher // InFlight 1: closed batches, in order (cap Depth), for loop
	jobs chan flight   // InFlight > 1: closed batches, in order (cap Depth), for the flight goroutines
	free chan *batcher // empty batchers (cap Depth+1)
	done chan struct{} // closed when loop returns (InFlight 1)
	prev chan int64    // the last handed batch's sent: it holds a token once that batch has transmitted (nil: none)
	wg   sync.WaitGroup

	unfinished atomic.Int64  // batches handed and not yet transmitted (finish)
	idle       chan struct{} // cap 1: finish brought unfinished to 0 (a wake-up for drain)
	gen        uint64        // the Coalescer's Generation when coalesced was found
	known      bool          // gen and coalesced are set
	coalesced  bool          // some table of the switch is coalesced
	split      *splitRunner  // a split port's synchronous path (split.go); nil: none
}

func (s *Switch) newQueueRunner(no uint32, co *gpu.Coalescer) *queueRunner {
	d := s.cfg.Depth
	q := &queueRunner{s: s, no: no, co: co, free: make(chan *batcher, d+1), idle: make(chan struct{}, 1)}
	for range d + 1 {
		q.free <- newBatcher(s.cfg.BatchSize)
	}
	if sp := s.ports[no]; sp != nil && sp.split.Load() {
		q.split = s.newSplitRunner(no, true)
	}
	if k := s.cfg.InFlight; k > 1 {
		q.jobs = make(chan flight, d)
		q.wg.Add(k)
		for range k {
			go q.flights()
		}
	} else {
		q.work, q.done = make(chan *batcher, d), make(chan struct{})
		go q.loop()
	}
	return q
}

// flight is a handed batch for the flight goroutines: what its receive
// stages left of its frames, and its turn and sent channels (process).
type flight struct {
	b          *batcher
	frames     [][]byte
	turn, sent chan int64
}

// flights runs the handed batches' pipelines until jobs is closed. While
// a batch runs it is an active caller of the Coalescer (Enter/Leave), so
// that a shared batch closes as soon as every running batch is waiting
// for it.
func (q *queueRunner) flights() {
	defer q.wg.Done()
	for j := range q.jobs {
		q.co.Enter()
		q.s.process(q.no, j.frames, j.turn, j.sent, false)
		q.co.Leave()
		q.finish(j.b)
	}
}

// next runs the closed batch b, RunPort's way: on the shared-batch path
// (hand) while a table is coalesced, else on the reader itself (the
// synchronous path), once the batches handed earlier have transmitted. It
// returns the batcher to fill next.
func (q *queueRunner) next(b *batcher) *batcher {
	if !q.anyCoalesced() {
		q.drain()
		q.s.batches.direct.Add(1)
		if q.split != nil { // a split port: stages here, the rest on the split runner
			return q.split.hand(b)
		}
		q.s.runBatch(q.no, b, true)
		return b
	}
	if q.split != nil {
		q.split.drain()
	}
	q.s.batches.shared.Add(1)
	return q.hand(b)
}

// anyCoalesced reports whether a flow table of the switch is coalesced
// (looked up in shared device batches). It asks the Coalescer again only
// once its Generation has moved (read before asking, so that a change
// during the asking is seen at the next batch).
func (q *queueRunner) anyCoalesced() bool {
	g := q.co.Generation()
	if q.known && g == q.gen {
		return q.coalesced
	}
	q.gen, q.known, q.coalesced = g, true, false
	for i := range q.s.cfg.Tables {
		if q.co.Coalesces(gpu.TableID(i)) {
			q.coalesced = true
			break
		}
	}
	return q.coalesced
}

// drain waits until every batch handed so far has transmitted.
func (q *queueRunner) drain() {
	for q.unfinished.Load() > 0 {
		<-q.idle // a stale wake-up only makes the loop look again
	}
}

// hand gives the closed batch b to the runner and returns an empty
// batcher, waiting for one if the runner holds all the others. With
// InFlight above 1 it runs b's receive stages first and chains b to the
// batch handed before it (flights).
func (q *queueRunner) hand(b *batcher) *batcher {
	st := &q.s.batches
	q.unfinished.Add(1)
	if q.jobs == nil {
		handOff(st, q.work, b)
		return st.takeFree(q.free)
	}
	frames := q.s.rxStages(q.no, b)
	if len(frames) == 0 { // the stages took them all: nothing to order
		q.finish(b)
		return st.takeFree(q.free)
	}
	turn, sent := q.prev, b.sent
	q.prev = sent
	handOff(st, q.jobs, flight{b: b, frames: frames, turn: turn, sent: sent})
	return st.takeFree(q.free)
}

// loop runs the handed batches in order until stop (InFlight 1). While a
// batch runs it is an active caller of the Coalescer (Enter/Leave), so
// that a shared batch closes as soon as every running batch is waiting
// for it.
func (q *queueRunner) loop() {
	defer close(q.done)
	for b := range q.work {
		q.co.Enter()
		q.s.receive(q.no, b)
		q.co.Leave()
		q.finish(b)
	}
}

// finish records a run (and transmitted) batch's latencies, empties it,
// counts it finished and returns it.
func (q *queueRunner) finish(b *batcher) {
	q.s.observeBatch(b, time.Now())
	b.reset()
	if q.unfinished.Add(-1) == 0 {
		select {
		case q.idle <- struct{}{}:
		default:
		}
	}
	q.free <- b
}

// stop runs the batches handed so far and ends the runner's goroutines.
func (q *queueRunner) stop() {
	if q.split != nil {
		q.split.stop()
	}
	if q.jobs != nil {
		close(q.jobs)
		q.wg.Wait()
		return
	}
	close(q.work)
	<-q.done
}

// RunExpiry removes timed-out flow entries every interval until ctx is
// done.
func (s *Switch) RunExpiry(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			s.Expire(now)
		}
	}
}
