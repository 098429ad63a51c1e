package p4rt

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// The ACL's IPv6 address fields (ipv6_src, ipv6_dst: bit<128> ternary,
// match field ids 10 and 11), driven over the rig's gRPC connection.

// ip6 is an IPv6 address in 16 bytes.
func ip6(s string) []byte { return net.ParseIP(s).To16() }

// v6Frame builds an Ethernet/IPv6 frame from macA to macB carrying l4
// (UDP, TCP or ICMPv6).
func v6Frame(t testing.TB, src, dst string, next layers.IPProtocol, l4 gopacket.SerializableLayer) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6}
	ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: next, SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst)}
	if n, ok := l4.(interface {
		SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
	}); ok {
		if err := n.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, l4, gopacket.Payload("v6 acl")); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func v6UDP(t testing.TB, src, dst string, dport uint16) []byte {
	return v6Frame(t, src, dst, layers.IPProtocolUDP, &layers.UDP{SrcPort: 5, DstPort: layers.UDPPort(dport)})
}

// took returns how many frames each port sent since the last call.
func (r *rig) took() []int {
	out := make([]int, len(r.devs))
	for i, d := range r.devs {
		out[i] = len(d.take())
	}
	return out
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func aclEntity(te *p4v1.TableEntry) *p4v1.Entity {
	return &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}
}

// TestACLIPv6Addresses inserts IPv6 ACL entries (a /48 source prefix, an
// interface-id mask on the destination, a /32 destination prefix) beside
// an IPv4 one, checks which frames each forwards or drops, what they
// compile to, that Read returns them as written (canonical bytestrings;
// a non-canonical write reads back canonical), their counters, MODIFY and
// DELETE.
func TestACLIPv6Addresses(t *testing.T) {
	r, _ := ready(t, 3)
	dropSrc := &p4v1.TableEntry{TableId: TableACL, Priority: 20, Action: act(ActionDrop), Match: []*p4v1.FieldMatch{
		ternary(aclIPv6Src, ip6("2001:db8:1::"), ip6("ffff:ffff:ffff::"))}}
	// Interface id 7 in any /64, written with 16-byte (non-canonical)
	// value and mask.
	iid := &p4v1.TableEntry{TableId: TableACL, Priority: 10, Action: act(ActionForward, []byte{2}), Match: []*p4v1.FieldMatch{
		ternary(aclIPv6Dst, ip6("::7"), ip6("::ffff:ffff:ffff:ffff"))}}
	iidCanon := &p4v1.TableEntry{TableId: TableACL, Priority: 10, Action: act(ActionForward, []byte{2}), Match: []*p4v1.FieldMatch{
		ternary(aclIPv6Dst, []byte{7}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})}}
	net32 := &p4v1.TableEntry{TableId: TableACL, Priority: 5, Action: act(ActionForward, []byte{3}), Match: []*p4v1.FieldMatch{
		ternary(aclIPv6Dst, ip6("2001:db8::"), ip6("ffff:ffff::"))}}
	v4 := &p4v1.TableEntry{TableId: TableACL, Priority: 30, Action: act(ActionForward, []byte{3}), Match: []*p4v1.FieldMatch{
		ternary(aclIPv4Dst, []byte{10, 0, 0, 2}, []byte{0xff, 0xff, 0xff, 0xff})}}
	if err := r.write(0, ins(dropSrc), ins(iid), ins(net32), ins(v4)); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name  string
		frame []byte
		want  []int // frames out of ports 1, 2, 3
	}{
		{"interface id 7", v6UDP(t, "2001:db8:2::1", "2001:db8:9::7", 53), []int{0, 1, 0}},
		{"source in the dropped /48", v6UDP(t, "2001:db8:1::1", "2001:db8:9::7", 53), []int{0, 0, 0}},
		{"destination in the /32 only", v6UDP(t, "2001:db8:2::1", "2001:db8:9::8", 53), []int{0, 0, 1}},
		{"outside every entry", v6UDP(t, "2001:db8:2::1", "2001:db9::8", 53), []int{0, 0, 0}},
		{"IPv4 by the IPv4 entry", udpFrame(t, "10.0.0.1", "10.0.0.2", 5, 53), []int{0, 0, 1}},
		{"IPv4 no entry", udpFrame(t, "10.0.0.1", "10.0.0.3", 5, 53), []int{0, 0, 0}},
	} {
		r.sw.Process(1, [][]byte{c.frame})
		if got := r.took(); !sameInts(got, c.want) {
			t.Errorf("%s: frames out of ports 1..3 %v, want %v", c.name, got, c.want)
		}
	}

	// Each IPv6 entry is one flow entry in pipeline table 3 with the
	// eth_type prerequisite 0x86dd.
	var v6Flows []string
	for _, fl := range r.sw.Flows() {
		if fl.Table == 3 && fl.Cookie == Cookie && fl.Priority > 0 && strings.Contains(fl.Match, "ipv6_") {
			v6Flows = append(v6Flows, fl.Match)
			if !strings.Contains(fl.Match, "eth_type=0x86dd") {
				t.Errorf("flow match %q lacks eth_type=0x86dd", fl.Match)
			}
			if strings.Contains(fl.Match, "ipv4_") {
				t.Errorf("flow match %q mixes address families", fl.Match)
			}
		}
	}
	if len(v6Flows) != 3 {
		t.Errorf("IPv6 ACL flow entries %q, want 3", v6Flows)
	}

	// Read returns each entry as written, the 16-byte write canonical.
	for _, c := range []struct{ key, want *p4v1.TableEntry }{{dropSrc, dropSrc}, {iid, iidCanon}, {iidCanon, iidCanon}, {net32, net32}} {
		q := proto.Clone(c.key).(*p4v1.TableEntry)
		q.Action = nil
		got := r.read(t, aclEntity(q))
		if len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), c.want) {
			t.Errorf("read of %v: %v, want %v", q, got, c.want)
		}
	}
	if n := len(r.read(t, tableEntity(TableACL))); n != 4 {
		t.Errorf("read of the acl table: %d entries, want 4", n)
	}
	// The drop entry's direct counter counted the one frame it dropped.
	q := proto.Clone(dropSrc).(*p4v1.TableEntry)
	q.Action, q.CounterData = nil, &p4v1.CounterData{}
	if got := r.read(t, aclEntity(q)); len(got) != 1 || got[0].GetTableEntry().GetCounterData().GetPacketCount() != 1 {
		t.Errorf("drop entry counter: %v, want 1 packet", got)
	}

	// MODIFY the interface-id entry to send to port 1; DELETE the drop
	// entry: the /48 source now reaches port 1 too.
	mod := proto.Clone(iid).(*p4v1.TableEntry)
	mod.Action = act(ActionForward, []byte{1})
	if err := r.write(0, upd(p4v1.Update_MODIFY, mod), upd(p4v1.Update_DELETE, dropSrc)); err != nil {
		t.Fatal(err)
	}
	r.sw.Process(2, [][]byte{v6UDP(t, "2001:db8:1::1", "2001:db8:9::7", 53)})
	if got := r.took(); !sameInts(got, []int{1, 0, 0}) {
		t.Errorf("after MODIFY and DELETE: frames out of ports 1..3 %v, want [1 0 0]", got)
	}
	if got := r.read(t, aclEntity(&p4v1.TableEntry{TableId: TableACL, Priority: 10, Match: iidCanon.Match})); len(got) != 1 ||
		!proto.Equal(got[0].GetTableEntry().GetAction(), act(ActionForward, []byte{1})) {
		t.Errorf("read after MODIFY: %v", got)
	}
	if err := r.write(0, upd(p4v1.Update_DELETE, iidCanon), upd(p4v1.Update_DELETE, net32), upd(p4v1.Update_DELETE, v4)); err != nil {
		t.Fatal(err)
	}
	if n := len(r.read(t, tableEntity(TableACL))); n != 0 {
		t.Errorf("after deleting every entry the acl table holds %d", n)
	}
	for _, fl := range r.sw.Flows() {
		if fl.Table == 3 && fl.Priority > 0 {
			t.Errorf("flow entry %q left after the deletes", fl.Match)
		}
	}
	r.sw.Process(1, [][]byte{v6UDP(t, "2001:db8:2::1", "2001:db8:9::7", 53)})
	if got := r.took(); !sameInts(got, []int{0, 0, 0}) {
		t.Errorf("after the deletes: frames out of ports 1..3 %v, want none", got)
	}
}

// TestACLIPv6Validation sends bad IPv6 ACL updates one at a time: each is
// refused with the spec's code and nothing changes; an entry with IPv4 and
// IPv6 addresses is INVALID_ARGUMENT naming both.
func TestACLIPv6Validation(t *testing.T) {
	r, _ := ready(t, 2)
	acl := func(fms ...*p4v1.FieldMatch) *p4v1.TableEntry {
		return &p4v1.TableEntry{TableId: TableACL, Priority: 5, Action: act(ActionDrop), Match: fms}
	}
	host := ip6("2001:db8::1")
	ones := ip6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")
	wide := append([]byte{1}, ones...) // 17 bytes, bit 128 set
	cases := []struct {
		name string
		u    *p4v1.Update
		want codes.Code
	}{
		{"ipv4_src and ipv6_dst", ins(acl(ternary(aclIPv4Src, []byte{10, 0, 0, 1}, []byte{0xff, 0xff, 0xff, 0xff}), ternary(aclIPv6Dst, host, ones))), codes.InvalidArgument},
		{"ipv6_src and ipv4_dst", ins(acl(ternary(aclIPv6Src, host, ones), ternary(aclIPv4Dst, []byte{10, 0, 0, 1}, []byte{0xff}))), codes.InvalidArgument},
		{"both families on DELETE", upd(p4v1.Update_DELETE, acl(ternary(aclIPv6Src, host, ones), ternary(aclIPv4Src, []byte{1}, []byte{1}))), codes.InvalidArgument},
		{"value wider than 128 bits", ins(acl(ternary(aclIPv6Src, wide, ones))), codes.OutOfRange},
		{"mask wider than 128 bits", ins(acl(ternary(aclIPv6Dst, host, wide))), codes.OutOfRange},
		{"empty value", ins(acl(ternary(aclIPv6Dst, nil, ones))), codes.OutOfRange},
		{"empty mask", ins(acl(ternary(aclIPv6Dst, host, nil))), codes.OutOfRange},
		{"value outside mask", ins(acl(ternary(aclIPv6Src, host, ip6("ffff:ffff::")))), codes.InvalidArgument},
		{"mask 0", ins(acl(ternary(aclIPv6Src, []byte{0}, []byte{0}))), codes.InvalidArgument},
		{"lpm on a ternary field", ins(acl(lpm(aclIPv6Dst, ip6("2001:db8::"), 32))), codes.InvalidArgument},
		{"exact on a ternary field", ins(acl(exact(aclIPv6Dst, host))), codes.InvalidArgument},
		{"ipv6_dst twice", ins(acl(ternary(aclIPv6Dst, host, ones), ternary(aclIPv6Dst, host, ones))), codes.InvalidArgument},
		{"field id 12", ins(acl(ternary(aclIPv6Dst+1, host, ones))), codes.InvalidArgument},
		{"no priority", ins(&p4v1.TableEntry{TableId: TableACL, Action: act(ActionDrop), Match: []*p4v1.FieldMatch{ternary(aclIPv6Dst, host, ones)}}), codes.InvalidArgument},
	}
	for _, c := range cases {
		err := r.write(0, c.u)
		if code(err) != codes.Unknown {
			t.Errorf("%s: status %v, want UNKNOWN with details", c.name, err)
			continue
		}
		if got := details(t, err); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: details %v, want [%s] (%v)", c.name, got, c.want, err)
		}
	}
	// The both-families message names the fields.
	err := r.write(0, cases[0].u)
	msg := grpcstatus.Convert(err).Details()[0].(*p4v1.Error).GetMessage()
	for _, want := range []string{"IPv4 addresses (ipv4_src)", "IPv6 addresses (ipv6_dst)"} {
		if !strings.Contains(msg, want) {
			t.Errorf("both-families error %q does not say %q", msg, want)
		}
	}
	if n := len(r.read(t, tableEntity(0))); n != 0 {
		t.Fatalf("after the bad updates %d entries, want none", n)
	}
	for _, fl := range r.sw.Flows() {
		if fl.Priority > 0 {
			t.Fatalf("after the bad updates the switch holds flow entry %q", fl.Match)
		}
	}
	// §8.4: leading zero bytes are allowed; the entry reads back in 16 bytes.
	long := append([]byte{0, 0}, host...)
	if err := r.write(0, ins(acl(ternary(aclIPv6Dst, long, append([]byte{0}, ones...))))); err != nil {
		t.Fatalf("an 18-byte value with leading zeros: %v", err)
	}
	got := r.read(t, tableEntity(TableACL))
	if want := acl(ternary(aclIPv6Dst, host, ones)); len(got) != 1 || !proto.Equal(got[0].GetTableEntry(), want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	// eth_type and the IPv6 fields: eth_type 0x86dd is the prerequisite
	// (the entry still compiles to one flow entry); eth_type 0x0800 with an
	// IPv6 address matches no packet and compiles to none.
	if err := r.write(0, ins(&p4v1.TableEntry{TableId: TableACL, Priority: 6, Action: act(ActionDrop), Match: []*p4v1.FieldMatch{
		ternary(aclEthType, []byte{0x86, 0xdd}, []byte{0xff, 0xff}), ternary(aclIPv6Src, host, ones)}}),
		ins(&p4v1.TableEntry{TableId: TableACL, Priority: 7, Action: act(ActionDrop), Match: []*p4v1.FieldMatch{
			ternary(aclEthType, []byte{0x08, 0x00}, []byte{0xff, 0xff}), ternary(aclIPv6Src, host, ones)}})); err != nil {
		t.Fatal(err)
	}
	byPrio := map[uint16]int{}
	for _, fl := range r.sw.Flows() {
		if fl.Table == 3 {
			byPrio[fl.Priority]++
		}
	}
	if byPrio[5] != 1 || byPrio[6] != 1 || byPrio[7] != 0 {
		t.Errorf("flow entries by priority %v: want one for 5 and 6, none for 7 (eth_type 0x0800 with an IPv6 address)", byPrio)
	}
}

// TestACLIPv6PortRange: "a port range matches TCP and UDP only" holds for
// IPv6 too: a destination port range with ip_proto left open, with and
// without an IPv6 address, forwards IPv6 TCP and UDP to the port and not
// UDP to another port or ICMPv6 whose type/code word equals the port.
func TestACLIPv6PortRange(t *testing.T) {
	for _, withAddr := range []bool{false, true} {
		name := "no address"
		if withAddr {
			name = "ipv6_dst"
		}
		t.Run(name, func(t *testing.T) {
			r, _ := ready(t, 3)
			te := &p4v1.TableEntry{TableId: TableACL, Priority: 3, Action: act(ActionForward, []byte{2}),
				Match: []*p4v1.FieldMatch{rng(aclL4Dst, []byte{0, 80}, []byte{0, 80})}}
			wantFlows := 4 // IPv4 and IPv6, TCP and UDP
			if withAddr {
				te.Match = append(te.Match, ternary(aclIPv6Dst, ip6("2001:db8::2"), ip6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")))
				wantFlows = 2 // IPv6 only
			}
			if err := r.write(0, ins(te)); err != nil {
				t.Fatal(err)
			}
			const src, dst = "2001:db8::1", "2001:db8::2"
			tcp := v6Frame(t, src, dst, layers.IPProtocolTCP, &layers.TCP{SrcPort: 5, DstPort: 80, Window: 1})
			udp := v6UDP(t, src, dst, 80)
			udp81 := v6UDP(t, src, dst, 81)
			// ICMPv6 type 0 code 80: the word where ports would be is 0x0050.
			icmp := v6Frame(t, src, dst, layers.IPProtocolICMPv6, &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(0, 80)})
			r.sw.Process(1, [][]byte{tcp, udp, udp81, icmp})
			if got := r.took(); !sameInts(got, []int{0, 2, 0}) {
				t.Errorf("frames out of ports 1..3 %v, want [0 2 0] (TCP and UDP to port 80; not UDP to 81, not ICMPv6)", got)
			}
			n := 0
			for _, fl := range r.sw.Flows() {
				if fl.Table == 3 && fl.Priority == 3 {
					n++
					if !strings.Contains(fl.Match, "ip_proto=6") && !strings.Contains(fl.Match, "ip_proto=17") {
						t.Errorf("flow match %q: want ip_proto TCP or UDP", fl.Match)
					}
				}
			}
			if n != wantFlows {
				t.Errorf("%d flow entries for the ACL entry, want %d", n, wantFlows)
			}
			if withAddr { // another destination is not matched
				r.sw.Process(1, [][]byte{v6UDP(t, src, "2001:db8::3", 80)})
				if got := r.took(); !sameInts(got, []int{0, 0, 0}) {
					t.Errorf("UDP to port 80 of another address: %v, want no frame", got)
				}
			}
		})
	}
}

// TestP4InfoWithoutIPv6ACLFields: the P4Info as it was before the IPv6
// fields (nine ACL match fields) no longer describes the pipeline.
func TestP4InfoWithoutIPv6ACLFields(t *testing.T) {
	r := newRig(t, 1, 0)
	r.primary(t, 1)
	old := P4Info()
	acl := old.Tables[3]
	if acl.GetPreamble().GetId() != TableACL || len(acl.MatchFields) != 11 {
		t.Fatalf("table 3 is %s with %d fields: want acl with 11", acl.GetPreamble().GetName(), len(acl.MatchFields))
	}
	for i, want := range []string{"ingress_port", "eth_src", "eth_dst", "eth_type", "ipv4_src", "ipv4_dst", "ip_proto", "l4_src_port", "l4_dst_port", "ipv6_src", "ipv6_dst"} {
		if f := acl.MatchFields[i]; f.GetId() != uint32(i+1) || f.GetName() != want {
			t.Errorf("acl match field %d: id %d %q, want id %d %q", i, f.GetId(), f.GetName(), i+1, want)
		}
	}
	acl.MatchFields = acl.MatchFields[:9]
	_, err := r.cl.SetForwardingPipelineConfig(context.Background(), &p4v1.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1},
		Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY, Config: &p4v1.ForwardingPipelineConfig{P4Info: old}})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "9 match fields: want 11") {
		t.Fatalf("the P4Info without the IPv6 fields: %v, want INVALID_ARGUMENT (9 match fields: want 11)", err)
	}
}
