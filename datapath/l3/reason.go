package l3

import "strconv"

// Reason says why the router dropped a frame (OK: it did not). The router
// counts drops per reason (Counters.Drops, the Prometheus metric
// gswitch_l3_drops_total{reason}).
type Reason uint8

// The reasons.
const (
	OK Reason = iota
	// DropMalformed: a header cut short or impossible (IP version, IHL,
	// lengths, ARP sizes).
	DropMalformed
	// DropChecksum: the IPv4 header checksum is wrong.
	DropChecksum
	// DropNotForUs: the destination MAC is not the port's, broadcast, or an
	// IPv6 multicast group (a router port is not a switch port).
	DropNotForUs
	// DropEtherType: a VLAN tag or an ethertype other than IPv4, IPv6 and ARP.
	DropEtherType
	// DropIPOptions: IPv4 options (the router does not process them).
	DropIPOptions
	// DropHopByHop: an IPv6 hop-by-hop options header (the router does not
	// process it).
	DropHopByHop
	// DropNotRoutable: a destination that is not forwarded (multicast,
	// broadcast, link-local, loopback, unspecified) or a martian source, or
	// an ARP/ND message that is not for one of the port's addresses.
	DropNotRoutable
	// DropTTL: the TTL or hop limit ran out (an ICMP time exceeded was sent).
	DropTTL
	// DropNoRoute: no route to the destination (an ICMP unreachable was sent).
	DropNoRoute
	// DropNextHopPort: the route's output port is not a router port.
	DropNextHopPort
	// DropNeighbour: the next hop's address could not be resolved (its
	// solicitations went unanswered), or in kernel mode the kernel has no
	// usable entry.
	DropNeighbour
	// DropQueueFull: the next hop's queue of packets waiting for resolution
	// was full (the oldest packet is dropped).
	DropQueueFull
	// DropNeighbourTable: the neighbour table is full.
	DropNeighbourTable
	// DropLocal: addressed to the router itself, and not an echo request.
	DropLocal

	// NumReasons is the number of reasons, OK included.
	NumReasons
)

var reasonNames = [NumReasons]string{
	OK:                 "ok",
	DropMalformed:      "malformed",
	DropChecksum:       "bad_checksum",
	DropNotForUs:       "not_for_router",
	DropEtherType:      "ethertype",
	DropIPOptions:      "ipv4_options",
	DropHopByHop:       "ipv6_hop_by_hop",
	DropNotRoutable:    "not_routable",
	DropTTL:            "ttl_expired",
	DropNoRoute:        "no_route",
	DropNextHopPort:    "next_hop_port",
	DropNeighbour:      "neighbour_unresolved",
	DropQueueFull:      "neighbour_queue_full",
	DropNeighbourTable: "neighbour_table_full",
	DropLocal:          "local_unhandled",
}

// String names the reason as the metric label does.
func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "reason" + strconv.Itoa(int(r))
}
