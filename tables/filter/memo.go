package filter

import (
	"encoding/binary"
	"slices"
)

// Memo keeps the answers of packets already evaluated, keyed on the bytes
// their evaluation read: a monitoring set on a link carries a few flows,
// whose packets differ only in bytes no filter of the set reads for them
// (payloads, sequence numbers, checksums), so most packets take an answer
// without an evaluation.
//
// # Why the key is exact
//
// Eval is deterministic: where it reads next depends only on the values
// it has read so far, on the captured length and on the length on the
// wire. A miss evaluates with the Evaluator tracing every byte range it
// reads (a load past the end reads nothing: its failure depends on the
// length alone); those ranges, sorted and merged into loads of at most
// 8 bytes, are the packet's shape. Its key is (captured length, wire
// length, shape, the bytes at the shape's ranges). A later packet with the
// same key reads, step by step, the same ranges with the same values as
// the packet the entry came from, so it gets the same answers.
//
// Unlike a key on the whole byte plan (every byte any criterion of any
// filter could read), the shape holds only what this packet's evaluation
// read: a UDP packet's key holds no byte of the IPv6 or TCP tests the
// plan names, which in a short UDP frame fall in the payload and differ in
// every packet (bench forward's sequence numbers did).
//
// # Layout
//
// Up to memoShapes shapes, most recently hit first; a lookup gathers the
// packet's key for each shape in turn and probes an open-addressing table
// of memoSlots entries (memoProbe slots from the key's hash); the entry of
// the last hit is compared first, without a hash (a run of one flow's
// packets, or of flows that read alike). A shape
// replaced (the least recently hit, when a new one comes) bumps its
// version, which is part of the key: its old entries match nothing and
// are overwritten in time. Entries outlive batches; Begin marks a batch,
// and an entry returned since the last Begin is not overwritten before
// the next (callers accumulate counts per entry). When fewer than a
// quarter of memoWindow lookups hit (traffic of many flows), lookups are
// skipped for memoBypass packets, twice that after a second such window
// in a row and so on up to 16 times: plain evaluations, no key.
//
// A Memo, like its Evaluator, belongs to one goroutine at a time.
type Memo struct {
	ev    *Evaluator
	words int
	out   []uint64 // a packet's answers when not kept

	shapes [memoShapes]memoShape
	order  [memoShapes]uint8 // shapes by last hit, most recent first
	nshape int

	key     []uint64 // the key being looked up
	keys    []uint64 // slot i's key: keys[i*memoKeyWords:][:klen[i]]
	klen    []uint8  // 0: empty
	hashes  []uint64
	answers []uint64 // slot i's answers: answers[i*words:][:words]
	used    []uint32 // the batch that last returned slot i
	batch   uint32

	last        int    // the slot of the last hit or insertion; -1: none
	looks, hits int    // in the current window
	bypass      int    // lookups left to skip
	fails       uint   // windows in a row that ended in a bypass
	hitsAll     uint64 // Stats
	evals       uint64
}

const (
	memoShapes   = 4
	memoSlots    = 256 // a power of two
	memoSlotBits = 8
	memoProbe    = 4
	memoKeyWords = 32 // length, shape, and at most 30 loads
	memoWindow   = 256
	memoBypass   = 16384
)

// memoShape is the byte ranges one evaluation read, merged.
type memoShape struct {
	ver uint32
	rs  []memoRange
}

type memoRange struct {
	off  uint32
	size uint32 // 1..8
	mask uint64 // the low size bytes
}

// MemoSlots is the number of a Memo's slots (Eval's slot is below it).
const MemoSlots = memoSlots

// NewMemo returns a memo of p's answers with an evaluator of its own.
func NewMemo(p *Program) *Memo {
	w := p.Words()
	m := &Memo{ev: NewEvaluator(p), words: w, out: make([]uint64, w),
		key: make([]uint64, 0, memoKeyWords), keys: make([]uint64, memoSlots*memoKeyWords),
		klen: make([]uint8, memoSlots), hashes: make([]uint64, memoSlots),
		answers: make([]uint64, memoSlots*w), used: make([]uint32, memoSlots), batch: 1, last: -1}
	for i := range m.order {
		m.order[i] = uint8(i)
	}
	return m
}

// Begin starts a batch: the slots Eval returns from here on keep their
// answers until the next Begin.
func (m *Memo) Begin() {
	if m.batch++; m.batch == 0 {
		clear(m.used)
		m.batch = 1
	}
}

// Answers returns slot's answers (a slot Eval returned since Begin).
func (m *Memo) Answers(slot int) []uint64 {
	return m.answers[slot*m.words : (slot+1)*m.words]
}

// Stats returns the packets answered from a kept entry and those
// evaluated, since NewMemo.
func (m *Memo) Stats() (hits, evals uint64) { return m.hitsAll, m.evals }

// Eval returns Evaluator.Eval's answers for the packet (bit i: filter i)
// and the slot that keeps them, or -1 when none does (the answers are then
// valid until the next call). Do not modify the answers.
func (m *Memo) Eval(data []byte, wire uint32) ([]uint64, int) {
	if m.bypass > 0 {
		m.bypass--
		m.evals++
		m.ev.Eval(data, wire, m.out)
		return m.out, -1
	}
	if m.looks++; m.looks == memoWindow {
		if m.hits < memoWindow/4 {
			// Longer each time in a row, up to 16×: a traced miss
			// (every filter walked) costs several evaluations.
			m.bypass = memoBypass << min(m.fails, 4)
			m.fails++
		} else {
			m.fails = 0
		}
		m.looks, m.hits = 0, 0
	}
	for j := 0; j < m.nshape; j++ {
		si := int(m.order[j])
		m.gather(si, data, wire)
		if i := m.last; j == 0 && i >= 0 && int(m.klen[i]) == len(m.key) &&
			slices.Equal(m.keys[i*memoKeyWords:i*memoKeyWords+len(m.key)], m.key) {
			// The last slot again (a run of one flow, or flows that read
			// alike): no hash.
			m.hits++
			m.hitsAll++
			m.used[i] = m.batch
			return m.Answers(i), i
		}
		h := hashKey64(m.key)
		if i := m.find(h); i >= 0 {
			m.last = i
			m.hits++
			m.hitsAll++
			if j > 0 { // most recently hit first
				copy(m.order[1:j+1], m.order[:j])
				m.order[0] = uint8(si)
			}
			m.used[i] = m.batch
			return m.Answers(i), i
		}
	}
	// A miss: evaluate, tracing the reads.
	ev := m.ev
	m.evals++
	ev.tracing, ev.trace = true, ev.trace[:0]
	ev.Eval(data, wire, m.out)
	ev.tracing = false
	si := m.shapeOf(ev.trace)
	if si < 0 {
		return m.out, -1
	}
	m.gather(si, data, wire)
	h := hashKey64(m.key)
	for p := uint64(0); p < memoProbe; p++ {
		i := int((h>>(64-memoSlotBits) + p) % memoSlots)
		if m.klen[i] != 0 && m.used[i] == m.batch {
			continue
		}
		m.klen[i] = uint8(len(m.key))
		copy(m.keys[i*memoKeyWords:], m.key)
		m.hashes[i] = h
		copy(m.Answers(i), m.out)
		m.used[i] = m.batch
		m.last = i
		return m.Answers(i), i
	}
	return m.out, -1
}

// find returns the slot holding m.key (hash h), or -1.
func (m *Memo) find(h uint64) int {
	n := len(m.key)
	for p := uint64(0); p < memoProbe; p++ {
		i := int((h>>(64-memoSlotBits) + p) % memoSlots)
		if m.hashes[i] != h || int(m.klen[i]) != n {
			continue
		}
		if slices.Equal(m.keys[i*memoKeyWords:i*memoKeyWords+n], m.key) {
			return i
		}
	}
	return -1
}

// gather sets m.key to the packet's key under shape si.
func (m *Memo) gather(si int, data []byte, wire uint32) {
	sh := &m.shapes[si]
	n := uint32(len(data))
	k := m.key[:0]
	k = append(k, uint64(n)|uint64(wire)<<32, uint64(si)|uint64(sh.ver)<<8)
	for _, r := range sh.rs {
		var v uint64
		switch {
		case uint64(r.off)+8 <= uint64(n):
			v = binary.LittleEndian.Uint64(data[r.off:]) & r.mask
		case uint64(r.off)+uint64(r.size) <= uint64(n):
			for i := r.size; i > 0; i-- {
				v = v<<8 | uint64(data[r.off+i-1])
			}
		}
		// else: a packet of another length than the shape's, which the
		// key's first word tells apart.
		k = append(k, v)
	}
	m.key = k
}

// hashKey64 hashes a key.
func hashKey64(k []uint64) uint64 {
	h := uint64(0x243f6a8885a308d3)
	for _, w := range k {
		h = (h ^ w) * 0x9e3779b97f4a7c15
		h ^= h >> 29
	}
	return h * 0xbf58476d1ce4e5b9
}

// shapeOf returns the shape of trace (sorted and merged in place): an
// existing one, else one installed in place of the least recently hit.
// -1: too many ranges for a key.
func (m *Memo) shapeOf(trace []uint64) int {
	slices.Sort(trace)
	var rs [memoKeyWords - 2]memoRange
	n := 0
	var start, end uint64
	for i, t := range trace {
		off, size := t>>4, t&15
		if i > 0 && off+size <= end {
			continue // within the current range
		}
		if i > 0 && off <= end && off+size-start <= 8 {
			end = off + size
			continue
		}
		if i > 0 {
			if n == len(rs) {
				return -1
			}
			rs[n] = memoRange{off: uint32(start), size: uint32(end - start)}
			n++
		}
		start, end = off, off+size
	}
	if len(trace) > 0 {
		if n == len(rs) {
			return -1
		}
		rs[n] = memoRange{off: uint32(start), size: uint32(end - start)}
		n++
	}
	for i := range rs[:n] {
		rs[i].mask = ^uint64(0) >> (64 - 8*rs[i].size)
	}
	for j := 0; j < m.nshape; j++ {
		if si := int(m.order[j]); slices.Equal(m.shapes[si].rs, rs[:n]) {
			return si
		}
	}
	var si int
	if m.nshape < memoShapes {
		si = m.nshape
		m.nshape++
	} else {
		si = int(m.order[memoShapes-1])
		m.shapes[si].ver++
	}
	m.shapes[si].rs = append(m.shapes[si].rs[:0], rs[:n]...)
	// The new shape first: the next packets are likely of its flow.
	j := slices.Index(m.order[:], uint8(si))
	copy(m.order[1:j+1], m.order[:j])
	m.order[0] = uint8(si)
	return si
}
