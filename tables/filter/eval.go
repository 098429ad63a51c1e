package filter

// Tri-state values of criteria and sub-predicates.
const (
	vFalse uint8 = iota
	vTrue
	vAbort // unknown: a load past the captured length (or a division by zero)
)

// Evaluator evaluates a Program on packets. It holds the per-packet value
// scratch; one Evaluator per goroutine.
type Evaluator struct {
	p    *Program
	vals []uint8
}

// NewEvaluator returns an evaluator of p.
func NewEvaluator(p *Program) *Evaluator {
	return &Evaluator{p: p, vals: make([]uint8, len(p.Criteria)+len(p.Nodes))}
}

// Words is the number of uint64 words of a result bitmap.
func (p *Program) Words() int { return (len(p.Roots) + 63) / 64 }

// Eval evaluates every filter on one packet: data is the captured bytes,
// wire the length on the wire. Bit i of out (len >= Words()) is set when
// filter i accepts the packet. Every criterion is evaluated once, then
// every sub-predicate, then the filters read their roots.
func (e *Evaluator) Eval(data []byte, wire uint32, out []uint64) {
	p := e.p
	v := e.vals
	unknown := e.criteria(data, wire)
	for i := range out[:p.Words()] {
		out[i] = 0
	}
	if unknown {
		// Some load ran past the captured length. Three-valued logic would
		// be sound, but libpcap's optimizer removes fewer loads than an
		// ideal one: walk each filter's optimized form.
		for i := range p.Roots {
			if e.decide(i) == vTrue {
				out[i/64] |= 1 << (i % 64)
			}
		}
		return
	}
	nc := len(p.Criteria)
	for i, n := range p.Nodes {
		a := v[n.A]
		switch n.Op {
		case OpAnd:
			a &= v[n.B]
		case OpOr:
			a |= v[n.B]
		default:
			a ^= 1
		}
		v[nc+i] = a
	}
	for i, r := range p.Roots {
		out[i/64] |= uint64(v[r]) << (i % 64)
	}
}

// criteria evaluates every criterion into e.vals and reports whether any
// is unknown. Equality tests of one value (the same load and mask) share
// one load: with many filters most criteria are such groups (ether types,
// protocols, addresses, ports).
func (e *Evaluator) criteria(data []byte, wire uint32) bool {
	p := e.p
	v := e.vals
	unknown := false
	for _, i := range p.singles {
		v[i] = evalCrit(&p.Criteria[i], data, wire)
		unknown = unknown || v[i] == vAbort
	}
	for gi := range p.groups {
		g := &p.groups[gi]
		x, ok := uint32(0), false
		if off, aok := address(data, g.load, 0); aok {
			x, ok = load(data, off, g.load.Size)
		}
		if !ok {
			for _, id := range g.members {
				v[id] = vAbort
			}
			unknown = true
			continue
		}
		x &= g.mask
		if g.byK == nil {
			for j, id := range g.members {
				if x == g.ks[j] {
					v[id] = vTrue
				} else {
					v[id] = vFalse
				}
			}
			continue
		}
		for _, id := range g.members {
			v[id] = vFalse
		}
		if id, hit := g.byK[x]; hit {
			v[id] = vTrue
		}
	}
	return unknown
}

// kleene is three-valued logic with vAbort as "unknown".
func kleene(op Op, a, b uint8) uint8 {
	switch op {
	case OpAnd:
		if a == vFalse || b == vFalse {
			return vFalse
		}
		if a == vTrue && b == vTrue {
			return vTrue
		}
		return vAbort
	case OpOr:
		if a == vTrue || b == vTrue {
			return vTrue
		}
		if a == vFalse && b == vFalse {
			return vFalse
		}
		return vAbort
	}
	if a == vAbort {
		return a
	}
	return a ^ 1
}

// decide answers a filter whose three-valued result is unknown (some
// criterion it reads ran past the captured length) by walking its
// optimized control-flow form, as tcpdump's default program would run.
func (e *Evaluator) decide(f int) uint8 {
	if e.p.cfgs[f].walk(e.vals) {
		return vTrue
	}
	return vFalse
}

// cone returns the criteria filter f reads.
func (p *Program) cone(f int) []int32 {
	if c := p.cones[f]; c != nil {
		return c
	}
	nc := int32(len(p.Criteria))
	seen := map[int32]bool{}
	var out []int32
	var walk func(v int32)
	walk = func(v int32) {
		if seen[v] {
			return
		}
		seen[v] = true
		if v < nc {
			out = append(out, v)
			return
		}
		n := p.Nodes[v-nc]
		walk(n.A)
		if n.Op != OpNot {
			walk(n.B)
		}
	}
	walk(p.Roots[f])
	if out == nil {
		out = []int32{}
	}
	p.cones[f] = out
	return out
}

// Match evaluates a program of one filter.
func (e *Evaluator) Match(data []byte, wire uint32) bool {
	var out [1]uint64
	if len(e.p.Roots) > 64 {
		big := make([]uint64, e.p.Words())
		e.Eval(data, wire, big)
		return big[0]&1 != 0
	}
	e.Eval(data, wire, out[:])
	return out[0]&1 != 0
}

func load(data []byte, off uint64, size uint8) (uint32, bool) {
	if off+uint64(size) > uint64(len(data)) {
		return 0, false
	}
	switch size {
	case 1:
		return uint32(data[off]), true
	case 2:
		return uint32(data[off])<<8 | uint32(data[off+1]), true
	}
	return uint32(data[off])<<24 | uint32(data[off+1])<<16 | uint32(data[off+2])<<8 | uint32(data[off+3]), true
}

// address computes a load's packet offset; idx is added to Off.
func address(data []byte, l Load, idx uint32) (uint64, bool) {
	if l.Base == BaseIPv4 {
		if uint64(l.NetOff) >= uint64(len(data)) {
			return 0, false
		}
		x := uint32(data[l.NetOff]&0x0f) * 4
		return uint64(l.NetOff) + uint64(x+l.Off+idx), true
	}
	return uint64(l.Off) + uint64(idx), true
}

func relTrue(rel Rel, a, k uint32) uint8 {
	var b bool
	switch rel {
	case RelEQ:
		b = a == k
	case RelGT:
		b = a > k
	case RelGE:
		b = a >= k
	case RelSet:
		b = a&k != 0
	}
	if b {
		return vTrue
	}
	return vFalse
}

func evalCrit(c *Criterion, data []byte, wire uint32) uint8 {
	switch {
	case c.Const:
		return uint8(c.K)
	case c.Len:
		return relTrue(c.Rel, wire, c.K)
	case c.expr != nil:
		a, ok := evalArith(c.expr.l, data, wire)
		if !ok {
			return vAbort
		}
		b, ok := evalArith(c.expr.r, data, wire)
		if !ok {
			return vAbort
		}
		return relTrue(c.expr.rel, a, b)
	}
	off, ok := address(data, c.Load, 0)
	if !ok {
		return vAbort
	}
	x, ok := load(data, off, c.Load.Size)
	if !ok {
		return vAbort
	}
	return relTrue(c.Rel, x&c.Mask, c.K)
}

func evalArith(e *arith, data []byte, wire uint32) (uint32, bool) {
	switch e.op {
	case aConst:
		return e.k, true
	case aLen:
		return wire, true
	case aLoad:
		var idx uint32
		if e.a != nil {
			var ok bool
			if idx, ok = evalArith(e.a, data, wire); !ok {
				return 0, false
			}
		}
		off, ok := address(data, e.load, idx)
		if !ok {
			return 0, false
		}
		return load(data, off, e.load.Size)
	case aNeg:
		a, ok := evalArith(e.a, data, wire)
		return -a, ok
	}
	a, ok := evalArith(e.a, data, wire)
	if !ok {
		return 0, false
	}
	b, ok := evalArith(e.b, data, wire)
	if !ok {
		return 0, false
	}
	switch e.op {
	case aAdd:
		return a + b, true
	case aSub:
		return a - b, true
	case aMul:
		return a * b, true
	case aDiv:
		if b == 0 {
			return 0, false
		}
		return a / b, true
	case aMod:
		if b == 0 {
			return 0, false
		}
		return a % b, true
	case aAnd:
		return a & b, true
	case aOr:
		return a | b, true
	case aXor:
		return a ^ b, true
	case aLsh:
		return a << (b & 31), true
	case aRsh:
		return a >> (b & 31), true
	}
	return 0, false
}
