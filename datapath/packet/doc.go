// Package packet extracts a packet's OpenFlow 1.3 key (flow.Key) from an
// Ethernet frame: the first step of the flow of a packet (DESIGN.md), run
// once per received frame, before the key words are gathered into a batch
// for the classifiers.
//
// # What it does
//
// Parse reads a frame once, front to back, and writes every field that
// OpenFlow 1.3 defines for it into a flow.Key in the word layout of package
// tables/flow: Ethernet addresses and type; the outermost 802.1Q or 802.1ad
// tag (vlan_vid with OFPVID_PRESENT, vlan_pcp; inner tags are skipped and
// eth_type is the type after the last tag); the top MPLS label stack entry
// (label, tc, bos); the PBB I-SID; ARP (op, addresses); IPv4 (dscp, ecn,
// proto, addresses); IPv6 (flow label, dscp, ecn, addresses, the extension
// header walk with the OFPIEH_* flags of OpenFlow 1.3 §7.2.3.7, ip_proto
// being the first header that is not an extension header); TCP (ports,
// tcp_flags), UDP and SCTP ports; ICMPv4 and ICMPv6 type and code; and the
// neighbour-discovery target and link-layer address of ICMPv6 types 135
// and 136. ParseTagged does the same for a frame whose outermost VLAN tag
// the kernel removed and reports beside it (AF_PACKET's VLAN
// acceleration). in_port and in_phy_port are the caller's port number (ports of
// an AF_PACKET datapath are physical, so the two are equal); metadata and
// tunnel_id are pipeline fields and stay zero.
//
// Parsing stops where OpenFlow 1.3 stops matching: after the top MPLS entry
// (OpenFlow 1.3 does not look below a label stack), after the PBB I-TAG,
// after an IPv4 fragment that is not the first (it has no transport
// header), after an IPv6 fragment header with a non-zero offset, at ESP and
// at "no next header". A frame whose type is an 802.3 length (below 0x0600)
// gets eth_type 0x05ff, as Open vSwitch gives it, and nothing more.
//
// # Invariants
//
//   - One pass, no allocation, no copy: Parse reads the frame in place and
//     writes only the key; it keeps no reference to either.
//   - The key layout is the field table's: every value Parse writes is the
//     value Key.SetUint/Key.Set would write for that field (a test builds
//     the expected key of every test frame through the field table, and
//     the fuzz test re-derives keys with gopacket and reads them back with
//     Key.GetUint). Fields that share words never occur in one packet.
//   - Untrusted input never panics and is never read out of bounds: every
//     header is length-checked before it is read. A frame too short for a
//     header it announces, or with an impossible header (IPv4 IHL below 5,
//     a wrong IP version, an ND option of length 0), returns a Reason other
//     than OK. The key then holds the fields of the headers before the bad
//     one; the caller counts the reason and drops the frame (DESIGN.md).
//   - Lengths are taken from the headers where they bound the next one: the
//     IPv4 total length and the IPv6 payload length cut Ethernet padding off
//     before the transport header is looked for. A zero IPv4 total length
//     (TSO, IPv4 BIG TCP) or IPv6 payload length (jumbogram) means "to the
//     end of the frame". A frame shorter than its IP length (a truncated
//     capture of a GRO super-packet) is parsed as far as its headers reach.
//
// # Thread-safety
//
// Parse is a pure function of its arguments: any number of goroutines may
// call it at once, each with its own key.
package packet
