package re

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// orderSender is a port whose far end is a decoder: it restores every
// frame sent, records them in order and returns the acknowledgements at
// once. While gate is not nil and open, Send waits at it; refuse makes
// it refuse every frame.
type orderSender struct {
	mu      sync.Mutex
	dec     *Decoder
	enc     *Encoder
	got     [][]byte
	bad     int
	gate    chan struct{}
	waiting atomic.Int32
	refuse  atomic.Bool
}

func (s *orderSender) Send(frames [][]byte) (int, error) {
	if s.gate != nil {
		s.waiting.Add(1)
		<-s.gate
		s.waiting.Add(-1)
	}
	if s.refuse.Load() {
		return 0, errors.New("refused")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range frames {
		res, v, _ := s.dec.Receive(f, nil)
		if v == Bundle {
			n := len(s.got)
			s.got, _, _ = s.dec.ReceiveBundle(f, s.got, nil)
			for k := n; k < len(s.got); k++ {
				s.got[k] = append([]byte(nil), s.got[k]...)
			}
			continue
		}
		if v != Plain && v != Restored {
			s.bad++
			continue
		}
		s.got = append(s.got, append([]byte(nil), res...))
	}
	for _, c := range s.dec.ControlFrames(macA, macB) {
		s.enc.HandleControl(c)
	}
	return len(frames), nil
}

func (s *orderSender) frames() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got
}

// newOrderLink is a Link over an orderSender (gated when gated).
func newOrderLink(t *testing.T, gated bool) (*Link, *orderSender) {
	t.Helper()
	out := &orderSender{}
	if gated {
		out.gate = make(chan struct{})
	}
	l, err := NewLink(Config{}, out, macA, nil)
	if err != nil {
		t.Fatal(err)
	}
	out.dec, _ = NewDecoder(Config{})
	out.enc = l.Enc
	l.Enc.HandleControl(out.dec.Hello(macA, macB))
	return l, out
}

// startEncoder runs l's encoder goroutine with depth until the returned
// stop is called, which waits for RunEncoder to return.
func startEncoder(l *Link, depth int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.RunEncoder(ctx, depth); close(done) }()
	for l.pipe.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	return func() { cancel(); <-done }
}

// sendCopies sends frames in batches of n as the switch does: from a
// buffer it overwrites after each Send (the queue must have copied them).
func sendCopies(t *testing.T, l *Link, frames [][]byte, n int) {
	buf := make([][]byte, 0, n)
	for lo := 0; lo < len(frames); lo += n {
		buf = buf[:0]
		for _, f := range frames[lo:min(lo+n, len(frames))] {
			buf = append(buf, append([]byte(nil), f...))
		}
		if k, err := l.Send(buf); k != len(buf) || err != nil {
			t.Errorf("send: %d of %d, %v", k, len(buf), err)
		}
		for _, f := range buf {
			clear(f) // the caller reuses its buffers once Send returns
		}
	}
}

// TestRunEncoderOrder: four flows sent from four goroutines through the
// encoder's goroutine arrive restored, every flow's frames in the order
// sent, and the repeats are encoded there.
func TestRunEncoderOrder(t *testing.T) {
	l, out := newOrderLink(t, false)
	stop := startEncoder(l, 2)
	r := rand.New(rand.NewPCG(61, 62))
	data := randomBytes(r, 64<<10)
	streams := make([][][]byte, 4)
	var wg sync.WaitGroup
	for k := range streams {
		streams[k] = transfer(append(append([]byte(nil), data...), data...), uint16(200+k), uint32(k))
		wg.Add(1)
		go func() { defer wg.Done(); sendCopies(t, l, streams[k], 8+k) }()
	}
	wg.Wait()
	stop()
	byFlow := map[uint16][][]byte{}
	for _, f := range out.frames() {
		sport := binary.BigEndian.Uint16(f[14+20+2:]) // transfer's "sport" is the destination port
		byFlow[sport] = append(byFlow[sport], f)
	}
	for k, s := range streams {
		got := byFlow[uint16(200+k)]
		if len(got) != len(s) {
			t.Fatalf("flow %d: %d frames arrived, want %d", k, len(got), len(s))
		}
		for i := range s {
			if !bytes.Equal(got[i], s[i]) {
				t.Fatalf("flow %d: frame %d differs from the one sent at that place (order or bytes)", k, i)
			}
		}
	}
	c := l.Enc.Counters()
	if c.Encoded == 0 || c.Pipelined == 0 || out.bad != 0 {
		t.Errorf("encoded %d, batches on the encoder's goroutine %d, undecodable %d: want repeats encoded there", c.Encoded, c.Pipelined, out.bad)
	}
}

// TestRunEncoderBackPressure: with the port blocked, Send queues depth
// batches (one more in the goroutine's hands) and the next waits until
// the port moves; nothing is dropped, and the order holds.
func TestRunEncoderBackPressure(t *testing.T) {
	l, out := newOrderLink(t, true)
	const depth = 2
	stop := startEncoder(l, depth)
	frames := transfer(randomBytes(rand.New(rand.NewPCG(7, 8)), 40<<10), 300, 1)
	var sent atomic.Int32
	done := make(chan struct{})
	go func() {
		for i := range frames {
			sendCopies(t, l, frames[i:i+1], 1)
			sent.Add(1)
		}
		close(done)
	}()
	// Wait for the port to block and the queue to fill (a loaded machine
	// takes its time), then give the sender 50 ms more to show it waits.
	deadline := time.Now().Add(5 * time.Second)
	for (out.waiting.Load() == 0 || sent.Load() < depth+1 || l.Enc.Counters().QueueWaits == 0) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := sent.Load(); n != depth+1 {
		t.Errorf("%d Sends returned with the port blocked, want %d (one taken, %d queued)", n, depth+1, depth)
	}
	if w := l.Enc.Counters().QueueWaits; w != 1 {
		t.Errorf("QueueWaits %d, want 1", w)
	}
	close(out.gate)
	<-done
	stop()
	got := out.frames()
	if len(got) != len(frames) {
		t.Fatalf("%d frames arrived, want %d", len(got), len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d out of order or changed", i)
		}
	}
}

// TestRunEncoderShutdown: the context ends with batches queued and the
// port blocked; RunEncoder returns only once they are sent, and a Send
// after that encodes on its caller's goroutine. Frames the port refuses
// on the encoder's goroutine are counted.
func TestRunEncoderShutdown(t *testing.T) {
	l, out := newOrderLink(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	var returned atomic.Bool
	done := make(chan struct{})
	go func() { l.RunEncoder(ctx, 3); returned.Store(true); close(done) }()
	for l.pipe.Load() == nil {
		time.Sleep(time.Millisecond)
	}
	frames := transfer(randomBytes(rand.New(rand.NewPCG(9, 10)), 20<<10), 400, 1)
	sendCopies(t, l, frames[:4], 1) // one taken, three queued
	cancel()
	time.Sleep(30 * time.Millisecond)
	if returned.Load() {
		t.Fatal("RunEncoder returned with batches unsent")
	}
	close(out.gate)
	<-done
	if got := len(out.frames()); got != 4 {
		t.Fatalf("%d frames sent by the end, want the 4 queued", got)
	}
	sendCopies(t, l, frames[4:], 2) // synchronous now
	if got := len(out.frames()); got != len(frames) {
		t.Fatalf("%d frames after Sends past the end, want %d", got, len(frames))
	}
	out.refuse.Store(true)
	if n, err := l.Send(frames[:2]); n != 0 || err == nil {
		t.Errorf("a refused synchronous send reported %d, %v", n, err)
	}

	// Refused on the goroutine: reported sent, counted.
	l2, out2 := newOrderLink(t, false)
	stop := startEncoder(l2, 0)
	out2.refuse.Store(true)
	sendCopies(t, l2, frames[:5], 5)
	stop()
	if c := l2.Enc.Counters(); c.TxDropped != 5 || c.Pipelined != 1 {
		t.Errorf("TxDropped %d, Pipelined %d: want 5 and 1", c.TxDropped, c.Pipelined)
	}
}

// TestRunEncoderConcurrentStop: Sends racing the end of RunEncoder all
// reach the port (queued and drained, or encoded on their callers).
func TestRunEncoderConcurrentStop(t *testing.T) {
	l, out := newOrderLink(t, false)
	stop := startEncoder(l, 1)
	frames := transfer(randomBytes(rand.New(rand.NewPCG(11, 12)), 64<<10), 500, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); sendCopies(t, l, frames, 3) }()
	time.Sleep(time.Millisecond)
	stop()
	wg.Wait()
	got := out.frames()
	if len(got) != len(frames) || out.bad != 0 {
		t.Fatalf("%d frames arrived (%d undecodable), want %d", len(got), out.bad, len(frames))
	}
	for i := range frames {
		if !bytes.Equal(got[i], frames[i]) {
			t.Fatalf("frame %d out of order or changed", i)
		}
	}
}

// decodeSender is a port whose far end is a decoder that acknowledges
// every batch at once (for the benchmark: no checks, no copies kept).
type decodeSender struct {
	dec  *Decoder
	enc  *Encoder
	buf  []byte
	res  [][]byte
	wire int // frames sent
}

func (s *decodeSender) Send(frames [][]byte) (int, error) {
	s.wire += len(frames)
	for _, f := range frames {
		if _, v, _ := s.dec.Receive(f, s.buf[:0]); v == Bundle {
			s.res, s.buf, _ = s.dec.ReceiveBundle(f, s.res[:0], s.buf[:0])
		}
	}
	for _, c := range s.dec.ControlFrames(macA, macB) {
		s.enc.HandleControl(c)
	}
	return len(frames), nil
}

// BenchmarkLinkSend runs iperf3's stream (benchLink's frames, batches of
// 64) through Link.Send and a decoder behind the port: on the caller's
// goroutine (serial) and through the encoder's goroutine (pipelined, the
// decoder then on that goroutine too). cpu-ns/op is the process's CPU time
// per frame: what the hand-off (a copy of each frame, the queue, the
// wake-ups, the frames crossing cores) adds.
//
// "bundled" is serial with bundles of at most 1,500 bytes (Config.Bundle),
// opened by the decoder; wire-frames/op is the frames the port was given
// per frame sent.
func BenchmarkLinkSend(b *testing.B) {
	for _, mode := range []string{"serial", "pipelined", "bundled"} {
		pipelined := mode == "pipelined"
		b.Run(mode, func(b *testing.B) {
			const n = 8192
			frames := make([][]byte, n)
			pay := make([]byte, 1448)
			fill := iperfStream()
			for i := range frames {
				fill(i, pay)
				frames[i] = tcpFrame([4]byte{10, 9, 0, 1}, [4]byte{10, 9, 0, 2}, 5201, 40000, uint32(i*1448), pay)
			}
			out := &decodeSender{buf: make([]byte, 2048)}
			cfg := Config{}
			if mode == "bundled" {
				cfg.Bundle = 1500
			}
			l, err := NewLink(cfg, out, macA, nil)
			if err != nil {
				b.Fatal(err)
			}
			out.dec, _ = NewDecoder(Config{})
			out.enc = l.Enc
			l.Enc.HandleControl(out.dec.Hello(macA, macB))
			stop := func() {}
			if pipelined {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { l.RunEncoder(ctx, 0); close(done) }()
				for l.pipe.Load() == nil {
					time.Sleep(time.Millisecond)
				}
				stop = func() { cancel(); <-done }
			}
			b.SetBytes(int64(len(frames[0])))
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; {
				lo := i % n
				hi := min(lo+64, n, lo+b.N-i)
				if lo == 0 && i > 0 {
					for k, f := range frames { // a new pass: new sequence numbers
						binary.BigEndian.PutUint32(f[38:], uint32((i+k)*1448))
					}
				}
				l.Send(frames[lo:hi])
				i += hi - lo
			}
			stop()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
			in, outB := l.Enc.Stats.BytesIn.Load(), l.Enc.Stats.BytesOut.Load()
			b.ReportMetric(100*float64(outB)/float64(in), "%wire")
			b.ReportMetric(float64(out.wire)/float64(b.N), "wire-frames/op")
		})
	}
}
