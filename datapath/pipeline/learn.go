package pipeline

import (
	"sync"
	"time"
)

// macTable is the forwarding database of the L2 learning switch that
// serves standalone fail mode and output:NORMAL: source MAC address to the
// port it was last seen on, forgotten after age.
type macTable struct {
	mu  sync.Mutex
	age int64 // nanoseconds
	m   map[[6]byte]macEntry
}

type macEntry struct {
	port uint32
	seen int64 // unix nanoseconds
}

// maxLearned bounds the table, so that a flood of random source addresses
// cannot exhaust memory; when full, stale entries are swept and, if none
// are stale, new addresses are not learned (they are flooded to).
const maxLearned = 1 << 16

func (t *macTable) init(age time.Duration) {
	t.age = int64(age)
	t.m = map[[6]byte]macEntry{}
}

// learn records that src was seen on port at now (unicast sources only).
func (t *macTable) learn(src [6]byte, port uint32, now int64) {
	if src[0]&1 != 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[src]; !ok && len(t.m) >= maxLearned {
		t.sweepLocked(now)
		if len(t.m) >= maxLearned {
			return
		}
	}
	t.m[src] = macEntry{port: port, seen: now}
}

// lookup returns the port dst was learned on, if it is fresh.
func (t *macTable) lookup(dst [6]byte, now int64) (uint32, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.m[dst]
	if !ok || now-e.seen > t.age {
		return 0, false
	}
	return e.port, true
}

func (t *macTable) sweepLocked(now int64) {
	for k, e := range t.m {
		if now-e.seen > t.age {
			delete(t.m, k)
		}
	}
}

// len returns the number of learned addresses.
func (t *macTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// normal forwards a packet as a learning switch: learn its source, send it
// to the port its destination was learned on, flood it when the
// destination is unknown, broadcast or multicast; drop it when that port
// is the one it came in on.
func (w *worker) normal(p *pkt) {
	if len(p.data) < ethHdr {
		return
	}
	var dst, src [6]byte
	copy(dst[:], p.data[0:6])
	copy(src[:], p.data[6:12])
	w.s.learn.learn(src, p.inPort, w.now)
	if dst[0]&1 == 0 {
		if out, ok := w.s.learn.lookup(dst, w.now); ok {
			if out != p.inPort {
				w.emit(out, p.data)
			}
			return
		}
	}
	w.flood(p)
}
