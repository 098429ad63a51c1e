package re

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// FuzzReceive feeds any frame to a decoder that holds a log: it never
// panics, and a frame it restores is a TCP segment whose CRC matched; a
// bundle is opened (ReceiveBundle) with the same guarantees for each frame
// in it. The seeds include bundles of encoded and plain frames and broken
// ones (testdata/fuzz/FuzzReceive).
func FuzzReceive(f *testing.F) {
	r := rand.New(rand.NewPCG(1, 1))
	file := randomBytes(r, 16<<10)
	enc, dec := newPair(f, Config{})
	for _, fr := range transfer(file, 1, 1) {
		dec.Receive(fr, nil)
		enc.Encode(fr, nil)
	}
	for _, c := range dec.ControlFrames(macA, macB) {
		enc.HandleControl(c)
		f.Add(c)
	}
	for _, fr := range transfer(file, 2, 1)[:3] {
		e, _ := enc.Encode(fr, nil)
		f.Add(append([]byte(nil), e...))
	}
	f.Add(tcpFrame([4]byte{1, 2, 3, 4}, [4]byte{5, 6, 7, 8}, 1, 2, 3, file[:100]))
	for _, b := range bundleSeeds(enc, transfer(file, 3, 1)[:4]) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		in := append([]byte(nil), frame...)
		res, v, err := dec.Receive(frame, nil)
		if !bytes.Equal(in, frame) {
			t.Fatal("Receive changed its input")
		}
		if v == Bundle {
			out, _, err := dec.ReceiveBundle(frame, nil, nil)
			if !bytes.Equal(in, frame) {
				t.Fatal("ReceiveBundle changed its input")
			}
			if len(out) > len(frame)/2 {
				t.Fatalf("%d frames out of a bundle of %d bytes", len(out), len(frame))
			}
			_ = err // a dropped frame is counted; the rest pass
			return
		}
		switch v {
		case Restored:
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := parseTCP(res); !ok {
				t.Fatal("restored a frame that is not a TCP segment")
			}
		case Plain:
			if !bytes.Equal(res, frame) {
				t.Fatal("plain frame changed")
			}
		case Control:
			enc.HandleControl(frame)
		}
	})
}

// FuzzControl: HandleControl accepts well-formed control frames and rejects
// the rest with an error, never a panic.
func FuzzControl(f *testing.F) {
	dec, _ := NewDecoder(Config{})
	f.Add(dec.Hello(macA, macB))
	f.Add(controlFrame(macA, macB, kindNak, 7, []uint64{1, 2, 3}))
	f.Add([]byte{1, 2, 3})
	enc, _ := NewEncoder(Config{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		err := enc.HandleControl(frame)
		if err == nil && !IsControl(frame) {
			t.Fatal("accepted a frame that is not a control frame")
		}
	})
}

// bundleSeeds returns bundles of the encoded frames (and a plain
// acknowledgement) of frames, and broken ones: a count of 0, a length past
// the end, a bundle inside a bundle.
func bundleSeeds(enc *Encoder, frames [][]byte) [][]byte {
	var run [][]byte
	for _, fr := range frames {
		e, _ := enc.Encode(fr, nil)
		run = append(run, append([]byte(nil), e...))
	}
	run = append(run, ackFrame(9))
	var bu bundler
	bu.pack(run, 1500)
	var seeds [][]byte
	for _, w := range bu.wire {
		if off, ok := shimAt(w); ok && isBundle(w, off) {
			seeds = append(seeds, append([]byte(nil), w...))
		}
	}
	good := ackFrame(5)[12:]
	seeds = append(seeds, bundleOf(0), bundleOf(2, good, good)[:40], bundleOf(2, good, bundleOf(2, good, good)[12:]))
	return seeds
}
