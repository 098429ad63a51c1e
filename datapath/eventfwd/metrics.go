package eventfwd

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gswitch/gswitch/internal/prom"
)

var (
	mReceived  = prometheus.NewDesc("gswitch_pubsub_events_received_total", "Well-formed event packets received on the event ports.", nil, nil)
	mMalformed = prometheus.NewDesc("gswitch_pubsub_events_malformed_total", "Event packets dropped because their payload did not decode.", nil, nil)
	mMatched   = prometheus.NewDesc("gswitch_pubsub_events_matched_total", "Events delivered to at least one port.", nil, nil)
	mDelivered = prometheus.NewDesc("gswitch_pubsub_events_delivered_total", "Event copies sent (one per event and output port).", nil, nil)
	mPort      = prometheus.NewDesc("gswitch_pubsub_port_deliveries_total", "Event copies sent, per output port.", []string{"port"}, nil)
)

type collector struct{ s *Stage }

// Collector returns a prometheus.Collector of the stage's counters, read
// at each scrape: gswitch_pubsub_events_{received,malformed,matched,
// delivered}_total and gswitch_pubsub_port_deliveries_total{port}.
func (s *Stage) Collector() prometheus.Collector { return collector{s} }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{mReceived, mMalformed, mMatched, mDelivered, mPort} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	k := c.s.Counters()
	ch <- prom.Const(mReceived, prometheus.CounterValue, float64(k.Received))
	ch <- prom.Const(mMalformed, prometheus.CounterValue, float64(k.Malformed))
	ch <- prom.Const(mMatched, prometheus.CounterValue, float64(k.Matched))
	ch <- prom.Const(mDelivered, prometheus.CounterValue, float64(k.Delivered))
	for p, n := range k.PortDeliveries {
		ch <- prom.Const(mPort, prometheus.CounterValue, float64(n), strconv.FormatUint(uint64(p), 10))
	}
}
