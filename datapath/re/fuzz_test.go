package re

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// FuzzReceive feeds any frame to a decoder that holds a log: it never
// panics, and a frame it restores is a TCP segment whose CRC matched.
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
	f.Fuzz(func(t *testing.T, frame []byte) {
		in := append([]byte(nil), frame...)
		res, v, err := dec.Receive(frame, nil)
		if !bytes.Equal(in, frame) {
			t.Fatal("Receive changed its input")
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
