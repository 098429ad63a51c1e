package re

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"
)

// decodingSender is a port whose far end is a decoder: every frame sent is
// decoded at once and must be one of the frames the senders gave.
type decodingSender struct {
	t    *testing.T
	mu   sync.Mutex
	dec  *Decoder
	enc  *Encoder // the sending side's encoder: acknowledgements go back to it
	sent map[string]bool
	n    int
}

func (s *decodingSender) Send(frames [][]byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range frames {
		res, v, err := s.dec.Receive(f, nil)
		if v != Plain && v != Restored || !s.sent[string(res)] {
			s.t.Errorf("a frame came out %v (%v), not as sent", v, err)
		}
		s.n++
	}
	for _, c := range s.dec.ControlFrames(macA, macB) {
		s.enc.HandleControl(c)
	}
	return len(frames), nil
}

// TestLinkConcurrentSend: four senders share one Link (the switch's
// workers do), each its own TCP stream of repeated data in batches; every
// frame reaches the decoder as sent, and the repeats are encoded.
func TestLinkConcurrentSend(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	data := randomBytes(r, 96<<10)
	var streams [][][]byte
	out := &decodingSender{t: t, sent: map[string]bool{}}
	for k := 0; k < 4; k++ {
		fr := transfer(append(append([]byte(nil), data...), data...), uint16(100+k), uint32(k))
		streams = append(streams, fr)
		for _, f := range fr {
			out.sent[string(f)] = true
		}
	}
	l, err := NewLink(Config{}, out, macA, nil)
	if err != nil {
		t.Fatal(err)
	}
	out.dec, _ = NewDecoder(Config{})
	out.enc = l.Enc
	l.Enc.HandleControl(out.dec.Hello(macA, macB))
	var wg sync.WaitGroup
	for _, fr := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lo := 0; lo < len(fr); lo += 16 {
				batch := fr[lo:min(lo+16, len(fr))]
				keep := make([][]byte, len(batch))
				for i, f := range batch {
					keep[i] = append([]byte(nil), f...)
				}
				if n, err := l.Send(batch); n != len(batch) || err != nil {
					t.Errorf("send: %d of %d, %v", n, len(batch), err)
				}
				for i := range batch {
					if !bytes.Equal(batch[i], keep[i]) {
						t.Error("Send changed a frame it was given")
					}
				}
			}
		}()
	}
	wg.Wait()
	if total := 4 * len(streams[0]); out.n != total {
		t.Errorf("%d frames delivered, want %d", out.n, total)
	}
	if l.Enc.Stats.Encoded.Load() == 0 {
		t.Error("no frame encoded: the second copy of each stream repeats the first")
	}
}
