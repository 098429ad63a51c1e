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
	lt   laneTables // the lanes' left-aligned tables (cutlanes.go)
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
	c.initLanes()
	return c, nil
}

// Limit returns the longest chunk.
func (c *Cutter) Limit() int { return c.limit }

// FirstCut returns the length of the chunk that starts at data[0] and its
// cut fingerprint. With fewer than Limit bytes and no cut among them it
// returns -1: the caller reads more, or at the end of the stream takes the
// rest as the last chunk (LastCut).
func (c *Cutter) FirstCut(data []byte) (n int, cut uint64) {
	n, cut, _ = c.cutFrom(data, c.p.Min)
	return n, cut
}

// cutFrom is FirstCut with the chunk lengths below from known to have no
// cut; when it finds none (n −1) it returns the next length to check once
// more data is there.
func (c *Cutter) cutFrom(data []byte, from int) (n int, cut uint64, next int) {
	end := min(len(data), c.limit) // candidates: chunk lengths from..end
	lo := max(from, c.p.Min)
	// Rounds of four lanes over 4·laneBlock candidates (cutlanes.go); the
	// window of candidate lo ends at data[lo−1].
	for ; lo+4*laneBlock-1 <= end; lo += 4 * laneBlock {
		if i, cut := c.lt.round((*[laneSpan]byte)(data[lo-ChunkWindow:])); i >= 0 {
			return lo + i, cut, 0
		}
	}
	if lo <= end {
		if n, cut, ok := c.searchOne(data, lo, end); ok {
			return n, cut, 0
		}
		lo = end + 1
	}
	if len(data) >= c.limit {
		return c.limit, c.t.Fingerprint(data[c.limit-ChunkWindow : c.limit]), 0
	}
	return -1, 0, lo
}

// searchOne looks for the first chunk length in [lo, hi] whose window
// fingerprint has the mask's bits zero, with one chain.
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

// Chunker cuts a stream into chunks. It reads readStep bytes at a time,
// as far as the next cut needs, into a buffer that holds at most twice the
// longest chunk, so streams of any length take bounded memory.
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

// readStep is how many bytes a Chunker asks of its reader at a time (its
// first buffer's size beyond the minimum chunk).
const readStep = 1 << 20

// NewChunker returns a Chunker of r.
func NewChunker(r io.Reader, p ChunkParams) (*Chunker, error) {
	c, err := NewCutter(p)
	if err != nil {
		return nil, err
	}
	return &Chunker{c: c, r: r, buf: make([]byte, min(2*c.limit, c.p.Min+4*readStep))}, nil
}

// fill reads until the buffer holds want bytes from lo (at most a longest
// chunk) or the stream ends. The unread bytes move to the buffer's start
// when want bytes no longer fit after lo; the buffer grows (up to twice the
// longest chunk) when they would not fit at its start either.
func (ch *Chunker) fill(want int) {
	want = min(want, ch.c.limit)
	if ch.eof || ch.hi-ch.lo >= want {
		return
	}
	if len(ch.buf)-ch.lo < want {
		if len(ch.buf) < want+readStep && len(ch.buf) < 2*ch.c.limit {
			buf := make([]byte, min(2*ch.c.limit, max(2*len(ch.buf), want+readStep)))
			ch.hi = copy(buf, ch.buf[ch.lo:ch.hi])
			ch.buf = buf
		} else {
			ch.hi = copy(ch.buf, ch.buf[ch.lo:ch.hi])
		}
		ch.lo = 0
	}
	for ch.hi-ch.lo < want {
		n, err := ch.r.Read(ch.buf[ch.hi:min(len(ch.buf), ch.lo+want+readStep)])
		ch.hi += n
		if errors.Is(err, io.EOF) {
			ch.eof = true
			return
		} else if err != nil {
			ch.err, ch.eof = err, true
			return
		}
	}
}

// Next returns the next chunk, or io.EOF after the last one, or the read
// error.
func (ch *Chunker) Next() (Chunk, error) {
	if ch.done {
		return Chunk{}, io.EOF
	}
	want, from := ch.c.p.Min+readStep, 0
	var n int
	var cut uint64
	for {
		ch.fill(want)
		if ch.err != nil {
			ch.done = true
			return Chunk{}, ch.err
		}
		data := ch.buf[ch.lo:ch.hi]
		if len(data) == 0 {
			ch.done = true
			return Chunk{}, io.EOF
		}
		if n, cut, from = ch.c.cutFrom(data, from); n >= 0 {
			break
		}
		if ch.eof {
			n, cut = len(data), ch.c.LastCut(data)
			break
		}
		want = len(data) + readStep
	}
	k := Chunk{Start: ch.pos, Length: n, Cut: cut, Data: ch.buf[ch.lo : ch.lo+n]}
	ch.lo += n
	ch.pos += int64(n)
	return k, nil
}
