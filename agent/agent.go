package agent

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/controlproto/p4rt"
	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/l3"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/internal/prom"
	"github.com/gswitch/gswitch/tables/route"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errConfig):
		fmt.Fprintln(os.Stderr, "gswitchd:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "gswitchd:", err)
		os.Exit(1)
	}
}

// run starts the daemon and returns when ctx is done (a signal) or a part
// of it fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f := newFlags()
	f.fs.SetOutput(stderr)
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errConfig, err)
	}
	if f.fs.NArg() > 0 {
		return configErr("unexpected argument %q", f.fs.Arg(0))
	}
	st, err := f.load()
	if err != nil {
		return err
	}
	if f.printConfig {
		return yaml.NewEncoder(stdout).Encode(st.Config)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: st.logLevel}))
	slog.SetDefault(log)
	d, err := start(st, log)
	if err != nil {
		return err
	}
	return d.serve(ctx)
}

// daemon is a started gswitchd: its engine, switch, ports and agent.
type daemon struct {
	st           *settings
	log          *slog.Logger
	eng          *gpu.Engine
	sw           *pipeline.Switch
	agent        *openflow.Agent
	ports        map[uint32]*afpacket.Port
	ctlL         net.Listener
	metL         net.Listener
	started      time.Time
	router       *l3.Router              // nil without router ports (router.go)
	routes       map[uint32]*route.Table // route tables by id
	routeSources                         // static routes and the kernel FIB mirror (routes.go)
	p4           *p4rt.Server            // nil with p4rt listen off (p4rt.go)
	p4L          net.Listener
}

// start opens everything that can fail at start, so that a mistake is
// reported before the daemon serves.
func start(st *settings, log *slog.Logger) (d *daemon, err error) {
	d = &daemon{st: st, log: log, ports: map[uint32]*afpacket.Port{}, started: time.Now()}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	var ordinals []int
	if len(st.GPUs) > 0 {
		ordinals = st.GPUs
	}
	if d.eng, err = gpu.Open(st.Backend, ordinals, st.MinBatch, log); err != nil {
		return d, fmt.Errorf("backend %s: %w", st.Backend, err)
	}
	if err := d.newRouter(); err != nil {
		return d, err
	}
	d.sw, err = pipeline.New(pipeline.Config{
		DatapathID: st.dpid, Tables: st.Tables, MaxFlows: st.MaxFlows, Classifier: d.eng,
		FailMode: st.failMode, MaxDelay: st.MaxDelay, BatchSize: st.BatchSize, Logger: log,
		Router: d.pipelineRouter(),
	})
	if err != nil {
		return d, err
	}
	if err := d.openPorts(); err != nil {
		return d, err
	}
	if err := d.startRoutes(); err != nil {
		return d, err
	}
	if err := d.startStaticRoutes(); err != nil {
		return d, err
	}
	if err := d.startKernelFIB(); err != nil {
		return d, err
	}
	d.agent = openflow.NewAgent(ofGuard{d.sw, func() *p4rt.Server { return d.p4 }}, openflow.Options{Logf: func(format string, args ...any) {
		log.Info(fmt.Sprintf(format, args...), "component", "openflow")
	}, TLSClient: st.tlsClient, TLSServer: st.tlsServer})
	if err := d.startP4RT(); err != nil {
		return d, err
	}
	d.sw.SetController(controllers{of: d.agent, p4: d.p4})
	if d.ctlL, err = ctl.Listen(st.CtlSocket); err != nil {
		return d, err
	}
	if st.Metrics != "" {
		if d.metL, err = net.Listen("tcp", st.Metrics); err != nil {
			return d, fmt.Errorf("metrics: %w", err)
		}
	}
	return d, nil
}

// blockTimeout is the ring's block retire timeout for a batch delay: the
// kernel's resolution is a millisecond.
func blockTimeout(maxDelay time.Duration) time.Duration {
	return max(maxDelay.Round(time.Millisecond), time.Millisecond)
}

func (d *daemon) openPorts() error {
	for _, pc := range d.st.Ports {
		p, err := afpacket.Open(pc.Interface, afpacket.Config{Promiscuous: true, BlockTimeout: blockTimeout(d.st.MaxDelay),
			Queues: d.st.rxQueues(pc)})
		if err != nil {
			return fmt.Errorf("port %d (%s): %w", pc.Number, pc.Interface, err)
		}
		d.ports[pc.Number] = p
		if err := d.sw.AddPort(pc.Number, p); err != nil {
			return err
		}
		d.log.Info("port attached", "port", pc.Number, "link", p.Link().String(), "rx_queues", p.Queues())
	}
	return nil
}

// serve runs every part until ctx is done, then shuts down: the agent's
// connections close, the ports close (waking their readers), the engine
// closes.
func (d *daemon) serve(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer d.close()
	var wg sync.WaitGroup
	goRun := func(name string, f func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(); err != nil && ctx.Err() == nil {
				cancel(fmt.Errorf("%s: %w", name, err))
			}
		}()
	}
	for no, p := range d.ports {
		for i := range p.Queues() { // one datapath loop per receive queue
			goRun(fmt.Sprintf("port %d queue %d", no, i), func() error { return d.sw.RunPort(ctx, no, p.Queue(i)) })
		}
		goRun("port watch", func() error { d.sw.WatchPort(ctx, no, p.Events()); return nil })
	}
	goRun("expiry", func() error { d.sw.RunExpiry(ctx, 250*time.Millisecond); return nil })
	d.runRouter(ctx, goRun)
	d.runKernelFIB(ctx, goRun)
	targets := append(append([]string(nil), d.st.Listen...), d.st.Controllers...)
	if len(targets) > 0 {
		goRun("openflow", func() error { return d.agent.Run(ctx, targets...) })
	}
	if d.p4L != nil {
		goRun("p4rt", func() error { return d.serveP4RT(ctx) })
	}
	goRun("ctl socket", func() error { return ctl.Serve(ctx, d.ctlL, d) })
	if d.metL != nil {
		goRun("metrics", func() error { return d.serveMetrics(ctx) })
	}
	d.log.Info("gswitchd running", "dpid", fmt.Sprintf("%#x", d.st.dpid), "ports", len(d.ports),
		"targets", targets, "fail_mode", d.st.failMode.String(), "backend", d.eng.Device(), "ctl_socket", d.st.CtlSocket)
	<-ctx.Done()
	cause := context.Cause(ctx)
	d.log.Info("gswitchd stopping", "cause", cause)
	for _, p := range d.ports {
		p.Close() // wakes the readers
	}
	wg.Wait()
	if errors.Is(cause, context.Canceled) {
		return nil
	}
	return cause
}

func (d *daemon) close() {
	for _, p := range d.ports {
		p.Close()
	}
	if d.ctlL != nil {
		d.ctlL.Close()
	}
	if d.metL != nil {
		d.metL.Close()
	}
	if d.p4L != nil {
		d.p4L.Close()
	}
	if d.eng != nil {
		d.eng.Close()
	}
}

// PortInfos, TableInfos, Flows, Backend, Groups, Meters and Stats make the daemon a
// ctl.Source.
func (d *daemon) PortInfos() []pipeline.PortInfo   { return d.sw.PortInfos() }
func (d *daemon) TableInfos() []pipeline.TableInfo { return d.sw.TableInfos() }
func (d *daemon) Flows() []pipeline.FlowInfo       { return d.sw.Flows() }
func (d *daemon) Backend() gpu.EngineStats         { return d.eng.Stats() }
func (d *daemon) Groups() []pipeline.GroupInfo     { return d.sw.Groups() }
func (d *daemon) Meters() []pipeline.MeterInfo     { return d.sw.Meters() }
func (d *daemon) Stats() ctl.Stats {
	return ctl.Stats{DatapathID: d.st.dpid, Uptime: time.Since(d.started), Backend: d.eng.Device(),
		Controller: d.agent.Connections(), Counters: d.sw.Counters()}
}

func (d *daemon) serveMetrics(ctx context.Context) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
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
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(d.metL); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
