package pubsub

// Removal: tombstones and the purges of a name's structures (see the
// package documentation, "A subscription change leaves the index arrays
// the matcher reads in place").

// Barrier returns once every match in progress when it was called has
// ended: it takes the table's write lock and releases it, changing
// nothing (a change's lock hand-over without the change: bench pubsub
// --churn-op lock).
func (t *Table) Barrier() {
	t.mu.Lock()
	t.mu.Unlock()
}

// removeLocked removes subs (t.mu held exclusively). A removed filter's
// slot is cleared at once (info 0: its count can never reach its target,
// and the device layout sees a free slot), but its index entries stay as
// tombstones: each touched name keeps a list of them, and a name's
// entries are purged (purge: one pass over its structures) once its
// tombstones reach a 64th of its entries, or all of them. The slot goes
// back to the free list when every name has purged its entries. So a
// removal writes the slot and a few list entries, not the index arrays the
// matcher reads; the purges' passes are shared by many removals.
func (t *Table) removeLocked(subs []*subscription) {
	var touched []*nameIdx
	for _, sub := range subs {
		for fi, f := range sub.filters {
			sl := sub.slots[fi]
			best := t.meta[sl].best
			n := int32(0)
			for k := range f {
				if rank(&f[k]) != best {
					continue
				}
				ni := t.names[f[k].Name]
				ni.tomb = append(ni.tomb, tombEnt{c: &f[k], s: sl})
				n++
				if !ni.touched {
					ni.touched = true
					touched = append(touched, ni)
				}
			}
			if t.pend == nil {
				t.pend = map[uint32]int32{}
			}
			t.pend[sl] = n
			t.constraints -= len(f)
			t.filters--
			pi := t.info[sl] >> 8
			t.live[pi]--
			if t.live[pi] == 0 {
				t.active--
			}
			t.info[sl] = 0
			t.meta[sl] = slotMeta{}
			t.owners.set(sl, nil)
			t.logSlot(sl)
		}
		t.subs.remove(sub.id)
		t.dropFromPort(sub)
	}
	for _, ni := range touched {
		ni.touched = false
		if len(ni.tomb) >= ni.n || len(ni.tomb) >= max(purgeMin, ni.n/purgeShare) {
			t.purge(ni)
		}
	}
}

// Purge thresholds: a name's tombstones are purged once they are
// purgeMin and a purgeShare-th of its entries (or all of them).
const (
	purgeMin   = 16
	purgeShare = 64
)

// tombEnt is a removed filter's index entry not yet purged: the constraint
// (on the name whose list it is on) and the slot.
type tombEnt struct {
	c *Constraint
	s uint32
}

// purge takes ni's tombstones out of its structures (one pass each) and
// frees the slots none of whose entries are left anywhere.
func (t *Table) purge(ni *nameIdx) {
	for _, te := range ni.tomb {
		t.dead[te.s] = true
	}
	for _, te := range ni.tomb {
		ni.remove(te.c, te.s)
	}
	ni.fix(t.dead, false)
	for _, te := range ni.tomb {
		t.dead[te.s] = false
		if t.pend[te.s]--; t.pend[te.s] == 0 {
			delete(t.pend, te.s)
			t.free = append(t.free, te.s)
		}
	}
	clear(ni.tomb)
	ni.tomb = ni.tomb[:0]
	if ni.n == 0 {
		delete(t.names, ni.name)
	}
}
