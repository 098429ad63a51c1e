package l3

import (
	"io"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

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

// MaxRouteMetrics bounds the routes per table whose counters the
// Collector reports (a full Internet table would make a scrape of millions
// of lines); gswitchctl routes shows them all.
const MaxRouteMetrics = 10000

// The router's metrics.
var (
	descForwarded = prometheus.NewDesc("gswitch_l3_forwarded_packets_total",
		"Packets routed out of a router port.", nil, nil)
	descForwardedBytes = prometheus.NewDesc("gswitch_l3_forwarded_bytes_total",
		"Bytes routed out of a router port.", nil, nil)
	descDrops = prometheus.NewDesc("gswitch_l3_drops_total",
		"Frames received on router ports and dropped, by reason.", []string{"reason"}, nil)
	descSent = prometheus.NewDesc("gswitch_l3_sent_total",
		"Frames the router originated, by kind.", []string{"kind"}, nil)
	descICMPLimited = prometheus.NewDesc("gswitch_l3_icmp_rate_limited_total",
		"ICMP errors not sent because of the rate limit.", nil, nil)
	descQueued = prometheus.NewDesc("gswitch_l3_queued_total",
		"Packets that waited for their next hop's address to be resolved.", nil, nil)
	descNeighbours = prometheus.NewDesc("gswitch_l3_neighbours",
		"Entries in the neighbour table.", nil, nil)
	descRoutePackets = prometheus.NewDesc("gswitch_route_packets_total",
		"Packets routed by a route.", []string{"table", "prefix"}, nil)
	descRouteBytes = prometheus.NewDesc("gswitch_route_bytes_total",
		"Bytes routed by a route.", []string{"table", "prefix"}, nil)
	descRouteNextHop = prometheus.NewDesc("gswitch_route_nexthop_packets_total",
		"Packets routed through one next hop of a route.", []string{"table", "prefix", "nexthop"}, nil)
)

// routerCollector is a Router as a prometheus.Collector.
type routerCollector struct{ r *Router }

// Collector returns a prometheus.Collector of the router's counters, read
// at each scrape from the atomics the datapath keeps:
// gswitch_l3_forwarded_packets_total, gswitch_l3_forwarded_bytes_total,
// gswitch_l3_drops_total{reason}, gswitch_l3_sent_total{kind},
// gswitch_l3_icmp_rate_limited_total, gswitch_l3_queued_total,
// gswitch_l3_neighbours, and per route (the first MaxRouteMetrics of each
// table) gswitch_route_packets_total{table,prefix},
// gswitch_route_bytes_total{table,prefix} and
// gswitch_route_nexthop_packets_total{table,prefix,nexthop}.
func (r *Router) Collector() prometheus.Collector { return routerCollector{r} }

func (c routerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descForwarded, descForwardedBytes, descDrops, descSent, descICMPLimited,
		descQueued, descNeighbours, descRoutePackets, descRouteBytes, descRouteNextHop} {
		ch <- d
	}
}

func (c routerCollector) Collect(ch chan<- prometheus.Metric) {
	const ctr, gge = prometheus.CounterValue, prometheus.GaugeValue
	r := c.r
	k := r.Counters()
	ch <- prom.Const(descForwarded, ctr, float64(k.Forwarded))
	ch <- prom.Const(descForwardedBytes, ctr, float64(k.ForwardedBytes))
	for i := Reason(1); i < NumReasons; i++ {
		ch <- prom.Const(descDrops, ctr, float64(k.Drops[i.String()]), i.String())
	}
	for _, s := range []struct {
		kind string
		n    uint64
	}{{"arp_reply", k.ARPReplies}, {"nd_advert", k.NDAdverts}, {"solicitation", k.Solicitations}, {"echo_reply", k.EchoReplies}, {"icmp_error", k.ICMPErrors}} {
		ch <- prom.Const(descSent, ctr, float64(s.n), s.kind)
	}
	ch <- prom.Const(descICMPLimited, ctr, float64(k.ICMPLimited))
	ch <- prom.Const(descQueued, ctr, float64(k.Queued))
	ch <- prom.Const(descNeighbours, gge, float64(k.Neighbours))
	for _, id := range r.Tables() {
		rt := r.tables[id]
		if rt == nil {
			continue
		}
		table := strconv.FormatUint(uint64(id), 10)
		for i, e := range rt.t.List() {
			if i >= MaxRouteMetrics {
				break
			}
			pk, by, nhs := e.Counters()
			prefix := e.Prefix.String()
			ch <- prom.Const(descRoutePackets, ctr, float64(pk), table, prefix)
			ch <- prom.Const(descRouteBytes, ctr, float64(by), table, prefix)
			for _, nh := range nhs {
				ch <- prom.Const(descRouteNextHop, ctr, float64(nh.Packets), table, prefix, nh.NextHop.String())
			}
		}
	}
}

// WriteMetrics writes the router's Collector in the Prometheus text format.
func (r *Router) WriteMetrics(w io.Writer) error { return prom.WriteText(w, r.Collector()) }
