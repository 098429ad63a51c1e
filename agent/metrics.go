package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gswitch/gswitch/gpu"
)

// metricsHandler is /metrics: a Prometheus registry of the engine's, the
// switch's and (with router ports) the router's collectors, which read the
// datapath's counters at scrape time, the OpenFlow agent's session gauges,
// and the Go runtime and process collectors (go_*, process_*), served by
// promhttp. A collector that fails a scrape is logged and the rest is
// served.
func (d *Agent) metricsHandler() (http.Handler, error) {
	reg := prometheus.NewRegistry()
	cs := []prometheus.Collector{
		d.eng.Collector(),
		d.sw.Collector(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gswitch_openflow_connections",
			Help: "OpenFlow sessions past the handshake (controllers and listener clients such as ovs-ofctl)."},
			func() float64 { return float64(d.agent.Connections()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gswitch_openflow_controllers",
			Help: "OpenFlow sessions to the configured controllers (--controller); 0 puts a standalone switch in learning mode."},
			func() float64 { return float64(d.agent.Controllers()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gswitch_openflow_packet_in_rate_limited_total",
			Help: "Packet-ins not sent to an OpenFlow connection because of its rate limit (controller_rate_limit), summed over connections."},
			func() float64 { return float64(d.agent.PacketInsLimited()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gswitch_openflow_output_drops_total",
			Help: "OpenFlow connections dropped because the peer stopped reading (write_timeout, max_output_bytes)."},
			func() float64 { return float64(d.agent.OutputDrops()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	if d.router != nil {
		cs = append(cs, d.router.Collector())
	}
	cs = append(cs, d.coalescerCollectors()...)
	cs = append(cs, d.gathererCollectors()...)
	cs = append(cs, d.p4rtCollectors()...)
	cs = append(cs, d.reCollectors()...)
	cs = append(cs, d.pubsubCollectors()...)
	if d.filters != nil {
		cs = append(cs, d.filters.Collector())
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("metrics: %w", err)
		}
	}
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	}), nil
}

// serveMetrics serves /metrics on the metrics listener until ctx is done.
func (d *Agent) serveMetrics(ctx context.Context) error {
	h, err := d.metricsHandler()
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	// Timeouts bound what a slow or stuck scraper holds: 5 s for the
	// request's headers, 30 s to write the page, 60 s idle.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 60 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(d.metL); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// coalescerCollectors are the shared device batches' counters
// (gpu.Coalescer), with a device only.
func (d *Agent) coalescerCollectors() []prometheus.Collector {
	if d.co == nil {
		return nil
	}
	counter := func(name, help string, labels prometheus.Labels, v func(gpu.CoalescerStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v(d.co.Stats())) })
	}
	const closedHelp = "Shared device batches closed, by why: full (the largest batch), delay (--max-delay), quiet (every receive queue waiting), idle (--min-batch keys with a device slot free)."
	return []prometheus.Collector{
		counter("gswitch_coalescer_batches_total", "Shared device batches looked up (the lookups of all ports and receive queues joined per table).", nil,
			func(s gpu.CoalescerStats) uint64 { return s.Batches }),
		counter("gswitch_coalescer_keys_total", "Keys in the shared device batches.", nil, func(s gpu.CoalescerStats) uint64 { return s.Keys }),
		counter("gswitch_coalescer_direct_total", "Lookups of tables no device serves, passed straight to the CPU without waiting.", nil,
			func(s gpu.CoalescerStats) uint64 { return s.Direct }),
		counter("gswitch_coalescer_closed_total", closedHelp, prometheus.Labels{"why": "full"}, func(s gpu.CoalescerStats) uint64 { return s.ByFull }),
		counter("gswitch_coalescer_closed_total", closedHelp, prometheus.Labels{"why": "delay"}, func(s gpu.CoalescerStats) uint64 { return s.ByDelay }),
		counter("gswitch_coalescer_closed_total", closedHelp, prometheus.Labels{"why": "quiet"}, func(s gpu.CoalescerStats) uint64 { return s.ByQuiet }),
		counter("gswitch_coalescer_closed_total", closedHelp, prometheus.Labels{"why": "idle"}, func(s gpu.CoalescerStats) uint64 { return s.ByIdle }),
	}
}

// gathererCollectors are the workers' shared batches' counters
// (gpu.Gatherer, --worker-shared), when they are on.
func (d *Agent) gathererCollectors() []prometheus.Collector {
	if d.ga == nil {
		return nil
	}
	counter := func(name, help string, labels prometheus.Labels, v func(gpu.GatherStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v(d.ga.Stats())) })
	}
	const closedHelp = "The datapath workers' shared device batches closed, by why: full (no room for a run's keys), idle (a device slot free), wait (a worker waited for its run's results)."
	return []prometheus.Collector{
		counter("gswitch_gatherer_batches_total", "The datapath workers' shared device batches submitted (--worker-shared).", nil,
			func(s gpu.GatherStats) uint64 { return s.Batches }),
		counter("gswitch_gatherer_keys_total", "Keys in the workers' shared device batches.", nil, func(s gpu.GatherStats) uint64 { return s.Keys }),
		counter("gswitch_gatherer_shares_total", "Workers' runs whose first lookup went into a shared device batch.", nil,
			func(s gpu.GatherStats) uint64 { return s.Shares }),
		counter("gswitch_gatherer_closed_total", closedHelp, prometheus.Labels{"why": "full"}, func(s gpu.GatherStats) uint64 { return s.ByFull }),
		counter("gswitch_gatherer_closed_total", closedHelp, prometheus.Labels{"why": "idle"}, func(s gpu.GatherStats) uint64 { return s.ByIdle }),
		counter("gswitch_gatherer_closed_total", closedHelp, prometheus.Labels{"why": "wait"}, func(s gpu.GatherStats) uint64 { return s.ByWait }),
	}
}

// p4rtCollectors are the P4Runtime server's packet-in counters, when it
// is on.
func (d *Agent) p4rtCollectors() []prometheus.Collector {
	if d.p4 == nil {
		return nil
	}
	p4 := d.p4
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gswitch_p4rt_packet_ins_total",
			Help: "Packet-ins sent to the P4Runtime primary's stream."}, func() float64 { return float64(p4.Stats().PacketIns) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gswitch_p4rt_packet_in_drops_total",
			Help: "Packet-ins dropped because a stream's send queue was full."}, func() float64 { return float64(p4.Stats().PacketInDrops) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gswitch_p4rt_packet_ins_filtered_total",
			Help: "Packet-ins the P4 program did not send to the CPU (TTL expiry), never sent."}, func() float64 { return float64(p4.Stats().PacketInsFiltered) }),
	}
}
