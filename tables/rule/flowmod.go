package rule

import (
	"fmt"

	"github.com/gswitch/gswitch/tables/flow"
)

// FlowCommand is what a FlowMod does.
type FlowCommand uint8

// The commands of OpenFlow 1.3 §7.3.4.1, in its order.
const (
	FlowAdd FlowCommand = iota
	FlowModify
	FlowModifyStrict
	FlowDelete
	FlowDeleteStrict
)

var flowCommandNames = [...]string{"add", "modify", "modify_strict", "delete", "delete_strict"}

// String returns "add", "modify", ...
func (c FlowCommand) String() string {
	if int(c) < len(flowCommandNames) {
		return flowCommandNames[c]
	}
	return fmt.Sprintf("command%d", uint8(c))
}

// Strict reports whether the command selects strictly.
func (c FlowCommand) Strict() bool { return c == FlowModifyStrict || c == FlowDeleteStrict }

// IsDelete reports whether the command deletes.
func (c FlowCommand) IsDelete() bool { return c == FlowDelete || c == FlowDeleteStrict }

// FlowFlags are a flow entry's flags.
type FlowFlags uint16

// The flags: tell the controller when the entry goes, refuse an add that
// overlaps an entry of the same priority, reset the counters of a replaced
// or modified entry, and (accepted, not acted on) keep no packet or byte
// counts.
const (
	FlagSendFlowRem  FlowFlags = 1 << 0
	FlagCheckOverlap FlowFlags = 1 << 1
	FlagResetCounts  FlowFlags = 1 << 2
	FlagNoPktCounts  FlowFlags = 1 << 3
	FlagNoBytCounts  FlowFlags = 1 << 4
	// FlagsAll covers every flag.
	FlagsAll FlowFlags = 1<<5 - 1
)

// Echo is opaque to the model and to the switch: what the protocol edge
// that sent a flow entry wants back with it, byte for byte (OpenFlow: the
// match and the instructions as the controller encoded them, which flow
// statistics must echo). The switch keeps Match with the entry's match and
// Instructions with its instructions (a modify replaces them), and returns
// both in FlowStats and FlowRemoved. An edge that keeps nothing leaves it
// empty and encodes the values instead.
type Echo struct {
	Match        []byte
	Instructions []byte
}

// FlowMod adds, modifies or deletes flow entries.
type FlowMod struct {
	Command      FlowCommand
	TableID      uint8 // TableAll: every table (deletes)
	Cookie       uint64
	CookieMask   uint64 // modify and delete: select entries whose cookie matches under the mask
	Priority     uint16
	IdleTimeout  uint16 // seconds; 0: none
	HardTimeout  uint16 // seconds; 0: none
	Flags        FlowFlags
	BufferID     uint32 // NoBuffer: none
	OutPort      uint32 // deletes: only entries that output there (PortAny: any)
	OutGroup     uint32 // deletes: only entries that forward to the group (GroupAny: any)
	Match        flow.Match
	Instructions Instructions
	Echo         Echo
}

// Selector returns the tables/flow selector of a modify or delete (cookie
// and mask, strictness, match, priority); out_port and out_group filters
// are the switch's, since they need the instructions.
func (fm *FlowMod) Selector() flow.Selector {
	return flow.Selector{
		Match:      fm.Match,
		Priority:   fm.Priority,
		Strict:     fm.Command.Strict(),
		Cookie:     fm.Cookie,
		CookieMask: fm.CookieMask,
	}
}

// FlowStatsRequest selects flow entries for statistics (and for their
// aggregate): table (TableAll: every one), out_port and out_group filters,
// cookie under a mask, and a match the entries' matches fall within.
type FlowStatsRequest struct {
	TableID    uint8
	OutPort    uint32
	OutGroup   uint32
	Cookie     uint64
	CookieMask uint64
	Match      flow.Match
}

// FlowStats is one flow entry as the switch reports it, with the Echo it
// was installed with.
type FlowStats struct {
	TableID      uint8
	DurationSec  uint32
	DurationNsec uint32
	Priority     uint16
	IdleTimeout  uint16
	HardTimeout  uint16
	Flags        FlowFlags
	Cookie       uint64
	Packets      uint64
	Bytes        uint64
	Match        flow.Match
	Instructions Instructions
	Echo         Echo
}

// TableStats are one flow table's counters.
type TableStats struct {
	TableID uint8
	Active  uint32
	Lookups uint64
	Matched uint64
}

// Why a flow entry was removed.
const (
	RemovedIdleTimeout = 0
	RemovedHardTimeout = 1
	RemovedDelete      = 2
	RemovedGroupDelete = 3
)

// FlowRemoved tells the controller a flow entry installed with
// FlagSendFlowRem is gone, and why (Removed*).
type FlowRemoved struct {
	Cookie       uint64
	Priority     uint16
	Reason       uint8
	TableID      uint8
	DurationSec  uint32
	DurationNsec uint32
	IdleTimeout  uint16
	HardTimeout  uint16
	Packets      uint64
	Bytes        uint64
	Match        flow.Match
	Echo         Echo // the entry's; its Match part echoes the match
}
