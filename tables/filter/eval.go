package filter

// Tri-state values of criteria and sub-predicates.
const (
	vFalse uint8 = iota
	vTrue
	vAbort // unknown: a load past the captured length (or a division by zero)
)

// Evaluator evaluates a Program on packets. It holds the per-packet
// scratch (criterion values and the epoch that marks them computed for the
// current packet); one Evaluator per goroutine.
type Evaluator struct {
	p     *Program
	vals  []uint8
	epoch []uint32
	seen  []uint32 // per filter: walked in this packet (epoch)
	cur   uint32
	// Per equality group: its masked value in this packet (gepoch ==
	// cur), or gok false for a load past the captured length.
	gval   []uint32
	gok    []bool
	gepoch []uint32
	one    *cfg // a program of one filter: its form (walkAlone); nil: several

	// tracing: note every byte range the evaluation reads into trace
	// (Memo's misses: memo.go), as off<<4 | size.
	tracing bool
	trace   []uint64
}

// note records a read of data[off:off+size] (tracing only; out of line,
// so that the loads that call it stay inlined).
//
//go:noinline
func (e *Evaluator) note(off uint64, size uint8) {
	e.trace = append(e.trace, off<<4|uint64(size))
}

// noteNet records the IPv4 header length byte that address reads for l
// (tracing only).
//
//go:noinline
func (e *Evaluator) noteNet(data []byte, l Load) {
	if l.Base == BaseIPv4 && uint64(l.NetOff) < uint64(len(data)) {
		e.note(uint64(l.NetOff), 1)
	}
}

// NewEvaluator returns an evaluator of p.
func NewEvaluator(p *Program) *Evaluator {
	e := &Evaluator{p: p, vals: make([]uint8, len(p.Criteria)+len(p.Nodes)), epoch: make([]uint32, len(p.Criteria)),
		seen: make([]uint32, len(p.Roots)), gval: make([]uint32, len(p.groups)), gok: make([]bool, len(p.groups)),
		gepoch: make([]uint32, len(p.groups))}
	if len(p.Roots) == 1 && len(p.cfgs) == 1 {
		e.one = p.cfgs[0]
	}
	return e
}

// Words is the number of uint64 words of a result bitmap.
func (p *Program) Words() int { return (len(p.Roots) + 63) / 64 }

// Eval evaluates every filter on one packet: data is the captured bytes,
// wire the length on the wire. Bit i of out (len >= Words()) is set when
// filter i accepts the packet.
//
// This is the CPU path: each filter runs its optimized control-flow form
// (the program tcpdump would run), and a criterion is computed the first
// time any filter reaches it in this packet and then shared: every
// criterion at most once per packet, an equality group (one load, many
// constants) at once. EvalStages is the device's three-stage form; both
// give the same answers (FuzzEval checks it).
func (e *Evaluator) Eval(data []byte, wire uint32, out []uint64) {
	if e.one != nil && !e.tracing {
		// One filter: nothing to share between filters, so no marks;
		// its form runs as tcpdump's program would. (A branch here, not
		// in evalMany: there it slowed many filters by a tenth.)
		out[0] = 0
		if e.walkAlone(e.one, data, wire) {
			out[0] = 1
		}
		return
	}
	if e.tracing {
		e.evalAll(data, wire, out)
		return
	}
	e.evalMany(data, wire, out)
}

// evalAll is evalMany without the indexes: every filter walked (each
// graph once). Memo's traced evaluations use it: an index loads its value
// in every packet, also where none of the filters it lists would read it
// (an IPv6 port's bytes in an IPv4 packet's payload), while the walks read
// only what decides their filters; the indexes skip only walks that would
// reject, so the answers are the same.
func (e *Evaluator) evalAll(data []byte, wire uint32, out []uint64) {
	p := e.p
	e.cur++
	if e.cur == 0 {
		clear(e.epoch)
		clear(e.seen)
		clear(e.gepoch)
		e.cur = 1
	}
	clear(out[:p.Words()])
	for f := range p.Roots {
		if p.canon[f] == int32(f) {
			e.walk(f, data, wire, out)
		}
	}
	p.copyDups(out)
}

// evalMany is Eval for a program of several filters.
func (e *Evaluator) evalMany(data []byte, wire uint32, out []uint64) {
	p := e.p
	e.cur++
	if e.cur == 0 { // wrapped: forget every mark
		clear(e.epoch)
		clear(e.seen)
		clear(e.gepoch)
		e.cur = 1
	}
	clear(out[:p.Words()])
	if len(p.index) == 0 && len(p.ranges) == 0 {
		for _, f := range p.unindexed {
			e.walk(int(f), data, wire, out)
		}
		p.copyDups(out)
		return
	}
	// Indexed filters: only those listed under the values of this packet.
	// Each index's group is loaded here first in the packet (one index per
	// group), inline: its value is recorded for the walks' get.
	n := uint64(len(data))
	for i := range p.index {
		ix := &p.index[i]
		ld := &ix.load
		off, ok := uint64(ld.Off), true
		if ld.Base == BaseIPv4 {
			if uint64(ld.NetOff) >= n {
				ok = false
			} else {
				off = uint64(ld.NetOff) + uint64(uint32(data[ld.NetOff]&0x0f)*4+ld.Off)
			}
		}
		var x uint32
		if ok && off+uint64(ld.Size) <= n {
			switch ld.Size {
			case 1:
				x = uint32(data[off])
			case 2:
				x = uint32(data[off])<<8 | uint32(data[off+1])
			default:
				x = uint32(data[off])<<24 | uint32(data[off+1])<<16 | uint32(data[off+2])<<8 | uint32(data[off+3])
			}
			x &= ix.mask
		} else {
			ok = false
		}
		gi := ix.group
		e.gval[gi], e.gok[gi], e.gepoch[gi] = x, ok, e.cur
		if !ok {
			continue // unknown: no indexed test of this group is true
		}
		if h := hashKey(x); ix.present[h/64]>>(h%64)&1 == 0 {
			continue // no indexed filter tests this value
		}
		for _, f := range ix.lookup(x) {
			if e.seen[f] != e.cur {
				e.seen[f] = e.cur
				e.walk(int(f), data, wire, out)
			}
		}
	}
	// Range-indexed filters: those whose intervals hold this packet's value.
	for i := range p.ranges {
		ri := &p.ranges[i]
		ld := &ri.key.load
		off := uint64(ld.Off)
		if ld.Base == BaseIPv4 {
			if uint64(ld.NetOff) >= n {
				continue
			}
			off = uint64(ld.NetOff) + uint64(uint32(data[ld.NetOff]&0x0f)*4+ld.Off)
		}
		if off+uint64(ld.Size) > n {
			continue // unknown: no bound of this value is true
		}
		var x uint32
		if ld.Size == 1 {
			x = uint32(data[off])
		} else {
			x = uint32(data[off])<<8 | uint32(data[off+1]) // a range key is at most 16 bits
		}
		x &= ri.key.mask
		if ri.present[x/64]>>(x%64)&1 == 0 {
			continue
		}
		for _, f := range ri.fs[ri.offs[x]:ri.offs[x+1]] {
			if e.seen[f] != e.cur {
				e.seen[f] = e.cur
				e.walk(int(f), data, wire, out)
			}
		}
	}
	for _, f := range p.unindexed {
		e.walk(int(f), data, wire, out)
	}
	p.copyDups(out)
}

// copyDups sets the bits of filters that share another's graph.
func (p *Program) copyDups(out []uint64) {
	for i := range p.dupsOf {
		d := &p.dupsOf[i]
		c := uint32(d.canon)
		if out[c/64]>>(c%64)&1 == 0 {
			continue
		}
		for _, f := range d.fs {
			out[f/64] |= 1 << (f % 64)
		}
	}
}

// walkForm is a filter's control-flow form as Eval's walk reads it: the
// form's nodes lie in Program.flat from its root on, with jumps made
// absolute, so that the walks of many filters read one contiguous array
// and no per-filter object.
type walkForm struct {
	root int32 // the root's index in flat; cAccept or cReject
	pre  int32 // a criterion whose load runs before the root's test; -1: none
}

// flatten lays the filters' forms out in p.flat (a form shared by
// several filters once). It leaves p.forms nil, and the walk on the
// cfgs, for a form with more than one pre-test (none is built so).
func (p *Program) flatten() {
	n := 0
	for _, g := range p.cfgs {
		if len(g.pre) > 1 {
			return
		}
		n += len(g.nodes)
	}
	p.forms = make([]walkForm, len(p.cfgs))
	p.flat = make([]cnode, 0, n)
	at := map[*cfg]int32{}
	for f, g := range p.cfgs {
		base, ok := at[g]
		if !ok {
			base = int32(len(p.flat))
			at[g] = base
			for _, c := range g.nodes {
				if c.jt >= 0 {
					c.jt += base
				}
				if c.jf >= 0 {
					c.jf += base
				}
				p.flat = append(p.flat, c)
			}
		}
		w := walkForm{root: g.root, pre: -1}
		if w.root >= 0 {
			w.root += base
		}
		if len(g.pre) == 1 {
			w.pre = g.pre[0]
		}
		p.forms[f] = w
	}
}

// walk runs filter f's optimized control-flow form.
func (e *Evaluator) walk(f int, data []byte, wire uint32, out []uint64) {
	if e.p.forms == nil {
		e.walkCFG(f, data, wire, out)
		return
	}
	w := e.p.forms[f]
	if w.pre >= 0 && e.get(w.pre, data, wire) == vAbort {
		return
	}
	cur, epoch, vals := e.cur, e.epoch, e.vals
	critGroup, critK, gepoch, flat := e.p.critGroup, e.p.critK, e.gepoch, e.p.flat
	id := w.root
	for id >= 0 {
		n := &flat[id]
		c := n.crit
		var v uint8
		if epoch[c] == cur {
			v = vals[c]
		} else if gi := critGroup[c]; gi >= 0 && gepoch[gi] == cur {
			// The group's value is loaded (by the index, usually): compare.
			switch {
			case !e.gok[gi]:
				v = vAbort
			case e.gval[gi] == critK[c]:
				v = vTrue
			default:
				v = vFalse
			}
			vals[c], epoch[c] = v, cur
		} else {
			v = e.get(c, data, wire)
		}
		switch v {
		case vTrue:
			id = n.jt
		case vFalse:
			id = n.jf
		default:
			return
		}
	}
	if id == cAccept {
		out[f/64] |= 1 << (f % 64)
	}
}

// walkCFG is walk on the filter's cfg itself. Its loop is walk's, written
// twice on purpose: one function over both node slices measured 10–15%
// slower at 100 and 1,000 filters (BenchmarkEval100/1000, 2026-11-26: the
// loop is no longer compiled into walk).
func (e *Evaluator) walkCFG(f int, data []byte, wire uint32, out []uint64) {
	g := e.p.cfgs[f]
	cur, epoch, vals := e.cur, e.epoch, e.vals
	for _, c := range g.pre {
		if e.get(c, data, wire) == vAbort {
			return
		}
	}
	critGroup, critK, gepoch := e.p.critGroup, e.p.critK, e.gepoch
	id := g.root
	for id >= 0 {
		n := &g.nodes[id]
		c := n.crit
		var v uint8
		if epoch[c] == cur {
			v = vals[c]
		} else if gi := critGroup[c]; gi >= 0 && gepoch[gi] == cur {
			// The group's value is loaded (by the index, usually): compare.
			switch {
			case !e.gok[gi]:
				v = vAbort
			case e.gval[gi] == critK[c]:
				v = vTrue
			default:
				v = vFalse
			}
			vals[c], epoch[c] = v, cur
		} else {
			v = e.get(c, data, wire)
		}
		switch v {
		case vTrue:
			id = n.jt
		case vFalse:
			id = n.jf
		default:
			return
		}
	}
	if id == cAccept {
		out[f/64] |= 1 << (f % 64)
	}
}

// walkAlone runs a control-flow form computing each criterion where the
// walk reaches it, without the marks that share criteria between filters
// (a program of one filter). A group member's value is its own load,
// masked and compared: the group's comparison, done alone.
func (e *Evaluator) walkAlone(g *cfg, data []byte, wire uint32) bool {
	crits := e.p.Criteria
	for _, c := range g.pre {
		if evalCrit(&crits[c], data, wire) == vAbort {
			return false
		}
	}
	id := g.root
	for id >= 0 {
		n := &g.nodes[id]
		switch evalCrit(&crits[n.crit], data, wire) {
		case vTrue:
			id = n.jt
		case vFalse:
			id = n.jf
		default:
			return false
		}
	}
	return id == cAccept
}

// get returns criterion c's value for the current packet, computing it (or
// its whole equality group) on first use.
func (e *Evaluator) get(c int32, data []byte, wire uint32) uint8 {
	if e.epoch[c] == e.cur {
		return e.vals[c]
	}
	if g := e.p.critGroup[c]; g >= 0 {
		// One load per group and packet; each member compared when a
		// filter reaches it.
		x, ok := e.groupValue(g, data)
		switch {
		case !ok:
			e.vals[c] = vAbort
		case x == e.p.Criteria[c].K:
			e.vals[c] = vTrue
		default:
			e.vals[c] = vFalse
		}
		e.epoch[c] = e.cur
	} else {
		e.vals[c] = e.crit(&e.p.Criteria[c], data, wire)
		e.epoch[c] = e.cur
	}
	return e.vals[c]
}

// groupValue returns equality group gi's masked value in this packet.
func (e *Evaluator) groupValue(gi int32, data []byte) (uint32, bool) {
	if e.gepoch[gi] == e.cur {
		return e.gval[gi], e.gok[gi]
	}
	g := &e.p.groups[gi]
	x, ok := uint32(0), false
	if e.tracing {
		e.noteNet(data, g.load)
	}
	if off, aok := address(data, g.load, 0); aok {
		if x, ok = load(data, off, g.load.Size); ok && e.tracing {
			e.note(off, g.load.Size)
		}
	}
	x &= g.mask
	e.gval[gi], e.gok[gi], e.gepoch[gi] = x, ok, e.cur
	return x, ok
}

// EvalStages evaluates the filters as gPF's three kernels do: every
// criterion, then every sub-predicate in topological order, then each
// filter's root. A packet on which some criterion is unknown (a load past
// the captured length) is answered per filter by its control-flow form, as
// libpcap's optimizer decides which of those loads remain.
func (e *Evaluator) EvalStages(data []byte, wire uint32, out []uint64) {
	p := e.p
	v := e.vals
	unknown := e.criteria(data, wire)
	for i := range out[:p.Words()] {
		out[i] = 0
	}
	if unknown {
		e.cur++
		if e.cur == 0 {
			clear(e.epoch)
			clear(e.seen)
			clear(e.gepoch)
			e.cur = 1
		}
		for i := range p.Criteria {
			e.epoch[i] = e.cur
		}
		for i := range p.Roots {
			if p.cfgs[i].walk(v) {
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
// is unknown.
func (e *Evaluator) criteria(data []byte, wire uint32) bool {
	p := e.p
	v := e.vals
	unknown := false
	for _, i := range p.singles {
		v[i] = e.crit(&p.Criteria[i], data, wire)
		unknown = unknown || v[i] == vAbort
	}
	for gi := range p.groups {
		if e.evalGroup(&p.groups[gi], data) {
			unknown = true
		}
	}
	return unknown
}

// evalGroup evaluates the equality criteria of one value; it reports
// whether the load ran past the captured length.
func (e *Evaluator) evalGroup(g *eqGroup, data []byte) bool {
	v := e.vals
	x, ok := uint32(0), false
	if e.tracing {
		e.noteNet(data, g.load)
	}
	if off, aok := address(data, g.load, 0); aok {
		if x, ok = load(data, off, g.load.Size); ok && e.tracing {
			e.note(off, g.load.Size)
		}
	}
	if !ok {
		for _, id := range g.members {
			v[id] = vAbort
		}
		return true
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
		return false
	}
	for _, id := range g.members {
		v[id] = vFalse
	}
	if id, hit := g.byK[x]; hit {
		v[id] = vTrue
	}
	return false
}

// Match evaluates a program's first filter.
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

// crit evaluates one criterion on a packet.
func (e *Evaluator) crit(c *Criterion, data []byte, wire uint32) uint8 {
	switch {
	case c.Const:
		return uint8(c.K)
	case c.Len:
		return relTrue(c.Rel, wire, c.K)
	case c.expr != nil:
		a, ok := e.arith(c.expr.l, data, wire)
		if !ok {
			return vAbort
		}
		b, ok := e.arith(c.expr.r, data, wire)
		if !ok {
			return vAbort
		}
		return relTrue(c.expr.rel, a, b)
	}
	if e.tracing {
		e.noteNet(data, c.Load)
	}
	off, ok := address(data, c.Load, 0)
	if !ok {
		return vAbort
	}
	x, ok := load(data, off, c.Load.Size)
	if !ok {
		return vAbort
	}
	if e.tracing {
		e.note(off, c.Load.Size)
	}
	return relTrue(c.Rel, x&c.Mask, c.K)
}

// arith evaluates an arithmetic expression on a packet.
func (e *Evaluator) arith(x *arith, data []byte, wire uint32) (uint32, bool) {
	switch x.op {
	case aConst:
		return x.k, true
	case aLen:
		return wire, true
	case aLoad:
		var idx uint32
		if x.a != nil {
			var ok bool
			if idx, ok = e.arith(x.a, data, wire); !ok {
				return 0, false
			}
		}
		if e.tracing {
			e.noteNet(data, x.load)
		}
		off, ok := address(data, x.load, idx)
		if !ok {
			return 0, false
		}
		v, ok := load(data, off, x.load.Size)
		if ok && e.tracing {
			e.note(off, x.load.Size)
		}
		return v, ok
	case aNeg:
		a, ok := e.arith(x.a, data, wire)
		return -a, ok
	}
	a, ok := e.arith(x.a, data, wire)
	if !ok {
		return 0, false
	}
	b, ok := e.arith(x.b, data, wire)
	if !ok {
		return 0, false
	}
	return alu(x.op, a, b)
}

// evalCrit is crit without tracing, for walkAlone (the checks cost a
// program of one filter a tenth).
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

// evalArith is arith without tracing.
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
	return alu(e.op, a, b)
}

// alu is BPF's arithmetic: 32-bit unsigned, a division or modulo by zero
// rejects the packet (false), a shift by 32 or more gives 0 (libpcap's
// bpf_filter.c; a constant shift above 31 is a compile error).
func alu(op aop, a, b uint32) (uint32, bool) {
	switch op {
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
		return a << b, true
	case aRsh:
		return a >> b, true
	}
	return 0, false
}
