package re

import (
	"encoding/binary"
	"hash/crc32"
)

// EtherType marks encoded frames and control frames on the link.
const EtherType = 0x88b5

const (
	magic      = 'G'
	kindData   = 0x11
	kindAck    = 0x12
	kindNak    = 0x13
	shimLen    = 18
	refLen     = 14
	ctrlHdrLen = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segment is where a frame's parts lie: etOff the innermost EtherType's
// offset, l3 the IP header's, pay the TCP payload's, end the IP packet's end.
type segment struct {
	etOff, l3, pay, end int
	etherType           uint16
}

// parseTCP locates the TCP payload of an Ethernet frame (at most one 802.1Q
// or 802.1ad tag; IPv4 with options, first fragments only; IPv6 whose next
// header is TCP). ok is false for anything else.
func parseTCP(f []byte) (s segment, ok bool) {
	if len(f) < 14 {
		return s, false
	}
	s.etOff = 12
	et := binary.BigEndian.Uint16(f[12:])
	if et == 0x8100 || et == 0x88a8 || et == 0x9100 {
		if len(f) < 18 {
			return s, false
		}
		s.etOff = 16
		et = binary.BigEndian.Uint16(f[16:])
	}
	s.etherType = et
	s.l3 = s.etOff + 2
	ip := f[s.l3:]
	switch et {
	case 0x0800:
		if len(ip) < 20 || ip[0]>>4 != 4 {
			return s, false
		}
		ihl := int(ip[0]&0x0f) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		if ihl < 20 || total < ihl || total > len(ip) || ip[9] != 6 {
			return s, false
		}
		if binary.BigEndian.Uint16(ip[6:])&0x3fff != 0 { // a fragment
			return s, false
		}
		s.end = s.l3 + total
		s.pay = s.l3 + ihl
	case 0x86dd:
		if len(ip) < 40 || ip[0]>>4 != 6 || ip[6] != 6 {
			return s, false
		}
		total := 40 + int(binary.BigEndian.Uint16(ip[4:]))
		if total > len(ip) {
			return s, false
		}
		s.end = s.l3 + total
		s.pay = s.l3 + 40
	default:
		return s, false
	}
	if s.end-s.pay < 20 {
		return s, false
	}
	doff := int(f[s.pay+12]>>4) * 4
	if doff < 20 || s.pay+doff > s.end {
		return s, false
	}
	s.pay += doff
	return s, true
}

// payloadID names a payload the same way on both sides: the CRC-32C of the
// payload, and of the addresses, ports and sequence number.
func payloadID(f []byte, s segment) uint64 {
	return payloadIDCRC(f, s, checksum32c(f[s.pay:s.end]))
}

// payloadIDCRC is payloadID with the payload's CRC-32C computed already.
func payloadIDCRC(f []byte, s segment, payCRC uint32) uint64 {
	var flow uint32
	if s.etherType == 0x0800 {
		if ihl := int(f[s.l3]&0x0f) * 4; ihl == 20 {
			// Addresses, ports and sequence number lie together: one pass.
			flow = crc32.Update(0, castagnoli, f[s.l3+12:s.l3+28])
		} else {
			flow = crc32.Update(0, castagnoli, f[s.l3+12:s.l3+20])        // addresses
			flow = crc32.Update(flow, castagnoli, f[s.l3+ihl:s.l3+ihl+8]) // ports, seq
		}
	} else {
		flow = crc32.Update(0, castagnoli, f[s.l3+8:s.l3+48])
	}
	return uint64(payCRC)<<32 | uint64(flow)
}
