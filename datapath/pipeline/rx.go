package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
)

// idlePoll bounds a wait for frames while no batch is open, so that the
// loop notices a cancelled context even on a silent port.
const idlePoll = 200 * time.Millisecond

// batcher collects one port's frames into a batch: copies (the actions
// edit them, and the ring block must go back to the kernel), the tag the
// kernel removed put back.
type batcher struct {
	frames  [][]byte
	rxAt    []int64 // the frames' kernel receive times (Unix ns; 0: unknown), for the latency histogram
	arena   []byte
	scratch []byte // the receive stages' arena (stage.go)
	oldest  time.Time
	cap     int
}

func newBatcher(capacity int) *batcher {
	return &batcher{frames: make([][]byte, 0, capacity), arena: make([]byte, 0, capacity*2048), cap: capacity}
}

// add copies f into the batch. A frame whose sender left its checksum
// or segmentation to the device (f.CsumNotReady) is finished here, before
// any action or output sees it: its checksum completed, a GSO frame cut
// into its segments (which then count as frames of their own). It
// reports false when such a frame cannot be finished (it is dropped).
func (b *batcher) add(f *afpacket.Frame, now time.Time) bool {
	if len(b.frames) == 0 {
		b.oldest = now
	}
	start := len(b.arena)
	if f.Tagged {
		b.arena = insertTag(b.arena, f.Data, f.TPID, f.TCI)
	} else {
		b.arena = append(b.arena, f.Data...)
	}
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
				for len(b.rxAt) < len(b.frames) {
					b.rxAt = append(b.rxAt, rxNanos(f))
				}
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
	b.rxAt = append(b.rxAt, rxNanos(f))
	return true
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
	b.arena = b.arena[:0]
	b.scratch = b.scratch[:0]
}

// BlockReader is where RunPort reads a port's frames: one receive queue.
// *afpacket.Queue has the method, and *afpacket.Port (its queue 0).
type BlockReader interface {
	ReadBlock(timeout time.Duration) (*afpacket.Block, error)
}

// RunPort is a datapath loop of port no: it reads TPACKET_V3 blocks from
// src, gathers their frames into batches and runs each batch through the
// switch (Process) when it is full (Config.BatchSize) or its oldest frame
// has waited Config.MaxDelay. It returns nil when ctx is done or src is
// closed, else the read error. A port with several receive queues has one
// RunPort per queue, all with the same no: Process is safe for concurrent
// batches of one port, and the fanout keeps each flow on one queue, so a
// flow's frames are still processed in order.
func (s *Switch) RunPort(ctx context.Context, no uint32, src BlockReader) error {
	b := newBatcher(s.cfg.BatchSize)
	var f afpacket.Frame
	for ctx.Err() == nil {
		wait := idlePoll
		if len(b.frames) > 0 {
			wait = max(s.cfg.MaxDelay-time.Since(b.oldest), 0)
		}
		blk, err := src.ReadBlock(wait)
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
					s.receive(no, b)
					s.latency.observe(b.rxAt, time.Now())
					b.reset()
				}
			}
			blk.Release()
		}
		if len(b.frames) > 0 && (blk == nil || time.Since(b.oldest) >= s.cfg.MaxDelay) {
			s.batches.delay.Add(1)
			s.receive(no, b)
			s.latency.observe(b.rxAt, time.Now())
			b.reset()
		}
	}
	return nil
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
