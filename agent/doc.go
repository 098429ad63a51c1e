// Package agent is gswitchd's wiring: it turns a configuration into the
// running graph of parts (the lookup engine, the switch pipeline and its
// ports, the router and its route tables, the route sources, the OpenFlow
// agent, the P4Runtime server, the control socket and the metrics server),
// decides which control plane owns the switch, numbers the engine's
// tables, and starts and stops it all. cmd/gswitchd is a small main
// around Run; tests and benchmarks build the same graph with New.
//
// # API
//
//	cfg := agent.DefaultConfig()        // the embedded default.yaml
//	cfg.Backend, cfg.CtlSocket = "cpu", dir+"/g.sock"
//	a, err := agent.New(cfg, logger)    // checks cfg (errors wrap ErrConfig), opens everything
//	go a.Run(ctx)                       // serves until ctx ends, Close, or a part fails
//	a.Switch(), a.Engine(), a.Router(), a.RouteTable(254), a.OpenFlow(), a.P4RT(), a.Port(1),
//	a.TableIDs(), a.CtlSocket(), a.MetricsAddr(), a.P4RTAddr()
//	a.Close()                           // stops Run and waits for it, or frees what New opened
//
// The command line goes through Flags: RegisterFlags(fs), fs.Parse,
// Flags.Config (the checked configuration) and Run(ctx, flags, stdout,
// stderr), which also does --print-config and sets up the log.
//
// # Configuration
//
// Three layers (config.go): the embedded default (default.yaml), the YAML
// file of --config (unknown keys are errors; keys it omits keep their
// defaults) and the flags, each of which overrides its key; a repeatable
// flag (--port, --controller, --listen, --router-port) given at all
// replaces the file's whole list. check validates a Config completely
// before anything opens (interfaces exist, numbers in range, targets well
// formed, TLS files readable, static routes valid, router and kernel_fib
// sections consistent) into the settings the agent uses; every mistake is
// a one-line error wrapping ErrConfig, which cmd/gswitchd turns into exit
// status 2. router.go, routes.go and p4rt.go hold their sections' types,
// flags and checks beside the code that starts them.
//
// # What the agent owns
//
// The Agent owns every part New opened and closes them: the gpu.Engine,
// the afpacket ports, the listeners (control socket, metrics, P4Runtime)
// and the kernel FIB's namespace handle. The pipeline.Switch, l3.Router,
// route tables, kernelfib.Mirror, openflow.Agent and p4rt.Server hold no
// resources of their own beyond goroutines that Run starts and ctx stops.
// The accessors hand the parts out for use, not ownership: a caller must
// not close them, and not use them after Run returns or Close.
//
// # Engine table ids
//
// Every table the engine serves is named by a gpu.TableID. One TableIDs
// (tableids.go) hands out the ranges, so that no two parts name the same
// table: the pipeline's flow tables (ids = table numbers, 0..255) and its
// LPM-shaped flow tables (1<<24 | table<<16 | group slot, fixed in
// datapath/pipeline today) are reserved first, then the router allocates
// two ids per route table (IPv4 and IPv6 image) from the lowest free
// 1<<20-aligned block, which is 1<<20 (l3.DefaultTableIDBase, as before),
// and passes it as l3.Config.TableIDBase with MaxTables bounding it to
// the range.
//
// # One control plane at a time
//
// The P4 program's tables are the pipeline's tables 0..3, the same tables
// an OpenFlow controller programs (p4rt.go). The OpenFlow agent drives
// ofGuard, the switch with its changing calls refused (EPERM) once a
// P4Runtime pipeline is committed; the commit itself is refused while an
// OpenFlow session is open (p4rt.Config.Claim). The switch's controller
// side is controllers: packet-ins go to the P4Runtime primary once it owns
// the switch, to the OpenFlow controllers before, and an owning P4Runtime
// server counts as a connected controller (standalone fail mode does not
// turn the P4 tables into a learning switch).
//
// # Start order
//
// New, in order (each step may use the ones before; a failure closes what
// was opened and returns the error): the engine (gpu.Open); the fixed
// table-id ranges; the router with its allocated ids (router ports' MACs
// read over netlink); the pipeline with the router; one afpacket port per
// configured interface, added to the switch; content-based forwarding
// (pubsub.go, with pubsub on: the subscription table, the event receive
// stage on its ports through addRxStage, the gRPC service's listener); the
// route tables of the
// router ports, attached to the router (their images loaded into the
// engine) with their connected routes; the static routes; the kernel FIB
// mirror; the OpenFlow agent over ofGuard; the P4Runtime server and its
// listener (the default address in use: P4Runtime off, with a warning);
// the switch's controllers; the control socket (mode 0600 from its bind;
// only a stale socket at its path is replaced); the metrics listener (a
// warning when it is reachable beyond loopback). Run then starts the
// goroutines: per port one datapath loop per receive queue and a link
// watcher (a port whose interface is deleted and re-created is re-attached
// by afpacket under the same Port, so these loops never change), the flow expiry, the router's
// neighbour timers (and the kernel neighbour mirror in neighbour mode
// kernel), the kernel FIB mirror, the OpenFlow agent's listeners and
// controller connections, the P4Runtime server, the pubsub gRPC service,
// the control socket server, the metrics server, and with re: the WAN
// port's acknowledgement loop and, with re.pipeline on (auto: GOMAXPROCS
// of 4 or more), the encoder's goroutine (re.go: the port's device is an
// re.Link's encoder around the afpacket port, and its decoder the port's
// first receive stage, the port split so that the switch's work on what
// it restores runs on a goroutine of the port's own).
//
// # Stop order
//
// Run's context ends (a signal, Close, or the first part that fails, whose
// error Run returns): every goroutine sees the context; the ports are
// closed first, waking their readers; Run waits for all its goroutines;
// then close releases the rest in order: the ports (already closed), the
// control socket (its file removed), the metrics and P4Runtime listeners,
// the kernel FIB namespace handle, the engine last, since every part looks
// up through it until its goroutine has ended.
//
// # Goroutines and locks
//
// New runs on the caller's goroutine and builds everything before any
// goroutine starts, so the agent's own fields (the port map, the route
// table map, the settings) are written only there and read-only after.
// Run's goroutines each own one loop: a port queue's datapath loop owns
// that queue's ring; the link watcher, the expiry, the neighbour timers,
// the kernel mirrors and the servers own their sockets. Shared state is
// the parts' own, under their own locks (documented in their packages):
// the pipeline's one lock between control and datapath, the route tables'
// writer locks, the P4Runtime server's write lock.
//
// Content-based forwarding adds the subscription table's lock (taken
// shared by the receive stage for a batch's match, exclusively by a
// change) and the gRPC service's write lock, which serializes changes
// through their barrier: pubsubapi write lock > pubsub table lock; the
// stage's per-port counter map lock is a leaf, and Switch.Transmit, which
// the stage calls after matching, takes none of them.
//
// The agent adds two locks, both leaves (nothing else is called while
// they are held): Agent.runMu, over Run's and Close's bookkeeping, and
// TableIDs.mu. The order the wiring creates between the parts' locks:
// ofGuard reads the P4Runtime ownership (an atomic) and then calls the
// switch, which takes its lock; the P4Runtime server asks Claim (the
// OpenFlow agent's session count, under the agent's lock) while it holds
// its write lock, then takes its state lock and, through the switch, the
// switch's lock to reset the tables; the datapath calls
// controllers.PacketIn under the switch's read lock, and both receivers
// only queue the message to their sessions; a route change runs the
// router's hook under the route table's writer lock, which takes the
// router's per-table lock and then calls the engine. So, outer first:
// p4rt write lock > p4rt state lock > switch lock > OpenFlow agent's lock,
// switch lock > engine, and route table lock > router table lock > engine.
//
// # Metrics and control socket
//
// /metrics (metrics.go) is promhttp serving a Prometheus registry
// (prometheus/client_golang) of the engine's, the switch's and the
// router's collectors (gpu.Engine.Collector, pipeline.Switch.Collector,
// l3.Router.Collector: const metrics read from the datapath's atomic
// counters at scrape time, nothing added to the packets' path), the
// OpenFlow agent's session gauges, content-based forwarding's counters
// (eventfwd.Stage.Collector and the table's gauges, with pubsub on) and
// the Go and process collectors. The control socket is agent/ctl: ctlSource
// answers it from the switch, the engine, the router and the route
// tables.
package agent
