package packet

import "strconv"

// Reason says why Parse could not extract a frame's key. OK (zero) means it
// could. Reason implements error, so callers may return it; converting it
// to an error does not allocate. Callers count reasons (an array indexed by
// Reason, NumReasons long) and drop the frames.
type Reason uint8

// The reasons, in the order of the headers they concern.
const (
	OK Reason = iota
	// TruncatedEthernet: fewer than 14 bytes.
	TruncatedEthernet
	// TruncatedVLAN: an 802.1Q/802.1ad tag cut short.
	TruncatedVLAN
	// TruncatedMPLS: eth_type MPLS but no 4-byte label stack entry.
	TruncatedMPLS
	// TruncatedPBB: eth_type PBB but no I-TAG and customer addresses.
	TruncatedPBB
	// TruncatedARP: an ARP header cut short.
	TruncatedARP
	// TruncatedIPv4: an IPv4 header (with its options) cut short.
	TruncatedIPv4
	// BadIPv4: version not 4, IHL below 5, or total length below the header.
	BadIPv4
	// TruncatedIPv6: fewer than 40 bytes of IPv6 header.
	TruncatedIPv6
	// BadIPv6: version not 6.
	BadIPv6
	// TruncatedIPv6Ext: an IPv6 extension header cut short.
	TruncatedIPv6Ext
	// TruncatedL4: a TCP, UDP, SCTP, ICMPv4 or ICMPv6 header cut short.
	TruncatedL4
	// TruncatedND: an ICMPv6 neighbour solicitation or advertisement, or
	// one of its options, cut short.
	TruncatedND
	// BadND: an ND option of length 0 (RFC 4861 §4.6: discard the packet).
	BadND

	// NumReasons is the number of reasons, OK included.
	NumReasons
)

var reasonNames = [NumReasons]string{
	OK:                "ok",
	TruncatedEthernet: "truncated ethernet header",
	TruncatedVLAN:     "truncated vlan tag",
	TruncatedMPLS:     "truncated mpls label",
	TruncatedPBB:      "truncated pbb i-tag",
	TruncatedARP:      "truncated arp header",
	TruncatedIPv4:     "truncated ipv4 header",
	BadIPv4:           "bad ipv4 header",
	TruncatedIPv6:     "truncated ipv6 header",
	BadIPv6:           "bad ipv6 version",
	TruncatedIPv6Ext:  "truncated ipv6 extension header",
	TruncatedL4:       "truncated transport header",
	TruncatedND:       "truncated neighbour discovery message",
	BadND:             "bad neighbour discovery option",
}

// String names the reason.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "reason" + strconv.Itoa(int(r))
}

// Error returns "packet: " and the reason's name.
func (r Reason) Error() string { return "packet: " + r.String() }
