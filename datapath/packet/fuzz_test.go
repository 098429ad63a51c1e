package packet

import (
	"bytes"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/gswitch/gswitch/tables/flow"
)

// refFields derives, from gopacket's decoding of 'frame', the values of the
// key fields both gopacket and Parse understand. A layer counts only when
// gopacket decoded it without error. Fields are returned as big-endian
// bytes of the field's width (as Key.Get returns them).
func refFields(frame []byte) map[flow.Field][]byte {
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{NoCopy: true})
	ls := trustedLayers(pkt.Layers())
	out := map[flow.Field][]byte{}
	put := func(f flow.Field, v uint64) {
		var k flow.Key
		if err := k.SetUint(f, v); err != nil {
			panic(err)
		}
		out[f] = k.Get(f)
	}
	putB := func(f flow.Field, b []byte) { out[f] = append([]byte(nil), b...) }
	if len(ls) == 0 {
		return out
	}
	e, ok := ls[0].(*layers.Ethernet)
	if !ok {
		return out
	}
	putB(flow.FieldEthDst, e.DstMAC)
	putB(flow.FieldEthSrc, e.SrcMAC)
	typ := e.EthernetType
	i := 1
	for ; i < len(ls); i++ {
		q, ok := ls[i].(*layers.Dot1Q)
		if !ok {
			break
		}
		if i == 1 {
			put(flow.FieldVlanVID, flow.VIDPresent|uint64(q.VLANIdentifier))
			put(flow.FieldVlanPCP, uint64(q.Priority))
		}
		typ = q.Type
	}
	if (typ == layers.EthernetTypeDot1Q || typ == layers.EthernetTypeQinQ) && i == len(ls) {
		return out // a tag gopacket could not decode: the type after it is unknown
	}
	if typ < ethTypeMinType {
		put(flow.FieldEthType, ethTypeNone)
		return out
	}
	put(flow.FieldEthType, uint64(typ))
	if i == len(ls) {
		return out
	}
	switch l := ls[i].(type) {
	case *layers.ARP:
		refARP(l, put, putB)
	case *layers.MPLS:
		put(flow.FieldMPLSLabel, uint64(l.Label))
		put(flow.FieldMPLSTC, uint64(l.TrafficClass))
		put(flow.FieldMPLSBOS, b2u(l.StackBottom))
	case *layers.IPv4:
		refIPv4(l, ls[i+1:], put, putB)
	case *layers.IPv6:
		refIPv6(l, ls[i+1:], put, putB)
	}
	return out
}

// trustedLayers returns the layers gopacket decoded without error. A
// DecodeFailure is about the layer gopacket tried next, which most decoders
// add only on success; the IP, TCP, UDP, SCTP and IPv6 option-header
// decoders add their layer first and then report its error, so such a layer
// just before a failure is not trusted either (IPv6 adds its hop-by-hop
// layer after itself: both go).
func trustedLayers(ls []gopacket.Layer) []gopacket.Layer {
	for i, l := range ls {
		if _, bad := l.(*gopacket.DecodeFailure); !bad {
			continue
		}
		n := i
		for n > 0 && addsBeforeError(ls[n-1]) {
			n--
			if _, v6 := ls[n].(*layers.IPv6); v6 {
				break
			}
			if _, hbh := ls[n].(*layers.IPv6HopByHop); !hbh {
				break
			}
		}
		return ls[:n]
	}
	return ls
}

func addsBeforeError(l gopacket.Layer) bool {
	switch l.(type) {
	case *layers.IPv4, *layers.IPv6, *layers.IPv6HopByHop, *layers.IPv6Destination, *layers.TCP, *layers.UDP, *layers.SCTP:
		return true
	}
	return false
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

func refARP(a *layers.ARP, put func(flow.Field, uint64), putB func(flow.Field, []byte)) {
	put(flow.FieldARPOp, uint64(a.Operation))
	// gopacket keeps the hardware type in a uint8 LinkType: read the 16 bits.
	if a.Contents[0] != 0 || a.AddrType != layers.LinkTypeEthernet || a.Protocol != layers.EthernetTypeIPv4 || a.HwAddressSize != 6 || a.ProtAddressSize != 4 {
		return
	}
	putB(flow.FieldARPSHA, a.SourceHwAddress)
	putB(flow.FieldARPSPA, a.SourceProtAddress)
	putB(flow.FieldARPTHA, a.DstHwAddress)
	putB(flow.FieldARPTPA, a.DstProtAddress)
}

func refIPv4(ip *layers.IPv4, next []gopacket.Layer, put func(flow.Field, uint64), putB func(flow.Field, []byte)) {
	put(flow.FieldIPDSCP, uint64(ip.TOS>>2))
	put(flow.FieldIPECN, uint64(ip.TOS&3))
	put(flow.FieldIPProto, uint64(ip.Protocol))
	putB(flow.FieldIPv4Src, ip.SrcIP.To4())
	putB(flow.FieldIPv4Dst, ip.DstIP.To4())
	if len(next) == 0 {
		return
	}
	if ic, ok := next[0].(*layers.ICMPv4); ok && ip.Protocol == layers.IPProtocolICMPv4 {
		put(flow.FieldICMPv4Type, uint64(ic.TypeCode.Type()))
		put(flow.FieldICMPv4Code, uint64(ic.TypeCode.Code()))
		return
	}
	refL4(next[0], put)
}

// refL4 writes the fields of a TCP, UDP or SCTP layer.
func refL4(l gopacket.Layer, put func(flow.Field, uint64)) {
	switch l := l.(type) {
	case *layers.TCP:
		put(flow.FieldTCPSrc, uint64(l.SrcPort))
		put(flow.FieldTCPDst, uint64(l.DstPort))
		var f uint64
		for i, b := range []bool{l.FIN, l.SYN, l.RST, l.PSH, l.ACK, l.URG, l.ECE, l.CWR, l.NS} {
			f |= b2u(b) << i
		}
		put(flow.FieldTCPFlags, f|uint64(l.Contents[12]&0x0e)<<8) // and the three reserved bits
	case *layers.UDP:
		put(flow.FieldUDPSrc, uint64(l.SrcPort))
		put(flow.FieldUDPDst, uint64(l.DstPort))
	case *layers.SCTP:
		put(flow.FieldSCTPSrc, uint64(l.SrcPort))
		put(flow.FieldSCTPDst, uint64(l.DstPort))
	}
}

func refIPv6(ip *layers.IPv6, next []gopacket.Layer, put func(flow.Field, uint64), putB func(flow.Field, []byte)) {
	put(flow.FieldIPDSCP, uint64(ip.TrafficClass>>2))
	put(flow.FieldIPECN, uint64(ip.TrafficClass&3))
	put(flow.FieldIPv6FLabel, uint64(ip.FlowLabel))
	putB(flow.FieldIPv6Src, ip.SrcIP)
	putB(flow.FieldIPv6Dst, ip.DstIP)
	// gopacket stops its extension header walk at a fragment header and at
	// unknown headers; compare ip_proto and below only where it reached a
	// transport layer.
	var ext uint64
	for j, l := range next {
		switch l := l.(type) {
		case *layers.IPv6HopByHop:
			ext |= IEHHop
		case *layers.IPv6Routing:
			ext |= IEHRouter
		case *layers.IPv6Destination:
			ext |= IEHDest
		case *layers.TCP, *layers.UDP, *layers.SCTP, *layers.ICMPv6:
			var proto uint64
			switch l.(type) {
			case *layers.TCP:
				proto = flow.IPProtoTCP
			case *layers.UDP:
				proto = flow.IPProtoUDP
			case *layers.SCTP:
				proto = flow.IPProtoSCTP
			default:
				proto = flow.IPProtoICMPv6
			}
			put(flow.FieldIPProto, proto)
			put(flow.FieldIPv6ExtHdr, ext)
			refL4(l, put)
			if ic, ok := l.(*layers.ICMPv6); ok {
				refICMPv6(ic, next[j+1:], put, putB)
			}
			return
		default:
			return
		}
	}
}

func refICMPv6(ic *layers.ICMPv6, next []gopacket.Layer, put func(flow.Field, uint64), putB func(flow.Field, []byte)) {
	put(flow.FieldICMPv6Type, uint64(ic.TypeCode.Type()))
	put(flow.FieldICMPv6Code, uint64(ic.TypeCode.Code()))
	if ic.TypeCode.Code() != 0 || len(next) == 0 {
		return
	}
	var (
		target net.IP
		opts   layers.ICMPv6Options
		want   layers.ICMPv6Opt
		field  flow.Field
	)
	switch l := next[0].(type) {
	case *layers.ICMPv6NeighborSolicitation:
		target, opts, want, field = l.TargetAddress, l.Options, layers.ICMPv6OptSourceAddress, flow.FieldIPv6NDSLL
	case *layers.ICMPv6NeighborAdvertisement:
		target, opts, want, field = l.TargetAddress, l.Options, layers.ICMPv6OptTargetAddress, flow.FieldIPv6NDTLL
	default:
		return
	}
	putB(flow.FieldIPv6NDTarget, target)
	ll := make([]byte, 6)
	for _, o := range opts {
		if o.Type == want && len(o.Data) == 6 {
			copy(ll, o.Data)
			break
		}
	}
	putB(field, ll)
}

// FuzzParse parses arbitrary frames: Parse must not panic, must return a
// known reason, must agree with ParseTagged on the frame with a tag put
// back, and on success must agree with gopacket on every field both
// decode. Where gopacket fails on a header Parse accepts, that header's
// fields are not compared (gopacket is stricter in places, e.g. IPv4
// options).
func FuzzParse(f *testing.F) {
	for _, c := range parseCases() {
		f.Add(c.frame)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		var k flow.Key
		r := Parse(&k, frame, 3)
		if r >= NumReasons {
			t.Fatalf("reason %d out of range", r)
		}
		if k[wInPort] != 3 || k[wInPhyPort] != 3 {
			t.Fatalf("in_port %d, in_phy_port %d", k[wInPort], k[wInPhyPort])
		}
		if len(frame) >= ethLen {
			// ParseTagged must agree with Parse of the frame with its tag
			// put back.
			tci := uint16(len(frame)) * 0x9e37
			var want, got flow.Key
			wr := Parse(&want, cat(frame[:12], u16(ethTypeVLAN), u16(tci), frame[12:]), 3)
			if gr := ParseTagged(&got, frame, 3, tci); gr != wr || got != want {
				t.Fatalf("ParseTagged = %v %v, Parse with the tag = %v %v", gr, got.String(), wr, want.String())
			}
		}
		if r != OK {
			return
		}
		checkAgainstGopacket(t, frame, &k)
	})
}

func checkAgainstGopacket(t *testing.T, frame []byte, k *flow.Key) {
	t.Helper()
	ref := refFields(frame)
	if _, ok := ref[flow.FieldEthDst]; !ok {
		t.Fatalf("Parse accepted a frame gopacket finds no Ethernet header in: %x", frame)
	}
	for f, want := range ref {
		got := k.Get(f)
		if f == flow.FieldIPv6ExtHdr {
			// gopacket knows which headers are present, not whether they
			// repeat or are out of order.
			got[0] &^= IEHUnseq >> 8
			got[1] &^= IEHUnrep
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%v = %x, gopacket says %x (frame %x)", f, got, want, frame)
		}
	}
}

// TestParseAgainstGopacket runs the fuzz test's comparison on every table
// case that parses, and requires that the comparison covers every field the
// cases exercise except PBB and the OFPIEH_UNREP/UNSEQ cases (which gopacket
// does not decode).
func TestParseAgainstGopacket(t *testing.T) {
	compared := map[flow.Field]bool{}
	for _, c := range parseCases() {
		if c.reason != OK {
			continue
		}
		var k flow.Key
		Parse(&k, c.frame, 3)
		checkAgainstGopacket(t, c.frame, &k)
		for f := range refFields(c.frame) {
			compared[f] = true
		}
	}
	for _, f := range flow.Fields() {
		switch f {
		case flow.FieldInPort, flow.FieldInPhyPort, flow.FieldMetadata, flow.FieldTunnelID, flow.FieldPBBISID:
			continue
		}
		if !compared[f] {
			t.Errorf("field %v never compared with gopacket", f)
		}
	}
}
