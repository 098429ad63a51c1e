package pipeline

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
)

// gsoFrame is an IPv4 TCP frame of payload bytes left to GSO (segments of
// 1,448 bytes, the checksum partial), as a veth hands it to AF_PACKET.
func gsoFrame(payload []byte) ([]byte, afpacket.Offload) {
	f := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00}
	ip := []byte{0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
	binary.BigEndian.PutUint16(ip[2:], uint16(40+len(payload)))
	f = append(f, ip...)
	th := make([]byte, 20)
	binary.BigEndian.PutUint16(th[0:], 40000)
	binary.BigEndian.PutUint16(th[2:], 5201)
	binary.BigEndian.PutUint32(th[4:], 1000)
	th[12], th[13] = 5<<4, 0x18
	f = append(f, th...)
	f = append(f, payload...)
	return f, afpacket.Offload{NeedsCsum: true, CsumStart: 34, CsumOffset: 16, GSOType: afpacket.GSOTCPv4, GSOSize: 1448}
}

// TestBatcherGSO: a GSO frame's segments in the batch are AppendFinished's
// of the frame, the ring's copy is left as it was, and the arena holds the
// segments only (no copy of the whole frame before them); a tagged one
// still gets its tag back.
func TestBatcherGSO(t *testing.T) {
	payload := make([]byte, 3*1448+100)
	for i := range payload {
		payload[i] = byte(i * 13)
	}
	f, o := gsoFrame(payload)
	ring := append([]byte(nil), f...)
	_, want, err := afpacket.AppendFinished(nil, nil, f, o)
	if err != nil {
		t.Fatal(err)
	}
	b := newBatcher(8)
	now := time.Now()
	if !b.add(&afpacket.Frame{Data: ring, Len: len(ring), CsumNotReady: true, Offload: o, Time: now}, now) {
		t.Fatal("GSO frame refused")
	}
	if !bytes.Equal(ring, f) {
		t.Error("the ring's copy was changed")
	}
	if len(b.frames) != len(want) || len(b.rxAt) != len(want) {
		t.Fatalf("%d frames (%d times), want %d", len(b.frames), len(b.rxAt), len(want))
	}
	total := 0
	for i := range want {
		if !bytes.Equal(b.frames[i], want[i]) {
			t.Fatalf("segment %d differs from AppendFinished's", i)
		}
		total += len(want[i])
	}
	if len(b.arena) != total {
		t.Errorf("arena holds %d bytes for %d of segments: a copy of the whole frame too", len(b.arena), total)
	}

	// Tagged: the tag is put back, then the frame cut.
	b.reset()
	if !b.add(&afpacket.Frame{Data: ring, Len: len(ring), CsumNotReady: true, Offload: o, Tagged: true, TPID: 0x8100, TCI: 5}, now) {
		t.Fatal("tagged GSO frame refused")
	}
	if len(b.frames) != len(want) {
		t.Fatalf("tagged: %d frames, want %d", len(b.frames), len(want))
	}
	for i, s := range b.frames {
		if binary.BigEndian.Uint16(s[12:]) != 0x8100 || !bytes.Equal(s[16:], want[i][12:]) {
			t.Fatalf("tagged segment %d: not the untagged one with its tag", i)
		}
	}

	// A frame that cannot be cut is refused and leaves the batch empty.
	b.reset()
	bad := o
	bad.CsumOffset = 6
	if b.add(&afpacket.Frame{Data: ring, Len: len(ring), CsumNotReady: true, Offload: bad}, now) || len(b.frames) != 0 || !b.oldest.IsZero() {
		t.Error("a GSO frame that cannot be cut was taken")
	}
}

// BenchmarkBatcherGSO adds 64 KiB GSO frames (45 segments each) to a
// batch, as RunPort does with what a veth hands over from a TCP sender;
// ns/op is per frame added.
func BenchmarkBatcherGSO(b *testing.B) {
	payload := make([]byte, 45*1448)
	f, o := gsoFrame(payload)
	bt := newBatcher(256)
	now := time.Now()
	b.SetBytes(int64(len(f)))
	for i := 0; i < b.N; i++ {
		if len(bt.frames) > 200 {
			bt.reset()
		}
		if !bt.add(&afpacket.Frame{Data: f, Len: len(f), CsumNotReady: true, Offload: o}, now) {
			b.Fatal("refused")
		}
	}
}
