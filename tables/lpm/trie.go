package lpm

import (
	"fmt"

	"github.com/gswitch/gswitch/tables/bubble"
)

// level is one level of the trie: its slice of the image and the CPU-side
// metadata kept beside it (never on the device).
type level struct {
	off, s   int      // the level consumes address bits [off, off+s)
	w        []uint32 // the level's region of the image (read here, written through trie.put)
	nodes    int      // nodes in use, garbage included
	capacity int      // nodes the region has room for
	garbage  int      // nodes (not the root) whose subtree holds no prefix

	plen   []uint8  // per entry: length of the prefix whose next hop a leaf holds
	defNH  []uint32 // per node: the next hop pushed into it from its parent entry
	defLen []uint8  // per node: that prefix's length
	count  []int32  // per node: prefixes stored in its subtree
}

// trie is one generation of the table: the image and its metadata. A rebuild
// makes a new trie.
type trie struct {
	fam     Family
	strides []int
	lv      []level
	lvOf    []uint8 // prefix length -> level that holds it
	img     *bubble.Image
	m       *bubble.Mirror // nil while building off-line: writes go straight to img
}

// newTrie allocates an empty trie with the given strides and per-level node
// capacities (level 0 always has exactly one node, the root).
func newTrie(fam Family, strides, capacity []int) (*trie, error) {
	tr := &trie{fam: fam, strides: append([]int(nil), strides...), lv: make([]level, len(strides))}
	names := []string{"meta"}
	sizes := []int{metaStrides + len(strides)}
	off := 0
	for i, s := range strides {
		c, nodes := capacity[i], 0
		if i == 0 {
			c, nodes = 1, 1 // the root
		}
		if c > maxNodes || c<<s > maxLevelWords {
			return nil, fmt.Errorf("lpm: level %d: %d nodes of 2^%d entries: %w", i, c, s, ErrTooLarge)
		}
		tr.lv[i] = level{off: off, s: s, capacity: c, nodes: nodes}
		names, sizes = append(names, fmt.Sprintf("level%d", i)), append(sizes, c<<s)
		off += s
	}
	tr.img = bubble.NewImage(names, sizes)
	tr.writeMeta()
	for i := range tr.lv {
		tr.lv[i].alloc(tr.img.Words[1+i])
	}
	tr.lvOf = make([]uint8, fam.Width()+1)
	for i, l := range tr.lv {
		for b := l.off + 1; b <= l.off+l.s; b++ {
			tr.lvOf[b] = uint8(i)
		}
	}
	return tr, nil
}

// alloc attaches the level's region w and allocates its metadata.
func (l *level) alloc(w []uint32) {
	l.w = w
	l.plen = make([]uint8, len(w))
	l.defNH = make([]uint32, l.capacity)
	l.defLen = make([]uint8, l.capacity)
	l.count = make([]int32, l.capacity)
}

func (tr *trie) writeMeta() {
	meta := tr.img.Words[0]
	meta[0], meta[metaFamily], meta[metaLevels] = metaMagic, uint32(tr.fam), uint32(len(tr.strides))
	for i, s := range tr.strides {
		meta[metaStrides+i] = uint32(s)
	}
}

// put writes one word of level j: through the mirror (a bubble) once the trie
// is live, straight into the image while it is built off-line.
func (tr *trie) put(j int, idx, v uint32) {
	if tr.m == nil {
		tr.img.Words[1+j][idx] = v
		return
	}
	tr.m.Set(bubble.Region(1+j), idx, v)
}

// entry returns the index, in level i, of k's entry in node n.
func (tr *trie) entry(i int, n uint32, k pkey) uint32 {
	l := &tr.lv[i]
	return n<<l.s | chunk(k.hi, k.lo, l.off, l.s)
}

// span returns the entries of node n (at k's level i) that k covers: [lo, hi).
func (tr *trie) span(i int, n uint32, k pkey) (uint32, uint32) {
	l := &tr.lv[i]
	width := uint32(1) << (l.off + l.s - int(k.l))
	lo := tr.entry(i, n, k) &^ (width - 1)
	return lo, lo + width
}

// roomFor reports whether every level has room for the nodes an insert of k
// has to create: one on each level from the first leaf on k's path down to
// k's level.
func (tr *trie) roomFor(k pkey) bool {
	target := int(tr.lvOf[k.l])
	n := uint32(0)
	for j := 0; j < target; j++ {
		e := tr.lv[j].w[tr.entry(j, n, k)]
		if e&0xff == 0 {
			for x := j + 1; x <= target; x++ {
				if tr.lv[x].nodes >= tr.lv[x].capacity {
					return false
				}
			}
			return true
		}
		n = e >> 8
	}
	return true
}

// descend walks from the root to the node at k's level, creating missing
// nodes (the caller made sure there is room) and adding delta to the prefix
// count of every node on the way below the root. It returns k's level and
// node.
func (tr *trie) descend(k pkey, delta int32) (int, uint32) {
	target := int(tr.lvOf[k.l])
	n := uint32(0)
	for j := 0; j < target; j++ {
		idx := tr.entry(j, n, k)
		e := tr.lv[j].w[idx]
		if e&0xff == 0 {
			n = tr.newNode(j+1, e>>8, tr.lv[j].plen[idx])
			tr.put(j, idx, n<<8|uint32(j+1))
		} else {
			n = e >> 8
		}
		tr.addCount(j+1, n, delta)
	}
	return target, n
}

// newNode takes the next unused node of level j and fills it with the leaf
// (nh, plen) pushed down from its parent entry, which is also its default.
func (tr *trie) newNode(j int, nh uint32, plen uint8) uint32 {
	l := &tr.lv[j]
	n := uint32(l.nodes)
	l.nodes++
	l.garbage++ // count 0 until addCount
	l.defNH[n], l.defLen[n] = nh, plen
	base := n << l.s
	end := base + 1<<l.s
	if tr.m == nil {
		fillWords(l.w[base:end], nh<<8)
	} else {
		for idx := base; idx < end; idx++ {
			tr.put(j, idx, nh<<8)
		}
	}
	fillBytes(l.plen[base:end], plen)
	return n
}

func fillWords(w []uint32, v uint32) {
	if v == 0 {
		clear(w)
		return
	}
	for i := range w {
		w[i] = v
	}
}

func fillBytes(b []uint8, v uint8) {
	for i := range b {
		b[i] = v
	}
}

// addCount adds delta to the prefix count of node n of level j, keeping the
// level's garbage count (nodes whose count is 0) in step.
func (tr *trie) addCount(j int, n uint32, delta int32) {
	if delta == 0 {
		return
	}
	l := &tr.lv[j]
	before := l.count[n]
	l.count[n] += delta
	switch {
	case before == 0 && l.count[n] != 0:
		l.garbage--
	case before != 0 && l.count[n] == 0:
		l.garbage++
	}
}

// cover writes the next hop nh of k, which lives in node n of level i, into
// every entry k covers: leaves whose prefix is not longer than k take it,
// pointers pass it down (leaf pushing).
func (tr *trie) cover(i int, n uint32, k pkey, nh uint32) {
	lo, hi := tr.span(i, n, k)
	for idx := lo; idx < hi; idx++ {
		tr.coverEntry(i, idx, nh, k.l)
	}
}

func (tr *trie) coverEntry(i int, idx, nh uint32, l uint8) {
	lv := &tr.lv[i]
	e := lv.w[idx]
	if e&0xff != 0 {
		tr.coverNode(int(e&0xff), e>>8, nh, l)
		return
	}
	if lv.plen[idx] <= l {
		tr.put(i, idx, nh<<8)
		lv.plen[idx] = l
	}
}

// coverNode pushes (nh, l) into node n of level j, a node wholly inside the
// prefix: unless a longer prefix covers the whole node, it becomes the node's
// default and every entry not held by a longer prefix takes it.
func (tr *trie) coverNode(j int, n, nh uint32, l uint8) {
	lv := &tr.lv[j]
	if lv.defLen[n] > l {
		return
	}
	lv.defNH[n], lv.defLen[n] = nh, l
	base := n << lv.s
	for idx := base; idx < base+1<<lv.s; idx++ {
		tr.coverEntry(j, idx, nh, l)
	}
}

// uncover replaces k (length l, in node n of level i) by (rnh, rlen) in every
// entry that holds it, recursing into the children k wholly covers.
func (tr *trie) uncover(i int, n uint32, k pkey, rnh uint32, rlen uint8) {
	lo, hi := tr.span(i, n, k)
	for idx := lo; idx < hi; idx++ {
		tr.uncoverEntry(i, idx, k.l, rnh, rlen)
	}
}

func (tr *trie) uncoverEntry(i int, idx uint32, l uint8, rnh uint32, rlen uint8) {
	lv := &tr.lv[i]
	e := lv.w[idx]
	if e&0xff != 0 {
		tr.uncoverNode(int(e&0xff), e>>8, l, rnh, rlen)
		return
	}
	if lv.plen[idx] == l {
		tr.put(i, idx, rnh<<8)
		lv.plen[idx] = rlen
	}
}

// uncoverNode: node n of level j lies wholly inside the deleted prefix; if its
// default is that prefix, the replacement takes its place there and in the
// entries.
func (tr *trie) uncoverNode(j int, n uint32, l uint8, rnh uint32, rlen uint8) {
	lv := &tr.lv[j]
	if lv.defLen[n] != l {
		return
	}
	lv.defNH[n], lv.defLen[n] = rnh, rlen
	base := n << lv.s
	for idx := base; idx < base+1<<lv.s; idx++ {
		tr.uncoverEntry(j, idx, l, rnh, rlen)
	}
}

// stats fills the per-level figures of s.
func (tr *trie) stats(s *Stats) {
	s.Levels = len(tr.lv)
	s.Strides = append([]int(nil), tr.strides...)
	for _, l := range tr.lv {
		s.NodesPerLevel = append(s.NodesPerLevel, l.nodes)
		s.CapacityPerLevel = append(s.CapacityPerLevel, l.capacity)
		s.GarbagePerLevel = append(s.GarbagePerLevel, l.garbage)
	}
	s.ImageBytes = tr.img.Bytes()
}
