package p4rt

import (
	"testing"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// FuzzValidateWrite feeds serialized WriteRequests to the validation of
// Write: it must never panic; an update it accepts must compile (no
// INTERNAL error); the canonical form of an accepted entry must validate
// again to the same key and the same canonical form (read-write symmetry).
func FuzzValidateWrite(f *testing.F) {
	seeds := []*p4v1.WriteRequest{
		{Updates: []*p4v1.Update{ins(l2Entry(macB, 2))}},
		{Updates: []*p4v1.Update{ins(ipv4Entry([]byte{10, 1, 0, 0}, 16, act(ActionSetNextHop, []byte{3}, macA, macB)))}},
		{Updates: []*p4v1.Update{ins(&p4v1.TableEntry{TableId: TableIPv6, Match: []*p4v1.FieldMatch{lpm(1, []byte{0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 32)}, Action: act(ActionDrop)})}},
		{Updates: []*p4v1.Update{ins(&p4v1.TableEntry{TableId: TableACL, Priority: 9, Action: act(ActionSendToCPU), Match: []*p4v1.FieldMatch{
			ternary(aclIPv4Src, []byte{10, 0, 0, 0}, []byte{255, 0, 0, 0}), ternary(aclEthType, []byte{8, 0}, []byte{0xff, 0xff}),
			rng(aclL4Src, []byte{0}, []byte{4, 0}), rng(aclL4Dst, []byte{0x13, 0x88}, []byte{0x13, 0x92}), ternary(aclInPort, []byte{1}, []byte{0xff})}})}},
		{Updates: []*p4v1.Update{upd(p4v1.Update_MODIFY, &p4v1.TableEntry{TableId: TableACL, IsDefaultAction: true, Action: act(ActionForward, []byte{2})})}},
		{Updates: []*p4v1.Update{upd(p4v1.Update_DELETE, l2Entry([]byte{0, 0, 1}, 0))}},
		{Updates: []*p4v1.Update{ins(&p4v1.TableEntry{TableId: TableACL, Priority: 1, Action: act(ActionSetMACs, macA, macB), Match: []*p4v1.FieldMatch{ternary(aclIPProto, []byte{6}, []byte{0xfe})}})}},
		// IPv6 addresses in the ACL: a /48 source, an interface-id
		// destination, a port range; then one that also names an IPv4
		// address (refused: one family per entry).
		{Updates: []*p4v1.Update{ins(&p4v1.TableEntry{TableId: TableACL, Priority: 4, Action: act(ActionDrop), Match: []*p4v1.FieldMatch{
			ternary(aclIPv6Src, ip6("2001:db8:1::"), ip6("ffff:ffff:ffff::")), ternary(aclIPv6Dst, []byte{7}, ip6("::ffff:ffff:ffff:ffff")),
			rng(aclL4Dst, []byte{0, 80}, []byte{0, 90})}})}},
		{Updates: []*p4v1.Update{ins(&p4v1.TableEntry{TableId: TableACL, Priority: 4, Action: act(ActionDrop), Match: []*p4v1.FieldMatch{
			ternary(aclIPv4Src, []byte{10, 0, 0, 0}, []byte{255, 0, 0, 0}), ternary(aclIPv6Dst, ip6("2001:db8::"), ip6("ffff:ffff::"))}})}},
	}
	// Multicast groups: one with replicas by egress_port and by port
	// bytes, an entry that uses it, a modify, and a delete of the group
	// while the entry uses it (FAILED_PRECONDITION).
	seeds = append(seeds, &p4v1.WriteRequest{Updates: []*p4v1.Update{
		mcUpdate(p4v1.Update_INSERT, mcGroup1(1, 2, 3)),
		ins(&p4v1.TableEntry{TableId: TableACL, Priority: 5, Action: act(ActionSetMulticastGroup, []byte{1}), Match: []*p4v1.FieldMatch{ternary(aclEthType, []byte{8, 6}, []byte{0xff, 0xff})}}),
		mcUpdate(p4v1.Update_MODIFY, &p4v1.MulticastGroupEntry{MulticastGroupId: 1, Replicas: []*p4v1.Replica{
			{PortKind: &p4v1.Replica_Port{Port: []byte{0, 0, 0, 4}}, Instance: 1}}}),
		mcUpdate(p4v1.Update_DELETE, &p4v1.MulticastGroupEntry{MulticastGroupId: 1}),
	}})
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x1a, 0x03, 0x08, 0x01, 0x12})
	f.Fuzz(func(t *testing.T, data []byte) {
		var req p4v1.WriteRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		v := newView(newStore())
		for _, u := range req.GetUpdates() {
			p, err := v.check(u)
			if err != nil {
				if err.Code == codes.Internal || err.Code == codes.OK {
					t.Fatalf("update %v: code %s: %s", u, err.Code, err.Msg)
				}
				continue
			}
			if p.op == p4v1.Update_DELETE {
				continue
			}
			if p.mc != nil {
				pre := &p4v1.PacketReplicationEngineEntry{Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: p.mc.canon}}
				again, err := checkMulticast(pre, p.op)
				if err != nil || !proto.Equal(again.canon, p.mc.canon) || len(again.group.Buckets) != len(p.mc.canon.GetReplicas()) {
					t.Fatalf("the canonical form %v of an accepted group does not validate to itself: %v", p.mc.canon, err)
				}
				continue
			}
			again, err := fixed.checkEntry(p.s.canon, p.op)
			if err != nil {
				t.Fatalf("the canonical form %v of an accepted entry is refused: %v", p.s.canon, err)
			}
			if again.key != p.s.key || !proto.Equal(again.canon, p.s.canon) {
				t.Fatalf("canonical form %v validates to another entry %v", p.s.canon, again.canon)
			}
			if p.s.action != nil {
				if _, err := compileAction(p.s.action, p.s.t.pipe, p.s.t.last); err != nil {
					t.Fatalf("accepted action does not compile: %v", err)
				}
			}
		}
	})
}

// FuzzP4Info feeds serialized P4Infos to sameAsFixed: it must never panic,
// and only a P4Info equal to the fixed one in every compared field passes.
func FuzzP4Info(f *testing.F) {
	good, err := proto.Marshal(P4Info())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	bad := P4Info()
	bad.Tables[3].MatchFields[8].Bitwidth = 8
	b, _ := proto.Marshal(bad)
	f.Add(b)
	f.Add([]byte{0x12, 0x02, 0x0a, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		var info p4cfg.P4Info
		if proto.Unmarshal(data, &info) != nil {
			return
		}
		if sameAsFixed(&info) == nil {
			// It passed: the compared parts are the fixed pipeline's.
			if len(info.GetTables()) != len(fixed.info.GetTables()) || len(info.GetActions()) != len(fixed.info.GetActions()) {
				t.Fatalf("a P4Info with %d tables and %d actions passed", len(info.GetTables()), len(info.GetActions()))
			}
		}
	})
}

// FuzzStreamRequest feeds serialized StreamMessageRequests (packet-outs)
// to the packet-out metadata check: no panic, and an accepted egress port
// is the value of the one metadata field.
func FuzzStreamRequest(f *testing.F) {
	for _, md := range [][]*p4v1.PacketMetadata{
		{{MetadataId: 1, Value: []byte{2}}},
		{{MetadataId: 1, Value: []byte{0, 0, 0, 0, 3}}},
		{{MetadataId: 2, Value: []byte{2}}},
		{{MetadataId: 1, Value: []byte{1}}, {MetadataId: 1, Value: []byte{1}}},
	} {
		b, _ := proto.Marshal(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Packet{Packet: &p4v1.PacketOut{Payload: []byte("frame"), Metadata: md}}})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req p4v1.StreamMessageRequest
		if proto.Unmarshal(data, &req) != nil || req.GetPacket() == nil {
			return
		}
		md := req.GetPacket().GetMetadata()
		port, err := egressPort(md)
		if err != nil {
			return
		}
		if len(md) != 1 || uint64(port) != toUint(md[0].GetValue()) {
			t.Fatalf("metadata %v accepted as port %d", md, port)
		}
	})
}

// FuzzRead feeds serialized ReadRequests to Read's selection over a store
// holding a few entries: it must never panic, and every entity it returns
// is one of the store's.
func FuzzRead(f *testing.F) {
	seeds := []*p4v1.ReadRequest{
		{Entities: []*p4v1.Entity{tableEntity(0)}},
		{Entities: []*p4v1.Entity{tableEntity(TableACL)}},
		{Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_TableEntry{TableEntry: l2Entry(macB, 0)}}}},
		{Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{TableId: TableIPv4, IsDefaultAction: true}}}}},
		{Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{}}}}},
		{Entities: []*p4v1.Entity{aclEntity(&p4v1.TableEntry{TableId: TableACL, Priority: 3, Match: []*p4v1.FieldMatch{ternary(aclIPv6Dst, ip6("2001:db8::"), ip6("ffff:ffff::"))}})}},
		// The whole forwarding state (every kind's wildcard), one
		// multicast group, a counter by id.
		{Entities: wildcardAll()},
		{Entities: []*p4v1.Entity{mcEntity(&p4v1.MulticastGroupEntry{MulticastGroupId: 4})}},
		{Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{CounterId: 0x12000001}}}}},
	}
	for _, s := range seeds {
		b, _ := proto.Marshal(s)
		f.Add(b)
	}
	r := newRig(f, 1, 0)
	r.primary(f, 1)
	r.setPipeline(f, 1)
	if err := r.write(0, ins(l2Entry(macB, 1)), ins(ipv4Entry([]byte{10, 0, 0, 0}, 8, act(ActionDrop))),
		ins(&p4v1.TableEntry{TableId: TableACL, Priority: 3, Action: act(ActionDrop), Match: []*p4v1.FieldMatch{ternary(aclIPv6Dst, ip6("2001:db8::"), ip6("ffff:ffff::"))}}),
		mcUpdate(p4v1.Update_INSERT, mcGroup1(4, 1))); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req p4v1.ReadRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		req.DeviceId = 1
		out, err := r.srv.read(&req)
		if err != nil {
			return
		}
		for _, e := range out {
			if mg := e.GetPacketReplicationEngineEntry().GetMulticastGroupEntry(); mg != nil {
				if mg.GetMulticastGroupId() != 4 {
					t.Fatalf("read returned multicast group %d: only 4 exists", mg.GetMulticastGroupId())
				}
				continue
			}
			te := e.GetTableEntry()
			if te == nil {
				te = e.GetDirectCounterEntry().GetTableEntry()
			}
			if fixed.tables[te.GetTableId()] == nil {
				t.Fatalf("read returned an entry of table %#x", te.GetTableId())
			}
		}
	})
}
