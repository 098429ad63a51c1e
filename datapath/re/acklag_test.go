package re

import (
	"testing"
)

// TestAckLag sends iperf3's repeated 128 KiB buffer through an encoder and
// a decoder whose acknowledgements come back lagLen batches of 64 frames
// late: the buffer repeats about every 90 frames, far faster than the
// acknowledgements (a fast link: at 5 Gbit/s 128 KiB take 0.2 ms, the
// acknowledgements 10 ms), so the latest copy of any bytes is never
// acknowledged when the next one comes. The encoder must still find an
// acknowledged copy and encode nearly every frame once the first ones
// are acknowledged.
func TestAckLag(t *testing.T) {
	const lagLen, batches = 40, 400
	enc, dec := newPair(t, Config{})
	buf := iperfBuffer()
	pay := make([]byte, 1448)
	var sc Scratch
	var res [][]byte
	var arena []byte
	out := make([]byte, 2048)
	var lag [][][]byte // control frames per batch, delivered lagLen batches later
	var frames [][]byte
	encodedLate, framesLate := uint64(0), uint64(0)
	for b := range batches {
		frames = frames[:0]
		for k := range 64 {
			i := b*64 + k
			for j := range pay {
				pay[j] = buf[(i*len(pay)+j)%len(buf)]
			}
			frames = append(frames, tcpFrame([4]byte{10, 9, 0, 1}, [4]byte{10, 9, 0, 2}, 5201, 40000, uint32(i*len(pay)), pay))
		}
		e0 := enc.Stats.Encoded.Load()
		res, arena = enc.EncodeBatch(&sc, frames, res[:0], arena[:0])
		for i, f := range res {
			r, v, err := dec.Receive(f, out[:0])
			if v == Dropped {
				t.Fatalf("batch %d frame %d dropped: %v", b, i, err)
			}
			if v == Restored && string(r) != string(frames[i]) {
				t.Fatalf("batch %d frame %d restored wrong", b, i)
			}
		}
		lag = append(lag, dec.ControlFrames(macA, macB))
		if len(lag) > lagLen {
			for _, c := range lag[0] {
				enc.HandleControl(c)
			}
			lag = lag[1:]
		}
		if b >= 2*lagLen {
			encodedLate += enc.Stats.Encoded.Load() - e0
			framesLate += 64
		}
	}
	frac := float64(encodedLate) / float64(framesLate)
	t.Logf("acknowledgements %d batches late: %.1f%% of the frames encoded after the first %d batches", lagLen, 100*frac, 2*lagLen)
	if frac < 0.9 {
		t.Errorf("with acknowledgements %d batches late, %.1f%% of the frames encoded after the first %d batches, want at least 90%%",
			lagLen, 100*frac, 2*lagLen)
	}
}
