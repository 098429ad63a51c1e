package pipeline

import (
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/gswitch/gswitch/tables/flow"
)

func arpFrame(t *testing.T, op uint16, sha, tha net.HardwareAddr, spa, tpa net.IP) []byte {
	return serialize(t, testEth(layers.EthernetTypeARP), &layers.ARP{AddrType: layers.LinkTypeEthernet,
		Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4, Operation: op,
		SourceHwAddress: sha, SourceProtAddress: spa.To4(), DstHwAddress: tha, DstProtAddress: tpa.To4()})
}

func TestSetFieldARP(t *testing.T) {
	a, b := net.HardwareAddr{0x12, 0x11, 0x11, 0x11, 0x11, 0x11}, net.HardwareAddr{0x22, 0x22, 0x22, 0x22, 0x22, 0x22}
	c := net.HardwareAddr{0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa}
	f := arpFrame(t, 1, a, b, net.IP{192, 168, 10, 10}, net.IP{192, 168, 20, 20})
	for _, s := range []struct {
		f flow.Field
		v []byte
	}{{flow.FieldARPOp, []byte{0, 2}}, {flow.FieldARPSHA, c}, {flow.FieldARPSPA, []byte{10, 0, 0, 1}},
		{flow.FieldARPTHA, a}, {flow.FieldARPTPA, []byte{10, 0, 0, 2}}} {
		if !setField(f, s.f, s.v) {
			t.Fatalf("set_field %s refused", s.f)
		}
	}
	eq(t, "arp", f, arpFrame(t, 2, c, a, net.IP{10, 0, 0, 1}, net.IP{10, 0, 0, 2}))
	if setField(mplsIPv4(t, 64), flow.FieldARPOp, []byte{0, 2}) {
		t.Error("set_field arp_op on IPv4")
	}
}

func icmpv4Frame(t *testing.T, typ, code uint8) []byte {
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolICMPv4, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	return serialize(t, testEth(layers.EthernetTypeIPv4), ip,
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(typ, code), Id: 7, Seq: 9}, gopacket.Payload("0123456789abcdef0123456789abcdef"))
}

func TestSetFieldICMPv4(t *testing.T) {
	f := icmpv4Frame(t, 8, 0)
	if !setField(f, flow.FieldICMPv4Type, []byte{0}) || !setField(f, flow.FieldICMPv4Code, []byte{3}) {
		t.Fatal("set_field icmpv4 refused")
	}
	eq(t, "icmpv4", f, icmpv4Frame(t, 0, 3))
}

// icmpv6Frame builds eth/ipv6(flow label)/icmpv6 and then what ls adds
// (an ND message), with the checksum over the pseudo-header.
func icmpv6Frame(t *testing.T, label uint32, typ, code uint8, ls ...gopacket.SerializableLayer) []byte {
	ip := &layers.IPv6{Version: 6, HopLimit: 255, FlowLabel: label, NextHeader: layers.IPProtocolICMPv6,
		SrcIP: net.ParseIP("10::10"), DstIP: net.ParseIP("20::20")}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(typ, code)}
	_ = icmp.SetNetworkLayerForChecksum(ip)
	all := []gopacket.SerializableLayer{testEth(layers.EthernetTypeIPv6), ip, icmp}
	if len(ls) == 0 {
		ls = []gopacket.SerializableLayer{gopacket.Payload("0123456789abcdef0123456789abcdef")}
	}
	return serialize(t, append(all, ls...)...)
}

func TestSetFieldICMPv6AndFlowLabel(t *testing.T) {
	f := icmpv6Frame(t, 100, 128, 0)
	if !setField(f, flow.FieldICMPv6Type, []byte{129}) || !setField(f, flow.FieldICMPv6Code, []byte{1}) ||
		!setField(f, flow.FieldIPv6FLabel, []byte{0x0, 0x02, 0x03}) {
		t.Fatal("set_field refused")
	}
	eq(t, "icmpv6 type, code, flow label", f, icmpv6Frame(t, 0x203, 129, 1))
	// ipv6_dst on ICMPv6 fixes its checksum too (the pseudo-header).
	f = icmpv6Frame(t, 100, 128, 0)
	dst := net.ParseIP("b0::b0")
	if !setField(f, flow.FieldIPv6Dst, dst) {
		t.Fatal("set_field ipv6_dst refused")
	}
	ip := &layers.IPv6{Version: 6, HopLimit: 255, FlowLabel: 100, NextHeader: layers.IPProtocolICMPv6, SrcIP: net.ParseIP("10::10"), DstIP: dst}
	icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
	_ = icmp.SetNetworkLayerForChecksum(ip)
	eq(t, "icmpv6 after ipv6_dst", f, serialize(t, testEth(layers.EthernetTypeIPv6), ip, icmp, gopacket.Payload("0123456789abcdef0123456789abcdef")))
}

func ndFrame(t *testing.T, typ uint8, target net.IP, ll net.HardwareAddr) []byte {
	optType := layers.ICMPv6OptSourceAddress
	if typ == 136 {
		optType = layers.ICMPv6OptTargetAddress
	}
	opts := layers.ICMPv6Options{{Type: optType, Data: ll}}
	if typ == 135 {
		return icmpv6Frame(t, 0, typ, 0, &layers.ICMPv6NeighborSolicitation{TargetAddress: target, Options: opts})
	}
	return icmpv6Frame(t, 0, typ, 0, &layers.ICMPv6NeighborAdvertisement{TargetAddress: target, Options: opts})
}

func TestSetFieldND(t *testing.T) {
	old, nw := net.HardwareAddr{0x22, 0x22, 0x22, 0x22, 0x22, 0x22}, net.HardwareAddr{0xaa, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa}
	tgt, tgt2 := net.ParseIP("20::20"), net.ParseIP("a0::a0")
	f := ndFrame(t, 135, tgt, old)
	if !setField(f, flow.FieldIPv6NDSLL, nw) || !setField(f, flow.FieldIPv6NDTarget, tgt2) {
		t.Fatal("set_field nd_sll/nd_target refused")
	}
	eq(t, "ns", f, ndFrame(t, 135, tgt2, nw))
	if setField(f, flow.FieldIPv6NDTLL, nw) {
		t.Error("nd_tll on a solicitation")
	}
	f = ndFrame(t, 136, tgt, old)
	if !setField(f, flow.FieldIPv6NDTLL, nw) {
		t.Fatal("set_field nd_tll refused")
	}
	eq(t, "na", f, ndFrame(t, 136, tgt, nw))
	if setField(icmpv6Frame(t, 0, 128, 0), flow.FieldIPv6NDTarget, tgt2) {
		t.Error("nd_target on an echo request")
	}
}

func tcpFrame(t *testing.T, v6 bool, proto layers.IPProtocol) []byte {
	tcp := &layers.TCP{SrcPort: 11111, DstPort: 2222, Seq: 1, Window: 100}
	var ip gopacket.SerializableLayer
	et := layers.EthernetTypeIPv4
	if v6 {
		ip6 := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: proto, SrcIP: net.ParseIP("10::10"), DstIP: net.ParseIP("20::20")}
		_ = tcp.SetNetworkLayerForChecksum(ip6)
		ip, et = ip6, layers.EthernetTypeIPv6
	} else {
		ip4 := &layers.IPv4{Version: 4, TTL: 64, Protocol: proto, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
		_ = tcp.SetNetworkLayerForChecksum(ip4)
		ip = ip4
	}
	return serialize(t, testEth(et), ip, tcp, gopacket.Payload("0123456789abcdef0123456789abcdef"))
}

// onesSum is the Internet checksum of the concatenated parts.
func onesSum(parts ...[]byte) uint16 {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	if len(b)%2 == 1 {
		b = append(b, 0)
	}
	var s uint32
	for i := 0; i < len(b); i += 2 {
		s += uint32(b[i])<<8 | uint32(b[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

// The TCP checksum is computed again from scratch over a pseudo-header
// with the new protocol (as os-ken builds its expected packets; gopacket
// would use 6 for a TCP layer whatever the IP header says).
func TestSetFieldIPProto(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		f := tcpFrame(t, v6, layers.IPProtocolTCP)
		if !setField(f, flow.FieldIPProto, []byte{17}) {
			t.Fatal("set_field ip_proto refused")
		}
		want := tcpFrame(t, v6, layers.IPProtocolUDP) // IP header right, TCP checksum over proto 6
		l4, pseudo := 14+20, []byte{}
		if v6 {
			l4 = 14 + 40
			pseudo = append(append(pseudo, want[14+8:14+40]...), 0, 0, 0, byte(len(want)-l4), 0, 0, 0, 17)
		} else {
			pseudo = append(append(pseudo, want[14+12:14+20]...), 0, 17, 0, byte(len(want)-l4))
		}
		want[l4+16], want[l4+17] = 0, 0
		sum := onesSum(pseudo, want[l4:])
		want[l4+16], want[l4+17] = byte(sum>>8), byte(sum)
		eq(t, "ip_proto 17 over tcp", f, want)
	}
}

// sctpFrame builds eth/ip/sctp(ports)/DATA chunk with gopacket's CRC32c
// checksum; v6 picks IPv6.
func sctpFrame(t *testing.T, v6 bool, src, dst uint16) []byte {
	sc := &layers.SCTP{SrcPort: layers.SCTPPort(src), DstPort: layers.SCTPPort(dst), VerificationTag: 0x01020304}
	data := &layers.SCTPData{SCTPChunk: layers.SCTPChunk{Type: layers.SCTPChunkTypeData, Flags: 3},
		TSN: 1, StreamId: 1, StreamSequence: 1}
	payload := gopacket.Payload("0123456789abcdef0123")
	if v6 {
		ip := &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: layers.IPProtocolSCTP,
			SrcIP: net.ParseIP("10::10"), DstIP: net.ParseIP("20::20")}
		return serialize(t, testEth(layers.EthernetTypeIPv6), ip, sc, data, payload)
	}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolSCTP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	return serialize(t, testEth(layers.EthernetTypeIPv4), ip, sc, data, payload)
}

func TestSetFieldSCTP(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		f := sctpFrame(t, v6, 11111, 2222)
		if !setField(f, flow.FieldSCTPSrc, []byte{0x30, 0x39}) || !setField(f, flow.FieldSCTPDst, []byte{0x1a, 0x85}) {
			t.Fatalf("v6 %v: set_field sctp refused", v6)
		}
		eq(t, "sctp ports and CRC32c", f, sctpFrame(t, v6, 12345, 6789))
	}
	// Ethernet padding after the IP payload is not summed.
	f := append(sctpFrame(t, false, 1, 2), make([]byte, 6)...)
	if !setField(f, flow.FieldSCTPDst, []byte{0, 3}) {
		t.Fatal("set_field sctp_dst on a padded frame refused")
	}
	eq(t, "padded frame", f, append(sctpFrame(t, false, 1, 3), make([]byte, 6)...))
	// A wrong checksum stays wrong by the same difference.
	f, want := sctpFrame(t, false, 1, 2), sctpFrame(t, false, 1, 3)
	const sum = ethHdr + 20 + 8 // the checksum's first byte
	f[sum] ^= 0xff
	want[sum] ^= 0xff
	if !setField(f, flow.FieldSCTPDst, []byte{0, 3}) {
		t.Fatal("set_field sctp_dst refused")
	}
	eq(t, "error carried", f, want)
	if setField(sctpFrame(t, false, 1, 2)[:14+20+8], flow.FieldSCTPSrc, []byte{0, 1}) {
		t.Error("set_field sctp_src on a truncated SCTP header")
	}
	if setField(icmpv4Frame(t, 8, 0), flow.FieldSCTPSrc, []byte{0, 1}) {
		t.Error("set_field sctp_src on ICMP")
	}
}
