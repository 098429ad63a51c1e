package pipeline

import (
	"testing"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/tables/flow"
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
		_ = r.sw.PacketOut(&openflow.PacketOut{BufferID: openflow.NoBuffer, InPort: 1, Data: frame,
			Actions: []openflow.Action{output(openflow.PortTable)}})
	})
}

var editActions = []openflow.Action{
	{Kind: openflow.ActPopVLAN},
	{Kind: openflow.ActPushVLAN, EthType: 0x88a8},
	{Kind: openflow.ActSetField, Field: flow.FieldVlanVID, Value: []byte{0x10, 7}},
	{Kind: openflow.ActSetField, Field: flow.FieldVlanPCP, Value: []byte{5}},
	{Kind: openflow.ActSetField, Field: flow.FieldEthSrc, Value: []byte{2, 1, 1, 1, 1, 1}},
	{Kind: openflow.ActSetField, Field: flow.FieldIPv4Src, Value: []byte{1, 2, 3, 4}},
	{Kind: openflow.ActSetField, Field: flow.FieldIPv6Dst, Value: make([]byte, 16)},
	{Kind: openflow.ActSetField, Field: flow.FieldIPDSCP, Value: []byte{46}},
	{Kind: openflow.ActSetField, Field: flow.FieldIPECN, Value: []byte{1}},
	{Kind: openflow.ActSetField, Field: flow.FieldTCPDst, Value: []byte{0, 80}},
	{Kind: openflow.ActSetField, Field: flow.FieldUDPSrc, Value: []byte{0, 53}},
	{Kind: openflow.ActSetField, Field: flow.FieldSCTPSrc, Value: []byte{0x30, 0x39}},
	{Kind: openflow.ActSetField, Field: flow.FieldSCTPDst, Value: []byte{0x1a, 0x85}},
	{Kind: openflow.ActDecNwTTL},
	{Kind: openflow.ActSetNwTTL, TTL: 9},
	{Kind: openflow.ActPopVLAN},
	{Kind: openflow.ActPopVLAN},
}

func fuzzRig(t *testing.T) *rig {
	r := newRig(t, 2, FailSecure)
	apply := append(append([]openflow.Action(nil), editActions...), output(2), output(openflow.PortController))
	r.flowMod(t, &openflow.FlowMod{Command: openflow.FlowAdd, Priority: 0, Instructions: openflow.Instructions{
		Has: openflow.HasApplyActions | openflow.HasGotoTable, Apply: apply, GotoTable: 1}})
	r.flowMod(t, &openflow.FlowMod{Command: openflow.FlowAdd, TableID: 1, Priority: 0, Instructions: openflow.Instructions{
		Has: openflow.HasWriteActions, Write: append(append([]openflow.Action(nil), editActions...), output(openflow.PortFlood))}})
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
