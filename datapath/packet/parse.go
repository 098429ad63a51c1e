package packet

import (
	"encoding/binary"

	"github.com/gswitch/gswitch/tables/flow"
)

// Ethernet types and IP protocol numbers Parse acts on, beyond flow's.
const (
	ethTypeVLAN     = 0x8100 // 802.1Q C-tag
	ethTypeQinQ     = 0x88a8 // 802.1ad S-tag
	ethTypeMinType  = 0x0600 // below: an 802.3 length
	ethTypeNone     = 0x05ff // eth_type of an 802.3 frame (Open vSwitch's FLOW_DL_TYPE_NONE)
	ipProtoHopOpts  = 0
	ipProtoRouting  = 43
	ipProtoFragment = 44
	ipProtoESP      = 50
	ipProtoAH       = 51
	ipProtoNoNext   = 59
	ipProtoDstOpts  = 60
)

// Header lengths.
const (
	ethLen      = 14
	tagLen      = 4
	mplsLen     = 4
	pbbLen      = 18 // I-TAG, C-DA, C-SA, customer type
	arpFixedLen = 8
	arpEthIPLen = 28
	ipv4MinLen  = 20
	ipv6Len     = 40
	tcpLen      = 20
	udpLen      = 8
	sctpLen     = 12
	icmpv4Len   = 8
	icmpv6Len   = 4
	ndFixedLen  = 20 // reserved/flags and target, after the ICMPv6 header
)

// ICMPv6 neighbour discovery.
const (
	ndSolicit    = 135
	ndAdvert     = 136
	ndOptSrcLL   = 1
	ndOptTgtLL   = 2
	ndOptUnit    = 8
	ndOptLLBytes = 8 // an option carrying an Ethernet address
)

func be16(b []byte) uint32 { return uint32(binary.BigEndian.Uint16(b)) }
func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }

// Parse extracts the key of the Ethernet frame 'frame', received on port
// 'inPort', into 'k' (which it clears first). It returns OK, or why the
// frame is malformed; then 'k' holds the fields of the headers before the
// bad one and the frame should be counted and dropped. See the package
// documentation for what is parsed and where parsing stops.
func Parse(k *flow.Key, frame []byte, inPort uint32) Reason {
	return parse(k, frame, inPort, false, 0)
}

// ParseTagged is Parse for a frame whose outermost VLAN tag the kernel has
// already removed (VLAN acceleration: AF_PACKET reports it beside the frame
// with TP_STATUS_VLAN_VALID): 'tci' is that tag's TCI. The key is the one
// Parse gives the frame with the tag put back.
func ParseTagged(k *flow.Key, frame []byte, inPort uint32, tci uint16) Reason {
	return parse(k, frame, inPort, true, tci)
}

func parse(k *flow.Key, frame []byte, inPort uint32, tagged bool, tci uint16) Reason {
	*k = flow.Key{}
	k[wInPort] = inPort
	k[wInPhyPort] = inPort
	if len(frame) < ethLen {
		return TruncatedEthernet
	}
	putEthAddrs(k, frame)
	typ, rest := be16(frame[12:]), frame[ethLen:]
	if tagged {
		putVLAN(k, uint32(tci))
	} else if isTag(typ) {
		if len(rest) < tagLen {
			return TruncatedVLAN
		}
		putVLAN(k, be16(rest))
		typ, rest = be16(rest[2:]), rest[tagLen:]
	}
	typ, rest, r := skipTags(typ, rest)
	if r != OK {
		return r
	}
	if typ < ethTypeMinType {
		putEthType(k, ethTypeNone)
		return OK
	}
	putEthType(k, typ)
	switch typ {
	case flow.EthTypeIPv4:
		return parseIPv4(k, rest)
	case flow.EthTypeIPv6:
		return parseIPv6(k, rest)
	case flow.EthTypeARP:
		return parseARP(k, rest)
	case flow.EthTypeMPLS, flow.EthTypeMPLSMcast:
		return parseMPLS(k, rest)
	case flow.EthTypePBB:
		return parsePBB(k, rest)
	}
	return OK
}

func isTag(typ uint32) bool { return typ == ethTypeVLAN || typ == ethTypeQinQ }

// skipTags skips the inner VLAN tags (OpenFlow 1.3 matches only the
// outermost): given the type 'typ' announcing what starts 'b', it returns
// the type after the last tag and what follows it.
func skipTags(typ uint32, b []byte) (uint32, []byte, Reason) {
	for isTag(typ) {
		if len(b) < tagLen {
			return 0, b, TruncatedVLAN
		}
		typ, b = be16(b[2:]), b[tagLen:]
	}
	return typ, b, OK
}

// parseMPLS reads the top label stack entry; OpenFlow 1.3 looks no deeper.
func parseMPLS(k *flow.Key, b []byte) Reason {
	if len(b) < mplsLen {
		return TruncatedMPLS
	}
	putMPLS(k, be32(b))
	return OK
}

// parsePBB reads the I-SID of an 802.1ah I-TAG.
func parsePBB(k *flow.Key, b []byte) Reason {
	if len(b) < pbbLen {
		return TruncatedPBB
	}
	putPBBISID(k, be32(b))
	return OK
}

// parseARP reads arp_op always, and the addresses when the hardware is
// Ethernet and the protocol IPv4 (other kinds of ARP have no OpenFlow
// address fields).
func parseARP(k *flow.Key, b []byte) Reason {
	if len(b) < arpFixedLen {
		return TruncatedARP
	}
	putARPOp(k, be16(b[6:]))
	if be16(b) != 1 || be16(b[2:]) != flow.EthTypeIPv4 || b[4] != 6 || b[5] != 4 {
		return OK
	}
	if len(b) < arpEthIPLen {
		return TruncatedARP
	}
	putARPAddrs(k, b[8:14], be32(b[14:]), b[18:24], be32(b[24:]))
	return OK
}

// parseIPv4 reads an IPv4 header and, unless the packet is a fragment other
// than the first, its transport header.
func parseIPv4(k *flow.Key, b []byte) Reason {
	if len(b) < ipv4MinLen {
		return TruncatedIPv4
	}
	if b[0]>>4 != 4 {
		return BadIPv4
	}
	hl := int(b[0]&0x0f) * 4
	if hl < ipv4MinLen {
		return BadIPv4
	}
	if len(b) < hl {
		return TruncatedIPv4
	}
	end := len(b)
	if tot := int(be16(b[2:])); tot != 0 {
		if tot < hl {
			return BadIPv4
		}
		end = min(end, tot)
	}
	proto := b[9]
	putIPProtoTOS(k, proto, b[1])
	putIPv4Addrs(k, be32(b[12:]), be32(b[16:]))
	if be16(b[6:])&0x1fff != 0 {
		return OK // a later fragment: no transport header
	}
	if proto == flow.IPProtoICMP {
		return parseICMPv4(k, b[hl:end])
	}
	return parseL4(k, proto, b[hl:end])
}

// parseIPv6 reads an IPv6 header, walks its extension headers and reads the
// transport header that follows, if any.
func parseIPv6(k *flow.Key, b []byte) Reason {
	if len(b) < ipv6Len {
		return TruncatedIPv6
	}
	w := be32(b)
	if w>>28 != 6 {
		return BadIPv6
	}
	putIPv6FLabel(k, w&0xfffff)
	putIPv6Addrs(k, b[8:24], b[24:40])
	payload := b[ipv6Len:]
	if pl := int(be16(b[4:])); pl != 0 && pl < len(payload) {
		payload = payload[:pl]
	}
	var x extWalk
	proto, l4, r := x.walk(b[6], payload)
	putIPProtoTOS(k, proto, uint8(w>>20))
	putIPv6ExtHdr(k, x.flags)
	if r != OK || l4 == nil {
		return r
	}
	if proto == flow.IPProtoICMPv6 {
		return parseICMPv6(k, l4)
	}
	return parseL4(k, proto, l4)
}

// parseL4 reads the TCP, UDP or SCTP header of IP protocol 'proto' in 'b'
// (the IP payload). Other protocols are not looked at.
func parseL4(k *flow.Key, proto uint8, b []byte) Reason {
	switch proto {
	case flow.IPProtoTCP:
		if len(b) < tcpLen {
			return TruncatedL4
		}
		putL4Ports(k, be32(b))
		putTCPFlags(k, be16(b[12:])&0x0fff)
	case flow.IPProtoUDP:
		if len(b) < udpLen {
			return TruncatedL4
		}
		putL4Ports(k, be32(b))
	case flow.IPProtoSCTP:
		if len(b) < sctpLen {
			return TruncatedL4
		}
		putL4Ports(k, be32(b))
	}
	return OK
}

// parseICMPv4 reads the ICMPv4 type and code.
func parseICMPv4(k *flow.Key, b []byte) Reason {
	if len(b) < icmpv4Len {
		return TruncatedL4
	}
	putICMPTypeCode(k, b[0], b[1])
	return OK
}

// parseICMPv6 reads the ICMPv6 type and code and, for a neighbour
// solicitation or advertisement (code 0), the target and link-layer address.
func parseICMPv6(k *flow.Key, b []byte) Reason {
	if len(b) < icmpv6Len {
		return TruncatedL4
	}
	typ, code := b[0], b[1]
	putICMPTypeCode(k, typ, code)
	if (typ != ndSolicit && typ != ndAdvert) || code != 0 {
		return OK
	}
	return parseND(k, typ, b[icmpv6Len:])
}

// parseND reads the target of a neighbour solicitation or advertisement and
// the first source (135) or target (136) link-layer address option.
func parseND(k *flow.Key, typ uint8, b []byte) Reason {
	if len(b) < ndFixedLen {
		return TruncatedND
	}
	putNDTarget(k, b[4:20])
	want := uint8(ndOptSrcLL)
	if typ == ndAdvert {
		want = ndOptTgtLL
	}
	found := false
	for opts := b[ndFixedLen:]; len(opts) > 0; {
		if len(opts) < 2 {
			return TruncatedND
		}
		n := int(opts[1]) * ndOptUnit
		if n == 0 {
			return BadND
		}
		if len(opts) < n {
			return TruncatedND
		}
		if opts[0] == want && n == ndOptLLBytes && !found {
			putNDLL(k, opts[2:8])
			found = true
		}
		opts = opts[n:]
	}
	return OK
}
