package re

import (
	"context"
	"sync"
)

// DefaultEncoderDepth is RunEncoder's queue depth when given 0: batches
// handed to the encoder's goroutine and not yet taken.
const DefaultEncoderDepth = 4

// maxKeptArena bounds the copy arena a recycled hand-off keeps.
const maxKeptArena = 1 << 20

// encPipe is the queue between Link.Send's callers and the encoder's
// goroutine (RunEncoder). See the package documentation, "Concurrency".
type encPipe struct {
	// mu is held for reading by a Send while it queues a batch (so that
	// close cannot close q under it) and for writing by close.
	mu     sync.RWMutex
	closed bool          // q is closed: Send encodes on its own goroutine
	q      chan *handoff // batches in order, cap depth
	free   chan *handoff // recycled hand-offs
	sc     sendBuf       // the encoder goroutine's buffers
	done   chan struct{} // closed when the goroutine has sent the last batch
	stop   sync.Once
}

// handoff is one batch handed to the encoder's goroutine: copies of the
// caller's frames (the caller reuses its buffers once Send returns).
type handoff struct {
	arena  []byte
	frames [][]byte
	sc     Scratch // prepared by the caller (Encoder.prepare)
}

// RunEncoder runs the encoder on a goroutine of its own (the caller's)
// until ctx is done: from its start on, Send copies the frames, queues
// them (at most depth batches; 0: DefaultEncoderDepth) and returns, and
// this goroutine encodes and sends them, batch by batch in the order they
// were queued. So the port goroutines that call Send go back to their
// rings while the encoding and the WAN port's transmit run on another
// core. A Send that finds the queue full waits for room (back-pressure:
// its port goroutine stops reading its ring, whose kernel counters count
// what the ring then drops; EncoderCounters.QueueWaits counts the waits);
// nothing is dropped at the queue. When ctx is done, the batches queued
// are encoded and sent before RunEncoder returns, and Send encodes on its
// caller's goroutine again (as it does before RunEncoder starts), after
// waiting for those batches to be sent, so that no flow overtakes itself.
// Frames the port refuses on this goroutine are counted in
// EncoderCounters.TxDropped (Send already reported them sent). Memory:
// at most depth queued hand-offs, the one being encoded, and one per
// Send caller waiting for room, each a copy of one batch. Call it once
// per Link.
func (l *Link) RunEncoder(ctx context.Context, depth int) {
	if depth <= 0 {
		depth = DefaultEncoderDepth
	}
	p := &encPipe{q: make(chan *handoff, depth), free: make(chan *handoff, depth+2), done: make(chan struct{})}
	if !l.pipe.CompareAndSwap(nil, p) {
		return // a second call
	}
	go func() { <-ctx.Done(); p.close() }() // run returns only after close
	p.run(l)
}

// close stops the queue: Send calls from now on encode on their own
// goroutines; run drains what was queued before.
func (p *encPipe) close() {
	p.stop.Do(func() {
		p.mu.Lock()
		p.closed = true
		close(p.q)
		p.mu.Unlock()
	})
}

// run encodes and sends the queued batches until the queue is closed and
// empty.
func (p *encPipe) run(l *Link) {
	defer close(p.done)
	for h := range p.q {
		l.Enc.Stats.Pipelined.Add(1)
		b := &p.sc
		b.frames, b.arena = l.Enc.encodePrepared(&h.sc, h.frames, b.frames[:0], b.arena[:0])
		n, _ := l.sendBatch(b)
		if n < len(h.frames) {
			l.Enc.Stats.TxDropped.Add(uint64(len(h.frames) - n))
		}
		p.put(h)
	}
}

// queue copies frames into a hand-off and queues it; false when the
// queue is closed (the caller encodes them itself), once the batches
// queued before are sent, so that a flow's frames keep their order.
func (p *encPipe) queue(l *Link, frames [][]byte) bool {
	h := p.get()
	for _, f := range frames {
		start := len(h.arena)
		h.arena = append(h.arena, f...)
		h.frames = append(h.frames, h.arena[start:len(h.arena):len(h.arena)])
	}
	// The work outside the encoder's lock (parsing, naming: a CRC-32C of
	// each payload; a device's markers) stays on the caller's goroutine,
	// which balances the two.
	l.Enc.prepare(&h.sc, h.frames)
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		p.put(h)
		<-p.done
		return false
	}
	select {
	case p.q <- h:
	default:
		l.Enc.Stats.QueueWaits.Add(1)
		p.q <- h // run keeps taking until close, which waits for this RLock
	}
	p.mu.RUnlock()
	return true
}

// get returns an empty hand-off, a recycled one when there is one.
func (p *encPipe) get() *handoff {
	select {
	case h := <-p.free:
		return h
	default:
		return &handoff{arena: make([]byte, 0, 64<<10)}
	}
}

// put recycles h (emptied), unless enough wait already or its arena grew
// past maxKeptArena.
func (p *encPipe) put(h *handoff) {
	if cap(h.arena) > maxKeptArena {
		return
	}
	clear(h.frames)
	h.frames, h.arena = h.frames[:0], h.arena[:0]
	select {
	case p.free <- h:
	default:
	}
}
