package p4rt

import (
	"bytes"
	"context"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

func TestCapabilities(t *testing.T) {
	r := newRig(t, 1, 0)
	resp, err := r.cl.Capabilities(context.Background(), &p4v1.CapabilitiesRequest{})
	if err != nil || resp.GetP4RuntimeApiVersion() != APIVersion {
		t.Fatalf("Capabilities: %v, %v", resp, err)
	}
}

func TestSetAndGetPipeline(t *testing.T) {
	r := newRig(t, 1, 0)
	ctx := context.Background()
	set := func(id uint64, action p4v1.SetForwardingPipelineConfigRequest_Action, c *p4v1.ForwardingPipelineConfig) error {
		_, err := r.cl.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: id}, Action: action, Config: c})
		return err
	}
	good := &p4v1.ForwardingPipelineConfig{P4Info: P4Info(), P4DeviceConfig: []byte("dev"), Cookie: &p4v1.ForwardingPipelineConfig_Cookie{Cookie: 7}}
	if err := set(1, p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, good); code(err) != codes.PermissionDenied {
		t.Fatalf("set without being primary: %v, want PERMISSION_DENIED", err)
	}
	r.primary(t, 1)
	if _, err := r.cl.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{DeviceId: 9, ElectionId: &p4v1.Uint128{Low: 1}}); code(err) != codes.NotFound {
		t.Fatalf("set for device 9: %v, want NOT_FOUND", err)
	}
	if got, err := r.cl.GetForwardingPipelineConfig(ctx, &p4v1.GetForwardingPipelineConfigRequest{DeviceId: 1}); err != nil || got.GetConfig() != nil {
		t.Fatalf("get before any commit: %v, %v: want no config", got, err)
	}
	if err := r.write(0, ins(l2Entry(macB, 2))); code(err) != codes.FailedPrecondition {
		t.Fatalf("write before a pipeline: %v, want FAILED_PRECONDITION", err)
	}
	// A P4Info that differs from the fixed pipeline is refused.
	for name, mutate := range map[string]func(c *p4v1.ForwardingPipelineConfig){
		"bitwidth": func(c *p4v1.ForwardingPipelineConfig) { c.P4Info.Tables[0].MatchFields[0].Bitwidth = 32 },
		"match type": func(c *p4v1.ForwardingPipelineConfig) {
			c.P4Info.Tables[1].MatchFields[0].Match = &p4cfg.MatchField_MatchType_{MatchType: p4cfg.MatchField_TERNARY}
		},
		"action id":     func(c *p4v1.ForwardingPipelineConfig) { c.P4Info.Actions[1].Preamble.Id = 0x01000099 },
		"missing table": func(c *p4v1.ForwardingPipelineConfig) { c.P4Info.Tables = c.P4Info.Tables[1:] },
		"no p4info":     func(c *p4v1.ForwardingPipelineConfig) { c.P4Info = nil },
	} {
		c := proto.Clone(good).(*p4v1.ForwardingPipelineConfig)
		mutate(c)
		for _, a := range []p4v1.SetForwardingPipelineConfigRequest_Action{p4v1.SetForwardingPipelineConfigRequest_VERIFY, p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT} {
			if err := set(1, a, c); code(err) != codes.InvalidArgument {
				t.Errorf("%s, %s: %v, want INVALID_ARGUMENT", name, a, err)
			}
		}
	}
	if err := set(1, p4v1.SetForwardingPipelineConfigRequest_VERIFY, good); err != nil {
		t.Fatalf("VERIFY: %v", err)
	}
	if err := set(1, p4v1.SetForwardingPipelineConfigRequest_COMMIT, nil); code(err) != codes.NotFound {
		t.Fatalf("COMMIT without a saved config: %v, want NOT_FOUND", err)
	}
	if err := set(1, p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE, good); err != nil {
		t.Fatalf("VERIFY_AND_SAVE: %v", err)
	}
	if err := set(1, p4v1.SetForwardingPipelineConfigRequest_COMMIT, nil); err != nil {
		t.Fatalf("COMMIT: %v", err)
	}
	for rt, want := range map[p4v1.GetForwardingPipelineConfigRequest_ResponseType][3]bool{ // p4info, device config, cookie
		p4v1.GetForwardingPipelineConfigRequest_ALL:                      {true, true, true},
		p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY:              {false, false, true},
		p4v1.GetForwardingPipelineConfigRequest_P4INFO_AND_COOKIE:        {true, false, true},
		p4v1.GetForwardingPipelineConfigRequest_DEVICE_CONFIG_AND_COOKIE: {false, true, true},
	} {
		got, err := r.cl.GetForwardingPipelineConfig(ctx, &p4v1.GetForwardingPipelineConfigRequest{DeviceId: 1, ResponseType: rt})
		if err != nil {
			t.Fatal(err)
		}
		c := got.GetConfig()
		have := [3]bool{c.GetP4Info() != nil, len(c.GetP4DeviceConfig()) > 0, c.GetCookie().GetCookie() == 7}
		if have != want {
			t.Errorf("%s: p4info/device config/cookie %v, want %v", rt, have, want)
		}
		if want[0] && !proto.Equal(c.GetP4Info(), P4Info()) {
			t.Errorf("%s: the P4Info read back differs from the one set", rt)
		}
	}
	// RECONCILE_AND_COMMIT keeps the entries; VERIFY_AND_COMMIT clears them.
	if err := r.write(0, ins(l2Entry(macB, 2))); err != nil {
		t.Fatal(err)
	}
	if err := set(1, p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT, good); err != nil {
		t.Fatal(err)
	}
	if n := len(r.read(t, tableEntity(0))); n != 1 {
		t.Fatalf("after RECONCILE_AND_COMMIT %d entries, want 1", n)
	}
	if err := set(1, p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, good); err != nil {
		t.Fatal(err)
	}
	if n := len(r.read(t, tableEntity(0))); n != 0 {
		t.Fatalf("after VERIFY_AND_COMMIT %d entries, want 0", n)
	}
}

func tableEntity(id uint32) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: id}}}
}

func TestL2ForwardingAndCounters(t *testing.T) {
	r, _ := ready(t, 3)
	if err := r.write(0, ins(l2Entry(macB, 2))); err != nil {
		t.Fatal(err)
	}
	f := udpFrame(t, "10.0.0.1", "10.0.0.2", 1000, 2000)
	r.sw.Process(1, [][]byte{f, f})
	if got := r.devs[1].take(); len(got) != 2 || !bytes.Equal(got[0], f) {
		t.Fatalf("port 2 got %d frames, want the 2 sent unchanged", len(got))
	}
	// MODIFY moves the entry to port 3; its counters stay.
	if err := r.write(0, upd(p4v1.Update_MODIFY, l2Entry(macB, 3))); err != nil {
		t.Fatal(err)
	}
	r.sw.Process(1, [][]byte{f})
	if len(r.devs[2].take()) != 1 || len(r.devs[1].take()) != 0 {
		t.Fatal("after MODIFY to port 3 the frame did not leave on port 3 alone")
	}
	q := l2Entry(macB, 0)
	q.Action, q.CounterData = nil, &p4v1.CounterData{}
	got := r.read(t, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: q}})
	if len(got) != 1 || got[0].GetTableEntry().GetCounterData().GetPacketCount() != 3 || got[0].GetTableEntry().GetCounterData().GetByteCount() != int64(3*len(f)) {
		t.Fatalf("read with counter_data: %v, want 3 packets, %d bytes", got, 3*len(f))
	}
	if a := got[0].GetTableEntry().GetAction().GetAction(); a.GetActionId() != ActionForward || !bytes.Equal(a.GetParams()[0].GetValue(), []byte{3}) {
		t.Errorf("read action %v, want forward(3)", a)
	}
	dc := r.read(t, &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{TableEntry: &p4v1.TableEntry{TableId: TableL2}}}})
	if len(dc) != 1 || dc[0].GetDirectCounterEntry().GetData().GetPacketCount() != 3 {
		t.Fatalf("direct counter read: %v, want 3 packets", dc)
	}
	if err := r.write(0, upd(p4v1.Update_DELETE, l2Entry(macB, 0))); err != nil {
		t.Fatal(err)
	}
	r.sw.Process(1, [][]byte{f})
	for i, d := range r.devs {
		if n := len(d.take()); n != 0 {
			t.Errorf("after DELETE port %d got %d frames (the default entry drops)", i+1, n)
		}
	}
}

func TestLPMRoutingRewritesAndACLOverrides(t *testing.T) {
	r, c := ready(t, 3)
	router := []byte{2, 0, 0, 0, 0, 0xaa}
	nh := []byte{2, 0, 0, 0, 0, 0xbb}
	err := r.write(0,
		ins(ipv4Entry([]byte{10, 1, 0, 0}, 16, act(ActionSetNextHop, []byte{3}, router, nh))),
		ins(ipv4Entry([]byte{10, 1, 2, 0}, 24, act(ActionForward, []byte{2}))),
		ins(&p4v1.TableEntry{TableId: TableIPv6, Match: []*p4v1.FieldMatch{lpm(1, []byte{0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 32)}, Action: act(ActionDrop)}),
	)
	if err != nil {
		t.Fatal(err)
	}
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.1.9.9", 1, 2)})
	out := r.devs[2].take()
	if len(out) != 1 {
		t.Fatalf("the /16 route: port 3 got %d frames, want 1", len(out))
	}
	if !bytes.Equal(out[0][0:6], nh) || !bytes.Equal(out[0][6:12], router) || out[0][14+8] != 63 {
		t.Errorf("routed frame dst %x src %x ttl %d: want %x %x 63", out[0][0:6], out[0][6:12], out[0][22], nh, router)
	}
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.1.2.3", 1, 2)})
	if len(r.devs[1].take()) != 1 {
		t.Fatal("the longer /24 prefix did not win")
	}
	// An ACL entry drops UDP to ports 5000-5010 from 10.0.0.0/8; another
	// punts port 7000 to the controller.
	acl := func(prio int32, a *p4v1.TableAction, lo, hi uint16) *p4v1.TableEntry {
		return &p4v1.TableEntry{TableId: TableACL, Priority: prio, Action: a, Match: []*p4v1.FieldMatch{
			ternary(aclIPv4Src, []byte{10, 0, 0, 0}, []byte{255, 0, 0, 0}),
			rng(aclL4Dst, []byte{byte(lo >> 8), byte(lo)}, []byte{byte(hi >> 8), byte(hi)}),
		}}
	}
	if err := r.write(0, ins(acl(10, act(ActionDrop), 5000, 5010)), ins(acl(20, act(ActionSendToCPU), 7000, 7000))); err != nil {
		t.Fatal(err)
	}
	for _, port := range []uint16{5000, 5005, 5010} {
		r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.1.2.3", 1, port)})
	}
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.1.2.3", 1, 5011)})
	if n := len(r.devs[1].take()); n != 1 {
		t.Fatalf("with the ACL drop: %d frames forwarded, want 1 (port 5011 only)", n)
	}
	f := udpFrame(t, "10.0.0.1", "10.1.2.3", 1, 7000)
	r.sw.Process(1, [][]byte{f})
	pin := c.next("packet").GetPacket()
	if !bytes.Equal(pin.GetPayload(), f) || len(pin.GetMetadata()) != 1 || pin.GetMetadata()[0].GetMetadataId() != 1 || !bytes.Equal(pin.GetMetadata()[0].GetValue(), []byte{1}) {
		t.Fatalf("packet-in %v: want the frame with ingress_port 1", pin)
	}
	// Read one ACL entry by its key, with canonical bytestrings.
	q := acl(10, nil, 5000, 5010)
	got := r.read(t, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: q}})
	if len(got) != 1 || got[0].GetTableEntry().GetAction().GetAction().GetActionId() != ActionDrop {
		t.Fatalf("read of one ACL entry: %v", got)
	}
	if all := r.read(t, tableEntity(0)); len(all) != 5 {
		t.Fatalf("read of every table: %d entries, want 5", len(all))
	}
	if v4 := r.read(t, tableEntity(TableIPv4)); len(v4) != 2 {
		t.Fatalf("read of ipv4_lpm: %d entries, want 2", len(v4))
	}
}

func TestDefaultEntry(t *testing.T) {
	r, _ := ready(t, 3)
	def := &p4v1.TableEntry{TableId: TableL2, IsDefaultAction: true, Action: act(ActionNoAction)}
	got := r.read(t, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: TableL2, IsDefaultAction: true}}})
	if len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), def) {
		t.Fatalf("default entry read %v, want %v", got, def)
	}
	if err := r.write(0, ins(&p4v1.TableEntry{TableId: TableL2, IsDefaultAction: true, Action: act(ActionNoAction)})); code(err) != codes.Unknown || details(t, err)[0] != codes.InvalidArgument {
		t.Fatalf("INSERT of the default entry: %v, want INVALID_ARGUMENT", err)
	}
	// The ACL's default entry floods nothing, but can forward everything.
	if err := r.write(0, upd(p4v1.Update_MODIFY, &p4v1.TableEntry{TableId: TableACL, IsDefaultAction: true, Action: act(ActionForward, []byte{2})})); err != nil {
		t.Fatal(err)
	}
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2", 1, 2)})
	if len(r.devs[1].take()) != 1 {
		t.Fatal("the ACL default forward(2) did not forward")
	}
	// forward is not allowed as l2_exact's... it is; NoAction is default-only.
	if err := r.write(0, ins(&p4v1.TableEntry{TableId: TableL2, Match: []*p4v1.FieldMatch{exact(1, macB)}, Action: act(ActionNoAction)})); code(err) != codes.Unknown || details(t, err)[0] != codes.PermissionDenied {
		t.Fatalf("a default-only action in an entry: %v, want PERMISSION_DENIED", err)
	}
	// MODIFY without an action resets the default entry.
	if err := r.write(0, upd(p4v1.Update_MODIFY, &p4v1.TableEntry{TableId: TableACL, IsDefaultAction: true})); err != nil {
		t.Fatal(err)
	}
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2", 1, 2)})
	if len(r.devs[1].take()) != 0 {
		t.Fatal("after the reset the default entry still forwards")
	}
}

// TestDefaultRoute checks an LPM entry without its field (the don't-care
// match, a /0 route) matches every packet of its family, below longer
// prefixes.
func TestDefaultRoute(t *testing.T) {
	r, _ := ready(t, 3)
	if err := r.write(0, ins(&p4v1.TableEntry{TableId: TableIPv4, Action: act(ActionForward, []byte{3})}),
		ins(ipv4Entry([]byte{10, 0, 0, 0}, 8, act(ActionForward, []byte{2})))); err != nil {
		t.Fatal(err)
	}
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "192.0.2.1", 1, 2), udpFrame(t, "10.0.0.1", "10.9.9.9", 1, 2)})
	if a, b := len(r.devs[2].take()), len(r.devs[1].take()); a != 1 || b != 1 {
		t.Fatalf("/0 route took %d, /8 route %d frames: want 1 and 1", a, b)
	}
}

// TestIPv6Route routes an IPv6 packet by ipv6_lpm: MACs rewritten, hop
// limit decremented.
func TestIPv6Route(t *testing.T) {
	r, _ := ready(t, 3)
	prefix := net.ParseIP("2001:db8:1::").To16()
	router, nh := []byte{2, 0, 0, 0, 0, 0xaa}, []byte{2, 0, 0, 0, 0, 0xbb}
	if err := r.write(0, ins(&p4v1.TableEntry{TableId: TableIPv6, Match: []*p4v1.FieldMatch{lpm(1, prefix, 48)},
		Action: act(ActionSetNextHop, []byte{3}, router, nh)})); err != nil {
		t.Fatal(err)
	}
	eth := &layers.Ethernet{SrcMAC: macA, DstMAC: router, EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, HopLimit: 9, NextHeader: layers.IPProtocolUDP, SrcIP: net.ParseIP("2001:db8:2::1"), DstIP: net.ParseIP("2001:db8:1::7")}
	udp := &layers.UDP{SrcPort: 1, DstPort: 2}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, udp, gopacket.Payload("v6")); err != nil {
		t.Fatal(err)
	}
	r.sw.Process(1, [][]byte{buf.Bytes()})
	out := r.devs[2].take()
	if len(out) != 1 {
		t.Fatalf("port 3 got %d frames, want the routed one", len(out))
	}
	if !bytes.Equal(out[0][0:6], nh) || !bytes.Equal(out[0][6:12], router) || out[0][14+7] != 8 {
		t.Errorf("routed IPv6 frame dst %x src %x hop limit %d: want %x %x 8", out[0][0:6], out[0][6:12], out[0][21], nh, router)
	}
}

// TestACLPortRangeWithoutProto: a destination port range with ip_proto
// left open matches TCP and UDP (one flow entry each) and not ICMP.
func TestACLPortRangeWithoutProto(t *testing.T) {
	r, _ := ready(t, 3)
	if err := r.write(0, ins(&p4v1.TableEntry{TableId: TableACL, Priority: 3, Action: act(ActionForward, []byte{2}),
		Match: []*p4v1.FieldMatch{rng(aclL4Dst, []byte{0, 80}, []byte{0, 80})}})); err != nil {
		t.Fatal(err)
	}
	frame := func(l4 gopacket.SerializableLayer, proto layers.IPProtocol) []byte {
		eth := &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
		if n, ok := l4.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			if err := n.SetNetworkLayerForChecksum(ip); err != nil {
				t.Fatal(err)
			}
		}
		buf := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, l4, gopacket.Payload("x")); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), buf.Bytes()...)
	}
	tcp := frame(&layers.TCP{SrcPort: 5, DstPort: 80, Window: 1}, layers.IPProtocolTCP)
	udp := frame(&layers.UDP{SrcPort: 5, DstPort: 80}, layers.IPProtocolUDP)
	udp81 := frame(&layers.UDP{SrcPort: 5, DstPort: 81}, layers.IPProtocolUDP)
	icmp := frame(&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(0, 80)}, layers.IPProtocolICMPv4) // type 0 code 80: the port word is 0x0050
	r.sw.Process(1, [][]byte{tcp, udp, udp81, icmp})
	if n := len(r.devs[1].take()); n != 2 {
		t.Fatalf("%d frames forwarded, want 2 (TCP and UDP to port 80; not UDP to 81, not ICMP)", n)
	}
	if n := len(r.sw.Flows()); n < 2+NumPipelineTables {
		t.Errorf("%d flow entries, want the 4 default entries and 2 for the ACL entry", n)
	}
}
