// Package l3 is gswitch's L3 forwarding stage: router ports with IPv4 and
// IPv6 addresses, ARP and neighbour discovery, a neighbour table with
// packets queued while their next hop is resolved, and IP forwarding
// through the route tables of package tables/route, looked up in batches
// on the same gpu.Engine as the flow tables. It is DESIGN.md's "L3
// rewrite (MACs, TTL)" of the flow of a packet.
//
// # Router ports and precedence
//
// A router port (PortConfig: a gswitch port number, its MAC, its
// addresses with their subnets, and the routing table it uses) is L3
// only: the pipeline (datapath/pipeline, Config.Router) hands every frame
// received on it to Route instead of the OpenFlow tables. A frame is taken
// when it is addressed to the port's MAC, to broadcast (ARP) or to an
// IPv6 multicast group (neighbour discovery); anything else is dropped as
// not_for_router. VLAN-tagged frames and other ethertypes are dropped.
// Ports that are not router ports keep OpenFlow semantics. Routed
// packets leave only through router ports (the next hop's port must be
// one: its MAC is the new source address).
//
// # What Route does with a frame
//
//   - ARP: a request for one of the port's addresses is answered; the
//     sender's address is learned (RFC 826: a request or reply to us
//     creates or refreshes the sender's entry; other ARP only refreshes
//     an entry that exists). Replies release packets waiting for that
//     neighbour.
//   - IPv6 neighbour discovery (RFC 4861 §7.1 checks: hop limit 255,
//     ICMPv6 checksum, code 0, options of non-zero length): a
//     solicitation for one of the port's addresses is answered with an
//     advertisement (router, solicited and override flags, the target
//     link-layer option); advertisements update the neighbour table and
//     release waiting packets.
//   - ICMP and ICMPv6 echo requests to any router address are answered
//     out the port they came in on; other packets to the router are
//     dropped (local_unhandled).
//   - IP forwarding: the IPv4 header checksum is checked; IPv4 options
//     and the IPv6 hop-by-hop header are not handled and are dropped;
//     multicast, broadcast, loopback, unspecified and (IPv6) link-local
//     destinations or sources are not routed. A TTL or hop limit of 1 or
//     less is dropped with an ICMP time exceeded back to the sender (out
//     the input port, to the frame's source MAC, from the port's address
//     of that family). The batch's destinations are looked up together,
//     per family, through Engine.LookupLPM4/6 on the route table's LPM
//     images (the Engine sends small batches to the CPU and large ones to
//     a GPU); a leaf names a route.Entry (an entry that does not cover
//     the address, from a lookup that raced a change, is looked up again
//     on the CPU). No route: dropped with an ICMP destination unreachable
//     (net unreachable / no route). Otherwise the entry picks the next hop
//     by a hash of the 5-tuple (addresses, protocol, TCP/UDP ports;
//     weighted, stable per flow), counts the packet for the route and the
//     next hop, the TTL is decremented (the IPv4 checksum updated
//     incrementally, RFC 1624), the source MAC becomes the output port's,
//     and the next hop (the gateway, or the destination itself for an
//     on-link route) is resolved.
//
// ICMP errors are never sent about ICMP errors, later fragments, or
// packets from non-unicast sources (RFC 1122 §3.2.2, RFC 4443 §2.4), and
// at most Config.ICMPRate per second.
//
// # Neighbours
//
// Neighbours is the table of (port, address) -> MAC with a simplified RFC
// 4861 state machine: Incomplete (solicitations sent every RetransTime,
// MaxProbes at most; up to QueueLen packets wait, the oldest dropped when
// full), Reachable (a solicited answer less than ReachableTime ago),
// Stale (older, or learned from the neighbour's own request: still used
// for StaleTime while unicast probes ask again), and Failed (the probes
// went unanswered: the queue is dropped, new packets are dropped for
// RetransTime, then resolution starts over). An entry is never used
// while Incomplete or Failed, nor once it is stale beyond
// ReachableTime+StaleTime. The table holds at most MaxEntries (unused
// entries are evicted; entries unused for GCTime are removed). Time is an
// argument of every method, so the unit tests drive it.
//
// Neighbour mode "kernel" (NeighKernel) reads the kernel's neighbour
// table over netlink instead (RunKernelNeighbours): entries the kernel
// has in a state it sends with itself (reachable, permanent, noarp,
// delay, probe, stale) are used as they are, and a next hop the kernel
// has not resolved is dropped (neighbour_unresolved) while the kernel is
// asked to resolve it (RTM_NEWNEIGH with NTF_USE, once per RetransTime).
// In this mode the kernel owns the router addresses (they are configured
// on the interfaces too): the router sends no solicitations and leaves
// ARP, neighbour discovery and echo requests to the kernel, which gets
// every frame as well as the AF_PACKET socket does.
//
// # Route tables on the engine
//
// AttachTable loads a route.Table's two LPM images into the engine as
// table ids base+2i (IPv4) and base+2i+1 (IPv6), where base is
// Config.TableIDBase (default DefaultTableIDBase, 1<<20, above the
// pipeline's flow tables 0..253; gswitchd's agent passes the start of a
// range from its table-id allocator, and Config.MaxTables keeps the
// router inside it), and installs the table's change hook, which applies
// each change's bubbles under the table's writer lock: when Add or Delete
// returns, lookups see the change. An update the engine refuses makes the
// router load the whole image again.
//
// # Counters
//
// Per reason drops (Reason), forwarded packets and bytes, frames the
// router originated (ARP replies, advertisements, solicitations, echo
// replies, ICMP errors), rate-limited ICMP errors and queued packets
// (Counters, and Collector for Prometheus); per route and per next hop,
// the route.Entry counters (the Collector reports the first
// MaxRouteMetrics routes of each table).
//
// # What is not here
//
// Fragmentation and path MTU: a packet longer than the output port's MTU
// is sent as it is (the device drops it; no ICMP fragmentation needed /
// packet too big). ICMP redirects, IPv4 options, the IPv6 hop-by-hop
// header, router advertisements, multicast routing, VLAN sub-interfaces
// and proxy ARP. ICMP errors go back out the port the packet came in on
// to the frame's source MAC, without a route lookup for the sender.
//
// # Concurrency
//
// Route may run on several ports' goroutines at once: the router's port
// set is fixed at New, the route tables at AttachTable before traffic,
// the neighbour table has its own mutex, counters are atomics, and the
// batch buffers come from a sync.Pool.
package l3
