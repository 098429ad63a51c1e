package gpu

import (
	"io"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gswitch/gswitch/internal/prom"
)

// The Engine's metrics. The CPU's keys carry device="" (the same series as
// no device label, for Prometheus) because the library wants one label set
// per metric name.
var (
	descDeviceUp = prometheus.NewDesc("gswitch_backend_device_up",
		"Whether the device serves lookups (0: failed, its lookups run on the CPU).", []string{"device", "name"}, nil)
	descDeviceMemory = prometheus.NewDesc("gswitch_backend_device_memory_bytes",
		"Device memory held by the tables and buffers.", []string{"device"}, nil)
	descFallbacks = prometheus.NewDesc("gswitch_backend_fallbacks_total",
		"Device lookups that failed and were answered by the CPU backend.", nil, nil)
	descKeys = prometheus.NewDesc("gswitch_backend_keys_total",
		"Keys looked up, by backend.", []string{"backend", "device"}, nil)
)

// engineCollector is the Engine as a prometheus.Collector.
type engineCollector struct{ e *Engine }

// Collector returns a prometheus.Collector of the Engine's state, read
// from its counters at each scrape: gswitch_backend_device_up{device,name}
// (1 serving, 0 failed), gswitch_backend_device_memory_bytes{device},
// gswitch_backend_fallbacks_total and
// gswitch_backend_keys_total{backend="cpu"|"device",device}.
func (e *Engine) Collector() prometheus.Collector { return engineCollector{e} }

func (c engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDeviceUp, descDeviceMemory, descFallbacks, descKeys} {
		ch <- d
	}
}

func (c engineCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.e.Stats()
	for i, d := range s.Devices {
		dev := strconv.Itoa(i)
		ch <- prom.Const(descDeviceUp, prometheus.GaugeValue, prom.Bool(d.Up), dev, d.Name)
		ch <- prom.Const(descDeviceMemory, prometheus.GaugeValue, float64(d.Memory), dev)
		ch <- prom.Const(descKeys, prometheus.CounterValue, float64(d.Keys), "device", dev)
	}
	ch <- prom.Const(descFallbacks, prometheus.CounterValue, float64(s.Fallbacks))
	ch <- prom.Const(descKeys, prometheus.CounterValue, float64(s.KeysOnCPU), "cpu", "")
}

// WriteMetrics writes the Engine's Collector in the Prometheus text format.
func (e *Engine) WriteMetrics(w io.Writer) error { return prom.WriteText(w, e.Collector()) }
