// Package pipeline is gswitch's switch core: a switch with OpenFlow 1.3's
// semantics whose flow tables are tables/flow tables classified through a
// gpu.Engine, and whose ports are Linux interfaces read and written
// through datapath/afpacket. It is the "datapath" of DESIGN.md's flow of a
// packet, steps 1 to 4, and the receiving end of the flow of an update,
// steps 2 to 6.
//
// It speaks no protocol. What it executes and reports is tables/rule's
// model (FlowMod, Instructions, Action, GroupMod, MeterMod, PortMod,
// PacketOut, PacketIn, FlowRemoved, PortStatus, the stats types), and
// what it refuses it refuses with the model's typed errors (*rule.Error:
// rule.BadGoto, rule.DanglingGroup, rule.UnknownMeter, rule.BadSetField,
// rule.NoSuchPort, ...; tables/flow's errors pass through). Its methods
// match controlproto/openflow's Switch and optional interfaces and
// controlproto/p4rt's Switch by their tables/rule signatures (Go's
// structural typing: cmd/gswitchd asserts it), and each protocol maps the
// errors onto its own codes; the package imports nothing of controlproto.
// In this documentation FLOW_MOD, GROUP_MOD and so on name the model's
// requests by their OpenFlow names.
//
// # Tables and updates
//
// The pipeline has Config.Tables flow tables, table i being gpu table id
// i. Each is a flow.Table (the authoritative CPU copy, OpenFlow 1.3
// add/modify/delete semantics, the device image and its write bubbles)
// plus, per RuleID, an entry: the FlowMod as installed (with its opaque
// rule.Echo, which the protocol edge that installed it gets back in flow
// stats and FLOW_REMOVED: OpenFlow's match and instructions as the
// controller sent them, echoed byte for byte), the time it was added,
// and atomic counters (packets,
// bytes, last hit for the idle timeout). New loads each table's first,
// whole image into the Classifier; after every change the table's mirror
// is synced and the Update applied (Classifier.Apply: the bubbles, or a
// whole image after a rebuild, when the projection the keys are packed
// with is refreshed too). Should the classifier reject an update, the
// table's image is reloaded whole: the CPU copy is authoritative.
//
// FLOW_MOD: add (check_overlap → flow.CheckOverlap; an identical match and
// priority replaces the entry, its counters kept unless reset_counts),
// modify and modify_strict (instructions replaced, counters kept unless
// reset_counts; a modify never adds), delete and delete_strict (all tables
// for OFPTT_ALL, out_port/out_group filters, FLOW_REMOVED with reason
// DELETE for entries with send_flow_rem). goto_table must go forward
// (§5.1: OFPBIC_BAD_TABLE_ID otherwise). Expire, run every 250 ms by
// RunExpiry, removes entries past their hard or idle timeout with
// FLOW_REMOVED reason HARD_TIMEOUT or IDLE_TIMEOUT; it looks only at the
// entries that have a timeout (table.timed), finds the expired ones under
// the read lock, and takes the write lock only to remove them, so that a
// large table without timeouts never stops the datapath for it.
//
// # The flow of a packet
//
// RunPort is one goroutine per receive queue of a port (one queue unless
// the port was opened with afpacket's Config.Queues; the queues of a port
// split its frames by flow hash, so a flow stays on one goroutine and in
// order): it reads the ring's blocks (TPACKET_V3) or runs of frames
// (TPACKET_V2 frame rings, afpacket's RingFrames), copies
// each frame into the batch's arena (putting back the VLAN tag the kernel
// took off on receive, so that actions and outputs see the frame as it was
// on the wire, and finishing the checksum of a frame whose sender left it
// to the device, or cutting a GSO frame into its segments: afpacket's
// Offload; a frame that cannot be finished is dropped and counted in
// Counters.OffloadDrops), and hands the batch to Process when it holds
// Config.BatchSize frames or its oldest frame has waited Config.MaxDelay.
// The afpacket block timeout is set to that delay too (at its 1 ms
// resolution), so the kernel does not hold frames longer; below 1 ms the
// agent uses frame rings, which hand each frame over at once. A block
// ring hands over nothing sooner than its timeout unless a block fills,
// so with a block ring and a batch whose deadline is under 1 ms away
// RunPort takes the blocks that are ready and then runs the batch, instead
// of waiting out the deadline (a timer and a wake-up per block, for no
// frames). A frame
// ring would wake a waiting reader for every frame, so with a batch open
// and the ring empty RunPort pauses until the batch's deadline
// (afpacket's Queue.Pause, on time below a millisecond) and then reads
// what came meanwhile: one wake-up per batch.
//
// A port's receive stages (RxStage) run on each batch before Process. A
// port split by SetRxSplit (redundancy elimination's WAN port, whose
// decoder is such a stage) runs them on RunPort and hands what they leave
// to a goroutine of the receive queue's own, which runs Process, batch by
// batch in order, while RunPort reads on (split.go; with a Coalescer, the
// batches of the synchronous path: the queue runner's flights split the
// shared path's already).
//
// Process parses every frame once (datapath/packet); a malformed frame is
// counted by reason and dropped. Then, stage by stage (table 0, 1, ...),
// the packets waiting at a table are classified in one batch: their keys
// packed with flow.PackSoA over the table's projection and looked up by
// Classifier.LookupFlow, which sends batches of at least the Engine's
// min-batch to a GPU and smaller ones to the CPU. (If the lookup fails,
// the flow.Table answers: same rules, same ranking.) Each packet's entry
// then runs its instructions in OpenFlow order: apply-actions at once,
// clear-actions, write-actions into the action set (one per kind, one
// set-field per field), write-metadata (also written into the key), and
// goto-table, which makes the packet wait at a later table; goto only goes
// forward, so one pass over the tables finishes the batch. A packet whose
// actions changed the frame is parsed again before its next lookup. When
// a packet leaves the pipeline its action set runs in the order of §5.10
// (a group suppresses output). A miss without a table-miss entry drops
// (OpenFlow 1.3's default).
//
// Actions: output to a port, IN_PORT, FLOOD and ALL (every port but the
// input), CONTROLLER (a PACKET_IN of reason ACTION — NO_MATCH when the
// entry is a table-miss entry, priority 0 and match-all — carrying
// max_len bytes with OFP_NO_BUFFER, the in_port and metadata in its
// match), NORMAL (the learning switch below), TABLE (PACKET_OUT only),
// LOCAL (the port added as rule.PortLocal, the host's interface into
// the switch; a standard port, so FLOOD and ALL reach it too, its frames
// match in_port LOCAL and PORT_MOD applies; counted as no-route when
// there is none); output to the input port is counted as no-route. set_field
// for eth_src/dst, vlan_vid/pcp, ipv4_src/dst, ipv6_src/dst, ip_dscp/ecn,
// tcp and udp ports, with incremental checksum updates (RFC 1624) of the
// IPv4 header and the TCP/UDP/ICMPv6 checksum; on the SCTP ports (the
// CRC32c recomputed over the SCTP packet, a wrong checksum carried through
// as wrong by the same difference, as Open vSwitch does); on ip_proto (the
// transport checksum's pseudo-header fixed too), arp_op/sha/spa/tha/tpa,
// icmpv4 and icmpv6 type and code, ipv6_flabel, ipv6_nd_target/sll/tll
// (the ICMPv6 checksum fixed), mpls_label/tc/bos on the top label stack
// entry, pbb_isid; metadata and tunnel_id are written into the key (no
// tunnel ports). push_vlan (the new tag copies the outer one's TCI, or 0)
// and pop_vlan; set_nw_ttl and dec_nw_ttl (a TTL that would reach 0 drops
// the packet and sends it, unchanged, as a packet-in of reason
// INVALID_TTL, which the agent delivers only to connections whose
// SET_ASYNC asked for that reason; dec_mpls_ttl likewise). MPLS (mpls.go): push_mpls inserts a label stack entry after
// the VLAN tags, copying the top entry (bos 0) or, on a frame without a
// stack, label 0, tc 0, bos 1 and the IP TTL (0 when not IP); pop_mpls
// removes the top entry and writes its ethertype argument; set_mpls_ttl,
// dec_mpls_ttl (drops at 0, with the INVALID_TTL packet-in); copy_ttl_in/out between the top entry and the
// next entry or the IP header under the stack (IPv4 or IPv6 by its version
// nibble; the IPv4 checksum fixed). PBB (pbb.go): push_pbb puts a backbone
// header with the frame's own addresses and an I-TAG (copied from a PBB
// frame's, else 0) in front of the whole frame; pop_pbb leaves the
// customer frame. After any of these the frame is parsed again
// (packet.Parse) before the next table's lookup, so that, say, pop_mpls to
// 0x0800 and goto_table match the IPv4 header. Every edit checks the
// frame's bounds first; an action the frame cannot take (pop_mpls on a
// frame without MPLS) is counted as unsupported and skipped. Set-field
// writes every header field OpenFlow 1.3 allows, eth_type included (the
// type after the VLAN tags; the frame is parsed again by it); set-field
// on a field no frame carries (in_port) is refused when the FLOW_MOD,
// GROUP_MOD or PACKET_OUT arrives, with rule.BadSetField (support.go;
// OpenFlow sends OFPBAC_BAD_SET_TYPE); every other action of the model is
// executed. Outputs copy the frame as it is at that moment, padded
// with zeros to 60 bytes (a pop may leave it shorter; a NIC would pad it
// on the wire, a veth does not); each port's frames leave in one afpacket
// Send (sendmmsg) per batch. A packet-in carries the frame as it is, but
// one that actions made shorter than 60 bytes is padded the same way (to
// no more than its received length).
//
// # LPM-shaped tables
//
// A flow table whose rules are a routing table is served by longest-prefix
// match (tables/lpm, GAMT) instead of the classifier: each table has a
// tables/lpmshape Shape (lpm.go), made on its first rule, which reads
// every rule added (not a replacing add, whose match is the same) and
// removed (delete, expiry, a group's or meter's deletion), and is synced
// with the table's classifier image in the same write-locked change, so
// a BARRIER_REPLY follows LPM images that are current. What "LPM-shaped"
// means, how the shape is kept incrementally and when images are built is
// lpmshape's (its package documentation); the pipeline gives it the
// Classifier's LPM4/LPM6 tables as its Images (lpmImages: image ids are
// gpu.TableIDs from Config.LPMIDBase, default lpmshape.DefaultIDBase =
// 1<<24, above the flow tables' 0..253 and the router's 1<<20 + ...).
// In the table stage a batch of a table the Shape serves goes to
// Shape.Lookup (batched per group, to the GPU for large batches) instead
// of PackSoA and LookupFlow; the rest (counters, instructions) is the
// classifier path's, and should the LPM lookup fail the classifier
// answers. gswitchctl show tables reports the search (lpm or the
// classifier's algorithm, and why not lpm), metrics gswitch_table_lpm,
// gswitch_table_lpm_transitions_total and gswitch_table_lpm_conflicts.
// BenchmarkLPMShapedTable: the full IPv4 BGP table (901,899 rules) in one
// OpenFlow table, CPU backend, batches of 256: 39.8 ns per packet by LPM
// against 1,210 by tuple search on the 2-core development VM (medians of
// 3; 30x).
//
// # Router ports
//
// Config.Router (datapath/l3's Router) makes some ports router ports:
// they are L3 only. Every frame received on one goes to Router.Route
// instead of the flow tables (and the standalone learning switch), which
// answers ARP, neighbour solicitations and echo requests for the port's
// addresses and routes IP packets; what it sends is queued like an
// output (padded, one Send per port and batch). Frames the router
// originates outside a batch (solicitation retries) leave through
// Transmit. The other ports keep OpenFlow semantics, and flows may still
// output to a router port.
//
// # Groups, meters, ports
//
// The switch implements the agent's optional interfaces (groups.go,
// portmod.go) over tables/rule's GroupTable and MeterTable. A group action runs each bucket the table picks on its own
// copy of the packet (the packet itself goes on unchanged): every bucket
// of an all group, the one of an indirect group, for a select group one
// live bucket by weight, chosen by an FNV hash of the Ethernet addresses
// and type, VLAN, IP addresses and protocol, L4 ports and ARP addresses
// (so one flow sticks to one bucket), for a fast-failover group the first
// live bucket. A bucket is live when its watch_port is up (link up, not
// PORT_DOWN) and its watch_group has a live bucket. Buckets may forward to
// other groups (depth at most 16); a group without a live bucket drops
// (Counters.GroupDrops). The meter instruction runs before apply-actions:
// the meter's token buckets (kb/s or packets/s, burst or 100 ms of rate)
// decide; a drop band drops (Counters.MeterDrops), a DSCP-remark band
// raises an AF code point's drop precedence (RemarkDSCP) with the IPv4
// checksum fixed. Group and meter counters are the tables' own. Flow
// entries count their references (ref_count, flow_count): a FLOW_MOD
// naming a missing group gets rule.DanglingGroup (OpenFlow:
// OFPBAC_BAD_OUT_GROUP), a missing meter rule.UnknownMeter
// (OFPMMFC_UNKNOWN_METER), checked under the write lock that GROUP_MOD and
// METER_MOD also take; deleting a group removes its entries (FLOW_REMOVED
// reason GROUP_DELETE), deleting a meter its entries (reason DELETE: 1.3
// has none for meters).
//
// PORT_MOD sets a port's config bits, which the datapath honours:
// PORT_DOWN (nothing received or sent; fast-failover sees it dead),
// NO_RECV, NO_FWD, NO_PACKET_IN; the change is reported as PORT_STATUS
// MODIFY. The Linux interface is not touched. TABLE_MOD is accepted and
// changes nothing (1.3's bits are deprecated); there are no queues (empty
// answers; OFPQOFC_BAD_PORT for a missing port).
//
// PACKET_OUT runs its actions on the controller's frame; output:TABLE runs
// it through the tables from table 0 with its in_port.
//
// Standalone fail mode: while no controller is connected (Controller's
// Connections is 0, which counts passive ptcp connections such as
// ovs-ofctl's too) a FailStandalone switch ignores its tables and is an L2
// learning switch: source MACs are learned per port (at most 65536, aged
// after Config.LearnAge), known unicast goes to its port, the rest is
// flooded.
//
// # Barrier and concurrency
//
// mu is the one lock between control and datapath. Every change (FlowMod,
// an Expire that found expired entries) holds it for writing from the
// table operation through Classifier.Apply, which returns once lookups
// issued after it see the change; nothing periodic holds it for writing
// while it has nothing to change (a writer waiting for mu holds back every
// batch that has not started yet; lockWrite and unlockWrite time each
// writer's span, metric gswitch_switch_write_lock_seconds{op}:
// writelock.go). A batch holds it for reading from its first lookup to its
// last action, so the tables, the entries and the classifier's images it
// sees are one consistent version, and a change waits for batches in
// flight to finish deciding. Barrier takes and releases the lock: when it
// returns, every earlier change is applied and no batch decided under the
// old state is still deciding (its frames may still be in Send). Counters are
// atomics updated under the read lock. The ports are fixed before traffic
// starts (AddPort); their link state comes from afpacket (WatchPort turns
// link events into PORT_STATUS: DELETE when the interface goes, ADD when
// afpacket has re-attached the port to a new interface of the same name,
// MODIFY otherwise; the port number, its flows and the Device stay). Lock order: mu, then the group and meter
// tables' own mutexes (tables/rule: GroupMod, MeterMod and the flow
// entries' reference counts take them under mu held for writing, a batch
// under mu held for reading), then a meter's (Meter.Allow). A Controller
// is called with mu held (for writing: FLOW_REMOVED from a change or
// Expire; for reading: a batch's packet-ins), so it must not block or
// call back into the switch (the OpenFlow agent queues, or drops when a
// connection's queue is full). Workers (keys, SoA buffer, results,
// per-port send queues) come from a sync.Pool: one per concurrent batch.
// Process may run on several batches of one input port at once (one per
// receive queue): what it keeps per port (rx_dropped, tx_dropped) is
// atomic, the learning table has its own mutex, meters and groups lock
// their own state, the router's Route is safe for concurrent calls, and a
// device's Send serializes concurrent senders.
//
// # Shared device batches
//
// With a Config.Coalescer (the agent makes one when its engine has a GPU)
// lookups of all ports and receive queues are gathered into shared
// device batches (GSwitch §7.4), and a receive queue's batches no longer
// run on its RunPort goroutine:
//
//   - RunPort (one goroutine per receive queue, the reader) reads the ring
//     and fills batches as before; a closed batch is handed, in order, to
//     the queue's runner through a channel, and the reader goes on reading
//     with an empty batcher. Config.Depth+1 batchers circulate per queue;
//     the reader waits only when Config.Depth closed batches are
//     unfinished (the running ones included), and then the ring fills as
//     it did when Process was slow. Those waits are counted and timed
//     (BatchStats' Stalls and StallTime; metrics
//     gswitch_receive_stalls_total and gswitch_receive_stall_seconds_total).
//   - The batches' receive stages run one after the other, in order (a
//     stage may keep per-flow state): with Config.InFlight above 1 on the
//     reader as it hands the batch over. Up to Config.InFlight batches
//     (default 4 with 8 or more Go processors, else 2) then run the rest
//     (Process: parse, the tables stage by stage, actions, transmit, the
//     latency histogram) at once, on the
//     queue's InFlight goroutines (queueRunner.flights, which live as long
//     as the queue: one hand-off per batch, no goroutine started per
//     batch), so batch k+1's lookups are made while batch k's is on the
//     device; each batch transmits only once the batch before it has (a
//     token the batch puts in its batcher's channel after its transmit,
//     which the next one takes before its own: Process's flush; the
//     channel is the batcher's, made once, and the token the time it was
//     put, from which the next batch counts the transmit's idle between
//     the two: BatchStats' Handovers, HandoverWake and HandoverLookup),
//     so frames of one queue,
//     and so of one flow, leave in the order they arrived. Only the
//     transmit is ordered: the counters, and packet-ins sent to a
//     controller by two batches in flight, may interleave. With InFlight 1
//     one goroutine (queueRunner.loop) runs the batches, stages included,
//     one after the other. Between hand and its return to the free list a
//     batch's frames belong to the runner: the goroutine that runs it.
//   - Each table stage's lookup goes to Coalescer.LookupFlow, which adds
//     the packed keys (flow.PackSoA) to the table's pending batch and
//     blocks the runner until the results are in; the batch's first
//     caller (its leader) closes it (full at MaxBatch keys; when every
//     active runner is waiting for a lookup, so no more keys can come; or
//     after --max-delay), concatenates the members' columns, makes one
//     Engine call (a device for MinBatch keys or more, else the CPU) and
//     copies each member's results back. Runners register as active
//     between taking a batch and finishing it (Coalescer.Enter/Leave).
//     Tables no device serves (the CPU backend) are looked up directly,
//     with no waiting, and without a GPU the agent makes no Coalescer: the
//     CPU path is the synchronous one, unchanged.
//   - While no flow table is coalesced (Coalescer.Coalesces: with
//     --backend auto every table placed on the CPU, or the device out of
//     service) the hand-off buys nothing and costs CPU per frame (the
//     runner's wake-ups, Enter/Leave, the per-batch goroutines): RunPort
//     then runs each closed batch itself, synchronously, its lookups
//     straight to the Classifier (queueRunner.next), and goes back to
//     handing its batches over as soon as a table is coalesced again.
//     Which path is checked per batch against the Coalescer's Generation
//     (the Engine's PlacementGeneration, moved by every placement change
//     and device failure): one atomic load while nothing moves, the tables
//     asked again when it has. Going from the shared path to the
//     synchronous one, the reader first waits until every batch it handed
//     has transmitted (queueRunner.drain: at most Depth batches), so the
//     queue's frames stay in order and its receive stages run in order;
//     the other way needs no wait (the synchronous batch has transmitted
//     when the next is handed). A table that moves in the middle of a
//     synchronous batch is still answered right (the Engine serves it,
//     on the CPU below MinBatch). Switch.BatchStats' Direct and Shared
//     (metric gswitch_batches_path_total) count the batches of each path.
//
// Ownership and locks: a batcher belongs to the reader while open (and
// while the reader runs it on the synchronous path), to the runner from
// hand until it is back on the free channel. The count of a queue's
// unfinished batches is raised by the reader (hand) and lowered by the
// runner after the batch's transmit (finish), atomically; the cached
// path choice (generation, answer) is the reader's alone. The runner holds
// mu for reading (as Process always does) while it waits in the
// Coalescer; the Coalescer's mutex is taken inside it and held for no
// backend call, so the order is mu, then the Coalescer's mutex. A change
// waiting for mu for writing holds back runners that have not started a
// batch yet; the pending batch then closes by its delay, so nothing waits
// for more than --max-delay plus the lookups in flight.
//
// # Datapath workers
//
// RunWorker (workers.go; the agent's --rx-workers) is the other way to
// run the receive queues: a few goroutines, each serving several queues,
// instead of a RunPort per queue (and, with a GPU, the queue runners and
// the Coalescer). A worker reads its queues' rings without waiting, keeps
// a batcher per queue, and when one is full or the oldest frame of its
// batchers has waited Config.MaxDelay, it runs them all as one batch
// (processParts: each queue's frames admitted as Process admits them, then
// one pass over the tables for all of them, one Classifier lookup per
// table stage, which the Engine sends to a device from the table's floor,
// and one Send per output port). The lookup is synchronous; the worker's
// rings fill meanwhile, and the next batch holds what came. Nothing is
// handed between goroutines and a queue is one worker's, so its frames
// leave in order with no turn tokens. With a batch open and the rings
// empty the worker sleeps in the kernel to the batch's deadline (timer
// slack set to 1 µs), with none it polls its queues' sockets at once
// (poll(2)); block rings are run at once when the deadline is under their
// 1 ms timeout, as RunPort does. Receive stages run on the worker (a
// split port is not split). Switch.BatchStats' Worker (metric
// gswitch_batches_path_total{path="worker"}) counts the batches workers
// ran. Dealing the queues among the workers is the caller's (the agent
// deals them so that every-other-port load spreads over all of them).
//
// With Config.WorkerInFlight K (the agent's --worker-in-flight) a worker
// keeps up to K runs in flight instead (async.go): a closed run's first
// table is looked up through a gpu.Batch submitted under the read lock,
// the worker reads on, and it finishes its runs oldest first once
// gpu.Batch.Ready says their results are in (with its rings empty, or K
// in flight, it waits for the oldest). The read lock is not held across
// the lookup (a worker that held it and took it again for its next run
// would deadlock against a waiting writer): the switch's write generation
// (wgen, moved by every hold of mu for writing) tells a finishing run
// whether a change came in between, and if one did the run looks its
// first table up again under the lock (BatchStats' Relooked; metric
// gswitch_worker_lookahead_runs_total{outcome}). With a Config.Gatherer
// (the agent's --worker-shared) the runs' keys go into the Gatherer's
// shared batches instead of a batch each: a run reserves its part of the
// batch the workers are filling, packs its keys there and polls its share
// (gpu.Gatherer), and a batch goes to the device as soon as a slot is
// free, so that while batches are in flight the keys of every worker's
// runs gather into one device call. The lock order is the switch's mu,
// then the Gatherer's (a run reserves and packs under the read lock).
//
// With Config.WorkerEager (the agent's --worker-close eager) a worker
// closes its open batch as soon as its rings are empty and a run may
// start (fewer than K in flight, or synchronous runs), not at the
// deadline: group commit, each batch what came during the run before it.
// With a device whose small lookups cost no launch (gpu's resident
// lookups) and one run in flight, 8 workers on an H200 host kept a p99 of
// 95-120 µs at 1 Mframes/s of the 131,072-rule set (docs/gpu.md).
//
// # What is not here yet
//
// Meter bands other than drop and DSCP remark, the virtual meters,
// queues, set-field on eth_type,
// copy-TTL between IP headers (IP in IP), IPv6 L4 edits behind extension
// headers, tunnel_id in packet-ins, per-connection miss_send_len (the agent keeps
// it; OpenFlow 1.3 sends table misses through the table-miss entry's
// max_len anyway), and PORT_MOD taking the Linux link down. Flow stats
// and counters are exact; table lookups count each packet once per table
// it reaches.
package pipeline
