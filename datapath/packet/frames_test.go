package packet

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Hand-built frames for the tests: each helper returns one header's bytes,
// and cat joins them. They are written from the RFCs, independent of both
// Parse and the gopacket reference.

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }
func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func mac(s string) []byte {
	m, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ip(s string) []byte { return netip.MustParseAddr(s).AsSlice() }

var (
	macA = mac("02:00:00:00:00:0a")
	macB = mac("02:00:00:00:00:0b")
	macC = mac("0a:1b:2c:3d:4e:5f")
)

// eth is an Ethernet header.
func eth(dst, src []byte, typ uint16) []byte { return cat(dst, src, u16(typ)) }

// tag is the rest of a VLAN tag after its type: TCI and the next type.
func tag(pcp, vid, next uint16) []byte { return cat(u16(pcp<<13|vid), u16(next)) }

// mpls is one label stack entry.
func mpls(label uint32, tc, bos, ttl uint8) []byte {
	return u32(label<<12 | uint32(tc)<<9 | uint32(bos)<<8 | uint32(ttl))
}

// pbb is an I-TAG with customer addresses and type.
func pbb(pcp uint8, isid uint32) []byte {
	return cat(u32(uint32(pcp)<<29|isid), macC, macA, u16(0x0800))
}

// arp is an Ethernet/IPv4 ARP message.
func arp(op uint16, sha []byte, spa string, tha []byte, tpa string) []byte {
	return cat(u16(1), u16(0x0800), []byte{6, 4}, u16(op), sha, ip(spa), tha, ip(tpa))
}

// ipv4 is an IPv4 header with 'opts' (a multiple of 4 bytes) and 'payload';
// frag is the flags/fragment offset word.
func ipv4(tos, proto uint8, src, dst string, frag uint16, opts, payload []byte) []byte {
	hl := 20 + len(opts)
	h := cat([]byte{0x40 | byte(hl/4), tos}, u16(uint16(hl+len(payload))), u16(0x1234), u16(frag),
		[]byte{64, proto, 0, 0}, ip(src), ip(dst), opts)
	return cat(h, payload)
}

// ipv6 is an IPv6 header and its payload.
func ipv6(tc uint8, flabel uint32, nh uint8, src, dst string, payload []byte) []byte {
	return cat(u32(6<<28|uint32(tc)<<20|flabel), u16(uint16(len(payload))), []byte{nh, 64}, ip(src), ip(dst), payload)
}

// ext is a hop-by-hop, routing or destination options header of n bytes
// (a multiple of 8).
func ext(nh uint8, n int) []byte {
	b := make([]byte, n)
	b[0], b[1] = nh, byte(n/8-1)
	return b
}

// fragHdr is an IPv6 fragment header.
func fragHdr(nh uint8, offset uint16, more bool) []byte {
	m := uint16(0)
	if more {
		m = 1
	}
	return cat([]byte{nh, 0}, u16(offset<<3|m), u32(0xabcd))
}

// ah is an authentication header of n bytes (a multiple of 4, at least 12).
func ah(nh uint8, n int) []byte {
	b := make([]byte, n)
	b[0], b[1] = nh, byte(n/4-2)
	return b
}

func tcp(sp, dp, flags uint16) []byte {
	return cat(u16(sp), u16(dp), u32(1), u32(2), u16(5<<12|flags), u16(65535), u16(0), u16(0))
}
func udp(sp, dp uint16, payload []byte) []byte {
	return cat(u16(sp), u16(dp), u16(uint16(8+len(payload))), u16(0), payload)
}
func sctp(sp, dp uint16) []byte                 { return cat(u16(sp), u16(dp), u32(7), u32(0)) }
func icmp4(typ, code uint8) []byte              { return cat([]byte{typ, code}, u16(0), u32(0x00010002)) }
func icmp6(typ, code uint8, body []byte) []byte { return cat([]byte{typ, code}, u16(0), body) }

// nd is the body of a neighbour solicitation or advertisement.
func nd(target string, opts ...[]byte) []byte { return cat(u32(0), ip(target), cat(opts...)) }

// llOpt is a link-layer address option.
func llOpt(typ uint8, m []byte) []byte { return cat([]byte{typ, 1}, m) }
