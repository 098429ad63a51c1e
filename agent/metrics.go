package agent

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/internal/prom"
)

// metricsHandler is /metrics: the Prometheus text exposition of the
// engine, the switch, the OpenFlow agent and the router, in that order.
// It is the one place that knows the writers, so that a registry of
// collectors can replace it whole.
func (d *Agent) metricsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if err := d.eng.WriteMetrics(w); err != nil {
			return
		}
		_ = pipeline.WriteMetrics(w, d.sw)
		pw := prom.New(w)
		pw.Head("gswitch_openflow_connections", "gauge", "OpenFlow sessions past the handshake (controllers and listener clients such as ovs-ofctl).")
		pw.Printf("gswitch_openflow_connections %d\n", d.agent.Connections())
		pw.Head("gswitch_openflow_controllers", "gauge", "OpenFlow sessions to the configured controllers (--controller); 0 puts a standalone switch in learning mode.")
		pw.Printf("gswitch_openflow_controllers %d\n", d.agent.Controllers())
		if d.router != nil {
			_ = d.router.WriteMetrics(w)
		}
	})
}

// serveMetrics serves /metrics on the metrics listener until ctx is done.
func (d *Agent) serveMetrics(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.Handle("/metrics", d.metricsHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(d.metL); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
