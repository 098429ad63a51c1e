package filter

import "fmt"

// The control-flow form of a filter, as libpcap's optimized BPF program:
// used for packets on which some criterion is unknown (a load past the
// captured length). libpcap's optimizer removes a test, and so its load,
// when both of its branches lead to the same block, and threads a jump
// past a test whose outcome a dominating test already decided (the same
// load compared with the same constant, or an equality known true with
// another constant). Such a removed load no longer rejects a truncated
// packet, so tcpdump's default (optimized) count depends on it; walking
// this form reproduces it.

// cnode is a CFG test: criterion crit, then jt or jf. Leaves are the
// indices cAccept and cReject.
type cnode struct {
	crit   int32
	jt, jf int32
}

const (
	cReject int32 = -1
	cAccept int32 = -2
)

type cfg struct {
	nodes []cnode
	root  int32
	pre   []int32 // criteria whose loads run before the root's test
}

type cfgBuilder struct {
	crits []Criterion
	nodes []cnode
	index map[cnode]int32
	akeys []string
}

// node returns the block testing c with branches t and f, shared with an
// identical block. A block whose branches agree is kept: libpcap's
// optimizer skips it from its in-edges (opt_j), or from the root
// (opt_root, keeping its loads), not when it is generated.
func (b *cfgBuilder) node(c, t, f int32) int32 {
	k := cnode{c, t, f}
	if b.index == nil { // generating: every block is new, as in gencode
		b.nodes = append(b.nodes, k)
		return int32(len(b.nodes) - 1)
	}
	if id, ok := b.index[k]; ok {
		return id
	}
	id := int32(len(b.nodes))
	b.nodes = append(b.nodes, k)
	b.index[k] = id
	return id
}

// build lays out the boolean tree with continuations t and f (evaluation
// order as libpcap's gen_and and gen_or).
func (b *cfgBuilder) build(p *Program, v int32, t, f int32) int32 {
	nc := int32(len(p.Criteria))
	if v < nc {
		c := &p.Criteria[v]
		if c.Const {
			if c.K == 1 {
				return t
			}
			return f
		}
		return b.node(v, t, f)
	}
	n := p.Nodes[v-nc]
	switch n.Op {
	case OpAnd:
		return b.build(p, n.A, b.build(p, n.B, t, f), f)
	case OpOr:
		return b.build(p, n.A, t, b.build(p, n.B, t, f))
	}
	return b.build(p, n.A, f, t)
}

// akey is the identity of the value a criterion compares (libpcap's value
// number of the accumulator).
func akey(c *Criterion) string {
	switch {
	case c.Len && !c.Relational:
		return "len"
	case c.expr != nil, c.Len:
		return c.String()
	case c.Relational:
		return c.String()
	}
	return fmt.Sprintf("%s&%#x", c.Load, c.Mask)
}

// fact is an edge: the block node's test had outcome sense. libpcap's
// optimizer knows the edges that dominate an edge (not the outcomes of
// equal tests on different paths).
type fact struct {
	node  int32
	sense bool
}

// decided returns the outcome of criterion c implied by the dominating
// edges (libpcap's fold_edge): the same test, or an equality test of the
// same value with another constant known true.
func (b *cfgBuilder) decided(facts map[fact]bool, c int32) (bool, bool) {
	cc := &b.crits[c]
	for f := range facts {
		oc := b.nodes[f.node].crit
		if oc == c {
			return f.sense, true
		}
	}
	if cc.Rel != RelEQ || cc.expr != nil || cc.Relational {
		return false, false
	}
	for f := range facts {
		if !f.sense {
			continue
		}
		oc := b.nodes[f.node].crit
		o := &b.crits[oc]
		if o.Rel == RelEQ && o.expr == nil && !o.Relational && o.K != cc.K && b.akeys[oc] == b.akeys[c] {
			return false, true
		}
	}
	return false, false
}

func (p *Program) buildCFG(f int) *cfg {
	if len(p.akeys) != len(p.Criteria) { // once per program, shared by every filter's form
		p.akeys = make([]string, len(p.Criteria))
		for i := range p.Criteria {
			p.akeys[i] = akey(&p.Criteria[i])
		}
	}
	b := &cfgBuilder{crits: p.Criteria, akeys: p.akeys}
	root := b.build(p, p.Roots[f], cAccept, cReject)
	o := &optimizer{b: b, root: root}
	for iter := 0; iter < 100; iter++ {
		o.done = true
		o.analyse()
		for _, lv := range o.levels[1:] {
			for _, id := range lv {
				o.optJ(id, true)
				o.optJ(id, false)
			}
		}
		o.inEdges()
		for _, lv := range o.levels[1:] {
			for _, id := range lv {
				o.pullup(id, true)
				o.pullup(id, false)
			}
		}
		if o.done {
			break
		}
	}
	// intern_blocks: merge blocks that became identical (a block whose
	// branches then agree is skipped by its in-edges, as opt_j would).
	old := b.nodes
	nb := &cfgBuilder{crits: b.crits, index: map[cnode]int32{}, akeys: b.akeys}
	memo := map[int32]int32{}
	var copyNode func(id int32) int32
	copyNode = func(id int32) int32 {
		if id < 0 {
			return id
		}
		if r, ok := memo[id]; ok {
			return r
		}
		n := old[id]
		r := nb.node(n.crit, copyNode(n.jt), copyNode(n.jf))
		memo[id] = r
		return r
	}
	// opt_root: skip a root whose branches agree, but keep its loads (they
	// run before the new root's test) unless the program is a bare return.
	root = copyNode(o.root)
	var pre []int32
	if root >= 0 && nb.nodes[root].jt == nb.nodes[root].jf {
		first := nb.nodes[root].crit
		for root >= 0 && nb.nodes[root].jt == nb.nodes[root].jf {
			root = nb.nodes[root].jt
		}
		if root >= 0 {
			pre = []int32{first}
		}
	}
	return &cfg{nodes: nb.nodes, root: root, pre: pre}
}

// optimizer mirrors the jump optimizations of libpcap's optimize.c that
// change which loads run: opt_j (threading an edge past a test its
// dominating edges decide, or past a test whose branches agree) and
// or_pullup/and_pullup (moving a test of the value the predecessors test
// up a chain of tests with a common target), iterated to a fixed point
// level by level as opt_loop does.
type optimizer struct {
	b       *cfgBuilder
	root    int32
	done    bool
	levels  [][]int32
	dom     map[int32]map[int32]bool
	facts   map[int32]map[fact]bool // known at a node: intersection over in-edges
	in      map[int32][]slot
	visited map[int32]bool
}

// slot is a pointer to a block: the jt (t) or jf of node, or the root.
type slot struct {
	node int32
	t    bool
	root bool
}

func (o *optimizer) get(s slot) int32 {
	switch {
	case s.root:
		return o.root
	case s.t:
		return o.b.nodes[s.node].jt
	}
	return o.b.nodes[s.node].jf
}

func (o *optimizer) set(s slot, v int32) {
	switch {
	case s.root:
		o.root = v
	case s.t:
		o.b.nodes[s.node].jt = v
	default:
		o.b.nodes[s.node].jf = v
	}
}

// analyse computes levels (leaves 0), dominators and known facts.
func (o *optimizer) analyse() {
	nodes := o.b.nodes
	level := map[int32]int{}
	var lists [][]int32
	var find func(id int32) int
	find = func(id int32) int {
		if id < 0 {
			return 0
		}
		if l, ok := level[id]; ok {
			return l
		}
		level[id] = 0 // a DAG: no cycles
		l := 1 + max(find(nodes[id].jt), find(nodes[id].jf))
		level[id] = l
		for len(lists) <= l {
			lists = append(lists, nil)
		}
		lists[l] = append([]int32{id}, lists[l]...)
		return l
	}
	find(o.root)
	if len(lists) == 0 {
		lists = [][]int32{nil}
	}
	o.levels = lists
	order := topo(nodes, o.root)
	o.dom = map[int32]map[int32]bool{}
	o.facts = map[int32]map[fact]bool{}
	if o.root < 0 {
		return
	}
	o.dom[o.root] = map[int32]bool{o.root: true}
	o.facts[o.root] = map[fact]bool{}
	for _, id := range order {
		n := nodes[id]
		for _, e := range [2]struct {
			to    int32
			sense bool
		}{{n.jt, true}, {n.jf, false}} {
			if e.to < 0 {
				continue
			}
			ef := o.edgeFacts(id, e.sense)
			if cur, ok := o.facts[e.to]; ok {
				for k := range cur {
					if !ef[k] {
						delete(cur, k)
					}
				}
				d := o.dom[e.to]
				for k := range d {
					if k != e.to && !o.dom[id][k] {
						delete(d, k)
					}
				}
			} else {
				o.facts[e.to] = ef
				d := map[int32]bool{e.to: true}
				for k := range o.dom[id] {
					d[k] = true
				}
				o.dom[e.to] = d
			}
		}
	}
}

func (o *optimizer) edgeFacts(id int32, sense bool) map[fact]bool {
	ef := map[fact]bool{}
	for k := range o.facts[id] {
		ef[k] = true
	}
	ef[fact{id, sense}] = true
	return ef
}

// optJ is opt_j on the edge of node id (its jt when t).
func (o *optimizer) optJ(id int32, t bool) {
	s := slot{node: id, t: t}
	succ := o.get(s)
	if succ < 0 {
		return
	}
	if n := o.b.nodes[succ]; n.jt == n.jf {
		succ = n.jt
		o.set(s, succ)
		o.done = false
	}
	ef := o.edgeFacts(id, t)
	for succ >= 0 {
		n := o.b.nodes[succ]
		v, ok := o.b.decided(ef, n.crit)
		if !ok {
			return
		}
		if v {
			succ = n.jt
		} else {
			succ = n.jf
		}
		o.set(s, succ)
		o.done = false
	}
}

// inEdges lists each block's in-edges in libpcap's order (find_inedges
// prepends, walking levels from the root down, jt before jf).
func (o *optimizer) inEdges() {
	o.in = map[int32][]slot{}
	for l := len(o.levels) - 1; l > 0; l-- {
		for _, id := range o.levels[l] {
			for _, t := range []bool{true, false} {
				s := slot{node: id, t: t}
				if to := o.get(s); to >= 0 {
					o.in[to] = append([]slot{s}, o.in[to]...)
				}
			}
		}
	}
}

func (o *optimizer) val(id int32) string { return o.b.akeys[o.b.nodes[id].crit] }

// pullup is or_pullup (or=true: chains of jf with a common jt) and
// and_pullup (chains of jt with a common jf).
func (o *optimizer) pullup(b int32, isOr bool) {
	in := o.in[b]
	if len(in) == 0 {
		return
	}
	val := o.val(in[0].node)
	for _, e := range in[1:] {
		if o.val(e.node) != val {
			return
		}
	}
	common := func(id int32) int32 {
		if isOr {
			return o.b.nodes[id].jt
		}
		return o.b.nodes[id].jf
	}
	down := func(id int32) slot { return slot{node: id, t: !isOr} }
	diffp := in[0]
	atTop := true
	for {
		d := o.get(diffp)
		if d < 0 || common(d) != common(b) || !o.dom[d][b] {
			return
		}
		if o.val(d) != val {
			break
		}
		diffp = down(d)
		atTop = false
	}
	samep := down(o.get(diffp))
	for {
		sm := o.get(samep)
		if sm < 0 || common(sm) != common(b) || !o.dom[sm][b] {
			return
		}
		if o.val(sm) == val {
			break
		}
		samep = down(sm)
	}
	pull := o.get(samep)
	o.set(samep, o.get(down(pull)))
	o.set(down(pull), o.get(diffp))
	if atTop {
		for _, e := range in {
			o.set(e, pull)
		}
	} else {
		o.set(diffp, pull)
	}
	o.done = false
}

// topo orders the nodes reachable from root so that every edge goes
// forward.
func topo(nodes []cnode, root int32) []int32 {
	var out []int32
	state := map[int32]uint8{}
	var visit func(id int32)
	visit = func(id int32) {
		if id < 0 || state[id] != 0 {
			return
		}
		state[id] = 1
		visit(nodes[id].jt)
		visit(nodes[id].jf)
		out = append(out, id)
	}
	visit(root)
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// walk runs the CFG on criteria values: an unknown value on the path
// rejects the packet.
func (g *cfg) walk(vals []uint8) bool {
	for _, c := range g.pre {
		if vals[c] == vAbort {
			return false
		}
	}
	id := g.root
	for id >= 0 {
		n := &g.nodes[id]
		switch vals[n.crit] {
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
