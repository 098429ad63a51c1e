package pipeline

import (
	"bytes"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// serialize builds a frame from gopacket layers with lengths and checksums
// computed.
func serialize(t *testing.T, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func testEth(t layers.EthernetType) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: net.HardwareAddr{0x12, 0x11, 0x11, 0x11, 0x11, 0x11},
		DstMAC: net.HardwareAddr{0x22, 0x22, 0x22, 0x22, 0x22, 0x22}, EthernetType: t}
}

// mplsIPv4 builds eth/[mpls...]/ipv4(ttl)/udp/payload; with no labels the
// frame is plain IPv4.
func mplsIPv4(t *testing.T, ttl uint8, labels ...*layers.MPLS) []byte {
	t.Helper()
	ip := &layers.IPv4{Version: 4, TTL: ttl, TOS: 32, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP{192, 168, 10, 10}, DstIP: net.IP{192, 168, 20, 20}}
	udp := &layers.UDP{SrcPort: 11111, DstPort: 2222}
	_ = udp.SetNetworkLayerForChecksum(ip)
	ls := []gopacket.SerializableLayer{testEth(layers.EthernetTypeIPv4)}
	if len(labels) > 0 {
		ls[0] = testEth(layers.EthernetTypeMPLSUnicast)
	}
	for _, l := range labels {
		ls = append(ls, l)
	}
	ls = append(ls, ip, udp, gopacket.Payload("0123456789abcdef0123456789abcdef"))
	return serialize(t, ls...)
}

func lse(label uint32, tc uint8, bos bool, ttl uint8) *layers.MPLS {
	return &layers.MPLS{Label: label, TrafficClass: tc, StackBottom: bos, TTL: ttl}
}

func mplsIPv6(t *testing.T, hop uint8, labels ...*layers.MPLS) []byte {
	t.Helper()
	ip := &layers.IPv6{Version: 6, HopLimit: hop, FlowLabel: 100, TrafficClass: 32, NextHeader: layers.IPProtocolUDP,
		SrcIP: net.ParseIP("10::10"), DstIP: net.ParseIP("20::20")}
	udp := &layers.UDP{SrcPort: 11111, DstPort: 2222}
	_ = udp.SetNetworkLayerForChecksum(ip)
	ls := []gopacket.SerializableLayer{testEth(layers.EthernetTypeIPv6)}
	if len(labels) > 0 {
		ls[0] = testEth(layers.EthernetTypeMPLSUnicast)
	}
	for _, l := range labels {
		ls = append(ls, l)
	}
	ls = append(ls, ip, udp, gopacket.Payload("0123456789abcdef0123456789abcdef"))
	return serialize(t, ls...)
}

func eq(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s:\n got %x\nwant %x", what, got, want)
	}
}

func TestPushMPLS(t *testing.T) {
	got, ok := pushMPLS(mplsIPv4(t, 64), flow.EthTypeMPLS)
	if !ok {
		t.Fatal("push_mpls on IPv4 refused")
	}
	eq(t, "push on ipv4", got, mplsIPv4(t, 64, lse(0, 0, true, 64)))
	got, _ = pushMPLS(mplsIPv6(t, 33), flow.EthTypeMPLS)
	eq(t, "push on ipv6", got, mplsIPv6(t, 33, lse(0, 0, true, 33)))
	got, _ = pushMPLS(mplsIPv4(t, 64, lse(100, 3, true, 64)), flow.EthTypeMPLS)
	eq(t, "push on mpls", got, mplsIPv4(t, 64, lse(100, 3, false, 64), lse(100, 3, true, 64)))
	arp := serialize(t, testEth(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4,
		HwAddressSize: 6, ProtAddressSize: 4, Operation: 1, SourceHwAddress: make([]byte, 6), SourceProtAddress: make([]byte, 4),
		DstHwAddress: make([]byte, 6), DstProtAddress: make([]byte, 4)})
	got, _ = pushMPLS(arp, flow.EthTypeMPLSMcast)
	if be16(got[12:]) != flow.EthTypeMPLSMcast || !bytes.Equal(got[14:18], []byte{0, 0, 1, 0}) || !bytes.Equal(got[18:], arp[14:]) {
		t.Errorf("push on arp: %x", got)
	}
	if _, ok := pushMPLS(make([]byte, 10), flow.EthTypeMPLS); ok {
		t.Error("push_mpls on a runt frame")
	}
}

func TestPopMPLS(t *testing.T) {
	got, ok := popMPLS(mplsIPv4(t, 64, lse(100, 3, true, 64)), etherIPv4)
	if !ok {
		t.Fatal("pop_mpls refused")
	}
	eq(t, "pop to ipv4", got, mplsIPv4(t, 64))
	got, _ = popMPLS(mplsIPv6(t, 64, lse(100, 3, true, 64)), etherIPv6)
	eq(t, "pop to ipv6", got, mplsIPv6(t, 64))
	got, _ = popMPLS(mplsIPv4(t, 64, lse(7, 1, false, 9), lse(100, 3, true, 64)), flow.EthTypeMPLS)
	eq(t, "pop one of two", got, mplsIPv4(t, 64, lse(100, 3, true, 64)))
	if _, ok := popMPLS(mplsIPv4(t, 64), etherIPv4); ok {
		t.Error("pop_mpls on a frame without MPLS")
	}
	if _, ok := popMPLS(mplsIPv4(t, 64, lse(1, 0, true, 1))[:16], etherIPv4); ok {
		t.Error("pop_mpls on a truncated stack")
	}
}

func TestMPLSTTL(t *testing.T) {
	f := mplsIPv4(t, 64, lse(100, 3, true, 64))
	if ok, alive := setMPLSTTL(f, false, 127); !ok || !alive {
		t.Fatal("set_mpls_ttl refused")
	}
	eq(t, "set_mpls_ttl", f, mplsIPv4(t, 64, lse(100, 3, true, 127)))
	if ok, alive := setMPLSTTL(f, true, 0); !ok || !alive {
		t.Fatal("dec_mpls_ttl refused")
	}
	eq(t, "dec_mpls_ttl", f, mplsIPv4(t, 64, lse(100, 3, true, 126)))
	f = mplsIPv4(t, 64, lse(100, 3, true, 1))
	if ok, alive := setMPLSTTL(f, true, 0); !ok || alive {
		t.Error("dec_mpls_ttl of 1 must drop")
	}
	if ok, _ := setMPLSTTL(mplsIPv4(t, 64), true, 0); ok {
		t.Error("dec_mpls_ttl without MPLS")
	}
}

func TestCopyTTL(t *testing.T) {
	f := mplsIPv4(t, 32, lse(100, 3, true, 64))
	if !copyTTL(f, false) {
		t.Fatal("copy_ttl_out refused")
	}
	eq(t, "copy_ttl_out ipv4", f, mplsIPv4(t, 32, lse(100, 3, true, 32)))
	f = mplsIPv4(t, 32, lse(100, 3, true, 64))
	copyTTL(f, true)
	eq(t, "copy_ttl_in ipv4 (checksum fixed)", f, mplsIPv4(t, 64, lse(100, 3, true, 64)))
	f = mplsIPv6(t, 32, lse(100, 3, true, 64))
	copyTTL(f, false)
	eq(t, "copy_ttl_out ipv6", f, mplsIPv6(t, 32, lse(100, 3, true, 32)))
	f = mplsIPv6(t, 32, lse(100, 3, true, 64))
	copyTTL(f, true)
	eq(t, "copy_ttl_in ipv6", f, mplsIPv6(t, 64, lse(100, 3, true, 64)))
	f = mplsIPv4(t, 5, lse(1, 0, false, 9), lse(2, 0, true, 7))
	copyTTL(f, true)
	eq(t, "copy_ttl_in lse", f, mplsIPv4(t, 5, lse(1, 0, false, 9), lse(2, 0, true, 9)))
	if copyTTL(mplsIPv4(t, 64), true) {
		t.Error("copy_ttl_in without MPLS")
	}
}

func TestSetFieldMPLS(t *testing.T) {
	f := mplsIPv4(t, 64, lse(100, 3, true, 64))
	for _, c := range []struct {
		f flow.Field
		v []byte
	}{{flow.FieldMPLSLabel, []byte{0, 0, 203}}, {flow.FieldMPLSTC, []byte{5}}, {flow.FieldMPLSBOS, []byte{0}}} {
		if !setField(f, c.f, c.v) {
			t.Fatalf("set_field %s refused", c.f)
		}
	}
	eq(t, "set_field mpls", f, mplsIPv4(t, 64, lse(203, 5, false, 64)))
	if setField(mplsIPv4(t, 64), flow.FieldMPLSLabel, []byte{0, 0, 1}) {
		t.Error("set_field mpls_label without MPLS")
	}
}

// pop_mpls then goto_table: the next table sees the IPv4 key of the
// popped frame.
func TestPopMPLSReparsedForNextTable(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: rule.Instructions{
		Has: rule.HasApplyActions | rule.HasGotoTable, GotoTable: 1,
		Apply: []rule.Action{{Kind: rule.ActPopMPLS, EthType: etherIPv4}}}})
	var m flow.Match
	m.SetEthType(etherIPv4)
	if err := m.SetIPv4Dst(0xc0a81414, 32); err != nil {
		t.Fatal(err)
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: 1, Match: m, Instructions: rule.Instructions{
		Has: rule.HasApplyActions, Apply: []rule.Action{{Kind: rule.ActDecNwTTL}, output(2)}}})
	r.sw.Process(1, [][]byte{mplsIPv4(t, 64, lse(100, 3, true, 64))})
	out := r.devs[1].take()
	if len(out) != 1 {
		t.Fatalf("port 2 got %d frames, want 1", len(out))
	}
	eq(t, "popped and decremented", out[0], mplsIPv4(t, 63))
}

// A short frame that pop_mpls leaves under 60 bytes leaves padded to 60,
// as the tool's (and gopacket's) expected frames are.
func TestPopMPLSShortFramePadded(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: rule.Instructions{
		Has: rule.HasApplyActions, Apply: []rule.Action{{Kind: rule.ActPopMPLS, EthType: etherIPv4}, output(2)}}})
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)}
	in := serialize(t, testEth(layers.EthernetTypeMPLSUnicast), lse(100, 3, true, 64), ip, icmp, gopacket.Payload("01234567"))
	want := serialize(t, testEth(layers.EthernetTypeIPv4), ip, icmp, gopacket.Payload("01234567"))
	if len(in) != 60 || len(want) != 60 {
		t.Fatalf("test frames of %d and %d bytes, want 60", len(in), len(want))
	}
	r.sw.Process(1, [][]byte{in})
	out := r.devs[1].take()
	if len(out) != 1 {
		t.Fatalf("port 2 got %d frames", len(out))
	}
	eq(t, "popped short frame", out[0], want)
}

// The packet-in of a frame pop_mpls shortened below 60 bytes is padded
// back to 60; a short frame as received is sent up unpadded.
func TestPacketInPadsOnlyShortenedFrames(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	ctl := output(rule.PortController)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 2, Match: matchInPort(1), Instructions: rule.Instructions{
		Has: rule.HasApplyActions, Apply: []rule.Action{{Kind: rule.ActPopMPLS, EthType: etherIPv4}, ctl}}})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 2, Match: matchInPort(2), Instructions: rule.Instructions{
		Has: rule.HasApplyActions, Apply: []rule.Action{ctl}}})
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	icmp := &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0)}
	in := serialize(t, testEth(layers.EthernetTypeMPLSUnicast), lse(100, 3, true, 64), ip, icmp, gopacket.Payload("01234567"))
	want := serialize(t, testEth(layers.EthernetTypeIPv4), ip, icmp, gopacket.Payload("01234567"))
	short := want[:50]
	r.sw.Process(1, [][]byte{in})
	r.sw.Process(2, [][]byte{append([]byte(nil), short...)})
	r.ctrl.mu.Lock()
	defer r.ctrl.mu.Unlock()
	if len(r.ctrl.pins) != 2 {
		t.Fatalf("%d packet-ins, want 2", len(r.ctrl.pins))
	}
	eq(t, "popped", r.ctrl.pins[0].Data, want)
	eq(t, "short as received", r.ctrl.pins[1].Data, short)
}

// dec_nw_ttl and dec_mpls_ttl on a TTL of 1 drop the packet and send it,
// unchanged, as a packet-in of reason INVALID_TTL (the agent delivers it
// only to connections whose SET_ASYNC asks for it); the actions after the
// decrement do not run. A TTL of 2 goes on.
func TestDecTTLInvalidPacketIn(t *testing.T) {
	for _, c := range []struct {
		name string
		dec  rule.ActionKind
		in   []byte
	}{
		{"dec_nw_ttl", rule.ActDecNwTTL, mplsIPv4(t, 1)},
		{"dec_mpls_ttl", rule.ActDecMPLSTTL, mplsIPv4(t, 64, lse(100, 3, true, 1))},
	} {
		r := newRig(t, 2, FailSecure)
		r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, TableID: 0, Priority: 1, Cookie: 0x77, Match: matchInPort(1),
			Instructions: rule.Instructions{Has: rule.HasApplyActions, Apply: []rule.Action{{Kind: c.dec}, output(2)}}})
		r.sw.Process(1, [][]byte{append([]byte(nil), c.in...)})
		if out := r.devs[1].take(); len(out) != 0 {
			t.Errorf("%s: port 2 got %d frames, want none", c.name, len(out))
		}
		r.ctrl.mu.Lock()
		pins := r.ctrl.pins
		r.ctrl.mu.Unlock()
		if len(pins) != 1 {
			t.Fatalf("%s: %d packet-ins, want 1", c.name, len(pins))
		}
		pi := pins[0]
		if in, _ := pi.Match.GetUint(flow.FieldInPort); pi.Reason != rule.ReasonInvalidTTL || pi.Cookie != 0x77 || in != 1 {
			t.Errorf("%s: packet-in reason %d cookie %#x in_port %d, want INVALID_TTL, 0x77, 1", c.name, pi.Reason, pi.Cookie, in)
		}
		eq(t, c.name+" packet-in data", pi.Data, c.in)
	}
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1),
		Instructions: rule.Instructions{Has: rule.HasApplyActions, Apply: []rule.Action{{Kind: rule.ActDecNwTTL}, output(2)}}})
	r.sw.Process(1, [][]byte{mplsIPv4(t, 2)})
	if out := r.devs[1].take(); len(out) != 1 || len(r.ctrl.pins) != 0 {
		t.Fatalf("TTL 2: %d frames out, %d packet-ins; want 1 and 0", len(out), len(r.ctrl.pins))
	}
}
