package re

import "encoding/binary"

// Where a payload's bytes probably are. The index keeps one location per
// marker fingerprint (and an acknowledged one before it), the latest: for
// bytes that recur often (a licence header, a line every file has, the
// fields of tar headers) that is rarely the copy the payload is a repeat
// of, and a match there stops short. But a stream sent again repeats its
// old copy in order: the next payload of a flow most likely continues
// where the flow's last reference ended, and inside a payload the bytes
// after a short difference (a changed date, a changed word) most likely
// continue where the last match left off. So the encoder keeps, per flow
// (a hash of the addresses and ports, hintSlots slots, the latest flow
// taking a slot), the log location just after its last reference and the
// sequence number that follows; a payload in order starts with that
// location as its expected one, and each match moves it. At each marker
// the expected location is tried first (its window's bytes checked as any
// index hit's), the index after; and a payload's first window is tried
// there before any marker (probeStart), so that a payload whose markers
// all recur elsewhere still finds its copy.

// hintSlots is how many flows keep a hint.
const hintSlots = 1024

// flowHint is where a flow's next payload probably continues: its byte 0
// is e.data[off] (off may run past e's end: the payloads logged after it).
type flowHint struct {
	flow uint32
	seq  uint32 // the sequence number the next payload in order has
	e    *entry
	off  int
}

// expected maps the payload being matched to the log: its byte p is
// probably e.data[base+p], or further on in the payloads logged after e
// (before it, for base+p < 0).
type expected struct {
	e    *entry
	base int
}

// flowKey returns a hash of frame f's addresses and ports (a multiplicative
// mix of their words: it only picks the flow's hint slot, and the slot
// keeps the whole hash), and its TCP sequence number.
func flowKey(f []byte, s segment) (flow, seq uint32) {
	const k1, k2 = 0x9e3779b97f4a7c15, 0xc2b2ae3d27d4eb4f
	var h uint64
	tcp := s.l3 + 40
	if s.etherType == 0x0800 {
		h = binary.LittleEndian.Uint64(f[s.l3+12:]) * k1
		tcp = s.l3 + int(f[s.l3]&0x0f)*4
	} else {
		for k := s.l3 + 8; k < s.l3+40; k += 8 {
			h = (h ^ binary.LittleEndian.Uint64(f[k:])) * k1
		}
	}
	h = (h ^ uint64(binary.LittleEndian.Uint32(f[tcp:]))) * k2
	return uint32(h>>32) ^ uint32(h), binary.BigEndian.Uint32(f[tcp+4:])
}

// startFlow sets the expected location of a payload of flow at seq from
// the flow's hint (none when the payload is not the one in order).
func (e *Encoder) startFlow(flow, seq uint32) {
	e.exp = expected{}
	if h := &e.hints[flow%hintSlots]; h.e != nil && h.flow == flow && h.seq == seq {
		e.exp = expected{e: h.e, base: h.off}
	}
}

// endFlow keeps the flow's hint for the payload after this one (n bytes
// at seq): just after the last reference's bytes, or none.
func (e *Encoder) endFlow(flow, seq uint32, n int) {
	h := &e.hints[flow%hintSlots]
	*h = flowHint{}
	if len(e.refs) > 0 {
		last := e.refs[len(e.refs)-1]
		*h = flowHint{flow: flow, seq: seq + uint32(n), e: last.e, off: last.src - last.dst + n}
	}
}

// maxWalk bounds the payloads expectedAt walks through.
const maxWalk = 4

// expectedAt returns the expected location of the window ending at pay's
// byte i, when it lies in one logged payload that id may reference.
func (e *Encoder) expectedAt(id uint64, i int) (loc, bool) {
	x, off := e.exp.e, e.exp.base+i
	for k := 0; x != nil && k < maxWalk; k++ {
		if off >= len(x.data) {
			off -= len(x.data)
			x = x.next
		} else if off < 0 {
			if x = x.prev; x != nil {
				off += len(x.data)
			}
		} else {
			break
		}
	}
	if x == nil || off < e.cfg.Window-1 || off >= len(x.data) || e.usable(x, id) == nil {
		return loc{}, false
	}
	return loc{e: x, pos: uint16(off)}, true
}

// probeStart tries pay's first window at its expected location.
func (e *Encoder) probeStart(pay []byte, id uint64, refs []ref) ([]ref, span, bool) {
	i := e.cfg.Window - 1
	if e.exp.e == nil || i >= len(pay) {
		return refs, span{}, false
	}
	l, ok := e.expectedAt(id, i)
	if !ok {
		return refs, span{}, false
	}
	return e.matchLoc(pay, id, i, l, 0, refs)
}
