package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netns"
	"gopkg.in/yaml.v3"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/controlproto/p4rt"
	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/filters"
	"github.com/gswitch/gswitch/datapath/l3"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/route"
)

// Run is gswitchd: it builds the configuration from the flags (parsed
// already), prints it and returns with --print-config, or else starts an
// Agent logging to stderr and runs it until ctx is done (a signal) or a
// part of it fails. A configuration mistake is an error wrapping
// ErrConfig (exit status 2).
func Run(ctx context.Context, f *Flags, stdout, stderr io.Writer) error {
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
	d, err := start(st, log, nil)
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// Agent is a started gswitchd: its engine, switch, ports, router, route
// sources and control planes. See the package documentation for what it
// owns and the order things start and stop in.
type Agent struct {
	st           *settings
	log          *slog.Logger
	eng          *gpu.Engine
	co           *gpu.Coalescer // shared device batches; nil without a device (the synchronous path)
	ga           *gpu.Gatherer  // the workers' shared device batches (--worker-shared); nil: off
	ids          *TableIDs      // the engine's table-id ranges (tableids.go)
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
	re           *reLink                       // nil with redundancy elimination off (re.go)
	ps           *pubsubPart                   // nil with pubsub off (pubsub.go)
	rxStages     map[uint32][]pipeline.RxStage // per port, in order (rxstages.go)
	filters      *filters.Set                  // live filters, a receive stage of every port (filters.go)

	runMu     sync.Mutex
	ran       bool
	stop      context.CancelFunc // cancels Run's context; nil until Run
	done      chan struct{}      // closed when Run returns
	closeOnce sync.Once
}

// New checks cfg completely (a mistake is a one-line error wrapping
// ErrConfig) and opens everything that can fail at start, so that a
// mistake is reported before the agent serves: the engine, the router and
// its route tables, the switch and its ports, the route sources, the
// OpenFlow agent, the P4Runtime server and the listeners of the control
// socket and the metrics. Nothing runs until Run. log nil: slog.Default().
func New(cfg Config, log *slog.Logger) (*Agent, error) {
	return NewWithDevices(cfg, log, nil)
}

// NewWithDevices is New with switch ports given by the caller instead of
// interfaces (cfg's ports then name none of devs' numbers): benchmarks and
// tests drive the same graph as gswitchd on devices of their own, feeding
// frames through Switch().Process. Run reads no frames from them.
func NewWithDevices(cfg Config, log *slog.Logger, devs map[uint32]pipeline.Device) (*Agent, error) {
	st, err := check(cfg)
	if err != nil {
		return nil, err
	}
	for _, pc := range st.Ports {
		if devs[pc.Number] != nil {
			return nil, fmt.Errorf("%w: port %d is both configured and given as a device", ErrConfig, pc.Number)
		}
	}
	if log == nil {
		log = slog.Default()
	}
	return start(st, log, devs)
}

// start opens everything that can fail at start; on an error it closes
// what it opened.
func start(st *settings, log *slog.Logger, devs map[uint32]pipeline.Device) (d *Agent, err error) {
	d = &Agent{st: st, log: log, ports: map[uint32]*afpacket.Port{}, started: time.Now(), ids: NewTableIDs()}
	d.kfibNS = netns.None()
	defer func() {
		if err != nil {
			d.close()
			d = nil
		}
	}()
	var ordinals []int
	if len(st.GPUs) > 0 {
		ordinals = st.GPUs
	}
	ecfg := gpu.EngineConfig{MinBatch: st.MinBatch, Logger: log, Auto: gpu.AutoConfig{Batch: st.calibrationBatch(), LPMBatch: st.BatchSize}}
	if st.Resident > 0 {
		ecfg.Resident = gpu.ResidentConfig{Slots: st.Resident, Idle: st.ResidentIdle}
	}
	open := gpu.OpenConfig
	if st.openEngine != nil {
		open = st.openEngine
	}
	if d.eng, err = open(st.Backend, ordinals, ecfg); err != nil {
		return d, fmt.Errorf("backend %s: %w", st.Backend, err)
	}
	lpmBase, err := d.reserveTableIDs()
	if err != nil {
		return d, err
	}
	if err := d.newRouter(); err != nil {
		return d, err
	}
	shared := d.eng.Devices() > 0 && st.RxWorkers == 0 // datapath workers look up straight to the engine
	rxDelay, devDelay := st.batchDelays(shared)
	if shared {
		// Shared device batches across ports and queues (GSwitch §7.4).
		if d.co, err = gpu.NewCoalescer(d.eng, gpu.CoalescerConfig{MinBatch: st.MinBatch, MaxDelay: devDelay}); err != nil {
			return d, err
		}
	}
	if st.WorkerShared > 0 {
		if d.ga, err = gpu.NewGatherer(d.eng, gpu.GatherConfig{Depth: st.WorkerShared,
			WaitForSlot: os.Getenv("GSWITCH_GATHER_WAIT") == "slot"}); err != nil {
			return d, err
		}
	}
	d.sw, err = pipeline.New(pipeline.Config{
		DatapathID: st.dpid, Tables: st.Tables, MaxFlows: st.MaxFlows, Classifier: d.eng, Algo: st.algo,
		FailMode: st.failMode, MaxDelay: rxDelay, BatchSize: st.BatchSize, Logger: log,
		Router: d.pipelineRouter(), LPMIDBase: lpmBase, Coalescer: d.co, InFlight: st.InFlight, Depth: st.BatchDepth,
		WorkerInFlight: st.WorkerFlight, WorkerEager: st.WorkerClose == "eager", Gatherer: d.ga,
	})
	if err != nil {
		return d, err
	}
	if err := d.openPorts(); err != nil {
		return d, err
	}
	for no, dev := range devs {
		if err := d.sw.AddPort(no, dev); err != nil {
			return d, err
		}
	}
	if err := d.startFilters(); err != nil {
		return d, err
	}
	if err := d.startPubSub(); err != nil {
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
	ofOpts := st.OpenFlow.options()
	ofOpts.Logf = func(format string, args ...any) {
		log.Info(fmt.Sprintf(format, args...), "component", "openflow")
	}
	ofOpts.TLSClient, ofOpts.TLSServer = st.tlsClient, st.tlsServer
	d.agent = openflow.NewAgent(ofGuard{d.sw, func() *p4rt.Server { return d.p4 }}, ofOpts)
	warnPlaintext(log, st.Listen)
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
		if beyondLoopback(d.metL.Addr()) {
			log.Warn("the metrics listener is reachable beyond loopback: anyone who can reach it reads the switch's counters (give a loopback address such as 127.0.0.1:9100, or firewall it)",
				"metrics", d.metL.Addr().String())
		}
	}
	return d, nil
}

// beyondLoopback reports whether a listener's address accepts connections
// from other hosts: any address but a loopback one (an unspecified address,
// as ":9100" gives, listens on every interface).
func beyondLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return !ok || !ta.IP.IsLoopback()
}

// blockTimeout is the ring's block retire timeout for a batch delay: the
// kernel's resolution is a millisecond.
func blockTimeout(maxDelay time.Duration) time.Duration {
	return max(maxDelay.Round(time.Millisecond), time.Millisecond)
}

func (d *Agent) openPorts() error {
	for _, pc := range d.st.Ports {
		bs, nb := d.st.rxBlocks()
		p, err := afpacket.Open(pc.Interface, afpacket.Config{Promiscuous: true, BlockTimeout: blockTimeout(d.st.MaxDelay),
			Queues: d.st.rxQueues(pc), Ring: d.st.rxRing(), BlockSize: bs, NumBlocks: nb})
		if err != nil {
			return fmt.Errorf("port %d (%s): %w", pc.Number, pc.Interface, err)
		}
		d.ports[pc.Number] = p
		dev, err := d.reDevice(pc.Number, p)
		if err != nil {
			return err
		}
		if err := d.sw.AddPort(pc.Number, dev); err != nil {
			return err
		}
		if err := d.reStage(pc.Number); err != nil {
			return err
		}
		d.log.Info("port attached", "port", pc.Number, "link", p.Link().String(), "rx_queues", p.Queues(), "rx_ring", d.st.rxRing().String())
	}
	return nil
}

// Run runs every part until ctx is done, Close is called or a part fails,
// then shuts down: the goroutines stop (the ports close, waking their
// readers), the listeners close (the control socket's file is removed),
// the engine closes. It returns nil after ctx's cancellation or Close, and
// the failing part's error otherwise. An Agent runs once.
func (d *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d.runMu.Lock()
	if d.ran {
		d.runMu.Unlock()
		return errors.New("agent: Run after Close, or a second time")
	}
	d.ran, d.stop, d.done = true, func() { cancel(context.Canceled) }, make(chan struct{})
	d.runMu.Unlock()
	defer close(d.done)
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
	d.runDatapath(ctx, goRun)
	for no, p := range d.ports {
		goRun("port watch", func() error { d.sw.WatchPort(ctx, no, p.Events()); return nil })
	}
	goRun("expiry", func() error { d.sw.RunExpiry(ctx, 250*time.Millisecond); return nil })
	d.runRouter(ctx, goRun)
	d.runKernelFIB(ctx, goRun)
	d.runRE(ctx, goRun)
	targets := append(append([]string(nil), d.st.Listen...), d.st.Controllers...)
	if len(targets) > 0 {
		goRun("openflow", func() error { return d.agent.Run(ctx, targets...) })
	}
	if d.p4L != nil {
		goRun("p4rt", func() error { return d.serveP4RT(ctx) })
	}
	d.runPubSub(ctx, goRun)
	goRun("ctl socket", func() error { return ctl.Serve(ctx, d.ctlL, ctlSource{d}) })
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

// Close stops a running agent (as ctx's end does) and waits for Run to
// return, or closes what New opened when Run was never called. It may be
// called more than once, and from any goroutine.
func (d *Agent) Close() {
	d.runMu.Lock()
	ran, stop, done := d.ran, d.stop, d.done
	d.ran = true // a Run after Close refuses
	d.runMu.Unlock()
	if ran && stop != nil {
		stop()
		<-done
		return
	}
	d.close()
}

// close releases everything start opened, once.
func (d *Agent) close() {
	d.closeOnce.Do(func() {
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
		d.closePubSub()
		if d.kfibNS.IsOpen() {
			d.kfibNS.Close()
		}
		d.closeFilters()
		if d.co != nil {
			cs := d.co.Stats()
			d.log.Info("shared device batches", "batches", cs.Batches, "keys", cs.Keys, "lookups", cs.Callers,
				"direct", cs.Direct, "closed_full", cs.ByFull, "closed_delay", cs.ByDelay, "closed_quiet", cs.ByQuiet, "closed_idle", cs.ByIdle, "max_keys", cs.MaxKeys)
			for _, st := range d.co.Stages() { // gswitch_shared_batch_stage_seconds's summary
				d.log.Info("shared batch stage", "stage", st.Stage.String(), "batches", st.N(), "mean", st.Mean(),
					"p50_le", st.Quantile(0.5), "p99_le", st.Quantile(0.99))
			}
		}
		if d.ga != nil {
			gs := d.ga.Stats()
			d.log.Info("workers' shared device batches", "batches", gs.Batches, "keys", gs.Keys, "shares", gs.Shares,
				"closed_full", gs.ByFull, "closed_idle", gs.ByIdle, "closed_wait", gs.ByWait, "max_keys", gs.MaxKeys)
		}
		if d.eng != nil {
			d.eng.Close()
		}
	})
}

// ctlSource is the agent as the control socket's ctl.Source,
// ctl.RouterSource and ctl.RouteSource.
type ctlSource struct{ d *Agent }

func (s ctlSource) PortInfos() []pipeline.PortInfo   { return s.d.sw.PortInfos() }
func (s ctlSource) TableInfos() []pipeline.TableInfo { return s.d.sw.TableInfos() }
func (s ctlSource) Flows() []pipeline.FlowInfo       { return s.d.sw.Flows() }
func (s ctlSource) Backend() gpu.EngineStats         { return s.d.backend() }
func (s ctlSource) Groups() []pipeline.GroupInfo     { return s.d.sw.Groups() }
func (s ctlSource) Meters() []pipeline.MeterInfo     { return s.d.sw.Meters() }
func (s ctlSource) Stats() ctl.Stats {
	d := s.d
	return ctl.Stats{DatapathID: d.st.dpid, Uptime: time.Since(d.started), Backend: d.eng.Device(),
		Controller: d.agent.Connections(), PacketInsLimited: d.agent.PacketInsLimited(), OutputDrops: d.agent.OutputDrops(),
		Counters: d.sw.Counters(), Batches: d.batchPaths()}
}
func (s ctlSource) Neighbours() []l3.NeighInfo { return s.d.neighbours() }
func (s ctlSource) L3Counters() l3.Counters    { return s.d.l3Counters() }
func (s ctlSource) RouteTables() (map[uint32]*route.Table, map[uint32]map[string]map[string]uint64) {
	return s.d.routeTables()
}

// runDatapath starts the datapath's goroutines: a loop per receive queue
// (RunPort), or with rx_workers N that many workers (RunWorker) among
// which the queues are dealt (workerQueues).
func (d *Agent) runDatapath(ctx context.Context, goRun func(string, func() error)) {
	nos := slices.Sorted(maps.Keys(d.ports))
	if d.st.RxWorkers == 0 {
		for _, no := range nos {
			p := d.ports[no]
			for i := range p.Queues() {
				goRun(fmt.Sprintf("port %d queue %d", no, i), func() error { return d.sw.RunPort(ctx, no, p.Queue(i)) })
			}
		}
		return
	}
	queues := make([]int, len(nos))
	for i, no := range nos {
		queues[i] = d.ports[no].Queues()
	}
	deal, total := workerQueues(queues, d.st.RxWorkers), 0
	for k, mine := range deal {
		total += len(mine)
		var qs []pipeline.RxQueue
		for _, pq := range mine {
			no := nos[pq[0]]
			qs = append(qs, pipeline.RxQueue{No: no, Src: d.ports[no].Queue(pq[1])})
		}
		goRun(fmt.Sprintf("datapath worker %d", k), func() error { return d.sw.RunWorker(ctx, qs) })
	}
	d.log.Info("datapath workers", "workers", len(deal), "rx_queues", total)
}

// workerQueues deals the receive queues of ports with queues[i] queues
// each (in port order) among n workers, at most one worker per queue: it
// returns each worker's (port index, queue) pairs. When every port has
// the same number of queues, a multiple of n, worker k takes queues k,
// k+n, ... of every port, which the kernel's flow hash fills evenly
// whichever ports carry the traffic. Otherwise the queues are taken queue
// by queue (every port's queue 0, then every port's queue 1, ...) and
// dealt back and forth (worker 0, 1, ..., n-1, n-1, ..., 1, 0, 0, 1, ...):
// the shares differ by one queue at most, and ports loaded every other
// one (the sending side of pairs of ports, one queue each) still spread
// over every worker, where dealing in turn would give them all to every
// other worker.
func workerQueues(queues []int, n int) [][][2]int {
	var all [][2]int
	for q := 0; ; q++ {
		before := len(all)
		for i, m := range queues {
			if q < m {
				all = append(all, [2]int{i, q})
			}
		}
		if len(all) == before {
			break
		}
	}
	n = min(n, len(all))
	deal := make([][][2]int, n)
	even := len(queues) > 0 && queues[0]%n == 0 && !slices.ContainsFunc(queues, func(m int) bool { return m != queues[0] })
	for j, pq := range all {
		k := pq[1] % n
		if !even {
			if k = j % (2 * n); k >= n {
				k = 2*n - 1 - k
			}
		}
		deal[k] = append(deal[k], pq)
	}
	return deal
}
