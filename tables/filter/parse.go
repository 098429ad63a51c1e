package filter

import (
	"fmt"
	"net/netip"
	"strings"
)

// parser is a recursive-descent reading of libpcap's grammar.y. Like
// libpcap it generates code while it parses, in textual order, which is
// what makes "vlan" and "mpls" shift the offsets of everything after them.
type parser struct {
	toks  []token
	i     int
	g     *gen
	match []int // index of the ')' closing each '(' (computed on first need)
}

// MaxExprLen bounds an expression's length (untrusted input: the parser
// recurses once per nesting level).
const MaxExprLen = 16 << 10

func (p *parser) peek() token        { return p.toks[p.i] }
func (p *parser) peekAt(k int) token { return p.toks[min(p.i+k, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (t token) is(kind tokKind, text string) bool { return t.kind == kind && t.text == text }
func (t token) op(text string) bool               { return t.kind == tOp && t.text == text }
func (t token) kw(text string) bool               { return t.kind == tKeyword && t.text == text }

func (p *parser) syntax() { gerr("syntax error near %s", p.peek()) }

func (p *parser) expect(op string) {
	if !p.peek().op(op) {
		p.syntax()
	}
	p.next()
}

// pnames maps protocol keywords to qualifiers.
var pnames = map[string]qproto{"link": qLink, "ip": qIP, "arp": qARP, "rarp": qRARP, "sctp": qSCTP,
	"tcp": qTCP, "udp": qUDP, "icmp": qICMP, "igmp": qIGMP, "igrp": qIGRP, "pim": qPIM, "vrrp": qVRRP,
	"carp": qCARP, "ip6": qIPv6, "icmp6": qICMPv6, "ah": qAH, "esp": qESP}

var otherPnames = map[string]bool{"radio": true, "atalk": true, "aarp": true, "decnet": true, "lat": true,
	"sca": true, "moprc": true, "mopdl": true, "iso": true, "esis": true, "isis": true, "l1": true, "l2": true,
	"iih": true, "lsp": true, "snp": true, "csnp": true, "psnp": true, "clnp": true, "stp": true, "ipx": true,
	"netbeui": true}

func isPname(t token) bool {
	if t.kind != tKeyword {
		return false
	}
	_, ok := pnames[t.text]
	return ok || otherPnames[t.text]
}

func pnameOf(t token) qproto {
	if q, ok := pnames[t.text]; ok {
		return q
	}
	return qOther
}

func isDqual(t token) bool {
	return t.kind == tKeyword && (t.text == "src" || t.text == "dst" || strings.HasPrefix(t.text, "addr") || t.text == "ra" || t.text == "ta")
}

func isAqual(t token) bool {
	return t.kind == tKeyword && (t.text == "host" || t.text == "net" || t.text == "port" || t.text == "portrange")
}

func isHeadQual(t token) bool {
	return isDqual(t) || isAqual(t) || t.kw("proto") || t.kw("protochain") || t.kw("gateway")
}

var arithOps = map[string]bool{"+": true, "-": true, "*": true, "/": true, "%": true, "&": true, "|": true,
	"^": true, "<<": true, ">>": true}
var relOps = map[string]bool{">": true, ">=": true, "=": true, "<": true, "<=": true, "!=": true}

func isArithOrRel(t token) bool { return t.kind == tOp && (arithOps[t.text] || relOps[t.text]) }

// matching returns the index of the ')' closing the '(' at i (the last
// token when it is not closed).
func (p *parser) matching(i int) int {
	if p.match == nil {
		p.match = make([]int, len(p.toks))
		var open []int
		for j, t := range p.toks {
			p.match[j] = len(p.toks) - 1
			switch {
			case t.op("("):
				open = append(open, j)
			case t.op(")") && len(open) > 0:
				p.match[open[len(open)-1]] = j
				open = open[:len(open)-1]
			}
		}
	}
	return p.match[i]
}

// arithAt reports whether an arithmetic expression starts at token i.
func (p *parser) arithAt(i int) bool {
	t := p.toks[i]
	switch {
	case t.kind == tNum:
		return isArithOrRel(p.toks[min(i+1, len(p.toks)-1)])
	case t.kw("len") || t.op("-"):
		return true
	case isPname(t):
		return p.toks[min(i+1, len(p.toks)-1)].op("[")
	case t.op("("):
		// "(arith) op ...": a parenthesised relation is an expression.
		return isArithOrRel(p.toks[min(p.matching(i)+1, len(p.toks)-1)])
	}
	return false
}

// idAt reports whether an id (rather than a term) starts at token i, in
// the operand position after "and"/"or".
func (p *parser) idAt(i int) bool {
	t := p.toks[i]
	switch t.kind {
	case tID, tHID, tHID6, tEID:
		return true
	case tNum:
		return !p.arithAt(i)
	}
	if t.op("!") {
		return p.idAt(i + 1)
	}
	if t.op("(") {
		if p.arithAt(i) {
			return false
		}
		return p.idAt(i + 1)
	}
	return false
}

// expr: term { (and|or) (term|id) }, left associative, and and or of equal
// precedence; an id takes the qualifiers of the operand before it.
func (p *parser) expr(inh qual) (*bnode, qual) {
	n, q := p.term(inh)
	for p.peek().op("and") || p.peek().op("or") {
		isAnd := p.next().text == "and"
		var r *bnode
		if p.idAt(p.i) {
			r = p.id(q)
		} else {
			r, q = p.term(q)
		}
		if isAnd {
			n = and(n, r)
		} else {
			n = or(n, r)
		}
	}
	return n, q
}

func (p *parser) term(inh qual) (*bnode, qual) {
	t := p.peek()
	switch {
	case t.op("!"):
		p.next()
		n, q := p.term(inh)
		return not(n), q
	case p.arithAt(p.i):
		return p.relation(), qerr
	case t.op("("):
		p.next()
		n, _ := p.expr(inh)
		p.expect(")")
		return n, inh
	case isPname(t):
		nt := p.peekAt(1)
		switch {
		case isHeadQual(nt):
			return p.head()
		case nt.kw("broadcast"), nt.kw("multicast"):
			p.next()
			return p.other(pnameOf(t)), qerr
		}
		p.next()
		if q := pnameOf(t); q != qOther {
			return p.g.protoAbbrev(q), qerr
		}
		gerr("protocol %s not supported by gswitch's filters", t.text)
	case isHeadQual(t):
		return p.head()
	}
	return p.other(qDefault), qerr
}

// head: [pname] [dqual] [aqual|proto|protochain|gateway] id.
func (p *parser) head() (*bnode, qual) {
	q := qual{}
	if isPname(p.peek()) {
		t := p.next()
		q.proto, q.protoName = pnameOf(t), t.text
	}
	if isDqual(p.peek()) {
		t := p.next()
		switch t.text {
		case "src", "dst":
			q.dir = dSrc
			if t.text == "dst" {
				q.dir = dDst
			}
			if (p.peek().op("or") || p.peek().op("and")) && p.peekAt(1).kind == tKeyword && (p.peekAt(1).text == "src" || p.peekAt(1).text == "dst") && p.peekAt(1).text != t.text {
				if p.next().text == "or" {
					q.dir = dOr
				} else {
					q.dir = dAnd
				}
				p.next()
			}
		default:
			q.dir = dOther
		}
	}
	t := p.peek()
	switch {
	case t.kw("host"):
		q.addr = aHost
	case t.kw("net"):
		q.addr = aNet
	case t.kw("port"):
		q.addr = aPort
	case t.kw("portrange"):
		q.addr = aPortRange
	case t.kw("proto") && q.dir == dDefault:
		q.addr = aProto
	case t.kw("protochain") && q.dir == dDefault:
		q.addr = aProtoChain
	case t.kw("gateway") && q.dir == dDefault:
		q.addr = aGateway
	}
	if q.addr != aDefault {
		p.next()
	} else if q.dir == dDefault {
		p.syntax()
	}
	return p.id(q), q
}

// id: nid | pnum | '(' pid ')', with the inherited qualifiers q.
func (p *parser) id(q qual) *bnode {
	t := p.peek()
	switch {
	case t.op("!"):
		p.next()
		return not(p.id(q))
	case t.op("("):
		if p.pnumAt(p.i) {
			return p.g.ncode("", p.pnum(), q)
		}
		p.next()
		n := p.id(q)
		for p.peek().op("and") || p.peek().op("or") {
			isAnd := p.next().text == "and"
			r := p.id(q)
			if isAnd {
				n = and(n, r)
			} else {
				n = or(n, r)
			}
		}
		p.expect(")")
		return n
	case t.kind == tNum:
		p.next()
		return p.g.ncode("", t.num, q)
	case t.kind == tID:
		p.next()
		return p.g.scode(t.text, q)
	case t.kind == tHID:
		p.next()
		if p.peek().op("/") {
			p.next()
			n := p.next()
			if n.kind != tNum {
				p.syntax()
			}
			return p.g.mcode(t.text, "", n.num, q)
		}
		if p.peek().kw("mask") {
			p.next()
			m := p.next()
			if m.kind != tHID {
				p.syntax()
			}
			return p.g.mcode(t.text, m.text, 0, q)
		}
		switch q.addr {
		case aPort:
			gerr("'port' modifier applied to ip host")
		case aPortRange:
			gerr("'portrange' modifier applied to ip host")
		case aProto:
			gerr("'proto' modifier applied to ip host")
		case aProtoChain:
			gerr("'protochain' modifier applied to ip host")
		}
		return p.g.ncode(t.text, 0, q)
	case t.kind == tHID6:
		p.next()
		ml := uint32(128)
		if p.peek().op("/") {
			p.next()
			n := p.next()
			if n.kind != tNum {
				p.syntax()
			}
			ml = n.num
		}
		return p.g.mcode6(t.text, ml, q)
	case t.kind == tEID:
		p.next()
		return p.g.ecode(t.text, q)
	}
	p.syntax()
	return nil
}

func (p *parser) pnumAt(i int) bool {
	k := 0
	for p.toks[i].op("(") {
		i++
		k++
	}
	if p.toks[i].kind != tNum {
		return false
	}
	for j := 1; j <= k; j++ {
		if !p.toks[min(i+j, len(p.toks)-1)].op(")") {
			return false
		}
	}
	return true
}

func (p *parser) pnum() uint32 {
	if p.peek().op("(") {
		p.next()
		v := p.pnum()
		p.expect(")")
		return v
	}
	t := p.next()
	if t.kind != tNum {
		p.syntax()
	}
	return t.num
}

// other: broadcast, multicast, less, greater, vlan, mpls.
func (p *parser) other(q qproto) *bnode {
	t := p.peek()
	switch {
	case t.kw("broadcast"):
		p.next()
		return p.g.broadcast(q)
	case t.kw("multicast"):
		p.next()
		return p.g.multicast(q)
	case q != qDefault:
		p.syntax()
	case t.kw("less"), t.kw("greater"):
		p.next()
		n := p.peek()
		if n.kind != tNum {
			p.syntax()
		}
		p.next()
		if t.text == "less" {
			return not(lenCmp(RelGT, n.num))
		}
		return lenCmp(RelGE, n.num)
	case t.kw("vlan"), t.kw("mpls"):
		p.next()
		has := p.peek().kind == tNum || p.peek().op("(") && p.pnumAt(p.i)
		var v uint32
		if has {
			v = p.pnum()
		}
		if t.text == "vlan" {
			return p.g.vlan(v, has)
		}
		return p.g.mpls(v, has)
	case t.kind == tKeyword:
		gerr("%s not supported by gswitch's filters", t)
	}
	p.syntax()
	return nil
}

// relation: arith relop arith.
func (p *parser) relation() *bnode {
	a := p.arith(0)
	t := p.next()
	var rel Rel
	rev := false
	switch {
	case t.op(">"):
		rel = RelGT
	case t.op(">="):
		rel = RelGE
	case t.op("="):
		rel = RelEQ
	case t.op("<="):
		rel, rev = RelGT, true
	case t.op("<"):
		rel, rev = RelGE, true
	case t.op("!="):
		rel, rev = RelEQ, true
	default:
		p.i--
		p.syntax()
	}
	b := p.arith(0)
	return p.g.relation(rel, rev, a, b)
}

// Binding powers of grammar.y's precedence declarations. '%' and '^' have
// none there, so bison shifts on them: they bind tighter than anything to
// their left and take everything to their right.
var lbp = map[string]int{"|": 1, "&": 2, "<<": 3, ">>": 3, "+": 4, "-": 4, "*": 5, "/": 5, "%": 100, "^": 100}
var binops = map[string]aop{"+": aAdd, "-": aSub, "*": aMul, "/": aDiv, "%": aMod, "&": aAnd, "|": aOr,
	"^": aXor, "<<": aLsh, ">>": aRsh}

const umPrec = 6

func (p *parser) arith(min int) *arith {
	left := p.primary()
	for {
		t := p.peek()
		bp, ok := lbp[t.text]
		if t.kind != tOp || !ok || bp <= min {
			return left
		}
		p.next()
		rbp := bp
		if bp == 100 {
			rbp = 0
		}
		right := p.arith(rbp)
		left = p.g.arth(binops[t.text], left, right)
	}
}

func (p *parser) primary() *arith {
	t := p.next()
	switch {
	case t.kind == tNum:
		return &arith{op: aConst, k: t.num}
	case t.kw("len"):
		return &arith{op: aLen}
	case t.op("-"):
		a := p.arith(umPrec)
		return &arith{op: aNeg, a: a, prot: a.prot}
	case t.op("("):
		a := p.arith(0)
		p.expect(")")
		return a
	case isPname(t):
		p.expect("[")
		idx := p.arith(0)
		size := uint32(1)
		if p.peek().op(":") {
			p.next()
			n := p.peek()
			if n.kind != tNum {
				p.syntax()
			}
			if n.num != 1 && n.num != 2 && n.num != 4 {
				gerr("data size must be 1, 2, or 4")
			}
			p.next()
			size = n.num
		}
		p.expect("]")
		return p.g.load(pnameOf(t), idx, size)
	}
	p.i--
	p.syntax()
	return nil
}

// --- the qualifier-driven generators (gen_ncode, gen_scode, ...) ---

func atoin(s string) (uint32, uint32, bool) {
	var v, n uint32
	parts := strings.Split(s, ".")
	for _, part := range parts {
		if part == "" {
			return 0, 0, false
		}
		var x uint32
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, 0, false
			}
			x = x*10 + uint32(c-'0')
			if x > 255 {
				return 0, 0, false
			}
		}
		v = v<<8 | x
		n += 8
	}
	return v, n, true
}

func addrType(q qual) string {
	if q.addr == aNet {
		return "net"
	}
	return "host"
}

func (g *gen) ncode(s string, v uint32, q qual) *bnode {
	vlen := uint32(32)
	if s != "" {
		var ok bool
		v, vlen, ok = atoin(s)
		if !ok {
			gerr("invalid IPv4 address '%s'", s)
		}
	}
	switch q.addr {
	case aDefault, aHost, aNet:
		if q.proto == qLink {
			gerr("illegal link layer address")
		}
		mask := uint32(0xffffffff)
		if s == "" && q.addr == aNet {
			for v != 0 && v&0xff000000 == 0 {
				v <<= 8
				mask <<= 8
			}
		} else {
			v <<= 32 - vlen
			mask <<= 32 - vlen
		}
		return g.host(v, mask, q.proto, q.dir, addrType(q))
	case aPort, aPortRange:
		what := "port"
		if q.addr == aPortRange {
			what = "portrange"
		}
		pr := portProto(q.proto, what)
		if v > 65535 {
			gerr("illegal port number %d > 65535", v)
		}
		return g.ports(v, v, pr, q.dir, q.addr == aPortRange)
	case aGateway:
		gerr("'gateway' requires a name")
	case aProto:
		return g.proto(v, q.proto, q.dir)
	case aProtoChain:
		gerr("protochain not supported by gswitch's filters")
	}
	gerr("syntax error: a value without a qualifier to apply")
	return nil
}

func (g *gen) scode(name string, q qual) *bnode {
	switch q.addr {
	case aNet:
		gerr("unknown network '%s'", name)
	case aDefault, aHost:
		if q.proto == qLink {
			gerr("unknown ether host '%s'", name)
		}
		gerr("unknown host '%s' (gswitch's filters take addresses, not host names)", name)
	case aPort, aPortRange:
		what := "port"
		if q.addr == aPortRange {
			what = "portrange"
		}
		pr := portProto(q.proto, what)
		var p1, p2, real int
		var ok bool
		if q.addr == aPort {
			p1, real, ok = g.names.port(name)
			p2 = p1
			if !ok {
				gerr("unknown port '%s'", name)
			}
		} else if p1, p2, real, ok = g.names.portRange(name); !ok {
			gerr("unknown port in range '%s'", name)
		}
		if pr != protoUndef {
			if real != protoUndef && real != pr {
				gerr("port '%s' is %s", name, map[int]string{ipTCP: "tcp", ipUDP: "udp", ipSCTP: "sctp"}[real])
			}
			real = pr
		}
		for _, x := range []int{p1, p2} {
			if x < 0 {
				gerr("illegal port number %d < 0", x)
			}
			if x > 65535 {
				gerr("illegal port number %d > 65535", x)
			}
		}
		return g.ports(uint32(p1), uint32(p2), real, q.dir, q.addr == aPortRange)
	case aGateway:
		gerr("'gateway' not supported in this configuration")
	case aProto:
		switch q.proto {
		case qDefault, qIP, qIPv6:
			v, ok := g.names.protos[name]
			if !ok {
				gerr("unknown ip proto '%s'", name)
			}
			return g.proto(uint32(v), q.proto, q.dir)
		case qLink:
			v, ok := etherProtoNames[name]
			if !ok {
				gerr("unknown ether proto '%s'", name)
			}
			return g.proto(v, q.proto, q.dir)
		}
		gerr("unknown protocol: %s", name)
	case aProtoChain:
		gerr("protochain not supported by gswitch's filters")
	}
	gerr("syntax error: a name without a qualifier to apply")
	return nil
}

func (g *gen) mcode(s1, s2 string, masklen uint32, q qual) *bnode {
	n, nlen, ok := atoin(s1)
	if !ok {
		gerr("invalid IPv4 address '%s'", s1)
	}
	n <<= 32 - nlen
	var m uint32
	if s2 != "" {
		mv, mlen, ok := atoin(s2)
		if !ok {
			gerr("invalid IPv4 address '%s'", s2)
		}
		m = mv << (32 - mlen)
		if n&^m != 0 {
			gerr("non-network bits set in \"%s mask %s\"", s1, s2)
		}
	} else {
		if masklen > 32 {
			gerr("mask length must be <= 32")
		}
		if masklen != 0 {
			m = 0xffffffff << (32 - masklen)
		}
		if n&^m != 0 {
			gerr("non-network bits set in \"%s/%d\"", s1, masklen)
		}
	}
	if q.addr != aNet {
		gerr("Mask syntax for networks only")
	}
	return g.host(n, m, q.proto, q.dir, "net")
}

func parseIPv6(s string) ([16]byte, bool) {
	if !strings.Contains(s, ":") {
		return [16]byte{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() || a.Zone() != "" {
		return [16]byte{}, false
	}
	return a.As16(), true
}

func (g *gen) mcode6(s string, masklen uint32, q qual) *bnode {
	addr, ok := parseIPv6(s)
	if !ok {
		gerr("invalid ip6 address %s", s)
	}
	if masklen > 128 {
		gerr("mask length must be <= 128")
	}
	var mask [16]byte
	for i := uint32(0); i < masklen; i++ {
		mask[i/8] |= 0x80 >> (i % 8)
	}
	for i := range addr {
		if addr[i]&^mask[i] != 0 {
			gerr("non-network bits set in \"%s/%d\"", s, masklen)
		}
	}
	switch q.addr {
	case aDefault, aHost:
		if masklen != 128 {
			gerr("Mask syntax for networks only")
		}
		return g.host6(addr, mask, q.proto, q.dir, addrType(q))
	case aNet:
		return g.host6(addr, mask, q.proto, q.dir, "net")
	}
	gerr("invalid qualifier against IPv6 address")
	return nil
}

func (g *gen) ecode(s string, q qual) *bnode {
	if (q.addr == aHost || q.addr == aDefault) && q.proto == qLink {
		mac, ok := parseMAC(s)
		if !ok {
			gerr("bogus ethernet address %s", s)
		}
		return g.ehost(mac, q.dir)
	}
	gerr("ethernet address used in non-ether expression")
	return nil
}

func parseMAC(s string) ([6]byte, bool) {
	var mac [6]byte
	hex := func(c byte) (byte, bool) {
		switch {
		case c >= '0' && c <= '9':
			return c - '0', true
		case c >= 'a' && c <= 'f':
			return c - 'a' + 10, true
		case c >= 'A' && c <= 'F':
			return c - 'A' + 10, true
		}
		return 0, false
	}
	var parts []string
	switch {
	case strings.ContainsAny(s, ":-"):
		parts = strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == '-' })
	case strings.Count(s, ".") == 5:
		parts = strings.Split(s, ".")
	default: // xxxx.xxxx.xxxx or 12 hex digits
		h := strings.ReplaceAll(s, ".", "")
		if len(h) != 12 {
			return mac, false
		}
		for i := 0; i < 6; i++ {
			parts = append(parts, h[2*i:2*i+2])
		}
	}
	if len(parts) != 6 {
		return mac, false
	}
	for i, part := range parts {
		var v byte
		for j := 0; j < len(part); j++ {
			d, ok := hex(part[j])
			if !ok {
				return mac, false
			}
			v = v<<4 | d
		}
		mac[i] = v
	}
	return mac, true
}

// parseFilter compiles one expression for a link type into its boolean
// tree. An empty expression accepts every packet.
func parseFilter(expr string, link uint32, bigEndian bool, names *Names) (n *bnode, err error) {
	if len(expr) > MaxExprLen {
		return nil, fmt.Errorf("position %d: expression longer than %d bytes", MaxExprLen, MaxExprLen)
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	g, err := newGen(link, bigEndian, names)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, g: g}
	defer func() {
		if r := recover(); r != nil {
			ge, ok := r.(*genError)
			if !ok {
				panic(r)
			}
			n, err = nil, fmt.Errorf("position %d: %s", p.toks[p.i].pos, ge.msg)
		}
	}()
	if p.peek().kind == tEOF {
		return constNode(true), nil
	}
	n, _ = p.expr(qerr)
	if p.peek().kind != tEOF {
		p.syntax()
	}
	return n, nil
}
