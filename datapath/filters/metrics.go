package filters

import "github.com/prometheus/client_golang/prometheus"

var (
	descPackets = prometheus.NewDesc("gswitch_filter_packets_total",
		"Packets a live filter accepted (frames received on its ports).", []string{"filter"}, nil)
	descBytes = prometheus.NewDesc("gswitch_filter_bytes_total",
		"Bytes of the packets a live filter accepted.", []string{"filter"}, nil)
	descCaptured = prometheus.NewDesc("gswitch_filter_capture_packets_total",
		"Packets written to a live filter's capture file.", []string{"filter"}, nil)
	descDropped = prometheus.NewDesc("gswitch_filter_capture_drops_total",
		"Packets a live filter accepted but its capture dropped (the writer's queue was full).", []string{"filter"}, nil)
	descFilters = prometheus.NewDesc("gswitch_filters",
		"Live filters installed.", nil, nil)
)

// Collector returns a Prometheus collector of the set's per-filter
// counters, read at scrape time.
func (s *Set) Collector() prometheus.Collector { return collector{s} }

type collector struct{ s *Set }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPackets, descBytes, descCaptured, descDropped, descFilters} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	fs := c.s.Filters()
	ch <- prometheus.MustNewConstMetric(descFilters, prometheus.GaugeValue, float64(len(fs)))
	for _, f := range fs {
		ch <- prometheus.MustNewConstMetric(descPackets, prometheus.CounterValue, float64(f.Packets), f.Name)
		ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(f.Bytes), f.Name)
		if f.Capture != "" {
			ch <- prometheus.MustNewConstMetric(descCaptured, prometheus.CounterValue, float64(f.Captured), f.Name)
			ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(f.Dropped), f.Name)
		}
	}
}
