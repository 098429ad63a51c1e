package filter

import (
	"encoding/binary"
	"math/rand"
	"net"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// testPacket is a generated frame: Ethernet bytes plus the captured length
// (shorter than the frame for truncated captures).
type testPacket struct {
	data []byte
	wire uint32
}

func ser(ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		panic(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

var (
	macA  = net.HardwareAddr{0x00, 0x11, 0x22, 0x33, 0x44, 0x55}
	macB  = net.HardwareAddr{0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb}
	macBC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	ip4A  = net.IP{10, 0, 0, 1}
	ip4B  = net.IP{10, 0, 0, 2}
	ip4C  = net.IP{192, 168, 1, 5}
	ip6A  = net.ParseIP("2001:db8::1")
	ip6B  = net.ParseIP("2001:db8::2")
)

func eth(t layers.EthernetType, dst net.HardwareAddr) *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: dst, EthernetType: t}
}

func v4(p layers.IPProtocol, src, dst net.IP) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: p, SrcIP: src, DstIP: dst, Id: 7}
}

func v6(nh layers.IPProtocol, src, dst net.IP) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 64, NextHeader: nh, SrcIP: src, DstIP: dst}
}

func tcp(sp, dp layers.TCPPort, syn bool) *layers.TCP {
	return &layers.TCP{SrcPort: sp, DstPort: dp, SYN: syn, ACK: !syn, Seq: 1, Window: 100}
}

func udp(sp, dp layers.UDPPort) *layers.UDP { return &layers.UDP{SrcPort: sp, DstPort: dp} }

func withTCP6(l3 *layers.IPv6, t *layers.TCP) *layers.TCP {
	t.SetNetworkLayerForChecksum(l3)
	return t
}

func withTCP4(l3 *layers.IPv4, t *layers.TCP) *layers.TCP {
	t.SetNetworkLayerForChecksum(l3)
	return t
}

func withUDP4(l3 *layers.IPv4, u *layers.UDP) *layers.UDP {
	u.SetNetworkLayerForChecksum(l3)
	return u
}

func withUDP6(l3 *layers.IPv6, u *layers.UDP) *layers.UDP {
	u.SetNetworkLayerForChecksum(l3)
	return u
}

// l3Frames returns Ethernet frames of many kinds; the oracle test also
// strips and rewraps their link layers for the other link types.
func l3Frames() [][]byte {
	var fs [][]byte
	pay := gopacket.Payload([]byte("hello, filters"))
	add := func(b []byte) { fs = append(fs, b) }
	ip := v4(layers.IPProtocolTCP, ip4A, ip4B)
	add(ser(eth(layers.EthernetTypeIPv4, macB), ip, withTCP4(ip, tcp(1234, 80, true)), pay))
	ip = v4(layers.IPProtocolTCP, ip4B, ip4A)
	ip.IHL = 6
	ip.Options = []layers.IPv4Option{{OptionType: 1}, {OptionType: 1}, {OptionType: 1}, {OptionType: 0}}
	add(ser(eth(layers.EthernetTypeIPv4, macA), ip, withTCP4(ip, tcp(80, 1234, false)), pay))
	ip = v4(layers.IPProtocolUDP, ip4C, net.IP{224, 0, 0, 251})
	add(ser(eth(layers.EthernetTypeIPv4, net.HardwareAddr{1, 0, 0x5e, 0, 0, 0xfb}), ip, withUDP4(ip, udp(5353, 53)), pay))
	ip = v4(layers.IPProtocolUDP, net.IP{0, 0, 0, 0}, net.IP{255, 255, 255, 255})
	add(ser(eth(layers.EthernetTypeIPv4, macBC), ip, withUDP4(ip, udp(68, 67)), pay))
	for _, ty := range []uint8{8, 0, 3, 11} {
		ip = v4(layers.IPProtocolICMPv4, ip4A, ip4B)
		add(ser(eth(layers.EthernetTypeIPv4, macB), ip, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(ty, 0), Id: 1, Seq: 1}, pay))
	}
	add(ser(eth(layers.EthernetTypeARP, macBC), &layers.ARP{AddrType: 1, Protocol: 0x0800, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: 1, SourceHwAddress: macA, SourceProtAddress: ip4A, DstHwAddress: make([]byte, 6), DstProtAddress: ip4B}))
	add(ser(eth(layers.EthernetType(0x8035), macBC), &layers.ARP{AddrType: 1, Protocol: 0x0800, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: 3, SourceHwAddress: macA, SourceProtAddress: ip4C, DstHwAddress: macA, DstProtAddress: ip4C}))
	i6 := v6(layers.IPProtocolTCP, ip6A, ip6B)
	add(ser(eth(layers.EthernetTypeIPv6, macB), i6, withTCP6(i6, tcp(40000, 443, true)), pay))
	i6 = v6(layers.IPProtocolUDP, ip6B, net.ParseIP("ff02::fb"))
	add(ser(eth(layers.EthernetTypeIPv6, net.HardwareAddr{0x33, 0x33, 0, 0, 0, 0xfb}), i6, withUDP6(i6, udp(5353, 5353)), pay))
	i6 = v6(layers.IPProtocolICMPv6, ip6A, ip6B)
	icmp6 := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}
	icmp6.SetNetworkLayerForChecksum(i6)
	add(ser(eth(layers.EthernetTypeIPv6, macB), i6, icmp6, &layers.ICMPv6Echo{Identifier: 1, SeqNumber: 2}, pay))
	// IPv6 with a fragment header (next header 44) carrying UDP.
	i6 = v6(layers.IPProtocolIPv6Fragment, ip6A, ip6B)
	frag := []byte{17, 0, 0, 1, 0, 0, 0, 9}
	u := []byte{0x13, 0x88, 0x00, 0x35, 0, 16, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}
	add(ser(eth(layers.EthernetTypeIPv6, macB), i6, gopacket.Payload(append(frag, u...))))
	// IPv6 hop-by-hop then TCP (libpcap does not walk extension headers).
	i6 = v6(layers.IPProtocolIPv6HopByHop, ip6A, ip6B)
	hbh := []byte{6, 0, 1, 4, 0, 0, 0, 0}
	add(ser(eth(layers.EthernetTypeIPv6, macB), i6, gopacket.Payload(append(hbh, serNoCsum(tcp(1, 80, true))...))))
	// IPv4 fragments: first (MF) and a later one.
	ip = v4(layers.IPProtocolUDP, ip4A, ip4B)
	ip.Flags = layers.IPv4MoreFragments
	add(ser(eth(layers.EthernetTypeIPv4, macB), ip, withUDP4(ip, udp(1000, 53)), pay))
	ip = v4(layers.IPProtocolUDP, ip4A, ip4B)
	ip.FragOffset = 3
	add(ser(eth(layers.EthernetTypeIPv4, macB), ip, gopacket.Payload([]byte{0x03, 0xe8, 0x00, 0x35, 1, 2, 3, 4})))
	// Other IP protocols.
	for _, pr := range []layers.IPProtocol{132, 2, 103, 112, 47, 9, 50, 51} {
		ip = v4(pr, ip4B, ip4C)
		add(ser(eth(layers.EthernetTypeIPv4, macB), ip, gopacket.Payload([]byte{0x00, 0x50, 0x1f, 0x90, 1, 2, 3, 4, 5, 6, 7, 8})))
	}
	i6 = v6(132, ip6A, ip6B)
	add(ser(eth(layers.EthernetTypeIPv6, macB), i6, gopacket.Payload([]byte{0x00, 0x50, 0x1f, 0x90, 1, 2, 3, 4})))
	i6 = v6(103, ip6A, ip6B)
	add(ser(eth(layers.EthernetTypeIPv6, macB), i6, gopacket.Payload([]byte{0x20, 0, 0, 0})))
	// 802.2 LLC (spanning tree) and an unknown ether type.
	add(append([]byte{1, 0x80, 0xc2, 0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0, 38, 0x42, 0x42, 3}, make([]byte, 35)...))
	add(append([]byte{2, 0, 0, 0, 0, 1, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x88, 0xb5}, make([]byte, 30)...))
	return fs
}

// vlanWrap inserts tags (TPID, VID) after the MAC addresses.
func vlanWrap(f []byte, tags ...[2]uint16) []byte {
	out := append([]byte(nil), f[:12]...)
	for _, t := range tags {
		out = binary.BigEndian.AppendUint16(out, t[0])
		out = binary.BigEndian.AppendUint16(out, t[1])
	}
	return append(out, f[12:]...)
}

// mplsWrap puts an MPLS label stack between the Ethernet header and the
// payload of an IP frame.
func mplsWrap(f []byte, labels ...uint32) []byte {
	out := append([]byte(nil), f[:12]...)
	out = append(out, 0x88, 0x47)
	for i, l := range labels {
		w := l<<12 | 64
		if i == len(labels)-1 {
			w |= 1 << 8
		}
		out = binary.BigEndian.AppendUint32(out, w)
	}
	return append(out, f[14:]...)
}

// ethernetCorpus is every frame plus VLAN, QinQ and MPLS variants,
// truncated copies and random frames.
func ethernetCorpus() []testPacket {
	var ps []testPacket
	add := func(b []byte) { ps = append(ps, testPacket{b, uint32(len(b))}) }
	frames := l3Frames()
	for _, f := range frames {
		add(f)
	}
	for i, f := range frames[:12] {
		add(vlanWrap(f, [2]uint16{0x8100, uint16(100 + i%2)}))
		add(vlanWrap(f, [2]uint16{0x88a8, 200}, [2]uint16{0x8100, 300}))
		if i%3 == 0 {
			add(vlanWrap(f, [2]uint16{0x9100, 5}, [2]uint16{0x9100, 6}))
		}
		if binary.BigEndian.Uint16(f[12:]) == 0x0800 || binary.BigEndian.Uint16(f[12:]) == 0x86dd {
			add(mplsWrap(f, 1000))
			add(mplsWrap(f, 1000, 2000))
			if i%2 == 0 { // MPLS inside a VLAN, and inside QinQ
				add(vlanWrap(mplsWrap(f, 3000), [2]uint16{0x8100, 100}))
				add(vlanWrap(mplsWrap(f, 1000, 2000), [2]uint16{0x88a8, 200}, [2]uint16{0x8100, 300}))
			}
		}
	}
	// Truncated captures of full frames: the wire length stays.
	for _, f := range append(frames[:4], frames[9], frames[16]) {
		for _, n := range []int{10, 13, 14, 20, 23, 30, 34, 35, 37, 38, 40, 47, 55} {
			if n < len(f) {
				ps = append(ps, testPacket{append([]byte(nil), f[:n]...), uint32(len(f))})
			}
		}
	}
	rng := rand.New(rand.NewSource(1))
	types := []uint16{0x0800, 0x86dd, 0x0806, 0x8100, 0x8847, 0x0042, 0x8035, 0x88a8}
	for i := 0; i < 300; i++ {
		b := make([]byte, 14+rng.Intn(90))
		rng.Read(b)
		binary.BigEndian.PutUint16(b[12:], types[rng.Intn(len(types))])
		if len(b) > 14 && rng.Intn(2) == 0 {
			b[14] = 0x45
			if rng.Intn(2) == 0 {
				b[14] = 0x40 | byte(rng.Intn(16))
			}
		}
		if len(b) > 23 {
			b[23] = []byte{6, 17, 1, 132, 2, 58, 44}[rng.Intn(7)]
		}
		if len(b) > 21 {
			b[20] &= 0x20 * byte(rng.Intn(2))
			b[21] &= byte(rng.Intn(2))
			b[20+rng.Intn(2)] &= 0xff
		}
		if b[12] == 0x86 && len(b) > 20 {
			b[20] = []byte{6, 17, 58, 44, 132, 0}[rng.Intn(6)]
		}
		wire := uint32(len(b))
		if rng.Intn(4) == 0 {
			wire += uint32(rng.Intn(100))
		}
		ps = append(ps, testPacket{b, wire})
	}
	return ps
}

func serNoCsum(ls ...gopacket.SerializableLayer) []byte {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, ls...); err != nil {
		panic(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}
