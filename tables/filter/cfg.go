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
}

type cfgBuilder struct {
	crits []Criterion
	nodes []cnode
	index map[cnode]int32
	akeys []string
}

func (b *cfgBuilder) node(c, t, f int32) int32 {
	if t == f {
		return t
	}
	k := cnode{c, t, f}
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
	case c.Len:
		return "len"
	case c.expr != nil:
		return c.String()
	}
	return fmt.Sprintf("%s&%#x", c.Load, c.Mask)
}

type fact struct {
	crit  int32
	sense bool
}

// decided returns the outcome of criterion c implied by facts.
func (b *cfgBuilder) decided(facts map[fact]bool, c int32) (bool, bool) {
	if facts[fact{c, true}] {
		return true, true
	}
	if facts[fact{c, false}] {
		return false, true
	}
	cc := &b.crits[c]
	if cc.Rel != RelEQ || cc.expr != nil {
		return false, false
	}
	for f := range facts {
		if !f.sense {
			continue
		}
		o := &b.crits[f.crit]
		if o.Rel == RelEQ && o.expr == nil && o.K != cc.K && b.akeys[f.crit] == b.akeys[c] {
			return false, true
		}
	}
	return false, false
}

func (p *Program) buildCFG(f int) *cfg {
	b := &cfgBuilder{crits: p.Criteria, index: map[cnode]int32{}}
	for i := range p.Criteria {
		b.akeys = append(b.akeys, akey(&p.Criteria[i]))
	}
	root := b.build(p, p.Roots[f], cAccept, cReject)
	for iter := 0; iter < 64; iter++ {
		changed := false
		// Facts at each node: the intersection over its incoming edges.
		facts := map[int32]map[fact]bool{}
		order := topo(b.nodes, root)
		if root >= 0 {
			facts[root] = map[fact]bool{}
		}
		for _, id := range order {
			n := b.nodes[id]
			for _, e := range []struct {
				to    int32
				sense bool
			}{{n.jt, true}, {n.jf, false}} {
				if e.to < 0 {
					continue
				}
				in := map[fact]bool{}
				for k := range facts[id] {
					in[k] = true
				}
				in[fact{n.crit, e.sense}] = true
				if cur, ok := facts[e.to]; ok {
					for k := range cur {
						if !in[k] {
							delete(cur, k)
						}
					}
				} else {
					facts[e.to] = in
				}
			}
		}
		// Thread every edge past decided or branch-free tests.
		thread := func(from int32, sense bool, to int32) int32 {
			ef := map[fact]bool{}
			for k := range facts[from] {
				ef[k] = true
			}
			ef[fact{b.nodes[from].crit, sense}] = true
			for to >= 0 {
				n := b.nodes[to]
				if n.jt == n.jf {
					to = n.jt
					continue
				}
				v, ok := b.decided(ef, n.crit)
				if !ok {
					break
				}
				if v {
					to = n.jt
				} else {
					to = n.jf
				}
			}
			return to
		}
		for _, id := range order {
			n := b.nodes[id]
			jt, jf := thread(id, true, n.jt), thread(id, false, n.jf)
			if jt != n.jt || jf != n.jf {
				b.nodes[id].jt, b.nodes[id].jf = jt, jf
				changed = true
			}
		}
		for root >= 0 && b.nodes[root].jt == b.nodes[root].jf {
			root = b.nodes[root].jt
			changed = true
		}
		// Merge blocks that became identical.
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
		root = copyNode(root)
		if len(nb.nodes) != len(old) {
			changed = true
		}
		b = nb
		if !changed {
			break
		}
	}
	return &cfg{nodes: b.nodes, root: root}
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
