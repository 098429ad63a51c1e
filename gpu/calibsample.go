package gpu

import (
	"fmt"
	"math/rand/v2"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
)

// calibSample is the keys a calibration times a table's lookups with: a
// flow table's masked rule keys (SoA, p words each), or addresses that
// walk an LPM table's trie down to its routes. n keys; tile repeats them.
type calibSample struct {
	kind    Kind
	n       int
	p       int         // Flow: projection width
	soa     []uint32    // Flow: p*n words
	a4      []uint32    // LPM4
	a6      []lpm.Addr6 // LPM6
	classes int         // Flow: classes (or linear slots); LPM: the trie's levels with a node

	outF []flow.RuleID // lookup's results
	outL []uint32
}

// tile returns the sample repeated to m keys.
func (s *calibSample) tile(m int) *calibSample {
	t := &calibSample{kind: s.kind, n: m, p: s.p, classes: s.classes}
	switch s.kind {
	case Flow:
		t.soa = tile(s.soa, s.p, s.n, m)
	case LPM4:
		t.a4 = make([]uint32, m)
		for i := range t.a4 {
			t.a4[i] = s.a4[i%s.n]
		}
	case LPM6:
		t.a6 = make([]lpm.Addr6, m)
		for i := range t.a6 {
			t.a6[i] = s.a6[i%s.n]
		}
	}
	return t
}

// lookup looks the sample's keys up in table id on b (the results go to
// buffers of the sample's own, made on the first call).
func (s *calibSample) lookup(b Backend, id TableID) error {
	if s.kind == Flow {
		return b.LookupFlow(id, s.soa, s.n, s.flowOut())
	}
	if len(s.outL) < s.n {
		s.outL = make([]uint32, s.n)
	}
	if s.kind == LPM4 {
		return b.LookupLPM4(id, s.a4, s.outL)
	}
	return b.LookupLPM6(id, s.a6, s.outL)
}

// lookupCPU is lookup on the CPU backend with a search for every key
// (CPU.lookupFlowEach): the sample's keys, rules' masked values, may be
// equal one after the other (rules that differ only in their masks),
// which LookupFlow would search once where traffic's keys are not equal.
func (s *calibSample) lookupCPU(c *CPU, id TableID) error {
	if s.kind != Flow {
		return s.lookup(c, id)
	}
	return c.lookupFlowEach(id, s.soa, s.n, s.flowOut())
}

// flowOut is the buffer of a flow sample's results, made on first need.
func (s *calibSample) flowOut() []flow.RuleID {
	if len(s.outF) < s.n {
		s.outF = make([]flow.RuleID, s.n)
	}
	return s.outF
}

// sample returns up to limit keys of table id (Flow: flowSample; LPM:
// lpmSample) for a calibration.
func (c *CPU) sample(id TableID, kind Kind, limit int) (*calibSample, error) {
	if kind == Flow {
		classes, p, soa, n, err := c.flowSample(id, limit)
		if err != nil {
			return nil, err
		}
		return &calibSample{kind: Flow, n: n, p: p, soa: soa, classes: classes}, nil
	}
	return c.lpmSample(id, kind, limit)
}

// lpmSample returns limit addresses for LPM table id: each a walk from the
// trie's root down to a leaf, taking at every node a random entry among
// those that hold a route or a pointer (any entry of a node that has
// none), the bits of the address not read by the walk random. So the
// addresses reach the table's routes at the depths the routes are, as
// packets routed by the table do, whatever the table's size. classes is
// the number of levels with at least one node below the root (what the
// CPU's cost per lookup grows with: the dependent loads of a walk), plus
// one for the root; 0 for a table with no route at all.
func (c *CPU) lpmSample(id TableID, kind Kind, limit int) (*calibSample, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	lt, err := c.lookupTable(id, kind, 0, 0)
	if err != nil {
		return nil, err
	}
	t, i := lt.enter()
	defer lt.leave(i)
	w := &trieWalk{words: t.img.Words, rng: rand.New(rand.NewPCG(uint64(id), 0x9e3779b97f4a7c15)), live: map[[2]int][]int32{}}
	meta := t.img.Words[0]
	if len(meta) < 3 || int(meta[2]) != len(t.img.Words)-1 || len(meta) != 3+int(meta[2]) {
		return nil, fmt.Errorf("%w: LPM image with %d meta words", ErrBadUpdate, len(meta))
	}
	off := 0
	for _, s := range meta[3:] {
		w.strides = append(w.strides, int(s))
		w.offs = append(w.offs, off)
		off += int(s)
	}
	s := &calibSample{kind: kind, n: max(limit, 1)}
	for _, lv := range t.img.Words[2:] {
		if len(lv) > 0 && w.anyRoute(lv) {
			s.classes++
		}
	}
	if w.anyRoute(t.img.Words[1]) {
		s.classes++
	}
	for range s.n {
		hi, lo := w.rng.Uint64(), w.rng.Uint64()
		w.walk(&hi, &lo)
		if kind == LPM4 {
			s.a4 = append(s.a4, uint32(hi>>32))
		} else {
			s.a6 = append(s.a6, lpm.Addr6{Hi: hi, Lo: lo})
		}
	}
	return s, nil
}

// trieWalk walks a GAMT image (tables/lpm's layout: region 0 the meta
// words, region 1+l level l; an entry is inf<<8 | jump, jump 0 a leaf
// whose inf is the next hop, else a pointer to node inf of level jump).
type trieWalk struct {
	words   [][]uint32
	strides []int
	offs    []int // the address bit (from the top) where each level's chunk starts
	rng     *rand.Rand
	live    map[[2]int][]int32 // (level, node): the indexes of its entries with a route or a pointer
}

// anyRoute reports whether some entry of lv is a pointer or a route.
func (w *trieWalk) anyRoute(lv []uint32) bool {
	for _, e := range lv {
		if e != 0 {
			return true
		}
	}
	return false
}

// walk sets the bits of the 128-bit address (hi, lo) that the walk from
// the root to a leaf reads, each chunk an entry that leads somewhere.
func (w *trieWalk) walk(hi, lo *uint64) {
	level, node := 0, 0
	for steps := 0; steps <= len(w.strides); steps++ {
		s := w.strides[level]
		lv := w.words[1+level]
		base := node << s
		if base+(1<<s) > len(lv) {
			return
		}
		k := [2]int{level, node}
		idx, ok := w.live[k]
		if !ok {
			for j, e := range lv[base : base+1<<s] {
				if e != 0 {
					idx = append(idx, int32(j))
				}
			}
			w.live[k] = idx
		}
		var j int
		if len(idx) > 0 {
			j = int(idx[w.rng.IntN(len(idx))])
		} else {
			j = w.rng.IntN(1 << s)
		}
		setBits(hi, lo, w.offs[level], s, uint64(j))
		e := lv[base+j]
		jump := int(e & lpm.JumpMask)
		if jump == 0 || jump <= level || jump >= len(w.strides) {
			return
		}
		level, node = jump, int(e>>lpm.JumpBits)
	}
}

// setBits writes v's low s bits into the 128-bit value (hi, lo) at bit
// off from the top.
func setBits(hi, lo *uint64, off, s int, v uint64) {
	for b := 0; b < s; b++ {
		bit := (v >> (s - 1 - b)) & 1
		pos := off + b // from the top
		if pos < 64 {
			m := uint64(1) << (63 - pos)
			*hi = *hi&^m | bit*m
		} else if pos < 128 {
			m := uint64(1) << (127 - pos)
			*lo = *lo&^m | bit*m
		}
	}
}
