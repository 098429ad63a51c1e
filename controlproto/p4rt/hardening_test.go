package p4rt

import (
	"bytes"
	"context"
	"io"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
)

// TestTTLExpiryIsNotPacketIn routes a frame with TTL 1 through
// set_next_hop: the datapath raises an OpenFlow INVALID_TTL packet-in,
// which gswitch.p4 does not send to the CPU (it drops the packet), so the
// client must not see it; a punted packet sent after it is the first
// packet-in the stream carries.
func TestTTLExpiryIsNotPacketIn(t *testing.T) {
	r, c := ready(t, 3)
	router := []byte{2, 0, 0, 0, 0, 0xaa}
	nh := []byte{2, 0, 0, 0, 0, 0xbb}
	if err := r.write(0,
		ins(ipv4Entry([]byte{10, 1, 0, 0}, 16, act(ActionSetNextHop, []byte{3}, router, nh))),
		ins(ipv4Entry([]byte{10, 2, 0, 0}, 16, act(ActionSendToCPU)))); err != nil {
		t.Fatal(err)
	}
	expiring := udpFrame(t, "10.0.0.1", "10.1.9.9", 1, 2)
	expiring[14+8] = 1 // TTL 1: set_next_hop's decrement expires it
	r.sw.Process(1, [][]byte{expiring, expiring})
	if n := len(r.devs[2].take()); n != 0 {
		t.Fatalf("the expiring frame left on port 3 (%d copies)", n)
	}
	punted := udpFrame(t, "10.0.0.1", "10.2.0.1", 1, 2)
	r.sw.Process(1, [][]byte{punted})
	pin := c.next("packet").GetPacket()
	if !bytes.Equal(pin.GetPayload(), punted) {
		t.Fatalf("first packet-in carries %x: want the punted frame (the TTL-expired one must not reach the client)", pin.GetPayload())
	}
	if st := r.srv.Stats(); st.PacketInsFiltered != 2 || st.PacketIns != 1 {
		t.Errorf("stats %+v: want 2 filtered, 1 delivered", st)
	}
}

// readAll reads with the given entities and returns the entities or the
// RPC's error.
func (r *rig) readAll(es ...*p4v1.Entity) ([]*p4v1.Entity, error) {
	s, err := r.cl.Read(context.Background(), &p4v1.ReadRequest{DeviceId: 1, Entities: es})
	if err != nil {
		return nil, err
	}
	var out []*p4v1.Entity
	for {
		resp, err := s.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, resp.GetEntities()...)
	}
}

// wildcardAll is a read of the whole forwarding state, one wildcard per
// entity kind, as ONOS's device sync sends it.
func wildcardAll() []*p4v1.Entity {
	return []*p4v1.Entity{
		{Entity: &p4v1.Entity_TableEntry{TableEntry: &p4v1.TableEntry{}}},
		{Entity: &p4v1.Entity_ExternEntry{ExternEntry: &p4v1.ExternEntry{}}},
		{Entity: &p4v1.Entity_ActionProfileMember{ActionProfileMember: &p4v1.ActionProfileMember{}}},
		{Entity: &p4v1.Entity_ActionProfileGroup{ActionProfileGroup: &p4v1.ActionProfileGroup{}}},
		{Entity: &p4v1.Entity_MeterEntry{MeterEntry: &p4v1.MeterEntry{}}},
		{Entity: &p4v1.Entity_DirectMeterEntry{DirectMeterEntry: &p4v1.DirectMeterEntry{}}},
		{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{}}},
		{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{}}},
		{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: &p4v1.MulticastGroupEntry{}}}}},
		{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_CloneSessionEntry{CloneSessionEntry: &p4v1.CloneSessionEntry{}}}}},
		{Entity: &p4v1.Entity_ValueSetEntry{ValueSetEntry: &p4v1.ValueSetEntry{}}},
		{Entity: &p4v1.Entity_RegisterEntry{RegisterEntry: &p4v1.RegisterEntry{}}},
		{Entity: &p4v1.Entity_DigestEntry{DigestEntry: &p4v1.DigestEntry{}}},
	}
}

// TestReadWholeState reads every entity kind with wildcards in one
// request: the table entries and direct counters that exist, nothing for
// the kinds gswitch's pipeline lacks; a read naming an object the
// pipeline does not have (a counter id) is NOT_FOUND.
func TestReadWholeState(t *testing.T) {
	r, _ := ready(t, 3)
	if err := r.write(0, ins(l2Entry(macB, 2)), ins(l2Entry(macA, 1))); err != nil {
		t.Fatal(err)
	}
	got, err := r.readAll(wildcardAll()...)
	if err != nil {
		t.Fatalf("wildcard read of every entity kind: %v", err)
	}
	var tables, dcs, other int
	for _, e := range got {
		switch {
		case e.GetTableEntry() != nil:
			tables++
		case e.GetDirectCounterEntry() != nil:
			dcs++
		default:
			other++
		}
	}
	if tables != 2 || dcs != 2 || other != 0 {
		t.Fatalf("read %d table entries, %d direct counters, %d others: want 2, 2, 0", tables, dcs, other)
	}
	_, err = r.readAll(&p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{CounterId: 0x12000001}}})
	if code(err) != codes.NotFound {
		t.Fatalf("read of a counter id the pipeline lacks: %v, want NOT_FOUND", err)
	}
}

// mcUpdate is a multicast group entry update.
func mcUpdate(typ p4v1.Update_Type, g *p4v1.MulticastGroupEntry) *p4v1.Update {
	return &p4v1.Update{Type: typ, Entity: mcEntity(g)}
}

func mcEntity(g *p4v1.MulticastGroupEntry) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
		Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: g}}}}
}

// mcGroup1 is multicast group id with one replica per port (instance 0).
func mcGroup1(id uint32, ports ...uint32) *p4v1.MulticastGroupEntry {
	g := &p4v1.MulticastGroupEntry{MulticastGroupId: id}
	for _, p := range ports {
		g.Replicas = append(g.Replicas, &p4v1.Replica{PortKind: &p4v1.Replica_EgressPort{EgressPort: p}})
	}
	return g
}

// TestMulticastFloodARP floods an ARP broadcast through a multicast group
// that the ACL's set_multicast_group selects: every replica's port gets
// the frame but the one it came in on; groups are read back, modified,
// and cannot be deleted while an entry uses them.
func TestMulticastFloodARP(t *testing.T) {
	r, _ := ready(t, 4)
	bcast := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	arpEntry := &p4v1.TableEntry{TableId: TableACL, Priority: 10, Action: act(ActionSetMulticastGroup, []byte{7}),
		Match: []*p4v1.FieldMatch{ternary(aclEthType, []byte{8, 6}, []byte{0xff, 0xff})}}
	// The entry cannot name a group that does not exist.
	if err := r.write(0, ins(arpEntry)); code(err) != codes.Unknown || details(t, err)[0] != codes.NotFound {
		t.Fatalf("entry using a missing group: %v, want NOT_FOUND", err)
	}
	if err := r.write(0, mcUpdate(p4v1.Update_INSERT, mcGroup1(7, 1, 2, 3, 4)), ins(arpEntry)); err != nil {
		t.Fatal(err)
	}
	arp := append(append(append([]byte{}, bcast...), macA...), 0x08, 0x06)
	arp = append(arp, make([]byte, 46)...)
	r.sw.Process(2, [][]byte{arp})
	for i, d := range r.devs {
		n := len(d.take())
		if want := map[bool]int{true: 0, false: 1}[i == 1]; n != want {
			t.Errorf("port %d got %d copies, want %d (the ingress port 2 is pruned)", i+1, n, want)
		}
	}
	got, err := r.readAll(mcEntity(&p4v1.MulticastGroupEntry{}))
	if err != nil || len(got) != 1 || len(got[0].GetPacketReplicationEngineEntry().GetMulticastGroupEntry().GetReplicas()) != 4 {
		t.Fatalf("read of every multicast group: %v, %v: want group 7 with 4 replicas", got, err)
	}
	// MODIFY: ports 1 and 3 only.
	if err := r.write(0, mcUpdate(p4v1.Update_MODIFY, mcGroup1(7, 1, 3))); err != nil {
		t.Fatal(err)
	}
	r.sw.Process(2, [][]byte{arp})
	if a, b, c, d := len(r.devs[0].take()), len(r.devs[1].take()), len(r.devs[2].take()), len(r.devs[3].take()); a != 1 || b != 0 || c != 1 || d != 0 {
		t.Fatalf("after MODIFY to ports 1, 3: copies %d %d %d %d", a, b, c, d)
	}
	// The group is in use: DELETE is refused, and nothing changes.
	if err := r.write(0, mcUpdate(p4v1.Update_DELETE, &p4v1.MulticastGroupEntry{MulticastGroupId: 7})); code(err) != codes.Unknown || details(t, err)[0] != codes.FailedPrecondition {
		t.Fatalf("delete of a group in use: %v, want FAILED_PRECONDITION", err)
	}
	// Deleting the entry and the group in one batch works.
	if err := r.write(0, upd(p4v1.Update_DELETE, arpEntry), mcUpdate(p4v1.Update_DELETE, &p4v1.MulticastGroupEntry{MulticastGroupId: 7})); err != nil {
		t.Fatal(err)
	}
	if got, err := r.readAll(mcEntity(&p4v1.MulticastGroupEntry{})); err != nil || len(got) != 0 {
		t.Fatalf("groups after delete: %v, %v", got, err)
	}
	r.sw.Process(2, [][]byte{arp})
	for i, d := range r.devs {
		if n := len(d.take()); n != 0 {
			t.Errorf("after the deletes port %d got %d copies", i+1, n)
		}
	}
}
