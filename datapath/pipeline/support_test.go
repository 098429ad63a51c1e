package pipeline

import (
	"errors"
	"testing"

	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/tables/flow"
)

func TestUnsupportedSetFieldRejected(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	bad := []openflow.Action{{Kind: openflow.ActSetField, Field: flow.FieldEthType, Value: []byte{0x08, 0x06}}, output(2)}
	fm := &openflow.FlowMod{Command: openflow.FlowAdd, Priority: 1, Match: matchInPort(1), BufferID: openflow.NoBuffer,
		OutPort: openflow.PortAny, OutGroup: openflow.GroupAny,
		Instructions: openflow.Instructions{Has: openflow.HasWriteActions, Write: bad}}
	var oe *openflow.Error
	if err := r.sw.FlowMod(fm); !errors.As(err, &oe) || oe.Type != ofp.ErrTypeBadAction || oe.Code != ofp.ErrCodeBadActionSetType {
		t.Errorf("flow mod with set_field eth_type: %v", err)
	}
	gm := &openflow.GroupMod{Command: openflow.GroupAdd, Group: openflow.Group{ID: 1, Type: openflow.GroupTypeAll,
		Buckets: []openflow.Bucket{{Actions: bad}}}}
	if err := r.sw.GroupMod(gm); !errors.As(err, &oe) || oe.Code != ofp.ErrCodeBadActionSetType {
		t.Errorf("group mod with set_field eth_type: %v", err)
	}
	if err := r.sw.PacketOut(&openflow.PacketOut{InPort: openflow.PortController, Actions: bad, Data: mplsIPv4(t, 64)}); err == nil {
		t.Error("packet out with set_field eth_type accepted")
	}
}

// set_field tunnel_id, then goto_table: the next table matches it.
func TestSetFieldTunnelIDMatchedLater(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &openflow.FlowMod{Command: openflow.FlowAdd, Priority: 1, Instructions: openflow.Instructions{
		Has: openflow.HasApplyActions | openflow.HasGotoTable, GotoTable: 1,
		Apply: []openflow.Action{{Kind: openflow.ActSetField, Field: flow.FieldTunnelID, Value: []byte{0, 0, 0, 0, 0, 0, 0x30, 0x39}}}}})
	var m flow.Match
	if err := m.SetFieldUint(flow.FieldTunnelID, 12345, ^uint64(0)); err != nil {
		t.Fatal(err)
	}
	r.flowMod(t, &openflow.FlowMod{Command: openflow.FlowAdd, TableID: 1, Priority: 1, Match: openflow.Match{Match: m}, Instructions: applyOut(2)})
	in := mplsIPv4(t, 64)
	r.sw.Process(1, [][]byte{append([]byte(nil), in...)})
	out := r.devs[1].take()
	if len(out) != 1 {
		t.Fatalf("port 2 got %d frames, want 1", len(out))
	}
	eq(t, "frame unchanged", out[0], in)
}
