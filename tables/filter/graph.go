package filter

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Spec is one named filter.
type Spec struct {
	Name string
	Expr string
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Op is a sub-predicate's operation.
type Op uint8

const (
	OpAnd Op = iota + 1 // A, then B if A is true
	OpOr                // A, then B if A is false
	OpNot               // not A
)

// Node is a sub-predicate: an operation on two values. Values are numbered
// criteria first (0..len(Criteria)-1), then nodes (len(Criteria)+i).
type Node struct {
	Op   Op
	A, B int32
}

// Range is a byte range [Off, Off+Len) that a criterion reads.
type Range struct{ Off, Len uint32 }

// BytePlan is gPF's packet reduction: the bytes some criterion reads.
// Abs ranges count from the start of the packet; IPv4 ranges from the
// IPv4 transport header whose IPv4 header starts at the key's offset.
// Full is set when a criterion reads at a computed offset (the whole
// captured packet is needed); WireLen when one uses the length on the wire.
type BytePlan struct {
	Abs     []Range
	IPv4    map[uint32][]Range
	Full    bool
	WireLen bool
}

// Program is a compiled set of filters for one link type: every unique
// criterion once, every unique sub-predicate once, one root per filter.
type Program struct {
	Link      uint32
	BigEndian bool
	Names     []string
	Exprs     []string
	Criteria  []Criterion
	Nodes     []Node
	Roots     []int32 // value index of each filter's result
	Plan      BytePlan
	cfgs      []*cfg     // per filter: the optimized control-flow form
	forms     []walkForm // per filter: its form in flat, for Eval's walk (nil: walk cfgs)
	flat      []cnode    // every distinct form's nodes, jumps absolute (eval.go)
	groups    []eqGroup
	singles   []int32  // criteria evaluated one by one
	critGroup []int32  // per criterion: its group, or -1
	critK     []uint32 // per criterion: its constant (Criteria[i].K, packed for the walk)
	index     []groupIndex
	ranges    []rangeIndex // the range index (rangeindex.go)
	indexed   []bool       // per filter: listed in the index
	unindexed []int32      // filters walked on every packet
	canon     []int32      // per filter: the first filter of the same graph (itself if none before)
	dups      []int32      // filters whose canon is another: their bit is copied
	dupsOf    []dupSet
	akeys     []string     // per criterion: the value it tests (cfg.go's akey)
	cuts      [][]interval // per filter: its range cut, when assembled from units
}

// dupSet is a filter and the later filters of the same graph.
type dupSet struct {
	canon int32
	fs    []uint32
}

// eqGroup is the equality criteria of one (load, mask): one load, then a
// comparison with each constant (or one map look-up for large groups).
type eqGroup struct {
	load    Load
	mask    uint32
	members []int32
	ks      []uint32
	byK     map[uint32]int32 // for groups larger than groupMapMin
}

const groupMapMin = 16

func (p *Program) group() {
	type key struct {
		l Load
		m uint32
	}
	idx := map[key]int{}
	var groups []eqGroup
	for i := range p.Criteria {
		c := &p.Criteria[i]
		if c.Const || c.Len || c.expr != nil || c.Rel != RelEQ {
			p.singles = append(p.singles, int32(i))
			continue
		}
		k := key{c.Load, c.Mask}
		gi, ok := idx[k]
		if !ok {
			gi = len(groups)
			idx[k] = gi
			groups = append(groups, eqGroup{load: c.Load, mask: c.Mask})
		}
		g := &groups[gi]
		g.members = append(g.members, int32(i))
		g.ks = append(g.ks, c.K)
	}
	// A group of one is a single criterion.
	kept := groups[:0]
	for _, g := range groups {
		if len(g.members) == 1 {
			p.singles = append(p.singles, g.members[0])
			continue
		}
		kept = append(kept, g)
	}
	groups = kept
	for gi := range groups {
		g := &groups[gi]
		if len(g.members) > groupMapMin {
			g.byK = map[uint32]int32{}
			for j, id := range g.members {
				if _, dup := g.byK[g.ks[j]]; !dup {
					g.byK[g.ks[j]] = id
				}
			}
		}
	}
	p.groups = groups
	p.critK = make([]uint32, len(p.Criteria))
	for i := range p.Criteria {
		p.critK[i] = p.Criteria[i].K
	}
	p.critGroup = make([]int32, len(p.Criteria))
	for i := range p.critGroup {
		p.critGroup[i] = -1
	}
	for gi := range groups {
		for _, id := range groups[gi].members {
			p.critGroup[id] = int32(gi)
		}
	}
}

// CompileError names the filter and the position of the first error.
type CompileError struct {
	Filter string
	Expr   string
	Err    error
}

func (e *CompileError) Error() string {
	return fmt.Sprintf("filter %s: %v", e.Filter, e.Err)
}

func (e *CompileError) Unwrap() error { return e.Err }

// CompileOne compiles a single expression (for checking and for tests).
func CompileOne(expr string, link uint32, bigEndian bool, names *Names) (*Program, error) {
	return Compile([]Spec{{Name: "f", Expr: expr}}, link, bigEndian, names)
}

// Compile compiles filters for packets of one link type (bigEndian says
// the capture was written big-endian, which the NULL link type's address
// family follows). names resolves port and protocol names; nil means the
// system's. A Compiler does the same and keeps each filter's compiled
// form for the next set.
func Compile(specs []Spec, link uint32, bigEndian bool, names *Names) (*Program, error) {
	return NewCompiler(link, bigEndian, names).Compile(specs)
}

// compileUnit compiles one filter alone: its criteria, sub-predicates,
// root and control-flow form, numbered on their own (incremental.go
// renumbers them into a set).
func compileUnit(expr string, link uint32, bigEndian bool, names *Names) (*unit, error) {
	b := &builder{crit: map[string]int32{}, node: map[Node]int32{}, memo: map[*bnode]int32{}, seen: map[*bnode]bool{}}
	var t *bnode
	var lf *lifted
	var err error
	if strings.HasPrefix(expr, BPFPrefix) {
		if lf, err = liftBPF(expr[len(BPFPrefix):], len(BPFPrefix)); err == nil {
			t = lf.tree
		}
	} else {
		t, err = parseFilter(expr, link, bigEndian, names)
	}
	if err != nil {
		return nil, err
	}
	// Criteria first, so that values number criteria before nodes.
	b.collect(t)
	if lf != nil {
		for _, c := range lf.crits {
			b.critID(c)
		}
	}
	root := b.build(t)
	nc := int32(len(b.crits))
	p := &Program{Criteria: b.crits, Nodes: b.nodes, Roots: []int32{root}}
	if root < 0 {
		p.Roots[0] = -root - 1 + nc
	}
	for i := range p.Nodes {
		n := &p.Nodes[i]
		if n.A < 0 {
			n.A = -n.A - 1 + nc
		}
		if n.B < 0 {
			n.B = -n.B - 1 + nc
		}
	}
	u := &unit{crits: p.Criteria, keys: b.keys, nodes: p.Nodes, root: p.Roots[0]}
	if lf != nil {
		u.cfg, u.form = b.liftedCFG(lf), lf.key
		u.cut = p.rangeCut(u.cfg)
		return u, nil
	}
	u.cfg = p.buildCFG(0)
	if u.cfg.root == cReject {
		// tcpdump refuses such a program; so does gswitch.
		return nil, fmt.Errorf("expression rejects all packets")
	}
	// A range cut names loads, not criteria: the same in any set.
	u.cut = p.rangeCut(u.cfg)
	return u, nil
}

type builder struct {
	crits []Criterion
	crit  map[string]int32
	nodes []Node
	node  map[Node]int32
	konst [2]int32
	// A lifted BPF program's boolean form is a DAG (shared sub-DAGs):
	// each of its nodes is collected and built once.
	memo map[*bnode]int32
	seen map[*bnode]bool
	keys []string // per criterion: its canonical text
}

// liftedCFG is a lifted program's control-flow form in the program's
// criteria.
func (b *builder) liftedCFG(lf *lifted) *cfg {
	g := &cfg{nodes: make([]cnode, len(lf.nodes)), root: lf.root}
	for i, n := range lf.nodes {
		g.nodes[i] = cnode{crit: b.critID(lf.crits[n.crit]), jt: n.jt, jf: n.jf}
	}
	return g
}

func (b *builder) collect(n *bnode) {
	if b.seen[n] {
		return
	}
	b.seen[n] = true
	if n.op == bAtom {
		b.critID(n.c)
		return
	}
	b.collect(n.a)
	if n.b != nil {
		b.collect(n.b)
	}
}

func (b *builder) critID(c *Criterion) int32 {
	k := c.String()
	if id, ok := b.crit[k]; ok {
		return id
	}
	id := int32(len(b.crits))
	b.crits = append(b.crits, *c)
	b.keys = append(b.keys, k)
	b.crit[k] = id
	return id
}

// build returns a value reference: >= 0 a criterion, < 0 node -(i+1).
// Constant operands are folded (a constant never aborts, so "true and X"
// is exactly X).
func (b *builder) build(n *bnode) int32 {
	if r, ok := b.memo[n]; ok {
		return r
	}
	r := b.build1(n)
	b.memo[n] = r
	return r
}

func (b *builder) build1(n *bnode) int32 {
	if n.op == bAtom {
		return b.critID(n.c)
	}
	a := b.build(n.a)
	ca, aconst := b.constOf(a)
	if n.op == bNot {
		if aconst {
			return b.constRef(!ca)
		}
		return b.nodeID(Node{Op: OpNot, A: a})
	}
	c := b.build(n.b)
	cc, cconst := b.constOf(c)
	switch {
	case n.op == bAnd && aconst:
		if !ca {
			return a
		}
		return c
	case n.op == bOr && aconst:
		if ca {
			return a
		}
		return c
	case n.op == bAnd && cconst && cc:
		return a
	case n.op == bOr && cconst && !cc:
		return a
	}
	op := OpAnd
	if n.op == bOr {
		op = OpOr
	}
	return b.nodeID(Node{Op: op, A: a, B: c})
}

func (b *builder) constOf(ref int32) (bool, bool) {
	if ref < 0 {
		return false, false
	}
	c := &b.crits[ref]
	return c.K == 1, c.Const
}

func (b *builder) constRef(v bool) int32 {
	return b.critID(&Criterion{Const: true, K: boolK(v)})
}

func (b *builder) nodeID(n Node) int32 {
	if id, ok := b.node[n]; ok {
		return id
	}
	id := -int32(len(b.nodes)) - 1
	b.nodes = append(b.nodes, n)
	b.node[n] = id
	return id
}

func plan(crits []Criterion) BytePlan {
	p := BytePlan{IPv4: map[uint32][]Range{}}
	add := func(l Load) {
		if l.Base == BaseIPv4 {
			p.Abs = append(p.Abs, Range{l.NetOff, 1})
			p.IPv4[l.NetOff] = append(p.IPv4[l.NetOff], Range{l.Off, uint32(l.Size)})
			return
		}
		p.Abs = append(p.Abs, Range{l.Off, uint32(l.Size)})
	}
	var walk func(e *arith)
	walk = func(e *arith) {
		if e == nil {
			return
		}
		switch e.op {
		case aLen:
			p.WireLen = true
		case aLoad:
			if e.a != nil {
				p.Full = true
				walk(e.a)
			} else {
				add(e.load)
			}
		default:
			walk(e.a)
			walk(e.b)
		}
	}
	for i := range crits {
		c := &crits[i]
		switch {
		case c.Const:
		case c.Len:
			p.WireLen = true
		case c.expr != nil:
			walk(c.expr.l)
			walk(c.expr.r)
		default:
			add(c.Load)
		}
	}
	p.Abs = merge(p.Abs)
	for k, v := range p.IPv4 {
		p.IPv4[k] = merge(v)
	}
	return p
}

func merge(rs []Range) []Range {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Off < rs[j].Off })
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && r.Off <= out[n-1].Off+out[n-1].Len {
			if e := r.Off + r.Len; e > out[n-1].Off+out[n-1].Len {
				out[n-1].Len = e - out[n-1].Off
			}
			continue
		}
		out = append(out, r)
	}
	return out
}
