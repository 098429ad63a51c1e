package filter

import (
	"encoding/binary"
	"slices"
)

// Memo keys. Every answer of Eval is a function of the bytes the byte
// plan names (gPF's packet reduction: every load of every criterion), of
// the captured length (a load past it is unknown) and, when a criterion
// reads it, of the length on the wire. A packet's memo key is those:
// two packets with equal keys get equal answers, so a caller may keep the
// answers of the keys it has seen (datapath/filters does, within a batch:
// a batch holds a few flows' frames, which differ in none of those bytes).

// memoMaxKey bounds a key; a plan needing more gets no key.
const memoMaxKey = 160

// memoPlan is the byte plan laid out for MemoKey.
type memoPlan struct {
	ok   bool
	abs  []Range
	ipv4 []memoV4 // by offset of the IPv4 header
	wire bool
}

type memoV4 struct {
	net uint32  // the IPv4 header's offset (its first byte is in abs)
	rs  []Range // from the transport header, as Load's Off
}

// prepareMemo lays the byte plan out for MemoKey.
func (p *Program) prepareMemo() {
	pl := p.Plan
	if pl.Full {
		return
	}
	n := 8
	m := memoPlan{abs: pl.Abs, wire: pl.WireLen}
	for _, r := range pl.Abs {
		n += int(r.Len)
	}
	for net, rs := range pl.IPv4 {
		m.ipv4 = append(m.ipv4, memoV4{net: net, rs: rs})
		for _, r := range rs {
			n += int(r.Len)
		}
	}
	slices.SortFunc(m.ipv4, func(a, b memoV4) int { return int(a.net) - int(b.net) })
	m.ok = n <= memoMaxKey
	p.memo = m
}

// MemoKey appends to buf packet data's memo key and returns it; ok is
// false when the program has none (a load at a computed offset, or a plan
// of more than memoMaxKey bytes). Two packets whose keys are equal get
// equal answers from Eval (for wire too: wire is part of the key when a
// criterion reads it).
func (p *Program) MemoKey(buf, data []byte, wire uint32) (key []byte, ok bool) {
	m := &p.memo
	if !m.ok {
		return buf, false
	}
	n := uint32(len(data))
	buf = binary.LittleEndian.AppendUint32(buf, n)
	if m.wire {
		buf = binary.LittleEndian.AppendUint32(buf, wire)
	}
	for _, r := range m.abs {
		buf = appendRange(buf, data, r.Off, r.Len)
	}
	for _, v := range m.ipv4 {
		if v.net >= n {
			continue // every load there is unknown, as the length says
		}
		base := v.net + uint32(data[v.net]&0x0f)*4 // that byte is in abs
		for _, r := range v.rs {
			buf = appendRange(buf, data, base+r.Off, r.Len)
		}
	}
	return buf, true
}

// appendRange appends data[off:off+l], zeros for the bytes past its end
// (the key holds the length, so they stand for no byte).
func appendRange(buf, data []byte, off, l uint32) []byte {
	n := uint32(len(data))
	if off <= n && l <= n-off {
		return append(buf, data[off:off+l]...)
	}
	for i := uint32(0); i < l; i++ {
		var b byte
		if o := uint64(off) + uint64(i); o < uint64(n) {
			b = data[o]
		}
		buf = append(buf, b)
	}
	return buf
}
