package openflow

import "github.com/gswitch/gswitch/tables/rule"

// Switch is the seam between the OpenFlow agent and the switch it speaks
// for (the datapath and its tables). The agent decodes and checks every
// message before it calls the Switch, and translates what the Switch
// returns into replies; the Switch never sees wire bytes, only the opaque
// rule.Echo it keeps with each flow entry and returns in flow stats.
//
// The agent calls a Switch from one goroutine per controller connection,
// so calls from different connections run concurrently: a Switch must be
// safe for concurrent use. Every type in it is tables/rule's (or a basic
// type), so a switch implements it without importing this package.
// Errors: a Switch returns a *rule.Error or one of tables/flow's typed
// errors (mapped onto OpenFlow codes by ErrorFor), an *Error for an exact
// OpenFlow error (a wrapper that knows OpenFlow may), or any other error,
// which becomes the request's generic failure (OFPFMFC_UNKNOWN for
// FlowMod, OFPBRC_EPERM otherwise).
type Switch interface {
	// Features describes the switch; the agent reads it once per
	// connection, at the handshake.
	Features() rule.Features
	// Ports describes the ports (OFPMP_PORT_DESC).
	Ports() []rule.Port
	// FlowMod applies an add, modify or delete, already checked against
	// the wire format, the match prerequisites and Features' table count.
	// A failed FlowMod must change nothing.
	FlowMod(fm *rule.FlowMod) error
	// PacketOut sends a packet through the given actions.
	PacketOut(po *rule.PacketOut) error
	// FlowStats returns the flow entries the request selects (table,
	// out_port, out_group, cookie and mask, non-strict match); the agent
	// also uses it for OFPMP_AGGREGATE.
	FlowStats(req *rule.FlowStatsRequest) ([]rule.FlowStats, error)
	// TableStats returns one entry per table.
	TableStats() []rule.TableStats
	// PortStats returns the counters of one port, or of all for PortAny.
	PortStats(port uint32) ([]rule.PortStats, error)
	// Barrier returns once every change made by earlier calls, from any
	// connection, is visible to packets the datapath forwards.
	Barrier() error
}

// The optional interfaces below extend a Switch; the agent finds them by
// type assertion. A Switch without one answers as before: the message type
// gets OFPBRC_BAD_TYPE and the multipart type OFPBRC_BAD_MULTIPART. The
// agent decodes and checks each message before calling them (everything
// that does not depend on the switch's state); the switch checks the rest
// (tables/rule's GroupTable and MeterTable do it as OpenFlow specifies)
// and, as for
// FlowMod, a failed call must change nothing.

// GroupSwitch is a Switch with a group table (GROUP_MOD, OFPMP_GROUP,
// OFPMP_GROUP_DESC, OFPMP_GROUP_FEATURES).
type GroupSwitch interface {
	// GroupMod adds, modifies or deletes groups (GroupAll: every group).
	// Deleting a group also removes the flow entries that forward to it.
	GroupMod(gm *rule.GroupMod) error
	// GroupDesc describes every group, ascending by id.
	GroupDesc() []rule.Group
	// GroupStats returns the counters of one group, or of all for
	// GroupAll; none for a group that does not exist.
	GroupStats(id uint32) ([]rule.GroupStats, error)
	// GroupFeatures describes the group table.
	GroupFeatures() rule.GroupFeatures
	// GroupExists reports whether a group exists: the agent answers a
	// FLOW_MOD or PACKET_OUT whose group action names a missing group
	// with OFPBAC_BAD_OUT_GROUP. The switch must check again when it
	// applies the change, since another connection may delete the group
	// in between.
	GroupExists(id uint32) bool
}

// MeterSwitch is a Switch with a meter table (METER_MOD, OFPMP_METER,
// OFPMP_METER_CONFIG, OFPMP_METER_FEATURES).
type MeterSwitch interface {
	// MeterMod adds, modifies or deletes meters (MeterAll: every meter).
	// Deleting a meter also removes the flow entries that use it.
	MeterMod(mm *rule.MeterMod) error
	// MeterConfig returns the configuration of one meter, or of all for
	// MeterAll, ascending by id; none for a meter that does not exist.
	// Bands are reported as they were set (burst_size included).
	MeterConfig(id uint32) ([]rule.MeterConfig, error)
	// MeterStats returns the counters of one meter, or of all for
	// MeterAll.
	MeterStats(id uint32) ([]rule.MeterStats, error)
	// MeterFeatures describes the meter table.
	MeterFeatures() rule.MeterFeatures
	// MeterExists reports whether a meter exists: the agent answers a
	// FLOW_MOD whose meter instruction names a missing meter with
	// OFPMMFC_UNKNOWN_METER (the switch checks again, as for groups).
	MeterExists(id uint32) bool
}

// PortModSwitch is a Switch whose ports a controller may configure
// (PORT_MOD). The agent has checked the port number, hardware address and
// advertised features against Ports(). The switch reports the change with
// Agent.PortStatus (reason PortModified), as OpenFlow requires.
type PortModSwitch interface {
	PortMod(pm *rule.PortMod) error
}

// TableModSwitch is a Switch that accepts TABLE_MOD. In OpenFlow 1.3 its
// configuration is deprecated and carries nothing a switch acts on; the
// agent has checked the table id.
type TableModSwitch interface {
	TableMod(tm *rule.TableMod) error
}

// QueueSwitch is a Switch with queues (QUEUE_GET_CONFIG, OFPMP_QUEUE, and
// set_queue validation). A switch without queues may implement it with
// empty answers.
type QueueSwitch interface {
	// Queues returns the queues of a port, or of every port for PortAny;
	// an error (OFPQOFC_BAD_PORT) for a port that does not exist.
	Queues(port uint32) ([]rule.Queue, error)
	// QueueStats returns the counters of a port's queue; port may be
	// PortAny and queue QueueAll.
	QueueStats(port, queue uint32) ([]rule.QueueStats, error)
}
