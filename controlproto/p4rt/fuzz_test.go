package p4rt

import (
	"testing"

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
	}
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
		v := &view{st: newStore(), exists: map[string]bool{}, count: map[uint32]int{}}
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
