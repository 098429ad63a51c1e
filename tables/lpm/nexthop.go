package lpm

import (
	"fmt"
	"net/netip"
)

// NextHop is what a route forwards to: a gateway (invalid for a directly
// connected route) and an output port.
type NextHop struct {
	Gateway netip.Addr
	Port    uint32
}

// NextHops interns next hops as small indices, the values a trie stores: equal
// next hops share one index, counted by reference. Indices start at 1 (0 is
// "no route") and go up to MaxNextHop; a released index is reused. Not safe
// for concurrent use.
type NextHops struct {
	ids  map[NextHop]uint32
	vals []NextHop // index id-1
	refs []uint32  // index id-1; 0 = free
	free []uint32
}

// Acquire returns h's index, allocating one on first use, and takes a
// reference to it.
func (n *NextHops) Acquire(h NextHop) (uint32, error) {
	if id, ok := n.ids[h]; ok {
		n.refs[id-1]++
		return id, nil
	}
	var id uint32
	switch {
	case len(n.free) > 0:
		id = n.free[len(n.free)-1]
		n.free = n.free[:len(n.free)-1]
	case len(n.vals) < MaxNextHop:
		n.vals = append(n.vals, NextHop{})
		n.refs = append(n.refs, 0)
		id = uint32(len(n.vals))
	default:
		return 0, fmt.Errorf("lpm: acquire %v: %w", h, ErrFull)
	}
	if n.ids == nil {
		n.ids = make(map[NextHop]uint32)
	}
	n.ids[h] = id
	n.vals[id-1], n.refs[id-1] = h, 1
	return id, nil
}

// Release drops one reference to id; the last one frees it. Releasing an id
// that is not in use does nothing.
func (n *NextHops) Release(id uint32) {
	if id == 0 || int(id) > len(n.refs) || n.refs[id-1] == 0 {
		return
	}
	n.refs[id-1]--
	if n.refs[id-1] > 0 {
		return
	}
	delete(n.ids, n.vals[id-1])
	n.vals[id-1] = NextHop{}
	n.free = append(n.free, id)
}

// Get returns the next hop with index id, if it is in use.
func (n *NextHops) Get(id uint32) (NextHop, bool) {
	if id == 0 || int(id) > len(n.refs) || n.refs[id-1] == 0 {
		return NextHop{}, false
	}
	return n.vals[id-1], true
}

// Len returns the number of indices in use.
func (n *NextHops) Len() int { return len(n.ids) }
