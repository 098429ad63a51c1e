// Package p4rt is gswitch's P4Runtime v1 server (github.com/p4lang/p4runtime
// v1.4.1 over gRPC). gswitch is a fixed-function target, as Stratum is on
// fixed-function switch chips: its pipeline is described by a P4 program,
// p4/gswitch.p4 (P4_16, v1model style, for reference: it is not compiled),
// and its P4Info, p4/gswitch.p4info.txtpb (text protobuf, embedded). A
// controller loads that P4Info with SetForwardingPipelineConfig and then
// writes table entries and multicast groups.
//
// The program carries an @id annotation with every P4Info id (tables,
// actions, params, match fields, direct counters, controller headers), and
// NoAction, which core.p4 declares without one, has the id p4c derives
// from its name (0x01445b37), so p4c compiles gswitch.p4 into a P4Info the
// server accepts (TestP4InfoIDsMatchP4Source checks the annotations).
//
// # The pipeline
//
// Four tables, applied in this order (P4Info ids; prefixes as in p4info.proto:
// tables 0x02, actions 0x01, direct counters 0x13, controller headers 0x04;
// the ACL's actions include set_multicast_group, 0x01000008):
//
//	l2_exact  0x02000001  hdr.ethernet.dst_addr exact        forward, drop, send_to_cpu
//	ipv4_lpm  0x02000002  hdr.ipv4.dst_addr lpm              set_next_hop, forward, drop, send_to_cpu, decrement_ttl
//	ipv6_lpm  0x02000003  hdr.ipv6.dst_addr lpm              (the same)
//	acl       0x02000004  ingress_port, eth_src, eth_dst, eth_type, ipv4_src, ipv4_dst, ip_proto: ternary;
//	                      l4_src_port, l4_dst_port: range;
//	                      ipv6_src, ipv6_dst: ternary          forward, drop, send_to_cpu, set_macs, decrement_ttl,
//	                                                           set_multicast_group, NoAction
//
// The ACL's match field ids are 1..11 in that order; ipv6_src (10) and
// ipv6_dst (11), bit<128>, were appended so that the earlier ids stay as
// they were. An ACL entry matches IPv4 addresses or IPv6 addresses, not
// both (INVALID_ARGUMENT: a packet carries one or the other). A port range
// matches TCP and UDP packets only, IPv4 or IPv6.
//
// NoAction is every table's default action (default-only in the first
// three). Each table has a direct counter (packets and bytes). Packet-in
// carries ingress_port (metadata 1, bit<32>), packet-out egress_port
// (metadata 1, bit<32>); ports are gswitch's OpenFlow port numbers. A
// later table overrides an earlier one's decision, as the P4 metadata does:
// the ACL's forward, drop or send_to_cpu wins over the routing tables'.
//
// # How it maps onto the datapath
//
// The P4 tables are the switch's pipeline tables 0..3 (datapath/pipeline,
// through the Switch interface: *pipeline.Switch), so P4 entries are
// classified by the same gpu.Engine, GPU or CPU, as OpenFlow flows, and
// packet-in/out use the pipeline's controller path. The server speaks to
// the switch in tables/rule's protocol-free model only (rule.FlowMod,
// rule.PacketOut, rule.PacketIn, rule.FlowStats): it imports nothing of
// controlproto/openflow. Its own representation is the store (store.go):
// the canonical P4 entries by key and the flow entries (flowKey: table,
// priority, match) each compiled to, with their owners; the FlowMods it
// applies carry no rule.Echo, so whichever protocol reads those entries
// back (an OpenFlow flow dump, say) encodes them from their values. The
// switch's refusals (rule.Error kinds, tables/flow's errors) map onto
// gRPC codes in switchErr: a full pipeline table (flow.ErrTableFull) is
// RESOURCE_EXHAUSTED, anything else INTERNAL. Each entry compiles to
// flow entries (compile.go): l2_exact to eth_dst exact; the LPM tables to
// eth_type plus an ip_dst prefix with priority prefix length + 1 (so the
// longest prefix wins; the pipeline recognises such tables as LPM-shaped
// and serves them with tables/lpm's tries); the ACL to ternary matches at
// its priority, ranges expanded into prefixes (flow.RangePrefixes), and an
// entry that leaves eth_type or ip_proto open but matches fields that
// need them (OpenFlow prerequisites: ipv4_src/ipv4_dst need eth_type
// 0x0800, ipv6_src/ipv6_dst 0x86dd, ip_proto either, L4 ports TCP or UDP)
// into one flow entry per admitted value (a port match means TCP or UDP;
// one without addresses or eth_type covers IPv4 and IPv6). Actions become write-actions (the
// action set: one output, the set-fields, dec_nw_ttl), drop clears the
// action set, send_to_cpu outputs to CONTROLLER, and every table but the
// ACL goes on to the next (goto_table); each table's default entry is a
// priority-0 match-all entry. Two ACL entries of one priority may expand
// to a common flow entry: it is shared (owners, oldest first, carry their
// instructions in turn) so that deleting one leaves the other intact. The
// flow entries carry Cookie; an entry's direct counter is the sum of its
// flow entries' counters (Read with counter_data set, or a
// DirectCounterEntry read).
//
// # Multicast groups
//
// PacketReplicationEngineEntry.multicast_group_entry (pre.go) is realized
// as the switch's OpenFlow ALL group of the same id, a bucket (an output)
// per replica; the ACL's set_multicast_group writes that group into the
// action set. An output never leaves by the packet's in_port (OpenFlow
// §4.5), which is the program's egress pruning. The store keeps the groups
// (store.groups) and validation keeps entries and groups consistent: an
// entry naming a missing group is NOT_FOUND, deleting a group an entry
// uses FAILED_PRECONDITION (the datapath would otherwise remove those flow
// entries behind the store's back). Flow and group changes of one update
// or batch go through Switch.TransactGroups, under the switch's lock.
//
// # Packet-ins
//
// Only what the program sends to the CPU reaches a client: the datapath's
// INVALID_TTL packet-ins (a decrement that found TTL 0 or 1, which the
// program drops) are filtered in PacketIn and counted.
//
// # Reads
//
// A Read may carry one wildcard per entity kind (the whole forwarding
// state, as ONOS's device sync reads it): table entries, direct counters
// and multicast groups answer with what exists, kinds the pipeline has no
// object of with nothing; an id of such a kind is NOT_FOUND (read.go).
//
// # Validation and errors
//
// Every update is validated completely before anything changes
// (validate.go): table, field, action and parameter ids; match kinds;
// bytestrings (§8.4: not empty, the value fits the bitwidth, leading zero
// bytes allowed; OUT_OF_RANGE otherwise); LPM prefix lengths and the bits
// beyond them zero; ternary masks non-zero with no value bit outside them;
// ranges low <= high and not the full range; an ACL entry with IPv4 and
// IPv6 addresses (INVALID_ARGUMENT); priorities required (1..65535)
// for the ACL and forbidden elsewhere; the default entry only modified;
// action scopes (PERMISSION_DENIED); duplicates ALREADY_EXISTS, missing
// entries NOT_FOUND, a full table RESOURCE_EXHAUSTED. A DELETE looks at the
// key only. Read returns entries in canonical form (shortest bytestrings).
// Write reports per update as §12.3 requires: OK when all succeed, else
// UNKNOWN with one p4.v1.Error per update, in order (OK for those that
// succeeded). Request-wide errors come first and alone: NOT_FOUND for
// another device id, PERMISSION_DENIED unless the election id is the
// primary's, FAILED_PRECONDITION before a pipeline is committed.
// Fuzz tests feed serialized requests to every check of untrusted input:
// FuzzValidateWrite (WriteRequests), FuzzP4Info (the pipeline config's
// P4Info), FuzzStreamRequest (packet-out metadata), FuzzRead (ReadRequests).
//
// # Atomicity
//
// Writes are serialized (one at a time), which makes them strictly
// serializable. CONTINUE_ON_ERROR applies update by update. ROLLBACK_ON_ERROR
// and DATAPLANE_ATOMIC are all-or-nothing: the whole batch is validated
// first (against the store as its earlier updates leave it), and an update
// the switch refuses while applying (a pipeline table full) makes the
// applied ones be undone in reverse order; the failing update carries its
// error, the others ABORTED. DATAPLANE_ATOMIC also runs the whole batch
// under pipeline.Switch.Transact, the switch's write lock, which the
// datapath holds for reading while it classifies a batch of packets: every
// packet sees the tables before or after the batch.
//
// # Pipeline config
//
// SetForwardingPipelineConfig accepts a P4Info only if it describes the
// fixed pipeline (sameAsFixed: the same tables, match fields, actions,
// params, direct counters and packet metadata with the same ids, names,
// bitwidths, match types and action scopes; documentation, annotations and
// sizes are not compared), else INVALID_ARGUMENT naming the first
// difference. VERIFY checks; VERIFY_AND_SAVE keeps it for COMMIT;
// VERIFY_AND_COMMIT and COMMIT clear the P4 tables (every flow entry in
// pipeline tables 0..3) and install the default entries;
// RECONCILE_AND_COMMIT keeps the entries (the pipeline cannot change). The
// device config bytes and cookie are kept for GetForwardingPipelineConfig
// (ALL, COOKIE_ONLY, P4INFO_AND_COOKIE, DEVICE_CONFIG_AND_COOKIE).
// Config.Claim lets the daemon refuse the first commit (gswitchd: while an
// OpenFlow controller is connected: one control plane at a time).
//
// # Streams, arbitration, packet I/O
//
// Arbitration follows §5 per (device, role) (arbitration.go): the stream
// with the highest election id, at least the highest ever seen, is primary;
// every change is announced to all the role's streams (OK to the primary,
// ALREADY_EXISTS to backups, NOT_FOUND while there is none); an election
// id in use, a wrong device id, a role change or a role.config end the
// stream with the spec's code. Roles are names with full pipeline access.
// Packet-ins (entries with send_to_cpu) go to every role's primary, queued
// per stream (Config.QueueLen; beyond it they are dropped and counted,
// and an arbitration notice that finds the queue full ends that stream
// with RESOURCE_EXHAUSTED: a client that stops reading holds up neither
// the datapath nor the other clients);
// packet-out is the primary's only, with exactly egress_port naming a port
// of the switch; a bad one gets a StreamError with the PacketOut.
//
// # Concurrency
//
// Lock order: wmu (one mutating RPC at a time) > mu (the store and the
// pipeline config; Read holds it for reading) > the switch's lock (taken
// inside Switch.TransactGroups). The arbiter's mutex is separate and never
// held with mu. Each stream has two goroutines of its own (a reader of the
// client's messages, a sender draining its queue) besides the handler's.
//
// # Connections
//
// GRPCServer sets gRPC's handshake timeout (Config.ConnectionTimeout: a
// connection that has not finished TLS and the HTTP/2 preface by then is
// closed), server keepalive pings (Config.KeepaliveTime/Timeout) and a
// permissive ping policy for clients (every 10 s, with or without
// streams). The limits and what happens at each: docs/p4runtime.md.
//
// # Not here
//
// Meters, action profiles, digests, clone sessions, idle timeouts, writing
// counter values, role.config, and set_macs/decrement_ttl surviving a
// later drop that a later forward overrides (drop clears the action set).
package p4rt
