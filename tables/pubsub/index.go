package pubsub

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// The constraint index: for each attribute name, the constraints on it, kept
// per value class and operator in the structure that finds the satisfied
// ones fastest (see the package documentation). Entries name the filter
// slot they count for.

// rop maps the operators that live in value-sorted arrays to the array.
func rop(o Op) int {
	switch o {
	case OpEq:
		return 0
	case OpLt:
		return 1
	case OpLe:
		return 2
	case OpGt:
		return 3
	case OpGe:
		return 4
	}
	panic("pubsub: no sorted array for " + o.String())
}

type intEnt struct {
	v int64
	s uint32
}

type floatEnt struct {
	v float64
	s uint32
}

type strEnt struct {
	v string
	s uint32
}

// neNumEnt is a number != constraint: bits is the int64 or the float64's
// bits, as isFloat says.
type neNumEnt struct {
	bits    uint64
	s       uint32
	isFloat bool
}

// neStrEnt is a string != constraint; id is its value's id in the name's
// string table.
type neStrEnt struct {
	s  uint32
	id uint32
}

type slotEnt uint32

func (e intEnt) slot() uint32   { return e.s }
func (e floatEnt) slot() uint32 { return e.s }
func (e strEnt) slot() uint32   { return e.s }
func (e neNumEnt) slot() uint32 { return e.s }
func (e neStrEnt) slot() uint32 { return e.s }
func (e slotEnt) slot() uint32  { return uint32(e) }

func (e intEnt) cmp(o intEnt) int {
	if c := cmp.Compare(e.v, o.v); c != 0 {
		return c
	}
	return cmp.Compare(e.s, o.s)
}

func (e floatEnt) cmp(o floatEnt) int {
	if c := cmp.Compare(e.v, o.v); c != 0 {
		return c
	}
	return cmp.Compare(e.s, o.s)
}

func (e strEnt) cmp(o strEnt) int {
	if c := strings.Compare(e.v, o.v); c != 0 {
		return c
	}
	return cmp.Compare(e.s, o.s)
}

func (e neNumEnt) cmp(o neNumEnt) int {
	if c := cmp.Compare(e.s, o.s); c != 0 {
		return c
	}
	return cmp.Compare(e.bits, o.bits)
}

func (e neStrEnt) cmp(o neStrEnt) int {
	if c := cmp.Compare(e.s, o.s); c != 0 {
		return c
	}
	return cmp.Compare(e.id, o.id)
}

func (e slotEnt) cmp(o slotEnt) int { return cmp.Compare(e, o) }

// ne reports whether event value v (a number) differs from the constraint's.
func (e neNumEnt) ne(v Value) bool {
	if !e.isFloat {
		c := int64(e.bits)
		if v.Type == TypeInt {
			return v.Int != c
		}
		return v.Float != float64(c)
	}
	return v.asFloat() != math.Float64frombits(e.bits)
}

type entry[T any] interface {
	slot() uint32
	cmp(T) int
}

// sorted is one array of entries: sorted up to sortedN, then a tail in
// the order of insertion. Writers append (the tail grows) and mark
// removals (dead); fix drops the entries of dead slots and merges the tail
// into the sorted part. A single change leaves a tail of up to tailMax
// entries (fix(dead, true)) and the matcher checks the tail entry by entry
// (match.go), so that adding a constraint writes one entry at the end of
// the array, not the sorted part's moved tail: a change leaves the arrays
// the matcher reads in place (the matcher's caches, on another core, keep
// them).
type sorted[T entry[T]] struct {
	a       []T
	sortedN int
	dead    bool // some entries' slots are being removed
}

// tailMax is the most unsorted entries a change leaves at an array's end.
const tailMax = 16

func (c *sorted[T]) add(e T) { c.a = append(c.a, e) }

func cmpEnt[T entry[T]](a, b T) int { return a.cmp(b) }

// mark notes that entries of the array belong to slots being removed
// (the caller marks them in the dead flags); fix drops them.
func (c *sorted[T]) mark() { c.dead = true }

// fix drops the entries of dead slots and restores the order: all of it,
// or, lazy, only once the unsorted tail has grown past tailMax entries.
func (c *sorted[T]) fix(dead []bool, lazy bool) {
	if c.dead {
		kept, keptSorted := 0, 0
		for i, e := range c.a {
			if dead[e.slot()] {
				continue
			}
			c.a[kept] = e
			kept++
			if i < c.sortedN {
				keptSorted++
			}
		}
		clear(c.a[kept:])
		c.a = c.a[:kept]
		c.sortedN = keptSorted
		c.dead = false
	}
	n := len(c.a)
	if c.sortedN == n || lazy && n-c.sortedN <= tailMax {
		return
	}
	// Sort the tail and merge it into the sorted part from the end: the
	// entries before the tail's smallest do not move.
	tail := c.a[c.sortedN:]
	slices.SortFunc(tail, cmpEnt[T])
	if c.sortedN > 0 && cmpEnt(c.a[c.sortedN-1], tail[0]) > 0 {
		tmp := slices.Clone(tail)
		i, j, k := c.sortedN-1, len(tmp)-1, n-1
		for j >= 0 {
			if i >= 0 && cmpEnt(c.a[i], tmp[j]) > 0 {
				c.a[k] = c.a[i]
				i--
			} else {
				c.a[k] = tmp[j]
				j--
			}
			k--
		}
	}
	c.sortedN = n
}

// keyed is a map from a value to the slots of its constraints (hash lookup
// for = and for the prefixes, suffixes and substrings). The map holds an
// index into lists, so that adding a slot costs one hash operation.
type keyed[K comparable] struct {
	m       map[K]uint32
	lists   [][]uint32
	free    []uint32 // indices of lists whose key was deleted
	touched []K      // keys with removed slots, compacted by fix
}

// add appends slot s to key's list; it reports whether the key is new.
func (k *keyed[K]) add(key K, s uint32) bool {
	if k.m == nil {
		k.m = make(map[K]uint32)
	}
	i, ok := k.m[key]
	if !ok {
		if n := len(k.free); n > 0 {
			i, k.free = k.free[n-1], k.free[:n-1]
		} else {
			i = uint32(len(k.lists))
			k.lists = append(k.lists, nil)
		}
		k.m[key] = i
	}
	k.lists[i] = append(k.lists[i], s)
	return !ok
}

// get returns key's slots (nil when none).
func (k *keyed[K]) get(key K) []uint32 {
	if i, ok := k.m[key]; ok {
		return k.lists[i]
	}
	return nil
}

func (k *keyed[K]) remove(key K) { k.touched = append(k.touched, key) }

// fix compacts the touched keys (each once: a purge may have touched a
// key for many of its entries); it reports whether a key disappeared.
func (k *keyed[K]) fix(dead []bool) (gone bool) {
	var done map[K]bool
	if len(k.touched) > 1 {
		done = make(map[K]bool, len(k.touched))
	}
	for _, key := range k.touched {
		if done != nil {
			if done[key] {
				continue
			}
			done[key] = true
		}
		i, ok := k.m[key]
		if !ok {
			continue
		}
		l := slices.DeleteFunc(k.lists[i], func(s uint32) bool { return dead[s] })
		if len(l) == 0 {
			delete(k.m, key)
			k.lists[i] = nil
			k.free = append(k.free, i)
			gone = true
		} else {
			k.lists[i] = l
		}
	}
	k.touched = k.touched[:0]
	return gone
}

// affix indexes ^=, $= or *= constraints: the values, hashed, and the
// distinct lengths among them, so that a string s is tested by looking up
// its prefixes (suffixes, substrings) of those lengths only.
type affix struct {
	keyed[string]
	count [MaxString + 1]int32 // constraints per value length
	lens  []int                // lengths with count > 0, ascending
	vals  []string             // distinct values (for scanning, *=)
	stale bool                 // lens or vals need rebuilding
}

// add indexes value v of slot s. A new value or length goes into vals or
// lens at once (binary insertion; both stay sorted), so that an add does
// not rebuild them.
func (a *affix) add(v string, s uint32) {
	if a.keyed.add(v, s) && !a.stale {
		if i, ok := slices.BinarySearch(a.vals, v); !ok {
			a.vals = slices.Insert(a.vals, i, v)
		}
	}
	a.count[len(v)]++
	if a.count[len(v)] == 1 && !a.stale {
		if i, ok := slices.BinarySearch(a.lens, len(v)); !ok {
			a.lens = slices.Insert(a.lens, i, len(v))
		}
	}
}

func (a *affix) remove(v string) {
	a.keyed.remove(v)
	a.count[len(v)]--
	if a.count[len(v)] == 0 {
		a.stale = true
	}
}

func (a *affix) fix(dead []bool) {
	if a.keyed.fix(dead) {
		a.stale = true
	}
	if !a.stale {
		return
	}
	a.lens = a.lens[:0]
	for l, n := range a.count {
		if n > 0 {
			a.lens = append(a.lens, l)
		}
	}
	a.vals = a.vals[:0]
	for v := range a.m {
		a.vals = append(a.vals, v)
	}
	slices.Sort(a.vals)
	a.stale = false
}

type strID struct {
	id   uint32
	refs int
}

// nameIdx holds the constraints on one attribute name.
type nameIdx struct {
	name    string
	n       int  // constraints
	touched bool // on the current writer's list of names to fix

	// numbers
	eqInt  keyed[int64]      // = on an integer, for integer events
	ints   [5]sorted[intEnt] // by rop: = < <= > >= on integers
	floats [5]sorted[floatEnt]
	neNum  sorted[neNumEnt] // by slot

	// strings
	eqStr    keyed[string]
	strs     [5]sorted[strEnt] // < <= > >= (index 0 unused)
	neStr    sorted[neStrEnt]  // by slot
	strIDs   map[string]*strID
	nextID   uint32
	prefix   affix
	suffix   affix
	contains affix

	// booleans: the constraints that true (false) satisfies
	bTrue, bFalse sorted[slotEnt]

	bulkTarget [numBulkKinds]int32 // a writer's bulk's target numbers + 1 (bulk.go)

	// tomb lists the entries of removed filters still in the structures
	// (Table.removeLocked, Table.purge); n counts them too.
	tomb []tombEnt
}

func newNameIdx(name string) *nameIdx {
	return &nameIdx{name: name, strIDs: map[string]*strID{}}
}

func (ni *nameIdx) insert(c *Constraint, s uint32) {
	ni.n++
	v := c.Value
	switch v.Type {
	case TypeInt:
		switch c.Op {
		case OpNe:
			ni.neNum.add(neNumEnt{bits: uint64(v.Int), s: s})
		case OpEq:
			ni.eqInt.add(v.Int, s)
			fallthrough
		default:
			ni.ints[rop(c.Op)].add(intEnt{v.Int, s})
		}
	case TypeFloat:
		if c.Op == OpNe {
			ni.neNum.add(neNumEnt{bits: math.Float64bits(v.Float), s: s, isFloat: true})
		} else {
			ni.floats[rop(c.Op)].add(floatEnt{v.Float, s})
		}
	case TypeString:
		switch c.Op {
		case OpEq:
			ni.eqStr.add(v.Str, s)
		case OpNe:
			id := ni.strIDs[v.Str]
			if id == nil {
				ni.nextID++
				id = &strID{id: ni.nextID}
				ni.strIDs[v.Str] = id
			}
			id.refs++
			ni.neStr.add(neStrEnt{s: s, id: id.id})
		case OpPrefix:
			ni.prefix.add(v.Str, s)
		case OpSuffix:
			ni.suffix.add(v.Str, s)
		case OpContains:
			ni.contains.add(v.Str, s)
		default:
			ni.strs[rop(c.Op)].add(strEnt{v.Str, s})
		}
	case TypeBool:
		if (c.Op == OpEq) == (v.Int != 0) {
			ni.bTrue.add(slotEnt(s))
		} else {
			ni.bFalse.add(slotEnt(s))
		}
	}
}

// remove takes constraint c of slot s (which the caller marked dead) out
// when fix runs.
func (ni *nameIdx) remove(c *Constraint, s uint32) {
	ni.n--
	v := c.Value
	switch v.Type {
	case TypeInt:
		switch c.Op {
		case OpNe:
			ni.neNum.mark()
		case OpEq:
			ni.eqInt.remove(v.Int)
			fallthrough
		default:
			ni.ints[rop(c.Op)].mark()
		}
	case TypeFloat:
		if c.Op == OpNe {
			ni.neNum.mark()
		} else {
			ni.floats[rop(c.Op)].mark()
		}
	case TypeString:
		switch c.Op {
		case OpEq:
			ni.eqStr.remove(v.Str)
		case OpNe:
			id := ni.strIDs[v.Str]
			ni.neStr.mark()
			id.refs--
			if id.refs == 0 {
				delete(ni.strIDs, v.Str)
			}
		case OpPrefix:
			ni.prefix.remove(v.Str)
		case OpSuffix:
			ni.suffix.remove(v.Str)
		case OpContains:
			ni.contains.remove(v.Str)
		default:
			ni.strs[rop(c.Op)].mark()
		}
	case TypeBool:
		if (c.Op == OpEq) == (v.Int != 0) {
			ni.bTrue.mark()
		} else {
			ni.bFalse.mark()
		}
	}
}

// fix restores every structure's invariants after inserts and removals;
// lazy leaves short unsorted tails (sorted.fix).
func (ni *nameIdx) fix(dead []bool, lazy bool) {
	ni.eqInt.fix(dead)
	for i := range ni.ints {
		ni.ints[i].fix(dead, lazy)
		ni.floats[i].fix(dead, lazy)
		ni.strs[i].fix(dead, lazy)
	}
	ni.neNum.fix(dead, lazy)
	ni.eqStr.fix(dead)
	ni.neStr.fix(dead, lazy)
	ni.prefix.fix(dead)
	ni.suffix.fix(dead)
	ni.contains.fix(dead)
	ni.bTrue.fix(dead, lazy)
	ni.bFalse.fix(dead, lazy)
}

// Binary searches: lb is the first entry whose value is >= x, ub the first
// whose value is > x, under the comparison the semantics prescribe for the
// pair of types (integers against an integer event as integers, anything
// involving a float as float64).

func lbInt(a []intEnt, x int64) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m].v < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func ubInt(a []intEnt, x int64) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m].v <= x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func lbIntF(a []intEnt, x float64) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if float64(a[m].v) < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func ubIntF(a []intEnt, x float64) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if float64(a[m].v) <= x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func lbFloat(a []floatEnt, x float64) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m].v < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func ubFloat(a []floatEnt, x float64) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m].v <= x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func lbStr(a []strEnt, x string) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m].v < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func ubStr(a []strEnt, x string) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m].v <= x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// span returns the satisfied entries [i, j) of the array for operator r
// (a rop index), given lb and ub of the event's value and the length n.
func span(r, lb, ub, n int) (int, int) {
	switch r {
	case 0: // value = c: c == x
		return lb, ub
	case 1: // x < c: c > x
		return ub, n
	case 2: // x <= c: c >= x
		return lb, n
	case 3: // x > c: c < x
		return 0, lb
	default: // x >= c: c <= x
		return 0, ub
	}
}
