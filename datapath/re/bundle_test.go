package re

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// wireSender records the frames a Link sends, copies of them.
type wireSender struct{ got [][]byte }

func (s *wireSender) Send(frames [][]byte) (int, error) {
	for _, f := range frames {
		s.got = append(s.got, append([]byte(nil), f...))
	}
	return len(frames), nil
}

// ackFrame is a TCP segment without payload (an acknowledgement).
func ackFrame(seq uint32) []byte {
	return tcpFrame([4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, 40000, 80, seq, nil)
}

// vlanFrame is f with an 802.1Q tag of id vid.
func vlanFrame(f []byte, vid uint16) []byte {
	g := make([]byte, 0, len(f)+4)
	g = append(g, f[:12]...)
	g = binary.BigEndian.AppendUint16(g, 0x8100)
	g = binary.BigEndian.AppendUint16(g, vid)
	return append(g, f[12:]...)
}

// newBundlePair is a Link A that bundles (at most mtu bytes) and a Link B
// whose Rx opens what A sends; A's encoder has B's decoder's hello.
func newBundlePair(t *testing.T, mtu int) (a, b *Link, wa, wb *wireSender) {
	t.Helper()
	wa, wb = &wireSender{}, &wireSender{}
	a, err := NewLink(Config{Bundle: mtu}, wa, macA, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err = NewLink(Config{Bundle: mtu}, wb, macB, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Enc.HandleControl(b.Dec.Hello(macA, macB))
	return a, b, wa, wb
}

// deliver runs the frames A sent (since from) through B's Rx as one batch
// (bundles among plain frames: more frames come out than go in) and
// returns copies of what it leaves, and B's acknowledgements go back to A.
func deliver(a, b *Link, wa *wireSender, from int) [][]byte {
	var out [][]byte
	var in [][]byte
	for _, f := range wa.got[from:] {
		in = append(in, append([]byte(nil), f...))
	}
	kept, _ := b.Rx(1, in, nil)
	for _, k := range kept {
		out = append(out, append([]byte(nil), k...))
	}
	for _, c := range b.Dec.ControlFrames(macA, macB) {
		a.Enc.HandleControl(c)
	}
	return out
}

// TestBundleLink: a stream sent twice through Link.Send with bundles (the
// second time nearly every frame encoded and small), acknowledgements and
// full-size frames among them, tagged and untagged frames, and Rx on the
// far side: every frame arrives byte-exact and in order, the encoded
// frames of a batch go in bundles within the MTU, and full-size frames go
// on their own.
func TestBundleLink(t *testing.T) {
	a, b, wa, _ := newBundlePair(t, 1500)
	r := rand.New(rand.NewPCG(5, 6))
	data := randomBytes(r, 256<<10)
	var sent [][]byte
	send := func(frames [][]byte) {
		t.Helper()
		from := len(wa.got)
		if n, err := a.Send(frames); n != len(frames) || err != nil {
			t.Fatalf("Send: %d of %d, %v", n, len(frames), err)
		}
		for _, f := range frames {
			sent = append(sent, append([]byte(nil), f...))
		}
		got := deliver(a, b, wa, from)
		want := sent[len(sent)-len(frames):]
		if len(got) != len(want) {
			t.Fatalf("%d frames sent, %d delivered", len(want), len(got))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d of the batch differs after the link:\n got %x\nwant %x", i, got[i], want[i])
			}
		}
		for _, w := range wa.got[from:] {
			if len(w)-l2Len(w)-2 > 1500 {
				t.Fatalf("a frame of %d bytes after its EtherType left the link (MTU 1500)", len(w)-l2Len(w)-2)
			}
		}
	}
	// The first pass: full-size plain frames, with acknowledgements and a
	// tagged stretch between them.
	for pass := range 2 {
		frames := transfer(data, uint16(1000+pass), 0) // new ids: the second pass references the first
		for i := 0; i < len(frames); i += 40 {
			batch := append([][]byte(nil), frames[i:min(i+40, len(frames))]...)
			if i%120 == 80 {
				for k := range batch {
					batch[k] = vlanFrame(batch[k], 7)
				}
			}
			batch = append(batch, ackFrame(uint32(i)), ackFrame(uint32(i+1)))
			send(batch)
		}
		c := a.Enc.Counters()
		t.Logf("pass %d: %d frames, %d encoded, %d bundles of %d frames, %d wire frames", pass, c.Frames, c.Encoded, c.Bundles, c.Bundled, len(wa.got))
	}
	c, d := a.Enc.Counters(), b.Dec.Counters()
	if c.Encoded < uint64(len(data)/1460) || c.Bundles == 0 || c.Bundled < c.Encoded {
		t.Errorf("encoder %+v: want the second pass encoded and in bundles", c)
	}
	if d.Bundles != c.Bundles || d.Failures != 0 || d.Restored != c.Encoded {
		t.Errorf("decoder %+v against encoder %+v: want every bundle opened and every frame restored", d, c)
	}
	if len(wa.got) >= len(sent)*2/3 {
		t.Errorf("%d frames sent as %d wire frames: bundles saved too few", len(sent), len(wa.got))
	}
}

// TestBundleSmallMTU: with an MTU too small for two encoded frames, every
// frame goes on its own; a bundle never exceeds the MTU.
func TestBundleSmallMTU(t *testing.T) {
	var bu bundler
	f1, f2 := ackFrame(1), ackFrame(2) // 54 bytes each: 42 after the addresses, 44 in a bundle
	if bundles, _ := bu.pack([][]byte{f1, f2}, 4+44+43); bundles != 0 || len(bu.wire) != 2 || &bu.wire[0][0] != &f1[0] {
		t.Errorf("MTU 91: %d bundles, %d wire frames: want the two frames on their own", bundles, len(bu.wire))
	}
	if bundles, n := bu.pack([][]byte{f1, f2, ackFrame(3)}, 4+44+44); bundles != 1 || n != 2 || len(bu.wire) != 2 || len(bu.wire[0]) != 12+2+4+88 {
		t.Errorf("MTU 92: %d bundles of %d frames, %d wire frames: want one bundle of two (%d bytes) and one frame", bundles, n, len(bu.wire), len(bu.wire[0]))
	}
	// Different addresses, a control frame: runs break there.
	g := append([]byte(nil), f2...)
	g[0] ^= 1
	ctl := controlFrame(macA, macB, kindAck, 9, []uint64{1})
	if bundles, _ := bu.pack([][]byte{f1, g, ctl, f1, f1}, 1500); bundles != 1 || len(bu.wire) != 4 || bu.counts[3] != 2 {
		t.Errorf("%d bundles, wire counts %v: want f1, g, the control frame on their own and one bundle of two", bundles, bu.counts)
	}
}

// bundleOf builds a bundle frame with the given elements (each the bytes
// from a frame's EtherType on) and count.
func bundleOf(count int, elems ...[]byte) []byte {
	f := append([]byte(nil), macB[:]...)
	f = append(f, macA[:]...)
	f = binary.BigEndian.AppendUint16(f, EtherType)
	f = append(f, magic, kindBundle)
	f = binary.BigEndian.AppendUint16(f, uint16(count))
	for _, e := range elems {
		f = binary.BigEndian.AppendUint16(f, uint16(len(e)))
		f = append(f, e...)
	}
	return f
}

// TestBundleMalformed: bundles from an untrusted link: a count of 0, a
// length past the end, a truncated header, a bundle or a control frame
// inside one, an encoded frame that does not restore: the bad frames are
// dropped and counted, the good ones before them (and after, where the
// lengths still hold) pass, nothing panics.
func TestBundleMalformed(t *testing.T) {
	good := ackFrame(5)[12:]
	dataFrame := func() []byte { // a DATA shim with a reference to a payload the decoder lacks
		f := ackFrame(6)
		sh := make([]byte, 2+shimLen)
		binary.BigEndian.PutUint16(sh, EtherType)
		sh[2], sh[3] = magic, kindData
		binary.BigEndian.PutUint16(sh[4:], 0x0800)
		binary.BigEndian.PutUint32(sh[6:], 1)
		binary.BigEndian.PutUint16(sh[14:], 40+100)
		binary.BigEndian.PutUint16(sh[16:], 40)
		sh[18] = 1
		sh = append(sh, f[14:54]...)
		sh = binary.BigEndian.AppendUint64(sh, 0xdead)
		sh = binary.BigEndian.AppendUint16(sh, 0)
		sh = binary.BigEndian.AppendUint16(sh, 100)
		return binary.BigEndian.AppendUint16(sh, 0)
	}()
	nested := bundleOf(2, good, good)[12:]
	ctl := controlFrame(macA, macB, kindAck, 9, []uint64{1})[12:]
	for _, c := range []struct {
		name      string
		frame     []byte
		passed    int
		malformed uint64
		missing   uint64
		err       error
	}{
		{"two good", bundleOf(2, good, good), 2, 0, 0, nil},
		{"padding after the last", append(bundleOf(2, good, good), 0, 0, 0), 2, 0, 0, nil},
		{"count 0", bundleOf(0), 0, 1, 0, ErrMalformed},
		{"count past the frames", bundleOf(3, good, good), 2, 1, 0, ErrMalformed},
		{"length past the end", bundleOf(2, good, good)[:12+2+4+2+len(good)+2+10], 1, 1, 0, ErrMalformed},
		{"length under an EtherType", bundleOf(2, good, []byte{8}), 1, 1, 0, ErrMalformed},
		{"header cut", bundleOf(2)[:12+2+3], 0, 1, 0, ErrMalformed},
		{"a bundle inside", bundleOf(3, good, nested, good), 2, 1, 0, ErrMalformed},
		{"a control frame inside", bundleOf(2, ctl, good), 1, 1, 0, ErrMalformed},
		{"a reference missing", bundleOf(3, good, dataFrame, good), 2, 0, 1, ErrMissing},
	} {
		t.Run(c.name, func(t *testing.T) {
			dec, err := NewDecoder(Config{})
			if err != nil {
				t.Fatal(err)
			}
			in := append([]byte(nil), c.frame...)
			if _, v, _ := dec.Receive(c.frame, nil); len(c.frame) >= 16 && v != Bundle {
				t.Fatalf("Receive: verdict %v, want Bundle", v)
			}
			res, _, err := dec.ReceiveBundle(c.frame, nil, nil)
			if !bytes.Equal(in, c.frame) {
				t.Fatal("ReceiveBundle changed its input")
			}
			if len(res) != c.passed || !errors.Is(err, c.err) && (err != nil || c.err != nil) {
				t.Fatalf("%d frames passed, err %v: want %d, %v", len(res), err, c.passed, c.err)
			}
			for _, r := range res {
				if want := append(append([]byte(nil), c.frame[:12]...), good...); !bytes.Equal(r, want) {
					t.Fatalf("passed %x, want %x", r, want)
				}
			}
			st := dec.Counters()
			if st.Malformed != c.malformed || st.Missing != c.missing || st.Bundles != 1 || st.Plain != uint64(c.passed) {
				t.Fatalf("counters %+v: want malformed %d, missing %d, one bundle, %d plain", st, c.malformed, c.missing, c.passed)
			}
			if c.missing > 0 && dec.Pending() == 0 {
				t.Fatal("no NAK queued for the missing payload")
			}
		})
	}
}

// TestRxBundleOrder: a batch of plain frames and bundles through Link.Rx
// comes out as the frames in wire order, the bundles opened in place.
func TestRxBundleOrder(t *testing.T) {
	l, err := NewLink(Config{}, &wireSender{}, macB, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want, in [][]byte
	seq := uint32(0)
	next := func() []byte { seq++; f := ackFrame(seq); want = append(want, f); return f }
	bundle := func(n int) []byte {
		var els [][]byte
		for range n {
			els = append(els, next()[12:])
		}
		return bundleOf(n, els...)
	}
	in = append(in, next(), bundle(3), next(), next(), bundle(2), bundle(4), next())
	got, _ := l.Rx(1, in, nil)
	if len(got) != len(want) {
		t.Fatalf("%d frames out, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d: got seq %d, want %d", i, binary.BigEndian.Uint32(got[i][38:]), binary.BigEndian.Uint32(want[i][38:]))
		}
	}
	if c := l.Dec.Counters(); c.Bundles != 3 || c.Plain != uint64(len(want)) {
		t.Errorf("decoder %+v: want 3 bundles, %d plain frames", c, len(want))
	}
}
