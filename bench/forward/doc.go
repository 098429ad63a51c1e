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
// offered load lost under 0.1%. Each step also reports the switch's own
// counters, the kernel's backlog drops and the cores busy (machine,
// switch, hypervisor steal).
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
