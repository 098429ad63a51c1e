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
