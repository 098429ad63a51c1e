package pcapfile

import "fmt"

// LinkType is a LINKTYPE_ value of the pcap and pcapng formats.
type LinkType uint32

// The link types gswitch's filters understand.
const (
	LinkNull      LinkType = 0   // BSD loopback: 4-byte address family in the writer's byte order
	LinkEthernet  LinkType = 1   // EN10MB
	LinkRaw       LinkType = 101 // raw IPv4 or IPv6 (DLT_RAW)
	LinkLoop      LinkType = 108 // OpenBSD loopback: 4-byte address family, big-endian
	LinkLinuxSLL  LinkType = 113 // Linux cooked capture v1
	LinkLinuxSLL2 LinkType = 276 // Linux cooked capture v2
	LinkIPv4      LinkType = 228 // raw IPv4
	LinkIPv6      LinkType = 229 // raw IPv6
)

var linkNames = map[LinkType]string{
	LinkNull: "NULL", LinkEthernet: "EN10MB", LinkRaw: "RAW", LinkLoop: "LOOP",
	LinkLinuxSLL: "LINUX_SLL", LinkLinuxSLL2: "LINUX_SLL2", LinkIPv4: "IPV4", LinkIPv6: "IPV6",
}

// String returns the libpcap name of the link type (EN10MB, LINUX_SLL, ...).
func (l LinkType) String() string {
	if n, ok := linkNames[l]; ok {
		return n
	}
	return fmt.Sprintf("LINKTYPE_%d", uint32(l))
}
