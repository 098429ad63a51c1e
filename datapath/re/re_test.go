package re

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

var macA, macB = [6]byte{2, 0, 0, 0, 0, 0xa}, [6]byte{2, 0, 0, 0, 0, 0xb}

// checksum is the Internet checksum of b, with an initial sum.
func checksum(sum uint32, b []byte) uint16 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// tcpFrame builds an Ethernet/IPv4/TCP frame with correct checksums.
func tcpFrame(src, dst [4]byte, sport, dport uint16, seq uint32, payload []byte) []byte {
	f := make([]byte, 14+20+20+len(payload))
	copy(f[0:], macB[:])
	copy(f[6:], macA[:])
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(40+len(payload)))
	binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF
	ip[8], ip[9] = 64, 6
	copy(ip[12:], src[:])
	copy(ip[16:], dst[:])
	binary.BigEndian.PutUint16(ip[10:], checksum(0, ip[:20]))
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4
	tcp[13] = 0x18
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	copy(tcp[20:], payload)
	var pseudo uint32
	pseudo += uint32(binary.BigEndian.Uint16(src[0:])) + uint32(binary.BigEndian.Uint16(src[2:]))
	pseudo += uint32(binary.BigEndian.Uint16(dst[0:])) + uint32(binary.BigEndian.Uint16(dst[2:]))
	pseudo += 6 + uint32(20+len(payload))
	binary.BigEndian.PutUint16(tcp[16:], checksum(pseudo, tcp))
	return f
}

// transfer cuts data into MSS-sized segments of one TCP connection.
func transfer(data []byte, sport uint16, seq uint32) [][]byte {
	var frames [][]byte
	for off := 0; off < len(data); off += 1460 {
		end := min(off+1460, len(data))
		frames = append(frames, tcpFrame([4]byte{10, 0, 0, 2}, [4]byte{10, 0, 0, 1}, 80, sport, seq+uint32(off), data[off:end]))
	}
	return frames
}

// link runs frames through an encoder, an impaired link and a decoder, with
// the decoder's control frames carried back (impaired too) every ackEvery
// frames. A frame lost on the way or dropped by the decoder is sent again
// later, as TCP would. It returns the bytes on the link and the frames
// delivered, each checked equal to the one sent.
type link struct {
	t        *testing.T
	enc      *Encoder
	dec      *Decoder
	r        *rand.Rand
	loss     float64 // per frame, both directions
	reorder  float64 // chance a frame is held back and sent after the next
	ackEvery int
	wire     int
	sent     int
}

func (l *link) run(frames [][]byte) {
	pending := append([][]byte(nil), frames...)
	var held []byte
	var heldOrig []byte
	out := make([]byte, 0, 2048)
	deliver := func(orig, wire []byte) bool {
		res, v, err := l.dec.Receive(wire, out)
		switch v {
		case Plain, Restored:
			if !bytes.Equal(res, orig) {
				l.t.Fatalf("delivered frame differs from the frame sent (%v)", v)
			}
			return true
		case Dropped:
			if !errors.Is(err, ErrMissing) && !errors.Is(err, ErrCRC) {
				l.t.Fatalf("dropped with %v", err)
			}
			return false
		}
		l.t.Fatalf("verdict %v for a data frame", v)
		return false
	}
	for round := 0; len(pending) > 0; round++ {
		if round > 50 {
			l.t.Fatalf("%d frames never delivered", len(pending))
		}
		var again [][]byte
		for i, f := range pending {
			enc, _ := l.enc.Encode(f, nil)
			l.wire += len(enc)
			l.sent++
			if l.r.Float64() < l.loss {
				again = append(again, f)
				continue
			}
			if held == nil && l.r.Float64() < l.reorder {
				held, heldOrig = enc, f
				continue
			}
			if !deliver(f, enc) {
				again = append(again, f)
			}
			if held != nil {
				if !deliver(heldOrig, held) {
					again = append(again, heldOrig)
				}
				held, heldOrig = nil, nil
			}
			if (i+1)%l.ackEvery == 0 {
				l.acks()
			}
		}
		if held != nil {
			if !deliver(heldOrig, held) {
				again = append(again, heldOrig)
			}
			held, heldOrig = nil, nil
		}
		l.acks()
		pending = again
	}
}

func (l *link) acks() {
	for _, c := range l.dec.ControlFrames(macA, macB) {
		l.wire += len(c)
		if l.r.Float64() < l.loss {
			continue
		}
		if err := l.enc.HandleControl(c); err != nil {
			l.t.Fatal(err)
		}
	}
}

func newLink(t *testing.T, loss, reorder float64) *link {
	enc, dec := newPair(t, Config{})
	return &link{t: t, enc: enc, dec: dec, r: rand.New(rand.NewPCG(uint64(loss*1000), 7)), loss: loss, reorder: reorder, ackEvery: 16}
}

// newPair is an encoder and a decoder of cfg, the encoder told the
// decoder's hello (epoch and log size), as the two ends of a link start.
func newPair(tb testing.TB, cfg Config) (*Encoder, *Decoder) {
	tb.Helper()
	enc, err := NewEncoder(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	dec, err := NewDecoder(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := enc.HandleControl(dec.Hello(macA, macB)); err != nil {
		tb.Fatal(err)
	}
	return enc, dec
}

func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func wireBytes(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		n += len(f)
	}
	return n
}

func TestSameFileTwice(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	file := randomBytes(r, 2<<20)
	for _, c := range []struct {
		name          string
		loss, reorder float64
		maxSecond     float64 // the second fetch's share of its plain bytes on the wire
	}{
		{"lossless", 0, 0, 0.08},
		{"1% loss and reordering", 0.01, 0.01, 0.15},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newLink(t, c.loss, c.reorder)
			first := transfer(file, 40000, 1000)
			l.run(first)
			w1 := l.wire
			second := transfer(file, 40001, 777777)
			l.run(second)
			w2 := l.wire - w1
			share := float64(w2) / float64(wireBytes(second))
			t.Logf("first fetch %d bytes on the wire for %d plain (%.2f%%), second %d (%.2f%%); encoder %d encoded, %d raw; decoder failures %d",
				w1, wireBytes(first), 100*float64(w1)/float64(wireBytes(first)), w2, 100*share,
				l.enc.Stats.Encoded.Load(), l.enc.Stats.Raw.Load(), l.dec.Stats.Failures.Load())
			if share > c.maxSecond {
				t.Errorf("second fetch carried %.1f%% of its bytes, want at most %.0f%%", 100*share, 100*c.maxSecond)
			}
			if c.loss == 0 && float64(w1) > 1.01*float64(wireBytes(first)) {
				t.Errorf("random data: %d bytes on the wire for %d: over 1%% overhead", w1, wireBytes(first))
			}
		})
	}
}

// TestEditedFile: a second version with small edits every few KB keeps most
// of its bytes off the wire.
func TestEditedFile(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	v1 := randomBytes(r, 1<<20)
	v2 := append([]byte(nil), v1...)
	for i := 0; i < len(v2); i += 4000 + r.IntN(4000) {
		v2[i] ^= 0xff       // one changed byte
		if r.IntN(3) == 0 { // an insertion shifts the rest
			v2 = append(v2[:i], append([]byte("inserted text"), v2[i:]...)...)
		}
	}
	l := newLink(t, 0, 0)
	l.run(transfer(v1, 40000, 1))
	w1 := l.wire
	second := transfer(v2, 40001, 1)
	l.run(second)
	saved := 1 - float64(l.wire-w1)/float64(wireBytes(second))
	t.Logf("edited version: %.1f%% saved", 100*saved)
	if saved < 0.80 {
		t.Errorf("edited version: %.1f%% saved, want >= 80%%", 100*saved)
	}
}

// TestDecoderRestart: a decoder that restarts mid-transfer with an empty
// log costs drops, never a wrong byte, and the encoder learns its epoch.
func TestDecoderRestart(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	file := randomBytes(r, 512<<10)
	l := newLink(t, 0, 0)
	l.run(transfer(file, 40000, 1))
	dec2, _ := NewDecoder(Config{})
	l.dec = dec2 // restarted; no hello: the encoder learns from the first NAK
	l.run(transfer(file, 40001, 1))
	if l.dec.Stats.Missing.Load() == 0 || l.enc.Stats.Resets.Load() == 0 {
		t.Errorf("restart: %d missing, %d encoder resets; want both > 0", l.dec.Stats.Missing.Load(), l.enc.Stats.Resets.Load())
	}
	// After the reset the third fetch is encoded against the new log.
	w := l.wire
	third := transfer(file, 40002, 1)
	l.run(third)
	if share := float64(l.wire-w) / float64(wireBytes(third)); share > 0.08 {
		t.Errorf("after restart: third fetch carried %.1f%%", 100*share)
	}
	// An encoder restart: the decoder empties its log on the new epoch.
	enc2, _ := NewEncoder(Config{})
	l.enc = enc2
	l.enc.HandleControl(l.dec.Hello(macA, macB))
	l.run(transfer(file, 40003, 1))
	l.run(transfer(file, 40004, 1))
	if l.dec.Stats.Resets.Load() == 0 {
		t.Error("decoder did not reset its log on the encoder's new epoch")
	}
}

func TestPassThrough(t *testing.T) {
	enc, _ := NewEncoder(Config{})
	dec, _ := NewDecoder(Config{})
	small := tcpFrame([4]byte{1, 2, 3, 4}, [4]byte{5, 6, 7, 8}, 1, 2, 3, []byte("short"))
	arp := make([]byte, 60)
	binary.BigEndian.PutUint16(arp[12:], 0x0806)
	for _, f := range [][]byte{small, arp, {1, 2, 3}} {
		res, enc2 := enc.Encode(f, nil)
		if enc2 || !bytes.Equal(res, f) {
			t.Errorf("frame %x changed", f)
		}
		res, v, err := dec.Receive(f, nil)
		if v != Plain || err != nil || !bytes.Equal(res, f) {
			t.Errorf("decoder: %v %v", v, err)
		}
	}
}

func TestMalformedEncoded(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	l := newLink(t, 0, 0)
	file := randomBytes(r, 64<<10)
	l.run(transfer(file, 1, 1))
	enc, ok := l.enc.Encode(transfer(file, 2, 1)[3], nil)
	if !ok {
		t.Fatal("second copy not encoded")
	}
	for i := 14; i < len(enc); i++ {
		if i >= 14+4 && i < 14+8 {
			continue // the encoder's epoch: not covered by the CRC (below)
		}
		for _, x := range []byte{0x01, 0x80, 0xff} {
			bad := append([]byte(nil), enc...)
			bad[i] ^= x
			res, v, err := l.dec.Receive(bad, nil)
			if v == Restored {
				// Only a change the CRC does not cover may pass: none.
				t.Fatalf("byte %d ^ %#x: restored %d bytes", i, x, len(res))
			}
			if v == Dropped && err == nil {
				t.Fatal("dropped without an error")
			}
		}
	}
	for n := 14; n < len(enc); n++ {
		if _, v, _ := l.dec.Receive(enc[:n], nil); v == Restored {
			t.Fatalf("truncated to %d: restored", n)
		}
	}
	if l.dec.Stats.Resets.Load() != 0 {
		t.Error("a malformed frame reset the decoder's log")
	}
	// The intact frame still restores: nothing above changed the log.
	if _, v, err := l.dec.Receive(enc, nil); v != Restored {
		t.Fatalf("intact frame after the malformed ones: %v %v", v, err)
	}
	// Another epoch restores the same bytes (and, being new, resets the log).
	other := append([]byte(nil), enc...)
	other[14+4] ^= 0x55
	res, v, err := l.dec.Receive(other, nil)
	if v != Restored || !bytes.Equal(res, transfer(file, 2, 1)[3]) || l.dec.Stats.Resets.Load() != 1 {
		t.Fatalf("new epoch: %v %v, resets %d", v, err, l.dec.Stats.Resets.Load())
	}
}

// segments cuts data into TCP segments of the given sizes in turn.
func segments(data []byte, sport uint16, seq uint32, sizes ...int) [][]byte {
	var frames [][]byte
	for off, k := 0, 0; off < len(data); k++ {
		end := min(off+sizes[k%len(sizes)], len(data))
		frames = append(frames, tcpFrame([4]byte{10, 0, 0, 2}, [4]byte{10, 0, 0, 1}, 80, sport, seq+uint32(off), data[off:end]))
		off = end
	}
	return frames
}

// TestResegmented: the same bytes sent again with other segment
// boundaries (as TCP cuts a stream differently each time): a new segment
// spans two logged ones, and the match continues from one into the next
// (entry.prev, entry.next), so the second transfer still carries at most
// 8% of its bytes.
func TestResegmented(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	file := randomBytes(r, 1<<20)
	l := newLink(t, 0, 0)
	l.run(segments(file, 40000, 1, 1448))
	w1 := l.wire
	second := append(segments(file[:700], 40001, 99, 700), segments(file[700:], 40001, 799, 1448)...)
	l.run(second)
	share := float64(l.wire-w1) / float64(wireBytes(second))
	t.Logf("resegmented second transfer: %.2f%% of its bytes; %d references in %d encoded frames", 100*share, l.enc.Stats.Refs.Load(), l.enc.Stats.Encoded.Load())
	if share > 0.08 {
		t.Errorf("resegmented second transfer carried %.1f%% of its bytes, want at most 8%%", 100*share)
	}
}

// treeVersion builds a tar-like stream of files whose bytes recur a lot:
// each file a 512-byte header (its name, then fields every header shares,
// with a date stamp that changes between versions) and lines, most of
// them drawn from a few dozen lines every file uses, the rest its own.
func treeVersion(seed uint64, stamp string, files int) []byte {
	r := rand.New(rand.NewPCG(seed, 99))
	common := make([]string, 40)
	for i := range common {
		common[i] = fmt.Sprintf("#include <linux/common-header-%02d.h> /* shared by every file */\n", i)
	}
	var b bytes.Buffer
	for f := 0; f < files; f++ {
		h := make([]byte, 512)
		copy(h, fmt.Sprintf("tree/dir%03d/file%05d.c", f/20, f))
		copy(h[100:], "0000644\x000000000\x000000000\x00")
		copy(h[136:], stamp)
		copy(h[257:], "ustar  \x00root")
		b.Write(h)
		lines := 20 + r.IntN(60)
		for l := 0; l < lines; l++ {
			if r.IntN(3) > 0 {
				b.WriteString(common[r.IntN(len(common))])
			} else {
				fmt.Fprintf(&b, "\tfile_%d_value_%d = compute(%d, %d);\n", f, l, r.IntN(1000), r.IntN(1000))
			}
		}
	}
	return b.Bytes()
}

// TestRecurringBytes: a second version of a tree whose files share most of
// their lines and whose headers all changed a date saves as much as a
// file sent again: the encoder finds each payload's copy through the
// flow's last match (hints.go), not at the index's latest location of the
// recurring bytes, and a run found later replaces the short ones before
// it (dropRefsFrom).
func TestRecurringBytes(t *testing.T) {
	v1 := treeVersion(1, "15273414464", 600)
	v2 := treeVersion(1, "15276554104", 600)
	l := newLink(t, 0, 0)
	l.run(transfer(v1, 40000, 1))
	w1 := l.wire
	second := transfer(v2, 40001, 1)
	l.run(second)
	saved := 1 - float64(l.wire-w1)/float64(wireBytes(second))
	t.Logf("%d bytes, second version %.1f%% saved; %d references in %d encoded frames", len(v2), 100*saved, l.enc.Stats.Refs.Load(), l.enc.Stats.Encoded.Load())
	if saved < 0.88 {
		t.Errorf("second version: %.1f%% saved, want >= 88%%", 100*saved)
	}
}
