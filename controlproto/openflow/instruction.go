package openflow

import (
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

// Instruction types (enum ofp_instruction_type).
const (
	instGotoTable     = 1
	instWriteMetadata = 2
	instWriteActions  = 3
	instApplyActions  = 4
	instClearActions  = 5
	instMeter         = 6
	instExperimenter  = 0xffff
)

// DecodeInstructions reads a list of instructions filling b exactly.
// Errors are OFPET_BAD_INSTRUCTION codes, or OFPET_BAD_ACTION ones for the
// actions inside.
func DecodeInstructions(b []byte) (rule.Instructions, *Error) {
	var in rule.Instructions
	for len(b) > 0 {
		if len(b) < 4 {
			return rule.Instructions{}, badInstruction(ofp.ErrCodeBadInstructionLen, "instruction header truncated")
		}
		t, n := be16(b), int(be16(b[2:]))
		if n < 8 || n%8 != 0 || n > len(b) {
			return rule.Instructions{}, badInstruction(ofp.ErrCodeBadInstructionLen, "instruction %d: length %d (%d bytes left)", t, n, len(b))
		}
		if err := decodeInstruction(&in, t, b[:n]); err != nil {
			return rule.Instructions{}, err
		}
		b = b[n:]
	}
	return in, nil
}

// instLen gives the wire length of the fixed-size instructions.
var instLen = map[uint16]int{instGotoTable: 8, instWriteMetadata: 24, instClearActions: 8, instMeter: 8}

// decodeOne reads one instruction of type t (b is its whole TLV).
func decodeInstruction(in *rule.Instructions, t uint16, b []byte) *Error {
	switch {
	case t == instExperimenter:
		return badInstruction(ofp.ErrCodeBadInstructionExperimenter, "experimenter instructions are not supported")
	case t < instGotoTable || t > instMeter:
		return badInstruction(ofp.ErrCodeBadInstructionUnknown, "unknown instruction type %d", t)
	case in.Has&(1<<t) != 0:
		// OpenFlow 1.3 has no OFPBIC_DUP_INST (1.4 added it).
		return badInstruction(ofp.ErrCodeBadInstructionUnsupported, "instruction type %d given twice", t)
	}
	if want, ok := instLen[t]; ok && len(b) != want {
		return badInstruction(ofp.ErrCodeBadInstructionLen, "instruction %d: length %d, want %d", t, len(b), want)
	}
	in.Has |= 1 << t
	var err *Error
	switch t {
	case instGotoTable:
		in.GotoTable = b[4]
	case instWriteMetadata:
		in.Metadata, in.MetadataMask = be64(b[8:]), be64(b[16:])
	case instWriteActions:
		in.Write, err = DecodeActions(b[8:])
	case instApplyActions:
		in.Apply, err = DecodeActions(b[8:])
	case instMeter:
		in.Meter = be32(b[4:])
	}
	return err
}

// EncodeInstructions encodes instructions in the execution order.
func EncodeInstructions(in *rule.Instructions) []byte {
	e := &enc{}
	if in.Has&rule.HasMeter != 0 {
		e.u16(instMeter)
		e.u16(8)
		e.u32(in.Meter)
	}
	if in.Has&rule.HasApplyActions != 0 {
		appendActionsInst(e, instApplyActions, in.Apply)
	}
	if in.Has&rule.HasClearActions != 0 {
		e.u16(instClearActions)
		e.u16(8)
		e.pad(4)
	}
	if in.Has&rule.HasWriteActions != 0 {
		appendActionsInst(e, instWriteActions, in.Write)
	}
	if in.Has&rule.HasWriteMetadata != 0 {
		e.u16(instWriteMetadata)
		e.u16(24)
		e.pad(4)
		e.u64(in.Metadata)
		e.u64(in.MetadataMask)
	}
	if in.Has&rule.HasGotoTable != 0 {
		e.u16(instGotoTable)
		e.u16(8)
		e.u8(in.GotoTable)
		e.pad(3)
	}
	return e.b
}

func appendActionsInst(e *enc, t uint16, as []rule.Action) {
	body := EncodeActions(as)
	e.u16(t)
	e.u16(uint16(8 + len(body)))
	e.pad(4)
	e.raw(body)
}
