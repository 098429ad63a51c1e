package re

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Sender is the transmit side of a port (*afpacket.Port has it).
type Sender interface {
	Send(frames [][]byte) (int, error)
}

// Link is redundancy elimination on one port, the "WAN" port facing the
// other gswitchd: an encoder on what the switch sends there, a decoder on
// what it receives there, and the loop that returns the decoder's
// acknowledgements. Send encodes and passes the frames to the port's own
// sender; Rx is the switch's receive stage of the port.
type Link struct {
	Enc *Encoder
	Dec *Decoder

	out     Sender                  // the port's sender: encoded frames and control frames
	mac     [6]byte                 // the port's MAC: the source of control frames
	impair  *Impair                 // nil: none
	bundle  int                     // Config.Bundle: the largest bundle (0: none)
	bufs    sync.Pool               // *sendBuf, for Send on its caller's goroutine
	pipe    atomic.Pointer[encPipe] // the encoder's goroutine (RunEncoder); nil: none
	peer    sync.Mutex
	peerMAC [6]byte // the last source seen on the port (broadcast until then)
}

// NewLink returns RE on a port whose sender is out and MAC is mac; impair,
// when not nil, impairs what the link sends (a test stage).
func NewLink(cfg Config, out Sender, mac [6]byte, impair *Impair) (*Link, error) {
	enc, err := NewEncoder(cfg)
	if err != nil {
		return nil, err
	}
	dec, err := NewDecoder(cfg)
	if err != nil {
		return nil, err
	}
	l := &Link{Enc: enc, Dec: dec, out: out, mac: mac, impair: impair, bundle: cfg.Bundle,
		peerMAC: [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	l.bufs.New = func() any { return new(sendBuf) }
	return l, nil
}

type sendBuf struct {
	arena  []byte
	frames [][]byte
	sc     Scratch
	bun    bundler
}

// Send encodes frames and sends them on the port. It is safe for
// concurrent use. While RunEncoder runs, it copies the frames, queues them
// for the encoder's goroutine and reports them all sent (that goroutine
// counts what the port refuses: EncoderCounters.TxDropped); else it
// encodes on the caller's goroutine into buffers of the call's own (the
// encoder's matching and logging take one batch at a time) and sends.
func (l *Link) Send(frames [][]byte) (int, error) {
	if len(frames) == 0 {
		return 0, nil
	}
	if p := l.pipe.Load(); p != nil && p.queue(l, frames) {
		return len(frames), nil
	}
	b := l.bufs.Get().(*sendBuf)
	defer l.bufs.Put(b)
	b.frames, b.arena = l.Enc.EncodeBatch(&b.sc, frames, b.frames[:0], b.arena[:0])
	return l.sendBatch(b)
}

// sendBatch sends the encoded batch in b.frames, in bundles when the link
// makes them, and returns how many of the batch's frames the port took.
func (l *Link) sendBatch(b *sendBuf) (int, error) {
	defer clear(b.frames) // the buffers keep no frame alive
	if l.bundle == 0 {
		return l.send(b.frames)
	}
	bundles, bundled := b.bun.pack(b.frames, l.bundle)
	if bundles > 0 {
		l.Enc.Stats.Bundles.Add(uint64(bundles))
		l.Enc.Stats.Bundled.Add(uint64(bundled))
	}
	n, err := l.send(b.bun.wire)
	if n == len(b.bun.wire) {
		n = len(b.frames)
	} else {
		n = b.bun.carried(n)
	}
	b.bun.clear()
	return n, err
}

// send sends frames through the impairment stage, if any: frames it loses
// count as sent (they are lost on the wire, not refused by the port).
func (l *Link) send(frames [][]byte) (int, error) {
	if l.impair == nil {
		return l.out.Send(frames)
	}
	kept := l.impair.apply(frames)
	if len(kept) == 0 {
		return len(frames), nil
	}
	if n, err := l.out.Send(kept); n < len(kept) {
		return n, err
	}
	return len(frames), nil
}

// Rx is the port's receive stage: plain frames pass, encoded frames are
// replaced by their restored copies (written into scratch), a bundle by
// the frames in it (so more frames may come out than went in: the result
// then has a backing array of its own), control frames go to the encoder,
// and frames that cannot be restored are dropped.
func (l *Link) Rx(port uint32, frames [][]byte, scratch []byte) ([][]byte, []byte) {
	if len(frames) == 0 {
		return frames, scratch
	}
	if f := frames[len(frames)-1]; len(f) >= 12 { // the peer's address, once a batch
		l.peer.Lock()
		copy(l.peerMAC[:], f[6:12])
		l.peer.Unlock()
	}
	kept := frames[:0]
	own := false // kept has a backing array of its own (a bundle's frames need more room)
	for i, f := range frames {
		// Room past scratch's end (no zeroing) for a restored frame; a larger
		// one the decoder allocates on its own.
		const room = 1600
		start := len(scratch)
		scratch = slices.Grow(scratch, room)
		res, v, _ := l.Dec.Receive(f, scratch[start:start:start+room])
		switch v {
		case Plain:
			kept = append(kept, f)
		case Restored:
			if len(res) <= room {
				scratch = scratch[:start+len(res)]
			}
			kept = append(kept, res)
		case Control:
			l.Enc.HandleControl(f) // a malformed one changes nothing
		case Bundle:
			// One frame in, several out: from here on the output gets an
			// array of its own, so that it cannot overrun the frames not
			// read yet.
			if !own {
				k := make([][]byte, len(kept), len(kept)+16*(len(frames)-i))
				copy(k, kept)
				kept, own = k, true
			}
			kept, scratch, _ = l.Dec.ReceiveBundle(f, kept, scratch) // what it drops, it counts
		}
	}
	if !own {
		clear(frames[len(kept):])
	}
	return kept, scratch
}

// RunAcks sends the decoder's acknowledgements every interval (and at
// once when many wait) until ctx is done; it first sends a hello so that the
// peer's encoder learns this decoder's epoch.
func (l *Link) RunAcks(ctx context.Context, interval time.Duration) {
	l.out.Send([][]byte{l.Dec.Hello(l.peerAddr(), l.mac)})
	t := time.NewTicker(interval)
	defer t.Stop()
	hello := time.NewTicker(time.Second)
	defer hello.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if l.Dec.Pending() > 0 {
				l.send(l.Dec.ControlFrames(l.peerAddr(), l.mac))
			}
		case <-hello.C:
			// A restarted peer learns this side's epoch within a second.
			l.out.Send([][]byte{l.Dec.Hello(l.peerAddr(), l.mac)})
		}
	}
}

func (l *Link) peerAddr() [6]byte {
	l.peer.Lock()
	defer l.peer.Unlock()
	return l.peerMAC
}

// Impair drops and reorders frames: a test stage between two WAN ports
// (for kernels without netem). Each frame is lost with probability Loss;
// with probability Reorder it is held back and sent after the next one.
type Impair struct {
	Loss, Reorder float64

	mu   sync.Mutex
	r    *rand.Rand
	held []byte
}

// NewImpair returns an impairment stage with a seeded generator.
func NewImpair(loss, reorder float64, seed uint64) *Impair {
	return &Impair{Loss: loss, Reorder: reorder, r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (im *Impair) apply(frames [][]byte) [][]byte {
	im.mu.Lock()
	defer im.mu.Unlock()
	out := make([][]byte, 0, len(frames)+1)
	for _, f := range frames {
		if im.r.Float64() < im.Loss {
			continue
		}
		if im.held == nil && im.r.Float64() < im.Reorder {
			im.held = append([]byte(nil), f...)
			continue
		}
		out = append(out, f)
		if im.held != nil {
			out = append(out, im.held)
			im.held = nil
		}
	}
	return out
}
