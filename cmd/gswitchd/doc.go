// Command gswitchd is gswitch's data-plane agent: an OpenFlow 1.3 switch
// whose ports are Linux interfaces (veth ends, bridge ports, NICs) attached
// through AF_PACKET TPACKET_V3 rings, whose flow tables are classified by
// the gpu Engine (a GPU where one opens, the CPU otherwise or for small
// batches), and which controllers (os-ken/Ryu, ONOS, ovs-ofctl) drive over
// OpenFlow. This command is a small main around package agent, which
// holds the wiring (configuration, start and stop, which control plane
// owns the switch, engine table ids, metrics, the control socket of
// agent/ctl); the switch core is package datapath/pipeline.
//
// The switch has groups (all, select, indirect, fast-failover), meters
// (drop and DSCP-remark bands), PORT_MOD, TABLE_MOD and (empty) queues;
// gswitchctl show ports|tables|flows|groups|meters|backend|stats reads its
// state over the control socket.
//
// Beside the OpenFlow agent runs the P4Runtime server (controlproto/p4rt,
// agent/p4rt.go): gswitch's fixed P4 program over gRPC on --p4rt-listen (default
// 127.0.0.1:9559; off disables it; TLS and client certificates optional).
// One control plane at a time: a P4Runtime pipeline commit is refused while
// an OpenFlow controller is connected, and from the commit on the switch's
// tables 0..3 are the P4 tables, the OpenFlow agent refuses changes (EPERM)
// and packet-ins go to the P4Runtime primary.
//
// Router ports (--router-port, YAML router:) are L3 only: their frames go
// to the router of package datapath/l3 instead of the flow tables (ARP and
// neighbour discovery for their addresses, echo replies, IPv4/IPv6
// forwarding through the route tables, which gswitchd makes for the ports'
// table ids with their connected routes and attaches to the router, whose
// LPM images the Engine serves); --neighbours own|kernel says who resolves
// next hops. agent/router.go wires it; gswitchctl neighbours and show l3 read
// its state.
//
// Routes come from the router ports' subnets (connected), the routes: list
// of the YAML file (static, checked at start) and, with --kernel-fib-table
// N (YAML kernel_fib:), from kernel routing table N, mirrored over netlink
// by controlproto/kernelfib (resynced from a dump after an overflow).
// agent/routes.go wires them; gswitchctl routes reads the tables and counters.
//
// Usage:
//
//	gswitchd --version
//	gswitchd [--config FILE] [--port N=IFNAME]... [--controller tcp:HOST:PORT]...
//	         [--listen ptcp:PORT]... [--datapath-id N] [--fail-mode secure|standalone]
//	         [--backend auto|cpu|gpu] [--gpus LIST] [--max-delay D] [--min-batch N]
//	         [--batch-size N] [--rx-queues N] [--rx-workers N] [--rx-ring auto|block|frame]
//	         [--rx-block-size N]
//	         [--tables N] [--max-flows N] [--metrics ADDR]
//	         [--ctl-socket PATH] [--log-level LEVEL] [--print-config] [--cpuprofile FILE]
//	         [--trace FILE [--trace-after D] [--trace-for D]]
//	         [--p4rt-listen HOST:PORT|off] [--p4rt-device-id N] [--p4rt-tls-certificate FILE]
//	         [--p4rt-tls-private-key FILE] [--p4rt-tls-ca-cert FILE] [--p4rt-require-client-cert]
//	         [--p4rt-reflection] [--router-port N=ADDR/LEN[,...][,table=T][,mac=MAC]]...
//	         [--neighbours own|kernel]
//	         [--kernel-fib-table N] [--kernel-fib-netns NAME] [--kernel-fib-receive-buffer BYTES]
//
// Configuration comes from three layers: the embedded default
// (agent/default.yaml), the YAML file of --config (unknown keys are errors; keys
// it omits keep their defaults), and the flags, each of which overrides
// its key; a repeatable flag (--port, --controller, --listen) given at all
// replaces the file's whole list. The configuration is checked completely
// before anything starts (interfaces must exist, port numbers and names
// unique, targets well formed, numbers in range), and every mistake is a
// one-line error with exit status 2. --print-config prints the effective
// configuration and exits. --version prints the module version and the
// VCS revision the binary was built from (internal/version).
// --cpuprofile FILE writes a CPU profile of the whole run (runtime/pprof)
// to FILE, complete once gswitchd exits (SIGINT or SIGTERM): how the
// per-frame CPU of bench forward's targets is looked into (go tool pprof
// gswitchd FILE). --trace FILE writes an execution trace (runtime/trace)
// to FILE, from --trace-after DURATION after the start for --trace-for
// DURATION (0: until gswitchd exits), for go tool trace: the scheduler's
// view of each goroutine (how long a woken goroutine waited for a
// processor: go tool trace -pprof=sched FILE), which a CPU profile does
// not show.
//
// At start gswitchd opens the backend (gpu.Open), the switch, one
// afpacket port per configured interface (promiscuous), the control
// socket (mode 0600) and the metrics listener; then it runs one datapath
// goroutine per receive queue of each port (--rx-queues, YAML rx_queues,
// a port's own rx_queues; default one queue), one link watcher per port
// (PORT_STATUS), the flow
// expiry, the OpenFlow agent (passive listeners and active controllers,
// reconnecting with back-off), the P4Runtime server, the control socket server and the metrics
// server. Logs are structured (log/slog, text) on stderr. SIGINT or
// SIGTERM stop it gracefully: the agent's connections close, the ports
// close (waking their readers), the control socket is removed, the
// backend is closed; exit status 0.
package main
