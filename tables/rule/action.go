package rule

import (
	"fmt"

	"github.com/gswitch/gswitch/tables/flow"
)

// ActionKind is an action type. The model has OpenFlow 1.3's actions
// (§5.12) and keeps their numbering, so that a protocol's translation of
// them is a table of equal values; the names say what they do.
type ActionKind uint16

// The actions.
const (
	ActOutput     ActionKind = 0
	ActCopyTTLOut ActionKind = 11
	ActCopyTTLIn  ActionKind = 12
	ActSetMPLSTTL ActionKind = 15
	ActDecMPLSTTL ActionKind = 16
	ActPushVLAN   ActionKind = 17
	ActPopVLAN    ActionKind = 18
	ActPushMPLS   ActionKind = 19
	ActPopMPLS    ActionKind = 20
	ActSetQueue   ActionKind = 21
	ActGroup      ActionKind = 22
	ActSetNwTTL   ActionKind = 23
	ActDecNwTTL   ActionKind = 24
	ActSetField   ActionKind = 25
	ActPushPBB    ActionKind = 26
	ActPopPBB     ActionKind = 27
)

var actionNames = map[ActionKind]string{
	ActOutput: "output", ActCopyTTLOut: "copy_ttl_out", ActCopyTTLIn: "copy_ttl_in",
	ActSetMPLSTTL: "set_mpls_ttl", ActDecMPLSTTL: "dec_mpls_ttl", ActPushVLAN: "push_vlan",
	ActPopVLAN: "pop_vlan", ActPushMPLS: "push_mpls", ActPopMPLS: "pop_mpls",
	ActSetQueue: "set_queue", ActGroup: "group", ActSetNwTTL: "set_nw_ttl",
	ActDecNwTTL: "dec_nw_ttl", ActSetField: "set_field", ActPushPBB: "push_pbb", ActPopPBB: "pop_pbb",
}

// String returns the action's name as ovs-ofctl writes it.
func (k ActionKind) String() string {
	if s, ok := actionNames[k]; ok {
		return s
	}
	return fmt.Sprintf("action%d", uint16(k))
}

// Valid reports whether k is one of the model's actions.
func (k ActionKind) Valid() bool {
	_, ok := actionNames[k]
	return ok
}

// Action is one action: Kind says which fields mean something.
type Action struct {
	Kind    ActionKind
	Port    uint32     // output: the port (or a reserved port)
	MaxLen  uint16     // output to CONTROLLER: bytes of the packet to send (MaxLenNoBuffer: all)
	ID      uint32     // group: group id; set_queue: queue id
	EthType uint16     // push_vlan, push_mpls, push_pbb, pop_mpls
	TTL     uint8      // set_mpls_ttl, set_nw_ttl
	Field   flow.Field // set_field
	Value   []byte     // set_field: big-endian, tables/flow's width of the field (3 bytes for mpls_label and ipv6_flabel)
}

// InstrSet says which instructions a flow entry has.
type InstrSet uint8

// The instructions, as bits of an InstrSet (bit 1<<n for OpenFlow 1.3's
// instruction type n).
const (
	HasGotoTable     InstrSet = 1 << 1
	HasWriteMetadata InstrSet = 1 << 2
	HasWriteActions  InstrSet = 1 << 3
	HasApplyActions  InstrSet = 1 << 4
	HasClearActions  InstrSet = 1 << 5
	HasMeter         InstrSet = 1 << 6
)

// Instructions are a flow entry's instructions: at most one of each kind
// (OpenFlow 1.3 §5.9), executed in the order meter, apply actions, clear
// actions, write actions, write metadata, goto table.
type Instructions struct {
	Has          InstrSet
	Meter        uint32
	Apply        []Action
	Write        []Action
	Metadata     uint64
	MetadataMask uint64
	GotoTable    uint8
}

// GroupRefs returns the groups the instructions' actions forward to.
func (in *Instructions) GroupRefs() []uint32 {
	var ids []uint32
	for _, as := range [][]Action{in.Apply, in.Write} {
		for _, a := range as {
			if a.Kind == ActGroup {
				ids = append(ids, a.ID)
			}
		}
	}
	return ids
}

// OutputsTo reports whether the instructions have an output to port and a
// group action to group (PortAny, GroupAny: no condition): the out_port
// and out_group filters of deletes and flow statistics.
func (in *Instructions) OutputsTo(port, group uint32) bool {
	has := func(k ActionKind, v uint32) bool {
		for _, as := range [][]Action{in.Apply, in.Write} {
			for _, a := range as {
				if a.Kind == k && (k == ActOutput && a.Port == v || k == ActGroup && a.ID == v) {
					return true
				}
			}
		}
		return false
	}
	return (port == PortAny || has(ActOutput, port)) && (group == GroupAny || has(ActGroup, group))
}
