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
	descResidentLookups = prometheus.NewDesc("gswitch_backend_resident_lookups_total",
		"Lookups posted to the device's resident kernel (--resident-lookups; only devices with resident lookups on).", []string{"device"}, nil)
	descResidentLaunches = prometheus.NewDesc("gswitch_backend_resident_launches_total",
		"Launches of the device's resident kernel (each leaves once no lookup has come for its idle time, --resident-idle, or when stopped for a free, an allocation or a newer version of the tables).", []string{"device"}, nil)
	descTableBackend = prometheus.NewDesc("gswitch_table_backend",
		"1 for the backend (cpu or device) that serves the table's lookups now, 0 for the other.", []string{"table", "backend"}, nil)
	descTableCost = prometheus.NewDesc("gswitch_table_lookup_cost_seconds",
		"A flow table's lookup cost per key, in seconds, at its last calibration (--backend auto): on the CPU, and on the device amortised over a batch.", []string{"table", "backend"}, nil)
)

// engineCollector is the Engine as a prometheus.Collector.
type engineCollector struct{ e *Engine }

// Collector returns a prometheus.Collector of the Engine's state, read
// from its counters at each scrape: gswitch_backend_device_up{device,name}
// (1 serving, 0 failed), gswitch_backend_device_memory_bytes{device},
// gswitch_backend_fallbacks_total,
// gswitch_backend_keys_total{backend="cpu"|"device",device},
// for a device with resident lookups on
// gswitch_backend_resident_{lookups,launches}_total{device},
// gswitch_table_backend{table,backend="cpu"|"device"} (1 where the table is
// served) and, for calibrated tables,
// gswitch_table_lookup_cost_seconds{table,backend}.
func (e *Engine) Collector() prometheus.Collector { return engineCollector{e} }

func (c engineCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDeviceUp, descDeviceMemory, descFallbacks, descKeys, descResidentLookups, descResidentLaunches, descTableBackend, descTableCost} {
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
		if d.Resident {
			ch <- prom.Const(descResidentLookups, prometheus.CounterValue, float64(d.ResidentLookups), dev)
			ch <- prom.Const(descResidentLaunches, prometheus.CounterValue, float64(d.ResidentLaunches), dev)
		}
	}
	ch <- prom.Const(descFallbacks, prometheus.CounterValue, float64(s.Fallbacks))
	ch <- prom.Const(descKeys, prometheus.CounterValue, float64(s.KeysOnCPU), "cpu", "")
	for _, t := range s.Tables {
		id := strconv.FormatUint(uint64(t.Table), 10)
		for _, b := range []string{"cpu", "device"} {
			ch <- prom.Const(descTableBackend, prometheus.GaugeValue, prom.Bool(t.Backend == b), id, b)
		}
		if t.CPUNsPerKey > 0 {
			ch <- prom.Const(descTableCost, prometheus.GaugeValue, t.CPUNsPerKey*1e-9, id, "cpu")
		}
		if t.DeviceNsPerKey > 0 {
			ch <- prom.Const(descTableCost, prometheus.GaugeValue, t.DeviceNsPerKey*1e-9, id, "device")
		}
	}
}

// WriteMetrics writes the Engine's Collector in the Prometheus text format.
func (e *Engine) WriteMetrics(w io.Writer) error { return prom.WriteText(w, e.Collector()) }
