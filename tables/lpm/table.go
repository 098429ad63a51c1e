package lpm

import (
	"fmt"
	"net/netip"

	"github.com/gswitch/gswitch/tables/bubble"
)

// Route is a prefix with its next-hop index.
type Route struct {
	Prefix  netip.Prefix
	NextHop uint32
}

// Table is the authoritative CPU copy of one family's routes: the prefix set,
// the GAMT image (through its bubble.Mirror) and the metadata that keeps the
// image up to date incrementally. Lookups read the image through a View, the
// same function a mirror's View or the GPU kernel computes. A Table is not
// safe for concurrent use; its owner serialises updates and lookups (or looks
// up through mirrors).
type Table struct {
	fam      Family
	opts     Options
	set      map[pkey]uint32
	tr       *trie
	m        *bubble.Mirror
	view     *View
	rebuilds int
}

// Stats describes a table's layout and occupancy.
type Stats struct {
	Prefixes         int
	Levels           int
	Strides          []int
	NodesPerLevel    []int // nodes in use, garbage included
	CapacityPerLevel []int // nodes allocated
	GarbagePerLevel  []int // nodes whose subtree holds no prefix (lazy delete)
	ImageBytes       int   // device image size, meta region included
	Rebuilds         int   // off-line rebuilds since the table was made
	BytesPerPrefix   float64
}

// New returns an empty table of family fam.
func New(fam Family, opts Options) (*Table, error) {
	return Build(fam, nil, opts)
}

// Build returns a table holding routes, built off-line in one pass (no
// bubbles are recorded: the mirror's first Sync carries the whole image). If a
// prefix occurs more than once, the last occurrence's next hop wins. Any
// invalid route (invalid prefix, host bits set, other family, next hop out of
// range) fails the whole build.
func Build(fam Family, routes []Route, opts Options) (*Table, error) {
	o, err := opts.normalize(fam)
	if err != nil {
		return nil, err
	}
	set := make(map[pkey]uint32, len(routes))
	for i, r := range routes {
		k, err := keyOf(fam, r.Prefix)
		if err != nil {
			return nil, fmt.Errorf("lpm: route %d: %w", i, err)
		}
		if err := checkNextHop(r.NextHop); err != nil {
			return nil, fmt.Errorf("lpm: route %d (%v): %w", i, r.Prefix, err)
		}
		set[k] = r.NextHop
	}
	tr, err := buildTrie(fam, set, o)
	if err != nil {
		return nil, err
	}
	t := &Table{fam: fam, opts: o, set: set}
	t.install(tr)
	return t, nil
}

// install makes tr the live trie: the first one starts the mirror, later ones
// replace its image (a new generation).
func (t *Table) install(tr *trie) {
	if t.m == nil {
		t.m = bubble.NewMirror(tr.img)
	} else {
		t.m.Replace(tr.img)
		t.rebuilds++
	}
	tr.m = t.m
	t.tr = tr
	t.view = newView(tr.img, t.fam, tr.strides)
}

// rebuild replaces the image by one built off-line from the prefix set, with
// strides chosen anew. On error the table is unchanged.
func (t *Table) rebuild() error {
	tr, err := buildTrie(t.fam, t.set, t.opts)
	if err != nil {
		return err
	}
	t.install(tr)
	return nil
}

// Insert adds the route p -> nh, or changes p's next hop. It writes the image
// only through the mirror, so every changed word becomes a bubble; if a level
// has no room for a node it needs, the table is rebuilt instead (a new
// generation). On error nothing changes.
func (t *Table) Insert(p netip.Prefix, nh uint32) error {
	k, err := keyOf(t.fam, p)
	if err != nil {
		return fmt.Errorf("lpm: insert: %w", err)
	}
	if err := checkNextHop(nh); err != nil {
		return fmt.Errorf("lpm: insert %v: %w", p, err)
	}
	old, present := t.set[k]
	switch {
	case present && old == nh:
		return nil
	case !present && !t.tr.roomFor(k):
		t.set[k] = nh
		if err := t.rebuild(); err != nil {
			delete(t.set, k)
			return fmt.Errorf("lpm: insert %v: %w", p, err)
		}
		return nil
	}
	t.set[k] = nh
	delta := int32(1)
	if present {
		delta = 0
	}
	i, n := t.tr.descend(k, delta)
	t.tr.cover(i, n, k, nh)
	return nil
}

// Delete removes the route for p. The delete is lazy: the entries that held p
// take the next-longest covering prefix, and nodes stay linked even when no
// prefix below them remains (they become garbage, reused by a later insert
// that passes through them). When a level's garbage passes the threshold, the
// table is rebuilt.
func (t *Table) Delete(p netip.Prefix) error {
	k, err := keyOf(t.fam, p)
	if err != nil {
		return fmt.Errorf("lpm: delete: %w", err)
	}
	if _, ok := t.set[k]; !ok {
		return fmt.Errorf("lpm: delete %v: %w", p, ErrNotFound)
	}
	delete(t.set, k)
	i, n := t.tr.descend(k, -1)
	rnh, rlen := t.replacement(k, i, n)
	t.tr.uncover(i, n, k, rnh, rlen)
	if t.garbageDue() {
		// A failed compaction leaves the lazy image, which is still correct.
		_ = t.rebuild()
	}
	return nil
}

// replacement returns the route that takes over k's entries in node n of
// level i: the longest prefix of k present at the same level, else the node's
// default (at the root: the default route, else no route).
func (t *Table) replacement(k pkey, i int, n uint32) (uint32, uint8) {
	lowest := t.tr.lv[i].off + 1
	if i == 0 {
		lowest = 0
	}
	for l := int(k.l) - 1; l >= lowest; l-- {
		if nh, ok := t.set[k.truncate(l)]; ok {
			return nh, uint8(l)
		}
	}
	lv := &t.tr.lv[i]
	return lv.defNH[n], lv.defLen[n]
}

func (t *Table) garbageDue() bool {
	for _, l := range t.tr.lv {
		if t.opts.compact(l.nodes, l.garbage) {
			return true
		}
	}
	return false
}

// Get returns the next hop stored for exactly p.
func (t *Table) Get(p netip.Prefix) (uint32, bool) {
	k, err := keyOf(t.fam, p)
	if err != nil {
		return 0, false
	}
	nh, ok := t.set[k]
	return nh, ok
}

// Lookup returns the next hop of the longest prefix that matches a, and
// whether one does. An address of the other family (an IPv4-mapped IPv6
// address is IPv6) matches nothing.
func (t *Table) Lookup(a netip.Addr) (uint32, bool) {
	nh := t.view.LookupAddr(a)
	return nh, nh != 0
}

// Lookup4 is View().Lookup4: a is the address's big-endian bits.
func (t *Table) Lookup4(a uint32) uint32 { return t.view.Lookup4(a) }

// Lookup6 is View().Lookup6.
func (t *Table) Lookup6(hi, lo uint64) uint32 { return t.view.Lookup6(hi, lo) }

// LookupBatch4 is View().LookupBatch4.
func (t *Table) LookupBatch4(addrs []uint32, out []uint32) { t.view.LookupBatch4(addrs, out) }

// LookupBatch6 is View().LookupBatch6.
func (t *Table) LookupBatch6(addrs []Addr6, out []uint32) { t.view.LookupBatch6(addrs, out) }

// View returns the View of the table's current image. It stays valid, and
// follows updates, until the next rebuild; a rebuild leaves it on the old
// image (still a correct answer to the routes as they were).
func (t *Table) View() *View { return t.view }

// Mirror returns the mirror that owns the image and its bubbles: a backend
// keeps its copy up to date with Mirror().Sync().
func (t *Table) Mirror() *bubble.Mirror { return t.m }

// Len returns the number of prefixes.
func (t *Table) Len() int { return len(t.set) }

// Family returns the table's address family.
func (t *Table) Family() Family { return t.fam }

// Strides returns the current strides.
func (t *Table) Strides() []int { return append([]int(nil), t.tr.strides...) }

// Stats returns the layout and occupancy figures.
func (t *Table) Stats() Stats {
	s := Stats{Prefixes: len(t.set), Rebuilds: t.rebuilds}
	t.tr.stats(&s)
	if s.Prefixes > 0 {
		s.BytesPerPrefix = float64(s.ImageBytes) / float64(s.Prefixes)
	}
	return s
}

// Routes returns every route, in no particular order.
func (t *Table) Routes() []Route {
	out := make([]Route, 0, len(t.set))
	for k, nh := range t.set {
		out = append(out, Route{Prefix: k.prefix(t.fam), NextHop: nh})
	}
	return out
}
