package l3

import (
	"bytes"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/route"
)

var (
	mac1  = MAC{0x02, 0xaa, 0, 0, 0, 1} // router port 1
	mac2  = MAC{0x02, 0xaa, 0, 0, 0, 2} // router port 2
	host1 = MAC{0x02, 0, 0, 0, 1, 2}    // 10.0.1.2 on port 1
	host2 = MAC{0x02, 0, 0, 0, 2, 2}    // 10.0.2.2 on port 2
	gwA   = MAC{0x02, 0, 0, 0, 2, 0xa}  // 10.0.2.10, ECMP gateway A
	gwB   = MAC{0x02, 0, 0, 0, 2, 0xb}  // 10.0.2.11, ECMP gateway B
)

type sent struct {
	port  uint32
	frame []byte
}

// rig is a router with two ports (10.0.1.1/24 + 2001:db8:1::1/64 on 1,
// 10.0.2.1/24 + 2001:db8:2::1/64 on 2) on the CPU engine, route table 254
// with the connected routes, and a fake clock.
type rig struct {
	t    testing.TB
	r    *Router
	tab  *route.Table
	now  time.Time
	out  []sent
	xmit []sent
}

func newRig(t testing.TB) *rig {
	t.Helper()
	g := &rig{t: t, now: time.Unix(5000, 0)}
	eng := gpu.NewEngine(gpu.EngineConfig{})
	t.Cleanup(func() { eng.Close() })
	r, err := New(Config{
		Engine: eng,
		Ports: []PortConfig{
			{No: 1, MAC: mac1, Table: 254, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.1.1/24"), netip.MustParsePrefix("2001:db8:1::1/64")}},
			{No: 2, MAC: mac2, Table: 254, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.2.1/24"), netip.MustParsePrefix("2001:db8:2::1/64")}},
		},
		Now:      func() time.Time { return g.now },
		Transmit: func(port uint32, frames [][]byte) { g.xmit = append(g.xmit, sent{port, frames[0]}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	tab, err := route.New(254, route.Options{PortOK: r.Owns})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.AttachTable(tab); err != nil {
		t.Fatal(err)
	}
	for _, rt := range r.ConnectedRoutes(254) {
		if err := tab.Add(rt); err != nil {
			t.Fatal(err)
		}
	}
	g.r, g.tab = r, tab
	return g
}

// send runs frames received on port through the router and returns what
// it sent.
func (g *rig) send(port uint32, frames ...[]byte) []sent {
	g.out = g.out[:0]
	g.r.Route(port, frames, func(p uint32, f []byte) { g.out = append(g.out, sent{p, append([]byte(nil), f...)}) })
	return g.out
}

func serialize(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func hw(m MAC) net.HardwareAddr { return net.HardwareAddr(m[:]) }

func arpFrame(t testing.TB, op uint16, ethDst, sha MAC, spa string, tha MAC, tpa string) []byte {
	return serialize(t, &layers.Ethernet{SrcMAC: hw(sha), DstMAC: hw(ethDst), EthernetType: layers.EthernetTypeARP},
		&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
			Operation: op, SourceHwAddress: hw(sha), SourceProtAddress: net.ParseIP(spa).To4(),
			DstHwAddress: hw(tha), DstProtAddress: net.ParseIP(tpa).To4()})
}

func udp4(t testing.TB, src, dst string, ttl uint8, sport uint16) []byte {
	ip := &layers.IPv4{Version: 4, TTL: ttl, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst)}
	u := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: 9}
	u.SetNetworkLayerForChecksum(ip)
	return serialize(t, &layers.Ethernet{SrcMAC: hw(host1), DstMAC: hw(mac1), EthernetType: layers.EthernetTypeIPv4}, ip, u,
		gopacket.Payload("hello router"))
}

func udp6(t testing.TB, src, dst string, hops uint8) []byte {
	ip := &layers.IPv6{Version: 6, HopLimit: hops, NextHeader: layers.IPProtocolUDP, SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst)}
	u := &layers.UDP{SrcPort: 1234, DstPort: 9}
	u.SetNetworkLayerForChecksum(ip)
	return serialize(t, &layers.Ethernet{SrcMAC: hw(host1), DstMAC: hw(mac1), EthernetType: layers.EthernetTypeIPv6}, ip, u,
		gopacket.Payload("hello router"))
}

func decode(f []byte) gopacket.Packet {
	return gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
}

// checkSums re-serializes the decoded packet with checksums computed and
// wants the same bytes: every checksum the router wrote is right.
func checkSums(t *testing.T, f []byte) {
	t.Helper()
	p := decode(f)
	var ls []gopacket.SerializableLayer
	var ip gopacket.NetworkLayer
	for _, l := range p.Layers() {
		switch l := l.(type) {
		case *layers.IPv4:
			ip = l
		case *layers.IPv6:
			ip = l
		case *layers.UDP:
			l.SetNetworkLayerForChecksum(ip)
		case *layers.ICMPv6:
			// gopacket decodes an echo's body oddly: take the ICMPv6 payload whole.
			l.SetNetworkLayerForChecksum(ip)
			ls = append(ls, l, gopacket.Payload(l.LayerPayload()))
			goto done
		}
		if s, ok := l.(gopacket.SerializableLayer); ok {
			ls = append(ls, s)
		}
	}
	if last := p.Layers()[len(p.Layers())-1]; len(last.LayerPayload()) > 0 {
		ls = append(ls, gopacket.Payload(last.LayerPayload()))
	}
done:
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, ls...); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes(); len(got) < len(f) || !bytes.Equal(got[:len(f)], f) || len(bytes.Trim(got[len(f):], "\x00")) > 0 {
		t.Errorf("checksums differ:\n got %x\nwant %x", f, buf.Bytes())
	}
}

func TestARPReply(t *testing.T) {
	g := newRig(t)
	out := g.send(1, arpFrame(t, layers.ARPRequest, broadcastMAC, host1, "10.0.1.2", MAC{}, "10.0.1.1"))
	if len(out) != 1 || out[0].port != 1 {
		t.Fatalf("sent %d frames, want one ARP reply on port 1", len(out))
	}
	a, _ := decode(out[0].frame).Layer(layers.LayerTypeARP).(*layers.ARP)
	if a == nil || a.Operation != layers.ARPReply || !bytes.Equal(a.SourceHwAddress, mac1[:]) ||
		!bytes.Equal(a.SourceProtAddress, []byte{10, 0, 1, 1}) || !bytes.Equal(a.DstHwAddress, host1[:]) {
		t.Fatalf("reply: %v", decode(out[0].frame))
	}
	// A request for an address of the other port is not answered here.
	if out := g.send(1, arpFrame(t, layers.ARPRequest, broadcastMAC, host1, "10.0.1.2", MAC{}, "10.0.2.1")); len(out) != 0 {
		t.Fatal("answered a request for another port's address")
	}
	// The request taught the router host1's address.
	if d := g.r.Neighbours().Dump(g.now); len(d) != 1 || d[0].Addr != "10.0.1.2" || d[0].MAC != host1.String() {
		t.Fatalf("neighbours: %+v", d)
	}
}

func TestNeighbourSolicitationReply(t *testing.T) {
	g := newRig(t)
	src, target := net.ParseIP("2001:db8:1::2"), net.ParseIP("2001:db8:1::1")
	sn, _ := solicitedNode(netip.MustParseAddr("2001:db8:1::1"))
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: src, DstIP: sn.AsSlice()}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)}
	icmp.SetNetworkLayerForChecksum(ip)
	ns := &layers.ICMPv6NeighborSolicitation{TargetAddress: target,
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: host1[:]}}}
	f := serialize(t, &layers.Ethernet{SrcMAC: hw(host1), DstMAC: hw(multicastMAC6(sn)), EthernetType: layers.EthernetTypeIPv6}, ip, icmp, ns)
	out := g.send(1, f)
	if len(out) != 1 {
		t.Fatalf("sent %d frames, want one NA", len(out))
	}
	p := decode(out[0].frame)
	na, _ := p.Layer(layers.LayerTypeICMPv6NeighborAdvertisement).(*layers.ICMPv6NeighborAdvertisement)
	ip6, _ := p.Layer(layers.LayerTypeIPv6).(*layers.IPv6)
	if na == nil || !na.TargetAddress.Equal(target) || !na.Solicited() || !na.Router() || ip6.HopLimit != 255 ||
		!ip6.DstIP.Equal(src) || !bytes.Equal(p.LinkLayer().LayerContents()[0:6], host1[:]) {
		t.Fatalf("advertisement: %v", p)
	}
	checkSums(t, out[0].frame)
	// A wrong checksum is dropped.
	f[len(f)-1] ^= 0xff
	if out := g.send(1, f); len(out) != 0 {
		t.Fatal("answered a solicitation with a bad checksum")
	}
}

func TestEchoReplies(t *testing.T) {
	g := newRig(t)
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: net.ParseIP("10.0.1.2"), DstIP: net.ParseIP("10.0.2.1")}
	f := serialize(t, &layers.Ethernet{SrcMAC: hw(host1), DstMAC: hw(mac1), EthernetType: layers.EthernetTypeIPv4}, ip,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0), Id: 7, Seq: 1}, gopacket.Payload("ping"))
	out := g.send(1, f)
	if len(out) != 1 || out[0].port != 1 {
		t.Fatalf("sent %d frames, want an echo reply on port 1", len(out))
	}
	p := decode(out[0].frame)
	ic, _ := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
	if ic == nil || ic.TypeCode.Type() != layers.ICMPv4TypeEchoReply || ic.Id != 7 || !p.NetworkLayer().(*layers.IPv4).DstIP.Equal(net.ParseIP("10.0.1.2")) {
		t.Fatalf("reply: %v", p)
	}
	checkSums(t, out[0].frame)

	ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolICMPv6, SrcIP: net.ParseIP("2001:db8:1::2"), DstIP: net.ParseIP("2001:db8:1::1")}
	ic6 := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeEchoRequest, 0)}
	ic6.SetNetworkLayerForChecksum(ip6)
	f = serialize(t, &layers.Ethernet{SrcMAC: hw(host1), DstMAC: hw(mac1), EthernetType: layers.EthernetTypeIPv6}, ip6, ic6,
		&layers.ICMPv6Echo{Identifier: 9, SeqNumber: 2}, gopacket.Payload("ping6"))
	out = g.send(1, f)
	if len(out) != 1 {
		t.Fatalf("sent %d frames, want an ICMPv6 echo reply", len(out))
	}
	if ic, _ := decode(out[0].frame).Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6); ic == nil || ic.TypeCode.Type() != layers.ICMPv6TypeEchoReply {
		t.Fatalf("reply: %v", decode(out[0].frame))
	}
	checkSums(t, out[0].frame)
}

// TestForwardAfterResolution: the first packet to an unknown neighbour
// waits while the router asks for it; the answer releases it with the
// right MACs and TTL; later packets go at once.
func TestForwardAfterResolution(t *testing.T) {
	g := newRig(t)
	out := g.send(1, udp4(t, "10.0.1.2", "10.0.2.2", 64, 1000))
	if len(out) != 1 || out[0].port != 2 {
		t.Fatalf("sent %d frames, want one ARP request on port 2", len(out))
	}
	a, _ := decode(out[0].frame).Layer(layers.LayerTypeARP).(*layers.ARP)
	if a == nil || a.Operation != layers.ARPRequest || !bytes.Equal(a.DstProtAddress, []byte{10, 0, 2, 2}) ||
		!bytes.Equal(a.SourceProtAddress, []byte{10, 0, 2, 1}) {
		t.Fatalf("solicitation: %v", decode(out[0].frame))
	}
	// No answer within RetransTime: a retry through Transmit.
	g.now = g.now.Add(1100 * time.Millisecond)
	g.r.Tick()
	if len(g.xmit) != 1 || g.xmit[0].port != 2 {
		t.Fatalf("retries: %d, want one ARP request on port 2", len(g.xmit))
	}
	out = g.send(2, arpFrame(t, layers.ARPReply, mac2, host2, "10.0.2.2", mac2, "10.0.2.1"))
	if len(out) != 1 || out[0].port != 2 {
		t.Fatalf("after the reply: %d frames, want the queued packet on port 2", len(out))
	}
	checkForwarded(t, out[0].frame, host2, mac2, 63)
	out = g.send(1, udp4(t, "10.0.1.2", "10.0.2.2", 64, 1000))
	if len(out) != 1 {
		t.Fatalf("resolved: %d frames", len(out))
	}
	checkForwarded(t, out[0].frame, host2, mac2, 63)
	c := g.r.Counters()
	if c.Forwarded != 2 || c.Solicitations != 2 {
		t.Fatalf("counters: %+v", c)
	}
	e, _ := g.tab.Lookup(netip.MustParseAddr("10.0.2.2"))
	if p, _, nh := e.Counters(); p != 2 || nh[0].Packets != 2 {
		t.Fatalf("route counters: %d packets, next hop %d, want 2", p, nh[0].Packets)
	}
}

func checkForwarded(t *testing.T, f []byte, dst, src MAC, ttl uint8) {
	t.Helper()
	p := decode(f)
	eth := p.LinkLayer().(*layers.Ethernet)
	if !bytes.Equal(eth.DstMAC, dst[:]) || !bytes.Equal(eth.SrcMAC, src[:]) {
		t.Fatalf("MACs %v -> %v, want %v -> %v", eth.SrcMAC, eth.DstMAC, src, dst)
	}
	switch ip := p.NetworkLayer().(type) {
	case *layers.IPv4:
		if ip.TTL != ttl {
			t.Fatalf("TTL %d, want %d", ip.TTL, ttl)
		}
	case *layers.IPv6:
		if ip.HopLimit != ttl {
			t.Fatalf("hop limit %d, want %d", ip.HopLimit, ttl)
		}
	}
	checkSums(t, f)
}

func TestForwardIPv6(t *testing.T) {
	g := newRig(t)
	out := g.send(1, udp6(t, "2001:db8:1::2", "2001:db8:2::2", 64))
	if len(out) != 1 || out[0].port != 2 {
		t.Fatalf("sent %d frames, want one NS on port 2", len(out))
	}
	p := decode(out[0].frame)
	ns, _ := p.Layer(layers.LayerTypeICMPv6NeighborSolicitation).(*layers.ICMPv6NeighborSolicitation)
	if ns == nil || !ns.TargetAddress.Equal(net.ParseIP("2001:db8:2::2")) || !bytes.Equal(p.LinkLayer().LayerContents()[0:6], []byte{0x33, 0x33, 0xff, 0, 0, 2}) {
		t.Fatalf("solicitation: %v", p)
	}
	checkSums(t, out[0].frame)
	// The neighbour's advertisement releases the packet.
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: net.ParseIP("2001:db8:2::2"), DstIP: net.ParseIP("2001:db8:2::1")}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborAdvertisement, 0)}
	icmp.SetNetworkLayerForChecksum(ip)
	na := &layers.ICMPv6NeighborAdvertisement{Flags: 0x60, TargetAddress: net.ParseIP("2001:db8:2::2"),
		Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptTargetAddress, Data: host2[:]}}}
	out = g.send(2, serialize(t, &layers.Ethernet{SrcMAC: hw(host2), DstMAC: hw(mac2), EthernetType: layers.EthernetTypeIPv6}, ip, icmp, na))
	if len(out) != 1 {
		t.Fatalf("after the advertisement: %d frames", len(out))
	}
	checkForwarded(t, out[0].frame, host2, mac2, 63)
	if d := g.r.Neighbours().Dump(g.now); len(d) != 1 || d[0].State != "reachable" {
		t.Fatalf("neighbours: %+v", d)
	}
}

func TestTTLExpiry(t *testing.T) {
	g := newRig(t)
	for _, c := range []struct {
		name  string
		frame []byte
	}{{"ipv4", udp4(t, "10.0.1.2", "10.0.2.2", 1, 1)}, {"ipv6", udp6(t, "2001:db8:1::2", "2001:db8:2::2", 1)}} {
		out := g.send(1, c.frame)
		if len(out) != 1 || out[0].port != 1 {
			t.Fatalf("%s: sent %d frames, want one time exceeded back on port 1", c.name, len(out))
		}
		p := decode(out[0].frame)
		switch c.name {
		case "ipv4":
			ic, _ := p.Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4)
			if ic == nil || ic.TypeCode.Type() != layers.ICMPv4TypeTimeExceeded || !p.NetworkLayer().(*layers.IPv4).SrcIP.Equal(net.ParseIP("10.0.1.1")) {
				t.Fatalf("%s: %v", c.name, p)
			}
			// The error quotes the original header and the first 8 bytes after it.
			if !bytes.Contains(out[0].frame, c.frame[14:14+28]) {
				t.Fatalf("%s: the original packet is not quoted", c.name)
			}
		case "ipv6":
			ic, _ := p.Layer(layers.LayerTypeICMPv6).(*layers.ICMPv6)
			if ic == nil || ic.TypeCode.Type() != layers.ICMPv6TypeTimeExceeded {
				t.Fatalf("%s: %v", c.name, p)
			}
		}
		checkSums(t, out[0].frame)
	}
	if c := g.r.Counters(); c.Drops["ttl_expired"] != 2 || c.ICMPErrors != 2 {
		t.Fatalf("counters: %+v", c)
	}
}

func TestNoRouteAndBadInput(t *testing.T) {
	g := newRig(t)
	out := g.send(1, udp4(t, "10.0.1.2", "192.0.2.9", 64, 1))
	if len(out) != 1 {
		t.Fatalf("no route: %d frames, want an ICMP unreachable", len(out))
	}
	if ic, _ := decode(out[0].frame).Layer(layers.LayerTypeICMPv4).(*layers.ICMPv4); ic == nil || ic.TypeCode.Type() != layers.ICMPv4TypeDestinationUnreachable {
		t.Fatalf("no route: %v", decode(out[0].frame))
	}
	bad := udp4(t, "10.0.1.2", "10.0.2.2", 64, 1)
	bad[14+10] ^= 0x55 // IPv4 header checksum
	notUs := udp4(t, "10.0.1.2", "10.0.2.2", 64, 1)
	notUs[0] = 0x04
	short := udp4(t, "10.0.1.2", "10.0.2.2", 64, 1)[:30]
	if out := g.send(1, bad, notUs, short); len(out) != 0 {
		t.Fatalf("sent %d frames for bad input", len(out))
	}
	c := g.r.Counters()
	if c.Drops["no_route"] != 1 || c.Drops["bad_checksum"] != 1 || c.Drops["not_for_router"] != 1 || c.Drops["malformed"] != 1 {
		t.Fatalf("drops: %v", c.Drops)
	}
}

// TestECMP: a route over two gateways spreads flows over both, and one
// flow always takes the same.
func TestECMP(t *testing.T) {
	g := newRig(t)
	err := g.tab.Add(route.Route{Table: 254, Prefix: netip.MustParsePrefix("198.51.100.0/24"), Source: route.SourceStatic,
		NextHops: []route.NextHop{{Gateway: netip.MustParseAddr("10.0.2.10"), Port: 2, Weight: 1}, {Gateway: netip.MustParseAddr("10.0.2.11"), Port: 2, Weight: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	g.send(2, arpFrame(t, layers.ARPReply, mac2, gwA, "10.0.2.10", mac2, "10.0.2.1"),
		arpFrame(t, layers.ARPRequest, broadcastMAC, gwB, "10.0.2.11", MAC{}, "10.0.2.1"))
	var frames [][]byte
	for sport := range 200 {
		frames = append(frames, udp4(t, "10.0.1.2", "198.51.100.7", 64, uint16(1000+sport)))
	}
	var out []sent
	for _, o := range g.send(1, frames...) {
		if be16(o.frame[12:]) == ethIPv4 {
			out = append(out, o)
		}
	}
	if len(out) != 200 {
		t.Fatalf("forwarded %d of 200", len(out))
	}
	per := map[MAC]int{}
	for _, o := range out {
		per[MAC(o.frame[0:6])]++
	}
	if per[gwA] < 60 || per[gwB] < 60 {
		t.Fatalf("flows per gateway: A %d, B %d: not spread", per[gwA], per[gwB])
	}
	e, _ := g.tab.Lookup(netip.MustParseAddr("198.51.100.7"))
	_, _, nh := e.Counters()
	if int(nh[0].Packets) != per[MAC(gwA)] || int(nh[1].Packets) != per[MAC(gwB)] {
		t.Fatalf("next-hop counters %d/%d, frames %d/%d", nh[0].Packets, nh[1].Packets, per[gwA], per[gwB])
	}
	// One flow, many packets: one gateway.
	var same [][]byte
	for range 50 {
		same = append(same, udp4(t, "10.0.1.2", "198.51.100.7", 64, 4242))
	}
	seen := map[MAC]bool{}
	for _, o := range g.send(1, same...) {
		seen[MAC(o.frame[0:6])] = true
	}
	if len(seen) != 1 {
		t.Fatalf("one flow took %d paths", len(seen))
	}
}

// TestRouteChangesReachTheEngine: a route deleted from the table is gone
// from the engine's lookups at once; added back, it is there.
func TestRouteChangesReachTheEngine(t *testing.T) {
	g := newRig(t)
	p := netip.MustParsePrefix("10.0.2.0/24")
	if err := g.tab.Delete(p); err != nil {
		t.Fatal(err)
	}
	if out := g.send(1, udp4(t, "10.0.1.2", "10.0.2.2", 64, 1)); len(out) != 1 || decode(out[0].frame).Layer(layers.LayerTypeICMPv4) == nil {
		t.Fatal("deleted route still used")
	}
	if err := g.tab.Add(g.r.ConnectedRoutes(254)[2]); err != nil {
		t.Fatal(err)
	}
	if out := g.send(1, udp4(t, "10.0.1.2", "10.0.2.2", 64, 1)); len(out) != 1 || decode(out[0].frame).Layer(layers.LayerTypeARP) == nil {
		t.Fatal("re-added route not used")
	}
}

// TestConcurrentRouting runs batches on two ports at once while routes
// change and the neighbour timers run (for the race detector), and checks
// that every packet was either forwarded or counted as a drop.
func TestConcurrentRouting(t *testing.T) {
	g := newRig(t)
	g.now = time.Now()
	g.r.cfg.Now = time.Now
	g.send(2, arpFrame(t, layers.ARPReply, mac2, host2, "10.0.2.2", mac2, "10.0.2.1"))
	g.send(1, arpFrame(t, layers.ARPReply, mac1, host1, "10.0.1.2", mac1, "10.0.1.1"))
	before := g.r.Counters()
	const rounds, batch = 200, 32
	var wg sync.WaitGroup
	var sent atomic.Uint64
	for port := uint32(1); port <= 2; port++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src, dst := "10.0.1.2", "10.0.2.2"
			if port == 2 {
				src, dst = "10.0.2.2", "10.0.1.2"
			}
			tmpl := udp4(t, src, dst, 64, 7)
			if port == 2 {
				copy(tmpl[0:6], mac2[:])
			}
			for range rounds {
				frames := make([][]byte, batch)
				for i := range frames {
					frames[i] = append([]byte(nil), tmpl...)
				}
				g.r.Route(port, frames, func(uint32, []byte) { sent.Add(1) })
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		p := netip.MustParsePrefix("198.51.100.0/24")
		for i := range rounds {
			if i%2 == 0 {
				_ = g.tab.Add(route.Route{Table: 254, Prefix: p, Source: route.SourceStatic, NextHops: []route.NextHop{{Port: 2, Weight: 1}}})
			} else {
				_ = g.tab.Delete(p)
			}
			g.r.Tick()
		}
	}()
	wg.Wait()
	c := g.r.Counters()
	var drops uint64
	for k, v := range c.Drops {
		drops += v - before.Drops[k]
	}
	if got := c.Forwarded - before.Forwarded + drops; got != 2*rounds*batch {
		t.Fatalf("forwarded %d + dropped %d of %d packets", c.Forwarded-before.Forwarded, drops, 2*rounds*batch)
	}
	if sent.Load() != c.Forwarded-before.Forwarded {
		t.Fatalf("sent %d frames, counted %d forwarded", sent.Load(), c.Forwarded-before.Forwarded)
	}
}
