package openflow

import (
	"fmt"
	"slices"

	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
)

// ActionKind is an action type; the values are OpenFlow 1.3's
// (enum ofp_action_type), named by what they do.
type ActionKind uint16

// The actions of OpenFlow 1.3 §7.2.5.
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

const actExperimenter = 0xffff

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

// Action is one action, version-free: Kind says which fields mean
// something.
type Action struct {
	Kind    ActionKind
	Port    uint32     // output: the port (or a reserved port)
	MaxLen  uint16     // output: bytes to send to the controller
	ID      uint32     // group: group id; set_queue: queue id
	EthType uint16     // push_vlan, push_mpls, push_pbb, pop_mpls
	TTL     uint8      // set_mpls_ttl, set_nw_ttl
	Field   flow.Field // set_field
	Value   []byte     // set_field: big-endian, the field's width in bytes (tables/flow's: 3 for mpls_label and ipv6_flabel, 4 on the wire)
}

// fixedActionLen gives the wire length of every action but set_field.
var fixedActionLen = map[ActionKind]int{
	ActOutput: 16, ActCopyTTLOut: 8, ActCopyTTLIn: 8, ActSetMPLSTTL: 8, ActDecMPLSTTL: 8,
	ActPushVLAN: 8, ActPopVLAN: 8, ActPushMPLS: 8, ActPopMPLS: 8, ActSetQueue: 8,
	ActGroup: 8, ActSetNwTTL: 8, ActDecNwTTL: 8, ActPushPBB: 8, ActPopPBB: 8,
}

// DecodeActions reads a list of actions (ofp_action_header TLVs) filling b
// exactly. Errors are OFPET_BAD_ACTION codes.
func DecodeActions(b []byte) ([]Action, *Error) {
	var as []Action
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, badAction(ofp.ErrCodeBadActionLen, "action header truncated (%d bytes)", len(b))
		}
		t, n := ActionKind(be16(b)), int(be16(b[2:]))
		if n < 8 || n%8 != 0 || n > len(b) {
			return nil, badAction(ofp.ErrCodeBadActionLen, "action %s: length %d (%d bytes left)", t, n, len(b))
		}
		a, err := decodeAction(t, b[:n])
		if err != nil {
			return nil, err
		}
		as = append(as, a)
		b = b[n:]
	}
	return as, nil
}

// decodeAction reads one action whose length is known to be a multiple
// of 8 within b.
func decodeAction(t ActionKind, b []byte) (Action, *Error) {
	if t == actExperimenter {
		return Action{}, badAction(ofp.ErrCodeBadActionExperimenter, "experimenter actions are not supported")
	}
	if t == ActSetField {
		return decodeSetField(b)
	}
	want, ok := fixedActionLen[t]
	if !ok {
		return Action{}, badAction(ofp.ErrCodeBadActionType, "unknown action type %d", uint16(t))
	}
	if len(b) != want {
		return Action{}, badAction(ofp.ErrCodeBadActionLen, "action %s: length %d, want %d", t, len(b), want)
	}
	a := Action{Kind: t}
	switch t {
	case ActOutput:
		a.Port, a.MaxLen = be32(b[4:]), be16(b[8:])
	case ActSetMPLSTTL, ActSetNwTTL:
		a.TTL = b[4]
	case ActPushVLAN, ActPushMPLS, ActPopMPLS, ActPushPBB:
		a.EthType = be16(b[4:])
	case ActSetQueue, ActGroup:
		a.ID = be32(b[4:])
	}
	return a, checkAction(&a)
}

// checkAction checks an action's arguments.
func checkAction(a *Action) *Error {
	switch a.Kind {
	case ActOutput:
		if !validOutPort(a.Port) {
			return badAction(ofp.ErrCodeBadActionOutPort, "output to port %#x", a.Port)
		}
	case ActGroup:
		if a.ID > GroupMax {
			return badAction(ofp.ErrCodeBadActionOutGroup, "group %#x", a.ID)
		}
	case ActPushVLAN:
		if a.EthType != 0x8100 && a.EthType != 0x88a8 {
			return badAction(ofp.ErrCodeBadActionArgument, "push_vlan ethertype %#04x", a.EthType)
		}
	case ActPushMPLS:
		if a.EthType != flow.EthTypeMPLS && a.EthType != flow.EthTypeMPLSMcast {
			return badAction(ofp.ErrCodeBadActionArgument, "push_mpls ethertype %#04x", a.EthType)
		}
	case ActPushPBB:
		if a.EthType != flow.EthTypePBB {
			return badAction(ofp.ErrCodeBadActionArgument, "push_pbb ethertype %#04x", a.EthType)
		}
	}
	return nil
}

// validOutPort reports whether an output action may name port p: a
// physical port (1..OFPP_MAX) or a reserved port other than ANY.
func validOutPort(p uint32) bool {
	return (p != 0 && p <= PortMax) || (p >= PortInPort && p <= PortLocal)
}

// decodeSetField reads OFPAT_SET_FIELD: one unmasked OXM TLV, padded.
func decodeSetField(b []byte) (Action, *Error) {
	x, n, ok := parseOXM(b[4:])
	if !ok || 4+n+pad8(4+n) != len(b) {
		return Action{}, badAction(ofp.ErrCodeBadActionSetLen, "set_field: OXM does not fill the action")
	}
	f, ok := basicField(&x)
	if !ok || !canSet(f) {
		return Action{}, badAction(ofp.ErrCodeBadActionSetType, "set_field: class %#04x field %d cannot be set", x.class, x.field)
	}
	if x.hasMask {
		return Action{}, badAction(ofp.ErrCodeBadActionSetArgument, "set_field %s: masks are not allowed in OpenFlow 1.3", f)
	}
	if len(x.payload) != oxmSize(f) {
		return Action{}, badAction(ofp.ErrCodeBadActionSetLen, "set_field %s: %d bytes", f, len(x.payload))
	}
	v, ok := fromWire(f, x.payload)
	if !ok {
		return Action{}, badAction(ofp.ErrCodeBadActionSetArgument, "set_field %s: %#x has bits beyond the field's %d", f, x.payload, f.Bits())
	}
	var m flow.Match
	if err := m.SetField(f, v, nil); err != nil {
		return Action{}, badAction(ofp.ErrCodeBadActionSetArgument, "set_field %s: %v", f, err)
	}
	return Action{Kind: ActSetField, Field: f, Value: append([]byte(nil), v...)}, nil
}

// EncodeActions encodes actions as OpenFlow 1.3 TLVs.
func EncodeActions(as []Action) []byte {
	e := &enc{}
	for i := range as {
		appendAction(e, &as[i])
	}
	return e.b
}

func appendAction(e *enc, a *Action) {
	start := len(e.b)
	e.u16(uint16(a.Kind))
	e.u16(0)
	switch a.Kind {
	case ActOutput:
		e.u32(a.Port)
		e.u16(a.MaxLen)
		e.pad(6)
	case ActSetMPLSTTL, ActSetNwTTL:
		e.u8(a.TTL)
		e.pad(3)
	case ActPushVLAN, ActPushMPLS, ActPopMPLS, ActPushPBB:
		e.u16(a.EthType)
		e.pad(2)
	case ActSetQueue, ActGroup:
		e.u32(a.ID)
	case ActSetField:
		v := toWire(a.Field, a.Value)
		e.u16(oxmClassBasic)
		e.u8(uint8(a.Field) << 1)
		e.u8(uint8(len(v)))
		e.raw(v)
		e.align8(start)
	default:
		e.pad(4)
	}
	n := len(e.b) - start
	e.b[start+2], e.b[start+3] = byte(n>>8), byte(n)
}

// checkConsistent checks set_field actions against the match as the
// actions before them leave it (OFPBAC_MATCH_INCONSISTENT): a field may be
// set only where its prerequisites hold. push_vlan makes a VLAN tag
// present; push_mpls, pop_mpls and push_pbb change eth_type; pop_vlan
// removes the tag.
func checkConsistent(m flow.Match, as []Action) *Error {
	for _, a := range as {
		switch a.Kind {
		case ActPushVLAN:
			_ = m.SetFieldUint(flow.FieldVlanVID, flow.VIDPresent, flow.VIDPresent)
		case ActPopVLAN:
			m.Clear(flow.FieldVlanVID)
			m.Clear(flow.FieldVlanPCP)
		case ActPushMPLS, ActPopMPLS, ActPushPBB:
			clearEthTypeDependents(&m)
			m.SetEthType(a.EthType)
		case ActSetField:
			if err := m.CheckField(a.Field); err != nil {
				return badAction(ofp.ErrCodeBadActionMatchInconsistent, "set_field %s: %v", a.Field, err)
			}
			if a.Field == flow.FieldEthType || a.Field == flow.FieldIPProto || a.Field == flow.FieldVlanVID {
				_ = m.SetField(a.Field, a.Value, nil)
			}
		}
	}
	return nil
}

// clearEthTypeDependents removes every field that needs eth_type, before
// eth_type changes.
func clearEthTypeDependents(m *flow.Match) {
	for _, f := range flow.Fields() {
		for _, p := range f.Info().Prereqs {
			if p.Field == flow.FieldEthType || p.Field == flow.FieldIPProto || p.Field == flow.FieldICMPv6Type {
				m.Clear(f)
			}
		}
	}
}

// canSet reports whether set_field may write f: every basic field but the
// pipeline fields the packet arrived with and the IPv6 extension header
// pseudo-field.
func canSet(f flow.Field) bool {
	return f != flow.FieldInPort && f != flow.FieldInPhyPort && f != flow.FieldIPv6ExtHdr
}

// sortedActionKinds returns the supported action kinds, ascending.
func sortedActionKinds() []ActionKind {
	ks := []ActionKind{ActSetField}
	for k := range fixedActionLen {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
