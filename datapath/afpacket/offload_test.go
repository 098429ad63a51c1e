package afpacket

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// tcpFrame builds an Ethernet/IPv4 (or IPv6)/TCP frame carrying payload,
// its TCP checksum left partial as a sending stack leaves it
// (CHECKSUM_PARTIAL: the pseudo-header sum), and its offload state.
func tcpFrame(v6, tagged bool, payload []byte, flags byte) ([]byte, Offload) {
	f := []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1}
	if tagged {
		f = append(f, 0x81, 0x00, 0x00, 0x05)
	}
	l3 := len(f) + 2
	var ps uint32
	tcpLen := 20 + len(payload)
	if v6 {
		f = append(f, 0x86, 0xdd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		binary.BigEndian.PutUint16(ip[4:], uint16(tcpLen))
		ip[6], ip[7] = 6, 64
		ip[8], ip[23] = 0xfd, 1
		ip[24], ip[39] = 0xfd, 2
		f = append(f, ip...)
		ps = sum(0, ip[8:40])
	} else {
		f = append(f, 0x08, 0x00)
		ip := []byte{0x45, 0, 0, 0, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2}
		binary.BigEndian.PutUint16(ip[2:], uint16(20+tcpLen))
		binary.BigEndian.PutUint16(ip[10:], ^fold(sum(0, ip)))
		f = append(f, ip...)
		ps = sum(0, ip[12:20])
	}
	l4 := len(f)
	th := make([]byte, 20)
	binary.BigEndian.PutUint16(th[0:], 40000)
	binary.BigEndian.PutUint16(th[2:], 5201)
	binary.BigEndian.PutUint32(th[4:], 0xfffff000) // wraps during segmentation
	th[12], th[13] = 5<<4, flags
	binary.BigEndian.PutUint16(th[16:], fold(ps+6+uint32(tcpLen)))
	f = append(f, th...)
	f = append(f, payload...)
	_ = l3
	return f, Offload{NeedsCsum: true, CsumStart: l4, CsumOffset: 16}
}

// verifyTCP checks a frame's IP and TCP checksums and lengths, and returns
// its sequence number, flags and payload.
func verifyTCP(t *testing.T, f []byte, v6 bool, l4 int) (uint32, byte, []byte) {
	t.Helper()
	l3, _, ok := networkHeader(f)
	if !ok {
		t.Fatalf("no IP header")
	}
	var ps uint32
	if v6 {
		if got := int(binary.BigEndian.Uint16(f[l3+4:])); got != len(f)-l3-40 {
			t.Fatalf("IPv6 payload length %d, want %d", got, len(f)-l3-40)
		}
		ps = sum(0, f[l3+8:l3+40])
	} else {
		if got := int(binary.BigEndian.Uint16(f[l3+2:])); got != len(f)-l3 {
			t.Fatalf("IPv4 total length %d, want %d", got, len(f)-l3)
		}
		if c := fold(sum(0, f[l3:l3+20])); c != 0xffff {
			t.Fatalf("IPv4 header checksum does not verify: %#x", c)
		}
		ps = sum(0, f[l3+12:l3+20])
	}
	if c := fold(sum(ps+6+uint32(len(f)-l4), f[l4:])); c != 0xffff {
		t.Fatalf("TCP checksum does not verify: %#x", c)
	}
	return binary.BigEndian.Uint32(f[l4+4:]), f[l4+13], f[l4+20:]
}

func TestFinishChecksum(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		payload := bytes.Repeat([]byte("gswitch!"), 37)[:293] // odd length
		f, o := tcpFrame(v6, false, payload, 0x18)
		if !o.Pending() {
			t.Fatal("a partial checksum is not pending")
		}
		if err := FinishChecksum(f, o); err != nil {
			t.Fatal(err)
		}
		verifyTCP(t, f, v6, o.CsumStart)
		// The result is the checksum the stack would have computed.
		g, _ := tcpFrame(v6, false, payload, 0x18)
		g[o.CsumStart+16], g[o.CsumStart+17] = 0, 0
		ps := sum(0, g[o.CsumStart-8:o.CsumStart])
		if v6 {
			ps = sum(0, g[o.CsumStart-32:o.CsumStart])
		}
		want := ^fold(sum(ps+6+uint32(len(g)-o.CsumStart), g[o.CsumStart:]))
		if got := binary.BigEndian.Uint16(f[o.CsumStart+16:]); got != want {
			t.Fatalf("v6=%v: checksum %#x, want %#x", v6, got, want)
		}
	}
	f, o := tcpFrame(false, false, nil, 0)
	o.CsumOffset = len(f)
	if err := FinishChecksum(f, o); err == nil {
		t.Fatal("an offset past the frame was accepted")
	}
}

func TestSegmentTCP(t *testing.T) {
	payload := make([]byte, 4000)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for _, tc := range []struct{ v6, tagged bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
		f, o := tcpFrame(tc.v6, tc.tagged, payload, 0x80|0x18|0x01) // CWR, PSH, ACK, FIN
		o.GSOType, o.GSOSize = GSOTCPv4, 1448
		if tc.v6 {
			o.GSOType = GSOTCPv6
		}
		orig := append([]byte(nil), f...)
		arena := make([]byte, 0, 100) // forces growth
		arena, segs, err := AppendFinished(arena, nil, f, o)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(f, orig) {
			t.Fatal("the input frame was changed")
		}
		if len(segs) != 3 {
			t.Fatalf("%d segments, want 3", len(segs))
		}
		var got []byte
		for i, s := range segs {
			if len(s) > o.CsumStart+20+1448 {
				t.Fatalf("segment %d is %d bytes", i, len(s))
			}
			seq, flags, p := verifyTCP(t, s, tc.v6, o.CsumStart)
			if want := 0xfffff000 + uint32(len(got)); seq != want {
				t.Fatalf("segment %d: seq %#x, want %#x", i, seq, want)
			}
			wantFlags := byte(0x10)
			if i == 0 {
				wantFlags |= 0x80
			}
			if i == 2 {
				wantFlags |= 0x08 | 0x01
			}
			if flags != wantFlags {
				t.Fatalf("segment %d: flags %#x, want %#x", i, flags, wantFlags)
			}
			if !tc.v6 {
				l3, _, _ := networkHeader(s)
				if id := binary.BigEndian.Uint16(s[l3+4:]); id != 0x1234+uint16(i) {
					t.Fatalf("segment %d: IP id %#x", i, id)
				}
			}
			got = append(got, p...)
		}
		if !bytes.Equal(got, payload) {
			t.Fatal("the segments do not carry the payload in order")
		}
		_ = arena
	}
	f, o := tcpFrame(false, false, payload, 0x10)
	o.GSOType, o.GSOSize = GSOUDP, 1000
	if _, _, err := AppendFinished(nil, nil, f, o); err == nil {
		t.Fatal("UFO was accepted")
	}
}
