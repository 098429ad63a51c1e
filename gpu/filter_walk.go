package gpu

import (
	"sort"

	"github.com/gswitch/gswitch/tables/filter"
)

// The walk form of gPF filtering (kernel gpf_walk, and its CPU twin
// WalkEvaluator): each filter runs its control-flow form (the program
// tcpdump would run: filter.Layout's CFG words), criteria computed as
// the walk reaches them, and an index over equality tests skips the
// filters that cannot accept a packet — tables/filter's Evaluator.Eval,
// with an index of its own built here from the layout words alone.
//
// # The index
//
// A field is a plain load (base, IPv4 header offset, offset, size) and
// its mask. Walking the control-flow form from the root, each accepting
// path bounds some fields: a true equality test to one value, true and
// false > and >= tests to an interval (a path whose bounds of a field
// contradict is taken by no packet, and is dropped). Each accepting path
// is guarded by one of its bounded fields of at most walkMaxWidth values:
// a selective one (tested against at least walkMinCard constants across
// the set: addresses, ports, VLAN ids) if it has one, else any (ether
// types, protocols); the narrowest, ties to the most constants (the
// enumeration stops at walkMaxPaths accepting paths or walkMaxSteps
// blocks visited: a long chain of diamonds has exponentially many). A packet
// that takes the path has its value of that field in the path's interval
// (a load that fails makes the walk reject). So a filter every accepting
// path of which is guarded need only be walked for packets whose value of
// one of its guard fields lies in that guard's interval: it is listed
// under each such (field, value); the others (more than walkMaxPaths
// accepting paths, a path with no bounded field, a field past the
// walkMaxFields most used) are walked for every packet.
//
// A packet looks its value of each indexed field up in the field's hash
// table (open addressing, linear probing; a 4 Kibit presence bitmap per
// field first) and walks the filters listed. A filter listed under
// several fields would be reached more than once: reached through field
// k, it is skipped when an earlier field's value lies in one of its
// guards for that field (it was walked there). TestWalkEvaluatorEqualsEval
// and bench/filter's TestWalkTwinOnSynthetic check the twin against
// filter.Evaluator.Eval packet by packet, and that no filter is accepted
// twice.

const (
	walkMinCard   = 8       // distinct constants that make a field selective (addresses, ports, not ether types)
	walkMaxWidth  = 4096    // values of a path's guard interval, at most
	walkMaxPaths  = 512     // accepting paths of a filter, at most
	walkMaxSteps  = 1 << 16 // blocks visited enumerating a filter's paths, at most (the paths of a DAG can be exponentially many)
	walkMaxFields = 16      // indexed fields (the kernel keeps their values in shared memory)
	// WalkDedupWords words make a dedupe entry: field, low, high.
	WalkDedupWords = 3
	// WalkFieldWords words describe an indexed field: load bits (w0 of
	// its criteria: base<<8 | size<<16), IPv4 header offset, offset,
	// mask, the word offset of its hash table in Table, the table's size
	// less one (a power of two less one).
	WalkFieldWords = 6
	// WalkSlotWords words make a hash slot: key, first, end (of its
	// filters in IDs; first == end: an empty slot).
	WalkSlotWords = 3
)

// WalkIndex is the index of a layout, as word arrays for the device.
type WalkIndex struct {
	Unindexed []uint32 // filters walked for every packet
	Fields    []uint32 // WalkFieldWords per indexed field
	Table     []uint32 // the fields' hash tables, WalkSlotWords per slot
	IDs       []uint32 // the filters of each slot
	Present   []uint32 // 128 words per field: bit walkHash(x)>>20 set when x may be in its table
	DedupOff  []uint32 // per filter: its first entry in Dedup (nf+1 words)
	Dedup     []uint32 // (field, low, high) triples: the filter's guards
}

type walkField struct {
	w0, netoff, off, mask uint32
}

func fieldLess(x, y walkField) bool {
	if x.off != y.off {
		return x.off < y.off
	}
	if x.netoff != y.netoff {
		return x.netoff < y.netoff
	}
	if x.w0 != y.w0 {
		return x.w0 < y.w0
	}
	return x.mask < y.mask
}

// walkGuard: the packet's value of a field lies in [lo, hi].
type walkGuard struct {
	fl     walkField
	lo, hi uint32
}

// walkHash is the slot hash of a field value (the kernel's too).
func walkHash(x uint32) uint32 { return (x * 2654435761) ^ (x >> 16) }

// BuildWalkIndex builds the index of l.
func BuildWalkIndex(l *filter.Layout) *WalkIndex {
	nf := int(l.Header[filter.HdrFilters])
	crit := func(c uint32) []uint32 { return l.Criteria[int(c)*filter.CritWords : int(c+1)*filter.CritWords] }
	// A field's constants: of its ==, > and >= tests.
	eqField := func(c uint32) (walkField, uint32, bool) {
		w := crit(c)
		if w[0]&0xf != filter.CritLoad || w[0]>>4&0xf > 2 {
			return walkField{}, 0, false
		}
		return walkField{w[0] & 0xffff0f00, w[1], w[2], w[3]}, w[4], true
	}
	// Distinct constants per field across the set.
	card := map[walkField]map[uint32]bool{}
	type node struct{ crit, jt, jf uint32 }
	nodes := func(f int) (uint32, []node) {
		ix := l.CFGIndex[f*filter.CFGIndexWords:]
		first, count, root := ix[0], ix[1], ix[2]
		ns := make([]node, count)
		for i := range ns {
			w := l.CFGNodes[int(first+uint32(i))*filter.CFGNodeWords:]
			ns[i] = node{w[0], w[1], w[2]}
		}
		return root, ns
	}
	for f := 0; f < nf; f++ {
		_, ns := nodes(f)
		for _, n := range ns {
			if fl, k, ok := eqField(n.crit); ok {
				if card[fl] == nil {
					card[fl] = map[uint32]bool{}
				}
				card[fl][k] = true
			}
		}
	}
	// Each accepting path of a filter bounds some fields: a true equality
	// to one value, true and false > and >= tests to an interval (a path
	// whose bounds of a field contradict is taken by no packet). Each path
	// is guarded by one field of at most walkMaxWidth values: one tested
	// against at least walkMinCard constants across the set if it has
	// one, the narrowest, ties to the most constants: the packet's
	// value of it lies in the path's interval. A filter every accepting
	// path of which is guarded is listed under those (field, value)
	// pairs; paths past walkMaxPaths, or one unguarded, leave it walked
	// always.
	type bound struct{ lo, hi uint32 }
	guards := make([][]walkGuard, nf)
	use := map[walkField]int{}
	for f := 0; f < nf; f++ {
		root, ns := nodes(f)
		var es []walkGuard
		seenG := map[walkGuard]bool{}
		paths, steps, ok := 0, 0, true
		state := map[walkField]bound{}
		var dfs func(id uint32)
		dfs = func(id uint32) {
			if steps++; !ok || steps > walkMaxSteps {
				ok = false
				return
			}
			switch id {
			case filter.CFGReject:
				return
			case filter.CFGAccept:
				if paths++; paths > walkMaxPaths {
					ok = false
					return
				}
				var best walkField
				bw, found := uint64(0), false
				for fl, b := range state {
					w := uint64(b.hi) - uint64(b.lo) + 1
					if w > walkMaxWidth {
						continue
					}
					sel, bsel := len(card[fl]) >= walkMinCard, len(card[best]) >= walkMinCard
					if !found || (sel && !bsel) || (sel == bsel && (w < bw || (w == bw && (len(card[fl]) > len(card[best]) ||
						(len(card[fl]) == len(card[best]) && fieldLess(fl, best)))))) {
						best, bw, found = fl, w, true
					}
				}
				if !found {
					ok = false
					return
				}
				g := walkGuard{best, state[best].lo, state[best].hi}
				if !seenG[g] {
					seenG[g] = true
					es = append(es, g)
				}
				return
			}
			if int(id) >= len(ns) {
				ok = false
				return
			}
			n := ns[id]
			w := crit(n.crit)
			if w[0]&0xf != filter.CritLoad || w[0]>>4&0xf > 2 {
				dfs(n.jt)
				dfs(n.jf)
				return
			}
			fl, k, rel := walkField{w[0] & 0xffff0f00, w[1], w[2], w[3]}, w[4], w[0]>>4&0xf
			old, had := state[fl]
			cur := old
			if !had {
				cur = bound{0, ^uint32(0)}
			}
			try := func(b bound, next uint32) {
				if b.lo > b.hi {
					return // no packet takes this branch with the bounds above
				}
				state[fl] = b
				dfs(next)
			}
			switch rel {
			case 0: // ==
				if k >= cur.lo && k <= cur.hi {
					try(bound{k, k}, n.jt)
				}
				try(cur, n.jf)
			case 1: // >
				if k != ^uint32(0) {
					try(bound{max(cur.lo, k+1), cur.hi}, n.jt)
				}
				try(bound{cur.lo, min(cur.hi, k)}, n.jf)
			case 2: // >=
				try(bound{max(cur.lo, k), cur.hi}, n.jt)
				if k != 0 {
					try(bound{cur.lo, min(cur.hi, k-1)}, n.jf)
				}
			}
			if had {
				state[fl] = old
			} else {
				delete(state, fl)
			}
		}
		dfs(root)
		if !ok || len(es) == 0 {
			continue
		}
		guards[f] = es
		seenFl := map[walkField]bool{}
		for _, e := range es {
			if !seenFl[e.fl] {
				seenFl[e.fl] = true
				use[e.fl]++
			}
		}
	}
	// The fields that guard the most filters, at most walkMaxFields; a
	// filter guarded through another field is walked always.
	var fields []walkField
	for fl := range use {
		fields = append(fields, fl)
	}
	sort.Slice(fields, func(a, b int) bool {
		if use[fields[a]] != use[fields[b]] {
			return use[fields[a]] > use[fields[b]]
		}
		return fieldLess(fields[a], fields[b])
	})
	if len(fields) > walkMaxFields {
		fields = fields[:walkMaxFields]
	}
	fieldIx := map[walkField]int{}
	for i, fl := range fields {
		fieldIx[fl] = i
	}
	ix := &WalkIndex{DedupOff: make([]uint32, nf+1)}
	lists := make([]map[uint32][]uint32, len(fields))
	for i := range lists {
		lists[i] = map[uint32][]uint32{}
	}
	for f := 0; f < nf; f++ {
		ok := len(guards[f]) > 0
		for _, e := range guards[f] {
			if _, in := fieldIx[e.fl]; !in {
				ok = false
			}
		}
		ix.DedupOff[f] = uint32(len(ix.Dedup) / WalkDedupWords)
		if !ok {
			ix.Unindexed = append(ix.Unindexed, uint32(f))
			continue
		}
		listed := map[[2]uint32]bool{}
		for _, e := range guards[f] {
			k := fieldIx[e.fl]
			for v := uint64(e.lo); v <= uint64(e.hi); v++ {
				if key := [2]uint32{uint32(k), uint32(v)}; !listed[key] {
					listed[key] = true
					lists[k][uint32(v)] = append(lists[k][uint32(v)], uint32(f))
				}
			}
			ix.Dedup = append(ix.Dedup, uint32(k), e.lo, e.hi)
		}
	}
	ix.DedupOff[nf] = uint32(len(ix.Dedup) / WalkDedupWords)
	for k, fl := range fields {
		keys := make([]uint32, 0, len(lists[k]))
		for key := range lists[k] {
			keys = append(keys, key)
		}
		sort.Slice(keys, func(a, b int) bool { return keys[a] < keys[b] })
		size := uint32(4)
		for size < 2*uint32(len(keys)) {
			size *= 2
		}
		tab := make([]uint32, WalkSlotWords*size)
		for _, key := range keys {
			h := walkHash(key) & (size - 1)
			for tab[h*WalkSlotWords+1] != tab[h*WalkSlotWords+2] {
				h = (h + 1) & (size - 1)
			}
			first := uint32(len(ix.IDs))
			ix.IDs = append(ix.IDs, lists[k][key]...)
			tab[h*WalkSlotWords], tab[h*WalkSlotWords+1], tab[h*WalkSlotWords+2] = key, first, uint32(len(ix.IDs))
		}
		present := make([]uint32, 128)
		for _, key := range keys {
			h := walkHash(key) >> 20
			present[h/32] |= 1 << (h % 32)
		}
		ix.Present = append(ix.Present, present...)
		ix.Fields = append(ix.Fields, fl.w0, fl.netoff, fl.off, fl.mask, uint32(len(ix.Table)), size-1)
		ix.Table = append(ix.Table, tab...)
	}
	return ix
}

// lookup returns the filters of field k's slot of x.
func (ix *WalkIndex) lookup(k int, x uint32) []uint32 {
	fw := ix.Fields[k*WalkFieldWords:]
	base, mask := fw[4], fw[5]
	for h := walkHash(x) & mask; ; h = (h + 1) & mask {
		s := ix.Table[base+h*WalkSlotWords:]
		if s[1] == s[2] {
			return nil
		}
		if s[0] == x {
			return ix.IDs[s[1]:s[2]]
		}
	}
}

// WalkEvaluator is the CPU twin of kernels gpf_walk and gpf_walk_v1: the
// same words, the same (packet, filter) pairs walked with the same
// guards (the kernels walk a field's pairs later, queued, or at once; the
// order of walks changes no answer), the same criteria.
type WalkEvaluator struct {
	l     *filter.Layout
	ix    *WalkIndex
	val   []uint32
	ok    []bool
	stack []uint32
	dups  int // accepts of a filter already accepted (the dedupe failed)
}

// NewWalkEvaluator returns the twin for l and its index.
func NewWalkEvaluator(l *filter.Layout, ix *WalkIndex) *WalkEvaluator {
	nk := len(ix.Fields) / WalkFieldWords
	return &WalkEvaluator{l: l, ix: ix, val: make([]uint32, nk), ok: make([]bool, nk)}
}

// Eval sets out's bit f for each filter f that accepts the packet (data:
// its captured bytes, or the first of them a reduced row holds; wire: its
// length on the wire).
func (we *WalkEvaluator) Eval(data []byte, wire uint32, out []uint64) {
	nf := int(we.l.Header[filter.HdrFilters])
	clear(out[:(nf+63)/64])
	for _, f := range we.ix.Unindexed {
		if we.walk(f, data, wire) {
			out[f/64] |= 1 << (f % 64)
		}
	}
	ix := we.ix
	for k := range we.val {
		fw := ix.Fields[k*WalkFieldWords:]
		off, ok := walkAddr(data, fw[0]>>8&0xff, fw[1], fw[2], 0)
		var x uint32
		if ok {
			x, ok = walkLoad(data, off, fw[0]>>16&0xff)
		}
		x &= fw[3]
		we.val[k], we.ok[k] = x, ok
		if h := walkHash(x) >> 20; !ok || ix.Present[k*128+int(h/32)]>>(h%32)&1 == 0 {
			continue
		}
	next:
		for _, f := range ix.lookup(k, x) {
			for p := ix.DedupOff[f]; p < ix.DedupOff[f+1]; p++ {
				d := ix.Dedup[p*WalkDedupWords:]
				if k2 := int(d[0]); k2 < k && we.ok[k2] && we.val[k2] >= d[1] && we.val[k2] <= d[2] {
					continue next // walked through field k2
				}
			}
			if we.walk(f, data, wire) {
				if out[f/64]>>(f%64)&1 != 0 {
					we.dups++
				}
				out[f/64] |= 1 << (f % 64)
			}
		}
	}
}

// walk runs filter f's control-flow form.
func (we *WalkEvaluator) walk(f uint32, data []byte, wire uint32) bool {
	l := we.l
	ixw := l.CFGIndex[int(f)*filter.CFGIndexWords:]
	first, id, pre := ixw[0], ixw[2], ixw[3]
	if pre != filter.CFGReject && we.crit(pre, data, wire) == 2 {
		return false
	}
	for id != filter.CFGAccept && id != filter.CFGReject {
		n := l.CFGNodes[int(first+id)*filter.CFGNodeWords:]
		switch we.crit(n[0], data, wire) {
		case 1:
			id = n[1]
		case 0:
			id = n[2]
		default:
			return false
		}
	}
	return id == filter.CFGAccept
}

func walkLoad(data []byte, off uint64, size uint32) (uint32, bool) {
	if off+uint64(size) > uint64(len(data)) {
		return 0, false
	}
	b := data[off:]
	switch size {
	case 1:
		return uint32(b[0]), true
	case 2:
		return uint32(b[0])<<8 | uint32(b[1]), true
	}
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]), true
}

func walkAddr(data []byte, base, netoff, off, idx uint32) (uint64, bool) {
	if base == uint32(filter.BaseIPv4) {
		if uint64(netoff) >= uint64(len(data)) {
			return 0, false
		}
		x := uint32(data[netoff]&0x0f) * 4
		return uint64(netoff) + uint64(x+off+idx), true
	}
	return uint64(off) + uint64(idx), true
}

func walkRel(rel, a, k uint32) uint8 {
	var b bool
	switch rel {
	case 0:
		b = a == k
	case 1:
		b = a > k
	case 2:
		b = a >= k
	case 3:
		b = a&k != 0
	}
	if b {
		return 1
	}
	return 0
}

// crit is the kernel's criterion: 0 false, 1 true, 2 unknown.
func (we *WalkEvaluator) crit(c uint32, data []byte, wire uint32) uint8 {
	w := we.l.Criteria[int(c)*filter.CritWords:]
	rel := w[0] >> 4 & 0xf
	switch w[0] & 0xf {
	case filter.CritConst:
		return uint8(w[4])
	case filter.CritLen:
		return walkRel(rel, wire, w[4])
	case filter.CritExpr:
		return we.expr(w[4], w[5], rel, data, wire)
	}
	off, ok := walkAddr(data, w[0]>>8&0xff, w[1], w[2], 0)
	if !ok {
		return 2
	}
	x, ok := walkLoad(data, off, w[0]>>16&0xff)
	if !ok {
		return 2
	}
	return walkRel(rel, x&w[3], w[4])
}

const walkMaxStack = 32 // the kernel's

func (we *WalkEvaluator) expr(pc0, npc, rel uint32, data []byte, wire uint32) uint8 {
	st := we.stack[:0]
	for pc := pc0; pc < pc0+npc; pc++ {
		in := we.l.Exprs[int(pc)*filter.ExprWords:]
		op := in[0] & 0xff
		switch {
		case op == filter.ExprConst || op == filter.ExprLen:
			if len(st) >= walkMaxStack {
				return 2
			}
			v := in[1]
			if op == filter.ExprLen {
				v = wire
			}
			st = append(st, v)
		case op == filter.ExprLoad:
			if len(st) < 1 {
				return 2
			}
			off, ok := walkAddr(data, in[0]>>8&0xff, in[2], in[1], st[len(st)-1])
			if !ok {
				return 2
			}
			x, ok := walkLoad(data, off, in[0]>>16&0xff)
			if !ok {
				return 2
			}
			st[len(st)-1] = x
		case op == filter.ExprNeg:
			if len(st) < 1 {
				return 2
			}
			st[len(st)-1] = -st[len(st)-1]
		default:
			if len(st) < 2 {
				return 2
			}
			a, b := st[len(st)-2], st[len(st)-1]
			var r uint32
			switch op {
			case 3:
				r = a + b
			case 4:
				r = a - b
			case 5:
				r = a * b
			case 6, 7:
				if b == 0 {
					return 2
				}
				if op == 6 {
					r = a / b
				} else {
					r = a % b
				}
			case 8:
				r = a & b
			case 9:
				r = a | b
			case 10:
				r = a ^ b
			case 11:
				if b < 32 {
					r = a << b
				}
			case 12:
				if b < 32 {
					r = a >> b
				}
			default:
				return 2
			}
			st = st[:len(st)-1]
			st[len(st)-1] = r
		}
	}
	we.stack = st
	if len(st) < 2 {
		return 2
	}
	return walkRel(rel, st[len(st)-2], st[len(st)-1])
}
