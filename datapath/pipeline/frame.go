package pipeline

import (
	"encoding/binary"

	"github.com/gswitch/gswitch/tables/flow"
)

// This file edits frames in place for the set-field, VLAN and TTL actions.
// Every offset is checked against the frame before it is used: a frame
// whose headers do not hold what an action needs is left alone (the action
// is counted as unsupported for that packet by the caller).

const (
	ethHdr      = 14
	etherIPv4   = 0x0800
	etherIPv6   = 0x86dd
	etherVLAN   = 0x8100
	etherQinQ   = 0x88a8
	protoTCP    = 6
	protoUDP    = 17
	protoSCTP   = 132
	vlanTagSize = 4
)

// layout is where a frame's headers are: l3 is the offset of the network
// header (after every VLAN tag), l4 that of the transport header (0: none
// that can be edited, e.g. a later IPv4 fragment).
type layout struct {
	ethType uint16
	tagged  bool // an outer 802.1Q/802.1ad tag at offset 12
	l3, l4  int
	proto   uint8
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }

// parseLayout finds the headers of frame; ok is false for a frame shorter
// than an Ethernet header.
func parseLayout(frame []byte) (layout, bool) {
	if len(frame) < ethHdr {
		return layout{}, false
	}
	var l layout
	off := 12
	t := be16(frame[off:])
	l.tagged = t == etherVLAN || t == etherQinQ
	for (t == etherVLAN || t == etherQinQ) && off+6 <= len(frame) {
		off += vlanTagSize
		t = be16(frame[off:])
	}
	l.ethType, l.l3 = t, off+2
	switch t {
	case etherIPv4:
		b := frame[l.l3:]
		if len(b) < 20 || b[0]>>4 != 4 {
			return l, true
		}
		ihl := int(b[0]&0xf) * 4
		l.proto = b[9]
		if ihl >= 20 && len(b) >= ihl && be16(b[6:])&0x1fff == 0 {
			l.l4 = l.l3 + ihl
		}
	case etherIPv6:
		b := frame[l.l3:]
		if len(b) < 40 || b[0]>>4 != 6 {
			return l, true
		}
		l.proto = b[6] // extension headers are not walked: no L4 edits behind them
		if l.proto == protoTCP || l.proto == protoUDP || l.proto == protoICMPv6 || l.proto == protoSCTP {
			l.l4 = l.l3 + 40
		}
	}
	return l, true
}

// csumAdjust updates a ones'-complement checksum for a 16-bit word that
// changed from old to new (RFC 1624, eqn. 3).
func csumAdjust(sum, old, new uint16) uint16 {
	s := uint32(^sum) + uint32(^old) + uint32(new)
	s = (s & 0xffff) + s>>16
	s = (s & 0xffff) + s>>16
	return ^uint16(s)
}

// replace16 writes v at b[off:] and adjusts the checksums at the given
// offsets of frame (negative: none) for the change.
func replace16(frame []byte, off int, v uint16, sums ...int) {
	old := be16(frame[off:])
	binary.BigEndian.PutUint16(frame[off:], v)
	for _, c := range sums {
		if c >= 0 && c+2 <= len(frame) {
			binary.BigEndian.PutUint16(frame[c:], csumAdjust(be16(frame[c:]), old, v))
		}
	}
}

// l4Sum returns the offset of the transport checksum that covers the IP
// addresses (TCP and ICMPv6 always, UDP when not zero), or -1.
func (l *layout) l4Sum(frame []byte) int {
	switch {
	case l.l4 == 0:
		return -1
	case l.proto == protoTCP && l.l4+18 <= len(frame):
		return l.l4 + 16
	case l.proto == protoUDP && l.l4+8 <= len(frame) && be16(frame[l.l4+6:]) != 0:
		return l.l4 + 6
	case l.proto == protoICMPv6 && l.ethType == etherIPv6 && l.l4+4 <= len(frame):
		return l.l4 + 2
	}
	return -1
}

// setField writes an OXM field's value into the frame, fixing checksums.
// It reports whether it could.
func setField(frame []byte, f flow.Field, v []byte) bool {
	l, ok := parseLayout(frame)
	if !ok {
		return false
	}
	switch f {
	case flow.FieldEthDst:
		return len(v) == 6 && copy(frame[0:6], v) == 6
	case flow.FieldEthSrc:
		return len(v) == 6 && copy(frame[6:12], v) == 6
	case flow.FieldEthType:
		return setEthType(frame, &l, v)
	case flow.FieldVlanVID, flow.FieldVlanPCP:
		return setVLAN(frame, &l, f, v)
	case flow.FieldIPv4Src, flow.FieldIPv4Dst:
		return setIPv4Addr(frame, &l, f, v)
	case flow.FieldIPDSCP, flow.FieldIPECN:
		return setTOS(frame, &l, f, v)
	case flow.FieldTCPSrc, flow.FieldTCPDst, flow.FieldUDPSrc, flow.FieldUDPDst:
		return setL4Port(frame, &l, f, v)
	case flow.FieldSCTPSrc, flow.FieldSCTPDst:
		return setSCTPPort(frame, &l, f, v)
	case flow.FieldIPv6Src, flow.FieldIPv6Dst:
		return setIPv6Addr(frame, &l, f, v)
	case flow.FieldMPLSLabel, flow.FieldMPLSTC, flow.FieldMPLSBOS:
		return setMPLSField(frame, &l, f, v)
	case flow.FieldARPOp, flow.FieldARPSHA, flow.FieldARPSPA, flow.FieldARPTHA, flow.FieldARPTPA:
		return setARP(frame, &l, f, v)
	case flow.FieldICMPv4Type, flow.FieldICMPv4Code, flow.FieldICMPv6Type, flow.FieldICMPv6Code:
		return setICMP(frame, &l, f, v)
	case flow.FieldIPv6FLabel:
		return setFlowLabel(frame, &l, v)
	case flow.FieldIPv6NDTarget:
		return setNDTarget(frame, &l, v)
	case flow.FieldIPv6NDSLL, flow.FieldIPv6NDTLL:
		return setNDLL(frame, &l, f, v)
	case flow.FieldPBBISID:
		return setISID(frame, &l, v)
	case flow.FieldIPProto:
		return setIPProto(frame, &l, v)
	}
	return false
}

func setVLAN(frame []byte, l *layout, f flow.Field, v []byte) bool {
	if !l.tagged || len(frame) < 16 || len(v) == 0 {
		return false
	}
	tci := be16(frame[14:])
	if f == flow.FieldVlanVID {
		if len(v) != 2 {
			return false
		}
		tci = tci&^0x0fff | be16(v)&0x0fff
	} else {
		tci = tci&0x1fff | uint16(v[0]&7)<<13
	}
	binary.BigEndian.PutUint16(frame[14:], tci)
	return true
}

func setIPv4Addr(frame []byte, l *layout, f flow.Field, v []byte) bool {
	if l.ethType != etherIPv4 || len(v) != 4 || l.l3+20 > len(frame) {
		return false
	}
	off := l.l3 + 12
	if f == flow.FieldIPv4Dst {
		off = l.l3 + 16
	}
	ipSum, l4Sum := l.l3+10, l.l4Sum(frame)
	replace16(frame, off, be16(v), ipSum, l4Sum)
	replace16(frame, off+2, be16(v[2:]), ipSum, l4Sum)
	return true
}

func setIPv6Addr(frame []byte, l *layout, f flow.Field, v []byte) bool {
	if l.ethType != etherIPv6 || len(v) != 16 || l.l3+40 > len(frame) {
		return false
	}
	off := l.l3 + 8
	if f == flow.FieldIPv6Dst {
		off = l.l3 + 24
	}
	sum := l.l4Sum(frame)
	for i := 0; i < 16; i += 2 {
		replace16(frame, off+i, be16(v[i:]), sum)
	}
	return true
}

func setTOS(frame []byte, l *layout, f flow.Field, v []byte) bool {
	if len(v) != 1 {
		return false
	}
	switch {
	case l.ethType == etherIPv4 && l.l3+20 <= len(frame):
		tos := frame[l.l3+1]
		tos = newTOS(tos, f, v[0])
		replace16(frame, l.l3, uint16(frame[l.l3])<<8|uint16(tos), l.l3+10)
		return true
	case l.ethType == etherIPv6 && l.l3+40 <= len(frame):
		w := be16(frame[l.l3:]) // version(4) tc(8) flow label top 4
		tc := newTOS(uint8(w>>4), f, v[0])
		binary.BigEndian.PutUint16(frame[l.l3:], w&0xf00f|uint16(tc)<<4)
		return true
	}
	return false
}

// newTOS replaces the DSCP (upper 6 bits) or ECN (lower 2) of a TOS byte.
func newTOS(tos uint8, f flow.Field, v uint8) uint8 {
	if f == flow.FieldIPDSCP {
		return tos&3 | v<<2
	}
	return tos&^3 | v&3
}

func setL4Port(frame []byte, l *layout, f flow.Field, v []byte) bool {
	want := uint8(protoTCP)
	if f == flow.FieldUDPSrc || f == flow.FieldUDPDst {
		want = protoUDP
	}
	if l.l4 == 0 || l.proto != want || len(v) != 2 || l.l4+8 > len(frame) {
		return false
	}
	off := l.l4
	if f == flow.FieldTCPDst || f == flow.FieldUDPDst {
		off += 2
	}
	replace16(frame, off, be16(v), l.l4Sum(frame))
	return true
}

// setTTL applies set_nw_ttl (dec false) or dec_nw_ttl (dec true) to the
// IPv4 TTL or IPv6 hop limit. It reports whether the frame has one and
// whether the packet may go on (a TTL that reaches 0 may not).
func setTTL(frame []byte, dec bool, ttl uint8) (ok, alive bool) {
	l, ok := parseLayout(frame)
	if !ok {
		return false, true
	}
	var off int
	switch {
	case l.ethType == etherIPv4 && l.l3+20 <= len(frame):
		off = l.l3 + 8
	case l.ethType == etherIPv6 && l.l3+40 <= len(frame):
		off = l.l3 + 7
	default:
		return false, true
	}
	old := frame[off]
	if dec {
		if old <= 1 {
			return true, false
		}
		ttl = old - 1
	}
	if l.ethType == etherIPv4 {
		replace16(frame, off, uint16(ttl)<<8|uint16(frame[off+1]), l.l3+10)
	} else {
		frame[off] = ttl
	}
	return true, true
}

// pushVLAN returns the frame with a new outer tag of type tpid; its TCI
// is the old outer tag's, or 0 (OpenFlow 1.3 §B.6.3).
func pushVLAN(frame []byte, tpid uint16) ([]byte, bool) {
	l, ok := parseLayout(frame)
	if !ok {
		return frame, false
	}
	var tci uint16
	if l.tagged && len(frame) >= 16 {
		tci = be16(frame[14:])
	}
	out := make([]byte, len(frame)+vlanTagSize)
	copy(out, frame[:12])
	binary.BigEndian.PutUint16(out[12:], tpid)
	binary.BigEndian.PutUint16(out[14:], tci)
	copy(out[16:], frame[12:])
	return out, true
}

// popVLAN removes the outer tag in place and returns the shorter frame.
func popVLAN(frame []byte) ([]byte, bool) {
	l, ok := parseLayout(frame)
	if !ok || !l.tagged || len(frame) < ethHdr+vlanTagSize {
		return frame, false
	}
	copy(frame[12:], frame[16:])
	return frame[:len(frame)-vlanTagSize], true
}
