// Package rule is gswitch's protocol-free rule model: what a switch is
// told to do and what it reports, whichever control protocol said it.
// OpenFlow (controlproto/openflow) and P4Runtime (controlproto/p4rt) both
// translate their messages into these values once, at their edge, and
// map the model's errors back onto their own codes; the datapath
// (datapath/pipeline) executes the model and never sees a protocol.
//
// # What it holds
//
// Matches are tables/flow's Match (already protocol free: OXM-like fields
// with masks and prerequisites). On top of them: flow entries' mod
// requests (FlowMod, with its Selector for modify and delete),
// Instructions and Actions; groups (GroupMod, Group, Bucket) and the
// GroupTable that applies them; meters (MeterMod, MeterConfig, MeterBand)
// and the MeterTable; port and table configuration (PortMod, TableMod),
// queues; the packets and notifications a switch exchanges with its
// controller (PacketOut, PacketIn, FlowRemoved, PortStatus); the switch's
// description (Features) and statistics (FlowStatsRequest, FlowStats,
// TableStats, PortStats, GroupStats, MeterStats, QueueStats); and the
// special numbers (PortLocal, PortController, ..., GroupAll, MeterAll,
// TableAll, NoBuffer).
//
// The model's semantics are OpenFlow 1.3's (the pipeline implements them:
// instruction order, action sets, group types, meter bands), and its
// enumerations keep OpenFlow 1.3's numbering (action kinds, group types,
// port numbers, flag bits), so that the OpenFlow edge translates them by
// equal values; nothing here knows a wire format. The one field a
// protocol owns is Echo, opaque bytes the edge that installed a flow entry
// wants back in its statistics (OpenFlow: the match and instructions as
// the controller encoded them, which the os-ken switch test tool checks
// byte for byte); the switch stores and returns them, and never reads
// them.
//
// # Errors
//
// A refusal is an *Error: a Kind (GroupExists, UnknownMeter, BadGoto,
// NoSuchPort, ...) and a detail for logs. Kinds are errors themselves, so
// errors.Is(err, rule.GroupLoop) tests one, and errors.As gives the
// detail. tables/flow's typed errors (flow.ErrOverlap, flow.ErrTableFull,
// flow.MatchError) pass through unchanged. Each protocol keeps the table
// from kinds to its codes (controlproto/openflow: OFPT_ERROR type and
// code; controlproto/p4rt: gRPC codes).
//
// # Groups and meters
//
// GroupTable checks a GroupMod completely (CheckGroup: what a group says
// about itself; then existence, limits, references to other groups,
// loops through group actions and watch groups, chained deletes) and
// changes nothing when it refuses one. Delete returns the ids of the
// groups it removed, whose flow entries the switch removes too. Flow
// entries count their references (AddFlowRef, ReleaseFlowRef) for the
// groups' ref_count. Pick selects the buckets a packet goes through:
// every bucket of an all group, the one of an indirect group, one live
// bucket by weight (from a hash of the packet's flow) for select, the
// first live bucket for fast failover; a bucket is live when its watched
// port is live (the caller says) and its watched group has a live bucket.
//
// MeterTable keeps a Meter per id, each with a token bucket per band
// (kb/s or packets/s; burst as given or 100 ms of rate). Meter.Allow runs
// a packet through it: of the bands whose rate the traffic exceeds, the
// one of highest rate applies (drop, or DSCP remark: RemarkDSCP raises an
// AF code point's drop precedence). Configurations are echoed as set.
//
// # Concurrency
//
// The values are plain data, owned by whoever holds them. GroupTable and
// MeterTable are safe for concurrent use: each has one mutex over its
// map; a Meter has its own mutex over its buckets and counters, taken
// after the table's (MeterTable.mu, then Meter.mu; never the other way),
// and Allow takes only the Meter's, so packets of different meters do not
// contend. A switch that must make a flow change and its reference counts
// atomic calls AddFlowRef and ReleaseFlowRef under its own lock, which it
// holds around GroupTable.Mod and MeterTable.Mod too (lock order: the
// switch's lock, then the table's).
package rule
