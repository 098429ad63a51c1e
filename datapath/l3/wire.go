package l3

import (
	"encoding/binary"
	"net/netip"
)

// This file reads and builds the frames the router speaks itself: ARP
// (RFC 826), IPv6 neighbour discovery (RFC 4861), ICMP echo replies and
// ICMP errors (RFC 792, RFC 4443). Every read is bounds-checked: a frame
// too short for what it announces is rejected with a reason, never read
// out of bounds. Frames are plain Ethernet II without VLAN tags (router
// ports are untagged).

// Ethernet types, IP protocols and message types.
const (
	ethLen        = 14
	ethIPv4       = 0x0800
	ethARP        = 0x0806
	ethIPv6       = 0x86dd
	ethVLAN       = 0x8100
	ethQinQ       = 0x88a8
	ipv4Len       = 20
	ipv6Len       = 40
	arpLen        = 28
	protoICMP     = 1
	protoTCP      = 6
	protoUDP      = 17
	protoICMP6    = 58
	protoHopByHop = 0

	arpRequest = 1
	arpReply   = 2

	icmpEchoReply     = 0
	icmpUnreachable   = 3
	icmpEchoRequest   = 8
	icmpTimeExceeded  = 11
	icmp6Unreachable  = 1
	icmp6TimeExceeded = 3
	icmp6EchoRequest  = 128
	icmp6EchoReply    = 129
	ndSolicit         = 135
	ndAdvert          = 136
	ndOptSrcLL        = 1
	ndOptTgtLL        = 2

	// icmp4ErrorMax and icmp6ErrorMax bound an ICMP error's IP packet
	// (RFC 1812 §4.3.2.3: 576 bytes; RFC 4443 §2.4(c): the IPv6 minimum MTU).
	icmp4ErrorMax = 576
	icmp6ErrorMax = 1280
)

// MAC is an Ethernet address.
type MAC [6]byte

var broadcastMAC = MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

func (m MAC) String() string {
	const hex = "0123456789abcdef"
	b := make([]byte, 0, 17)
	for i, x := range m {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, hex[x>>4], hex[x&15])
	}
	return string(b)
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }

// putEth writes an Ethernet II header at b[0:14].
func putEth(b []byte, dst, src MAC, typ uint16) {
	copy(b[0:6], dst[:])
	copy(b[6:12], src[:])
	binary.BigEndian.PutUint16(b[12:], typ)
}

// csum folds a ones'-complement sum over b into sum (not complemented).
func csum(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(be16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

func fold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// ipv4HeaderSum returns the checksum a header should carry (its checksum
// field read as zero).
func ipv4HeaderSum(h []byte) uint16 {
	s := csum(0, h[:10])
	return fold(csum(s, h[12:]))
}

// pseudo6 is the IPv6 pseudo-header sum (RFC 8200 §8.1).
func pseudo6(src, dst []byte, length int, proto uint8) uint32 {
	s := csum(0, src[:16])
	s = csum(s, dst[:16])
	return s + uint32(length>>16) + uint32(length&0xffff) + uint32(proto)
}

// csumAdjust updates a checksum for a 16-bit word changed from old to new
// (RFC 1624, eqn. 3).
func csumAdjust(sum, old, new uint16) uint16 {
	s := uint32(^sum) + uint32(^old) + uint32(new)
	s = s&0xffff + s>>16
	s = s&0xffff + s>>16
	return ^uint16(s)
}

// arpPacket is an Ethernet/IPv4 ARP message.
type arpPacket struct {
	op       uint16
	sha, tha MAC
	spa, tpa netip.Addr
}

// parseARP reads the ARP message after the Ethernet header; ok is false
// for anything but a complete Ethernet/IPv4 request or reply.
func parseARP(b []byte) (a arpPacket, ok bool) {
	if len(b) < arpLen || be16(b[0:]) != 1 || be16(b[2:]) != ethIPv4 || b[4] != 6 || b[5] != 4 {
		return a, false
	}
	a.op = be16(b[6:])
	if a.op != arpRequest && a.op != arpReply {
		return a, false
	}
	copy(a.sha[:], b[8:14])
	a.spa = netip.AddrFrom4([4]byte(b[14:18]))
	copy(a.tha[:], b[18:24])
	a.tpa = netip.AddrFrom4([4]byte(b[24:28]))
	return a, true
}

// buildARP returns an ARP frame (padded to 60 bytes) from src.
func buildARP(ethDst, src MAC, op uint16, sha MAC, spa netip.Addr, tha MAC, tpa netip.Addr) []byte {
	f := make([]byte, 60)
	putEth(f, ethDst, src, ethARP)
	b := f[ethLen:]
	binary.BigEndian.PutUint16(b[0:], 1)
	binary.BigEndian.PutUint16(b[2:], ethIPv4)
	b[4], b[5] = 6, 4
	binary.BigEndian.PutUint16(b[6:], op)
	copy(b[8:], sha[:])
	s4, t4 := spa.As4(), tpa.As4()
	copy(b[14:], s4[:])
	copy(b[18:], tha[:])
	copy(b[24:], t4[:])
	return f
}

// ipv4View is a checked IPv4 header: its length, total length and
// addresses.
type ipv4View struct {
	ihl, total int
	ttl, proto uint8
	src, dst   netip.Addr
}

// ipv4 reasons (see Reason).
func parseIPv4(b []byte) (v ipv4View, r Reason) {
	if len(b) < ipv4Len {
		return v, DropMalformed
	}
	if b[0]>>4 != 4 {
		return v, DropMalformed
	}
	v.ihl = int(b[0]&0xf) * 4
	v.total = int(be16(b[2:]))
	if v.ihl < ipv4Len || len(b) < v.ihl || v.total < v.ihl || v.total > len(b) {
		return v, DropMalformed
	}
	if fold(csum(0, b[:v.ihl])) != 0 {
		return v, DropChecksum
	}
	v.ttl, v.proto = b[8], b[9]
	v.src = netip.AddrFrom4([4]byte(b[12:16]))
	v.dst = netip.AddrFrom4([4]byte(b[16:20]))
	return v, OK
}

// ipv6View is a checked IPv6 header.
type ipv6View struct {
	payload  int // payload length (bytes after the fixed header that belong to the packet)
	next     uint8
	hops     uint8
	src, dst netip.Addr
}

func parseIPv6(b []byte) (v ipv6View, r Reason) {
	if len(b) < ipv6Len || b[0]>>4 != 6 {
		return v, DropMalformed
	}
	v.payload = int(be16(b[4:]))
	if v.payload == 0 || ipv6Len+v.payload > len(b) { // no jumbograms on a router port
		return v, DropMalformed
	}
	v.next, v.hops = b[6], b[7]
	v.src = netip.AddrFrom16([16]byte(b[8:24]))
	v.dst = netip.AddrFrom16([16]byte(b[24:40]))
	return v, OK
}

// ndMessage is a neighbour solicitation or advertisement.
type ndMessage struct {
	typ    uint8
	flags  uint8 // NA: R 0x80, S 0x40, O 0x20
	target netip.Addr
	ll     MAC // the source (NS) or target (NA) link-layer address option
	hasLL  bool
}

const (
	naRouter    = 0x80
	naSolicited = 0x40
	naOverride  = 0x20
)

// parseND checks an NS or NA (RFC 4861 §7.1.1, §7.1.2): the IPv6 header
// v of packet ip (header included), hop limit 255, ICMPv6 checksum, code
// 0, length, options of non-zero length. ok is false for anything else.
func parseND(ip []byte, v ipv6View) (m ndMessage, ok bool) {
	b := ip[ipv6Len : ipv6Len+v.payload]
	if v.next != protoICMP6 || v.hops != 255 || len(b) < 24 || b[1] != 0 || (b[0] != ndSolicit && b[0] != ndAdvert) {
		return m, false
	}
	if fold(csum(pseudo6(ip[8:], ip[24:], len(b), protoICMP6), b)) != 0 {
		return m, false
	}
	m.typ, m.flags = b[0], b[4]
	m.target = netip.AddrFrom16([16]byte(b[8:24]))
	if m.target.IsMulticast() {
		return m, false
	}
	want := uint8(ndOptSrcLL)
	if m.typ == ndAdvert {
		want = ndOptTgtLL
	}
	for opts := b[24:]; len(opts) > 0; {
		if len(opts) < 2 || opts[1] == 0 || int(opts[1])*8 > len(opts) {
			return m, false
		}
		n := int(opts[1]) * 8
		if opts[0] == want && n >= 8 {
			copy(m.ll[:], opts[2:8])
			m.hasLL = true
		}
		opts = opts[n:]
	}
	if m.typ == ndSolicit && v.src.IsUnspecified() && m.hasLL {
		return m, false // DAD probes carry no source link-layer option
	}
	return m, true
}

// solicitedNode returns the solicited-node multicast address of a and its
// Ethernet group address (RFC 4291 §2.7.1, RFC 2464 §7).
func solicitedNode(a netip.Addr) (netip.Addr, MAC) {
	t := a.As16()
	s := [16]byte{0xff, 0x02, 11: 0x01, 12: 0xff, 13: t[13], 14: t[14], 15: t[15]}
	return netip.AddrFrom16(s), multicastMAC6(netip.AddrFrom16(s))
}

// multicastMAC6 maps an IPv6 multicast address to its Ethernet address.
func multicastMAC6(a netip.Addr) MAC {
	b := a.As16()
	return MAC{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// buildIPv6 returns a frame with an IPv6 header and the given ICMPv6
// message, its checksum filled in.
func buildICMP6(ethDst, ethSrc MAC, src, dst netip.Addr, hops uint8, msg []byte) []byte {
	f := make([]byte, ethLen+ipv6Len+len(msg))
	putEth(f, ethDst, ethSrc, ethIPv6)
	ip := f[ethLen:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:], uint16(len(msg)))
	ip[6], ip[7] = protoICMP6, hops
	s, d := src.As16(), dst.As16()
	copy(ip[8:], s[:])
	copy(ip[24:], d[:])
	icmp := ip[ipv6Len:]
	copy(icmp, msg)
	icmp[2], icmp[3] = 0, 0
	binary.BigEndian.PutUint16(icmp[2:], fold(csum(pseudo6(ip[8:], ip[24:], len(icmp), protoICMP6), icmp)))
	return f
}

// buildNS returns a neighbour solicitation for target from src (our
// address on the port) with our link-layer address; ethDst is the
// neighbour's MAC for a unicast probe, or zero for the solicited-node
// multicast.
func buildNS(ethDst, ethSrc MAC, src, target netip.Addr) []byte {
	dst := target
	if ethDst == (MAC{}) {
		dst, ethDst = solicitedNode(target)
	}
	msg := make([]byte, 32)
	msg[0] = ndSolicit
	t := target.As16()
	copy(msg[8:], t[:])
	msg[24], msg[25] = ndOptSrcLL, 1
	copy(msg[26:], ethSrc[:])
	return buildICMP6(ethDst, ethSrc, src, dst, 255, msg)
}

// buildNA returns a neighbour advertisement of our address target (router
// flag set, solicited as given, override set) to dst.
func buildNA(ethDst, ethSrc MAC, target, dst netip.Addr, solicited bool) []byte {
	msg := make([]byte, 32)
	msg[0] = ndAdvert
	msg[4] = naRouter | naOverride
	if solicited {
		msg[4] |= naSolicited
	}
	t := target.As16()
	copy(msg[8:], t[:])
	msg[24], msg[25] = ndOptTgtLL, 1
	copy(msg[26:], ethSrc[:])
	return buildICMP6(ethDst, ethSrc, target, dst, 255, msg)
}

// buildIPv4 returns a frame with an IPv4 header (TTL 64, no options, DF
// clear) around payload.
func buildIPv4(ethDst, ethSrc MAC, src, dst netip.Addr, proto uint8, payload []byte) []byte {
	f := make([]byte, ethLen+ipv4Len+len(payload))
	putEth(f, ethDst, ethSrc, ethIPv4)
	ip := f[ethLen:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(ipv4Len+len(payload)))
	ip[8], ip[9] = 64, proto
	s, d := src.As4(), dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], ipv4HeaderSum(ip[:ipv4Len]))
	copy(ip[ipv4Len:], payload)
	return f
}

// buildICMP4Error returns an ICMP error (type, code) about the IPv4 packet
// orig (header included) from src to orig's source, carrying as much of
// orig as fits in 576 bytes (RFC 1812 §4.3.2.3).
func buildICMP4Error(ethDst, ethSrc MAC, src netip.Addr, orig []byte, v ipv4View, typ, code uint8) []byte {
	n := min(v.total, icmp4ErrorMax-ipv4Len-8)
	msg := make([]byte, 8+n)
	msg[0], msg[1] = typ, code
	copy(msg[8:], orig[:n])
	binary.BigEndian.PutUint16(msg[2:], fold(csum(0, msg)))
	return buildIPv4(ethDst, ethSrc, src, v.src, protoICMP, msg)
}

// buildICMP6Error returns an ICMPv6 error about the IPv6 packet orig,
// carrying as much of it as fits in 1280 bytes (RFC 4443 §2.4).
func buildICMP6Error(ethDst, ethSrc MAC, src netip.Addr, orig []byte, v ipv6View, typ, code uint8) []byte {
	n := min(ipv6Len+v.payload, icmp6ErrorMax-ipv6Len-8)
	msg := make([]byte, 8+n)
	msg[0], msg[1] = typ, code
	copy(msg[8:], orig[:n])
	return buildICMP6(ethDst, ethSrc, src, v.src, 64, msg)
}

// echoReply4 turns the ICMP echo request in frame (IPv4 header v at
// frame[14:]) into its reply in place: addresses swapped, type 0, TTL 64,
// checksums fixed. ok is false when it is not a well-formed echo request.
func echoReply4(frame []byte, v ipv4View) bool {
	ip := frame[ethLen:]
	icmp := ip[v.ihl:v.total]
	if v.proto != protoICMP || len(icmp) < 8 || icmp[0] != icmpEchoRequest || icmp[1] != 0 || fold(csum(0, icmp)) != 0 {
		return false
	}
	var m [6]byte
	copy(m[:], frame[0:6])
	copy(frame[0:6], frame[6:12])
	copy(frame[6:12], m[:])
	var a [4]byte
	copy(a[:], ip[12:16])
	copy(ip[12:16], ip[16:20])
	copy(ip[16:20], a[:])
	ip[8] = 64
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ipv4HeaderSum(ip[:v.ihl]))
	binary.BigEndian.PutUint16(icmp[2:], csumAdjust(be16(icmp[2:]), uint16(icmpEchoRequest)<<8, uint16(icmpEchoReply)<<8))
	icmp[0] = icmpEchoReply
	return true
}

// echoReply6 is echoReply4 for ICMPv6.
func echoReply6(frame []byte, v ipv6View) bool {
	ip := frame[ethLen:]
	icmp := ip[ipv6Len : ipv6Len+v.payload]
	if v.next != protoICMP6 || len(icmp) < 8 || icmp[0] != icmp6EchoRequest || icmp[1] != 0 ||
		fold(csum(pseudo6(ip[8:], ip[24:], len(icmp), protoICMP6), icmp)) != 0 {
		return false
	}
	var m [6]byte
	copy(m[:], frame[0:6])
	copy(frame[0:6], frame[6:12])
	copy(frame[6:12], m[:])
	var a [16]byte
	copy(a[:], ip[8:24])
	copy(ip[8:24], ip[24:40])
	copy(ip[24:40], a[:])
	ip[7] = 64
	// The pseudo-header's sum is unchanged by the swap.
	binary.BigEndian.PutUint16(icmp[2:], csumAdjust(be16(icmp[2:]), uint16(icmp6EchoRequest)<<8, uint16(icmp6EchoReply)<<8))
	icmp[0] = icmp6EchoReply
	return true
}

// flowHash hashes a packet's 5-tuple (addresses, protocol, and the TCP or
// UDP ports when the packet carries them) for ECMP: the same flow always
// hashes the same.
func flowHash(ip []byte, v6 bool, l4off int, proto uint8) uint32 {
	h := uint32(2166136261)
	mix := func(b []byte) {
		for _, x := range b {
			h ^= uint32(x)
			h *= 16777619
		}
	}
	if v6 {
		mix(ip[8:40])
	} else {
		mix(ip[12:20])
	}
	h ^= uint32(proto)
	h *= 16777619
	if (proto == protoTCP || proto == protoUDP) && l4off > 0 && l4off+4 <= len(ip) {
		mix(ip[l4off : l4off+4])
	}
	// Final avalanche (murmur3 fmix32), so that low bits spread.
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}
