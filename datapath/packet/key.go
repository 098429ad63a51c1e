package packet

import "github.com/gswitch/gswitch/tables/flow"

// Word indices and shifts of the flow.Key layout (tables/flow/doc.go). Parse
// starts from a zero key and ORs each field into its bits; setters_test.go
// checks every setter against Key.SetUint and Key.Set, so these constants
// cannot drift from the field table unnoticed.
const (
	wInPort    = 0
	wInPhyPort = 1
	wEthDst    = 6  // eth_dst bytes 0-3
	wEthSrc    = 7  // eth_src bytes 0-3
	wEthLow    = 8  // eth_dst bytes 4-5 <<16 | eth_src bytes 4-5
	wEthType   = 9  // eth_type<<16 | ip_proto<<8 | ip_dscp<<2 | ip_ecn, or arp_op
	wVLAN      = 10 // vlan_vid<<16 | vlan_pcp<<13 | ipv6_exthdr
	wLabel     = 11 // ipv6_flabel, mpls label<<12|tc<<9|bos<<8, or pbb_isid
	wSrc       = 12 // ipv4_src, arp_spa, ipv6_src (4 words)
	wARPSHA    = 13 // arp_sha bytes 0-3
	wARPLow    = 14 // arp_sha bytes 4-5 <<16 | arp_tha bytes 4-5
	wARPTHA    = 15 // arp_tha bytes 0-3
	wDst       = 16 // ipv4_dst, arp_tpa, ipv6_dst (4 words)
	wL4        = 20 // src port<<16 | dst port, or icmp type<<16 | code
	wNDTarget  = 21 // ipv6_nd_target (4 words)
	wNDLL      = 25 // nd sll/tll bytes 0-3
	wNDLow     = 26 // nd ll bytes 4-5 <<16 | tcp_flags
)

func putEthAddrs(k *flow.Key, frame []byte) {
	k[wEthDst] = be32(frame[0:])
	k[wEthSrc] = be32(frame[6:])
	k[wEthLow] = be16(frame[4:])<<16 | be16(frame[10:])
}

// putEthType writes eth_type; 't' is 16 bits.
func putEthType(k *flow.Key, t uint32) { k[wEthType] |= t << 16 }

// putVLAN writes vlan_vid (with OFPVID_PRESENT) and vlan_pcp from a TCI.
func putVLAN(k *flow.Key, tci uint32) {
	k[wVLAN] |= (flow.VIDPresent|tci&0x0fff)<<16 | (tci>>13)<<13
}

// putMPLS writes mpls_label, mpls_tc and mpls_bos from a label stack entry
// (label<<12 | tc<<9 | bos<<8 | ttl): the key holds it without the TTL.
func putMPLS(k *flow.Key, lse uint32) { k[wLabel] |= lse &^ 0xff }

// putPBBISID writes pbb_isid from an I-TAG's first word.
func putPBBISID(k *flow.Key, itag uint32) { k[wLabel] |= itag & 0x00ffffff }

// putARPOp writes arp_op; 'op' is 16 bits.
func putARPOp(k *flow.Key, op uint32) { k[wEthType] |= op }

// putARPAddrs writes arp_sha, arp_spa, arp_tha and arp_tpa.
func putARPAddrs(k *flow.Key, sha []byte, spa uint32, tha []byte, tpa uint32) {
	k[wSrc] = spa
	k[wDst] = tpa
	k[wARPSHA] = be32(sha[0:])
	k[wARPTHA] = be32(tha[0:])
	k[wARPLow] = be16(sha[4:])<<16 | be16(tha[4:])
}

// putIPProtoTOS writes ip_proto, ip_dscp and ip_ecn; the last two are the
// IPv4 TOS byte or the IPv6 traffic class, which the key holds as is.
func putIPProtoTOS(k *flow.Key, proto, tos uint8) {
	k[wEthType] |= uint32(proto)<<8 | uint32(tos)
}

func putIPv4Addrs(k *flow.Key, src, dst uint32) {
	k[wSrc] = src
	k[wDst] = dst
}

func putIPv6FLabel(k *flow.Key, fl uint32) { k[wLabel] |= fl & 0xfffff }

// put128 writes a 16-byte address into four words from 'w'.
func put128(k *flow.Key, w int, a []byte) {
	_ = a[15]
	k[w] = be32(a[0:])
	k[w+1] = be32(a[4:])
	k[w+2] = be32(a[8:])
	k[w+3] = be32(a[12:])
}

func putIPv6Addrs(k *flow.Key, src, dst []byte) {
	put128(k, wSrc, src)
	put128(k, wDst, dst)
}

// putIPv6ExtHdr writes ipv6_exthdr (9 bits of OFPIEH_* flags).
func putIPv6ExtHdr(k *flow.Key, flags uint32) { k[wVLAN] |= flags & 0x1ff }

// putL4Ports writes the source and destination port of TCP, UDP or SCTP
// from the header's first word (src<<16 | dst), which the key holds as is.
func putL4Ports(k *flow.Key, ports uint32) { k[wL4] = ports }

// putTCPFlags writes tcp_flags (12 bits).
func putTCPFlags(k *flow.Key, f uint32) { k[wNDLow] |= f }

// putICMPTypeCode writes icmpv4_type/code or icmpv6_type/code.
func putICMPTypeCode(k *flow.Key, typ, code uint8) {
	k[wL4] = uint32(typ)<<16 | uint32(code)
}

func putNDTarget(k *flow.Key, t []byte) { put128(k, wNDTarget, t) }

// putNDLL writes ipv6_nd_sll or ipv6_nd_tll (they share bits).
func putNDLL(k *flow.Key, ll []byte) {
	k[wNDLL] = be32(ll[0:])
	k[wNDLow] |= be16(ll[4:]) << 16
}
