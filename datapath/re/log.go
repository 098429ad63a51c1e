package re

// entry is one logged payload.
type entry struct {
	id      uint64
	data    []byte   // in the log's ring
	off     int      // data's offset in the ring
	acked   bool     // encoder: the decoder acknowledged it
	gone    bool     // evicted: index entries pointing here are stale
	fps     []uint64 // encoder: its markers' fingerprints, for the index
	markers []uint16 // encoder: its markers' positions
	// prev and next are the payloads logged just before and after this
	// one (encoder: a match that runs off either end of this payload
	// continues there when the bytes agree, the usual case for the next
	// segment of the same TCP stream). The oldest entry's prev is nil, so
	// that evicted entries are not kept alive.
	prev, next *entry
	// The markers of a payload with few of them live here (no allocation
	// of their own).
	fpsIn [inlineMarkers]uint64
	posIn [inlineMarkers]uint16
}

// inlineMarkers is how many markers an entry holds without allocating:
// a 1,460-byte payload has about 5.6.
const inlineMarkers = 12

// payloadLog holds payloads by id, first in first out, bounded in bytes.
// The payloads' bytes live in one ring of limit bytes, written in the
// order they are logged: logging a payload evicts the oldest ones whose
// bytes its own overwrite, so the log takes no allocation per payload for
// its bytes (and gives the garbage collector nothing to scan).
type payloadLog struct {
	byID  idTable
	fifo  []*entry // oldest at head
	head  int
	bytes int
	limit int
	ring  []byte // allocated on first use
	w     int    // the next payload's offset in ring
	// recycle: evicted entries go to free for newEntry, so that logging a
	// payload allocates nothing. The decoder's entries have no other
	// pointers to them but its last reference's (Decoder.ref, which
	// checks the id and gone). The encoder's index drops its pointers to an entry
	// when it is evicted (the evict callback, before the entry is
	// recycled); what else may still point to one (a flow's hint, the
	// acknowledgements' guess) finds it either in the free list, gone and
	// not acknowledged, hence not usable, or logged again as another
	// payload, whose id and bytes are read together and checked as any
	// other candidate's.
	recycle bool
	free    []*entry
}

// maxFree bounds the entries kept for reuse.
const maxFree = 1024

// newEntry returns an entry for payload id: a recycled one when there is.
func (l *payloadLog) newEntry(id uint64) *entry {
	if n := len(l.free); n > 0 {
		e := l.free[n-1]
		l.free = l.free[:n-1]
		*e = entry{id: id}
		return e
	}
	return &entry{id: id}
}

func newLog(limit int) payloadLog {
	return payloadLog{byID: newIDTable(), limit: limit}
}

// add logs e with a copy of pay, evicting the oldest payloads whose bytes
// the copy overwrites; evict is called for each. A payload longer than the
// whole log is not logged (e.gone says so). The caller has checked that
// no payload of e's id is logged (get).
func (l *payloadLog) add(e *entry, pay []byte, evict func(*entry)) {
	n := len(pay)
	if n > l.limit {
		e.gone = true
		return
	}
	if l.ring == nil {
		l.ring = make([]byte, l.limit)
	}
	if l.w+n > len(l.ring) {
		// Wrap: the tail's few bytes stay unused this lap, and the payloads
		// still there (the oldest) go first.
		for l.head < len(l.fifo) && l.fifo[l.head].off >= l.w {
			l.evictOldest(evict)
		}
		l.w = 0
	}
	at := l.w
	// Evict the oldest payloads while they overlap [at, at+n): the ring is
	// written in FIFO order, so those are the oldest ones.
	for l.head < len(l.fifo) {
		o := l.fifo[l.head]
		if o.off+len(o.data) <= at || o.off >= at+n {
			break
		}
		l.evictOldest(evict)
	}
	copy(l.ring[at:at+n], pay)
	e.data, e.off = l.ring[at:at+n:at+n], at
	l.w = at + n
	l.byID.set(e.id, e)
	if l.head < len(l.fifo) {
		last := l.fifo[len(l.fifo)-1]
		last.next, e.prev = e, last
	}
	l.fifo = append(l.fifo, e)
	l.bytes += n
	if l.head > 4096 && l.head*2 > len(l.fifo) {
		m := copy(l.fifo, l.fifo[l.head:])
		clear(l.fifo[m:])
		l.fifo = l.fifo[:m]
		l.head = 0
	}
}

// evictOldest drops the oldest payload.
func (l *payloadLog) evictOldest(evict func(*entry)) {
	o := l.fifo[l.head]
	l.fifo[l.head] = nil
	l.head++
	l.bytes -= len(o.data)
	o.gone = true
	if o.next != nil {
		o.next.prev = nil
		o.next = nil
	}
	l.byID.delIf(o.id, o)
	if evict != nil {
		evict(o)
	}
	if l.recycle && len(l.free) < maxFree {
		o.data, o.fps, o.markers, o.acked = nil, nil, nil, false // gone stays set
		l.free = append(l.free, o)
	}
}

// get returns the live entry of id.
func (l *payloadLog) get(id uint64) *entry {
	return l.byID.get(id)
}

// reset empties the log (its ring is kept).
func (l *payloadLog) reset(evict func(*entry)) {
	for _, e := range l.fifo[l.head:] {
		e.gone = true
		e.prev, e.next = nil, nil
		if evict != nil {
			evict(e)
		}
	}
	ring, recycle := l.ring, l.recycle
	*l = newLog(l.limit)
	l.ring, l.recycle = ring, recycle
}

// each calls f for every live entry.
func (l *payloadLog) each(f func(*entry)) {
	for _, e := range l.fifo[l.head:] {
		f(e)
	}
}
