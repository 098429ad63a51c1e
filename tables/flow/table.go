package flow

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/gswitch/gswitch/tables/bubble"
)

// errNoRoom is a classifier's answer when its image has no room for an
// insertion: the Table then rebuilds the image.
var errNoRoom = errors.New("flow: no room in the image")

// classifier is one device layout and its update procedures. It keeps one
// entry per distinct match (the head of the match's chain).
type classifier interface {
	// rebuild lays out a fresh image for ds (sorted best head first) with
	// projection proj and installs it with Mirror.Replace.
	rebuild(proj []int, ds []*dmatch) error
	// insert adds a new distinct match whose hid and hprio are set. On
	// errNoRoom nothing changed.
	insert(d *dmatch) error
	// setHead rewrites d's entry for a new head of its chain.
	setHead(d *dmatch, id RuleID, prio uint16)
	// remove deletes d's entry.
	remove(d *dmatch)
	// stats adds the classifier's figures.
	stats(*Stats)
}

// dmatch is one distinct match: the rules with that match, best first, and
// where the classifier keeps its entry.
type dmatch struct {
	m     Match
	chain []RuleID
	used  uint32 // bit set of the key words its mask uses
	group *maskGroup
	gpos  int // index in group.ds
	tpos  int // index in Table.dms

	// The head as the image holds it.
	hid   RuleID
	hprio uint16

	// Classifier state.
	cls  *class // tuple, bloom
	cpos int    // index in cls.members
	slot int    // linear
}

// maskGroup holds the distinct matches that share a mask.
type maskGroup struct {
	mask Key
	ds   []*dmatch
}

type ruleSlot struct {
	rule Rule
	d    *dmatch
	live bool
	ppos int // index in Table.byPrio[prio]
}

// Table is a flow table with OpenFlow 1.3 semantics: the authoritative CPU
// copy of the rules, and its device image kept by one of the classifiers.
//
// A Table is not safe for concurrent use, except that lookups (Lookup,
// LookupAll, LookupBatch, Rule, Rules, Len, Stats, UsedWords) may run
// concurrently with each other while no operation changes the table.
type Table struct {
	cfg      Config
	rules    []ruleSlot
	n        int
	freeIDs  minHeap[RuleID]
	byMatch  map[Match]*dmatch
	byPrio   map[uint16][]RuleID
	groups   map[Key]*maskGroup
	dms      []*dmatch
	refs     [KeyWords]int // distinct matches using each key word
	proj     []int         // the image's projection
	projSet  uint32
	mirror   *bubble.Mirror
	cls      classifier
	view     *View
	gen      uint64 // generation of view
	rebuilds uint64
}

// NewTable returns an empty table.
func NewTable(cfg Config) (*Table, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	t := &Table{
		cfg:     cfg,
		byMatch: map[Match]*dmatch{},
		byPrio:  map[uint16][]RuleID{},
		groups:  map[Key]*maskGroup{},
	}
	t.mirror = bubble.NewMirror(newImage([numRegions]int{HeaderWords}))
	switch cfg.Algo {
	case Linear:
		t.cls = newLinear(t.mirror, &t.cfg)
	default:
		t.cls = newTuple(t.mirror, &t.cfg)
	}
	if err := t.rebuild(); err != nil {
		return nil, err
	}
	return t, nil
}

// Config returns the table's configuration (defaults filled in).
func (t *Table) Config() Config { return t.cfg }

// rebuild lays the image out afresh with the projection of the current rules.
func (t *Table) rebuild() error {
	var proj []int
	var set uint32
	for w, n := range t.refs {
		if n > 0 {
			proj = append(proj, w)
			set |= 1 << w
		}
	}
	ds := slices.Clone(t.dms)
	slices.SortFunc(ds, func(a, b *dmatch) int {
		return cmp.Compare(Rank(b.hprio, b.hid), Rank(a.hprio, a.hid))
	})
	if err := t.cls.rebuild(proj, ds); err != nil {
		return err
	}
	t.proj, t.projSet = proj, set
	t.rebuilds++
	return t.refreshView()
}

// refreshView rebuilds the View after a generation change.
func (t *Table) refreshView() error {
	im := t.mirror.Image()
	if t.view != nil && t.gen == im.Generation {
		return nil
	}
	v, err := NewView(im)
	if err != nil {
		return fmt.Errorf("flow: internal error: the table's own image: %w", err)
	}
	t.view, t.gen = v, im.Generation
	return nil
}

// Compact rebuilds the image off-line: class tables sized to their contents,
// no fragmentation, the projection narrowed to the words the rules use.
func (t *Table) Compact() error { return t.rebuild() }

// Add adds a rule (OFPFC_ADD). A rule with the match and priority of an
// existing one replaces it and keeps its id (replaced is true). With
// CheckOverlap, a rule of the same priority that overlaps fails the Add with
// an *OverlapError (ErrOverlap). A bad match fails with a *MatchError
// (ErrBadMatch), a full table with ErrTableFull. A failed Add changes nothing.
func (t *Table) Add(r Rule, flags AddFlags) (id RuleID, replaced bool, err error) {
	if err := r.Match.Validate(); err != nil {
		return NoMatch, false, err
	}
	if flags&CheckOverlap != 0 {
		for _, o := range t.byPrio[r.Priority] {
			if t.rules[o].rule.Match.Overlaps(&r.Match) {
				return NoMatch, false, &OverlapError{ID: o, Priority: r.Priority}
			}
		}
	}
	d := t.byMatch[r.Match]
	if d != nil {
		for _, o := range d.chain {
			if t.rules[o].rule.Priority == r.Priority {
				t.rules[o].rule = r
				return o, true, nil
			}
		}
	}
	if t.n >= t.cfg.MaxEntries {
		return NoMatch, false, fmt.Errorf("%w: %d entries", ErrTableFull, t.n)
	}
	id = t.allocID()
	t.rules[id] = ruleSlot{rule: r, live: true}
	t.n++
	t.addPrio(id, r.Priority)
	if d == nil {
		err = t.addMatch(id, &r)
	} else {
		t.rules[id].d = d
		t.chainInsert(d, id)
	}
	if err != nil {
		t.delPrio(id)
		t.rules[id] = ruleSlot{}
		t.n--
		t.freeIDs.push(id)
		return NoMatch, false, err
	}
	return id, false, t.refreshView()
}

// addMatch adds a new distinct match whose only rule is id.
func (t *Table) addMatch(id RuleID, r *Rule) error {
	d := &dmatch{m: r.Match, chain: []RuleID{id}, used: r.Match.usedWords(), hid: id, hprio: r.Priority}
	t.rules[id].d = d
	t.linkMatch(d)
	var err error
	if d.used&^t.projSet != 0 {
		err = t.rebuild()
	} else if err = t.cls.insert(d); errors.Is(err, errNoRoom) {
		err = t.rebuild()
	}
	if err != nil {
		t.unlinkMatch(d)
		// The image may be half rebuilt: lay it out again without d.
		if rerr := t.rebuild(); rerr != nil {
			return fmt.Errorf("%w (and restoring the image: %v)", err, rerr)
		}
	}
	return err
}

// linkMatch registers d in the table's indexes.
func (t *Table) linkMatch(d *dmatch) {
	t.byMatch[d.m] = d
	g := t.groups[d.m.Mask]
	if g == nil {
		g = &maskGroup{mask: d.m.Mask}
		t.groups[d.m.Mask] = g
	}
	d.group, d.gpos = g, len(g.ds)
	g.ds = append(g.ds, d)
	d.tpos = len(t.dms)
	t.dms = append(t.dms, d)
	for u := d.used; u != 0; u &= u - 1 {
		t.refs[bits.TrailingZeros32(u)]++
	}
}

// unlinkMatch removes d from the table's indexes.
func (t *Table) unlinkMatch(d *dmatch) {
	delete(t.byMatch, d.m)
	g := d.group
	last := g.ds[len(g.ds)-1]
	g.ds[d.gpos], last.gpos = last, d.gpos
	g.ds = g.ds[:len(g.ds)-1]
	if len(g.ds) == 0 {
		delete(t.groups, g.mask)
	}
	last = t.dms[len(t.dms)-1]
	t.dms[d.tpos], last.tpos = last, d.tpos
	t.dms = t.dms[:len(t.dms)-1]
	for u := d.used; u != 0; u &= u - 1 {
		t.refs[bits.TrailingZeros32(u)]--
	}
}

// chainInsert adds id to d's chain in rank order and updates the image if
// it became the head.
func (t *Table) chainInsert(d *dmatch, id RuleID) {
	rk := Rank(t.rules[id].rule.Priority, id)
	i := 0
	for i < len(d.chain) && Rank(t.rules[d.chain[i]].rule.Priority, d.chain[i]) > rk {
		i++
	}
	d.chain = slices.Insert(d.chain, i, id)
	if i == 0 {
		t.cls.setHead(d, id, t.rules[id].rule.Priority)
	}
}

func (t *Table) addPrio(id RuleID, prio uint16) {
	t.rules[id].ppos = len(t.byPrio[prio])
	t.byPrio[prio] = append(t.byPrio[prio], id)
}

func (t *Table) delPrio(id RuleID) {
	prio := t.rules[id].rule.Priority
	l := t.byPrio[prio]
	i := t.rules[id].ppos
	last := l[len(l)-1]
	l[i] = last
	t.rules[last].ppos = i
	l = l[:len(l)-1]
	if len(l) == 0 {
		delete(t.byPrio, prio)
	} else {
		t.byPrio[prio] = l
	}
}

// allocID returns the lowest free id, growing the rule array.
func (t *Table) allocID() RuleID {
	if t.freeIDs.len() > 0 {
		return t.freeIDs.pop()
	}
	t.rules = append(t.rules, ruleSlot{})
	return RuleID(len(t.rules) - 1)
}

// selectIDs returns the ids a selector chooses, ascending.
func (t *Table) selectIDs(sel *Selector) []RuleID {
	var ids []RuleID
	pick := func(id RuleID) {
		r := &t.rules[id].rule
		if (r.Cookie^sel.Cookie)&sel.CookieMask == 0 && (sel.Filter == nil || sel.Filter(id, r)) {
			ids = append(ids, id)
		}
	}
	if sel.Strict {
		if d := t.byMatch[sel.Match]; d != nil {
			for _, id := range d.chain {
				if t.rules[id].rule.Priority == sel.Priority {
					pick(id)
				}
			}
		}
		return ids
	}
	for _, g := range t.groups {
		if !maskWithin(&sel.Match.Mask, &g.mask) {
			continue
		}
		for _, d := range g.ds {
			if sel.Match.Covers(&d.m) {
				for _, id := range d.chain {
					pick(id)
				}
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// maskWithin reports whether every bit of a is in b.
func maskWithin(a, b *Key) bool {
	for w := range a {
		if a[w]&^b[w] != 0 {
			return false
		}
	}
	return true
}

// Modify sets the Action of the rules sel chooses (OFPFC_MODIFY and
// MODIFY_STRICT) and returns their ids, ascending. Cookies, counters and the
// device image are left alone; when nothing is chosen nothing happens (in
// OpenFlow 1.3 a modify does not add).
func (t *Table) Modify(sel Selector, action uint32) []RuleID {
	ids := t.selectIDs(&sel)
	for _, id := range ids {
		t.rules[id].rule.Action = action
	}
	return ids
}

// Delete removes the rules sel chooses (OFPFC_DELETE and DELETE_STRICT) and
// returns them with their ids, ascending.
func (t *Table) Delete(sel Selector) []Entry {
	ids := t.selectIDs(&sel)
	out := make([]Entry, 0, len(ids))
	for _, id := range ids {
		out = append(out, Entry{ID: id, Rule: t.rules[id].rule})
		t.remove(id) // removals never rebuild: the view stays valid
	}
	return out
}

// DeleteID removes one rule by id and reports whether it was there.
func (t *Table) DeleteID(id RuleID) (Rule, bool) {
	if int(id) >= len(t.rules) || !t.rules[id].live {
		return Rule{}, false
	}
	r := t.rules[id].rule
	t.remove(id)
	return r, true
}

// remove deletes one live rule.
func (t *Table) remove(id RuleID) {
	d := t.rules[id].d
	t.delPrio(id)
	i := slices.Index(d.chain, id)
	d.chain = slices.Delete(d.chain, i, i+1)
	switch {
	case len(d.chain) == 0:
		t.cls.remove(d)
		t.unlinkMatch(d)
	case i == 0:
		h := d.chain[0]
		t.cls.setHead(d, h, t.rules[h].rule.Priority)
	}
	t.rules[id] = ruleSlot{}
	t.n--
	t.freeIDs.push(id)
}

// Lookup returns the best rule matching the packet key k, answered from the
// device image by the table's View (what a mirror of it answers).
func (t *Table) Lookup(k *Key) (RuleID, bool) {
	var pk [KeyWords]uint32
	v := t.view
	projectKey(k, v.proj[:v.p], pk[:])
	id, _ := v.Lookup(pk[:v.p])
	return id, id != NoMatch
}

// LookupBatch looks up keys[i] into out[i], for i < min(len(keys), len(out)).
func (t *Table) LookupBatch(keys []Key, out []RuleID) {
	v := t.view
	var pk [chunk][KeyWords]uint32
	n := min(len(keys), len(out))
	for lo := 0; lo < n; lo += chunk {
		m := min(chunk, n-lo)
		for i := 0; i < m; i++ {
			projectKey(&keys[lo+i], v.proj[:v.p], pk[i][:])
		}
		v.lookupChunk(&pk, m, out[lo:lo+m])
	}
}

// LookupAll appends to dst every rule that matches k, best first (by Rank),
// and returns it.
func (t *Table) LookupAll(k *Key, dst []RuleID) []RuleID {
	var pk [KeyWords]uint32
	v := t.view
	projectKey(k, v.proj[:v.p], pk[:])
	start := len(dst)
	heads := v.MatchAll(pk[:v.p], nil)
	for _, h := range heads {
		if int(h) < len(t.rules) && t.rules[h].live {
			dst = append(dst, t.rules[h].d.chain...)
		}
	}
	slices.SortFunc(dst[start:], func(a, b RuleID) int {
		return cmp.Compare(t.rank(b), t.rank(a))
	})
	return dst
}

func (t *Table) rank(id RuleID) uint64 { return Rank(t.rules[id].rule.Priority, id) }

// Rule returns the rule with id.
func (t *Table) Rule(id RuleID) (Rule, bool) {
	if int(id) >= len(t.rules) || !t.rules[id].live {
		return Rule{}, false
	}
	return t.rules[id].rule, true
}

// Len returns the number of rules.
func (t *Table) Len() int { return t.n }

// Rules calls fn for every rule in id order until fn returns false. fn must
// not change the table.
func (t *Table) Rules(fn func(RuleID, *Rule) bool) {
	for i := range t.rules {
		if t.rules[i].live {
			r := t.rules[i].rule
			if !fn(RuleID(i), &r) {
				return
			}
		}
	}
}

// Mirror returns the mirror that owns the table's device image and its
// write bubbles; a backend calls Sync on it before each batch.
func (t *Table) Mirror() *bubble.Mirror { return t.mirror }

// View returns the view the table answers lookups with. It stays valid until
// the next operation that changes the table.
func (t *Table) View() *View { return t.view }

// UsedWords returns the image's projection, ascending: the key words that
// some rule's mask uses (and, until the next rebuild, words that rules since
// deleted used). Packets need only these words, in this order.
func (t *Table) UsedWords() []int { return slices.Clone(t.proj) }

// Stats returns the table's figures.
func (t *Table) Stats() Stats {
	im := t.mirror.Image()
	s := Stats{
		Algo:           t.cfg.Algo,
		Rules:          t.n,
		Matches:        len(t.dms),
		Masks:          len(t.groups),
		ProjectedWords: len(t.proj),
		ImageBytes:     im.Bytes(),
		Generation:     im.Generation,
		Rebuilds:       t.rebuilds,
		Writes:         t.mirror.Writes,
	}
	if t.n > 0 {
		s.BytesPerRule = float64(s.ImageBytes) / float64(t.n)
	}
	t.cls.stats(&s)
	return s
}

// minHeap is a binary min-heap.
type minHeap[T cmp.Ordered] []T

func (h *minHeap[T]) len() int { return len(*h) }

func (h *minHeap[T]) push(x T) {
	*h = append(*h, x)
	a := *h
	for i := len(a) - 1; i > 0; {
		p := (i - 1) / 2
		if a[p] <= a[i] {
			break
		}
		a[p], a[i] = a[i], a[p]
		i = p
	}
}

func (h *minHeap[T]) pop() T {
	a := *h
	top := a[0]
	n := len(a) - 1
	a[0] = a[n]
	a = a[:n]
	for i := 0; ; {
		l, s := 2*i+1, i
		if l < n && a[l] < a[s] {
			s = l
		}
		if l+1 < n && a[l+1] < a[s] {
			s = l + 1
		}
		if s == i {
			break
		}
		a[i], a[s] = a[s], a[i]
		i = s
	}
	*h = a
	return top
}
