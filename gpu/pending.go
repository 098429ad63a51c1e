package gpu

import "github.com/gswitch/gswitch/tables/bubble"

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
