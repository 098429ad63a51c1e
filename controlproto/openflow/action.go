package openflow

import (
	"slices"

	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

const actExperimenter = 0xffff

// fixedActionLen gives the wire length of every action but set_field.
var fixedActionLen = map[rule.ActionKind]int{
	rule.ActOutput: 16, rule.ActCopyTTLOut: 8, rule.ActCopyTTLIn: 8, rule.ActSetMPLSTTL: 8, rule.ActDecMPLSTTL: 8,
	rule.ActPushVLAN: 8, rule.ActPopVLAN: 8, rule.ActPushMPLS: 8, rule.ActPopMPLS: 8, rule.ActSetQueue: 8,
	rule.ActGroup: 8, rule.ActSetNwTTL: 8, rule.ActDecNwTTL: 8, rule.ActPushPBB: 8, rule.ActPopPBB: 8,
}

// DecodeActions reads a list of actions (ofp_action_header TLVs) filling b
// exactly. Errors are OFPET_BAD_ACTION codes.
func DecodeActions(b []byte) ([]rule.Action, *Error) {
	var as []rule.Action
	for len(b) > 0 {
		if len(b) < 8 {
			return nil, badAction(ofp.ErrCodeBadActionLen, "action header truncated (%d bytes)", len(b))
		}
		t, n := rule.ActionKind(be16(b)), int(be16(b[2:]))
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
func decodeAction(t rule.ActionKind, b []byte) (rule.Action, *Error) {
	if t == actExperimenter {
		return rule.Action{}, badAction(ofp.ErrCodeBadActionExperimenter, "experimenter actions are not supported")
	}
	if t == rule.ActSetField {
		return decodeSetField(b)
	}
	want, ok := fixedActionLen[t]
	if !ok {
		return rule.Action{}, badAction(ofp.ErrCodeBadActionType, "unknown action type %d", uint16(t))
	}
	if len(b) != want {
		return rule.Action{}, badAction(ofp.ErrCodeBadActionLen, "action %s: length %d, want %d", t, len(b), want)
	}
	a := rule.Action{Kind: t}
	switch t {
	case rule.ActOutput:
		a.Port, a.MaxLen = be32(b[4:]), be16(b[8:])
	case rule.ActSetMPLSTTL, rule.ActSetNwTTL:
		a.TTL = b[4]
	case rule.ActPushVLAN, rule.ActPushMPLS, rule.ActPopMPLS, rule.ActPushPBB:
		a.EthType = be16(b[4:])
	case rule.ActSetQueue, rule.ActGroup:
		a.ID = be32(b[4:])
	}
	return a, checkAction(&a)
}

// checkAction checks an action's arguments.
func checkAction(a *rule.Action) *Error {
	switch a.Kind {
	case rule.ActOutput:
		if !validOutPort(a.Port) {
			return badAction(ofp.ErrCodeBadActionOutPort, "output to port %#x", a.Port)
		}
	case rule.ActGroup:
		if a.ID > rule.GroupMax {
			return badAction(ofp.ErrCodeBadActionOutGroup, "group %#x", a.ID)
		}
	case rule.ActPushVLAN:
		if a.EthType != 0x8100 && a.EthType != 0x88a8 {
			return badAction(ofp.ErrCodeBadActionArgument, "push_vlan ethertype %#04x", a.EthType)
		}
	case rule.ActPushMPLS:
		if a.EthType != flow.EthTypeMPLS && a.EthType != flow.EthTypeMPLSMcast {
			return badAction(ofp.ErrCodeBadActionArgument, "push_mpls ethertype %#04x", a.EthType)
		}
	case rule.ActPushPBB:
		if a.EthType != flow.EthTypePBB {
			return badAction(ofp.ErrCodeBadActionArgument, "push_pbb ethertype %#04x", a.EthType)
		}
	}
	return nil
}

// validOutPort reports whether an output action may name port p: a
// physical port (1..OFPP_MAX) or a reserved port other than ANY.
func validOutPort(p uint32) bool {
	return (p != 0 && p <= rule.PortMax) || (p >= rule.PortInPort && p <= rule.PortLocal)
}

// decodeSetField reads OFPAT_SET_FIELD: one unmasked OXM TLV, padded.
func decodeSetField(b []byte) (rule.Action, *Error) {
	x, n, ok := parseOXM(b[4:])
	if !ok || 4+n+pad8(4+n) != len(b) {
		return rule.Action{}, badAction(ofp.ErrCodeBadActionSetLen, "set_field: OXM does not fill the action")
	}
	f, ok := basicField(&x)
	if !ok || !canSet(f) {
		return rule.Action{}, badAction(ofp.ErrCodeBadActionSetType, "set_field: class %#04x field %d cannot be set", x.class, x.field)
	}
	if x.hasMask {
		return rule.Action{}, badAction(ofp.ErrCodeBadActionSetArgument, "set_field %s: masks are not allowed in OpenFlow 1.3", f)
	}
	if len(x.payload) != oxmSize(f) {
		return rule.Action{}, badAction(ofp.ErrCodeBadActionSetLen, "set_field %s: %d bytes", f, len(x.payload))
	}
	v, ok := fromWire(f, x.payload)
	if !ok {
		return rule.Action{}, badAction(ofp.ErrCodeBadActionSetArgument, "set_field %s: %#x has bits beyond the field's %d", f, x.payload, f.Bits())
	}
	var m flow.Match
	if err := m.SetField(f, v, nil); err != nil {
		return rule.Action{}, badAction(ofp.ErrCodeBadActionSetArgument, "set_field %s: %v", f, err)
	}
	return rule.Action{Kind: rule.ActSetField, Field: f, Value: append([]byte(nil), v...)}, nil
}

// EncodeActions encodes actions as OpenFlow 1.3 TLVs.
func EncodeActions(as []rule.Action) []byte {
	e := &enc{}
	for i := range as {
		appendAction(e, &as[i])
	}
	return e.b
}

func appendAction(e *enc, a *rule.Action) {
	start := len(e.b)
	e.u16(uint16(a.Kind))
	e.u16(0)
	switch a.Kind {
	case rule.ActOutput:
		e.u32(a.Port)
		e.u16(a.MaxLen)
		e.pad(6)
	case rule.ActSetMPLSTTL, rule.ActSetNwTTL:
		e.u8(a.TTL)
		e.pad(3)
	case rule.ActPushVLAN, rule.ActPushMPLS, rule.ActPopMPLS, rule.ActPushPBB:
		e.u16(a.EthType)
		e.pad(2)
	case rule.ActSetQueue, rule.ActGroup:
		e.u32(a.ID)
	case rule.ActSetField:
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
func checkConsistent(m flow.Match, as []rule.Action) *Error {
	for _, a := range as {
		switch a.Kind {
		case rule.ActPushVLAN:
			_ = m.SetFieldUint(flow.FieldVlanVID, flow.VIDPresent, flow.VIDPresent)
		case rule.ActPopVLAN:
			m.Clear(flow.FieldVlanVID)
			m.Clear(flow.FieldVlanPCP)
		case rule.ActPushMPLS, rule.ActPopMPLS, rule.ActPushPBB:
			clearEthTypeDependents(&m)
			m.SetEthType(a.EthType)
		case rule.ActSetField:
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
func sortedActionKinds() []rule.ActionKind {
	ks := []rule.ActionKind{rule.ActSetField}
	for k := range fixedActionLen {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
