package gpu

import (
	"sort"

	"github.com/gswitch/gswitch/tables/bubble"
)

// pending holds the checked bubbles of the Apply calls since a table's last
// scatter, as global word offsets and values, in Apply order. dirty has a bit
// per image word with a pending write; dup says some word is in the list
// more than once (the last write wins).
type pending struct {
	off, val []uint32
	dirty    []uint64
	dup      bool
}

// add queues bubbles bs at global offsets base[region] + offset; words is
// the image's size in words.
func (p *pending) add(bs []bubble.Bubble, base []uint32, words uint64) {
	if p.dirty == nil {
		p.dirty = make([]uint64, (words+63)/64)
	}
	for _, b := range bs {
		o := base[b.Region] + b.Offset
		w, bit := o>>6, uint64(1)<<(o&63)
		if p.dirty[w]&bit != 0 {
			p.dup = true
		} else {
			p.dirty[w] |= bit
		}
		p.off = append(p.off, o)
		p.val = append(p.val, b.Value)
	}
	// Bound the list when no lookup drains it: keep the last write per word.
	if p.dup && len(p.off) >= 1<<16 && uint64(len(p.off)) > words {
		p.compact()
	}
}

// compact drops every write but the last to each word, keeping Apply order
// among the survivors, so that one scatter (whose threads run in no order)
// writes each word once, with its latest value.
func (p *pending) compact() {
	n, k := len(p.off), len(p.off)
	for i := n - 1; i >= 0; i-- {
		o := p.off[i]
		w, bit := o>>6, uint64(1)<<(o&63)
		if p.dirty[w]&bit == 0 {
			continue // a later write to o is kept
		}
		p.dirty[w] &^= bit
		k--
		p.off[k], p.val[k] = o, p.val[i]
	}
	m := copy(p.off, p.off[k:])
	copy(p.val, p.val[k:])
	p.off, p.val = p.off[:m], p.val[:m]
	for _, o := range p.off {
		p.dirty[o>>6] |= 1 << (o & 63)
	}
	p.dup = false
}

// reset empties the list (its words' dirty bits cleared).
func (p *pending) reset() {
	for _, o := range p.off {
		p.dirty[o>>6] &^= 1 << (o & 63)
	}
	p.off, p.val, p.dup = p.off[:0], p.val[:0], false
}

// A chunk is writes ready to scatter: each word at most once, with its
// latest value, in launch order. The words that are no pointers come
// first (LPM leaves: each is old or new on its own, and a node is
// reachable only through a pointer), then the pointers, deepest region
// first (an LPM pointer always aims at a deeper level; a flow image's
// order and count refer to its classes, entries and filters, which lie in
// deeper regions), so that even a lookup running during the scatter never
// follows a new pointer into words not yet written. ends[i] is where
// launch i's writes end: its writes run from ends[i-1] (0 for the first)
// and one launch's threads may write in any order.
type chunk struct {
	off, val []uint32
	ends     []int
}

// take empties p into a chunk, in the order above; base lists the regions'
// first words (ascending) and allPtr says every word counts as a pointer
// (a flow image), else a word is a pointer when its low byte is not 0.
func (p *pending) take(base []uint32, allPtr bool) chunk {
	if p.dup {
		p.compact()
	}
	n := len(p.off)
	c := chunk{off: make([]uint32, 0, n), val: make([]uint32, 0, n)}
	var ptrs []int
	for i := 0; i < n; i++ {
		if allPtr || p.val[i]&0xff != 0 {
			ptrs = append(ptrs, i)
		} else {
			c.off, c.val = append(c.off, p.off[i]), append(c.val, p.val[i])
		}
	}
	if len(c.off) > 0 {
		c.ends = append(c.ends, len(c.off))
	}
	// Regions lie in ascending order, so deepest first is descending
	// offset order; each region's run is one launch.
	sort.Slice(ptrs, func(a, b int) bool { return p.off[ptrs[a]] > p.off[ptrs[b]] })
	prev := -1
	for _, i := range ptrs {
		if r := regionOf(base, p.off[i]); r != prev {
			if prev >= 0 {
				c.ends = append(c.ends, len(c.off))
			}
			prev = r
		}
		c.off, c.val = append(c.off, p.off[i]), append(c.val, p.val[i])
	}
	if len(ptrs) > 0 {
		c.ends = append(c.ends, len(c.off))
	}
	p.reset()
	return c
}

// regionOf returns the region holding global word o.
func regionOf(base []uint32, o uint32) int {
	return sort.Search(len(base), func(r int) bool { return base[r] > o }) - 1
}

// bigUpdate is the size from which the CUDA backend's Apply orders an
// update's bubbles into a chunk of its own, without any lock, instead of
// adding them to the table's pending writes (which the next lookup's
// scatter orders).
const bigUpdate = 4096
