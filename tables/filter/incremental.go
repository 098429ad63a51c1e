package filter

import (
	"fmt"
	"sync"
)

// Incremental compilation. Parsing a filter, generating its tree and
// emulating libpcap's optimizer on its control-flow form (cfg.go) is most
// of the cost of compiling a set, and none of it depends on the other
// filters: a filter's graph is hash-consed structurally, so its criteria,
// sub-predicates and control-flow form are the same alone as in any set,
// up to numbering. A Compiler keeps each expression's compiled unit, so
// that a set that differs from the last by one filter compiles that
// filter alone and assembles the rest from the units: every criterion
// once across the units (by canonical text, kept with the unit), every
// sub-predicate once, each form's blocks renumbered; then the per-set
// structures (equality groups, the filter index, the range index, the
// byte plan), which are linear in the set. The assembled Program is the
// one Compile would give (the same numbering: criteria in first-seen
// order, then nodes in post-order), and stays immutable: evaluators of
// the previous set keep running on it.

// unit is one filter compiled alone: values number its criteria first,
// then its nodes, as in a Program.
type unit struct {
	crits []Criterion
	keys  []string // canonical text of each criterion (its identity)
	nodes []Node
	root  int32
	cfg   *cfg   // over crits
	form  string // a BPF program's canonical text ("" for an expression)
	cut   []interval
}

// Compiler compiles sets of filters for one link type and keeps each
// expression's compiled unit for the next set. It is safe for concurrent
// use: mu guards only the map of units (units themselves are immutable),
// so compiling one filter is not held up by another goroutine assembling
// a large set (the live filters' side path, datapath/filters).
type Compiler struct {
	link      uint32
	bigEndian bool
	names     *Names
	mu        sync.Mutex
	units     map[string]*unit // by expression; guarded by mu
}

// maxIdleUnits: the cache is dropped when it holds this many more units
// than the last set of more than one filter used (deleted filters' units).
const maxIdleUnits = 4096

// NewCompiler returns a compiler for one link type; names resolves port
// and protocol names (nil: the system's).
func NewCompiler(link uint32, bigEndian bool, names *Names) *Compiler {
	if names == nil {
		names = SystemNames()
	}
	return &Compiler{link: link, bigEndian: bigEndian, names: names, units: map[string]*unit{}}
}

// Compile compiles a set of filters, compiling only the expressions it
// has not compiled before.
func (c *Compiler) Compile(specs []Spec) (*Program, error) {
	units := make([]*unit, len(specs))
	seen := make(map[string]bool, len(specs))
	for _, s := range specs {
		if !nameRE.MatchString(s.Name) {
			return nil, &CompileError{s.Name, s.Expr, fmt.Errorf("bad filter name (letters, digits, _ . - only)")}
		}
		if seen[s.Name] {
			return nil, &CompileError{s.Name, s.Expr, fmt.Errorf("duplicate filter name")}
		}
		seen[s.Name] = true
	}
	c.mu.Lock()
	missing := false
	for i, s := range specs {
		units[i] = c.units[s.Expr]
		missing = missing || units[i] == nil
	}
	c.mu.Unlock()
	if missing {
		// Compiled outside the lock; two goroutines compiling one
		// expression at once both get a correct unit, the map keeps one.
		fresh := map[string]*unit{}
		for i, s := range specs {
			if units[i] != nil {
				continue
			}
			u := fresh[s.Expr]
			if u == nil {
				var err error
				if u, err = compileUnit(s.Expr, c.link, c.bigEndian, c.names); err != nil {
					return nil, &CompileError{s.Name, s.Expr, err}
				}
				fresh[s.Expr] = u
			}
			units[i] = u
		}
		c.mu.Lock()
		for e, u := range fresh {
			c.units[e] = u
		}
		c.mu.Unlock()
	}
	if len(specs) > 1 {
		c.mu.Lock()
		if len(c.units) > len(specs)+maxIdleUnits {
			c.units = make(map[string]*unit, len(specs))
			for i, s := range specs {
				c.units[s.Expr] = units[i]
			}
		}
		c.mu.Unlock()
	}
	return assemble(specs, units, c.link, c.bigEndian), nil
}

// assemble builds the Program of a set from its filters' units.
func assemble(specs []Spec, units []*unit, link uint32, bigEndian bool) *Program {
	prog := &Program{Link: link, BigEndian: bigEndian, Names: make([]string, len(specs)), Exprs: make([]string, len(specs))}
	for i, s := range specs {
		prog.Names[i], prog.Exprs[i] = s.Name, s.Expr
	}
	nc0, nn0 := 0, 0
	for _, u := range units {
		nc0, nn0 = nc0+len(u.crits), nn0+len(u.nodes)
	}
	b := &builder{crit: make(map[string]int32, nc0), node: make(map[Node]int32, nn0),
		crits: make([]Criterion, 0, nc0), keys: make([]string, 0, nc0), nodes: make([]Node, 0, nn0)}
	// Criteria first, so that values number criteria before nodes.
	critMaps := make([][]int32, len(units))
	done := map[*unit]int{} // a unit of several filters is mapped once
	for i, u := range units {
		if j, ok := done[u]; ok {
			critMaps[i] = critMaps[j]
			continue
		}
		done[u] = i
		m := make([]int32, len(u.crits))
		for j := range u.crits {
			k := u.keys[j]
			id, ok := b.crit[k]
			if !ok {
				id = int32(len(b.crits))
				b.crits = append(b.crits, u.crits[j])
				b.keys = append(b.keys, k)
				b.crit[k] = id
			}
			m[j] = id
		}
		critMaps[i] = m
	}
	// Then nodes, in each unit's order (post-order): builder references,
	// a criterion >= 0, node i as -(i+1).
	refs := make([][]int32, len(units))
	roots := make([]int32, len(units))
	for i, u := range units {
		if j := done[u]; j != i {
			roots[i] = roots[j]
			continue
		}
		ncl := int32(len(u.crits))
		ref := make([]int32, len(u.nodes))
		val := func(v int32) int32 {
			if v < ncl {
				return critMaps[i][v]
			}
			return ref[v-ncl]
		}
		for j, n := range u.nodes {
			nn := Node{Op: n.Op, A: val(n.A)}
			if n.Op != OpNot {
				nn.B = val(n.B)
			}
			ref[j] = b.nodeID(nn)
		}
		refs[i] = ref
		roots[i] = val(u.root)
	}
	nc := int32(len(b.crits))
	conv := func(r int32) int32 {
		if r < 0 {
			return -r - 1 + nc
		}
		return r
	}
	prog.Criteria, prog.Nodes = b.crits, b.nodes
	for i := range prog.Nodes {
		n := &prog.Nodes[i]
		n.A = conv(n.A)
		if n.Op != OpNot {
			n.B = conv(n.B)
		}
	}
	prog.Roots = make([]int32, len(units))
	for i := range roots {
		prog.Roots[i] = conv(roots[i])
	}
	prog.cfgs = make([]*cfg, len(units))
	prog.canon = make([]int32, len(units))
	prog.cuts = make([][]interval, len(units))
	for i, u := range units {
		prog.cuts[i] = u.cut
	}
	type formKey struct {
		root int32
		bpf  string
	}
	byRoot := map[formKey]int32{}
	dupIdx := map[int32]int{} // canon -> its dupsOf entry
	cfgOf := map[*unit]*cfg{}
	for i, u := range units {
		// Filters of one boolean graph (the same expression, on other
		// ports or under other names) share one control-flow form, walked
		// once per packet; a BPF program's form is its own program.
		fk := formKey{root: prog.Roots[i], bpf: u.form}
		if j, ok := byRoot[fk]; ok {
			prog.cfgs[i], prog.canon[i] = prog.cfgs[j], j
			prog.dups = append(prog.dups, int32(i))
			k, ok := dupIdx[j]
			if !ok {
				k = len(prog.dupsOf)
				dupIdx[j] = k
				prog.dupsOf = append(prog.dupsOf, dupSet{canon: j})
			}
			prog.dupsOf[k].fs = append(prog.dupsOf[k].fs, uint32(i))
			continue
		}
		byRoot[fk], prog.canon[i] = int32(i), int32(i)
		if g := cfgOf[u]; g != nil {
			prog.cfgs[i] = g
			continue
		}
		g := &cfg{nodes: make([]cnode, len(u.cfg.nodes)), root: u.cfg.root}
		m := critMaps[i]
		for j, n := range u.cfg.nodes {
			g.nodes[j] = cnode{crit: m[n.crit], jt: n.jt, jf: n.jf}
		}
		for _, c := range u.cfg.pre {
			g.pre = append(g.pre, m[c])
		}
		prog.cfgs[i], cfgOf[u] = g, g
	}
	prog.Plan = plan(prog.Criteria)
	prog.group()
	prog.buildIndex()
	prog.flatten()
	return prog
}
