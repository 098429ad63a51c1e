package pipeline

import (
	"errors"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

func TestUnsupportedSetFieldRejected(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	bad := []rule.Action{{Kind: rule.ActSetField, Field: flow.FieldEthType, Value: []byte{0x08, 0x06}}, output(2)}
	fm := &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), BufferID: rule.NoBuffer,
		OutPort: rule.PortAny, OutGroup: rule.GroupAny,
		Instructions: rule.Instructions{Has: rule.HasWriteActions, Write: bad}}
	var oe *rule.Error
	if err := r.sw.FlowMod(fm); !errors.As(err, &oe) || oe.Kind != rule.BadSetField {
		t.Errorf("flow mod with set_field eth_type: %v", err)
	}
	gm := &rule.GroupMod{Command: rule.GroupAdd, Group: rule.Group{ID: 1, Type: rule.GroupTypeAll,
		Buckets: []rule.Bucket{{Actions: bad}}}}
	if err := r.sw.GroupMod(gm); !errors.As(err, &oe) || oe.Kind != rule.BadSetField {
		t.Errorf("group mod with set_field eth_type: %v", err)
	}
	if err := r.sw.PacketOut(&rule.PacketOut{InPort: rule.PortController, Actions: bad, Data: mplsIPv4(t, 64)}); err == nil {
		t.Error("packet out with set_field eth_type accepted")
	}
}

// set_field tunnel_id, then goto_table: the next table matches it.
func TestSetFieldTunnelIDMatchedLater(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Instructions: rule.Instructions{
		Has: rule.HasApplyActions | rule.HasGotoTable, GotoTable: 1,
		Apply: []rule.Action{{Kind: rule.ActSetField, Field: flow.FieldTunnelID, Value: []byte{0, 0, 0, 0, 0, 0, 0x30, 0x39}}}}})
	var m flow.Match
	if err := m.SetFieldUint(flow.FieldTunnelID, 12345, ^uint64(0)); err != nil {
		t.Fatal(err)
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: 1, Match: m, Instructions: applyOut(2)})
	in := mplsIPv4(t, 64)
	r.sw.Process(1, [][]byte{append([]byte(nil), in...)})
	out := r.devs[1].take()
	if len(out) != 1 {
		t.Fatalf("port 2 got %d frames, want 1", len(out))
	}
	eq(t, "frame unchanged", out[0], in)
}
