package route

import (
	"net/netip"
	"sync/atomic"
)

// Entry is an installed route as the datapath sees it. Its Route is immutable
// once the entry is published (a change publishes a new *Entry); its counters
// are atomics, shared with the entry's successors for as long as the prefix
// stays installed (a next-hop change keeps the route's counts, and those of
// the next hops that remain).
type Entry struct {
	Route

	slot  uint32   // the lpm leaf value naming this entry
	cum   []uint64 // cumulative weights, cum[i] = sum of weights 0..i
	total uint64
	c     *counter   // per route
	nh    []*counter // per next hop, index as NextHops
}

type counter struct {
	packets, bytes atomic.Uint64
}

func (c *counter) add(packets, bytes uint64) {
	c.packets.Add(packets)
	c.bytes.Add(bytes)
}

// NHCounters are one next hop's counts.
type NHCounters struct {
	NextHop NextHop
	Packets uint64
	Bytes   uint64
}

// newEntry makes the entry of r (which it takes over) in slot, taking over
// the counters of prev (the prefix's previous entry, or nil).
func newEntry(r Route, slot uint32, prev *Entry) *Entry {
	e := &Entry{Route: r, slot: slot, cum: make([]uint64, len(r.NextHops)), nh: make([]*counter, len(r.NextHops))}
	for i, h := range r.NextHops {
		e.total += uint64(h.Weight)
		e.cum[i] = e.total
	}
	e.c = &counter{}
	if prev != nil {
		e.c = prev.c
	}
	for i, h := range r.NextHops {
		e.nh[i] = &counter{}
		if prev == nil {
			continue
		}
		for j, o := range prev.NextHops {
			if o.Gateway == h.Gateway && o.Port == h.Port {
				e.nh[i] = prev.nh[j]
				break
			}
		}
	}
	return e
}

// Slot returns the entry's slot: the leaf value an LPM lookup returns for it.
func (e *Entry) Slot() uint32 { return e.slot }

// Covers reports whether a lies in the entry's prefix. A datapath that got
// the entry from a lookup racing a route change may check it: slots are
// reused only well after their route is deleted (see Table), and this makes
// even a lookup held up for longer never use an unrelated route.
func (e *Entry) Covers(a netip.Addr) bool { return e.Prefix.Contains(a) }

// Pick returns the next hop for a flow with hash flowHash, and its index. The
// choice is weighted (next hop i takes Weight_i / sum of the weights of the
// hash space) and stable: the same hash picks the same next hop for as long
// as the entry's next hops are unchanged. The hash is mixed first, so any
// decent 32-bit flow hash (even one with weak low bits) spreads evenly.
func (e *Entry) Pick(flowHash uint32) (NextHop, int) {
	if len(e.NextHops) == 1 {
		return e.NextHops[0], 0
	}
	x := uint64(mix32(flowHash)) * e.total >> 32 // uniform in [0, total)
	lo, hi := 0, len(e.cum)-1
	for lo < hi {
		m := (lo + hi) / 2
		if x < e.cum[m] {
			hi = m
		} else {
			lo = m + 1
		}
	}
	return e.NextHops[lo], lo
}

// mix32 is murmur3's finaliser: every input bit affects every output bit.
func mix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// Count adds packets and bytes to the route's counters and to those of next
// hop nh (an index as Pick returns; one out of range counts for the route
// only). Safe for concurrent use.
func (e *Entry) Count(nh int, packets, bytes uint64) {
	e.c.add(packets, bytes)
	if nh >= 0 && nh < len(e.nh) {
		e.nh[nh].add(packets, bytes)
	}
}

// Counters returns the route's packet and byte counts and those of each next
// hop, in the order of NextHops.
func (e *Entry) Counters() (packets, bytes uint64, perNextHop []NHCounters) {
	perNextHop = make([]NHCounters, len(e.NextHops))
	for i, h := range e.NextHops {
		perNextHop[i] = NHCounters{NextHop: h, Packets: e.nh[i].packets.Load(), Bytes: e.nh[i].bytes.Load()}
	}
	return e.c.packets.Load(), e.c.bytes.Load(), perNextHop
}
