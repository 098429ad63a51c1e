package l3

import (
	"io"

	"github.com/gswitch/gswitch/internal/prom"
)

// Counters are the router's counts (gswitchctl stats, metrics).
type Counters struct {
	Forwarded      uint64            `json:"forwarded"`
	ForwardedBytes uint64            `json:"forwarded_bytes"`
	Drops          map[string]uint64 `json:"drops"` // by Reason name
	ARPReplies     uint64            `json:"arp_replies"`
	NDAdverts      uint64            `json:"nd_adverts"`
	Solicitations  uint64            `json:"solicitations"` // ARP requests and neighbour solicitations sent
	EchoReplies    uint64            `json:"echo_replies"`
	ICMPErrors     uint64            `json:"icmp_errors"`       // time exceeded and unreachable sent
	ICMPLimited    uint64            `json:"icmp_rate_limited"` // ICMP errors not sent: over ICMPRate
	Queued         uint64            `json:"queued"`            // packets that waited for resolution
	Neighbours     int               `json:"neighbours"`
}

// Counters returns the router's counters.
func (r *Router) Counters() Counters {
	c := Counters{
		Forwarded: r.forwarded.Load(), ForwardedBytes: r.forwardedBytes.Load(), Drops: map[string]uint64{},
		ARPReplies: r.arpReplies.Load(), NDAdverts: r.ndAdverts.Load(), Solicitations: r.solicits.Load(),
		EchoReplies: r.echoes.Load(), ICMPErrors: r.errors.Load(), ICMPLimited: r.icmpLimited.Load(),
		Queued: r.queued.Load(), Neighbours: r.neigh.Len(),
	}
	for i := Reason(1); i < NumReasons; i++ {
		c.Drops[i.String()] = r.drops[i].Load()
	}
	return c
}

// MaxRouteMetrics bounds the routes per table whose counters WriteMetrics
// writes (a full Internet table would make a scrape of millions of lines);
// gswitchctl routes shows them all.
const MaxRouteMetrics = 10000

// WriteMetrics writes the router's counters in the Prometheus text format:
// gswitch_l3_forwarded_packets_total, gswitch_l3_forwarded_bytes_total,
// gswitch_l3_drops_total{reason}, gswitch_l3_sent_total{kind},
// gswitch_l3_icmp_rate_limited_total, gswitch_l3_queued_total,
// gswitch_l3_neighbours, and per route (the first MaxRouteMetrics of each
// table) gswitch_route_packets_total{table,prefix},
// gswitch_route_bytes_total{table,prefix} and
// gswitch_route_nexthop_packets_total{table,prefix,nexthop}.
func (r *Router) WriteMetrics(w io.Writer) error {
	pw := prom.New(w)
	p := pw.Printf
	head := pw.Head
	c := r.Counters()
	head("gswitch_l3_forwarded_packets_total", "counter", "Packets routed out of a router port.")
	p("gswitch_l3_forwarded_packets_total %d\n", c.Forwarded)
	head("gswitch_l3_forwarded_bytes_total", "counter", "Bytes routed out of a router port.")
	p("gswitch_l3_forwarded_bytes_total %d\n", c.ForwardedBytes)
	head("gswitch_l3_drops_total", "counter", "Frames received on router ports and dropped, by reason.")
	for i := Reason(1); i < NumReasons; i++ {
		p("gswitch_l3_drops_total{reason=%q} %d\n", i.String(), c.Drops[i.String()])
	}
	head("gswitch_l3_sent_total", "counter", "Frames the router originated, by kind.")
	for _, k := range []struct {
		kind string
		n    uint64
	}{{"arp_reply", c.ARPReplies}, {"nd_advert", c.NDAdverts}, {"solicitation", c.Solicitations}, {"echo_reply", c.EchoReplies}, {"icmp_error", c.ICMPErrors}} {
		p("gswitch_l3_sent_total{kind=%q} %d\n", k.kind, k.n)
	}
	head("gswitch_l3_icmp_rate_limited_total", "counter", "ICMP errors not sent because of the rate limit.")
	p("gswitch_l3_icmp_rate_limited_total %d\n", c.ICMPLimited)
	head("gswitch_l3_queued_total", "counter", "Packets that waited for their next hop's address to be resolved.")
	p("gswitch_l3_queued_total %d\n", c.Queued)
	head("gswitch_l3_neighbours", "gauge", "Entries in the neighbour table.")
	p("gswitch_l3_neighbours %d\n", c.Neighbours)
	head("gswitch_route_packets_total", "counter", "Packets routed by a route.")
	head("gswitch_route_bytes_total", "counter", "Bytes routed by a route.")
	head("gswitch_route_nexthop_packets_total", "counter", "Packets routed through one next hop of a route.")
	for _, id := range r.Tables() {
		rt := r.tables[id]
		if rt == nil {
			continue
		}
		for i, e := range rt.t.List() {
			if i >= MaxRouteMetrics {
				break
			}
			pk, by, nhs := e.Counters()
			p("gswitch_route_packets_total{table=\"%d\",prefix=\"%s\"} %d\n", id, e.Prefix, pk)
			p("gswitch_route_bytes_total{table=\"%d\",prefix=\"%s\"} %d\n", id, e.Prefix, by)
			for _, nh := range nhs {
				p("gswitch_route_nexthop_packets_total{table=\"%d\",prefix=\"%s\",nexthop=%q} %d\n", id, e.Prefix, nh.NextHop.String(), nh.Packets)
			}
		}
	}
	return pw.Err()
}
