package openflow

import (
	"github.com/netrack/openflow/ofp"
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

// InstrSet says which instructions a flow entry has (bit 1<<type).
type InstrSet uint8

// The instructions, as bits of an InstrSet.
const (
	HasGotoTable     InstrSet = 1 << instGotoTable
	HasWriteMetadata InstrSet = 1 << instWriteMetadata
	HasWriteActions  InstrSet = 1 << instWriteActions
	HasApplyActions  InstrSet = 1 << instApplyActions
	HasClearActions  InstrSet = 1 << instClearActions
	HasMeter         InstrSet = 1 << instMeter
)

// Instructions are a flow entry's instructions, version-free: at most one
// of each kind (OpenFlow 1.3 §5.9), executed in the order meter, apply
// actions, clear actions, write actions, write metadata, goto table.
type Instructions struct {
	Has          InstrSet
	Meter        uint32
	Apply        []Action
	Write        []Action
	Metadata     uint64
	MetadataMask uint64
	GotoTable    uint8
}

// DecodeInstructions reads a list of instructions filling b exactly.
// Errors are OFPET_BAD_INSTRUCTION codes, or OFPET_BAD_ACTION ones for the
// actions inside.
func DecodeInstructions(b []byte) (Instructions, *Error) {
	var in Instructions
	for len(b) > 0 {
		if len(b) < 4 {
			return Instructions{}, badInstruction(ofp.ErrCodeBadInstructionLen, "instruction header truncated")
		}
		t, n := be16(b), int(be16(b[2:]))
		if n < 8 || n%8 != 0 || n > len(b) {
			return Instructions{}, badInstruction(ofp.ErrCodeBadInstructionLen, "instruction %d: length %d (%d bytes left)", t, n, len(b))
		}
		if err := in.decodeOne(t, b[:n]); err != nil {
			return Instructions{}, err
		}
		b = b[n:]
	}
	return in, nil
}

// instLen gives the wire length of the fixed-size instructions.
var instLen = map[uint16]int{instGotoTable: 8, instWriteMetadata: 24, instClearActions: 8, instMeter: 8}

// decodeOne reads one instruction of type t (b is its whole TLV).
func (in *Instructions) decodeOne(t uint16, b []byte) *Error {
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
func EncodeInstructions(in *Instructions) []byte {
	e := &enc{}
	if in.Has&HasMeter != 0 {
		e.u16(instMeter)
		e.u16(8)
		e.u32(in.Meter)
	}
	if in.Has&HasApplyActions != 0 {
		appendActionsInst(e, instApplyActions, in.Apply)
	}
	if in.Has&HasClearActions != 0 {
		e.u16(instClearActions)
		e.u16(8)
		e.pad(4)
	}
	if in.Has&HasWriteActions != 0 {
		appendActionsInst(e, instWriteActions, in.Write)
	}
	if in.Has&HasWriteMetadata != 0 {
		e.u16(instWriteMetadata)
		e.u16(24)
		e.pad(4)
		e.u64(in.Metadata)
		e.u64(in.MetadataMask)
	}
	if in.Has&HasGotoTable != 0 {
		e.u16(instGotoTable)
		e.u16(8)
		e.u8(in.GotoTable)
		e.pad(3)
	}
	return e.b
}

func appendActionsInst(e *enc, t uint16, as []Action) {
	body := EncodeActions(as)
	e.u16(t)
	e.u16(uint16(8 + len(body)))
	e.pad(4)
	e.raw(body)
}
