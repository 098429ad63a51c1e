package filter

import "sort"

// The filter index of the CPU path. With many filters most of them test
// one value each against a constant of their own: an address, a port, a
// VLAN id. A filter is indexed when a set of its equality tests cuts every
// path of its control-flow form to accept: it can accept a packet only if
// one of them is true. Each such test's group (one load, many constants)
// is then computed once per packet and its value looked up: only the
// filters listed under that value are walked, with the unindexed ones.
// The walk itself decides, so the index only skips filters that would
// reject; FuzzEval and TestIndexedSetEqualsUnindexed check it.

// indexMinGroup is the number of constants a group needs to be indexed
// on. Groups are tried largest first, so small ones (ether types, IP
// protocols) serve only filters that no larger group cuts; with the
// bitmap in front of the map even they pay: a walk costs more than a
// look-up that skips it.
const indexMinGroup = 2

type groupIndex struct {
	group int32
	load  Load // the group's load and mask, copied here for Eval's loop
	mask  uint32
	// present has bit hashKey(v) set for every v indexed: most packets'
	// values are in no filter, and the bitmap (512 bytes, in cache) says
	// so without a look-up.
	present []uint64
	// slots is an open-addressing table (linear probing, 2^k slots, at
	// most half full) from a value to its filters fs[lo:hi]; an empty
	// slot has hi == 0 (every listed value has a filter).
	slots []indexSlot
	shift uint32 // 32 - k
	fs    []int32
}

type indexSlot struct{ key, lo, hi uint32 }

// lookup returns the filters indexed under value x.
func (ix *groupIndex) lookup(x uint32) []int32 {
	mask := uint32(len(ix.slots) - 1)
	for i := (x * 2654435761) >> ix.shift; ; i = (i + 1) & mask {
		sl := &ix.slots[i]
		if sl.hi == 0 {
			return nil
		}
		if sl.key == x {
			return ix.fs[sl.lo:sl.hi]
		}
	}
}

// newGroupIndex lays out the filters of each value of group gi.
func newGroupIndex(gi int32, g *eqGroup, m map[uint32][]int32) groupIndex {
	ix := groupIndex{group: gi, load: g.load, mask: g.mask, present: make([]uint64, presentBits/64)}
	k := uint32(1)
	for 1<<k < 2*len(m) {
		k++
	}
	ix.slots, ix.shift = make([]indexSlot, 1<<k), 32-k
	vals := make([]uint32, 0, len(m))
	for v := range m {
		vals = append(vals, v)
	}
	sort.Slice(vals, func(i, j int) bool { return vals[i] < vals[j] })
	for _, v := range vals {
		h := hashKey(v)
		ix.present[h/64] |= 1 << (h % 64)
		lo := uint32(len(ix.fs))
		ix.fs = append(ix.fs, m[v]...)
		mask := uint32(len(ix.slots) - 1)
		i := (v * 2654435761) >> ix.shift
		for ix.slots[i].hi != 0 {
			i = (i + 1) & mask
		}
		ix.slots[i] = indexSlot{key: v, lo: lo, hi: uint32(len(ix.fs))}
	}
	return ix
}

// presentBits is the size of an index group's bitmap: 4 Kibit (512
// bytes), so that a dozen groups' bitmaps stay in the L1 cache.
const presentBits = 1 << 12

// hashKey maps a value to a bit of groupIndex.present (Fibonacci
// hashing); a false positive costs one map look-up.
func hashKey(v uint32) uint32 { return (v * 2654435761) >> 20 }

// buildIndex chooses, for each filter, the largest groups whose tests cut
// its accepting paths.
func (p *Program) buildIndex() {
	p.indexed = make([]bool, len(p.Roots))
	if len(p.Roots)-len(p.dups) < 2 {
		for i := range p.Roots {
			if p.canon[i] == int32(i) {
				p.unindexed = append(p.unindexed, int32(i))
			}
		}
		return
	}
	byGroup := map[int32]map[uint32][]int32{}
	rangeCuts := map[int32][]interval{}
	cells := 0
	// Per group: the filter (+1) that listed it (seen) or put it in its
	// cut (in); one array for all filters instead of maps per filter.
	seenBy := make([]int32, len(p.groups))
	inBy := make([]int32, len(p.groups))
	for f, g := range p.cfgs {
		if p.canon[f] != int32(f) {
			continue // walked as its canon
		}
		var ivs []interval
		if p.cuts != nil {
			ivs = p.cuts[f] // computed with the filter's unit (incremental.go)
		} else {
			ivs = p.rangeCut(g)
		}
		if ivs != nil {
			w := 0
			for _, iv := range ivs {
				w += int(iv.hi-iv.lo) + 1
			}
			if cells+w <= rangeMaxCells {
				cells += w
				rangeCuts[int32(f)] = ivs
				p.indexed[f] = true
				continue
			}
		}
		var gs []int32
		mark := int32(f) + 1
		for _, n := range g.nodes {
			gi := p.critGroup[n.crit]
			if gi >= 0 && seenBy[gi] != mark && len(p.groups[gi].members) >= indexMinGroup {
				seenBy[gi] = mark
				gs = append(gs, gi)
			}
		}
		sort.Slice(gs, func(i, j int) bool {
			a, b := len(p.groups[gs[i]].members), len(p.groups[gs[j]].members)
			return a > b || a == b && gs[i] < gs[j]
		})
		in := func(gi int32) bool { return gi >= 0 && inBy[gi] == mark }
		cut := false
		for _, gi := range gs {
			inBy[gi] = mark
			if g.cutBy(func(c int32) bool { return in(p.critGroup[c]) }) {
				cut = true
				break
			}
		}
		if !cut {
			p.unindexed = append(p.unindexed, int32(f))
			continue
		}
		p.indexed[f] = true
		for _, n := range g.nodes {
			gi := p.critGroup[n.crit]
			if !in(gi) {
				continue
			}
			m := byGroup[gi]
			if m == nil {
				m = map[uint32][]int32{}
				byGroup[gi] = m
			}
			k := p.Criteria[n.crit].K
			if l := m[k]; len(l) == 0 || l[len(l)-1] != int32(f) {
				m[k] = append(l, int32(f))
			}
		}
	}
	p.buildRangeIndex(rangeCuts)
	for gi, m := range byGroup {
		p.index = append(p.index, newGroupIndex(gi, &p.groups[gi], m))
	}
	sort.Slice(p.index, func(i, j int) bool { return p.index[i].group < p.index[j].group })
}

// cutBy reports whether every path from the root to accept takes the true
// branch of a block whose criterion is in the set.
func (g *cfg) cutBy(in func(c int32) bool) bool {
	seen := make([]bool, len(g.nodes))
	var reach func(id int32) bool
	reach = func(id int32) bool {
		if id == cAccept {
			return true
		}
		if id < 0 || seen[id] {
			return false
		}
		seen[id] = true
		n := g.nodes[id]
		if !in(n.crit) && reach(n.jt) {
			return true
		}
		return reach(n.jf)
	}
	return !reach(g.root)
}
