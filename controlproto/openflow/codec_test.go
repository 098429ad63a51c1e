package openflow

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// unhex reads hex with spaces and newlines for readability.
func unhex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		panic(err) // a typo in a test's own constant
	}
	return b
}

// fixLen writes a message's length into its header.
func fixLen(b []byte) []byte {
	b[2], b[3] = byte(len(b)>>8), byte(len(b))
	return b
}

// flowModHex is a FLOW_MOD built by hand from OpenFlow 1.3.5 §7.3.4.1:
// add, table 0, priority 10, ip,nw_dst=10.0.0.0/8, apply_actions(output:2
// max_len 0xffe5).
const flowModHex = `
04 0e 00 60 00 00 00 01
00 00 00 00 00 00 12 34   00 00 00 00 00 00 00 00
00 00 00 1e 00 3c 00 0a   ff ff ff ff ff ff ff ff
ff ff ff ff 00 01 00 00
00 01 00 16 80 00 0a 02 08 00 80 00 19 08 0a 00 00 00 ff 00 00 00 00 00
00 04 00 18 00 00 00 00 00 00 00 10 00 00 00 02 ff e5 00 00 00 00 00 00`

func TestDecodeFlowMod(t *testing.T) {
	msg := unhex(t, flowModHex)
	fm, err := DecodeFlowMod(msg)
	if err != nil {
		t.Fatal(err)
	}
	var want flow.Match
	want.SetEthType(0x0800)
	if err := want.SetIPv4Dst(0x0a000000, 8); err != nil {
		t.Fatal(err)
	}
	switch {
	case fm.Command != rule.FlowAdd || fm.TableID != 0 || fm.Priority != 10 || fm.Cookie != 0x1234:
		t.Errorf("header fields: %+v", fm)
	case fm.IdleTimeout != 30 || fm.HardTimeout != 60 || fm.Flags != rule.FlagSendFlowRem:
		t.Errorf("timeouts/flags: %+v", fm)
	case fm.BufferID != rule.NoBuffer || fm.OutPort != rule.PortAny || fm.OutGroup != rule.GroupAny:
		t.Errorf("buffer/out: %+v", fm)
	case fm.Match != want:
		t.Errorf("match %v, want %v", &fm.Match, &want)
	case fm.Instructions.Has != rule.HasApplyActions || len(fm.Instructions.Apply) != 1:
		t.Errorf("instructions %+v", fm.Instructions)
	case !reflect.DeepEqual(fm.Instructions.Apply[0], rule.Action{Kind: rule.ActOutput, Port: 2, MaxLen: 0xffe5}):
		t.Errorf("action %+v", fm.Instructions.Apply[0])
	}
	if m, _, err := DecodeMatch(msg[48:]); err != nil || len(m.Fields) != 2 || m.Fields[0] != flow.FieldEthType || m.Fields[1] != flow.FieldIPv4Dst {
		t.Errorf("fields %v (%v)", m.Fields, err)
	}
	if !bytes.Equal(fm.Echo.Match, msg[48:72]) || !bytes.Equal(fm.Echo.Instructions, msg[72:]) {
		t.Errorf("wire forms not kept")
	}
	if got := EncodeFlowMod(1, fm); !bytes.Equal(got, msg) {
		t.Errorf("re-encoded\n%x\nwant\n%x", got, msg)
	}
	fm.Echo = rule.Echo{}
	if got := EncodeFlowMod(1, fm); !bytes.Equal(got, msg) {
		t.Errorf("encoded from values\n%x\nwant\n%x", got, msg)
	}
}

// TestDecodeActionsAndInstructions round-trips every action and
// instruction kind through hand-written bytes.
func TestDecodeActionsAndInstructions(t *testing.T) {
	ins := unhex(t, `
		00 06 00 08 00 00 00 07
		00 04 00 50 00 00 00 00
		  00 00 00 10 ff ff ff fd 00 80 00 00 00 00 00 00
		  00 11 00 08 81 00 00 00
		  00 19 00 10 80 00 0c 02 10 05 00 00 00 00 00 00
		  00 0f 00 08 40 00 00 00
		  00 17 00 08 3f 00 00 00
		  00 16 00 08 00 00 00 05
		  00 12 00 08 00 00 00 00
		00 05 00 08 00 00 00 00
		00 03 00 18 00 00 00 00
		  00 15 00 08 00 00 00 03
		  00 18 00 08 00 00 00 00
		00 02 00 18 00 00 00 00 00 00 00 00 00 00 00 0f 00 00 00 00 00 00 00 ff
		00 01 00 08 02 00 00 00`)
	in, err := DecodeInstructions(ins)
	if err != nil {
		t.Fatal(err)
	}
	want := rule.Instructions{
		Has:   rule.HasMeter | rule.HasApplyActions | rule.HasClearActions | rule.HasWriteActions | rule.HasWriteMetadata | rule.HasGotoTable,
		Meter: 7,
		Apply: []rule.Action{
			{Kind: rule.ActOutput, Port: rule.PortController, MaxLen: 128},
			{Kind: rule.ActPushVLAN, EthType: 0x8100},
			{Kind: rule.ActSetField, Field: flow.FieldVlanVID, Value: []byte{0x10, 0x05}},
			{Kind: rule.ActSetMPLSTTL, TTL: 64},
			{Kind: rule.ActSetNwTTL, TTL: 63},
			{Kind: rule.ActGroup, ID: 5},
			{Kind: rule.ActPopVLAN},
		},
		Write:        []rule.Action{{Kind: rule.ActSetQueue, ID: 3}, {Kind: rule.ActDecNwTTL}},
		Metadata:     0x0f,
		MetadataMask: 0xff,
		GotoTable:    2,
	}
	if !equalInstructions(&in, &want) {
		t.Fatalf("decoded %+v\nwant %+v", in, want)
	}
	if got := EncodeInstructions(&in); !bytes.Equal(got, ins) {
		t.Errorf("re-encoded\n%x\nwant\n%x", got, ins)
	}
}

func equalInstructions(a, b *rule.Instructions) bool {
	return bytes.Equal(EncodeInstructions(a), EncodeInstructions(b)) && a.Has == b.Has
}

// flowModWith builds a FLOW_MOD (add, table 0, priority 1) from hex
// pieces of its match fields (OXM TLVs) and instructions.
func flowModWith(t testing.TB, cmdTable, oxms, instructions string) []byte {
	e := &enc{}
	e.raw(unhex(t, "04 0e 00 00 00 00 00 2a"))
	e.pad(16)
	e.raw(unhex(t, cmdTable))
	e.raw(unhex(t, "00 00 00 00 00 01 ff ff ff ff ff ff ff ff ff ff ff ff 00 00 00 00"))
	m := unhex(t, oxms)
	e.u16(1)
	e.u16(uint16(4 + len(m)))
	e.raw(m)
	e.pad(pad8(4 + len(m)))
	e.raw(unhex(t, instructions))
	return fixLen(e.b)
}

const (
	add0      = "00 00"
	ethIP     = "80 00 0a 02 08 00 "
	ethARP    = "80 00 0a 02 08 06 "
	outPort2  = "00 04 00 18 00 00 00 00 00 00 00 10 00 00 00 02 ff e5 00 00 00 00 00 00"
	noInstr   = ""
	applyHead = "00 04 00 18 00 00 00 00 "
)

// TestFlowModErrors checks the error type and code of every malformed
// FLOW_MOD the decoder handles.
func TestFlowModErrors(t *testing.T) {
	cases := []struct {
		name string
		msg  []byte
		typ  ofp.ErrType
		code ofp.ErrCode
	}{
		{"short", unhex(t, "04 0e 00 10 00 00 00 01 00 00 00 00 00 00 00 00"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{"bad command", flowModWith(t, "00 07", "", noInstr), ofp.ErrTypeFlowModFailed, ofp.ErrCodeFlowModFailedBadCommand},
		{"add to OFPTT_ALL", flowModWith(t, "ff 00", "", noInstr), ofp.ErrTypeFlowModFailed, ofp.ErrCodeFlowModFailedBadTableID},
		{"match type standard", func() []byte {
			b := flowModWith(t, add0, "", noInstr)
			b[49] = 0
			return b
		}(), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadType},
		{"match length beyond message", func() []byte {
			b := flowModWith(t, add0, "", noInstr)
			b[51] = 0x40
			return b
		}(), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadLen},
		{"oxm truncated", flowModWith(t, add0, "80 00 0a 04 08 00", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadLen},
		{"oxm wrong size", flowModWith(t, add0, "80 00 0a 01 08", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadLen},
		{"unknown field", flowModWith(t, add0, "80 00 5a 02 00 00", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadField},
		{"tcp_flags is not OF1.3", flowModWith(t, add0, ethIP+"80 00 14 01 06 80 00 54 02 00 02", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadField},
		{"experimenter class", flowModWith(t, add0, "ff ff 00 08 00 00 23 20 00 00 00 00", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadField},
		{"missing prerequisite", flowModWith(t, add0, "80 00 18 04 0a 00 00 01", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadPrereq},
		{"wrong prerequisite (arp_op on IPv4)", flowModWith(t, add0, ethIP+"80 00 2a 02 00 01", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadPrereq},
		{"tcp_dst after udp", flowModWith(t, add0, ethIP+"80 00 14 01 11 80 00 1c 02 00 50", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadPrereq},
		{"duplicate field", flowModWith(t, add0, ethIP+ethIP, noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchDupField},
		{"value outside mask", flowModWith(t, add0, ethIP+"80 00 19 08 0a 00 00 01 ff 00 00 00", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadWildcards},
		{"mask on unmaskable field", flowModWith(t, add0, "80 00 0b 04 08 00 ff ff", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadMask},
		{"value beyond width", flowModWith(t, add0, ethIP+"80 00 10 01 40", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadValue},
		{"mask beyond width", flowModWith(t, add0, "80 00 0d 04 00 01 e0 01", noInstr), ofp.ErrTypeBadMatch, ofp.ErrCodeBadMatchBadMask},
		{"bad flags", func() []byte {
			b := flowModWith(t, add0, "", noInstr)
			b[44] = 0x80
			return b
		}(), ofp.ErrTypeFlowModFailed, ofp.ErrCodeFlowModFailedBadFlags},
		{"instruction truncated", flowModWith(t, add0, "", "00 04 00"), ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionLen},
		{"instruction length not 8n", flowModWith(t, add0, "", "00 05 00 0c 00 00 00 00 00 00 00 00"), ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionLen},
		{"unknown instruction", flowModWith(t, add0, "", "00 09 00 08 00 00 00 00"), ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionUnknown},
		{"experimenter instruction", flowModWith(t, add0, "", "ff ff 00 08 00 00 23 20"), ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionExperimenter},
		{"instruction twice", flowModWith(t, add0, "", "00 05 00 08 00 00 00 00 00 05 00 08 00 00 00 00"), ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionUnsupported},
		{"goto_table backwards", flowModWith(t, "01 00", "", "00 01 00 08 01 00 00 00"), ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionTableID},
		{"goto_table wrong length", flowModWith(t, add0, "", "00 01 00 10 01 00 00 00 00 00 00 00 00 00 00 00"), ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionLen},
		{"metadata outside mask", flowModWith(t, add0, "", "00 02 00 18 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 00 00 ff"), ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionUnsupportedMetadata},
		{"action truncated", flowModWith(t, add0, "", "00 04 00 10 00 00 00 00 00 00 00 10 00 00 00 02"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionLen},
		{"output wrong length", flowModWith(t, add0, "", "00 04 00 10 00 00 00 00 00 00 00 08 00 00 00 02"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionLen},
		{"unknown action", flowModWith(t, add0, "", "00 04 00 10 00 00 00 00 00 63 00 08 00 00 00 00"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionType},
		{"experimenter action", flowModWith(t, add0, "", "00 04 00 18 00 00 00 00 ff ff 00 10 00 00 23 20 00 00 00 00 00 00 00 00"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionExperimenter},
		{"output to port 0", flowModWith(t, add0, "", applyHead+"00 00 00 10 00 00 00 00 ff e5 00 00 00 00 00 00"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionOutPort},
		{"output to ANY", flowModWith(t, add0, "", applyHead+"00 00 00 10 ff ff ff ff ff e5 00 00 00 00 00 00"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionOutPort},
		{"group ANY", flowModWith(t, add0, "", "00 04 00 10 00 00 00 00 00 16 00 08 ff ff ff ff"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionOutGroup},
		{"push_vlan bad ethertype", flowModWith(t, add0, "", "00 04 00 10 00 00 00 00 00 11 00 08 08 00 00 00"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionArgument},
		{"set_field masked", flowModWith(t, add0, ethIP, "00 04 00 18 00 00 00 00 00 19 00 10 80 00 17 08 0a 00 00 01 ff ff ff ff"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionSetArgument},
		{"set_field in_port", flowModWith(t, add0, "", "00 04 00 18 00 00 00 00 00 19 00 10 80 00 00 04 00 00 00 01 00 00 00 00"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionSetType},
		{"set_field wrong size", flowModWith(t, add0, ethIP, "00 04 00 18 00 00 00 00 00 19 00 10 80 00 18 03 0a 00 00 00 00 00 00 00"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionSetLen},
		{"set_field value beyond width", flowModWith(t, add0, ethIP, "00 04 00 18 00 00 00 00 00 19 00 10 80 00 10 01 40 00 00 00 00 00 00 00"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionSetArgument},
		{"set_field without prerequisite", flowModWith(t, add0, "", "00 04 00 18 00 00 00 00 00 19 00 10 80 00 18 04 0a 00 00 01 00 00 00 00"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionMatchInconsistent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeFlowMod(c.msg)
			if err == nil {
				t.Fatalf("decoded %x", c.msg)
			}
			if err.Type != c.typ || err.Code != c.code {
				t.Fatalf("got %v, want %s", err, ofp.Error{Type: c.typ, Code: c.code})
			}
			checkErrorReply(t, c.msg, EncodeError(c.msg, err))
		})
	}
}

// TestFlowModAccepts checks matches and actions that must be accepted.
func TestFlowModAccepts(t *testing.T) {
	cases := []struct{ name, oxms, instr string }{
		{"empty", "", noInstr},
		{"prerequisites after the field", "80 00 18 04 0a 00 00 01" + ethIP, noInstr},
		{"arp", ethARP + "80 00 2a 02 00 01", noInstr},
		{"vlan present", "80 00 0d 04 10 00 10 00 80 00 0e 01 03", noInstr},
		{"set vlan_pcp after push_vlan", "", "00 04 00 20 00 00 00 00 00 11 00 08 81 00 00 00 00 19 00 10 80 00 0e 01 05 00 00 00 00 00 00 00"},
		{"set ipv4_dst", ethIP, "00 04 00 18 00 00 00 00 00 19 00 10 80 00 18 04 0a 00 00 01 00 00 00 00"},
		{"delete ignores instructions checks", ethIP, "00 01 00 08 00 00 00 00"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ct := add0
			if strings.HasPrefix(c.name, "delete") {
				ct = "00 03"
			}
			if _, err := DecodeFlowMod(flowModWith(t, ct, c.oxms, c.instr)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// checkErrorReply checks that reply is a well-formed OFPT_ERROR for req:
// version 1.3, req's xid, a known type, req's first 64 bytes as data.
func checkErrorReply(t testing.TB, req, reply []byte) {
	t.Helper()
	typ, _, data, ok := ParseError(reply)
	if !ok {
		t.Fatalf("not an OFPT_ERROR: %x", reply)
	}
	h, _ := ParseHeader(reply)
	if h.Version != Version {
		t.Fatalf("error version %#x", h.Version)
	}
	if rh, ok := ParseHeader(req); ok && rh.Xid != h.Xid {
		t.Fatalf("error xid %d, want %d", h.Xid, rh.Xid)
	}
	if typ > ofp.ErrTypeTableFeaturesFailed {
		t.Fatalf("error type %d", typ)
	}
	if !bytes.Equal(data, req[:min(len(req), ErrorDataLen)]) {
		t.Fatalf("error data %x, want the request's first 64 bytes", data)
	}
}

func TestErrorFor(t *testing.T) {
	fb := flowModFailed(ofp.ErrCodeFlowModFailedUnknown, "x")
	cases := []struct {
		err  error
		want *Error
	}{
		{&flow.OverlapError{ID: 1}, flowModFailed(ofp.ErrCodeFlowModFailedOverlap, "")},
		{flow.ErrTableFull, flowModFailed(ofp.ErrCodeFlowModFailedTableFull, "")},
		{&flow.MatchError{Field: flow.FieldTCPDst, Err: flow.ErrBadPrereq}, badMatch(ofp.ErrCodeBadMatchBadPrereq, "")},
		{&flow.MatchError{Field: flow.FieldTCPDst, Err: flow.ErrBadWildcards}, badMatch(ofp.ErrCodeBadMatchBadWildcards, "")},
		{&flow.MatchError{Field: flow.FieldTCPDst, Err: flow.ErrBadMask}, badMatch(ofp.ErrCodeBadMatchBadMask, "")},
		{&flow.MatchError{Field: flow.FieldTCPDst, Err: flow.ErrBadValue}, badMatch(ofp.ErrCodeBadMatchBadValue, "")},
		{&flow.MatchError{Field: flow.FieldTCPDst, Err: flow.ErrBadLength}, badMatch(ofp.ErrCodeBadMatchBadLen, "")},
		{&flow.MatchError{Field: flow.FieldTCPDst, Err: flow.ErrDupField}, badMatch(ofp.ErrCodeBadMatchDupField, "")},
		{&flow.MatchError{Field: flow.NoField, Err: flow.ErrBadField}, badMatch(ofp.ErrCodeBadMatchBadField, "")},
		{badRequest(ofp.ErrCodeBadRequestIsSlave, ""), badRequest(ofp.ErrCodeBadRequestIsSlave, "")},
		{errors.New("disk on fire"), fb},
	}
	for _, c := range cases {
		if got := ErrorFor(c.err, fb); !errors.Is(got, c.want) {
			t.Errorf("ErrorFor(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestEncodeMatch checks EncodeMatch on a match built in code: fields in
// OXM order, masks only where partial.
func TestEncodeMatch(t *testing.T) {
	var m flow.Match
	m.SetInPort(3)
	m.SetEthType(0x0800)
	m.SetIPProto(6)
	if err := m.SetIPv4Src(0x0a000000, 8); err != nil {
		t.Fatal(err)
	}
	if err := m.SetL4Dst(80, 0xffff); err != nil {
		t.Fatal(err)
	}
	want := unhex(t, `00 01 00 29
		80 00 00 04 00 00 00 03
		80 00 0a 02 08 00
		80 00 14 01 06
		80 00 17 08 0a 00 00 00 ff 00 00 00
		80 00 1c 02 00 50
		00 00 00 00 00 00 00`)
	got := EncodeMatch(&m)
	if !bytes.Equal(got, want) {
		t.Fatalf("got\n%x\nwant\n%x", got, want)
	}
	dm, n, err := DecodeMatch(got)
	if err != nil || n != len(got) || dm.Match != m {
		t.Fatalf("decode: %v %d %v", err, n, &dm.Match)
	}
}

// TestOVSExtensionsMatch: tcp_flags as the ONF experimenter field and
// masked transport ports, as ovs-ofctl -O OpenFlow13 sends them, decode;
// EncodeMatch writes them the same way, so a match carrying them
// round-trips; a mask neither OpenFlow 1.3 nor Open vSwitch allows is
// written as it is and refused, never dropped.
func TestOVSExtensionsMatch(t *testing.T) {
	tcp := ethIP + "80 00 14 01 06 "
	for _, c := range []struct {
		name, oxms string
		want       func(m *flow.Match)
	}{
		{"onf tcp_flags", tcp + "ff ff 54 06 4f 4e 46 00 00 02", func(m *flow.Match) { _ = m.SetTCPFlags(0x002, 0xffff) }},
		{"onf tcp_flags masked", tcp + "ff ff 55 08 4f 4e 46 00 00 02 00 12", func(m *flow.Match) { _ = m.SetTCPFlags(0x002, 0x012) }},
		{"masked tcp_dst", tcp + "80 00 1d 04 04 00 fc 00", func(m *flow.Match) { _ = m.SetL4Dst(0x400, 0xfc00) }},
		{"masked udp_src", ethIP + "80 00 14 01 11 80 00 1f 04 00 00 ff 00", func(m *flow.Match) { _ = m.SetFieldUint(flow.FieldUDPSrc, 0, 0xff00) }},
	} {
		fm, oerr := DecodeFlowMod(flowModWith(t, add0, c.oxms, noInstr))
		if oerr != nil {
			t.Errorf("%s: %v", c.name, oerr)
			continue
		}
		var want flow.Match
		want.SetEthType(0x0800)
		if c.name == "masked udp_src" {
			want.SetIPProto(17)
		} else {
			want.SetIPProto(6)
		}
		c.want(&want)
		if fm.Match != want {
			t.Errorf("%s: decoded %s, want %s", c.name, fm.Match.String(), want.String())
		}
		if err := MatchEncodable(&want); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		tlv := c.oxms[strings.Index(c.oxms, "80 00 14")+len("80 00 14 01 06 "):] // the TLV after ip_proto
		if enc := EncodeMatch(&want); !bytes.Contains(enc, unhex(t, tlv)) {
			t.Errorf("%s: EncodeMatch %x does not hold %s", c.name, enc, c.oxms)
		}
	}
	// Refused: the OpenFlow 1.5 basic field 42, another experimenter,
	// the ONF field without its id, a mask on eth_type.
	for _, c := range []struct{ name, oxms string }{
		{"basic tcp_flags", ethIP + "80 00 14 01 06 80 00 54 02 00 02"},
		{"nicira tcp_flags", ethIP + "80 00 14 01 06 ff ff 54 06 00 00 23 20 00 02"},
		{"onf field 41", ethIP + "80 00 14 01 06 ff ff 52 06 4f 4e 46 00 00 02"},
		{"onf tcp_flags truncated", ethIP + "80 00 14 01 06 ff ff 54 02 00 02"},
		{"onf tcp_flags without tcp", ethIP + "ff ff 54 06 4f 4e 46 00 00 02"},
	} {
		if _, oerr := DecodeFlowMod(flowModWith(t, add0, c.oxms, noInstr)); oerr == nil {
			t.Errorf("%s: accepted", c.name)
		}
	}
	var m flow.Match
	if err := m.SetFieldUint(flow.FieldEthType, 0x0800, 0xff00); err != nil {
		t.Fatal(err)
	}
	if err := MatchEncodable(&m); err == nil || !strings.Contains(err.Error(), "cannot be masked") {
		t.Errorf("masked eth_type: %v", err)
	}
	if enc := EncodeMatch(&m); !bytes.Contains(enc, unhex(t, "80 00 0b 04 08 00 ff 00")) {
		t.Errorf("masked eth_type encoded as %x: the mask is lost", enc)
	}
}
