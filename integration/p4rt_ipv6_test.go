package integration

import (
	"context"
	"fmt"
	"net"
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"

	"github.com/gswitch/gswitch/controlproto/p4rt"
)

// ACL match field ids of the IPv6 addresses (gswitch.p4info.txtpb).
const (
	p4ACLIPv6Src = 10
	p4ACLIPv6Dst = 11
)

// enableHostIPv6 turns IPv6 back on in the hosts of tp (newTopo turns it
// off) and gives host i 2001:db8:ac1::i/64 without duplicate address
// detection, with permanent neighbour entries for the others: no
// neighbour discovery has to cross the switch, whose l2_exact entries
// carry unicast only.
func enableHostIPv6(t *testing.T, tp *topo) {
	t.Helper()
	for i, h := range tp.hosts {
		sh(t, "ip", "netns", "exec", h, "sysctl", "-qw",
			"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0", "net.ipv6.conf.eth0.accept_dad=0",
			"net.ipv6.conf.eth0.router_solicitations=0",
			"net.ipv6.conf.all.disable_ipv6=0", "net.ipv6.conf.default.disable_ipv6=0", "net.ipv6.conf.eth0.disable_ipv6=0")
		sh(t, "ip", "-n", h, "addr", "add", fmt.Sprintf("2001:db8:ac1::%d/64", i+1), "dev", "eth0", "nodad")
		for j := range tp.hosts {
			if j != i {
				sh(t, "ip", "-n", h, "-6", "neigh", "replace", fmt.Sprintf("2001:db8:ac1::%d", j+1),
					"lladdr", fmt.Sprintf("02:00:00:00:00:%02x", j+1), "dev", "eth0", "nud", "permanent")
			}
		}
	}
}

// TestP4RuntimeIPv6ACL: hosts 1 and 2 reach each other over IPv4 and IPv6
// through l2_exact entries; an ACL drop entry on ipv6_dst (host 2's
// address) stops the IPv6 ping to it while the IPv4 ping and the IPv6 ping
// to host 2's second address still pass; its direct counter counts the
// dropped echo requests, it reads back as written, and deleting it lets
// IPv6 through again.
func TestP4RuntimeIPv6ACL(t *testing.T) {
	tp := newTopo(t, 2)
	enableHostIPv6(t, tp)
	const v6h2b = "2001:db8:ac1::22" // host 2's second address
	sh(t, "ip", "-n", tp.hosts[1], "addr", "add", v6h2b+"/64", "dev", "eth0", "nodad")
	sh(t, "ip", "-n", tp.hosts[0], "-6", "neigh", "replace", v6h2b, "lladdr", "02:00:00:00:00:02", "dev", "eth0", "nud", "permanent")
	_, addr := startP4RT(t, tp)
	cl := p4conn(t, tp.sw, addr)
	p4primary(t, cl)
	const v6h2 = "2001:db8:ac1::2"
	if err := tp.ping(t, 1, v6h2, 1); err == nil {
		t.Fatal("IPv6 ping went through before any entry")
	}
	ones := []byte{0xff, 0xff, 0xff, 0xff}
	// l2_exact for both hosts; ACL entries carry each host's broadcasts
	// (ARP) to the other.
	p4write(t, cl, l2Entry(1), l2Entry(2),
		aclEntry(p4v1.Update_INSERT, 10, p4act(p4rt.ActionForward, []byte{2}), p4ternary(1, []byte{1}, ones), p4ternary(3, bcast, bcast)),
		aclEntry(p4v1.Update_INSERT, 10, p4act(p4rt.ActionForward, []byte{1}), p4ternary(1, []byte{2}, ones), p4ternary(3, bcast, bcast)))
	if err := tp.ping(t, 1, "10.0.0.2", 2); err != nil {
		t.Fatal(err)
	}
	if err := tp.ping(t, 1, v6h2, 2); err != nil {
		t.Fatalf("IPv6 through the l2_exact entries: %v", err)
	}
	h2 := net.ParseIP(v6h2).To16()
	all := net.ParseIP("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff").To16()
	drop := func(typ p4v1.Update_Type) *p4v1.Update {
		return aclEntry(typ, 100, p4act(p4rt.ActionDrop), p4ternary(p4ACLIPv6Dst, h2, all))
	}
	p4write(t, cl, drop(p4v1.Update_INSERT))
	if err := tp.ping(t, 1, v6h2, 2); err == nil {
		t.Fatal("IPv6 ping went through the ACL drop entry on ipv6_dst")
	}
	if err := tp.ping(t, 1, "10.0.0.2", 2); err != nil {
		t.Fatalf("IPv4 with the IPv6 drop entry in place: %v", err)
	}
	if err := tp.ping(t, 1, v6h2b, 2); err != nil {
		t.Fatalf("IPv6 to host 2's other address with the drop entry for %s in place: %v", v6h2, err)
	}
	// Read it back (with its counter): as written, canonical bytestrings.
	q := &p4v1.TableEntry{TableId: p4rt.TableACL, Priority: 100, Match: []*p4v1.FieldMatch{p4ternary(p4ACLIPv6Dst, h2, all)}, CounterData: &p4v1.CounterData{}}
	rs, err := cl.Read(context.Background(), &p4v1.ReadRequest{DeviceId: 1, Entities: []*p4v1.Entity{{Entity: &p4v1.Entity_TableEntry{TableEntry: q}}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rs.Recv()
	if err != nil || len(resp.GetEntities()) != 1 {
		t.Fatalf("read of the IPv6 drop entry: %v, %v", resp, err)
	}
	te := resp.GetEntities()[0].GetTableEntry()
	m := te.GetMatch()
	if len(m) != 1 || m[0].GetFieldId() != p4ACLIPv6Dst || string(m[0].GetTernary().GetValue()) != string(h2) || string(m[0].GetTernary().GetMask()) != string(all) ||
		te.GetAction().GetAction().GetActionId() != p4rt.ActionDrop {
		t.Errorf("read back %v: want ipv6_dst %s/128 with drop", te, v6h2)
	}
	if n := te.GetCounterData().GetPacketCount(); n < 2 {
		t.Errorf("the IPv6 drop entry counted %d packets, want at least the 2 echo requests", n)
	}
	p4write(t, cl, drop(p4v1.Update_DELETE))
	if err := tp.ping(t, 1, v6h2, 3); err != nil {
		t.Fatalf("after deleting the IPv6 drop entry: %v", err)
	}
}
