package pubsub

import (
	"cmp"
	"slices"
	"strings"
)

// scratch is one matching goroutine's state: the per-filter counters and the
// per-port flags. A counter is 16 bits: the epoch (the event's number modulo
// 255, never 0) in the high byte and the count of satisfied constraints in
// the low byte; a counter of another epoch reads as 0, so no event resets
// the counters, and every 255th event clears them all at once.
type scratch struct {
	cnt   []uint16
	ep    uint16
	done  []bool   // per port index: matched, prune its filters
	left  int      // ports with filters not yet matched
	hits  []uint32 // the slot that matched each matched port
	seen  []string // *= keys found in this attribute
	t     *Table   // the table and event being matched
	ev    *Event
	emask uint64 // nameBit of the event's names
}

func (t *Table) getScratch() *scratch {
	if v := t.pool.Get(); v != nil {
		return v.(*scratch)
	}
	return &scratch{}
}

// begin prepares the scratch for one event; t.mu is held.
func (sc *scratch) begin(t *Table) {
	if len(sc.cnt) < len(t.info) {
		sc.cnt = append(sc.cnt, make([]uint16, len(t.info)-len(sc.cnt))...)
	}
	sc.ep++
	if sc.ep == 256 {
		clear(sc.cnt)
		sc.ep = 1
	}
	if len(sc.done) < len(t.ports) {
		sc.done = make([]bool, len(t.ports))
	}
	clear(sc.done)
	sc.left = t.active
	sc.hits = sc.hits[:0]
}

func (sc *scratch) hit(s uint32, in uint32) {
	if m := &sc.t.meta[s]; m.resid && (m.rmask&^sc.emask != 0 || !residualOK(m.filt, m.best, sc.ev)) {
		return
	}
	sc.done[in>>8] = true
	sc.left--
	sc.hits = append(sc.hits, s)
}

// The counting loops: one per entry type, so that each is a tight loop.

func (sc *scratch) incSlots(info []uint32, ss []uint32) {
	for _, s := range ss {
		in := info[s]
		if sc.done[in>>8] {
			continue
		}
		c := sc.cnt[s]
		if c>>8 != sc.ep {
			c = sc.ep << 8
		}
		c++
		sc.cnt[s] = c
		if uint8(c) == uint8(in) {
			sc.hit(s, in)
		}
	}
}

func (sc *scratch) incInts(info []uint32, a []intEnt) {
	for i := range a {
		s := a[i].s
		in := info[s]
		if sc.done[in>>8] {
			continue
		}
		c := sc.cnt[s]
		if c>>8 != sc.ep {
			c = sc.ep << 8
		}
		c++
		sc.cnt[s] = c
		if uint8(c) == uint8(in) {
			sc.hit(s, in)
		}
	}
}

func (sc *scratch) incFloats(info []uint32, a []floatEnt) {
	for i := range a {
		s := a[i].s
		in := info[s]
		if sc.done[in>>8] {
			continue
		}
		c := sc.cnt[s]
		if c>>8 != sc.ep {
			c = sc.ep << 8
		}
		c++
		sc.cnt[s] = c
		if uint8(c) == uint8(in) {
			sc.hit(s, in)
		}
	}
}

func (sc *scratch) incStrs(info []uint32, a []strEnt) {
	for i := range a {
		s := a[i].s
		in := info[s]
		if sc.done[in>>8] {
			continue
		}
		c := sc.cnt[s]
		if c>>8 != sc.ep {
			c = sc.ep << 8
		}
		c++
		sc.cnt[s] = c
		if uint8(c) == uint8(in) {
			sc.hit(s, in)
		}
	}
}

func (sc *scratch) incSlotEnts(info []uint32, a []slotEnt) {
	for _, e := range a {
		s := uint32(e)
		in := info[s]
		if sc.done[in>>8] {
			continue
		}
		c := sc.cnt[s]
		if c>>8 != sc.ep {
			c = sc.ep << 8
		}
		c++
		sc.cnt[s] = c
		if uint8(c) == uint8(in) {
			sc.hit(s, in)
		}
	}
}

// Match returns the sorted ports whose predicate the event satisfies.
func (t *Table) Match(e *Event) []uint32 {
	return t.AppendMatch(nil, e)
}

// AppendMatch appends the sorted ports whose predicate the event satisfies
// to dst.
func (t *Table) AppendMatch(dst []uint32, e *Event) []uint32 {
	sc := t.getScratch()
	t.mu.RLock()
	dst = t.matchLocked(dst, e, sc)
	t.mu.RUnlock()
	t.pool.Put(sc)
	return dst
}

// MatchBatch matches a batch of events, each under the read lock (a
// change made during the batch is seen by the events after it); out[i] holds
// event i's sorted ports (the slices share one backing array). out is
// reused when it has the capacity.
func (t *Table) MatchBatch(evs []Event, out [][]uint32) [][]uint32 {
	sc := t.getScratch()
	out = slices.Grow(out[:0], len(evs))[:len(evs)]
	ends := make([]int, len(evs))
	var flat []uint32
	// The read lock per event, not per batch: a change waits for one
	// event's match (tens of µs), not a batch's (ms), so that changes
	// keep their rate while batches are matched (bench pubsub --churn).
	for i := range evs {
		t.mu.RLock()
		flat = t.matchLocked(flat, &evs[i], sc)
		t.mu.RUnlock()
		ends[i] = len(flat)
	}
	t.pool.Put(sc)
	start := 0
	for i, end := range ends {
		out[i] = flat[start:end:end]
		start = end
	}
	return out
}

func (t *Table) matchLocked(dst []uint32, e *Event, sc *scratch) []uint32 {
	sc.begin(t)
	sc.t, sc.ev, sc.emask = t, e, 0
	for i := range e.Attrs {
		sc.emask |= nameBit(e.Attrs[i].Name)
	}
	defer func() { sc.t, sc.ev = nil, nil }()
	if sc.left == 0 {
		return dst
	}
	for i := range e.Attrs {
		ni := t.names[e.Attrs[i].Name]
		if ni == nil {
			continue
		}
		t.matchAttr(ni, e.Attrs[i].Value, sc)
		if sc.left == 0 {
			break
		}
	}
	n := len(dst)
	for _, s := range sc.hits {
		t.meta[s].owner.matches.Add(1)
		dst = append(dst, t.ports[t.info[s]>>8])
	}
	slices.Sort(dst[n:])
	return dst
}

// matchAttr counts the constraints on one attribute that its value
// satisfies. A value-sorted array is searched in its sorted part and its
// unsorted tail (at most tailMax entries a change left, index.go) checked
// entry by entry.
func (t *Table) matchAttr(ni *nameIdx, v Value, sc *scratch) {
	info := t.info
	switch v.Type {
	case TypeInt:
		x := v.Int
		sc.incSlots(info, ni.eqInt.get(x))
		for r := 1; r < 5; r++ {
			if c := &ni.ints[r]; len(c.a) > 0 {
				a := c.a[:c.sortedN]
				i, j := span(r, lbInt(a, x), ubInt(a, x), len(a))
				sc.incInts(info, a[i:j])
				for _, e := range c.a[c.sortedN:] {
					if sat(r, cmp.Compare(e.v, x)) {
						sc.inc(info, e.s)
					}
				}
			}
		}
		xf := float64(x)
		for r := 0; r < 5; r++ {
			if c := &ni.floats[r]; len(c.a) > 0 {
				t.floatsAt(c, r, xf, sc)
			}
		}
		t.matchNeNum(ni, v, sc)
	case TypeFloat:
		x := v.Float
		for r := 0; r < 5; r++ {
			if c := &ni.ints[r]; len(c.a) > 0 {
				a := c.a[:c.sortedN]
				i, j := span(r, lbIntF(a, x), ubIntF(a, x), len(a))
				sc.incInts(info, a[i:j])
				for _, e := range c.a[c.sortedN:] {
					if sat(r, cmp.Compare(float64(e.v), x)) {
						sc.inc(info, e.s)
					}
				}
			}
			if c := &ni.floats[r]; len(c.a) > 0 {
				t.floatsAt(c, r, x, sc)
			}
		}
		t.matchNeNum(ni, v, sc)
	case TypeString:
		t.matchString(ni, v.Str, sc)
	case TypeBool:
		if v.Int != 0 {
			sc.incSlotEnts(info, ni.bTrue.a)
		} else {
			sc.incSlotEnts(info, ni.bFalse.a)
		}
	}
}

func (t *Table) floatsAt(c *sorted[floatEnt], r int, x float64, sc *scratch) {
	a := c.a[:c.sortedN]
	i, j := span(r, lbFloat(a, x), ubFloat(a, x), len(a))
	sc.incFloats(t.info, a[i:j])
	for _, e := range c.a[c.sortedN:] {
		if sat(r, cmp.Compare(e.v, x)) {
			sc.inc(t.info, e.s)
		}
	}
}

// sat reports whether a constraint of sorted array r (a rop index) holds
// for an event value x, given o = the comparison of the constraint's value
// with x (-1, 0, +1): span's rule for one entry.
func sat(r, o int) bool {
	switch r {
	case 0: // x = c
		return o == 0
	case 1: // x < c
		return o > 0
	case 2: // x <= c
		return o >= 0
	case 3: // x > c
		return o < 0
	default: // x >= c
		return o <= 0
	}
}

// inc counts one satisfied constraint of slot s.
func (sc *scratch) inc(info []uint32, s uint32) {
	in := info[s]
	if sc.done[in>>8] {
		return
	}
	c := sc.cnt[s]
	if c>>8 != sc.ep {
		c = sc.ep << 8
	}
	c++
	sc.cnt[s] = c
	if uint8(c) == uint8(in) {
		sc.hit(s, in)
	}
}

func (t *Table) matchNeNum(ni *nameIdx, v Value, sc *scratch) {
	info := t.info
	for _, e := range ni.neNum.a {
		if !e.ne(v) {
			continue
		}
		s := e.s
		in := info[s]
		if sc.done[in>>8] {
			continue
		}
		c := sc.cnt[s]
		if c>>8 != sc.ep {
			c = sc.ep << 8
		}
		c++
		sc.cnt[s] = c
		if uint8(c) == uint8(in) {
			sc.hit(s, in)
		}
	}
}

func (t *Table) matchString(ni *nameIdx, x string, sc *scratch) {
	info := t.info
	sc.incSlots(info, ni.eqStr.get(x))
	for r := 1; r < 5; r++ {
		if c := &ni.strs[r]; len(c.a) > 0 {
			a := c.a[:c.sortedN]
			i, j := span(r, lbStr(a, x), ubStr(a, x), len(a))
			sc.incStrs(info, a[i:j])
			for _, e := range c.a[c.sortedN:] {
				if sat(r, strings.Compare(e.v, x)) {
					sc.inc(info, e.s)
				}
			}
		}
	}
	if len(ni.neStr.a) > 0 {
		var id uint32 // 0: no != constraint has this value
		if r := ni.strIDs[x]; r != nil {
			id = r.id
		}
		for _, e := range ni.neStr.a {
			if e.id == id {
				continue
			}
			s := e.s
			in := info[s]
			if sc.done[in>>8] {
				continue
			}
			c := sc.cnt[s]
			if c>>8 != sc.ep {
				c = sc.ep << 8
			}
			c++
			sc.cnt[s] = c
			if uint8(c) == uint8(in) {
				sc.hit(s, in)
			}
		}
	}
	for _, l := range ni.prefix.lens {
		if l > len(x) {
			break
		}
		sc.incSlots(info, ni.prefix.get(x[:l]))
	}
	for _, l := range ni.suffix.lens {
		if l > len(x) {
			break
		}
		sc.incSlots(info, ni.suffix.get(x[len(x)-l:]))
	}
	t.matchContains(&ni.contains, x, sc)
}

// matchContains finds the *= values that occur in x: by scanning the
// distinct values, or, when that is more work, by looking up every
// substring of x of the values' lengths (each value counted once).
func (t *Table) matchContains(a *affix, x string, sc *scratch) {
	if len(a.vals) == 0 {
		return
	}
	windows := 0
	for _, l := range a.lens {
		if l > len(x) {
			break
		}
		windows += len(x) - l + 1
	}
	if len(a.vals) <= windows {
		for _, v := range a.vals {
			if strings.Contains(x, v) {
				sc.incSlots(t.info, a.get(v))
			}
		}
		return
	}
	for _, l := range a.lens {
		if l > len(x) {
			break
		}
		sc.seen = sc.seen[:0]
		for i := 0; i+l <= len(x); i++ {
			k := x[i : i+l]
			i, ok := a.m[k]
			if ok && !slices.Contains(sc.seen, k) {
				sc.seen = append(sc.seen, k)
				sc.incSlots(t.info, a.lists[i])
			}
			if l == 0 {
				break
			}
		}
	}
}
