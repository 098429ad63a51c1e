package pipeline

import (
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// FuzzProcess runs arbitrary frames through a pipeline whose entries use
// every frame-editing action: nothing may panic or read out of bounds.
func FuzzProcess(f *testing.F) {
	f.Add([]byte{})
	f.Add(make([]byte, 14))
	f.Add([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0x20, 0x05, 0x08, 0x00, 0x45, 0, 0, 20})
	f.Add([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xdd, 0x60, 0, 0, 0, 0, 8, 17, 64})
	// eth/ipv4/sctp with a total length beyond the frame.
	f.Add([]byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 0, 0x01, 0, 0, 0, 0, 0, 64, 132, 0, 0,
		10, 0, 0, 1, 10, 0, 0, 2, 0x2b, 0x67, 0x08, 0xae, 0, 0, 0, 1, 0xde, 0xad, 0xbe, 0xef})
	f.Fuzz(func(t *testing.T, frame []byte) {
		r := fuzzRig(t)
		r.sw.Process(1, [][]byte{append([]byte(nil), frame...)})
		_ = r.sw.PacketOut(&rule.PacketOut{BufferID: rule.NoBuffer, InPort: 1, Data: frame,
			Actions: []rule.Action{output(rule.PortTable)}})
	})
}

var editActions = []rule.Action{
	{Kind: rule.ActPopVLAN},
	{Kind: rule.ActPushVLAN, EthType: 0x88a8},
	{Kind: rule.ActSetField, Field: flow.FieldVlanVID, Value: []byte{0x10, 7}},
	{Kind: rule.ActSetField, Field: flow.FieldVlanPCP, Value: []byte{5}},
	{Kind: rule.ActSetField, Field: flow.FieldEthSrc, Value: []byte{2, 1, 1, 1, 1, 1}},
	{Kind: rule.ActSetField, Field: flow.FieldIPv4Src, Value: []byte{1, 2, 3, 4}},
	{Kind: rule.ActSetField, Field: flow.FieldIPv6Dst, Value: make([]byte, 16)},
	{Kind: rule.ActSetField, Field: flow.FieldIPDSCP, Value: []byte{46}},
	{Kind: rule.ActSetField, Field: flow.FieldIPECN, Value: []byte{1}},
	{Kind: rule.ActSetField, Field: flow.FieldTCPDst, Value: []byte{0, 80}},
	{Kind: rule.ActSetField, Field: flow.FieldUDPSrc, Value: []byte{0, 53}},
	{Kind: rule.ActSetField, Field: flow.FieldSCTPSrc, Value: []byte{0x30, 0x39}},
	{Kind: rule.ActSetField, Field: flow.FieldSCTPDst, Value: []byte{0x1a, 0x85}},
	{Kind: rule.ActDecNwTTL},
	{Kind: rule.ActSetNwTTL, TTL: 9},
	{Kind: rule.ActPopVLAN},
	{Kind: rule.ActPopVLAN},
}

func fuzzRig(t *testing.T) *rig {
	r := newRig(t, 2, FailSecure)
	apply := append(append([]rule.Action(nil), editActions...), output(2), output(rule.PortController))
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 0, Instructions: rule.Instructions{
		Has: rule.HasApplyActions | rule.HasGotoTable, Apply: apply, GotoTable: 1}})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: 0, Instructions: rule.Instructions{
		Has: rule.HasWriteActions, Write: append(append([]rule.Action(nil), editActions...), output(rule.PortFlood))}})
	return r
}

// TestProcessShortFrames runs every prefix of edit-heavy frames through
// the fuzz pipeline (the fuzz target's seeds, exhaustively over lengths).
func TestProcessShortFrames(t *testing.T) {
	r := fuzzRig(t)
	full := udpFrame(t, "10.0.0.1", "10.0.0.2")
	tagged, _ := pushVLAN(append([]byte(nil), full...), 0x8100)
	for _, f := range [][]byte{full, tagged, sctpFrame(t, false, 1, 2), sctpFrame(t, true, 1, 2)} {
		for n := 0; n <= len(f); n++ {
			r.sw.Process(1, [][]byte{append([]byte(nil), f[:n]...)})
		}
	}
	if len(r.devs[1].take()) == 0 {
		t.Fatal("no frame made it through the edit pipeline")
	}
}
