package filter

import (
	"errors"
	"fmt"
)

// Link types (the LINKTYPE_ numbers of capture files).
const (
	LinkNull      uint32 = 0
	LinkEthernet  uint32 = 1
	LinkRaw       uint32 = 101
	LinkLoop      uint32 = 108
	LinkLinuxSLL  uint32 = 113
	LinkIPv4      uint32 = 228
	LinkIPv6      uint32 = 229
	LinkLinuxSLL2 uint32 = 276
)

func linkName(l uint32) string {
	switch l {
	case LinkNull:
		return "BSD loopback"
	case LinkEthernet:
		return "Ethernet"
	case LinkRaw:
		return "Raw IP"
	case LinkLoop:
		return "OpenBSD loopback"
	case LinkLinuxSLL:
		return "Linux cooked v1"
	case LinkLinuxSLL2:
		return "Linux cooked v2"
	case LinkIPv4:
		return "Raw IPv4"
	case LinkIPv6:
		return "Raw IPv6"
	}
	return fmt.Sprintf("link type %d", l)
}

// Protocol numbers and ether types the generator uses.
const (
	etherIP     = 0x0800
	etherARP    = 0x0806
	etherRARP   = 0x8035
	etherIPv6   = 0x86dd
	ether8021Q  = 0x8100
	ether8021AD = 0x88a8
	etherQinQ   = 0x9100
	etherMPLS   = 0x8847
	etherMTU    = 1500

	ipICMP  = 1
	ipIGMP  = 2
	ipTCP   = 6
	ipIGRP  = 9
	ipUDP   = 17
	ipFrag6 = 44
	ipESP   = 50
	ipAH    = 51
	ipICMP6 = 58
	ipPIM   = 103
	ipVRRP  = 112
	ipSCTP  = 132

	protoUndef = -1
)

// Qualifier values (libpcap's Q_ constants, in our own numbering).
type qproto int

const (
	qDefault qproto = iota
	qLink
	qIP
	qARP
	qRARP
	qSCTP
	qTCP
	qUDP
	qICMP
	qIGMP
	qIGRP
	qPIM
	qVRRP
	qCARP
	qIPv6
	qICMPv6
	qAH
	qESP
	qOther // a protocol keyword gswitch does not support (atalk, iso, ...)
)

var qprotoNames = map[qproto]string{qLink: "link", qIP: "ip", qARP: "arp", qRARP: "rarp", qSCTP: "sctp",
	qTCP: "tcp", qUDP: "udp", qICMP: "icmp", qIGMP: "igmp", qIGRP: "igrp", qPIM: "pim", qVRRP: "vrrp",
	qCARP: "carp", qIPv6: "ip6", qICMPv6: "icmp6", qAH: "ah", qESP: "esp"}

type qdir int

const (
	dDefault qdir = iota
	dSrc
	dDst
	dOr
	dAnd
	dOther // addr1..4, ra, ta
)

type qaddr int

const (
	aDefault qaddr = iota
	aHost
	aNet
	aPort
	aPortRange
	aProto
	aProtoChain
	aGateway
	aUndef // qerr: no qualifier may be inherited here
)

type qual struct {
	proto qproto
	dir   qdir
	addr  qaddr
	// protoName is the keyword of an unsupported protocol qualifier.
	protoName string
}

var qerr = qual{addr: aUndef, proto: -1}

// genError is a compile error; the parser adds the position.
type genError struct{ msg string }

func (e *genError) Error() string { return e.msg }

func gerr(format string, a ...any) { panic(&genError{fmt.Sprintf(format, a...)}) }

// gen holds libpcap's compiler state that matters here: the link type and
// the offsets that vlan and mpls move for everything parsed after them.
type gen struct {
	link       uint32
	bigEndian  bool
	offLinkTyp int // -1: the link type has no type field
	offLinkPL  uint32
	offNL      uint32
	vlanDepth  int
	labelDepth int
	names      *Names
}

func newGen(link uint32, bigEndian bool, names *Names) (*gen, error) {
	g := &gen{link: link, bigEndian: bigEndian, names: names}
	switch link {
	case LinkEthernet:
		g.offLinkTyp, g.offLinkPL = 12, 14
	case LinkNull, LinkLoop:
		g.offLinkTyp, g.offLinkPL = 0, 4
	case LinkRaw, LinkIPv4, LinkIPv6:
		g.offLinkTyp, g.offLinkPL = -1, 0
	case LinkLinuxSLL:
		g.offLinkTyp, g.offLinkPL = 14, 16
	case LinkLinuxSLL2:
		g.offLinkTyp, g.offLinkPL = 0, 20
	default:
		return nil, fmt.Errorf("link type %d not supported", link)
	}
	return g, nil
}

func (g *gen) abs(off uint32, size uint8) Load { return Load{Off: off, Size: size} }

// pl is a load relative to the network-layer header (libpcap's OR_LINKPL).
func (g *gen) pl(off uint32, size uint8) Load {
	return Load{Off: g.offLinkPL + g.offNL + off, Size: size}
}

func (g *gen) tranIPv4(off uint32, size uint8) Load {
	return Load{Base: BaseIPv4, NetOff: g.offLinkPL + g.offNL, Off: off, Size: size}
}

func (g *gen) tranIPv6(off uint32, size uint8) Load { return g.pl(40+off, size) }

func eq(l Load, k uint32) *bnode { return cmp(l, 0xffffffff, RelEQ, k) }

// meq is gen_mcmp: (load & mask) == k. libpcap's peephole pass turns
// "and #mask; jeq #0" into "jset #mask" with the branches swapped, which
// changes what its optimizer can deduce from it; so does this form.
func meq(l Load, k, mask uint32) *bnode {
	if k == 0 && mask != 0xffffffff && mask != 0 {
		return not(jset(l, mask))
	}
	return cmp(l, mask, RelEQ, k)
}
func jset(l Load, k uint32) *bnode { return cmp(l, 0xffffffff, RelSet, k) }
func mcmpOrTrue(l Load, k, m uint32) *bnode {
	if m == 0 && k == 0 { // (A & 0) == 0: libpcap's optimizer removes the load
		return constNode(true)
	}
	return meq(l, k, m)
}

// linktype is libpcap's gen_linktype: the test that the link layer carries
// protocol p (an ether type).
func (g *gen) linktype(p uint32) *bnode {
	if g.labelDepth > 0 {
		return g.mplsLinktype(p)
	}
	switch g.link {
	case LinkEthernet:
		return g.etherLinktype(p)
	case LinkLinuxSLL:
		if p <= etherMTU { // 802.2 frames: LINUX_SLL_P_802_2 and the DSAP
			return and(eq(g.abs(uint32(g.offLinkTyp), 2), 0x0004), eq(g.abs(g.offLinkPL, 1), p))
		}
		return eq(g.abs(uint32(g.offLinkTyp), 2), p)
	case LinkLinuxSLL2:
		return eq(g.abs(uint32(g.offLinkTyp), 2), p)
	case LinkRaw:
		switch p {
		case etherIP:
			return meq(g.abs(0, 1), 0x40, 0xf0)
		case etherIPv6:
			return meq(g.abs(0, 1), 0x60, 0xf0)
		}
		return constNode(false)
	case LinkIPv4:
		return constNode(p == etherIP)
	case LinkIPv6:
		return constNode(p == etherIPv6)
	case LinkNull, LinkLoop:
		switch p {
		case etherIP:
			return g.loopback(2)
		case etherIPv6:
			return or(or(g.loopback(24), g.loopback(28)), g.loopback(30))
		}
		return constNode(false)
	}
	gerr("link-layer type filtering not implemented for %s", linkName(g.link))
	return nil
}

func (g *gen) loopback(af uint32) *bnode {
	if g.link == LinkNull && !g.bigEndian {
		af = af>>24 | af>>8&0xff00 | af<<8&0xff0000 | af<<24
	}
	return eq(g.abs(0, 4), af)
}

func (g *gen) etherLinktype(p uint32) *bnode {
	lt := uint32(g.offLinkTyp)
	switch p {
	case 0x06, 0xfe, 0xf0: // LLCSAP_IP, ISONS, NETBEUI: 802.2 DSAP and SSAP
		return and(not(cmp(g.abs(lt, 2), 0xffffffff, RelGT, etherMTU)), eq(g.abs(g.offLinkPL, 2), p<<8|p))
	case 0xe0, 0x809b, 0x80f3: // IPX, AppleTalk, AARP: several encapsulations
		gerr("ether proto %#x not supported", p)
	}
	if p <= etherMTU {
		return and(not(cmp(g.abs(lt, 2), 0xffffffff, RelGT, etherMTU)), eq(g.abs(lt+2, 1), p))
	}
	return eq(g.abs(lt, 2), p)
}

func (g *gen) mplsLinktype(p uint32) *bnode {
	var v uint32
	switch p {
	case etherIP:
		v = 0x40
	case etherIPv6:
		v = 0x60
	default:
		gerr("unsupported protocol over mpls")
	}
	return and(meq(g.pl(^uint32(1), 1), 0x01, 0x01), meq(g.pl(0, 1), v, 0xf0))
}

// protoAbbrev is gen_proto_abbrev: a bare protocol keyword.
func (g *gen) protoAbbrev(q qproto) *bnode {
	switch q {
	case qSCTP:
		return g.proto(ipSCTP, qDefault, dDefault)
	case qTCP:
		return g.proto(ipTCP, qDefault, dDefault)
	case qUDP:
		return g.proto(ipUDP, qDefault, dDefault)
	case qICMP:
		return g.proto(ipICMP, qIP, dDefault)
	case qIGMP:
		return g.proto(ipIGMP, qIP, dDefault)
	case qIGRP:
		return g.proto(ipIGRP, qIP, dDefault)
	case qPIM:
		return g.proto(ipPIM, qDefault, dDefault)
	case qVRRP, qCARP:
		return g.proto(ipVRRP, qIP, dDefault)
	case qIP:
		return g.linktype(etherIP)
	case qARP:
		return g.linktype(etherARP)
	case qRARP:
		return g.linktype(etherRARP)
	case qIPv6:
		return g.linktype(etherIPv6)
	case qICMPv6:
		return g.proto(ipICMP6, qIPv6, dDefault)
	case qAH:
		return g.proto(ipAH, qDefault, dDefault)
	case qESP:
		return g.proto(ipESP, qDefault, dDefault)
	case qLink:
		gerr("link layer applied in wrong context")
	}
	gerr("protocol not supported by gswitch's filters")
	return nil
}

// proto is gen_proto: "PROTO proto N".
func (g *gen) proto(v uint32, q qproto, dir qdir) *bnode {
	if dir != dDefault {
		gerr("direction applied to 'proto'")
	}
	switch q {
	case qDefault:
		return or(g.proto(v, qIP, dir), g.proto(v, qIPv6, dir))
	case qLink:
		return g.linktype(v)
	case qIP:
		return and(g.linktype(etherIP), eq(g.pl(9, 1), v))
	case qIPv6:
		b1 := and(eq(g.pl(6, 1), ipFrag6), eq(g.pl(40, 1), v))
		return and(g.linktype(etherIPv6), or(eq(g.pl(6, 1), v), b1))
	case qARP:
		gerr("arp does not encapsulate another protocol")
	case qRARP:
		gerr("rarp does not encapsulate another protocol")
	case qSCTP, qTCP, qUDP, qICMP, qIGMP, qIGRP, qICMPv6, qPIM, qVRRP, qCARP, qAH, qESP:
		gerr("'%s proto' is bogus", qprotoNames[q])
	}
	gerr("'proto' qualifier not supported with this protocol")
	return nil
}

// ipfrag: not a fragment other than the first.
func (g *gen) ipfrag() *bnode { return not(jset(g.pl(6, 2), 0x1fff)) }

func dirCombine(dir qdir, src, dst func() *bnode, what string) *bnode {
	switch dir {
	case dSrc:
		return src()
	case dDst:
		return dst()
	case dAnd:
		return and(src(), dst())
	case dDefault, dOr:
		return or(src(), dst())
	}
	gerr("this direction qualifier is not valid for %s", what)
	return nil
}

func (g *gen) portop(port uint32, proto uint32, dir qdir) *bnode {
	b0 := and(eq(g.pl(9, 1), proto), g.ipfrag())
	b1 := dirCombine(dir, func() *bnode { return eq(g.tranIPv4(0, 2), port) },
		func() *bnode { return eq(g.tranIPv4(2, 2), port) }, "ports")
	return and(b0, b1)
}

func (g *gen) portop6(port uint32, proto uint32, dir qdir) *bnode {
	b0 := eq(g.pl(6, 1), proto)
	b1 := dirCombine(dir, func() *bnode { return eq(g.tranIPv6(0, 2), port) },
		func() *bnode { return eq(g.tranIPv6(2, 2), port) }, "ports")
	return and(b0, b1)
}

func (g *gen) rangeatom(l Load, v1, v2 uint32) *bnode {
	if v1 > v2 {
		v1, v2 = v2, v1
	}
	return and(cmp(l, 0xffffffff, RelGE, v1), not(cmp(l, 0xffffffff, RelGT, v2)))
}

func (g *gen) portrangeop(p1, p2, proto uint32, dir qdir) *bnode {
	b0 := and(eq(g.pl(9, 1), proto), g.ipfrag())
	b1 := dirCombine(dir, func() *bnode { return g.rangeatom(g.tranIPv4(0, 2), p1, p2) },
		func() *bnode { return g.rangeatom(g.tranIPv4(2, 2), p1, p2) }, "port ranges")
	return and(b0, b1)
}

func (g *gen) portrangeop6(p1, p2, proto uint32, dir qdir) *bnode {
	b0 := eq(g.pl(6, 1), proto)
	b1 := dirCombine(dir, func() *bnode { return g.rangeatom(g.tranIPv6(0, 2), p1, p2) },
		func() *bnode { return g.rangeatom(g.tranIPv6(2, 2), p1, p2) }, "port ranges")
	return and(b0, b1)
}

// ports builds "[tcp|udp|sctp] [src|dst] port[range] ..." for both IP
// versions (the IPv6 test first, as libpcap orders them).
func (g *gen) ports(p1, p2 uint32, ipproto int, dir qdir, isRange bool) *bnode {
	one := func(v6 bool, proto uint32) *bnode {
		switch {
		case isRange && v6:
			return g.portrangeop6(p1, p2, proto, dir)
		case isRange:
			return g.portrangeop(p1, p2, proto, dir)
		case v6:
			return g.portop6(p1, proto, dir)
		}
		return g.portop(p1, proto, dir)
	}
	fam := func(v6 bool) *bnode {
		var b *bnode
		if ipproto == protoUndef {
			b = or(one(v6, ipSCTP), or(one(v6, ipTCP), one(v6, ipUDP)))
		} else {
			b = one(v6, uint32(ipproto))
		}
		lt := uint32(etherIP)
		if v6 {
			lt = etherIPv6
		}
		return and(g.linktype(lt), b)
	}
	return or(fam(true), fam(false))
}

func portProto(q qproto, what string) int {
	switch q {
	case qDefault:
		return protoUndef
	case qTCP:
		return ipTCP
	case qUDP:
		return ipUDP
	case qSCTP:
		return ipSCTP
	}
	gerr("illegal qualifier of '%s'", what)
	return 0
}

// host is gen_host for IPv4 addresses and networks.
func (g *gen) host(addr, mask uint32, q qproto, dir qdir, typ string) *bnode {
	switch q {
	case qDefault:
		b0 := g.host(addr, mask, qIP, dir, typ)
		if g.labelDepth == 0 {
			b0 = or(or(b0, g.host(addr, mask, qARP, dir, typ)), g.host(addr, mask, qRARP, dir, typ))
		}
		return b0
	case qIP:
		return g.hostop(addr, mask, dir, etherIP, 12, 16)
	case qARP:
		return g.hostop(addr, mask, dir, etherARP, 14, 24)
	case qRARP:
		return g.hostop(addr, mask, dir, etherRARP, 14, 24)
	case qLink:
		gerr("link-layer modifier applied to %s", typ)
	case qIPv6:
		gerr("'ip6' modifier applied to ip %s", typ)
	}
	if n, ok := qprotoNames[q]; ok {
		gerr("'%s' modifier applied to %s", n, typ)
	}
	gerr("modifier not supported with %s", typ)
	return nil
}

func (g *gen) hostop(addr, mask uint32, dir qdir, lt uint32, src, dst uint32) *bnode {
	one := func(off uint32) func() *bnode {
		return func() *bnode { return and(g.linktype(lt), mcmpOrTrue(g.pl(off, 4), addr, mask)) }
	}
	return dirCombine(dir, one(src), one(dst), "addresses other than 802.11 MAC addresses")
}

func (g *gen) host6(addr, mask [16]byte, q qproto, dir qdir, typ string) *bnode {
	switch q {
	case qDefault, qIPv6:
		one := func(off uint32) func() *bnode {
			return func() *bnode {
				var b *bnode
				for i := 3; i >= 0; i-- {
					a := uint32(addr[4*i])<<24 | uint32(addr[4*i+1])<<16 | uint32(addr[4*i+2])<<8 | uint32(addr[4*i+3])
					m := uint32(mask[4*i])<<24 | uint32(mask[4*i+1])<<16 | uint32(mask[4*i+2])<<8 | uint32(mask[4*i+3])
					c := mcmpOrTrue(g.pl(off+uint32(4*i), 4), a, m)
					if b == nil {
						b = c
					} else {
						b = and(c, b)
					}
				}
				return and(g.linktype(etherIPv6), b)
			}
		}
		return dirCombine(dir, one(8), one(24), "addresses other than 802.11 MAC addresses")
	case qIP:
		gerr("'ip' modifier applied to ip6 %s", typ)
	case qLink:
		gerr("link-layer modifier applied to ip6 %s", typ)
	}
	if n, ok := qprotoNames[q]; ok {
		gerr("'%s' modifier applied to ip6 %s", n, typ)
	}
	gerr("modifier not supported with ip6 %s", typ)
	return nil
}

func (g *gen) ehost(mac [6]byte, dir qdir) *bnode {
	if g.link != LinkEthernet {
		gerr("ethernet addresses supported only on ethernet/FDDI/token ring/802.11/ATM LANE/Fibre Channel")
	}
	one := func(off uint32) func() *bnode {
		return func() *bnode {
			w := uint32(mac[2])<<24 | uint32(mac[3])<<16 | uint32(mac[4])<<8 | uint32(mac[5])
			return and(eq(g.abs(off+2, 4), w), eq(g.abs(off, 2), uint32(mac[0])<<8|uint32(mac[1])))
		}
	}
	return dirCombine(dir, one(6), one(0), "ethernet addresses")
}

func (g *gen) broadcast(q qproto) *bnode {
	switch q {
	case qDefault, qLink:
		if g.link != LinkEthernet {
			gerr("not a broadcast link")
		}
		return g.ehost([6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, dDst)
	case qIP:
		// tcpdump reading a file passes netmask 0: the host part is the
		// whole address.
		b1 := meq(g.pl(16, 4), 0, 0xffffffff)
		b2 := meq(g.pl(16, 4), 0xffffffff, 0xffffffff)
		return and(g.linktype(etherIP), or(b1, b2))
	}
	gerr("only link-layer/IP broadcast filters supported")
	return nil
}

func (g *gen) multicast(q qproto) *bnode {
	switch q {
	case qDefault, qLink:
		if g.link != LinkEthernet {
			gerr("link-layer multicast filters supported only on ethernet/FDDI/token ring/ARCNET/802.11/ATM LANE/Fibre Channel")
		}
		return jset(g.abs(0, 1), 1)
	case qIP:
		return and(g.linktype(etherIP), cmp(g.pl(16, 1), 0xffffffff, RelGE, 224))
	case qIPv6:
		return and(g.linktype(etherIPv6), eq(g.pl(24, 1), 255))
	}
	gerr("link-layer multicast filters supported only on ethernet/FDDI/token ring/ARCNET/802.11/ATM LANE/Fibre Channel")
	return nil
}

func lenCmp(rel Rel, n uint32) *bnode { return atom(&Criterion{Len: true, Rel: rel, K: n}) }

func (g *gen) vlan(vid uint32, has bool) *bnode {
	if g.labelDepth > 0 {
		gerr("no VLAN match after MPLS")
	}
	if g.link != LinkEthernet {
		gerr("no VLAN support for %s", linkName(g.link))
	}
	b0 := or(or(g.linktype(ether8021Q), g.linktype(ether8021AD)), g.linktype(etherQinQ))
	if has {
		if vid > 0x0fff {
			gerr("VLAN tag %d greater than maximum %d", vid, 0x0fff)
		}
		b0 = and(b0, meq(g.pl(0, 2), vid, 0x0fff))
	}
	g.offLinkPL += 4
	g.offLinkTyp += 4
	g.vlanDepth++
	return b0
}

func (g *gen) mpls(label uint32, has bool) *bnode {
	var b0 *bnode
	if g.labelDepth > 0 {
		b0 = meq(g.pl(^uint32(3)+2, 1), 0, 0x01) // bottom-of-stack bit of the previous label clear
	} else {
		if g.link != LinkEthernet {
			gerr("no MPLS support for %s", linkName(g.link))
		}
		b0 = g.linktype(etherMPLS)
	}
	if has {
		if label > 0xfffff {
			gerr("MPLS label %d greater than maximum %d", label, 0xfffff)
		}
		b0 = and(b0, meq(g.pl(0, 4), label<<12, 0xfffff000))
	}
	g.offNL += 4
	g.labelDepth++
	return b0
}

// load is gen_load: "proto[index:size]".
func (g *gen) load(q qproto, idx *arith, size uint32) *arith {
	if size != 1 && size != 2 && size != 4 {
		gerr("data size must be 1, 2, or 4")
	}
	sz := uint8(size)
	e := &arith{op: aLoad, a: idx}
	if idx.op == aConst {
		e.a = nil
	}
	cidx := uint32(0)
	if e.a == nil {
		cidx = idx.k
	}
	switch q {
	case qLink:
		e.load = Load{Off: cidx, Size: sz}
		e.prot = idx.prot
	case qIP, qARP, qRARP, qIPv6:
		e.load = g.pl(cidx, sz)
		e.prot = andMaybe(idx.prot, g.protoAbbrev(q))
	case qSCTP, qTCP, qUDP, qICMP, qIGMP, qIGRP, qPIM, qVRRP, qCARP:
		e.load = g.tranIPv4(cidx, sz)
		b := and(g.protoAbbrev(q), g.ipfrag())
		b = andMaybe(idx.prot, b)
		e.prot = and(g.protoAbbrev(qIP), b)
	case qICMPv6:
		e.load = g.tranIPv6(cidx, sz)
		b0 := andMaybe(idx.prot, g.protoAbbrev(qIPv6))
		e.prot = and(b0, eq(g.pl(6, 1), ipICMP6))
	default:
		gerr("unsupported index operation")
	}
	return e
}

func andMaybe(a, b *bnode) *bnode {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	return and(a, b)
}

func (g *gen) arth(op aop, a, b *arith) *arith {
	if b.op == aConst {
		if (op == aDiv || op == aMod) && b.k == 0 {
			gerr("division by zero")
		}
		if (op == aLsh || op == aRsh) && b.k > 31 {
			gerr("shift by more than 31 bits")
		}
	}
	// libpcap's gen_arth returns its left operand's block: the protocol
	// check of the right operand is dropped ("2 + ip[8]" checks nothing).
	return &arith{op: op, a: a, b: b, prot: a.prot}
}

// relation is gen_relation: "a rel b", negated for the reversed relations.
func (g *gen) relation(rel Rel, reversed bool, a, b *arith) *bnode {
	var c *Criterion
	switch {
	case a.op == aLoad && a.a == nil && b.op == aConst:
		c = &Criterion{Load: a.load, Mask: 0xffffffff, Rel: rel, K: b.k, Relational: true}
	case a.op == aAnd && a.a.op == aLoad && a.a.a == nil && a.b.op == aConst && b.op == aConst && rel != RelSet:
		c = &Criterion{Load: a.a.load, Mask: a.b.k, Rel: rel, K: b.k, Relational: true}
	case a.op == aLen && b.op == aConst:
		c = &Criterion{Len: true, Rel: rel, K: b.k, Relational: true}
	case a.op == aConst && b.op == aConst:
		c = &Criterion{Const: true, K: boolK(evalRel(rel, a.k, b.k))}
	default:
		c = &Criterion{expr: &relation{rel: rel, l: a, r: b}}
	}
	n := atom(c)
	if reversed {
		n = not(n)
	}
	prot := andMaybe(a.prot, b.prot)
	if prot != nil {
		n = and(prot, n)
	}
	return n
}

func boolK(v bool) uint32 {
	if v {
		return 1
	}
	return 0
}

func evalRel(rel Rel, a, b uint32) bool {
	switch rel {
	case RelEQ:
		return a == b
	case RelGT:
		return a > b
	case RelGE:
		return a >= b
	}
	return a&b != 0
}

var errSyntax = errors.New("syntax error")
