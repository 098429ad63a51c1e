// Package forward is "gswitchctl bench forward": frames per second
// forwarded between network namespaces through gswitchd, Open vSwitch's
// userspace datapath, the Linux bridge and a plain Go forwarder, with N
// installed OpenFlow rules and stepped offered load; and the FLOW_MOD
// installation rate and barrier latency of gswitchd and Open vSwitch. It
// needs root.
//
// # The set-up
//
// Named network namespaces made with the netlink library (topo.go): the
// switch's (ports p1, p2, ...) and, for each of --pairs, a generator and
// a sink, joined to the switch by veth pairs p<2k+1> and p<2k+2>. Each
// target in turn takes the ports: gswitchd (the binary of --gswitchd, or
// built with go build) started in the switch namespace with an OpenFlow
// controller port the bench connects to; Open vSwitch (ovsdb-server and
// ovs-vswitchd, userspace datapath); a Linux bridge; and plain, the floor
// (plain.go): this program re-executed in the switch namespace with
// PlainForwarderArgs, each frame of p<2k+1>'s receive ring sent on out of
// p<2k+2>, with no tables. Everything made is removed on return, on
// error and on SIGINT/SIGTERM.
//
// # What it measures
//
// For each target and each rule count of --rules (of.go: N-1 exact
// ipv4_dst rules that miss the traffic plus one in_port rule per pair that
// forwards it), a series of steps, one per offered load of --rates
// (ascending, max last: as fast as the sender can): each generator sends
// UDP frames (traffic.go, --src-ports flows, sendmmsg of --batch) for
// --duration at its share of the rate; after --settle the sinks' counts
// give forwarded_pps and loss_pct; max_lossless_pps is the series' highest
// offered load lost under 0.1%, and lossless_to_pps the highest below
// which no step lost 0.1% or more (the two differ where a switch lost at
// one step and not at a higher one). Each step also reports the switch's own
// counters, the kernel's backlog drops and the cores busy (machine,
// switch, hypervisor steal).
//
// # Rule sets where classification matters
//
// With --ruleset synthetic:N,C[,F,Cm,f] (GSwitch §6's generator, as bench
// classify) or classbench:FILE (ClassBench, e.g. acl1), table 0 holds the
// rule set, each rule's instruction goto_table:1 or, for one rule in 8
// drawn at random, none (a drop), and table 1 maps in_port 2k+1 to the
// pair's other port 2k+2 (ruleset.go). The rules go to the switches
// exactly as the set has them: a ClassBench range's prefix entries with
// masked ports and its tcp_flags matches travel as Open vSwitch sends them
// in OpenFlow 1.3 (masked tcp/udp ports, the ONF tcp_flags field), which
// gswitchd takes too; a rule the FLOW_MOD encoding could not carry exactly
// is an error (openflow.MatchEncodable), never a different rule. A
// synthetic rule matching in_port is moved onto a generator's port (rule i
// onto pair i mod pairs), keeping its class. Open vSwitch gets the same two
// tables as an ovs-ofctl file (a tcp_flags rule wanting a bit above the
// header's 12 set, which no frame has, is left out of it).
//
// The traffic (frames.go): per pair, --flows different 60-byte frames
// (64 on the wire), each a random header with a random eligible rule's
// matched bits laid over it, so the frames hit the rules uniformly and no
// per-flow cache helps; the generator sends them in order, over and over.
// Each template is parsed with the datapath's own key extractor and looked
// up in a tuple-space table of the same rules (the oracle) to know whether
// its frames must leave by the pair's sink port or be dropped by their
// rule. A step reports sent, expected (what the rules forward),
// dropped_by_rule and received, and loss_pct against expected; a sink that
// counts more than expected fails the run. With --sink ring and --check,
// every arriving frame is checked by its mark (step and sequence number in
// the TCP sequence and acknowledgement numbers, or the last 8 bytes):
// one whose rule drops it is counted as misrouted and fails the run.
//
// Targets gswitchd-cpu and gswitchd-gpu are gswitchd with the CPU and the
// GPU backend (gswitchd alone takes --backend); --classifier picks
// gswitchd's flow-table search (merge, the fastest on many classes, by
// default); --switch-cpus holds gswitchd and plain to a core list
// (taskset), so that the CPU and GPU paths are compared on equal cores,
// and the bench's own threads to the other cores (--bench-cpus to choose
// them, any to leave them; cpus.go), so that its generators do not take
// the switch's cores. A frame sent on a veth is received by the peer in
// the sender's own system call, on the sender's core; --sink-rps LIST (or
// bench, the bench's cores) steers the sinks' receive work elsewhere by
// RPS, through each sink namespace's rps_default_mask set before its veth
// end is made, and checks in the namespace's sysfs that the interface
// took it. It is off by default: on the H200 machine (2026-11-26) it made
// gswitchd and plain slower, the IPIs costing their cores more than the
// receive work they moved.
//
// # Live filters' cost
//
// The target gswitchd-filters is gswitchd as the target gswitchd runs it
// plus the live filters of --filters FILE (one NAME: EXPRESSION a line, as
// bench filter's --filters-file; checked before any namespace is made) on
// every port, given through a --config file's filters: (filters.go). With
// --targets gswitchd,gswitchd-filters --rounds N the two alternate round
// by round, and the medians of max_lossless_pps give the filters' cost;
// each gswitchd-filters step reports the live filters gswitchd's metrics
// list and the matches they counted (a run fails if gswitchd reports
// another number of filters). testdata/filters100.txt holds 100 typical
// monitoring filters, four of which match the traffic.
//
// # Content-based forwarding
//
// With --ruleset events[:F] (events.go) the traffic is event packets (UDP
// datagrams in tables/pubsub's binary encoding) and gswitchd delivers them
// by subscriptions, not flow rules: CCM's default scenario, one interface
// per pair (F filters per interface with events:F), each filter of
// interface k on pair k's sink port with one more constraint, pair = k, and
// one more subscription per sink, pair = k && sel < 6, so that about three
// events in four arrive. gswitchd gets them through its configuration's
// pubsub: (subscriptions_file; event ports: the generators' ports;
// --event-min-batch its min_batch). Each template's fate is known from the
// CPU matcher over the same subscriptions; the mark is the event's last
// attribute, an 8-byte string no constraint reads. After each series the
// steps report what matched the events (event_matcher, and with a device
// events_gpu and events_cpu since gswitchd started). Targets: gswitchd's
// and plain (every frame forwarded: the floor).
//
// After each step's last frame the bench waits --settle, then until the
// sinks' count holds still for 100 ms (5 s at most), so that what an
// overloaded switch still held arrives in its own step.
//
// # Latency
//
// gswitchd runs with a metrics listener; each step scrapes its histogram
// gswitch_frame_latency_seconds (kernel receive timestamp to the end of the
// frame's batch in the pipeline) before and after and reports the step's
// latency_p50_us and latency_p99_us (interpolated in √2-wide buckets),
// and from gswitch_frame_latency_stage_seconds the same by stage,
// latency_stages_us {ring, batch, run: [p50, p99]} (in the receive ring
// until the reader took the frame, in the open batch, the batch's run from
// its close; the log line's "p50/p99 by stage"), and from
// gswitch_switch_write_lock_seconds, for each kind of change that held
// the datapath back during the step (a FLOW_MOD, an expiry that removed
// entries, a barrier, ...), write_lock_us {op: [count, p99, the largest
// bucket's bound]} (the log line's "datapath held back by"), and with
// datapath workers from gswitch_worker_run_part_seconds the time of a
// worker's run by part, a value per timed run (one in 8), run_parts_us {parse, lookup,
// decide, send: [p50, p99]} (the log line's "a worker's run"), and with
// --worker-shared from gswitch_gatherer_* the workers' shared device
// batches over the step: gather_batches, gather_keys_mean,
// gather_shares_mean (runs a batch) and gather_closed {full, idle, wait}
// (the log line's "shared batches"), and with resident lookups
// (gswitchd's --resident-lookups, or GSWITCH_CUDA_RESIDENT in its environment) from
// gswitch_backend_resident_*_total the lookups posted to the resident
// kernels over the step and their launches, resident_lookups and
// resident_launches (the log line's "resident lookups"). The plain
// forwarder exports the same gswitch_frame_latency_seconds (from the
// receive timestamp to the return of the frame's send), so its steps have
// a latency too: plain@frame, on frame rings, is the latency floor of
// these ports with no batching and no tables. With --latency-step, after a gswitchd or plain series with a lossless rate, one
// more step runs at half that rate (half_lossless: true, not part of the series): the latency of
// a switch that is not overloaded.
//
// gswitchd is started afresh for each rule count, its rules installed over
// OpenFlow before the series. Besides the series, gswitchd and Open
// vSwitch each take --flowmods FLOW_MODs in batches of --flowmod-batch, a
// barrier after each: flowmods_per_sec and barrier latency (first round
// only; gswitchd on a fresh instance after its series).
//
// With --rounds R the target list runs R times, forwards in odd rounds and
// backwards in even ones (gswitchd,plain then plain,gswitchd ...), so that
// a machine that drifts favours no target; each target's, rule count's and
// load's medians over the rounds follow (forward-median).
//
// # JSON
//
// With --json, one object per line; its "bench" key says which: "forward"
// (a Step), "flowmods" (a FlowMods run) or "forward-median" (a
// StepMedian, with --rounds above 1); the keys are the json tags of those
// types' fields. Without --json, the same as tables.
//
// gswitchd runs as its own process here (startGswitchd): this bench
// builds no copy of its graph.
package forward
