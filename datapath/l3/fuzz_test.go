package l3

import (
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// FuzzRoute runs arbitrary frames through a router port: nothing panics,
// and every frame the router sends is a whole Ethernet frame on a router
// port, from that port's MAC.
func FuzzRoute(f *testing.F) {
	f.Add(uint8(1), arpFrame(f, layers.ARPRequest, broadcastMAC, host1, "10.0.1.2", MAC{}, "10.0.1.1"))
	f.Add(uint8(2), arpFrame(f, layers.ARPReply, mac2, host2, "10.0.2.2", mac2, "10.0.2.1"))
	f.Add(uint8(1), udp4(f, "10.0.1.2", "10.0.2.2", 64, 1000))
	f.Add(uint8(1), udp4(f, "10.0.1.2", "10.0.2.2", 1, 1000))
	f.Add(uint8(1), udp4(f, "10.0.1.2", "203.0.113.1", 9, 1000))
	f.Add(uint8(1), udp6(f, "2001:db8:1::2", "2001:db8:2::2", 64))
	f.Add(uint8(1), udp6(f, "2001:db8:1::2", "2001:db8:2::2", 1))
	ip := &layers.IPv6{Version: 6, HopLimit: 255, NextHeader: layers.IPProtocolICMPv6, SrcIP: net.ParseIP("2001:db8:1::2"), DstIP: net.ParseIP("2001:db8:1::1")}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(layers.ICMPv6TypeNeighborSolicitation, 0)}
	icmp.SetNetworkLayerForChecksum(ip)
	f.Add(uint8(1), serialize(f, &layers.Ethernet{SrcMAC: hw(host1), DstMAC: hw(mac1), EthernetType: layers.EthernetTypeIPv6}, ip, icmp,
		&layers.ICMPv6NeighborSolicitation{TargetAddress: net.ParseIP("2001:db8:1::1"),
			Options: layers.ICMPv6Options{{Type: layers.ICMPv6OptSourceAddress, Data: host1[:]}}}))
	ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: net.ParseIP("10.0.1.2"), DstIP: net.ParseIP("10.0.1.1")}
	f.Add(uint8(1), serialize(f, &layers.Ethernet{SrcMAC: hw(host1), DstMAC: hw(mac1), EthernetType: layers.EthernetTypeIPv4}, ip4,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(layers.ICMPv4TypeEchoRequest, 0)}, gopacket.Payload("x")))
	g := newRig(f)
	f.Fuzz(func(t *testing.T, port uint8, frame []byte) {
		in := uint32(port%3) + 0 // 0: not a router port
		for _, o := range g.send(in, append([]byte(nil), frame...)) {
			p := g.r.ports[o.port]
			if p == nil || len(o.frame) < ethLen || MAC(o.frame[6:12]) != p.MAC {
				t.Fatalf("sent a bad frame on port %d: %x", o.port, o.frame)
			}
		}
		g.now = g.now.Add(300 * 1e6)
		g.r.Tick()
	})
}
