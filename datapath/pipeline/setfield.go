package pipeline

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/gswitch/gswitch/tables/flow"
)

// This file holds set-field on eth_type, ARP, ICMPv4, ICMPv6, the IPv6 flow label,
// neighbour discovery and the SCTP ports. Offsets are checked before use; checksums are
// updated incrementally (replace16).

const (
	etherARP     = 0x0806
	protoICMP    = 1
	protoICMPv6  = 58
	arpEthIPv4   = 28 // an Ethernet/IPv4 ARP packet
	ndTargetOff  = 8  // the target address in an NS/NA message
	ndOptionsOff = 24 // the first option of an NS/NA message
)

// arpOffsets gives each ARP field's offset and length within the packet.
var arpOffsets = map[flow.Field][2]int{
	flow.FieldARPOp: {6, 2}, flow.FieldARPSHA: {8, 6}, flow.FieldARPSPA: {14, 4},
	flow.FieldARPTHA: {18, 6}, flow.FieldARPTPA: {24, 4},
}

func setARP(frame []byte, l *layout, f flow.Field, v []byte) bool {
	o := arpOffsets[f]
	if l.ethType != etherARP || l.l3+arpEthIPv4 > len(frame) || len(v) != o[1] {
		return false
	}
	copy(frame[l.l3+o[0]:], v)
	return true
}

// icmpHeader returns the offset of the ICMPv4 (v6 false) or ICMPv6 header
// with at least 4 bytes, or -1.
func icmpHeader(frame []byte, l *layout, v6 bool) int {
	want, et := uint8(protoICMP), uint16(etherIPv4)
	if v6 {
		want, et = protoICMPv6, etherIPv6
	}
	if l.ethType != et || l.l4 == 0 || l.proto != want || l.l4+4 > len(frame) {
		return -1
	}
	return l.l4
}

// setICMP writes an ICMPv4 or ICMPv6 type or code, fixing the checksum.
func setICMP(frame []byte, l *layout, f flow.Field, v []byte) bool {
	v6 := f == flow.FieldICMPv6Type || f == flow.FieldICMPv6Code
	off := icmpHeader(frame, l, v6)
	if off < 0 || len(v) != 1 {
		return false
	}
	typ, code := frame[off], frame[off+1]
	if f == flow.FieldICMPv4Type || f == flow.FieldICMPv6Type {
		typ = v[0]
	} else {
		code = v[0]
	}
	replace16(frame, off, uint16(typ)<<8|uint16(code), off+2)
	return true
}

// setFlowLabel writes the 20-bit IPv6 flow label (v: 3 bytes), which no
// checksum covers.
func setFlowLabel(frame []byte, l *layout, v []byte) bool {
	if l.ethType != etherIPv6 || l.l3+40 > len(frame) || len(v) != 3 {
		return false
	}
	label := uint32(v[0])<<16 | uint32(v[1])<<8 | uint32(v[2])
	w := binary.BigEndian.Uint32(frame[l.l3:])
	binary.BigEndian.PutUint32(frame[l.l3:], w&^0xfffff|label&0xfffff)
	return true
}

// ndMessage returns the offset of an ICMPv6 neighbour solicitation (135)
// or advertisement (136) with its fixed part, or -1.
func ndMessage(frame []byte, l *layout) int {
	off := icmpHeader(frame, l, true)
	if off < 0 || (frame[off] != 135 && frame[off] != 136) || off+ndOptionsOff > len(frame) {
		return -1
	}
	return off
}

// replaceBytes writes v (an even number of bytes) at frame[off:], fixing
// the checksum at sum for every 16-bit word.
func replaceBytes(frame []byte, off int, v []byte, sum int) {
	for i := 0; i+1 < len(v); i += 2 {
		replace16(frame, off+i, be16(v[i:]), sum)
	}
}

func setNDTarget(frame []byte, l *layout, v []byte) bool {
	off := ndMessage(frame, l)
	if off < 0 || len(v) != 16 {
		return false
	}
	replaceBytes(frame, off+ndTargetOff, v, off+2)
	return true
}

// setNDLL writes the link-layer address of the first source (sll, in a
// solicitation) or target (tll, in an advertisement) link-layer address
// option.
func setNDLL(frame []byte, l *layout, f flow.Field, v []byte) bool {
	off := ndMessage(frame, l)
	if off < 0 || len(v) != 6 {
		return false
	}
	typ, opt := uint8(135), uint8(1)
	if f == flow.FieldIPv6NDTLL {
		typ, opt = 136, 2
	}
	if frame[off] != typ {
		return false
	}
	for o := off + ndOptionsOff; o+2 <= len(frame); {
		n := int(frame[o+1]) * 8
		if n == 0 || o+n > len(frame) {
			return false
		}
		if frame[o] == opt && n == 8 {
			replaceBytes(frame, o+2, v, off+2)
			return true
		}
		o += n
	}
	return false
}

// setIPProto writes ip_proto: the IPv4 protocol (its header checksum
// fixed) or the IPv6 next header, and fixes the TCP/UDP/ICMPv6 checksum,
// whose pseudo-header holds it. The transport header is not rewritten.
func setIPProto(frame []byte, l *layout, v []byte) bool {
	if len(v) != 1 {
		return false
	}
	sum := l.l4Sum(frame)
	switch {
	case l.ethType == etherIPv4 && l.l3+20 <= len(frame):
		replace16(frame, l.l3+8, uint16(frame[l.l3+8])<<8|uint16(v[0]), l.l3+10)
	case l.ethType == etherIPv6 && l.l3+40 <= len(frame):
		frame[l.l3+6] = v[0]
	default:
		return false
	}
	if sum >= 0 {
		binary.BigEndian.PutUint16(frame[sum:], csumAdjust(be16(frame[sum:]), uint16(l.proto), uint16(v[0])))
	}
	return true
}

// sctpHdr is the SCTP common header: ports, verification tag, checksum.
const sctpHdr = 12

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sctpPacket returns the SCTP packet of frame (common header and chunks,
// to the end of the IP payload; Ethernet padding excluded), or nil.
func sctpPacket(frame []byte, l *layout) []byte {
	if l.l4 == 0 || l.proto != protoSCTP {
		return nil
	}
	var end int
	switch l.ethType {
	case etherIPv4:
		end = l.l3 + int(be16(frame[l.l3+2:]))
	case etherIPv6:
		end = l.l3 + 40 + int(be16(frame[l.l3+4:]))
	default:
		return nil
	}
	if end > len(frame) || end < l.l4+sctpHdr {
		return nil
	}
	return frame[l.l4:end]
}

// sctpCRC is the CRC32c of an SCTP packet computed with a zero checksum
// field (RFC 9260 appendix A), as the header carries it (little-endian
// bytes of the CRC).
func sctpCRC(p []byte) uint32 {
	var zero [4]byte
	c := crc32.Update(0, castagnoli, p[:8])
	c = crc32.Update(c, castagnoli, zero[:])
	return crc32.Update(c, castagnoli, p[sctpHdr:])
}

// setSCTPPort writes sctp_src or sctp_dst and recomputes the CRC32c
// checksum over the SCTP packet. A checksum that was wrong stays wrong by
// the same difference (as Open vSwitch and Linux do): the switch carries
// a corrupted packet's error through instead of making it look valid.
func setSCTPPort(frame []byte, l *layout, f flow.Field, v []byte) bool {
	p := sctpPacket(frame, l)
	if p == nil || len(v) != 2 {
		return false
	}
	old := binary.LittleEndian.Uint32(p[8:])
	oldCorrect := sctpCRC(p)
	off := 0
	if f == flow.FieldSCTPDst {
		off = 2
	}
	copy(p[off:off+2], v)
	binary.LittleEndian.PutUint32(p[8:], old^oldCorrect^sctpCRC(p))
	return true
}

// setEthType writes eth_type: the Ethernet type after the VLAN tags (the
// one a match's eth_type sees), as Open vSwitch's set_field:dl_type does.
// Nothing else changes: the headers behind it are not converted, so the
// frame is parsed again (by the new type) before any later lookup, and a
// later set_field on a field of the new type edits those bytes as such.
// No checksum covers it. OpenFlow 1.3.5 §7.2.5 lists eth_type among the
// fields set-field may write (every header field but in_port, in_phy_port
// and ipv6_exthdr); its prerequisite checks are the codec's.
func setEthType(frame []byte, l *layout, v []byte) bool {
	if len(v) != 2 || l.l3 < 14 || l.l3 > len(frame) {
		return false
	}
	copy(frame[l.l3-2:l.l3], v)
	return true
}
