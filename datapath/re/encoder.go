package re

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/gswitch/gswitch/tables/rabin"
)

// loc is a logged payload and a marker position in it.
type loc struct {
	e   *entry
	pos uint16
}

// Encoder is the sending side of a link.
type Encoder struct {
	Stats EncoderStats

	cfg     Config
	m       *rabin.Marker // the CPU's markers (and every marker's fingerprint)
	markers Markers       // cfg.Markers, or nil: the CPU's own
	epoch   uint32
	scratch sync.Pool // *Scratch for Encode

	mu        sync.Mutex
	log       payloadLog
	index     fpIndex // marker fingerprint → payloads and positions (remember says which)
	peerEpoch uint32  // the decoder's, from its last control frame (0: none yet)
	refs      []ref
	crc       crcShift
	hints     [hintSlots]flowHint // by flow hash: where each flow's next payload probably continues
	exp       expected            // the payload being matched: where its bytes probably are
}

// maxRefs is the most references a shim can count.
const maxRefs = 255

// ref is one reference of an encoded payload: n bytes of e (id) from src,
// at dst in this one.
type ref struct {
	id          uint64
	e           *entry
	src, n, dst int
}

// NewEncoder returns an encoder with a fresh random epoch.
func NewEncoder(cfg Config) (*Encoder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := rabin.NewMarker(cfg.Pol, cfg.Window, cfg.Bits)
	if err != nil {
		return nil, err
	}
	e := &Encoder{cfg: cfg, m: m, markers: cfg.Markers, log: newLog(cfg.LogBytes), index: newFPIndex(), epoch: randomEpoch()}
	e.log.recycle = true
	e.scratch.New = func() any { return new(Scratch) }
	return e, nil
}

// Epoch returns the encoder's epoch.
func (e *Encoder) Epoch() uint32 { return e.epoch }

// slots are an index entry: the latest payload with the fingerprint, and
// an earlier one: the acknowledged copy it held, else the payload the
// latest displaced (remember; either may be empty: e nil).
type slots struct{ latest, acked loc }

// unindex drops an evicted payload's index entries that still point at it.
func (e *Encoder) unindex(x *entry) {
	e.index.touch(x.fps)
	for _, fp := range x.fps {
		s := e.index.get(fp)
		if s == nil {
			continue
		}
		if s.latest.e == x {
			s.latest = loc{}
		}
		if s.acked.e == x {
			s.acked = loc{}
		}
		if s.latest.e == nil && s.acked.e == nil {
			e.index.del(fp)
		}
	}
}

// lookup returns the payload the index holds for fp that payload id may
// reference: the latest, or else the earlier one.
func (e *Encoder) lookup(fp, id uint64) (loc, bool) {
	s := e.index.get(fp)
	if s == nil {
		return loc{}, false
	}
	for _, l := range [2]loc{s.latest, s.acked} {
		if l.e != nil && e.usable(l.e, id) != nil {
			return l, true
		}
	}
	return loc{}, false
}

// Scratch is the per-call state of EncodeBatch: each frame's parse, id,
// markers and fingerprints, computed before the encoder's lock is taken.
// A Scratch is one goroutine's at a time; its buffers are reused.
type Scratch struct {
	prep     []prep
	payloads [][]byte
	pos      [][]int32
	fps      [][]uint64
}

// prep is one frame's work done outside the lock.
type prep struct {
	s    segment
	ok   bool // eligible: a TCP payload the match selects
	lazy bool // its markers are found while matching (matchLazy)
	id   uint64
	k    int    // its index in Scratch.pos and fps
	flow uint32 // hash of the addresses and ports (flowKey)
	seq  uint32 // TCP sequence number
}

// prepare parses and names frames and, when there are at least
// cfg.MinBatch eligible payloads and a Markers backend, has it compute
// their markers (the CPU finds them lazily under the lock otherwise, and
// when the backend fails). It holds no lock.
func (e *Encoder) prepare(sc *Scratch, frames [][]byte) {
	sc.prep = sc.prep[:0]
	sc.payloads = sc.payloads[:0]
	for _, f := range frames {
		s, ok := parseTCP(f)
		ok = ok && s.end-s.pay >= e.cfg.MinPayload && (e.cfg.Match == nil || e.cfg.Match(f))
		p := prep{s: s, ok: ok, k: -1}
		if ok {
			p.id = payloadID(f, s)
			p.flow, p.seq = flowKey(f, s)
			p.k = len(sc.payloads)
			sc.payloads = append(sc.payloads, f[s.pay:s.end])
		}
		sc.prep = append(sc.prep, p)
	}
	n := len(sc.payloads)
	for len(sc.pos) < n {
		sc.pos = append(sc.pos, nil)
		sc.fps = append(sc.fps, nil)
	}
	if e.markers != nil && n >= e.cfg.MinBatch && n > 0 {
		if err := e.markers.Markers(sc.payloads, sc.pos[:n]); err == nil {
			e.Stats.OffloadBatches.Add(1)
			for k, pay := range sc.payloads {
				fps := sc.fps[k][:0]
				for _, p := range sc.pos[k] {
					fps = append(fps, e.m.FingerprintAt(pay, int(p)))
				}
				sc.fps[k] = fps
			}
			return
		}
		e.Stats.OffloadFailures.Add(1)
	}
	// The CPU finds the markers under the lock, lazily (matchLazy).
	for i := range sc.prep {
		sc.prep[i].lazy = sc.prep[i].ok
	}
}

// Encode returns the frame to send for frame: an encoded copy built in out
// (grown if needed) when that is shorter, else frame itself. The payload of
// an eligible frame enters the log either way. It is EncodeBatch of one
// frame.
func (e *Encoder) Encode(frame, out []byte) (res []byte, encoded bool) {
	sc := e.scratch.Get().(*Scratch)
	defer e.scratch.Put(sc)
	e.prepare(sc, [][]byte{frame})
	var t tally
	e.mu.Lock()
	res, encoded = e.encodeOne(frame, sc, 0, out, &t)
	e.mu.Unlock()
	t.add(&e.Stats)
	clear(sc.payloads)
	return res, encoded
}

// EncodeBatch encodes frames in order into res (appended; res[i] is frame
// i's, frames[i] itself when it goes unchanged), writing the encoded ones
// into arena (appended to; it returns the arena grown). Frames are parsed
// and named, and a device's markers computed, before the encoder's lock is
// taken, and the lock is taken once: several goroutines may call it at
// once, each with a Scratch of its own.
func (e *Encoder) EncodeBatch(sc *Scratch, frames, res [][]byte, arena []byte) ([][]byte, []byte) {
	e.prepare(sc, frames)
	return e.encodePrepared(sc, frames, res, arena)
}

// encodePrepared is EncodeBatch after prepare(sc, frames): the part under
// the lock. Link's encoder goroutine runs it on batches that their Send
// callers prepared (pipe.go).
func (e *Encoder) encodePrepared(sc *Scratch, frames, res [][]byte, arena []byte) ([][]byte, []byte) {
	var t tally
	e.mu.Lock()
	for i, f := range frames {
		// An encoded frame is shorter than f: room for len(f) bytes past
		// the arena's end (no zeroing), where encodeOne writes it.
		start := len(arena)
		arena = slices.Grow(arena, len(f))
		r, encoded := e.encodeOne(f, sc, i, arena[start:start:start+len(f)], &t)
		if encoded {
			arena = arena[:start+len(r)]
		}
		res = append(res, r)
	}
	e.mu.Unlock()
	t.add(&e.Stats)
	clear(sc.payloads) // the Scratch keeps no frame alive
	return res, arena
}

// tally is a batch's counts, added to the encoder's atomic counters once
// per batch rather than per frame.
type tally struct {
	frames, bytesIn, bytesOut, saved, encoded, raw, refs, passed uint64
}

func (t *tally) add(s *EncoderStats) {
	s.Frames.Add(t.frames)
	s.BytesIn.Add(t.bytesIn)
	s.BytesOut.Add(t.bytesOut)
	if t.passed > 0 {
		s.Passed.Add(t.passed)
	}
	if t.raw > 0 {
		s.Raw.Add(t.raw)
	}
	if t.encoded > 0 {
		s.Encoded.Add(t.encoded)
		s.Refs.Add(t.refs)
		s.Saved.Add(t.saved)
	}
}

// encodeOne encodes frame i of sc's batch, counting it in t; e.mu is held.
func (e *Encoder) encodeOne(frame []byte, sc *Scratch, i int, out []byte, t *tally) (res []byte, encoded bool) {
	t.frames++
	t.bytesIn += uint64(len(frame))
	p := sc.prep[i]
	if !p.ok {
		t.passed++
		t.bytesOut += uint64(len(frame))
		return frame, false
	}
	s, id := p.s, p.id
	pay := frame[s.pay:s.end]
	pos, fps := sc.pos[p.k], sc.fps[p.k]
	e.startFlow(p.flow, p.seq)
	if p.lazy { // not computed: the CPU's path
		e.refs, pos, fps = e.matchLazy(pay, id, pos[:0], fps[:0])
		sc.pos[p.k], sc.fps[p.k] = pos, fps
	} else {
		e.refs = e.match(pay, id, pos, fps)
	}
	res, encoded = frame, false
	if len(e.refs) > 0 {
		literal := len(pay)
		for _, r := range e.refs {
			literal -= r.n
		}
		hdr := s.pay - s.l3
		size := s.etOff + 2 + shimLen + hdr + refLen*len(e.refs) + literal
		if size < len(frame) {
			res, encoded = e.build(frame, s, id, out, size), true
		}
	}
	e.endFlow(p.flow, p.seq, len(pay))
	e.remember(id, pay, pos, fps)
	if encoded {
		t.encoded++
		t.refs += uint64(len(e.refs))
		t.saved += uint64(len(frame) - len(res))
	} else {
		t.raw++
	}
	t.bytesOut += uint64(len(res))
	return res, encoded
}

// match finds the acknowledged runs of pay (Max-Match at each marker).
func (e *Encoder) match(pay []byte, id uint64, pos []int32, fps []uint64) []ref {
	refs, sp, _ := e.probeStart(pay, id, e.refs[:0])
	refs, _ = e.matchList(pay, id, pos, fps, sp.done, refs)
	return refs
}

// matchList tries the markers pos (fingerprints fps) in order, pay[:done]
// being covered or passed already; it returns refs appended and the new
// done.
func (e *Encoder) matchList(pay []byte, id uint64, pos []int32, fps []uint64, done int, refs []ref) ([]ref, int) {
	w := e.cfg.Window
	for k, p := range pos {
		i := int(p)
		if i-w+1 < done {
			continue
		}
		if len(refs)+3 > maxRefs {
			break
		}
		var sp span
		var ok bool
		if refs, sp, ok = e.matchAt(pay, id, i, fps[k], done, refs); ok {
			done = sp.done
		}
	}
	return refs, done
}

// span is a match matchAt found: pay[ps:pe] equals q.data[qs:qe], found at
// q's marker j; y, when not nil, the payload logged after q, whose first
// yn bytes equal pay[pe:pe+yn]. pay[:done] is covered now.
type span struct {
	ps, pe, qs, qe, j int
	q, y              *entry
	yn, done          int
}

// matchAt tries the marker at window end i of pay (fingerprint fp), with
// pay[:done] covered or passed: at the location where the payload's bytes
// probably are (the flow's and the last match's continuation, expected),
// else at the one the index gives for fp, it checks the window's bytes,
// extends the match both ways and on into the payloads logged before and
// after, and appends the references (at most 3).
func (e *Encoder) matchAt(pay []byte, id uint64, i int, fp uint64, done int, refs []ref) ([]ref, span, bool) {
	if l, ok := e.expectedAt(id, i); ok {
		if r, sp, ok := e.matchLoc(pay, id, i, l, done, refs); ok {
			return r, sp, true
		}
	}
	l, ok := e.lookup(fp, id)
	if !ok {
		return refs, span{}, false
	}
	return e.matchLoc(pay, id, i, l, done, refs)
}

// matchLoc is matchAt at the logged window ending at l.
func (e *Encoder) matchLoc(pay []byte, id uint64, i int, l loc, done int, refs []ref) ([]ref, span, bool) {
	w := e.cfg.Window
	q := l.e.data
	j := int(l.pos)
	ps, qs := i-w+1, j-w+1
	if qs < 0 || string(pay[ps:i+1]) != string(q[qs:j+1]) {
		return refs, span{}, false
	}
	pe, qe := i+1, j+1
	// Backward as far as the bytes agree, past done too: an earlier
	// reference found at a marker of common bytes (a line every file has)
	// points elsewhere and stops short; the run found here replaces what
	// of it lies inside (dropRefsFrom).
	c := commonSuffix(pay[:ps], q[:qs])
	ps, qs = ps-c, qs-c
	c = commonPrefix(pay[pe:], q[qe:])
	pe, qe = pe+c, qe+c
	if pe-ps < e.cfg.MinMatch || pe <= done {
		return refs, span{}, false
	}
	// A match that reaches the start of the logged payload may go on in
	// the payload logged before it, and one that reaches its end in the
	// payload logged after it: a segment of a stream sent again with other
	// boundaries spans two old segments.
	var before ref
	if qs == 0 && ps > 0 {
		if y := e.usable(l.e.prev, id); y != nil {
			c := commonSuffix(pay[:ps], y.data)
			if k, j := ps-c, len(y.data)-c; ps-k > refLen {
				before = ref{id: y.id, e: y, src: j, n: ps - k, dst: k}
			}
		}
	}
	from := ps
	if before.n > 0 {
		from = before.dst
	}
	if from < done {
		refs = dropRefsFrom(refs, from)
	}
	if before.n > 0 {
		refs = append(refs, before)
	}
	refs = append(refs, ref{id: l.e.id, e: l.e, src: qs, n: pe - ps, dst: ps})
	sp := span{ps: ps, pe: pe, qs: qs, qe: qe, j: j, q: l.e, done: pe}
	if qe == len(q) && pe < len(pay) {
		if y := e.usable(l.e.next, id); y != nil {
			if n := commonPrefix(pay[pe:], y.data); n > refLen {
				refs = append(refs, ref{id: y.id, e: y, src: 0, n: n, dst: pe})
				sp.y, sp.yn, sp.done = y, n, pe+n
			}
		}
	}
	last := refs[len(refs)-1]
	e.exp = expected{e: last.e, base: last.src - last.dst}
	return refs, sp, true
}

// dropRefsFrom removes the references' coverage of the payload from byte
// from on: references that start there or later go, one that runs past it
// is cut short, or dropped when what remains is no longer than a
// reference (the bytes go literal: no dearer).
func dropRefsFrom(refs []ref, from int) []ref {
	for len(refs) > 0 {
		r := &refs[len(refs)-1]
		switch {
		case r.dst >= from:
			refs = refs[:len(refs)-1]
			continue
		case r.dst+r.n > from:
			if r.n = from - r.dst; r.n <= refLen {
				refs = refs[:len(refs)-1]
			}
		}
		break
	}
	return refs
}

// usable returns x when the encoder may reference it from payload id.
func (e *Encoder) usable(x *entry, id uint64) *entry {
	if x == nil || x.gone || !x.acked || x.id == id {
		return nil
	}
	return x
}

// build writes the encoded frame of size bytes.
func (e *Encoder) build(frame []byte, s segment, id uint64, out []byte, size int) []byte {
	if cap(out) < size {
		out = make([]byte, size)
	}
	out = out[:size]
	n := copy(out, frame[:s.etOff])
	binary.BigEndian.PutUint16(out[n:], EtherType)
	n += 2
	sh := out[n : n+shimLen]
	sh[0], sh[1] = magic, kindData
	binary.BigEndian.PutUint16(sh[2:], s.etherType)
	binary.BigEndian.PutUint32(sh[4:], e.epoch)
	// The IP packet's CRC from its headers' and its payload's (id's high
	// half): the payload is checksummed once (crc.go).
	binary.BigEndian.PutUint32(sh[8:], e.crc.combine(checksum32c(frame[s.l3:s.pay]), uint32(id>>32), s.end-s.pay))
	binary.BigEndian.PutUint16(sh[12:], uint16(s.end-s.l3))
	binary.BigEndian.PutUint16(sh[14:], uint16(s.pay-s.l3))
	sh[16], sh[17] = byte(len(e.refs)), 0
	n += shimLen
	n += copy(out[n:], frame[s.l3:s.pay])
	for _, r := range e.refs {
		binary.BigEndian.PutUint64(out[n:], r.id)
		binary.BigEndian.PutUint16(out[n+8:], uint16(r.src))
		binary.BigEndian.PutUint16(out[n+10:], uint16(r.n))
		binary.BigEndian.PutUint16(out[n+12:], uint16(r.dst))
		n += refLen
	}
	pay := frame[s.pay:s.end]
	at := 0
	for _, r := range e.refs {
		n += copy(out[n:], pay[at:r.dst])
		at = r.dst + r.n
	}
	n += copy(out[n:], pay[at:])
	if n != size {
		panic(fmt.Sprintf("re: encoded %d bytes, planned %d", n, size))
	}
	return out
}

// remember logs a payload and indexes its markers.
func (e *Encoder) remember(id uint64, pay []byte, pos []int32, fps []uint64) {
	if x := e.log.get(id); x != nil {
		return // a retransmission: logged already
	}
	x := e.log.newEntry(id)
	if len(pos) <= inlineMarkers {
		x.fps, x.markers = x.fpsIn[:0:len(pos)], x.posIn[:0:len(pos)]
	}
	x.fps = append(x.fps, fps...)
	for _, p := range pos {
		x.markers = append(x.markers, uint16(p))
	}
	e.log.add(x, pay, e.unindex)
	if x.gone {
		return
	}
	for k, fp := range x.fps {
		// The latest payload takes the first slot. The one it displaces
		// takes the second when acknowledged, or when the second is empty:
		// an unacknowledged copy stays there until an acknowledged one
		// comes. Data repeating faster than acknowledgements come back
		// (iperf3's buffer, sent every 0.2 ms at 5 Gbit/s, acknowledged
		// after 10 ms) then keeps its first copy there, acknowledged by
		// the time it is wanted, and the flow's hints follow that copy
		// on. (Keeping the displaced copy only when acknowledged, the
		// second slot never filled there: no copy is acknowledged before
		// the next one displaces it, and nothing was encoded.)
		s := e.index.put(fp)
		if l := s.latest.e; l != nil && !l.gone {
			if a := s.acked.e; l.acked || a == nil || a.gone {
				s.acked = s.latest
			}
		}
		s.latest = loc{e: x, pos: x.markers[k]}
	}
}

// HandleControl takes an ACK or NAK frame from the peer's decoder. It
// returns an error (and changes nothing) for a malformed frame.
func (e *Encoder) HandleControl(frame []byte) error {
	c, err := parseControl(frame)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.epoch != e.peerEpoch {
		// The decoder restarted (or spoke for the first time): nothing it
		// acknowledged before counts.
		if e.peerEpoch != 0 {
			e.Stats.Resets.Add(1)
		}
		e.peerEpoch = c.epoch
		e.log.each(func(x *entry) { x.acked = false })
	}
	// The ids come in the order their payloads were logged, mostly: the
	// entry after the last one found is tried before the log's table.
	var next *entry
	for i := 0; i < c.n; i++ {
		id := c.id(i)
		x := next
		if x == nil || x.gone || x.id != id {
			x = e.log.get(id)
		}
		if x != nil {
			x.acked = c.kind == kindAck
			next = x.next
		}
	}
	return nil
}

// commonPrefix returns how many bytes a and b agree on from their starts:
// 512, then 64 at a time with the runtime's vectorised comparison while
// they agree (a repeated payload agrees for its whole length: few calls),
// then eight at a time.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+512 <= n && string(a[i:i+512]) == string(b[i:i+512]); i += 512 {
	}
	for ; i+64 <= n && string(a[i:i+64]) == string(b[i:i+64]); i += 64 {
	}
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix returns how many bytes a and b agree on at their ends,
// as commonPrefix does from the starts.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+512 <= n && string(a[len(a)-i-512:len(a)-i]) == string(b[len(b)-i-512:len(b)-i]); i += 512 {
	}
	for ; i+64 <= n && string(a[len(a)-i-64:len(a)-i]) == string(b[len(b)-i-64:len(b)-i]); i += 64 {
	}
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[len(a)-i-8:]) ^ binary.LittleEndian.Uint64(b[len(b)-i-8:]); x != 0 {
			return i + bits.LeadingZeros64(x)/8
		}
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}
