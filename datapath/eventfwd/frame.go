package eventfwd

import "encoding/binary"

// Header sizes and type codes the frame parser reads.
const (
	ethHeader   = 14
	vlanTag     = 4
	etherIPv4   = 0x0800
	etherIPv6   = 0x86dd
	etherVLAN   = 0x8100
	etherQinQ   = 0x88a8
	ipv4Min     = 20
	ipv6Header  = 40
	udpHeader   = 8
	protoUDP    = 17
	maxVLANTags = 2
)

// UDPPayload returns the payload of frame when it is an Ethernet frame
// (with up to two 802.1Q/802.1ad tags) carrying an unfragmented IPv4 or
// IPv6 UDP datagram to destination port dport, and ok; otherwise ok is
// false (the frame is not an event packet). The payload is bounded by the
// UDP length, which must fit the IP payload (Ethernet padding is not part
// of it). IPv6 extension headers hop-by-hop, routing and destination
// options are skipped; a fragment header, an IPv4 fragment or an IPv4
// header with options shorter than its IHL make the frame not an event
// packet. Every length is checked against the data before it is used.
func UDPPayload(frame []byte, dport uint16) (payload []byte, ok bool) {
	if len(frame) < ethHeader {
		return nil, false
	}
	off := 12
	et := binary.BigEndian.Uint16(frame[off:])
	off += 2
	for tags := 0; (et == etherVLAN || et == etherQinQ) && tags < maxVLANTags; tags++ {
		if len(frame) < off+vlanTag {
			return nil, false
		}
		et = binary.BigEndian.Uint16(frame[off+2:])
		off += vlanTag
	}
	var l4 []byte
	switch et {
	case etherIPv4:
		l4, ok = ipv4UDP(frame[off:])
	case etherIPv6:
		l4, ok = ipv6UDP(frame[off:])
	}
	if !ok || len(l4) < udpHeader || binary.BigEndian.Uint16(l4[2:]) != dport {
		return nil, false
	}
	ulen := int(binary.BigEndian.Uint16(l4[4:]))
	if ulen < udpHeader || ulen > len(l4) {
		return nil, false
	}
	return l4[udpHeader:ulen], true
}

// ipv4UDP returns the IP payload of an unfragmented IPv4 UDP packet.
func ipv4UDP(b []byte) ([]byte, bool) {
	if len(b) < ipv4Min || b[0]>>4 != 4 {
		return nil, false
	}
	ihl := int(b[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(b[2:]))
	if ihl < ipv4Min || total < ihl || total > len(b) {
		return nil, false
	}
	if frag := binary.BigEndian.Uint16(b[6:]); frag&0x3fff != 0 { // MF or an offset
		return nil, false
	}
	if b[9] != protoUDP {
		return nil, false
	}
	return b[ihl:total], true
}

// ipv6UDP returns the payload of an IPv6 packet whose upper layer is UDP,
// past hop-by-hop, routing and destination options headers.
func ipv6UDP(b []byte) ([]byte, bool) {
	if len(b) < ipv6Header || b[0]>>4 != 6 {
		return nil, false
	}
	plen := int(binary.BigEndian.Uint16(b[4:]))
	if ipv6Header+plen > len(b) {
		return nil, false
	}
	nh := b[6]
	p := b[ipv6Header : ipv6Header+plen]
	for range 8 { // a bound on the chain
		switch nh {
		case protoUDP:
			return p, true
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if len(p) < 8 {
				return nil, false
			}
			n := (int(p[1]) + 1) * 8
			if n > len(p) {
				return nil, false
			}
			nh, p = p[0], p[n:]
		default: // fragment (44), ESP, AH, anything else
			return nil, false
		}
	}
	return nil, false
}
