package lpm

// route is a prefix key with its next hop.
type route struct {
	k  pkey
	nh uint32
}

// buildTrie builds a trie off-line from a prefix set: it counts the nodes
// every level start would have, chooses the strides (Algorithm 3, unless o
// fixes them), sizes the levels with head-room, and inserts the prefixes from
// the shortest to the longest. In that order a prefix's range holds only
// leaves of shorter prefixes, so each insert is a walk plus one fill, and the
// whole build costs O(prefixes + image words). No bubbles are recorded.
func buildTrie(fam Family, set map[pkey]uint32, o Options) (*trie, error) {
	routes := make([]route, 0, len(set))
	keys := make([]pkey, 0, len(set))
	for k, nh := range set {
		routes = append(routes, route{k, nh})
		keys = append(keys, k)
	}
	sortByAddr(keys)
	width := fam.Width()
	d := nodeCounts(width, keys)
	strides := o.Strides
	if len(strides) == 0 {
		var err error
		if strides, err = chooseStrides(width, o.Levels, o.MaxStride, costOf(d, o)); err != nil {
			return nil, err
		}
	}
	capacity := make([]int, len(strides))
	off := 0
	for i, s := range strides {
		capacity[i] = o.capacity(d[off])
		off += s
	}
	tr, err := newTrie(fam, strides, capacity)
	if err != nil {
		return nil, err
	}
	for _, r := range byLength(routes, width) {
		i, n := tr.descend(r.k, 1)
		tr.cover(i, n, r.k, r.nh)
	}
	return tr, nil
}

// costOf prices the levels for Algorithm 3 by the capacity they would be
// allocated with.
func costOf(d []int, o Options) strideCost {
	c := strideCost{capacity: make([]uint64, len(d))}
	c.capacity[0] = 1
	for b := 1; b < len(d); b++ {
		c.capacity[b] = uint64(o.capacity(d[b]))
	}
	return c
}

// byLength returns routes ordered by prefix length, shortest first (a
// counting sort).
func byLength(routes []route, width int) []route {
	start := make([]int, width+2)
	for _, r := range routes {
		start[int(r.k.l)+1]++
	}
	for l := 1; l < len(start); l++ {
		start[l] += start[l-1]
	}
	out := make([]route, len(routes))
	for _, r := range routes {
		out[start[r.k.l]] = r
		start[r.k.l]++
	}
	return out
}
