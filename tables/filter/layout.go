package filter

import "fmt"

// The device image of a Program: plain 32-bit word arrays, the form a GPU
// kernel (or any other backend) reads. EvalLayout interprets it on the CPU;
// the tests check it against EvalStages, so a kernel that follows the same
// words has a reference to be compared with bit for bit.
//
// Values are numbered as in the Program: criteria 0..NC-1, then
// sub-predicates NC.., each one byte per packet (0 false, 1 true, 2
// unknown) in the kernels' scratch.

// Layout identification.
const (
	LayoutMagic   = 0x47504631 // "GPF1"
	LayoutVersion = 1
)

// Header words.
const (
	HdrMagic    = 0
	HdrVersion  = 1
	HdrLink     = 2
	HdrCriteria = 3 // NC
	HdrNodes    = 4
	HdrFilters  = 5
	HeaderWords = 6
)

// CritWords words describe a criterion:
//
//	w0  kind | rel<<4 | base<<8 | size<<16
//	w1  IPv4 header offset (base BaseIPv4)
//	w2  offset (from the packet, or from the IPv4 transport header)
//	w3  mask
//	w4  constant (kind CritExpr: first word of its program in Exprs)
//	w5  kind CritExpr: number of expression instructions
const CritWords = 6

// Criterion kinds.
const (
	CritLoad  = 0 // (load & mask) rel constant
	CritLen   = 1 // wire length rel constant
	CritConst = 2 // constant: w4 is 1 (true) or 0 (false)
	CritExpr  = 3 // general relation: a stack program leaves l, r; then l rel r
)

// Expression instructions: ExprWords words each, {op | base<<8 | size<<16,
// a, b}. A load pops its index and pushes the value at (base) + a + index
// (b: the IPv4 header offset of BaseIPv4); any load past the captured
// length, or a division by zero, makes the criterion unknown.
const ExprWords = 3

// Expression opcodes (the aop values).
const (
	ExprConst = uint32(aConst) // push a
	ExprLen   = uint32(aLen)   // push the wire length
	ExprLoad  = uint32(aLoad)  // pop index, push load
	ExprAdd   = uint32(aAdd)   // pop r, pop l, push l op r (Add..Rsh)
	ExprRsh   = uint32(aRsh)
	ExprNeg   = uint32(aNeg) // pop a, push -a
)

// NodeWords words describe a sub-predicate: {op, a, b} (op: OpAnd, OpOr,
// OpNot; a and b value indices).
const NodeWords = 3

// CFG: per filter CFGIndexWords words {first node, node count, root
// (relative; CFGAccept or CFGReject for a constant program), pre-load
// criterion or 0xffffffff}, and CFGNodeWords words per block {criterion,
// jt, jf} with jt, jf relative to the filter's first node or CFGAccept,
// CFGReject.
const (
	CFGIndexWords = 4
	CFGNodeWords  = 3
	CFGAccept     = 0xfffffffe
	CFGReject     = 0xffffffff
)

// Layout is a Program's device image.
type Layout struct {
	Header   []uint32
	Criteria []uint32 // CritWords per criterion
	Exprs    []uint32 // ExprWords per instruction
	Nodes    []uint32 // NodeWords per sub-predicate
	Roots    []uint32 // one value index per filter
	CFGIndex []uint32 // CFGIndexWords per filter
	CFGNodes []uint32 // CFGNodeWords per block
}

// Layout builds the device image.
func (p *Program) Layout() *Layout {
	l := &Layout{Header: make([]uint32, HeaderWords)}
	l.Header[HdrMagic], l.Header[HdrVersion] = LayoutMagic, LayoutVersion
	l.Header[HdrLink] = p.Link
	l.Header[HdrCriteria] = uint32(len(p.Criteria))
	l.Header[HdrNodes] = uint32(len(p.Nodes))
	l.Header[HdrFilters] = uint32(len(p.Roots))
	for i := range p.Criteria {
		c := &p.Criteria[i]
		w := make([]uint32, CritWords)
		switch {
		case c.Const:
			w[0], w[4] = CritConst, c.K
		case c.Len:
			w[0], w[4] = CritLen|uint32(c.Rel)<<4, c.K
		case c.expr != nil:
			start := uint32(len(l.Exprs)) / ExprWords
			l.emit(c.expr.l)
			l.emit(c.expr.r)
			w[0] = CritExpr | uint32(c.expr.rel)<<4
			w[4], w[5] = start, uint32(len(l.Exprs))/ExprWords-start
		default:
			w[0] = CritLoad | uint32(c.Rel)<<4 | uint32(c.Load.Base)<<8 | uint32(c.Load.Size)<<16
			w[1], w[2], w[3], w[4] = c.Load.NetOff, c.Load.Off, c.Mask, c.K
		}
		l.Criteria = append(l.Criteria, w...)
	}
	for _, n := range p.Nodes {
		l.Nodes = append(l.Nodes, uint32(n.Op), uint32(n.A), uint32(n.B))
	}
	for _, r := range p.Roots {
		l.Roots = append(l.Roots, uint32(r))
	}
	for _, g := range p.cfgs {
		first := uint32(len(l.CFGNodes)) / CFGNodeWords
		rel := func(id int32) uint32 {
			switch id {
			case cAccept:
				return CFGAccept
			case cReject:
				return CFGReject
			}
			return uint32(id)
		}
		pre := uint32(CFGReject)
		if len(g.pre) > 0 {
			pre = uint32(g.pre[0])
		}
		l.CFGIndex = append(l.CFGIndex, first, uint32(len(g.nodes)), rel(g.root), pre)
		for _, n := range g.nodes {
			l.CFGNodes = append(l.CFGNodes, uint32(n.crit), rel(n.jt), rel(n.jf))
		}
	}
	return l
}

func (l *Layout) emit(e *arith) {
	switch e.op {
	case aConst:
		l.Exprs = append(l.Exprs, ExprConst, e.k, 0)
	case aLen:
		l.Exprs = append(l.Exprs, ExprLen, 0, 0)
	case aLoad:
		if e.a != nil {
			l.emit(e.a)
		} else {
			l.Exprs = append(l.Exprs, ExprConst, 0, 0)
		}
		l.Exprs = append(l.Exprs, ExprLoad|uint32(e.load.Base)<<8|uint32(e.load.Size)<<16, e.load.Off, e.load.NetOff)
	case aNeg:
		l.emit(e.a)
		l.Exprs = append(l.Exprs, ExprNeg, 0, 0)
	default:
		l.emit(e.a)
		l.emit(e.b)
		l.Exprs = append(l.Exprs, uint32(e.op), 0, 0)
	}
}

// LayoutEvaluator interprets a Layout: the CPU reference of the device
// kernels.
type LayoutEvaluator struct {
	l     *Layout
	vals  []uint8
	stack []uint32
}

// NewLayoutEvaluator checks the header and returns an interpreter.
func NewLayoutEvaluator(l *Layout) (*LayoutEvaluator, error) {
	if len(l.Header) < HeaderWords || l.Header[HdrMagic] != LayoutMagic || l.Header[HdrVersion] != LayoutVersion {
		return nil, fmt.Errorf("filter layout: bad header")
	}
	n := int(l.Header[HdrCriteria]) + int(l.Header[HdrNodes])
	return &LayoutEvaluator{l: l, vals: make([]uint8, n)}, nil
}

// Eval runs the three stages over the words, with the control-flow blocks
// for packets on which some criterion is unknown.
func (le *LayoutEvaluator) Eval(data []byte, wire uint32, out []uint64) {
	l := le.l
	nc := int(l.Header[HdrCriteria])
	unknown := false
	for i := 0; i < nc; i++ {
		le.vals[i] = le.crit(l.Criteria[i*CritWords:(i+1)*CritWords], data, wire)
		unknown = unknown || le.vals[i] == vAbort
	}
	nf := int(l.Header[HdrFilters])
	for i := range out[:(nf+63)/64] {
		out[i] = 0
	}
	if unknown {
		for f := 0; f < nf; f++ {
			if le.walk(l.CFGIndex[f*CFGIndexWords : (f+1)*CFGIndexWords]) {
				out[f/64] |= 1 << (f % 64)
			}
		}
		return
	}
	for i := 0; i < int(l.Header[HdrNodes]); i++ {
		op, a, b := l.Nodes[i*NodeWords], le.vals[l.Nodes[i*NodeWords+1]], le.vals[l.Nodes[i*NodeWords+2]]
		switch Op(op) {
		case OpAnd:
			a &= b
		case OpOr:
			a |= b
		default:
			a ^= 1
		}
		le.vals[nc+i] = a
	}
	for f, r := range l.Roots {
		out[f/64] |= uint64(le.vals[r]) << (f % 64)
	}
}

func (le *LayoutEvaluator) walk(ix []uint32) bool {
	first, root, pre := ix[0], ix[2], ix[3]
	if pre != CFGReject && le.vals[pre] == vAbort {
		return false
	}
	id := root
	for id != CFGAccept && id != CFGReject {
		n := le.l.CFGNodes[(first+id)*CFGNodeWords:]
		switch le.vals[n[0]] {
		case vTrue:
			id = n[1]
		case vFalse:
			id = n[2]
		default:
			return false
		}
	}
	return id == CFGAccept
}

func (le *LayoutEvaluator) crit(w []uint32, data []byte, wire uint32) uint8 {
	rel := Rel(w[0] >> 4 & 0xf)
	switch w[0] & 0xf {
	case CritConst:
		return uint8(w[4])
	case CritLen:
		return relTrue(rel, wire, w[4])
	case CritExpr:
		le.stack = le.stack[:0]
		for pc := w[4]; pc < w[4]+w[5]; pc++ {
			in := le.l.Exprs[pc*ExprWords : (pc+1)*ExprWords]
			if !le.step(in, data, wire) {
				return vAbort
			}
		}
		r, l := le.stack[len(le.stack)-1], le.stack[len(le.stack)-2]
		return relTrue(rel, l, r)
	}
	ld := Load{Base: Base(w[0] >> 8 & 0xff), Size: uint8(w[0] >> 16), NetOff: w[1], Off: w[2]}
	off, ok := address(data, ld, 0)
	if !ok {
		return vAbort
	}
	x, ok := load(data, off, ld.Size)
	if !ok {
		return vAbort
	}
	return relTrue(rel, x&w[3], w[4])
}

func (le *LayoutEvaluator) step(in []uint32, data []byte, wire uint32) bool {
	op := in[0] & 0xff
	switch op {
	case ExprConst:
		le.stack = append(le.stack, in[1])
		return true
	case ExprLen:
		le.stack = append(le.stack, wire)
		return true
	case ExprLoad:
		idx := le.stack[len(le.stack)-1]
		ld := Load{Base: Base(in[0] >> 8 & 0xff), Size: uint8(in[0] >> 16), Off: in[1], NetOff: in[2]}
		off, ok := address(data, ld, idx)
		if !ok {
			return false
		}
		x, ok := load(data, off, ld.Size)
		le.stack[len(le.stack)-1] = x
		return ok
	case ExprNeg:
		le.stack[len(le.stack)-1] = -le.stack[len(le.stack)-1]
		return true
	}
	r := le.stack[len(le.stack)-1]
	le.stack = le.stack[:len(le.stack)-1]
	a := &le.stack[len(le.stack)-1]
	v, ok := alu(aop(op), *a, r)
	*a = v
	return ok
}
