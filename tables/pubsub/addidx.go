package pubsub

// The index pass of a large add, name by name in parallel. Each name's
// structures are its own (nameIdx), so the names can be filled at once:
// the counted constraints are grouped by name first (each goroutine a
// contiguous chunk of the filters, its lists per name in input order), and
// then each name is filled by one goroutine from its chunks' lists in chunk
// order — the input order, as the sequential pass — bulk-inserted into its
// hashed structures (a bulk per name, bulk.go) and fixed (sorted). The
// result is the sequential pass's (TestParallelBuildIdentical).

// idxRef is a counted constraint: its filter's index in the add (high 32
// bits) and its index in the filter.
type idxRef uint64

// indexByName fills the indexes with the counted constraints of filters
// fs (filter i in slot sl[i], its rank in t.meta) on w goroutines (t.mu
// held exclusively). useBulk says to bulk-insert the hashed structures.
func (t *Table) indexByName(fs []Filter, sl []uint32, w int, useBulk bool) {
	b := chunks(len(fs), w)
	nc := len(b) - 1
	type local struct {
		names  map[string]int32
		list   []string
		refs   [][]idxRef // per local name
		nInts  []int      // per local name: hashed integer keys
		nStrs  []int      // per local name: hashed string keys
		nameTo []int32    // local name -> global
	}
	ls := make([]local, nc)
	eachChunk(b, func(c, lo, hi int) {
		l := &ls[c]
		l.names = map[string]int32{}
		lastName, last := "", int32(-1)
		for fi := lo; fi < hi; fi++ {
			f := fs[fi]
			best := t.meta[sl[fi]].best
			for k := range f {
				cn := &f[k]
				if rank(cn) != best {
					continue
				}
				if last < 0 || cn.Name != lastName {
					id, ok := l.names[cn.Name]
					if !ok {
						id = int32(len(l.list))
						l.names[cn.Name] = id
						l.list = append(l.list, cn.Name)
						l.refs = append(l.refs, make([]idxRef, 0, 64))
						l.nInts = append(l.nInts, 0)
						l.nStrs = append(l.nStrs, 0)
					}
					last, lastName = id, cn.Name
				}
				l.refs[last] = append(l.refs[last], idxRef(uint64(fi)<<32|uint64(k)))
				switch bulkKind(cn) {
				case -1:
				case bkEqInt:
					l.nInts[last]++
				default:
					l.nStrs[last]++
				}
			}
		}
	})
	// The names, numbered in order of first appearance; new ones created.
	type global struct {
		ni           *nameIdx
		nInts, nStrs int
	}
	var gs []global
	gid := map[string]int32{}
	for c := range ls {
		l := &ls[c]
		l.nameTo = make([]int32, len(l.list))
		for i, n := range l.list {
			g, ok := gid[n]
			if !ok {
				g = int32(len(gs))
				gid[n] = g
				ni := t.names[n]
				if ni == nil {
					ni = newNameIdx(n)
					t.names[n] = ni
				}
				gs = append(gs, global{ni: ni})
			}
			l.nameTo[i] = g
			gs[g].nInts += l.nInts[i]
			gs[g].nStrs += l.nStrs[i]
		}
	}
	// Per global name, its list in each chunk (nil where none).
	per := make([][]idxRef, len(gs)*nc)
	for c := range ls {
		for i, g := range ls[c].nameTo {
			per[int(g)*nc+c] = ls[c].refs[i]
		}
	}
	parallelEach(len(gs), w, func(g int) {
		ni := gs[g].ni
		var bk *bulk
		if useBulk {
			bk = newBulk(gs[g].nInts, gs[g].nStrs)
			bk.seq = true
		}
		for _, refs := range per[g*nc : (g+1)*nc] {
			for _, r := range refs {
				fi, k := int(r>>32), int(r&0xffffffff)
				if bk != nil {
					ni.insertBulk(&fs[fi][k], sl[fi], bk)
				} else {
					ni.insert(&fs[fi][k], sl[fi])
				}
			}
		}
		if bk != nil {
			bk.flush()
		}
		ni.fix(t.dead, !useBulk)
	})
}
