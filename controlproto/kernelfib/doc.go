// Package kernelfib mirrors one Linux kernel routing table into a
// route.Table, so that `ip route`, BIRD or FRR drive gswitch's routes.
//
// # What
//
// A Mirror subscribes over netlink (github.com/vishvananda/netlink) to the
// IPv4 and IPv6 route groups of a network namespace, keeps the messages of
// its kernel table id (1..2^32-1; 254 is main), loads a full dump of that
// table, and then applies every RTM_NEWROUTE and RTM_DELROUTE. Unicast
// routes are mirrored, with their next hops: a gateway (or none: on-link),
// the output interface mapped to the gswitch port attached to it
// (Config.PortOf), and for multipath routes (RTA_MULTIPATH) one weighted
// next hop per path (rtnh_hops+1), which the datapath spreads flows over
// (route.Entry.Pick). Next hops are kept in a canonical order (port, then
// gateway), so that the order the kernel lists them in does not matter.
//
// Skipped by design, and counted (Stats.Skipped): routes that are not
// unicast (local, broadcast, blackhole, unreachable, prohibit, ...), TOS
// routes, and routes with a next hop through an interface that is no
// gswitch port (gswitch could not forward the share of flows the kernel
// sends there). Rejected, counted and logged (Stats.Rejected): malformed
// messages and next hops through another address family (RFC 5549 "via"),
// and routes the route.Table refuses; a rejected route leaves the table
// as it was.
//
// Messages that have queued up behind the one being applied (a routing
// daemon's burst, up to 1,024 of them) reach the route table as one change
// (route.Table.Update): one bubble write and one engine update for the
// burst instead of one per message. Should the table refuse the batch (one
// route it rejects), each change is applied alone, so the others land.
//
// # Several routes per prefix
//
// The kernel keeps several routes for one prefix when their metrics differ
// and forwards with the lowest; the mirror keeps them all and installs that
// one, so deleting it brings the next one in, as in the kernel. IPv6 keeps a
// multipath route's paths as siblings: an append (or an add of an existing
// prefix and metric) adds next hops, and a delete naming some of them
// removes only those; IPv4 multipath routes always come whole. IPv4 also
// keeps aliases: routes of one prefix and metric in a list whose first is
// in use. The mirror keeps them in the kernel's order — "ip route append"
// (NLM_F_APPEND) adds behind them, "ip route prepend" (an add without
// replace or append) in front, replace changes the first, a delete removes
// the alias whose next hops it names — so deleting the alias in use brings
// in the next one, as in the kernel.
//
// Routes that use nexthop objects (ip nexthop, FRR's default on recent
// kernels) are mirrored through the gateways and interfaces the kernel
// expands into their messages while net.ipv4.nexthop_compat_mode is 1 (the
// default); with it 0 their messages carry only the nexthop id, which the
// mirror does not resolve.
//
// # Overflow and resync
//
// Netlink multicast is lossy: when the subscription socket's receive buffer
// is full, the kernel drops messages and the next read fails with ENOBUFS.
// The subscription then ends; the mirror counts an overflow, subscribes again
// (before dumping, so no change falls between the dump and the
// subscription), loads a fresh dump, and hands it to route.Table.Replace,
// which changes only the routes that differ (one update per family to the
// table's mirrors, so a lookup batch sees the old table or the new one).
// Messages that arrive during or after the dump are applied on top, which
// converges because they are applied in order; during the dump a collector
// keeps reading the subscription into memory, so that the seconds a full
// table's dump takes do not overflow the socket again on a busy FIB. Config.ReceiveBuffer sets
// the buffer (tests make it tiny to force the overflow). Routes of other
// sources in the same route.Table are left alone by a resync unless a
// kernel route holds their prefix.
//
// # How it is checked
//
// The tests run in fresh network namespaces (root): veth interfaces mapped
// to ports, and routes added, replaced, appended and deleted with netlink
// and with iproute2 in a dedicated table; after each step the route.Table
// must equal the table that `ip -j route show table N` prints (converted
// independently). A burst of thousands of routes into a socket with a tiny
// buffer must overflow, resync and end equal to the kernel's table. The
// full BGP table of ../shared/data/fib goes through the kernel (a large
// sample under -race) and lookups are checked against a brute-force
// reference.
package kernelfib
