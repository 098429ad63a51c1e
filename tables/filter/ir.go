package filter

import (
	"fmt"
	"strings"
)

// Rel is a comparison of a criterion, BPF's jump conditions: the other
// three relations of the language (<=, <, !=) are their negations.
type Rel uint8

const (
	RelEQ  Rel = iota // ==
	RelGT             // > (unsigned)
	RelGE             // >= (unsigned)
	RelSet            // (a & k) != 0
)

var relNames = [...]string{"==", ">", ">=", "&"}

// Base is where a load's offset is counted from.
type Base uint8

const (
	// BaseAbs: the offset is from the start of the captured packet.
	BaseAbs Base = iota
	// BaseIPv4: the offset is from the IPv4 transport header: the packet
	// offset NetOff of the IPv4 header plus 4*(packet[NetOff]&0x0f).
	BaseIPv4
)

// Load reads Size (1, 2 or 4) bytes, big-endian, at Base+Off. A load past
// the captured length rejects the packet for the whole filter.
type Load struct {
	Base   Base
	NetOff uint32 // BaseIPv4 only
	Off    uint32
	Size   uint8
}

func (l Load) String() string {
	if l.Base == BaseIPv4 {
		return fmt.Sprintf("[ip4t@%d+%d:%d]", l.NetOff, l.Off, l.Size)
	}
	return fmt.Sprintf("[%d:%d]", l.Off, l.Size)
}

// aop is an arithmetic operation of an expression.
type aop uint8

const (
	aConst aop = iota
	aLen       // the packet's length on the wire
	aLoad      // a load; A is the index expression (added to Load.Off), nil for none
	aAdd
	aSub
	aMul
	aDiv
	aMod
	aAnd
	aOr
	aXor
	aLsh
	aRsh
	aNeg
)

var aopNames = [...]string{"k", "len", "ld", "+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "neg"}

// arith is an arithmetic expression of the language (32-bit unsigned, as
// BPF computes). Its prot is the protocol check libpcap places before the
// computation (ip for ip[...], tcp and the first fragment for tcp[...]).
type arith struct {
	op   aop
	k    uint32
	load Load
	a, b *arith
	prot *bnode
}

func (e *arith) key(sb *strings.Builder) {
	switch e.op {
	case aConst:
		fmt.Fprintf(sb, "%d", e.k)
	case aLen:
		sb.WriteString("len")
	case aLoad:
		sb.WriteString(e.load.String())
		if e.a != nil {
			sb.WriteString("{")
			e.a.key(sb)
			sb.WriteString("}")
		}
	case aNeg:
		sb.WriteString("-(")
		e.a.key(sb)
		sb.WriteString(")")
	default:
		sb.WriteString("(")
		e.a.key(sb)
		sb.WriteString(aopNames[e.op])
		e.b.key(sb)
		sb.WriteString(")")
	}
}

// Criterion is one comparison evaluated on a packet: either the common
// shape (Load & Mask) Rel K, or a general relation between two arithmetic
// expressions (Expr set), or the wire length compared with K (Len set).
// Its result is true, false, or "abort" (a load past the captured length
// or a division by zero at run time), which rejects the whole filter
// wherever the criterion is reached.
type Criterion struct {
	Load Load
	Mask uint32
	Rel  Rel
	K    uint32
	Len  bool
	// Const: no load at all; the value is Rel==RelEQ && K==1 (true) or false.
	Const bool
	// Relational: written as a relation ("ip[8] = 6", "tcp[13] & 2 = 2")
	// rather than by a primitive. libpcap compiles the two differently
	// (through scratch memory and the X register: "sub x", "and x",
	// "jgt x"), so its jump optimizer never lets one decide the other (the
	// oracle tests confirm it); the CFG emulation keeps them apart and
	// decides a relational test only from the same test.
	Relational bool
	expr       *relation
}

type relation struct {
	rel  Rel
	l, r *arith
}

// String is the criterion's canonical text, also its identity.
func (c *Criterion) String() string {
	switch {
	case c.Const:
		if c.K == 1 {
			return "true"
		}
		return "false"
	case c.Len:
		return fmt.Sprintf("len %s %d", relNames[c.Rel], c.K)
	case c.expr != nil:
		var sb strings.Builder
		c.expr.l.key(&sb)
		sb.WriteString(" " + relNames[c.expr.rel] + " ")
		c.expr.r.key(&sb)
		return sb.String()
	}
	pre := ""
	if c.Relational {
		pre = "rel "
	}
	if c.Mask != 0xffffffff {
		return fmt.Sprintf("%s%s & %#x %s %#x", pre, c.Load, c.Mask, relNames[c.Rel], c.K)
	}
	return fmt.Sprintf("%s%s %s %#x", pre, c.Load, relNames[c.Rel], c.K)
}

// General reports whether the criterion is a general relation (an
// expression with arithmetic or a variable index) rather than one load
// compared with a constant.
func (c *Criterion) General() bool { return c.expr != nil }

// bop is a node of a filter's boolean structure.
type bop uint8

const (
	bAtom bop = iota
	bAnd
	bOr
	bNot
)

// bnode is a filter's boolean tree in libpcap's evaluation order: an And
// evaluates A and then, if A is true, B; an Or evaluates B only if A is
// false; an abort anywhere it is evaluated ends the filter with a reject.
type bnode struct {
	op   bop
	a, b *bnode
	c    *Criterion
}

func atom(c *Criterion) *bnode { return &bnode{op: bAtom, c: c} }
func and(a, b *bnode) *bnode   { return &bnode{op: bAnd, a: a, b: b} }
func or(a, b *bnode) *bnode    { return &bnode{op: bOr, a: a, b: b} }
func not(a *bnode) *bnode      { return &bnode{op: bNot, a: a} }
func constNode(v bool) *bnode {
	k := uint32(0)
	if v {
		k = 1
	}
	return atom(&Criterion{Const: true, K: k})
}

// cmp builds (load & mask) rel k.
func cmp(l Load, mask uint32, rel Rel, k uint32) *bnode {
	return atom(&Criterion{Load: l, Mask: mask, Rel: rel, K: k})
}
