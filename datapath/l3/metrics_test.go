package l3

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gswitch/gswitch/tables/route"
)

// TestCollector: after an ARP reply (a neighbour), a routed packet and one
// with TTL 1 (dropped, answered with an ICMP error), the collector lints
// clean and writes exactly these counts.
func TestCollector(t *testing.T) {
	g := newRig(t)
	g.send(2, arpFrame(t, layers.ARPReply, mac2, host2, "10.0.2.2", mac2, "10.0.2.1"))
	out := g.send(1, udp4(t, "10.0.1.2", "10.0.2.2", 64, 1), udp4(t, "10.0.1.2", "10.0.2.2", 1, 1))
	var n int // the forwarded frame's bytes (the padding of the received one cut off)
	for _, o := range out {
		if o.port == 2 {
			n += len(o.frame)
		}
	}
	c := g.r.Collector()
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	var drops []string // sorted by reason, as the library writes them
	for i := Reason(1); i < NumReasons; i++ {
		n := 0
		if i == DropTTL {
			n = 1
		}
		drops = append(drops, fmt.Sprintf("gswitch_l3_drops_total{reason=%q} %d\n", i.String(), n))
	}
	slices.Sort(drops)
	want := fmt.Sprintf(`# HELP gswitch_l3_drops_total Frames received on router ports and dropped, by reason.
# TYPE gswitch_l3_drops_total counter
%[2]s# HELP gswitch_l3_forwarded_bytes_total Bytes routed out of a router port.
# TYPE gswitch_l3_forwarded_bytes_total counter
gswitch_l3_forwarded_bytes_total %[1]d
# HELP gswitch_l3_forwarded_packets_total Packets routed out of a router port.
# TYPE gswitch_l3_forwarded_packets_total counter
gswitch_l3_forwarded_packets_total 1
# HELP gswitch_l3_icmp_rate_limited_total ICMP errors not sent because of the rate limit.
# TYPE gswitch_l3_icmp_rate_limited_total counter
gswitch_l3_icmp_rate_limited_total 0
# HELP gswitch_l3_neighbours Entries in the neighbour table.
# TYPE gswitch_l3_neighbours gauge
gswitch_l3_neighbours 1
# HELP gswitch_l3_queued_total Packets that waited for their next hop's address to be resolved.
# TYPE gswitch_l3_queued_total counter
gswitch_l3_queued_total 0
# HELP gswitch_l3_sent_total Frames the router originated, by kind.
# TYPE gswitch_l3_sent_total counter
gswitch_l3_sent_total{kind="arp_reply"} 0
gswitch_l3_sent_total{kind="echo_reply"} 0
gswitch_l3_sent_total{kind="icmp_error"} 1
gswitch_l3_sent_total{kind="nd_advert"} 0
gswitch_l3_sent_total{kind="solicitation"} 0
# HELP gswitch_route_bytes_total Bytes routed by a route.
# TYPE gswitch_route_bytes_total counter
gswitch_route_bytes_total{prefix="10.0.1.0/24",table="254"} 0
gswitch_route_bytes_total{prefix="10.0.2.0/24",table="254"} %[1]d
gswitch_route_bytes_total{prefix="2001:db8:1::/64",table="254"} 0
gswitch_route_bytes_total{prefix="2001:db8:2::/64",table="254"} 0
# HELP gswitch_route_nexthop_packets_total Packets routed through one next hop of a route.
# TYPE gswitch_route_nexthop_packets_total counter
gswitch_route_nexthop_packets_total{nexthop="on-link port 1 weight 1",prefix="10.0.1.0/24",table="254"} 0
gswitch_route_nexthop_packets_total{nexthop="on-link port 1 weight 1",prefix="2001:db8:1::/64",table="254"} 0
gswitch_route_nexthop_packets_total{nexthop="on-link port 2 weight 1",prefix="10.0.2.0/24",table="254"} 1
gswitch_route_nexthop_packets_total{nexthop="on-link port 2 weight 1",prefix="2001:db8:2::/64",table="254"} 0
# HELP gswitch_route_packets_total Packets routed by a route.
# TYPE gswitch_route_packets_total counter
gswitch_route_packets_total{prefix="10.0.1.0/24",table="254"} 0
gswitch_route_packets_total{prefix="10.0.2.0/24",table="254"} 1
gswitch_route_packets_total{prefix="2001:db8:1::/64",table="254"} 0
gswitch_route_packets_total{prefix="2001:db8:2::/64",table="254"} 0
`, n, strings.Join(drops, ""))
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := g.r.WriteMetrics(&b); err != nil || !strings.Contains(b.String(), "gswitch_l3_forwarded_packets_total 1\n") {
		t.Fatalf("WriteMetrics: %v\n%s", err, b.String())
	}
}

// TestRouteMetricsCap: a table of more than MaxRouteMetrics routes reports
// the first MaxRouteMetrics of them.
func TestRouteMetricsCap(t *testing.T) {
	g := newRig(t)
	for i := range MaxRouteMetrics + 10 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 100 + byte(i>>16), byte(i >> 8), byte(i)}), 32)
		if err := g.tab.Add(route.Route{Table: 254, Prefix: p, Source: route.SourceStatic,
			NextHops: []route.NextHop{{Port: 2, Weight: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	c := g.r.Collector()
	if n := testutil.CollectAndCount(c, "gswitch_route_packets_total"); n != MaxRouteMetrics {
		t.Fatalf("%d route series, want %d", n, MaxRouteMetrics)
	}
	if n := testutil.CollectAndCount(c, "gswitch_route_nexthop_packets_total"); n != MaxRouteMetrics {
		t.Fatalf("%d next-hop series, want %d", n, MaxRouteMetrics)
	}
}
