package openflow

import (
	"fmt"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
)

// FlowCommand is a FLOW_MOD command (enum ofp_flow_mod_command).
type FlowCommand uint8

// The commands of OpenFlow 1.3 §7.3.4.1.
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

// FlowFlags are a flow entry's flags (enum ofp_flow_mod_flags).
type FlowFlags uint16

// The flags of OpenFlow 1.3.
const (
	FlagSendFlowRem  FlowFlags = 1 << 0
	FlagCheckOverlap FlowFlags = 1 << 1
	FlagResetCounts  FlowFlags = 1 << 2
	FlagNoPktCounts  FlowFlags = 1 << 3
	FlagNoBytCounts  FlowFlags = 1 << 4
	flagsAll                   = 1<<5 - 1
)

// FlowMod is a decoded FLOW_MOD, version-free: what ofproto-style code
// needs to apply it. Match.Wire and Wire keep the encoded match and
// instructions exactly as the controller sent them, so that flow stats can
// echo them byte for byte.
type FlowMod struct {
	Command      FlowCommand
	TableID      uint8
	Cookie       uint64
	CookieMask   uint64
	Priority     uint16
	IdleTimeout  uint16
	HardTimeout  uint16
	Flags        FlowFlags
	BufferID     uint32
	OutPort      uint32
	OutGroup     uint32
	Match        Match
	Instructions Instructions
	// Wire is the instructions as sent (empty for deletes' ignored ones too).
	Wire []byte
}

const flowModFixed = 48 // ofp_flow_mod up to its match

// DecodeFlowMod decodes and checks a whole OFPT_FLOW_MOD message (header
// included). It checks everything that does not depend on the switch;
// CheckTables checks table ids against the switch's table count.
func DecodeFlowMod(msg []byte) (*FlowMod, *Error) {
	if len(msg) < flowModFixed+8 {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "flow_mod of %d bytes", len(msg))
	}
	if len(msg) > maxReplyBody {
		// Its flow stats entry would not fit in one multipart reply.
		return nil, flowModFailed(ofp.ErrCodeFlowModFailedUnknown, "flow_mod of %d bytes: at most %d are supported", len(msg), maxReplyBody)
	}
	fm := &FlowMod{
		Cookie:      be64(msg[8:]),
		CookieMask:  be64(msg[16:]),
		TableID:     msg[24],
		Command:     FlowCommand(msg[25]),
		IdleTimeout: be16(msg[26:]),
		HardTimeout: be16(msg[28:]),
		Priority:    be16(msg[30:]),
		BufferID:    be32(msg[32:]),
		OutPort:     be32(msg[36:]),
		OutGroup:    be32(msg[40:]),
		Flags:       FlowFlags(be16(msg[44:])),
	}
	if err := fm.checkHeader(); err != nil {
		return nil, err
	}
	m, n, err := DecodeMatch(msg[flowModFixed:])
	if err != nil {
		return nil, err
	}
	fm.Match = m
	rest := msg[flowModFixed+n:]
	if fm.Instructions, err = DecodeInstructions(rest); err != nil {
		return nil, err
	}
	fm.Wire = append([]byte(nil), rest...)
	if fm.Command.IsDelete() {
		return fm, nil
	}
	return fm, fm.checkInstructions()
}

// checkHeader checks the fixed fields.
func (fm *FlowMod) checkHeader() *Error {
	if fm.Command > FlowDeleteStrict {
		return flowModFailed(ofp.ErrCodeFlowModFailedBadCommand, "command %d", fm.Command)
	}
	if fm.Flags&^flagsAll != 0 {
		return flowModFailed(ofp.ErrCodeFlowModFailedBadFlags, "flags %#x", uint16(fm.Flags))
	}
	if fm.TableID == TableAll && !fm.Command.IsDelete() {
		return flowModFailed(ofp.ErrCodeFlowModFailedBadTableID, "table OFPTT_ALL with %s", fm.Command)
	}
	return nil
}

// checkInstructions checks the instructions of an add or modify against
// the match and the table.
func (fm *FlowMod) checkInstructions() *Error {
	in := &fm.Instructions
	if in.Has&HasGotoTable != 0 && in.GotoTable <= fm.TableID {
		return badInstruction(ofp.ErrCodeBadInstructionTableID, "goto_table %d from table %d", in.GotoTable, fm.TableID)
	}
	if in.Has&HasWriteMetadata != 0 && in.Metadata&^in.MetadataMask != 0 {
		return badInstruction(ofp.ErrCodeBadInstructionUnsupportedMetadata, "metadata %#x has bits outside mask %#x", in.Metadata, in.MetadataMask)
	}
	if err := checkConsistent(fm.Match.Match, in.Apply); err != nil {
		return err
	}
	return checkConsistent(fm.Match.Match, in.Write)
}

// CheckTables checks the FLOW_MOD's table ids against a switch with
// nTables tables (ids 0..nTables-1): OFPFMFC_BAD_TABLE_ID for the table,
// OFPBIC_BAD_TABLE_ID for goto_table.
func (fm *FlowMod) CheckTables(nTables uint8) *Error {
	if fm.TableID != TableAll && fm.TableID >= nTables {
		return flowModFailed(ofp.ErrCodeFlowModFailedBadTableID, "table %d of %d", fm.TableID, nTables)
	}
	if !fm.Command.IsDelete() && fm.Instructions.Has&HasGotoTable != 0 && fm.Instructions.GotoTable >= nTables {
		return badInstruction(ofp.ErrCodeBadInstructionTableID, "goto_table %d of %d tables", fm.Instructions.GotoTable, nTables)
	}
	return nil
}

// Selector returns the tables/flow selector of a modify or delete (cookie
// and mask, strictness, match, priority); out_port and out_group filters
// are the Switch's, since they need the actions.
func (fm *FlowMod) Selector() flow.Selector {
	return flow.Selector{
		Match:      fm.Match.Match,
		Priority:   fm.Priority,
		Strict:     fm.Command.Strict(),
		Cookie:     fm.Cookie,
		CookieMask: fm.CookieMask,
	}
}

// EncodeFlowMod encodes a FLOW_MOD (for tests and tools): Match.Wire and
// Wire when set, else encoded from Match.Match and Instructions.
func EncodeFlowMod(xid uint32, fm *FlowMod) []byte {
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
	e.raw(matchWire(&fm.Match))
	if fm.Wire != nil {
		e.raw(fm.Wire)
	} else {
		e.raw(EncodeInstructions(&fm.Instructions))
	}
	return e.finish()
}

// matchWire returns a match's encoded form.
func matchWire(m *Match) []byte {
	if m.Wire != nil {
		return m.Wire
	}
	return EncodeMatch(&m.Match)
}
