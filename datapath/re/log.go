package re

// entry is one logged payload.
type entry struct {
	id      uint64
	data    []byte
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
}

// payloadLog holds payloads by id, first in first out, bounded in bytes.
type payloadLog struct {
	byID  map[uint64]*entry
	fifo  []*entry // oldest at head
	head  int
	bytes int
	limit int
}

func newLog(limit int) payloadLog {
	return payloadLog{byID: map[uint64]*entry{}, limit: limit}
}

// add logs e, evicting the oldest payloads over the limit; evict is called
// for each.
func (l *payloadLog) add(e *entry, evict func(*entry)) {
	if old, ok := l.byID[e.id]; ok && !old.gone {
		return
	}
	l.byID[e.id] = e
	if l.head < len(l.fifo) {
		last := l.fifo[len(l.fifo)-1]
		last.next, e.prev = e, last
	}
	l.fifo = append(l.fifo, e)
	l.bytes += len(e.data)
	for l.bytes > l.limit && l.head < len(l.fifo) {
		o := l.fifo[l.head]
		l.fifo[l.head] = nil
		l.head++
		l.bytes -= len(o.data)
		o.gone = true
		if o.next != nil {
			o.next.prev = nil
			o.next = nil
		}
		if l.byID[o.id] == o {
			delete(l.byID, o.id)
		}
		if evict != nil {
			evict(o)
		}
	}
	if l.head > 4096 && l.head*2 > len(l.fifo) {
		n := copy(l.fifo, l.fifo[l.head:])
		clear(l.fifo[n:])
		l.fifo = l.fifo[:n]
		l.head = 0
	}
}

// get returns the live entry of id.
func (l *payloadLog) get(id uint64) *entry { return l.byID[id] }

// reset empties the log.
func (l *payloadLog) reset(evict func(*entry)) {
	for _, e := range l.fifo[l.head:] {
		e.gone = true
		e.prev, e.next = nil, nil
		if evict != nil {
			evict(e)
		}
	}
	*l = newLog(l.limit)
}

// each calls f for every live entry.
func (l *payloadLog) each(f func(*entry)) {
	for _, e := range l.fifo[l.head:] {
		f(e)
	}
}
