package packet

import (
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
)

// fv is one expected field value: a uint64, or bytes for 128-bit fields and
// addresses.
type fv struct {
	f flow.Field
	v any
}

// keyOf builds the key a frame on port 'port' with fields 'fields' must
// have, through the field table (Key.SetUint and Key.Set) only.
func keyOf(t *testing.T, port uint32, fields []fv) flow.Key {
	t.Helper()
	var k flow.Key
	set := func(f flow.Field, v any) {
		var err error
		switch v := v.(type) {
		case int:
			err = k.SetUint(f, uint64(v))
		case []byte:
			err = k.Set(f, v)
		default:
			t.Fatalf("field %v: value of type %T", f, v)
		}
		if err != nil {
			t.Fatalf("field %v: %v", f, err)
		}
	}
	set(flow.FieldInPort, int(port))
	set(flow.FieldInPhyPort, int(port))
	for _, x := range fields {
		set(x.f, x.v)
	}
	return k
}

func ethFields(typ int) []fv {
	return []fv{{flow.FieldEthDst, macB}, {flow.FieldEthSrc, macA}, {flow.FieldEthType, typ}}
}

func with(base []fv, more ...fv) []fv { return append(append([]fv(nil), base...), more...) }

type parseCase struct {
	name   string
	frame  []byte
	reason Reason
	fields []fv // besides in_port and in_phy_port
}

// Shorthands.
const (
	v4  = flow.EthTypeIPv4
	v6  = flow.EthTypeIPv6
	pTC = flow.IPProtoTCP
	pUD = flow.IPProtoUDP
	pSC = flow.IPProtoSCTP
	pI4 = flow.IPProtoICMP
	pI6 = flow.IPProtoICMPv6
	s6  = "2001:db8::1"
	d6  = "2001:db8:ffff::2"
)

func v4Fields(tos, proto int) []fv {
	return with(ethFields(v4), fv{flow.FieldIPDSCP, tos >> 2}, fv{flow.FieldIPECN, tos & 3},
		fv{flow.FieldIPProto, proto}, fv{flow.FieldIPv4Src, ip("10.0.0.1")}, fv{flow.FieldIPv4Dst, ip("192.168.7.9")})
}

func v6Fields(tc, flabel, proto, exthdr int) []fv {
	return with(ethFields(v6), fv{flow.FieldIPDSCP, tc >> 2}, fv{flow.FieldIPECN, tc & 3},
		fv{flow.FieldIPProto, proto}, fv{flow.FieldIPv6FLabel, flabel}, fv{flow.FieldIPv6ExtHdr, exthdr},
		fv{flow.FieldIPv6Src, ip(s6)}, fv{flow.FieldIPv6Dst, ip(d6)})
}

func ports(src, dst flow.Field, sp, dp int) []fv { return []fv{{src, sp}, {dst, dp}} }

func e4(payload ...[]byte) []byte { return cat(eth(macB, macA, v4), cat(payload...)) }
func ip4(tos, proto uint8, payload []byte) []byte {
	return ipv4(tos, proto, "10.0.0.1", "192.168.7.9", 0, nil, payload)
}
func e6(nh uint8, payload ...[]byte) []byte {
	return cat(eth(macB, macA, v6), ipv6(0xb9, 0xabcde, nh, s6, d6, cat(payload...)))
}

func parseCases() []parseCase {
	tcpFields := with(v4Fields(0x2e, pTC), append(ports(flow.FieldTCPSrc, flow.FieldTCPDst, 40000, 443), fv{flow.FieldTCPFlags, 0x112})...)
	v6tcp := func(exthdr int) []fv {
		return with(v6Fields(0xb9, 0xabcde, pTC, exthdr), append(ports(flow.FieldTCPSrc, flow.FieldTCPDst, 1, 2), fv{flow.FieldTCPFlags, 0x002})...)
	}
	ns := func(typ int, extra ...fv) []fv {
		return with(v6Fields(0xb9, 0xabcde, pI6, 0), append([]fv{{flow.FieldICMPv6Type, typ}, {flow.FieldICMPv6Code, 0},
			{flow.FieldIPv6NDTarget, ip("fe80::1234")}}, extra...)...)
	}
	arpFields := func(op int) []fv {
		return with(ethFields(flow.EthTypeARP), fv{flow.FieldARPOp, op}, fv{flow.FieldARPSHA, macA}, fv{flow.FieldARPSPA, ip("10.1.1.1")},
			fv{flow.FieldARPTHA, macC}, fv{flow.FieldARPTPA, ip("10.1.1.2")})
	}
	return []parseCase{
		// Layer 2.
		{name: "lldp", frame: cat(eth(macB, macA, 0x88cc), make([]byte, 30)), fields: ethFields(0x88cc)},
		{name: "802.3 length", frame: cat(eth(macB, macA, 46), make([]byte, 46)), fields: ethFields(0x05ff)},
		{name: "vlan tcp", frame: cat(eth(macB, macA, 0x8100), tag(5, 100, v4), ip4(0x2e, pTC, tcp(40000, 443, 0x112))),
			fields: with(tcpFields, fv{flow.FieldVlanVID, 0x1000 | 100}, fv{flow.FieldVlanPCP, 5})},
		{name: "vlan 0 priority tag", frame: cat(eth(macB, macA, 0x8100), tag(7, 0, 0x88cc), make([]byte, 20)),
			fields: with(ethFields(0x88cc), fv{flow.FieldVlanVID, 0x1000}, fv{flow.FieldVlanPCP, 7})},
		{name: "qinq udp", frame: cat(eth(macB, macA, 0x88a8), tag(3, 4094, 0x8100), tag(1, 7, v4), ip4(0x2e, pUD, udp(53, 5353, []byte("x")))),
			fields: with(v4Fields(0x2e, pUD), fv{flow.FieldVlanVID, 0x1000 | 4094}, fv{flow.FieldVlanPCP, 3},
				fv{flow.FieldUDPSrc, 53}, fv{flow.FieldUDPDst, 5353})},
		{name: "mpls", frame: cat(eth(macB, macA, flow.EthTypeMPLS), mpls(0xfedcb, 5, 0, 64), mpls(17, 0, 1, 64), ip4(0, pUD, udp(1, 2, nil))),
			fields: with(ethFields(flow.EthTypeMPLS), fv{flow.FieldMPLSLabel, 0xfedcb}, fv{flow.FieldMPLSTC, 5}, fv{flow.FieldMPLSBOS, 0})},
		{name: "mpls multicast bos", frame: cat(eth(macB, macA, flow.EthTypeMPLSMcast), mpls(3, 7, 1, 1)),
			fields: with(ethFields(flow.EthTypeMPLSMcast), fv{flow.FieldMPLSLabel, 3}, fv{flow.FieldMPLSTC, 7}, fv{flow.FieldMPLSBOS, 1})},
		{name: "pbb", frame: cat(eth(macB, macA, flow.EthTypePBB), pbb(6, 0xabcdef), ip4(0, pUD, udp(1, 2, nil))),
			fields: with(ethFields(flow.EthTypePBB), fv{flow.FieldPBBISID, 0xabcdef})},
		{name: "vlan pbb", frame: cat(eth(macB, macA, 0x88a8), tag(0, 10, flow.EthTypePBB), pbb(0, 0x123456)),
			fields: with(ethFields(flow.EthTypePBB), fv{flow.FieldVlanVID, 0x1000 | 10}, fv{flow.FieldPBBISID, 0x123456})},
		// ARP.
		{name: "arp request", frame: cat(eth(macB, macA, flow.EthTypeARP), arp(1, macA, "10.1.1.1", macC, "10.1.1.2"), make([]byte, 18)),
			fields: arpFields(1)},
		{name: "arp reply", frame: cat(eth(macB, macA, flow.EthTypeARP), arp(2, macA, "10.1.1.1", macC, "10.1.1.2")), fields: arpFields(2)},
		{name: "arp not ethernet/ipv4", frame: cat(eth(macB, macA, flow.EthTypeARP), u16(6), u16(0x0800), []byte{6, 4}, u16(1), make([]byte, 20)),
			fields: with(ethFields(flow.EthTypeARP), fv{flow.FieldARPOp, 1})},
		// IPv4.
		{name: "ipv4 tcp", frame: e4(ip4(0x2e, pTC, tcp(40000, 443, 0x112))), fields: tcpFields},
		{name: "ipv4 options udp", frame: e4(ipv4(0x03, pUD, "10.0.0.1", "192.168.7.9", 0, []byte{1, 1, 1, 0, 0x94, 4, 0, 0}, udp(67, 68, nil))),
			fields: with(v4Fields(0x03, pUD), ports(flow.FieldUDPSrc, flow.FieldUDPDst, 67, 68)...)},
		{name: "ipv4 sctp", frame: e4(ip4(0xfc, pSC, sctp(2905, 2906))), fields: with(v4Fields(0xfc, pSC), ports(flow.FieldSCTPSrc, flow.FieldSCTPDst, 2905, 2906)...)},
		{name: "ipv4 icmp", frame: e4(ip4(0, pI4, icmp4(3, 4))), fields: with(v4Fields(0, pI4), fv{flow.FieldICMPv4Type, 3}, fv{flow.FieldICMPv4Code, 4})},
		{name: "ipv4 gre", frame: e4(ip4(0, 47, make([]byte, 8))), fields: v4Fields(0, 47)},
		{name: "ipv4 first fragment", frame: e4(ipv4(0x2e, pTC, "10.0.0.1", "192.168.7.9", 0x2000, nil, tcp(40000, 443, 0x112))), fields: tcpFields},
		{name: "ipv4 later fragment", frame: e4(ipv4(0x2e, pTC, "10.0.0.1", "192.168.7.9", 0x0010, nil, tcp(40000, 443, 0x112))), fields: v4Fields(0x2e, pTC)},
		{name: "ipv4 padding", frame: e4(ip4(0, pUD, udp(1, 2, nil)), make([]byte, 18)), fields: with(v4Fields(0, pUD), ports(flow.FieldUDPSrc, flow.FieldUDPDst, 1, 2)...)},
		{name: "ipv4 total length 0", frame: e4(cat([]byte{0x45, 0}, u16(0), ip4(0, pUD, udp(9, 10, nil))[4:])),
			fields: with(v4Fields(0, pUD), ports(flow.FieldUDPSrc, flow.FieldUDPDst, 9, 10)...)},
		// IPv6.
		{name: "ipv6 tcp", frame: e6(pTC, tcp(1, 2, 0x002)), fields: v6tcp(0)},
		{name: "ipv6 udp", frame: e6(pUD, udp(546, 547, []byte{1, 2, 3})),
			fields: with(v6Fields(0xb9, 0xabcde, pUD, 0), ports(flow.FieldUDPSrc, flow.FieldUDPDst, 546, 547)...)},
		{name: "ipv6 sctp", frame: e6(pSC, sctp(7, 8)), fields: with(v6Fields(0xb9, 0xabcde, pSC, 0), ports(flow.FieldSCTPSrc, flow.FieldSCTPDst, 7, 8)...)},
		{name: "ipv6 hop dest routing frag(first) ah dest tcp",
			frame: e6(ipProtoHopOpts, ext(ipProtoDstOpts, 8), ext(ipProtoRouting, 16), ext(ipProtoFragment, 24),
				fragHdr(ipProtoAH, 0, true), ah(ipProtoDstOpts, 16), ext(pTC, 8), tcp(1, 2, 0x002)),
			fields: v6tcp(IEHHop | IEHDest | IEHRouter | IEHFrag | IEHAuth)},
		{name: "ipv6 later fragment", frame: e6(ipProtoFragment, fragHdr(pTC, 185, false), tcp(1, 2, 0x002)),
			fields: v6Fields(0xb9, 0xabcde, pTC, IEHFrag)},
		{name: "ipv6 esp", frame: e6(ipProtoHopOpts, ext(ipProtoESP, 8), make([]byte, 40)), fields: v6Fields(0xb9, 0xabcde, ipProtoESP, IEHHop|IEHESP)},
		{name: "ipv6 no next", frame: e6(ipProtoDstOpts, ext(ipProtoNoNext, 8)), fields: v6Fields(0xb9, 0xabcde, ipProtoNoNext, IEHDest|IEHNoNext)},
		{name: "ipv6 no next at once", frame: e6(ipProtoNoNext), fields: v6Fields(0xb9, 0xabcde, ipProtoNoNext, IEHNoNext)},
		{name: "ipv6 repeated routing", frame: e6(ipProtoRouting, ext(ipProtoRouting, 8), ext(pTC, 8), tcp(1, 2, 0x002)),
			fields: v6tcp(IEHRouter | IEHUnrep)},
		{name: "ipv6 three dests", frame: e6(ipProtoDstOpts, ext(ipProtoDstOpts, 8), ext(ipProtoDstOpts, 8), ext(pTC, 8), tcp(1, 2, 0x002)),
			fields: v6tcp(IEHDest | IEHUnrep)},
		{name: "ipv6 hop not first", frame: e6(ipProtoDstOpts, ext(ipProtoHopOpts, 8), ext(pTC, 8), tcp(1, 2, 0x002)),
			fields: v6tcp(IEHDest | IEHHop | IEHUnseq)},
		{name: "ipv6 routing after frag", frame: e6(ipProtoFragment, fragHdr(ipProtoRouting, 0, true), ext(pTC, 8), tcp(1, 2, 0x002)),
			fields: v6tcp(IEHFrag | IEHRouter | IEHUnseq)},
		{name: "ipv6 padding", frame: cat(e6(pUD, udp(1, 2, nil)), make([]byte, 20)),
			fields: with(v6Fields(0xb9, 0xabcde, pUD, 0), ports(flow.FieldUDPSrc, flow.FieldUDPDst, 1, 2)...)},
		{name: "ipv6 icmpv4 protocol", frame: e6(pI4, icmp4(8, 0)), fields: v6Fields(0xb9, 0xabcde, pI4, 0)},
		{name: "icmpv6 echo", frame: e6(pI6, icmp6(128, 0, u32(0x10001))),
			fields: with(v6Fields(0xb9, 0xabcde, pI6, 0), fv{flow.FieldICMPv6Type, 128}, fv{flow.FieldICMPv6Code, 0})},
		{name: "nd solicit sll", frame: e6(pI6, icmp6(135, 0, nd("fe80::1234", cat([]byte{14, 1}, make([]byte, 6)), llOpt(1, macC), llOpt(1, macA)))),
			fields: ns(135, fv{flow.FieldIPv6NDSLL, macC})},
		{name: "nd solicit no options", frame: e6(pI6, icmp6(135, 0, nd("fe80::1234"))), fields: ns(135)},
		{name: "nd advert tll", frame: e6(pI6, icmp6(136, 0, nd("fe80::1234", llOpt(2, macC)))), fields: ns(136, fv{flow.FieldIPv6NDTLL, macC})},
		{name: "nd advert sll ignored", frame: e6(pI6, icmp6(136, 0, nd("fe80::1234", llOpt(1, macC)))), fields: ns(136)},
		{name: "nd code 1 not parsed", frame: e6(pI6, icmp6(135, 1, nd("fe80::1234", llOpt(1, macC)))),
			fields: with(v6Fields(0xb9, 0xabcde, pI6, 0), fv{flow.FieldICMPv6Type, 135}, fv{flow.FieldICMPv6Code, 1})},

		// Malformed: the key holds what came before the bad header.
		{name: "empty", frame: nil, reason: TruncatedEthernet},
		{name: "short ethernet", frame: make([]byte, 13), reason: TruncatedEthernet},
		{name: "short vlan", frame: cat(eth(macB, macA, 0x8100), u16(5)), reason: TruncatedVLAN, fields: ethFields(0)[:2]},
		{name: "short inner vlan", frame: cat(eth(macB, macA, 0x88a8), tag(0, 5, 0x8100), u16(1)), reason: TruncatedVLAN,
			fields: with(ethFields(0)[:2], fv{flow.FieldVlanVID, 0x1005})},
		{name: "short mpls", frame: cat(eth(macB, macA, flow.EthTypeMPLS), u16(1)), reason: TruncatedMPLS, fields: ethFields(flow.EthTypeMPLS)},
		{name: "short pbb", frame: cat(eth(macB, macA, flow.EthTypePBB), pbb(0, 1)[:17]), reason: TruncatedPBB, fields: ethFields(flow.EthTypePBB)},
		{name: "short arp", frame: cat(eth(macB, macA, flow.EthTypeARP), u32(0x00010800)), reason: TruncatedARP, fields: ethFields(flow.EthTypeARP)},
		{name: "short arp addresses", frame: cat(eth(macB, macA, flow.EthTypeARP), arp(1, macA, "10.1.1.1", macC, "10.1.1.2")[:27]), reason: TruncatedARP,
			fields: with(ethFields(flow.EthTypeARP), fv{flow.FieldARPOp, 1})},
		{name: "short ipv4", frame: e4(ip4(0, pUD, nil)[:19]), reason: TruncatedIPv4, fields: ethFields(v4)},
		{name: "ipv4 version 6", frame: e4(cat([]byte{0x65}, ip4(0, pUD, udp(1, 2, nil))[1:])), reason: BadIPv4, fields: ethFields(v4)},
		{name: "ipv4 ihl 4", frame: e4(cat([]byte{0x44}, ip4(0, pUD, udp(1, 2, nil))[1:])), reason: BadIPv4, fields: ethFields(v4)},
		{name: "ipv4 options cut", frame: e4(cat([]byte{0x4f}, ip4(0, pUD, udp(1, 2, nil))[1:])), reason: TruncatedIPv4, fields: ethFields(v4)},
		{name: "ipv4 total length below header", frame: e4(cat([]byte{0x45, 0}, u16(19), ip4(0, pUD, udp(1, 2, nil))[4:])), reason: BadIPv4, fields: ethFields(v4)},
		{name: "ipv4 tcp cut by total length", frame: e4(cat([]byte{0x45, 0}, u16(39), ip4(0, pTC, tcp(1, 2, 0))[4:])), reason: TruncatedL4, fields: v4Fields(0, pTC)},
		{name: "ipv4 udp cut", frame: e4(ip4(0, pUD, udp(1, 2, nil)))[:14+20+7], reason: TruncatedL4, fields: v4Fields(0, pUD)},
		{name: "ipv4 sctp cut", frame: e4(ip4(0, pSC, sctp(1, 2)))[:14+20+11], reason: TruncatedL4, fields: v4Fields(0, pSC)},
		{name: "ipv4 icmp cut", frame: e4(ip4(0, pI4, icmp4(1, 2)))[:14+20+7], reason: TruncatedL4, fields: v4Fields(0, pI4)},
		{name: "short ipv6", frame: e6(pTC)[:14+39], reason: TruncatedIPv6, fields: ethFields(v6)},
		{name: "ipv6 version 4", frame: cat(eth(macB, macA, v6), []byte{0x45}, e6(pTC)[15:]), reason: BadIPv6, fields: ethFields(v6)},
		{name: "ipv6 ext cut", frame: e6(ipProtoHopOpts, ext(pTC, 16)[:15]), reason: TruncatedIPv6Ext, fields: v6Fields(0xb9, 0xabcde, ipProtoHopOpts, IEHHop)},
		{name: "ipv6 ext cut by payload length", frame: cat(eth(macB, macA, v6), ipv6(0xb9, 0xabcde, ipProtoRouting, s6, d6, ext(pTC, 8)[:1]), make([]byte, 20)),
			reason: TruncatedIPv6Ext, fields: v6Fields(0xb9, 0xabcde, ipProtoRouting, 0)},
		{name: "ipv6 frag cut", frame: e6(ipProtoFragment, fragHdr(pTC, 1, false)[:7]), reason: TruncatedIPv6Ext, fields: v6Fields(0xb9, 0xabcde, ipProtoFragment, IEHFrag)},
		{name: "ipv6 ah cut", frame: e6(ipProtoAH, ah(pTC, 12)[:11]), reason: TruncatedIPv6Ext, fields: v6Fields(0xb9, 0xabcde, ipProtoAH, IEHAuth)},
		{name: "ipv6 tcp cut", frame: e6(pTC, tcp(1, 2, 0)[:19]), reason: TruncatedL4, fields: v6Fields(0xb9, 0xabcde, pTC, 0)},
		{name: "icmpv6 cut", frame: e6(pI6, []byte{128, 0, 0}), reason: TruncatedL4, fields: v6Fields(0xb9, 0xabcde, pI6, 0)},
		{name: "nd target cut", frame: e6(pI6, icmp6(135, 0, nd("fe80::1234")[:19])), reason: TruncatedND,
			fields: with(v6Fields(0xb9, 0xabcde, pI6, 0), fv{flow.FieldICMPv6Type, 135}, fv{flow.FieldICMPv6Code, 0})},
		{name: "nd option zero length", frame: e6(pI6, icmp6(135, 0, nd("fe80::1234", []byte{1, 0, 0, 0, 0, 0, 0, 0}))), reason: BadND, fields: ns(135)},
		{name: "nd option overruns", frame: e6(pI6, icmp6(136, 0, nd("fe80::1234", llOpt(2, macC)[:7]))), reason: TruncatedND, fields: ns(136)},
		{name: "nd option one byte", frame: e6(pI6, icmp6(136, 0, nd("fe80::1234", []byte{2}))), reason: TruncatedND, fields: ns(136)},
	}
}

func TestParse(t *testing.T) {
	covered := map[flow.Field]bool{}
	reasons := map[Reason]bool{}
	for _, c := range parseCases() {
		t.Run(c.name, func(t *testing.T) {
			const port = 0x10002
			want := keyOf(t, port, c.fields)
			var k flow.Key
			for i := range k {
				k[i] = 0xdeadbeef // Parse must clear the key
			}
			r := Parse(&k, c.frame, port)
			if r != c.reason {
				t.Errorf("reason %v, want %v", r, c.reason)
			}
			if k != want {
				t.Errorf("key\n got %v\nwant %v", k.String(), want.String())
				for _, f := range flow.Fields() {
					if g, w := k.Get(f), want.Get(f); string(g) != string(w) {
						t.Errorf("  %v = %x, want %x", f, g, w)
					}
				}
			}
		})
		reasons[c.reason] = true
		for _, x := range c.fields {
			covered[x.f] = true
		}
	}
	for _, f := range flow.Fields() {
		if !covered[f] && f != flow.FieldMetadata && f != flow.FieldTunnelID && f != flow.FieldInPort && f != flow.FieldInPhyPort {
			t.Errorf("no case expects field %v", f)
		}
	}
	for r := Reason(0); r < NumReasons; r++ {
		if !reasons[r] {
			t.Errorf("no case expects reason %v", r)
		}
	}
}

func TestReasonString(t *testing.T) {
	for r := Reason(0); r < NumReasons; r++ {
		if r.String() == "" || r.String() == "reason"+string(rune('0'+r)) {
			t.Errorf("reason %d has no name", r)
		}
	}
	if got := Reason(200).String(); got != "reason200" {
		t.Errorf("Reason(200) = %q", got)
	}
	var err error = TruncatedL4
	if err.Error() != "packet: truncated transport header" {
		t.Errorf("Error() = %q", err.Error())
	}
}

// TestParseNoAllocs requires Parse to allocate nothing, on every case.
func TestParseNoAllocs(t *testing.T) {
	cases := parseCases()
	var k flow.Key
	allocs := testing.AllocsPerRun(100, func() {
		for i := range cases {
			Parse(&k, cases[i].frame, 1)
		}
	})
	if allocs != 0 {
		t.Fatalf("Parse allocates %v times per run of %d frames", allocs, len(cases))
	}
}

// TestParseTruncations parses every prefix of every test frame, capped so
// that a read past the prefix panics: Parse must never panic, must return
// a known reason, and must call every prefix shorter than an Ethernet
// header truncated.
func TestParseTruncations(t *testing.T) {
	var k flow.Key
	for _, c := range parseCases() {
		for n := 0; n <= len(c.frame); n++ {
			r := Parse(&k, c.frame[:n:n], 7)
			if r >= NumReasons || (n < ethLen && r != TruncatedEthernet) {
				t.Fatalf("%s[:%d]: reason %v", c.name, n, r)
			}
		}
	}
}
