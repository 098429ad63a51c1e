package route

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
)

// Lookup returns the entry of the longest prefix that matches dst: the CPU
// path. An IPv4-mapped IPv6 address is looked up as IPv6.
func (t *Table) Lookup(dst netip.Addr) (*Entry, bool) {
	if !dst.IsValid() {
		return nil, false
	}
	// The slot is read under the lock too: once it is released, a writer
	// may free the slot and (after ReuseAfter changes) give it to another
	// route.
	t.mu.RLock()
	defer t.mu.RUnlock()
	slot, ok := t.lpm[famIndex(dst)].Lookup(dst)
	if !ok {
		return nil, false
	}
	e := t.Entry(slot)
	return e, e != nil
}

// Entry returns the entry that an LPM leaf value names (what a lookup on a
// mirror of LPM(fam)'s image returns, such as the gpu.Engine's LookupLPM4/6),
// or nil for 0 ("no route") and values that name nothing. It takes no lock.
// A leaf from a lookup that raced a delete names the deleted route's entry
// until the slot is reused, which takes Options.ReuseAfter publications.
func (t *Table) Entry(leaf uint32) *Entry {
	s := *t.slots.Load()
	if leaf == 0 || int(leaf) >= len(s) {
		return nil
	}
	return s[leaf].Load()
}

// Entries fills out[i] with Entry(leaves[i]) for a batch of lookup results
// (out must be at least as long as leaves).
func (t *Table) Entries(leaves []uint32, out []*Entry) {
	s := *t.slots.Load()
	out = out[:len(leaves)]
	for i, l := range leaves {
		out[i] = nil
		if l != 0 && int(l) < len(s) {
			out[i] = s[l].Load()
		}
	}
}

// LPM returns the family's trie, whose leaf values are slots: its image is
// what a gpu.Engine loads, its bubbles what the engine applies. It belongs to
// the writer: read it only from the OnChange hook or while no change can run
// (Attach hands out consistent copies at any time).
func (t *Table) LPM(fam lpm.Family) *lpm.Table {
	if fam == lpm.IPv4 {
		return t.lpm[0]
	}
	return t.lpm[1]
}

// LPMStats returns the family's trie statistics (see lpm.Table.Stats),
// read under the writer's lock: safe while changes run.
func (t *Table) LPMStats(fam lpm.Family) lpm.Stats {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.LPM(fam).Stats()
}

// Attach makes f the OnChange hook (nil: none) and returns copies of both
// families' current images, taken under the writer's lock: a consumer loads
// them and then applies every update f receives, and so never misses a
// change nor sees one twice. One consumer at a time; the previous hook is
// dropped.
func (t *Table) Attach(f func(fam lpm.Family, u bubble.Update)) (v4, v6 *bubble.Image) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ims [2]*bubble.Image
	for i, lt := range t.lpm {
		lt.Mirror().Sync() // the copy below holds what is pending
		ims[i] = lt.Mirror().Image().Clone()
	}
	t.onChange = f
	return ims[0], ims[1]
}

// Sync gathers the family's changes since the previous Sync (for a consumer
// that polls instead of setting OnChange): the bubbles, or the whole image at
// the first call and after a rebuild.
func (t *Table) Sync(fam lpm.Family) bubble.Update {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.LPM(fam).Mirror().Sync()
}

// Routes returns the installed routes, IPv4 first, each family ordered by
// address and then prefix length.
func (t *Table) Routes() []Route {
	es := t.List()
	out := make([]Route, len(es))
	for i, e := range es {
		out[i] = e.Route.Clone()
	}
	return out
}

// List returns the installed entries (with their counters) in Routes'
// order. Their Route fields must not be modified.
func (t *Table) List() []*Entry {
	t.mu.RLock()
	out := make([]*Entry, 0, len(t.routes))
	for _, e := range t.routes {
		out = append(out, e)
	}
	t.mu.RUnlock()
	slices.SortFunc(out, func(a, b *Entry) int { return comparePrefix(a.Prefix, b.Prefix) })
	return out
}

func comparePrefix(a, b netip.Prefix) int {
	if a.Addr().Is4() != b.Addr().Is4() {
		if a.Addr().Is4() {
			return -1
		}
		return 1
	}
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}

// Get returns the entry installed for exactly p.
func (t *Table) Get(p netip.Prefix) (*Entry, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	e, ok := t.routes[p]
	return e, ok
}

// Len returns the number of routes.
func (t *Table) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.routes)
}

// Stats returns the table's change counts and occupancy.
func (t *Table) Stats() Stats {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.stats
	s.Routes = len(t.routes)
	s.SlotsUsed = int(t.nextSlot) - 1
	s.SlotsHeld = len(t.held)
	return s
}
