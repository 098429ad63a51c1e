package rabin

import (
	"errors"
	"fmt"
	"io"
)

// ChunkWindow is the window of content-defined chunking, restic's.
const ChunkWindow = 64

// Chunking defaults, restic/chunker's.
const (
	DefaultMinSize  = 512 << 10
	DefaultMaxSize  = 8 << 20
	DefaultAvgBits  = 20
	MaxChunkPolDeg  = 53 // restic/chunker refuses polynomials of higher degree
	maxChunkAvgBits = 52
)

// ChunkParams are the parameters of content-defined chunking.
type ChunkParams struct {
	Pol      Pol
	Min, Max int // bytes; Min >= ChunkWindow
	AvgBits  int // a cut where the fingerprint's low AvgBits are zero
}

// DefaultChunkParams returns restic's defaults with DefaultPol.
func DefaultChunkParams() ChunkParams {
	return ChunkParams{Pol: DefaultPol, Min: DefaultMinSize, Max: DefaultMaxSize, AvgBits: DefaultAvgBits}
}

// Cutter finds chunk boundaries in memory.
type Cutter struct {
	t     *Tables
	p     ChunkParams
	mask  uint64
	limit int // the longest chunk: max(Min, Max)
	// step[o] = o · x^{8·ChunkWindow} mod P: the leaving byte's term,
	// reduced in advance (the reduction is linear), so that a step of the
	// rolling hash is one look-up on its dependency chain.
	step [256]uint64
}

// NewCutter checks the parameters and builds the tables.
func NewCutter(p ChunkParams) (*Cutter, error) {
	if d := p.Pol.Deg(); d > MaxChunkPolDeg {
		return nil, fmt.Errorf("rabin: chunking polynomial %s has degree %d; restic's chunker takes at most %d", p.Pol, d, MaxChunkPolDeg)
	}
	if p.Min < ChunkWindow {
		return nil, fmt.Errorf("rabin: minimum chunk size %d is below the %d-byte window", p.Min, ChunkWindow)
	}
	if p.Max < 1 || p.Max > 1<<30 || p.Min > 1<<30 {
		return nil, fmt.Errorf("rabin: chunk sizes %d..%d, want 64..%d", p.Min, p.Max, 1<<30)
	}
	if p.AvgBits < 1 || p.AvgBits > maxChunkAvgBits {
		return nil, fmt.Errorf("rabin: average bits %d, want 1..%d", p.AvgBits, maxChunkAvgBits)
	}
	t, err := NewTables(p.Pol, ChunkWindow)
	if err != nil {
		return nil, err
	}
	c := &Cutter{t: t, p: p, mask: 1<<uint(p.AvgBits) - 1, limit: max(p.Min, p.Max)}
	for o := range c.step {
		c.step[o] = t.append(t.out[o], 0)
	}
	return c, nil
}

// Limit returns the longest chunk.
func (c *Cutter) Limit() int { return c.limit }

// lanes is the number of candidate stretches hashed side by side, and
// laneBlock the candidates of one lane per round.
const (
	lanes     = 4
	laneBlock = 8 << 10
)

// FirstCut returns the length of the chunk that starts at data[0] and its
// cut fingerprint. With fewer than Limit bytes and no cut among them it
// returns -1: the caller reads more, or at the end of the stream takes the
// rest as the last chunk (LastCut).
func (c *Cutter) FirstCut(data []byte) (n int, cut uint64) {
	end := min(len(data), c.limit) // candidates: chunk lengths min..end
	lo := c.p.Min
	for lo <= end {
		hi := min(end, lo+lanes*laneBlock-1)
		if n, cut, ok := c.search(data, lo, hi); ok {
			return n, cut
		}
		lo = hi + 1
	}
	if len(data) >= c.limit {
		return c.limit, c.t.Fingerprint(data[c.limit-ChunkWindow : c.limit])
	}
	return -1, 0
}

// search looks for the first chunk length in [lo, hi] whose window
// fingerprint has the mask's bits zero.
func (c *Cutter) search(data []byte, lo, hi int) (int, uint64, bool) {
	count := hi - lo + 1
	if count < lanes*64 {
		return c.searchOne(data, lo, hi)
	}
	per := count / lanes
	// Lane j checks the chunk lengths lo+j*per .. lo+(j+1)*per-1; its window
	// for length L ends at byte L-1.
	t := c.t
	mask := c.mask
	e0, e1, e2, e3 := lo-1, lo-1+per, lo-1+2*per, lo-1+3*per
	// Each lane starts with the whole window of its first candidate.
	f0 := t.Fingerprint(data[e0-ChunkWindow+1 : e0+1])
	f1 := t.Fingerprint(data[e1-ChunkWindow+1 : e1+1])
	f2 := t.Fingerprint(data[e2-ChunkWindow+1 : e2+1])
	f3 := t.Fingerprint(data[e3-ChunkWindow+1 : e3+1])
	h0, h1, h2, h3 := -1, -1, -1, -1
	var c0, c1, c2, c3 uint64
	if f0&mask == 0 {
		h0, c0 = 0, f0
	}
	if f1&mask == 0 {
		h1, c1 = 0, f1
	}
	if f2&mask == 0 {
		h2, c2 = 0, f2
	}
	if f3&mask == 0 {
		h3, c3 = 0, f3
	}
	// Step j of lane k takes in byte e_k+j and lets go of byte
	// e_k+j−ChunkWindow; the lanes stop at the first lane-0 hit (the
	// earliest lane with a hit decides, and lane 0 is the earliest).
	in0, in1, in2, in3 := data[e0+1:e0+per], data[e1+1:e1+per], data[e2+1:e2+per], data[e3+1:e3+per]
	out0, out1 := data[e0+1-ChunkWindow:e0+per-ChunkWindow], data[e1+1-ChunkWindow:e1+per-ChunkWindow]
	out2, out3 := data[e2+1-ChunkWindow:e2+per-ChunkWindow], data[e3+1-ChunkWindow:e3+per-ChunkWindow]
	n := len(in0)
	in1, in2, in3 = in1[:n], in2[:n], in3[:n]
	out0, out1, out2, out3 = out0[:n], out1[:n], out2[:n], out3[:n]
	mod, step, shift := &t.mod, &c.step, t.shift
	for j := 0; j < n && h0 < 0; j++ {
		x0 := mod[byte(f0>>shift)] ^ step[out0[j]]
		x1 := mod[byte(f1>>shift)] ^ step[out1[j]]
		x2 := mod[byte(f2>>shift)] ^ step[out2[j]]
		x3 := mod[byte(f3>>shift)] ^ step[out3[j]]
		f0 = (f0<<8 | uint64(in0[j])) ^ x0
		f1 = (f1<<8 | uint64(in1[j])) ^ x1
		f2 = (f2<<8 | uint64(in2[j])) ^ x2
		f3 = (f3<<8 | uint64(in3[j])) ^ x3
		if f0&mask != 0 && f1&mask != 0 && f2&mask != 0 && f3&mask != 0 {
			continue // the common case: no lane has a hit
		}
		if f0&mask == 0 {
			h0, c0 = j+1, f0
		}
		if f1&mask == 0 && h1 < 0 {
			h1, c1 = j+1, f1
		}
		if f2&mask == 0 && h2 < 0 {
			h2, c2 = j+1, f2
		}
		if f3&mask == 0 && h3 < 0 {
			h3, c3 = j+1, f3
		}
	}
	switch {
	case h0 >= 0:
		return lo + h0, c0, true
	case h1 >= 0:
		return lo + per + h1, c1, true
	case h2 >= 0:
		return lo + 2*per + h2, c2, true
	case h3 >= 0:
		return lo + 3*per + h3, c3, true
	}
	if rest := lo + lanes*per; rest <= hi {
		return c.searchOne(data, rest, hi)
	}
	return 0, 0, false
}

// searchOne is search with one lane.
func (c *Cutter) searchOne(data []byte, lo, hi int) (int, uint64, bool) {
	t := c.t
	var f uint64
	for _, b := range data[lo-ChunkWindow : lo-1] {
		f = t.append(f, b)
	}
	for e := lo - 1; e < hi; e++ {
		f = t.append(f, data[e])
		if f&c.mask == 0 {
			return e + 1, f, true
		}
		f ^= t.out[data[e-ChunkWindow+1]]
	}
	return 0, 0, false
}

// LastCut returns the Cut restic/chunker v0.4.0 reports for a last chunk of
// the given bytes (a stream that ended without a cut): its rolling state,
// which starts as the fingerprint of 63 zero bytes and a byte 1 and takes in
// the bytes after the first Min−64 of the chunk.
func (c *Cutter) LastCut(chunk []byte) uint64 {
	skip := c.p.Min - ChunkWindow
	if len(chunk) <= skip {
		return 1
	}
	hashed := chunk[skip:]
	if len(hashed) >= ChunkWindow {
		return c.t.Fingerprint(hashed[len(hashed)-ChunkWindow:])
	}
	var w [ChunkWindow]byte
	w[ChunkWindow-1-len(hashed)] = 1
	copy(w[ChunkWindow-len(hashed):], hashed)
	return c.t.Fingerprint(w[:])
}

// Chunk is one content-defined chunk of a stream.
type Chunk struct {
	Start  int64
	Length int
	Cut    uint64
	Data   []byte // valid until the next call of Next
}

// Chunker cuts a stream into chunks. Its buffer holds twice the longest
// chunk, so streams of any length take bounded memory.
type Chunker struct {
	c    *Cutter
	r    io.Reader
	buf  []byte
	lo   int // next chunk's first byte in buf
	hi   int // end of the data in buf
	pos  int64
	eof  bool
	err  error
	done bool
}

// NewChunker returns a Chunker of r.
func NewChunker(r io.Reader, p ChunkParams) (*Chunker, error) {
	c, err := NewCutter(p)
	if err != nil {
		return nil, err
	}
	return &Chunker{c: c, r: r, buf: make([]byte, max(2*c.limit, 1<<20))}, nil
}

// fill reads until the buffer holds a whole longest chunk or the stream
// ends. The unread bytes move to the buffer's start only when a longest
// chunk no longer fits after lo: at most once per longest chunk consumed,
// so a stream's bytes are moved at most about once each.
func (ch *Chunker) fill() {
	if ch.hi-ch.lo < ch.c.limit && len(ch.buf)-ch.lo < ch.c.limit {
		ch.hi = copy(ch.buf, ch.buf[ch.lo:ch.hi])
		ch.lo = 0
	}
	for !ch.eof && ch.hi < len(ch.buf) && ch.hi-ch.lo < ch.c.limit {
		n, err := ch.r.Read(ch.buf[ch.hi:])
		ch.hi += n
		if errors.Is(err, io.EOF) {
			ch.eof = true
		} else if err != nil {
			ch.err, ch.eof = err, true
		}
	}
}

// Next returns the next chunk, or io.EOF after the last one, or the read
// error.
func (ch *Chunker) Next() (Chunk, error) {
	if ch.done {
		return Chunk{}, io.EOF
	}
	ch.fill()
	if ch.err != nil {
		ch.done = true
		return Chunk{}, ch.err
	}
	data := ch.buf[ch.lo:ch.hi]
	if len(data) == 0 {
		ch.done = true
		return Chunk{}, io.EOF
	}
	n, cut := ch.c.FirstCut(data)
	if n < 0 {
		n, cut = len(data), ch.c.LastCut(data)
	}
	k := Chunk{Start: ch.pos, Length: n, Cut: cut, Data: data[:n]}
	ch.lo += n
	ch.pos += int64(n)
	return k, nil
}
