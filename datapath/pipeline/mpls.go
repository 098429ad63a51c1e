package pipeline

import (
	"encoding/binary"

	"github.com/gswitch/gswitch/tables/flow"
)

// This file holds the MPLS actions (OpenFlow 1.3 §5.12, §A.2.5): push and
// pop of a label stack entry (LSE), the MPLS TTL, the TTL copies between
// the top LSE and what is under it, and set-field on the top LSE. An LSE
// is label(20) tc(3) bos(1) ttl(8), big-endian; the stack starts after
// the VLAN tags (l.l3 when eth_type is MPLS).

const mplsLSE = 4

func isMPLS(t uint16) bool { return t == flow.EthTypeMPLS || t == flow.EthTypeMPLSMcast }

// topLSE returns the offset of the top label stack entry, or -1.
func topLSE(frame []byte, l *layout) int {
	if !isMPLS(l.ethType) || l.l3+mplsLSE > len(frame) {
		return -1
	}
	return l.l3
}

// ipTTLOffset returns the offset of the TTL (IPv4) or hop limit (IPv6) of
// an IP header at off, guessed from its version nibble as under an MPLS
// stack, and whether it is IPv4; -1 when there is none.
func ipTTLOffset(frame []byte, off int) (int, bool) {
	if off >= len(frame) {
		return -1, false
	}
	switch frame[off] >> 4 {
	case 4:
		if off+20 <= len(frame) {
			return off + 8, true
		}
	case 6:
		if off+40 <= len(frame) {
			return off + 7, false
		}
	}
	return -1, false
}

// setIPTTLAt writes an IP TTL at off, fixing the IPv4 checksum of the
// header at hdr when v4.
func setIPTTLAt(frame []byte, hdr, off int, v4 bool, ttl uint8) {
	if !v4 {
		frame[off] = ttl
		return
	}
	replace16(frame, off, uint16(ttl)<<8|uint16(frame[off+1]), hdr+10)
}

// pushMPLS returns the frame with a new top LSE and eth_type ethType. The
// LSE copies the old top one (bos 0) or, on a frame without a stack, is
// label 0, tc 0, bos 1 and the IP TTL (0 when not IP) (§5.12, Table 6).
func pushMPLS(frame []byte, ethType uint16) ([]byte, bool) {
	l, ok := parseLayout(frame)
	if !ok || l.l3 > len(frame) {
		return frame, false
	}
	var lse uint32
	if top := topLSE(frame, &l); top >= 0 {
		lse = binary.BigEndian.Uint32(frame[top:]) &^ 0x100
	} else {
		lse = 0x100
		var ttl uint8
		switch {
		case l.ethType == etherIPv4 && l.l3+20 <= len(frame):
			ttl = frame[l.l3+8]
		case l.ethType == etherIPv6 && l.l3+40 <= len(frame):
			ttl = frame[l.l3+7]
		}
		lse |= uint32(ttl)
	}
	out := make([]byte, len(frame)+mplsLSE)
	copy(out, frame[:l.l3-2])
	binary.BigEndian.PutUint16(out[l.l3-2:], ethType)
	binary.BigEndian.PutUint32(out[l.l3:], lse)
	copy(out[l.l3+mplsLSE:], frame[l.l3:])
	return out, true
}

// popMPLS removes the top LSE in place, eth_type becoming ethType.
func popMPLS(frame []byte, ethType uint16) ([]byte, bool) {
	l, ok := parseLayout(frame)
	if !ok {
		return frame, false
	}
	top := topLSE(frame, &l)
	if top < 0 {
		return frame, false
	}
	binary.BigEndian.PutUint16(frame[top-2:], ethType)
	copy(frame[top:], frame[top+mplsLSE:])
	return frame[:len(frame)-mplsLSE], true
}

// setMPLSTTL applies set_mpls_ttl (dec false) or dec_mpls_ttl (dec true)
// to the top LSE. It reports whether the frame has one and whether the
// packet may go on (a TTL that would reach 0 may not).
func setMPLSTTL(frame []byte, dec bool, ttl uint8) (ok, alive bool) {
	l, ok := parseLayout(frame)
	if !ok {
		return false, true
	}
	top := topLSE(frame, &l)
	if top < 0 {
		return false, true
	}
	if dec {
		if frame[top+3] <= 1 {
			return true, false
		}
		ttl = frame[top+3] - 1
	}
	frame[top+3] = ttl
	return true, true
}

// copyTTL copies the TTL of the top LSE inwards (in: to the next LSE or,
// at the bottom of the stack, to the IP header under it) or outwards (to
// the top LSE from the one under it or the IP header). OpenFlow 1.3 also
// defines the copies between IP headers of IP-in-IP; those are not done.
func copyTTL(frame []byte, in bool) bool {
	l, ok := parseLayout(frame)
	if !ok {
		return false
	}
	top := topLSE(frame, &l)
	if top < 0 {
		return false
	}
	next := top + mplsLSE
	if frame[top+2]&1 == 0 { // not bottom of stack: the next LSE
		if next+mplsLSE > len(frame) {
			return false
		}
		if in {
			frame[next+3] = frame[top+3]
		} else {
			frame[top+3] = frame[next+3]
		}
		return true
	}
	off, v4 := ipTTLOffset(frame, next)
	if off < 0 {
		return false
	}
	if in {
		setIPTTLAt(frame, next, off, v4, frame[top+3])
	} else {
		frame[top+3] = frame[off]
	}
	return true
}

// setMPLSField writes mpls_label, mpls_tc or mpls_bos (v: the field's
// bytes in tables/flow's width) into the top LSE.
func setMPLSField(frame []byte, l *layout, f flow.Field, v []byte) bool {
	top := topLSE(frame, l)
	if top < 0 || len(v) == 0 || len(v) > 4 {
		return false
	}
	var x uint32
	for _, b := range v {
		x = x<<8 | uint32(b)
	}
	lse := binary.BigEndian.Uint32(frame[top:])
	switch f {
	case flow.FieldMPLSLabel:
		lse = lse&0xfff | (x&0xfffff)<<12
	case flow.FieldMPLSTC:
		lse = lse&^(7<<9) | (x&7)<<9
	case flow.FieldMPLSBOS:
		lse = lse&^0x100 | (x&1)<<8
	default:
		return false
	}
	binary.BigEndian.PutUint32(frame[top:], lse)
	return true
}
