package route

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
)

// Options configure a Table. The zero value accepts every port, has no
// change hook and lets package lpm choose the layouts.
type Options struct {
	// PortOK says whether a port number names a port of the switch; nil
	// accepts every port in 1..MaxPort. Add and Replace reject a route with a
	// next hop on a port it refuses.
	PortOK func(port uint32) bool
	// OnChange, if set, receives after every change of a family's LPM image
	// (Add, Delete, Replace) the update that brings a mirror of it up to date:
	// the bubbles, or the whole image after a rebuild. It is called with the
	// writer's lock held, so updates arrive in order and a lookup on the
	// table never sees a change before the hook has been given it; it must
	// not call the Table's writing methods. See also Attach.
	OnChange func(fam lpm.Family, u bubble.Update)
	// LPM4 and LPM6 tune the tries (package lpm's options).
	LPM4, LPM6 lpm.Options
	// ReuseAfter is the number of later publications (changes handed out)
	// that must pass before a deleted route's slot may name another route;
	// 0 means DefaultReuseAfter.
	ReuseAfter int
}

// DefaultReuseAfter is Options.ReuseAfter's default: at 100,000 changes a
// second it keeps a slot out of use for 10 ms, far longer than a lookup
// batch is in flight.
const DefaultReuseAfter = 1024

// maxSlot is the largest slot: an LPM leaf holds 24 bits.
const maxSlot = lpm.MaxNextHop

// Table is one routing table (id: the VRF / kernel table id) for IPv4 and
// IPv6: the authoritative CPU copy. Safe for one writer and many concurrent
// readers: Add, Delete, Replace, Attach and Sync serialise on the writer's
// lock; Lookup, Routes, Entries and Len take it shared; Entry takes no lock.
type Table struct {
	id   uint32
	opts Options

	mu       sync.RWMutex
	lpm      [2]*lpm.Table // IPv4, IPv6
	routes   map[netip.Prefix]*Entry
	onChange func(fam lpm.Family, u bubble.Update)

	// slots maps an LPM leaf value to its entry. It grows by copying and
	// publishing a larger slice; only the writer stores into it.
	slots    atomic.Pointer[[]atomic.Pointer[Entry]]
	nextSlot uint32 // slots below it have been handed out
	held     []heldSlot
	epoch    uint64 // publications so far

	stats Stats
}

// heldSlot is a deleted route's slot waiting to be reused.
type heldSlot struct {
	slot  uint32
	epoch uint64 // publication at which its route was deleted
}

// Stats counts a table's changes.
type Stats struct {
	Adds         uint64 // prefixes added
	Changes      uint64 // routes replaced by a different route for the same prefix
	Deletes      uint64 // prefixes deleted
	Resyncs      uint64 // Replace calls
	Publications uint64 // changes that wrote the LPM images
	Rejected     uint64 // Add, Delete and Replace calls that failed validation
	Routes       int    // prefixes installed
	SlotsUsed    int    // slots handed out, held ones included
	SlotsHeld    int    // deleted routes' slots waiting for reuse
}

// New returns an empty table with id id.
func New(id uint32, opts Options) (*Table, error) {
	if opts.ReuseAfter < 0 {
		return nil, fmt.Errorf("route: table %d: ReuseAfter %d is negative", id, opts.ReuseAfter)
	}
	if opts.ReuseAfter == 0 {
		opts.ReuseAfter = DefaultReuseAfter
	}
	t := &Table{id: id, opts: opts, routes: make(map[netip.Prefix]*Entry), onChange: opts.OnChange, nextSlot: 1}
	var err error
	if t.lpm[0], err = lpm.New(lpm.IPv4, opts.LPM4); err != nil {
		return nil, fmt.Errorf("route: table %d: %w", id, err)
	}
	if t.lpm[1], err = lpm.New(lpm.IPv6, opts.LPM6); err != nil {
		return nil, fmt.Errorf("route: table %d: %w", id, err)
	}
	s := make([]atomic.Pointer[Entry], 1024)
	t.slots.Store(&s)
	return t, nil
}

// ID returns the table id.
func (t *Table) ID() uint32 { return t.id }

func famIndex(a netip.Addr) int {
	if a.Is4() {
		return 0
	}
	return 1
}

var families = [2]lpm.Family{lpm.IPv4, lpm.IPv6}

// Add inserts r, or replaces the route of r's prefix. It validates r
// completely first (see Validate) and changes nothing on error. Adding a
// route equal to the installed one changes nothing.
func (t *Table) Add(r Route) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := Validate(&r, t.id, t.opts.PortOK); err != nil {
		t.stats.Rejected++
		return err
	}
	r = r.Clone()
	prev := t.routes[r.Prefix]
	if prev != nil && prev.Route.Equal(r) {
		return nil
	}
	if prev == nil && t.free() < 1 {
		return fmt.Errorf("route %v (table %d): %w", r.Prefix, t.id, ErrFull)
	}
	var u undo
	if err := t.put(r, &u); err != nil {
		u.run()
		return err
	}
	t.publish([2]bool{r.Prefix.Addr().Is4(), !r.Prefix.Addr().Is4()})
	return nil
}

// Delete removes the route of prefix p: ErrNotFound if there is none, an
// ErrInvalid error if p is not a valid masked prefix.
func (t *Table) Delete(p netip.Prefix) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !p.IsValid() || p.Masked() != p {
		t.stats.Rejected++
		return fmt.Errorf("route: delete %v from table %d: %w: not a valid masked prefix", p, t.id, ErrInvalid)
	}
	if t.routes[p] == nil {
		return fmt.Errorf("route: delete %v from table %d: %w", p, t.id, ErrNotFound)
	}
	if err := t.del(p, nil); err != nil {
		return err
	}
	t.publish([2]bool{p.Addr().Is4(), !p.Addr().Is4()})
	return nil
}

// Change is one step of Update: Route installed (as Add does), or, with
// Delete, the route of Route.Prefix removed (the rest of Route is ignored).
type Change struct {
	Route  Route
	Delete bool
}

// Update applies changes in order as one change of the table: every route
// is validated first, and if any step fails (a route invalid, a delete of a
// prefix not installed at that point, the table full) nothing changes and
// the error names the step. Readers see the table before or after the whole
// batch, and OnChange is given each family's change as one update — one
// bubble write for the batch instead of one per route, which is what a
// stream of route changes (a routing daemon's burst, the kernel FIB mirror
// draining its socket) needs: at 100,000 changes/s, a publication per change
// costs the engine a write lock (and on a GPU a copy and a kernel) per change.
func (t *Table) Update(changes []Change) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := make([]Route, len(changes))
	for i := range changes {
		c := &changes[i]
		if c.Delete {
			p := c.Route.Prefix
			if !p.IsValid() || p.Masked() != p {
				t.stats.Rejected++
				return fmt.Errorf("route: update table %d, change %d: delete %v: %w: not a valid masked prefix", t.id, i, p, ErrInvalid)
			}
			continue
		}
		rs[i] = c.Route
		if err := Validate(&rs[i], t.id, t.opts.PortOK); err != nil {
			t.stats.Rejected++
			return fmt.Errorf("route: update table %d, change %d: %w", t.id, i, err)
		}
		rs[i] = rs[i].Clone()
	}
	var touched [2]bool
	var u undo
	fail := func(err error) error {
		u.run()
		return err
	}
	for i := range changes {
		p := changes[i].Route.Prefix
		prev := t.routes[p]
		if changes[i].Delete {
			if prev == nil {
				return fail(fmt.Errorf("route: update table %d, change %d: delete %v: %w", t.id, i, p, ErrNotFound))
			}
			if err := t.del(p, &u); err != nil {
				return fail(err)
			}
		} else {
			if prev != nil && prev.Route.Equal(rs[i]) {
				continue
			}
			if prev == nil && t.free() < 1 {
				return fail(fmt.Errorf("route %v (table %d): %w", p, t.id, ErrFull))
			}
			if err := t.put(rs[i], &u); err != nil {
				return fail(err)
			}
		}
		touched[famIndex(p.Addr())] = true
	}
	t.publish(touched)
	return nil
}

// Replace makes rs the table's whole content (a resync, such as after a
// netlink overflow), as the smallest set of changes: prefixes absent from rs
// are deleted, those whose route differs are replaced, new ones added, and
// routes equal to the installed ones are left alone (their counters go on).
// Every route is validated first, and two routes for one prefix are an
// error; on error nothing changes. Readers see the old set or the new one:
// the lookups of the CPU path wait for the whole change, and OnChange is
// given each family's change as one update.
func (t *Table) Replace(rs []Route) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	want := make(map[netip.Prefix]*Route, len(rs))
	for i := range rs {
		r := &rs[i]
		if err := Validate(r, t.id, t.opts.PortOK); err != nil {
			t.stats.Rejected++
			return fmt.Errorf("route: replace, route %d: %w", i, err)
		}
		if want[r.Prefix] != nil {
			t.stats.Rejected++
			return fmt.Errorf("route: replace, route %d: %w: prefix %v given twice", i, ErrInvalid, r.Prefix)
		}
		want[r.Prefix] = r
	}
	var dels []netip.Prefix
	for p := range t.routes {
		if want[p] == nil {
			dels = append(dels, p)
		}
	}
	var puts []Route
	adds := 0
	for p, r := range want {
		prev := t.routes[p]
		if prev == nil {
			adds++
		}
		if prev == nil || !prev.Route.Equal(*r) {
			puts = append(puts, r.Clone())
		}
	}
	if adds > t.free() {
		return fmt.Errorf("route: replace table %d: %w: %d new routes, %d free slots", t.id, ErrFull, adds, t.free())
	}
	t.stats.Resyncs++
	var touched [2]bool
	var u undo
	for _, p := range dels {
		if err := t.del(p, &u); err != nil {
			u.run()
			return err
		}
		touched[famIndex(p.Addr())] = true
	}
	for _, r := range puts {
		if err := t.put(r, &u); err != nil {
			u.run()
			return err
		}
		touched[famIndex(r.Prefix.Addr())] = true
	}
	t.publish(touched)
	return nil
}

// undo is the list of inverse operations of a change in progress, run in
// reverse when a later step fails (the LPM trie can fail to rebuild when a
// layout outgrows its encoding).
type undo []func()

func (u *undo) push(f func()) {
	if u != nil {
		*u = append(*u, f)
	}
}

func (u undo) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// put installs r (validated, owned) in place of its prefix's route, if any.
// Replacing keeps the slot: the LPM image does not change, only the entry the
// slot names.
func (t *Table) put(r Route, u *undo) error {
	prev := t.routes[r.Prefix]
	if prev != nil {
		e := newEntry(r, prev.slot, prev)
		t.setSlot(prev.slot, e)
		t.routes[r.Prefix] = e
		t.stats.Changes++
		u.push(func() {
			t.setSlot(prev.slot, prev)
			t.routes[r.Prefix] = prev
			t.stats.Changes--
		})
		return nil
	}
	slot, fromHeld := t.alloc()
	e := newEntry(r, slot, nil)
	t.setSlot(slot, e) // before the image names it
	lt := t.lpm[famIndex(r.Prefix.Addr())]
	if err := lt.Insert(r.Prefix, slot); err != nil {
		t.unalloc(slot, fromHeld)
		return fmt.Errorf("route %v (table %d): %w", r.Prefix, t.id, err)
	}
	t.routes[r.Prefix] = e
	t.stats.Adds++
	u.push(func() {
		_ = lt.Delete(r.Prefix)
		delete(t.routes, r.Prefix)
		t.unalloc(slot, fromHeld)
		t.stats.Adds--
	})
	return nil
}

// del removes p's route (present). Its slot keeps naming the old entry until
// it is reused, so that a lookup that raced the delete still finds the route
// it matched.
func (t *Table) del(p netip.Prefix, u *undo) error {
	e := t.routes[p]
	lt := t.lpm[famIndex(p.Addr())]
	if err := lt.Delete(p); err != nil {
		return fmt.Errorf("route: delete %v from table %d: %w", p, t.id, err)
	}
	delete(t.routes, p)
	t.held = append(t.held, heldSlot{slot: e.slot, epoch: t.epoch + 1}) // the publication this delete makes
	t.stats.Deletes++
	u.push(func() {
		_ = lt.Insert(p, e.slot)
		t.routes[p] = e
		t.held = t.held[:len(t.held)-1]
		t.stats.Deletes--
	})
	return nil
}

// free returns how many slots can be handed out now.
func (t *Table) free() int {
	n := maxSlot + 1 - int(t.nextSlot)
	for _, h := range t.held {
		if !t.reusable(h) {
			break
		}
		n++
	}
	return n
}

func (t *Table) reusable(h heldSlot) bool {
	return t.epoch-h.epoch >= uint64(t.opts.ReuseAfter)
}

// alloc hands out a slot: the oldest held one if enough publications have
// passed since its route was deleted, else a fresh one. The caller has
// checked that one is free.
func (t *Table) alloc() (slot uint32, fromHeld bool) {
	if len(t.held) > 0 && t.reusable(t.held[0]) {
		slot = t.held[0].slot
		t.held = t.held[1:]
		return slot, true
	}
	slot = t.nextSlot
	t.nextSlot++
	return slot, false
}

// unalloc gives back the slot alloc just handed out.
func (t *Table) unalloc(slot uint32, fromHeld bool) {
	if fromHeld {
		t.held = append([]heldSlot{{slot: slot}}, t.held...)
		return
	}
	t.nextSlot--
}

// setSlot makes slot name e, growing the slot array if needed.
func (t *Table) setSlot(slot uint32, e *Entry) {
	s := *t.slots.Load()
	if int(slot) >= len(s) {
		n := make([]atomic.Pointer[Entry], max(2*len(s), int(slot)+1))
		for i := range s {
			n[i].Store(s[i].Load())
		}
		t.slots.Store(&n)
		s = n
	}
	s[slot].Store(e)
}

// publish hands the changed families' updates to OnChange (without a hook,
// the consumer gathers them with Sync) and counts the publication.
func (t *Table) publish(touched [2]bool) {
	changed := false
	for i, lt := range t.lpm {
		if !touched[i] {
			continue
		}
		if t.onChange == nil {
			changed = true
			continue
		}
		u := lt.Mirror().Sync()
		if u.Full != nil || len(u.Bubbles) > 0 {
			changed = true
			t.onChange(families[i], u)
		}
	}
	if changed {
		t.epoch++
		t.stats.Publications++
	}
}
