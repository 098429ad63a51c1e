package filter

import "sort"

// The range index. Port ranges ("portrange 1000-1100", "tcp[2:2] >= 1000
// and tcp[2:2] <= 1100") test a 16-bit value against two bounds, which no
// equality group can index. A filter is range-indexed when every path of
// its control-flow form to accept bounds some 16-bit value (the true
// branch of "x >= k" or "x > k", the false branch of one) to an interval
// narrower than rangeMaxWidth: the packet follows exactly one path, so if
// it accepts, that path's value lies in that path's interval. For each
// value it lists the filters whose intervals contain it (a CSR array over
// the 65,536 values, with a bitmap of the values some interval holds), and
// Eval walks only those. As with the group index the walk decides; the
// index only skips filters that would reject.

const (
	rangeMaxWidth = 4096    // widest interval worth indexing
	rangeMaxPaths = 64      // accepting paths a filter may have
	rangeMaxCells = 1 << 22 // (value, filter) entries in all
)

type rangeKey struct {
	load Load
	mask uint32
}

// rangeIndex lists filters by the value of one 16-bit load.
type rangeIndex struct {
	key     rangeKey
	present []uint64 // bit x: some filter's interval holds x
	offs    []uint32 // filters of x: fs[offs[x]:offs[x+1]]
	fs      []int32
}

type interval struct {
	key    rangeKey
	lo, hi uint32
}

// rangeBound reports whether criterion c bounds a 16-bit value.
func rangeBound(c *Criterion) (rangeKey, bool) {
	if c.Const || c.Len || c.expr != nil || (c.Rel != RelGE && c.Rel != RelGT) || c.Load.Size > 2 {
		return rangeKey{}, false
	}
	return rangeKey{c.Load, c.Mask}, true
}

// rangeCut returns one interval per accepting path of filter f's form, or
// nil when some path bounds no value narrowly enough (or there are too
// many paths).
func (p *Program) rangeCut(g *cfg) []interval {
	var out []interval
	type bound struct{ lo, hi uint32 }
	paths, steps := 0, 0
	var walk func(id int32, st map[rangeKey]bound) bool
	walk = func(id int32, st map[rangeKey]bound) bool {
		if steps++; steps > 64*rangeMaxPaths {
			return false // too many paths to enumerate
		}
		if id == cReject {
			return true
		}
		if id == cAccept {
			paths++
			if paths > rangeMaxPaths {
				return false
			}
			for _, b := range st {
				if b.lo > b.hi {
					return true // an infeasible path: its bounds contradict
				}
			}
			best, ok := interval{}, false
			for k, b := range st {
				if b.lo <= b.hi && b.hi-b.lo < rangeMaxWidth && (!ok || b.hi-b.lo < best.hi-best.lo) {
					best, ok = interval{k, b.lo, b.hi}, true
				}
			}
			if !ok {
				return false
			}
			out = append(out, best)
			return true
		}
		n := g.nodes[id]
		c := &p.Criteria[n.crit]
		k, isRange := rangeBound(c)
		if !isRange {
			return walk(n.jt, st) && walk(n.jf, st)
		}
		maxV := uint32(0xffff)
		if c.Load.Size == 1 {
			maxV = 0xff
		}
		maxV &= c.Mask
		cur, had := st[k]
		if !had {
			cur = bound{0, maxV}
		}
		// True: x >= K (GE) or x >= K+1 (GT); false: x <= K-1 or x <= K.
		lo, hi := c.K, c.K
		if c.Rel == RelGT {
			lo++
		} else if hi > 0 {
			hi--
		}
		t, f := cur, cur
		t.lo = max(t.lo, lo)
		f.hi = min(f.hi, hi)
		if c.Rel == RelGE && c.K == 0 { // always true: the false branch is never taken
			f = bound{1, 0}
		}
		if c.Rel == RelGT && c.K >= maxV { // never true
			t = bound{1, 0}
		}
		with := func(b bound) map[rangeKey]bound {
			m := make(map[rangeKey]bound, len(st)+1)
			for kk, v := range st {
				m[kk] = v
			}
			m[k] = b
			return m
		}
		return walk(n.jt, with(t)) && walk(n.jf, with(f))
	}
	if g.root < 0 || !walk(g.root, map[rangeKey]bound{}) {
		return nil
	}
	return out
}

// buildRangeIndex indexes the filters of cuts (filter -> its intervals).
func (p *Program) buildRangeIndex(cuts map[int32][]interval) {
	type fiv struct {
		f      int32
		lo, hi uint32
	}
	ivs := map[rangeKey][]fiv{}
	for f, list := range cuts {
		for _, iv := range list {
			ivs[iv.key] = append(ivs[iv.key], fiv{f, iv.lo, iv.hi})
		}
	}
	keys := make([]rangeKey, 0, len(ivs))
	for k := range ivs {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.load != b.load {
			return a.load.Off < b.load.Off || a.load.Off == b.load.Off && (a.load.Base < b.load.Base ||
				a.load.Base == b.load.Base && (a.load.NetOff < b.load.NetOff || a.load.NetOff == b.load.NetOff && a.load.Size < b.load.Size))
		}
		return a.mask < b.mask
	})
	for _, k := range keys {
		list := ivs[k]
		sort.Slice(list, func(i, j int) bool { return list[i].f < list[j].f || list[i].f == list[j].f && list[i].lo < list[j].lo })
		ri := rangeIndex{key: k, present: make([]uint64, 1<<16/64), offs: make([]uint32, 1<<16+1)}
		counts := make([]uint32, 1<<16)
		last := make([]int32, 1<<16) // last filter counted at x, +1
		for _, iv := range list {
			for x := iv.lo; x <= iv.hi; x++ {
				if last[x] != iv.f+1 {
					last[x] = iv.f + 1
					counts[x]++
				}
			}
		}
		for x := 0; x < 1<<16; x++ {
			ri.offs[x+1] = ri.offs[x] + counts[x]
			if counts[x] > 0 {
				ri.present[x/64] |= 1 << (x % 64)
			}
		}
		ri.fs = make([]int32, ri.offs[1<<16])
		fill := append([]uint32(nil), ri.offs[:1<<16]...)
		clear(last)
		for _, iv := range list {
			for x := iv.lo; x <= iv.hi; x++ {
				if last[x] != iv.f+1 {
					last[x] = iv.f + 1
					ri.fs[fill[x]] = iv.f
					fill[x]++
				}
			}
		}
		p.ranges = append(p.ranges, ri)
	}
}
