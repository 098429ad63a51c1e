package openflow

// Switch is the seam between the OpenFlow agent and the switch it speaks
// for (the datapath and its tables). The agent decodes and checks every
// message before it calls the Switch, and translates what the Switch
// returns into replies; the Switch never sees wire bytes except the
// encoded match and instructions it keeps to echo them in flow stats.
//
// The agent calls a Switch from one goroutine per controller connection,
// so calls from different connections run concurrently: a Switch must be
// safe for concurrent use. Errors: a Switch returns an *Error for an exact
// OpenFlow error, one of tables/flow's typed errors (mapped by ErrorFor),
// or any other error, which becomes the request's generic failure
// (OFPFMFC_UNKNOWN for FlowMod, OFPBRC_EPERM otherwise).
type Switch interface {
	// Features describes the switch; the agent reads it once per
	// connection, at the handshake.
	Features() Features
	// Ports describes the ports (OFPMP_PORT_DESC).
	Ports() []Port
	// FlowMod applies an add, modify or delete, already checked against
	// the wire format, the match prerequisites and Features' table count.
	// A failed FlowMod must change nothing.
	FlowMod(fm *FlowMod) error
	// PacketOut sends a packet through the given actions.
	PacketOut(po *PacketOut) error
	// FlowStats returns the flow entries the request selects (table,
	// out_port, out_group, cookie and mask, non-strict match); the agent
	// also uses it for OFPMP_AGGREGATE.
	FlowStats(req *FlowStatsRequest) ([]FlowStats, error)
	// TableStats returns one entry per table.
	TableStats() []TableStats
	// PortStats returns the counters of one port, or of all for PortAny.
	PortStats(port uint32) ([]PortStats, error)
	// Barrier returns once every change made by earlier calls, from any
	// connection, is visible to packets the datapath forwards.
	Barrier() error
}
