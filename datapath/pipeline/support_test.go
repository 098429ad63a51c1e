package pipeline

import (
	"errors"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// set_field on in_port (which OpenFlow's codec refuses before; P4Runtime
// never asks for it) is the one kind the datapath refuses.
func TestUnsupportedSetFieldRejected(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	bad := []rule.Action{{Kind: rule.ActSetField, Field: flow.FieldInPort, Value: []byte{0, 0, 0, 2}}, output(2)}
	fm := &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), BufferID: rule.NoBuffer,
		OutPort: rule.PortAny, OutGroup: rule.GroupAny,
		Instructions: rule.Instructions{Has: rule.HasWriteActions, Write: bad}}
	var oe *rule.Error
	if err := r.sw.FlowMod(fm); !errors.As(err, &oe) || oe.Kind != rule.BadSetField {
		t.Errorf("flow mod with set_field in_port: %v", err)
	}
	gm := &rule.GroupMod{Command: rule.GroupAdd, Group: rule.Group{ID: 1, Type: rule.GroupTypeAll,
		Buckets: []rule.Bucket{{Actions: bad}}}}
	if err := r.sw.GroupMod(gm); !errors.As(err, &oe) || oe.Kind != rule.BadSetField {
		t.Errorf("group mod with set_field in_port: %v", err)
	}
	if err := r.sw.PacketOut(&rule.PacketOut{InPort: rule.PortController, Actions: bad, Data: mplsIPv4(t, 64)}); err == nil {
		t.Error("packet out with set_field in_port accepted")
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

// Every field OpenFlow 1.3 lets set_field write (§7.2.5: every OXM basic
// header field; not in_port, in_phy_port or the ipv6_exthdr
// pseudo-field; tcp_flags is an ONF experimenter field in 1.3) is accepted
// in a FLOW_MOD, a GROUP_MOD and a PACKET_OUT.
func TestSetFieldEveryOpenFlowField(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	for i, f := range flow.Fields() {
		if f == flow.FieldInPort || f == flow.FieldInPhyPort || f == flow.FieldIPv6ExtHdr || f == flow.FieldTCPFlags {
			continue
		}
		v := make([]byte, (f.Bits()+7)/8)
		as := []rule.Action{{Kind: rule.ActSetField, Field: f, Value: v}, output(2)}
		if err := r.sw.FlowMod(&rule.FlowMod{Command: rule.FlowAdd, Priority: uint16(i + 1), Match: matchInPort(1),
			BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny,
			Instructions: rule.Instructions{Has: rule.HasWriteActions, Write: as}}); err != nil {
			t.Errorf("flow mod with set_field %s: %v", f, err)
		}
		if err := r.sw.GroupMod(&rule.GroupMod{Command: rule.GroupAdd, Group: rule.Group{ID: uint32(i + 1), Type: rule.GroupTypeAll,
			Buckets: []rule.Bucket{{WatchPort: rule.PortAny, WatchGroup: rule.GroupAny, Actions: as}}}}); err != nil {
			t.Errorf("group mod with set_field %s: %v", f, err)
		}
		if err := r.sw.PacketOut(&rule.PacketOut{InPort: rule.PortController, Actions: as, Data: mplsIPv4(t, 64)}); err != nil {
			t.Errorf("packet out with set_field %s: %v", f, err)
		}
	}
}

// set_field eth_type rewrites the type after the VLAN tags, and the next
// table matches the new type.
func TestSetFieldEthType(t *testing.T) {
	in := mplsIPv4(t, 64)
	f := append([]byte(nil), in...)
	if !setField(f, flow.FieldEthType, []byte{0x88, 0xb5}) {
		t.Fatal("set_field eth_type refused")
	}
	want := append([]byte(nil), in...)
	want[12], want[13] = 0x88, 0xb5
	eq(t, "untagged", f, want)

	tagged, _ := pushVLAN(append([]byte(nil), in...), 0x8100)
	if !setField(tagged, flow.FieldEthType, []byte{0x88, 0xb5}) {
		t.Fatal("set_field eth_type on a tagged frame refused")
	}
	if be16(tagged[12:]) != 0x8100 || be16(tagged[16:]) != 0x88b5 {
		t.Errorf("tagged: tpid %#x type %#x, want 0x8100 0x88b5", be16(tagged[12:]), be16(tagged[16:]))
	}
	if setField(in[:13], flow.FieldEthType, []byte{0x88, 0xb5}) || setField(f, flow.FieldEthType, []byte{1}) {
		t.Error("set_field eth_type on a runt or with a 1-byte value accepted")
	}

	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Instructions: rule.Instructions{
		Has: rule.HasApplyActions | rule.HasGotoTable, GotoTable: 1,
		Apply: []rule.Action{{Kind: rule.ActSetField, Field: flow.FieldEthType, Value: []byte{0x88, 0xb5}}}}})
	var m flow.Match
	m.SetEthType(0x88b5)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: 1, Match: m, Instructions: applyOut(2)})
	r.sw.Process(1, [][]byte{append([]byte(nil), in...)})
	out := r.devs[1].take()
	if len(out) != 1 {
		t.Fatalf("port 2 got %d frames, want 1 (table 1 matches eth_type 0x88b5)", len(out))
	}
	eq(t, "forwarded", out[0], want)
}
