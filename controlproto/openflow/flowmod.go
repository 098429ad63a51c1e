package openflow

import (
	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

const flowModFixed = 48 // ofp_flow_mod up to its match

// maxFlowMod bounds the FLOW_MOD the agent accepts: its flow stats entry
// (the same match and instructions after 48 fixed bytes, as many as the
// FLOW_MOD's) must fit in one multipart reply.
const maxFlowMod = maxReplyBody

// DecodeFlowMod decodes and checks a whole OFPT_FLOW_MOD message (header
// included). It checks everything that does not depend on the switch;
// CheckTables checks table ids against the switch's table count.
func DecodeFlowMod(msg []byte) (*rule.FlowMod, *Error) {
	if len(msg) < flowModFixed+8 {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "flow_mod of %d bytes", len(msg))
	}
	fm := &rule.FlowMod{
		Cookie:      be64(msg[8:]),
		CookieMask:  be64(msg[16:]),
		TableID:     msg[24],
		Command:     rule.FlowCommand(msg[25]),
		IdleTimeout: be16(msg[26:]),
		HardTimeout: be16(msg[28:]),
		Priority:    be16(msg[30:]),
		BufferID:    be32(msg[32:]),
		OutPort:     be32(msg[36:]),
		OutGroup:    be32(msg[40:]),
		Flags:       rule.FlowFlags(be16(msg[44:])),
	}
	if err := checkFlowModHeader(fm); err != nil {
		return nil, err
	}
	m, n, err := DecodeMatch(msg[flowModFixed:])
	if err != nil {
		return nil, err
	}
	fm.Match, fm.Echo.Match = m.Match, m.Wire
	rest := msg[flowModFixed+n:]
	if fm.Instructions, err = DecodeInstructions(rest); err != nil {
		return nil, err
	}
	fm.Echo.Instructions = append([]byte(nil), rest...)
	if fm.Command.IsDelete() {
		return fm, nil
	}
	if len(msg) > maxFlowMod {
		// Its flow stats entry would not fit in one multipart reply. A
		// match is at most a few hundred bytes (a field may not repeat),
		// so what makes it this long is its actions: OFPBAC_TOO_MANY,
		// "can't handle this many actions" (OpenFlow 1.3.5 §7.4.4.1),
		// the precise code, where an earlier version said
		// OFPFMFC_UNKNOWN.
		return nil, badAction(ofp.ErrCodeBadActionTooMany, "flow_mod of %d bytes: at most %d are supported", len(msg), maxFlowMod)
	}
	return fm, checkFlowModInstructions(fm)
}

// checkFlowModHeader checks the fixed fields.
func checkFlowModHeader(fm *rule.FlowMod) *Error {
	if fm.Command > rule.FlowDeleteStrict {
		return flowModFailed(ofp.ErrCodeFlowModFailedBadCommand, "command %d", fm.Command)
	}
	if fm.Flags&^rule.FlagsAll != 0 {
		return flowModFailed(ofp.ErrCodeFlowModFailedBadFlags, "flags %#x", uint16(fm.Flags))
	}
	if fm.TableID == rule.TableAll && !fm.Command.IsDelete() {
		return flowModFailed(ofp.ErrCodeFlowModFailedBadTableID, "table OFPTT_ALL with %s", fm.Command)
	}
	return nil
}

// checkFlowModInstructions checks the instructions of an add or modify against
// the match and the table.
func checkFlowModInstructions(fm *rule.FlowMod) *Error {
	in := &fm.Instructions
	if in.Has&rule.HasGotoTable != 0 && in.GotoTable <= fm.TableID {
		return badInstruction(ofp.ErrCodeBadInstructionTableID, "goto_table %d from table %d", in.GotoTable, fm.TableID)
	}
	if in.Has&rule.HasWriteMetadata != 0 && in.Metadata&^in.MetadataMask != 0 {
		return badInstruction(ofp.ErrCodeBadInstructionUnsupportedMetadata, "metadata %#x has bits outside mask %#x", in.Metadata, in.MetadataMask)
	}
	if err := checkConsistent(fm.Match, in.Apply); err != nil {
		return err
	}
	return checkConsistent(fm.Match, in.Write)
}

// CheckTables checks the FLOW_MOD's table ids against a switch with
// nTables tables (ids 0..nTables-1): OFPFMFC_BAD_TABLE_ID for the table,
// OFPBIC_BAD_TABLE_ID for goto_table.
func CheckTables(fm *rule.FlowMod, nTables uint8) *Error {
	if fm.TableID != rule.TableAll && fm.TableID >= nTables {
		return flowModFailed(ofp.ErrCodeFlowModFailedBadTableID, "table %d of %d", fm.TableID, nTables)
	}
	if !fm.Command.IsDelete() && fm.Instructions.Has&rule.HasGotoTable != 0 && fm.Instructions.GotoTable >= nTables {
		return badInstruction(ofp.ErrCodeBadInstructionTableID, "goto_table %d of %d tables", fm.Instructions.GotoTable, nTables)
	}
	return nil
}

// EncodeFlowMod encodes a FLOW_MOD (for tests and tools): Echo.Match and
// Echo.Instructions when set, else encoded from Match and Instructions.
func EncodeFlowMod(xid uint32, fm *rule.FlowMod) []byte {
	e := newMsg(of.TypeFlowMod, xid)
	e.u64(fm.Cookie)
	e.u64(fm.CookieMask)
	e.u8(fm.TableID)
	e.u8(uint8(fm.Command))
	e.u16(fm.IdleTimeout)
	e.u16(fm.HardTimeout)
	e.u16(fm.Priority)
	e.u32(fm.BufferID)
	e.u32(fm.OutPort)
	e.u32(fm.OutGroup)
	e.u16(uint16(fm.Flags))
	e.pad(2)
	e.raw(echoMatch(fm.Echo.Match, &fm.Match))
	e.raw(echoInstructions(fm.Echo.Instructions, &fm.Instructions))
	return e.finish()
}

// echoMatch returns the match as the controller sent it (echo), or, for
// an entry installed otherwise, m encoded.
func echoMatch(echo []byte, m *flow.Match) []byte {
	if echo != nil {
		return echo
	}
	return EncodeMatch(m)
}

// echoInstructions returns the instructions as the controller sent them
// (echo), or, for an entry installed otherwise, in encoded.
func echoInstructions(echo []byte, in *rule.Instructions) []byte {
	if echo != nil {
		return echo
	}
	return EncodeInstructions(in)
}
