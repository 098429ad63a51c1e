package pubsub

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
)

// ID identifies a subscription; ids are never reused by one Table.
type ID uint64

// subscription is one subscription line: a port and filters (alternatives of
// the port's predicate), each filter in one slot of the index.
type subscription struct {
	id      ID
	port    uint32
	filters []Filter
	slots   []uint32
	pos     int32 // index in the table's byPort list of the port
	matches atomic.Uint64
}

// subIndex finds subscriptions by id: entries by ascending id (ids are
// handed out in ascending order, so adding appends), a removed one left as
// a hole until holes are half of the entries. Deploying many subscriptions
// appends to one array instead of filling a hash map.
type subIndex struct {
	e    []subEnt
	live int
}

type subEnt struct {
	id ID
	s  *subscription // nil: removed
}

func (x *subIndex) find(id ID) int {
	i, ok := slices.BinarySearchFunc(x.e, id, func(e subEnt, id ID) int { return cmp.Compare(e.id, id) })
	if !ok {
		return -1
	}
	return i
}

func (x *subIndex) get(id ID) *subscription {
	if i := x.find(id); i >= 0 {
		return x.e[i].s
	}
	return nil
}

func (x *subIndex) remove(id ID) {
	i := x.find(id)
	if i < 0 || x.e[i].s == nil {
		return
	}
	x.e[i].s = nil
	x.live--
	if len(x.e) > 64 && x.live < len(x.e)/2 {
		x.e = slices.DeleteFunc(x.e, func(e subEnt) bool { return e.s == nil })
	}
}

// Subscription describes a subscription for the API.
type Subscription struct {
	ID      ID
	Port    uint32
	Filters []Filter
	// Matches counts the events whose delivery to the port this
	// subscription decided: the first of the port's filters that the
	// matcher found satisfied belongs to it (per-port pruning evaluates no
	// further filter of a port once one matched).
	Matches uint64
}

// MaxPorts is the most distinct ports a Table may have subscriptions for.
const MaxPorts = 1 << 24

// Table holds the subscriptions and their constraint index, and matches
// events against them.
//
// Concurrency: mu (spinRW: RWMutex semantics, waiters spin before they
// sleep) is the only lock. Writers (Add, Remove, RemovePort,
// SetPort) hold it exclusively while they change the index, so a change is
// visible to every match that starts after the writer returns; Match,
// MatchBatch, Explain, List and Layout hold it shared for the whole event,
// batch or walk; CountSlots takes no lock (it reads owners, which writers
// update atomically under mu: owners.go). Per-match counters live in a
// scratch area owned by the matching goroutine (from a sync.Pool);
// subscription match counters are atomic. Nothing is called back under mu.
type Table struct {
	mu     spinRW
	nextID ID
	subs   subIndex
	byPort map[uint32][]*subscription // in no order

	names map[string]*nameIdx
	// Per filter slot: info is portIndex<<8 | the number of its indexed
	// constraints (0: a free slot), read on every count; meta is read when
	// the count is reached.
	info []uint32
	meta []slotMeta
	free []uint32
	dead []bool // slots being removed (false between writes)
	// pend counts, per removed slot not yet free, its index entries
	// (tombstones) not yet purged (removeLocked).
	pend map[uint32]int32

	ports   []uint32          // port index -> port
	portIdx map[uint32]uint32 // port -> port index
	live    []int32           // filters per port index
	active  int               // port indices with live > 0

	constraints int
	filters     int
	pool        sync.Pool

	// slotLog lists the slots written since logBase (a slot once per
	// write, so possibly several times): what a Device's Update reads to
	// write only the changed slots. It is trimmed to nothing past
	// slotLogMax entries (a Device behind it compares every slot).
	slotLog []uint32
	logBase uint64

	// owners is meta's owners again, for CountSlots without mu.
	owners slotOwners
}

// slotLogMax is the most entries the slot log keeps.
const slotLogMax = 1 << 15

// logSlot records a write of slot s (t.mu held exclusively).
func (t *Table) logSlot(s uint32) {
	if len(t.slotLog) >= slotLogMax {
		t.logBase += uint64(len(t.slotLog))
		t.slotLog = t.slotLog[:0]
	}
	t.slotLog = append(t.slotLog, s)
}

// CountSlots credits the subscription owning each filter slot with one
// match: a device's matches (the filter that decided an event's delivery to
// its port). A free slot is skipped; a slot freed and taken again since the
// device matched credits its new owner. It does not take the table's lock
// (slotOwners): a device's batch never waits for a change.
func (t *Table) CountSlots(slots []uint32) {
	for _, s := range slots {
		if o := t.owners.get(s); o != nil {
			o.matches.Add(1)
		}
	}
}

// slotMeta is what the matcher needs of a filter slot once its count is
// reached: the subscription, the filter, the rank of its indexed
// constraints, whether it has residual ones (of other ranks, checked then)
// and the nameBit mask of their names.
type slotMeta struct {
	owner *subscription
	filt  Filter
	rmask uint64
	best  uint8
	resid bool
}

// New returns an empty table.
func New() *Table {
	return &Table{
		mu:      newLock(),
		byPort:  map[uint32][]*subscription{},
		names:   map[string]*nameIdx{},
		portIdx: map[uint32]uint32{},
	}
}

// Add adds one subscription of port: a predicate (the filters are
// alternatives; the table keeps them, as AddSpecs). It returns the
// subscription's id.
func (t *Table) Add(port uint32, filters []Filter) (ID, error) {
	ids, err := t.AddSpecs([]Spec{{Port: port, Filters: filters}})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// AddSpecs adds one subscription per spec, all or none (every spec is
// validated first), and returns their ids in order. Adding many at once
// (deploying a configuration) sorts each touched array once. The table
// keeps the specs' filters: the caller must not modify them afterwards
// (Get, List and Specs hand out copies).
func (t *Table) AddSpecs(specs []Spec) ([]ID, error) {
	ids, _, err := t.addSpecs(specs, false, nil)
	return ids, err
}

// AddSpecsDevice is AddSpecs that also builds the table's device image
// (NewDevice's, word for word) while the indexes are built: once the new
// filters have their slots, the image is built from the slots on other
// goroutines while the caller's goroutine fills the indexes (a deploy's
// two long parts overlap). The table's write lock is held throughout.
//
// built, if not nil, is called with the device on the build's goroutine
// as soon as its image is ready, while the indexes may still be filled
// (to load it on a device meanwhile); AddSpecsDevice returns after it
// returns. It must not call the table (its lock is held).
func (t *Table) AddSpecsDevice(specs []Spec, built func(*Device)) ([]ID, *Device, error) {
	return t.addSpecs(specs, true, built)
}

func (t *Table) addSpecs(specs []Spec, device bool, built func(*Device)) ([]ID, *Device, error) {
	if err := validateSpecs(specs); err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ports)+countNewPorts(t.portIdx, specs) > MaxPorts {
		return nil, nil, fmt.Errorf("pubsub: more than %d ports", MaxPorts)
	}
	var d *Device
	if device {
		d = &Device{}
	}
	return t.addLocked(specs, d, built), d, nil
}

func validateSpecs(specs []Spec) error {
	w := workers(len(specs), 4*parMin)
	if w == 1 {
		return validateRange(specs, 0)
	}
	// Each range's first error; the earliest range's is the sequential
	// check's.
	per := (len(specs) + w - 1) / w
	errs := make([]error, w)
	parallelRanges(w, w, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			a, b := min(r*per, len(specs)), min((r+1)*per, len(specs))
			errs[r] = validateRange(specs[a:b], a)
		}
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// validateRange validates specs, the first being subscription base.
func validateRange(specs []Spec, base int) error {
	for j, s := range specs {
		i := base + j
		if len(s.Filters) == 0 {
			return fmt.Errorf("pubsub: subscription %d: empty predicate", i)
		}
		for _, f := range s.Filters {
			if err := f.Validate(); err != nil {
				return fmt.Errorf("pubsub: subscription %d: %w", i, err)
			}
		}
	}
	return nil
}

// addLocked adds specs (t.mu held). It fills the new filters' slots first
// (slot, port index, rank: what the device image is built from; in
// parallel for a bulk), then the indexes. With d non-nil, d is built
// (Device.build) from the slots on its own goroutine while the indexes are
// filled: the build reads the slots, the ports and the slot log, which the
// index pass does not write; onBuilt, if not nil, is called with d on that
// goroutine once d is built.
func (t *Table) addLocked(specs []Spec, d *Device, onBuilt func(*Device)) []ID {
	ids := make([]ID, len(specs))
	// The table keeps the specs' filters (AddSpecs' contract: the caller
	// does not modify them); one allocation each for the subscriptions,
	// the flat list of their filters and their slots.
	foff := make([]int, len(specs)+1) // spec i's filters: [foff[i], foff[i+1])
	for i, s := range specs {
		foff[i+1] = foff[i] + len(s.Filters)
	}
	nf := foff[len(specs)]
	store := make([]subscription, len(specs))
	fstore := make([]Filter, nf)
	fsub := make([]int32, nf)   // flat filter index -> spec index
	sflat := make([]uint32, nf) // flat filter index -> slot
	spi := make([]uint32, len(specs))
	base, id0 := len(t.subs.e), t.nextID
	t.subs.e = slices.Grow(t.subs.e, len(specs))[:base+len(specs)]
	t.subs.live += len(specs)
	t.nextID += ID(len(specs))
	// The subscriptions, independent per spec (ids ascending in order).
	fill := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s := specs[i]
			sub := &store[i]
			sub.id, sub.port = id0+ID(i+1), s.Port
			sub.filters = s.Filters[:len(s.Filters):len(s.Filters)]
			a, b := foff[i], foff[i+1]
			copy(fstore[a:b], s.Filters)
			for j := a; j < b; j++ {
				fsub[j] = int32(i)
			}
			sub.slots = sflat[a:b:b]
			t.subs.e[base+i] = subEnt{sub.id, sub}
			ids[i] = sub.id
		}
	}
	parallelRanges(len(specs), workers(len(specs), 4*parMin), fill)
	// The ports' lists, a run of specs of one port at a time.
	for i := 0; i < len(specs); {
		port := specs[i].Port
		j := i + 1
		for j < len(specs) && specs[j].Port == port {
			j++
		}
		pi := t.portIndex(port)
		l := slices.Grow(t.byPort[port], j-i)
		for k := i; k < j; k++ {
			store[k].pos = int32(len(l))
			l = append(l, &store[k])
			spi[k] = pi
		}
		t.byPort[port] = l
		i = j
	}
	order, nInts, nStrs := t.slotOrder(fstore)
	t.allocSlots(order, sflat)
	t.owners.grow(len(t.info))
	// The slots: independent per filter, the port counts per range.
	w := workers(len(fstore), 4*parMin)
	live := make([][]int32, w)
	cons := make([]int, w)
	slots := func(c, lo, hi int) {
		lv := make([]int32, len(t.ports))
		n := 0
		for fi := lo; fi < hi; fi++ {
			f := fstore[fi]
			sl, pi := sflat[fi], spi[fsub[fi]]
			best, k := filterRank(f)
			t.info[sl] = pi<<8 | uint32(k)
			t.meta[sl] = slotMeta{owner: &store[fsub[fi]], filt: f, best: best, resid: k < len(f), rmask: residualMask(f, best)}
			t.owners.set(sl, &store[fsub[fi]])
			lv[pi]++
			n += len(f)
		}
		live[c], cons[c] = lv, n
	}
	if w == 1 {
		slots(0, 0, len(fstore))
	} else {
		eachChunk(chunks(len(fstore), w), slots)
	}
	for c := range live {
		for pi, n := range live[c] {
			if n > 0 && t.live[pi] == 0 {
				t.active++
			}
			t.live[pi] += n
		}
		t.constraints += cons[c]
	}
	for _, sl := range sflat {
		t.logSlot(sl)
	}
	t.filters += len(fstore)
	var built chan struct{}
	if d != nil {
		built = make(chan struct{})
		go func() {
			defer close(built)
			d.build(t)
			if onBuilt != nil {
				onBuilt(d)
			}
		}()
	}
	// A large add fills the names' indexes in parallel (addidx.go).
	if w := workers(len(fstore), parMin); w > 1 && len(fstore) >= bulkMin {
		t.indexByName(fstore, sflat, w, true)
		if built != nil {
			<-built
		}
		return ids
	}
	// The indexes, filters in input order (their constraints are read in
	// memory order).
	var touched []*nameIdx
	var last *nameIdx // the previous counted constraint's name
	var bk *bulk
	if len(fstore) >= bulkMin {
		bk = newBulk(nInts, nStrs)
	}
	for fi, f := range fstore {
		sl := sflat[fi]
		best := t.meta[sl].best
		for k := range f {
			if rank(&f[k]) != best {
				continue
			}
			ni := last
			if ni == nil || ni.name != f[k].Name {
				ni = t.names[f[k].Name]
				if ni == nil {
					ni = newNameIdx(f[k].Name)
					t.names[f[k].Name] = ni
				}
				last = ni
			}
			if bk != nil {
				ni.insertBulk(&f[k], sl, bk)
			} else {
				ni.insert(&f[k], sl)
			}
			if !ni.touched {
				ni.touched = true
				touched = append(touched, ni)
			}
		}
	}
	if bk != nil {
		bk.flush()
	}
	for _, ni := range touched {
		ni.touched = false
	}
	// A few filters (a subscription change) leave short unsorted tails:
	// their entries are appended, the sorted parts not moved (index.go).
	lazy := bk == nil
	parallelEach(len(touched), workers(len(fstore), parMin), func(i int) { touched[i].fix(t.dead, lazy) })
	if built != nil {
		<-built
	}
	return ids
}

// dropFromPort takes sub off its port's list (the last entry takes its
// place).
func (t *Table) dropFromPort(sub *subscription) {
	l := t.byPort[sub.port]
	last := l[len(l)-1]
	l[sub.pos] = last
	last.pos = sub.pos
	l[len(l)-1] = nil
	if l = l[:len(l)-1]; len(l) == 0 {
		delete(t.byPort, sub.port)
	} else {
		t.byPort[sub.port] = l
	}
}

// slotOrder returns the order in which the filters (of one addLocked call)
// get their slots: that of each filter's first indexed constraint (name,
// type, operator, value), so that the entries of one index array point at
// neighbouring slots and counting walks memory nearly in order. Free slots
// are handed out first, in this order too.
//
// It also counts the filters' indexed constraints that go to the hashed
// structures (integer and string keys), to size a bulk.
func (t *Table) slotOrder(fs []Filter) (order []uint32, nInts, nStrs int) {
	// The order is a locality heuristic, so the sort key is approximate and
	// cheap: name (numbered in order of appearance), type, operator, and 64
	// order-preserving bits of the value; ties keep the input order.
	var refs []slotRef
	if w := workers(len(fs), 4*parMin); w > 1 {
		refs, nInts, nStrs = slotRefsPar(fs, w)
	} else {
		refs, nInts, nStrs = slotRefs(fs)
	}
	if len(refs) > 64 {
		refs = radixSortRefs(refs)
	}
	if grow := len(refs) - len(t.free); grow > 0 {
		t.info = slices.Grow(t.info, grow)
		t.meta = slices.Grow(t.meta, grow)
		t.dead = slices.Grow(t.dead, grow)
	}
	order = make([]uint32, len(refs))
	for i, r := range refs {
		order[i] = r.idx
	}
	return order, nInts, nStrs
}

// slotRefs returns slotOrder's sort keys of fs (names numbered in order of
// appearance) and the counts of hashed entries.
func slotRefs(fs []Filter) (refs []slotRef, nInts, nStrs int) {
	refs = make([]slotRef, len(fs))
	ord := map[string]uint64{}
	lastName, lastOrd := "", uint64(0)
	for fi, f := range fs {
		best, _ := filterRank(f)
		first := true
		for k := range f {
			c := &f[k]
			if rank(c) != best {
				continue
			}
			switch bulkKind(c) {
			case -1:
			case bkEqInt:
				nInts++
			default:
				nStrs++
			}
			if !first {
				continue
			}
			first = false
			o := lastOrd
			if c.Name != lastName || fi == 0 {
				var ok bool
				if o, ok = ord[c.Name]; !ok {
					o = uint64(len(ord))
					ord[c.Name] = o
				}
				lastName, lastOrd = c.Name, o
			}
			refs[fi] = slotRef{o<<16 | uint64(c.Value.Type)<<8 | uint64(c.Op), valueKey(c.Value), uint32(fi)}
		}
	}
	return refs, nInts, nStrs
}

// slotRefsPar is slotRefs over w goroutines: each numbers the names of its
// chunk as it first sees them; the chunks' lists merged in chunk order give
// the numbering of one pass, and each chunk renumbers its keys.
func slotRefsPar(fs []Filter, w int) (refs []slotRef, nInts, nStrs int) {
	b := chunks(len(fs), w)
	nc := len(b) - 1
	type local struct {
		refs       []slotRef
		names      []string
		ints, strs int
		nameTo     []uint64
	}
	ls := make([]local, nc)
	eachChunk(b, func(c, lo, hi int) {
		l := &ls[c]
		l.refs, l.ints, l.strs = slotRefs(fs[lo:hi])
		// slotRefs numbered the chunk's names in order of appearance: list
		// them in that order.
		seen := map[string]bool{}
		for _, f := range fs[lo:hi] {
			best, _ := filterRank(f)
			for k := range f {
				if rank(&f[k]) == best {
					if !seen[f[k].Name] {
						seen[f[k].Name] = true
						l.names = append(l.names, f[k].Name)
					}
					break
				}
			}
		}
	})
	ord := map[string]uint64{}
	for c := range ls {
		l := &ls[c]
		l.nameTo = make([]uint64, len(l.names))
		for i, n := range l.names {
			o, ok := ord[n]
			if !ok {
				o = uint64(len(ord))
				ord[n] = o
			}
			l.nameTo[i] = o
		}
		nInts += l.ints
		nStrs += l.strs
	}
	refs = make([]slotRef, len(fs))
	eachChunk(b, func(c, lo, hi int) {
		l := &ls[c]
		for i, r := range l.refs {
			r.hi = l.nameTo[r.hi>>16]<<16 | r.hi&0xffff
			r.idx += uint32(lo)
			refs[lo+i] = r
		}
	})
	return refs, nInts, nStrs
}

type slotRef struct {
	hi, lo uint64
	idx    uint32
}

// radixSortRefs sorts refs by (hi, lo), stably (least significant byte
// first, over the bytes in which some keys differ); it may return the
// scratch array.
func radixSortRefs(refs []slotRef) []slotRef { return radixSortRefsW(refs, false) }

// radixSortRefsW is radixSortRefs, on the calling goroutine alone if seq.
func radixSortRefsW(refs []slotRef, seq bool) []slotRef {
	andLo, orLo, andHi, orHi := ^uint64(0), uint64(0), ^uint64(0), uint64(0)
	for i := range refs {
		andLo &= refs[i].lo
		orLo |= refs[i].lo
		andHi &= refs[i].hi
		orHi |= refs[i].hi
	}
	var pass []int // byte positions 0..15 (8.. for hi) that vary
	for b := 0; b < 8; b++ {
		if byte((andLo^orLo)>>(8*b)) != 0 {
			pass = append(pass, b)
		}
	}
	for b := 0; b < 8; b++ {
		if byte((andHi^orHi)>>(8*b)) != 0 {
			pass = append(pass, 8+b)
		}
	}
	if len(pass) == 0 {
		return refs
	}
	if w := workers(len(refs), 4*parMin); w > 1 && !seq {
		return radixSortRefsPar(refs, pass, w)
	}
	hist := make([][256]int, len(pass))
	for i := range refs {
		hi, lo := refs[i].hi, refs[i].lo
		for p, b := range pass {
			if b < 8 {
				hist[p][byte(lo>>(8*b))]++
			} else {
				hist[p][byte(hi>>(8*(b-8)))]++
			}
		}
	}
	tmp := make([]slotRef, len(refs))
	src, dst := refs, tmp
	for p, b := range pass {
		h := &hist[p]
		sum := 0
		for v := range h {
			sum, h[v] = sum+h[v], sum
		}
		if b < 8 {
			sh := 8 * b
			for _, r := range src {
				q := &h[byte(r.lo>>sh)]
				dst[*q] = r
				*q++
			}
		} else {
			sh := 8 * (b - 8)
			for _, r := range src {
				q := &h[byte(r.hi>>sh)]
				dst[*q] = r
				*q++
			}
		}
		src, dst = dst, src
	}
	return src
}

// valueKey maps a value to 64 bits whose unsigned order follows the
// value's order (strings by their first eight bytes).
func valueKey(v Value) uint64 {
	switch v.Type {
	case TypeFloat:
		b := math.Float64bits(v.Float)
		if b>>63 != 0 {
			return ^b
		}
		return b | 1<<63
	case TypeString:
		var k uint64
		for i := 0; i < 8; i++ {
			k <<= 8
			if i < len(v.Str) {
				k |= uint64(v.Str[i])
			}
		}
		return k
	}
	return uint64(v.Int) ^ 1<<63
}

func countNewPorts(have map[uint32]uint32, specs []Spec) int {
	seen := map[uint32]bool{}
	for i, s := range specs {
		if i > 0 && s.Port == specs[i-1].Port {
			continue
		}
		if _, ok := have[s.Port]; !ok {
			seen[s.Port] = true
		}
	}
	return len(seen)
}

func cloneFilters(fs []Filter) []Filter {
	out := make([]Filter, len(fs))
	for i, f := range fs {
		out[i] = slices.Clone(f)
	}
	return out
}

func (t *Table) portIndex(port uint32) uint32 {
	if pi, ok := t.portIdx[port]; ok {
		return pi
	}
	pi := uint32(len(t.ports))
	t.ports = append(t.ports, port)
	t.portIdx[port] = pi
	t.live = append(t.live, 0)
	return pi
}

// allocSlots gives filter order[i] the slot sl[order[i]]: the free slots
// first (as allocSlot, one by one), then new ones at the end, in order.
func (t *Table) allocSlots(order, sl []uint32) {
	i := 0
	for ; i < len(order) && len(t.free) > 0; i++ {
		sl[order[i]] = t.allocSlot()
	}
	if i == len(order) {
		return
	}
	base, n := len(t.info), len(order)-i
	t.info = slices.Grow(t.info, n)[:base+n]
	t.meta = slices.Grow(t.meta, n)[:base+n]
	t.dead = slices.Grow(t.dead, n)[:base+n]
	clear(t.info[base:])
	clear(t.meta[base:])
	clear(t.dead[base:])
	for k, fi := range order[i:] {
		sl[fi] = uint32(base + k)
	}
}

func (t *Table) allocSlot() uint32 {
	if n := len(t.free); n > 0 {
		s := t.free[n-1]
		t.free = t.free[:n-1]
		return s
	}
	t.info = append(t.info, 0)
	t.meta = append(t.meta, slotMeta{})
	t.dead = append(t.dead, false)
	return uint32(len(t.info) - 1)
}

// Remove removes one subscription.
func (t *Table) Remove(id ID) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	sub := t.subs.get(id)
	if sub == nil {
		return fmt.Errorf("pubsub: no subscription %d", id)
	}
	t.removeLocked([]*subscription{sub})
	return nil
}

// RemovePort removes every subscription of port (its whole predicate) and
// returns their ids, ascending.
func (t *Table) RemovePort(port uint32) []ID {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.removePortLocked(port)
}

func (t *Table) removePortLocked(port uint32) []ID {
	var subs []*subscription
	var ids []ID
	for _, s := range t.byPort[port] {
		subs = append(subs, s)
		ids = append(ids, s.id)
	}
	t.removeLocked(subs)
	slices.Sort(ids)
	return ids
}

// SetPort replaces port's whole predicate by one new subscription (or by
// nothing when filters is empty) in one step under the lock: no match sees
// a mixture of the old and the new predicate. It returns the new id (0 when
// filters is empty) and the removed ids.
func (t *Table) SetPort(port uint32, filters []Filter) (ID, []ID, error) {
	var specs []Spec
	if len(filters) > 0 {
		specs = []Spec{{Port: port, Filters: filters}}
		if err := validateSpecs(specs); err != nil {
			return 0, nil, err
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ports)+countNewPorts(t.portIdx, specs) > MaxPorts {
		return 0, nil, fmt.Errorf("pubsub: more than %d ports", MaxPorts)
	}
	removed := t.removePortLocked(port)
	if len(specs) == 0 {
		return 0, removed, nil
	}
	return t.addLocked(specs, nil, nil)[0], removed, nil
}

// rank orders constraints by how few events satisfy them, roughly: 0 for
// =, ^=, $=, *= and booleans, 1 for the orderings, 2 for != on numbers and
// strings (nearly every event that has the attribute satisfies it).
func rank(c *Constraint) uint8 {
	switch {
	case c.Value.Type == TypeBool:
		return 0
	case c.Op == OpNe:
		return 2
	case c.Op >= OpLt && c.Op <= OpGe:
		return 1
	}
	return 0
}

// filterRank returns the lowest rank among the filter's constraints and how
// many constraints have it: those are the ones the index counts.
func filterRank(f Filter) (best uint8, n int) {
	best = 255
	for k := range f {
		switch r := rank(&f[k]); {
		case r < best:
			best, n = r, 1
		case r == best:
			n++
		}
	}
	return best, n
}

// nameBit hashes a name to one of 64 bits (FNV-1a, top six bits): an
// event's names OR-ed together let the matcher reject most candidate filters
// whose residual constraints name an attribute the event lacks, with one AND.
func nameBit(s string) uint64 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return 1 << (h >> 26)
}

func residualMask(f Filter, best uint8) uint64 {
	var m uint64
	for k := range f {
		if rank(&f[k]) != best {
			m |= nameBit(f[k].Name)
		}
	}
	return m
}

// residualOK checks the constraints of filter f that the index does not
// count (rank other than best).
func residualOK(f Filter, best uint8, e *Event) bool {
	for k := range f {
		if rank(&f[k]) != best && !f[k].Satisfied(e) {
			return false
		}
	}
	return true
}

// Get describes one subscription.
func (t *Table) Get(id ID) (Subscription, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	s := t.subs.get(id)
	if s == nil {
		return Subscription{}, false
	}
	return s.describe(), true
}

func (s *subscription) describe() Subscription {
	return Subscription{ID: s.id, Port: s.port, Filters: cloneFilters(s.filters), Matches: s.matches.Load()}
}

// List describes every subscription, by ascending id.
func (t *Table) List() []Subscription {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]Subscription, 0, t.subs.live)
	for _, e := range t.subs.e {
		if e.s != nil {
			out = append(out, e.s.describe())
		}
	}
	return out
}

func int64Cmp(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Specs returns the subscriptions as specs (by ascending id): the input of
// the brute-force evaluator.
func (t *Table) Specs() []Spec {
	subs := t.List()
	out := make([]Spec, len(subs))
	for i, s := range subs {
		out[i] = Spec{Port: s.Port, Filters: s.Filters}
	}
	return out
}

// Stats are a table's sizes.
type Stats struct {
	Subscriptions int
	Filters       int
	Constraints   int
	Names         int
	Ports         int // ports with at least one subscription
}

// Stats returns the table's sizes.
func (t *Table) Stats() Stats {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return Stats{Subscriptions: t.subs.live, Filters: t.filters, Constraints: t.constraints, Names: len(t.names), Ports: len(t.byPort)}
}

// Explanation says which constraints of one filter an event satisfied.
type Explanation struct {
	ID        ID
	Port      uint32
	Filter    int    // index of the filter in its subscription
	Satisfied []bool // per constraint
	Matched   bool   // all of them
}

// Explain evaluates the event against the filters of subscription id (or
// of every subscription when id is 0, reporting only the filters with at
// least one satisfied constraint), by ascending id and filter index.
func (t *Table) Explain(e *Event, id ID) ([]Explanation, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var subs []*subscription
	if id != 0 {
		s := t.subs.get(id)
		if s == nil {
			return nil, fmt.Errorf("pubsub: no subscription %d", id)
		}
		subs = []*subscription{s}
	} else {
		for _, e := range t.subs.e {
			if e.s != nil {
				subs = append(subs, e.s)
			}
		}
	}
	var out []Explanation
	for _, s := range subs {
		for fi, f := range s.filters {
			x := Explanation{ID: s.id, Port: s.port, Filter: fi, Satisfied: make([]bool, len(f)), Matched: true}
			any := false
			for k, c := range f {
				x.Satisfied[k] = c.Satisfied(e)
				any = any || x.Satisfied[k]
				x.Matched = x.Matched && x.Satisfied[k]
			}
			if any || id != 0 {
				out = append(out, x)
			}
		}
	}
	return out, nil
}
