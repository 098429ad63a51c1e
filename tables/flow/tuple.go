package flow

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/gswitch/gswitch/tables/bubble"
)

// tuple is tuple-space search (and, with bloom, Bloom search): one class per
// mask (several after a split), each a cuckoo hash table of CuckooWays
// subtables with one entry per bucket, optionally behind a Bloom filter.
type tuple struct {
	m       *bubble.Mirror
	cfg     *Config
	bloom   bool
	merge   bool // Algo Merge: classes hash on a coarser mask (merge.go)
	proj    []int
	p, e, d int // projected words, words per entry, words per descriptor
	unit    int // words per entry unit: one bucket of each subtable
	k       int // hash families
	seeds   []uint64
	maxLogB int
	rng     *rand.Rand

	byMask    map[Key][]*class
	slots     []*class
	freeSlots minHeap[int]
	slotTop   int
	order     []*class
	ent, blm  blockAlloc
	hint      map[Key]int // during a rebuild: matches of each mask still to come

	rehashes, grows, splits, kicks uint64

	walk    []walkStep
	scratch []uint32
	entBuf  [maxEntryWords]uint32
	hkBuf   [KeyWords]uint32
	cands   []*class
	levels  []Key
}

// class is one cuckoo table of a mask.
type class struct {
	slot    int
	mask    Key
	members []*dmatch
	family  int
	logB    int
	tbl     int // entry units
	bloomU  int // bloom units
	logBits int
	bcnt    []uint16 // counting Bloom filter
	prios   map[uint16]int32
	maxPrio uint16
	opos    int
	closed  bool               // an insertion failed at the largest size: take no more
	pmask   [KeyWords]uint32   // the class mask, projected (merge hashes under it; the prefilter selector comes from it)
	nbits   int                // merge: bits of the class mask
	dups    map[uint64]uint8   // merge: members per class key (dupKey)
	sel     uint32             // prefilter selector (PreSelector)
	pcnt    [PreBuckets]uint16 // members per prefilter bucket
}

// walkStep is one write of a cuckoo walk, kept aside until the walk succeeds.
type walkStep struct {
	pos int
	ent [maxEntryWords]uint32
}

// tref is a cuckoo table's words: the live image (written through the
// mirror) or a scratch buffer.
type tref struct {
	w    []uint32
	m    *bubble.Mirror
	base uint32
}

func (r *tref) set(i int, v uint32) {
	if r.m != nil {
		r.m.Set(RegionEntries, r.base+uint32(i), v)
	} else {
		r.w[i] = v
	}
}

func newTuple(m *bubble.Mirror, cfg *Config) *tuple {
	tc := &tuple{m: m, cfg: cfg, bloom: cfg.Algo == Bloom || cfg.Algo == Merge, merge: cfg.Algo == Merge, k: cfg.families}
	srng := rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15))
	tc.seeds = make([]uint64, tc.k*HashFuncs*HashCoefs)
	for i := range tc.seeds {
		tc.seeds[i] = srng.Uint64()
	}
	tc.rng = rand.New(rand.NewPCG(cfg.Seed^0x5851f42d4c957f2d, 1))
	tc.maxLogB = cfg.minLogB
	for tc.loadLimit(tc.maxLogB) < cfg.ClassCapacity {
		tc.maxLogB++
	}
	return tc
}

// loadLimit is the most entries a table of 2^logB buckets per subtable takes.
func (tc *tuple) loadLimit(logB int) int {
	slots := CuckooWays << logB
	return max(1, int(tc.cfg.fillFactor*float64(slots)))
}

// fitLogB returns the table size for n entries.
func (tc *tuple) fitLogB(n int) int {
	b := tc.cfg.minLogB
	for b < tc.maxLogB && tc.loadLimit(b) < n {
		b++
	}
	return b
}

// bloomLogBits returns the Bloom filter size for n entries: about 16 bits
// per entry, at least 512 bits.
func bloomLogBits(n int) int {
	b := bits.Len(uint(bitsPerEntry*max(n, 1) - 1))
	return min(max(b, minLogBits), MaxLogBits)
}

func (tc *tuple) hash(fam, fn int, key []uint32) uint64 {
	a := tc.seeds[coefIndex(fam, fn):]
	h := a[0]
	for i, x := range key {
		h += a[1+i] * uint64(x)
	}
	return h
}

// top returns the top n bits of h (0 for n == 0).
func top(h uint64, n int) int { return int(h >> (64 - uint(n))) }

// entryOf returns d's entry: projected key, id, priority (and, merge, the
// projected mask).
func (tc *tuple) entryOf(d *dmatch) []uint32 {
	e := tc.entBuf[:tc.e]
	projectKey(&d.m.Value, tc.proj, e)
	e[tc.p+EntID] = uint32(d.hid)
	e[tc.p+EntPrio] = uint32(d.hprio)
	if tc.merge {
		projectKey(&d.m.Mask, tc.proj, e[tc.p+EntMask:])
	}
	return e
}

// cmask returns the projected class mask a merged class hashes under (nil
// for tuple and Bloom, whose entries hold masked keys already).
func (tc *tuple) cmask(c *class) []uint32 {
	if !tc.merge {
		return nil
	}
	return c.pmask[:tc.p]
}

// hkey returns the words an entry is hashed on: its key words, under the
// class mask cm when there is one.
func (tc *tuple) hkey(cm, ent []uint32) []uint32 {
	if cm == nil {
		return ent[:tc.p]
	}
	k := tc.hkBuf[:tc.p]
	for i, m := range cm {
		k[i] = ent[i] & m
	}
	return k
}

// tableWord returns the word offset of c's table.
func (tc *tuple) tableWord(c *class) int { return c.tbl * tc.unit }

func (tc *tuple) tableWords(logB int) int { return tc.unit << logB }

func (tc *tuple) liveRef(c *class) *tref {
	off := tc.tableWord(c)
	return &tref{w: tc.m.Words(RegionEntries)[off : off+tc.tableWords(c.logB)], m: tc.m, base: uint32(off)}
}

// read returns the entry at pos as the walk left it.
func (tc *tuple) read(r *tref, walk []walkStep, pos int) (ent [maxEntryWords]uint32) {
	for i := len(walk) - 1; i >= 0; i-- {
		if walk[i].pos == pos {
			return walk[i].ent
		}
	}
	copy(ent[:tc.e], r.w[pos*tc.e:])
	return ent
}

// cuckooPut inserts ent into table r (2^logB buckets per subtable, hash
// family fam): into an empty candidate bucket, else by a random walk of at
// most maxKicks evictions. The walk's writes are applied only if it succeeds.
func (tc *tuple) cuckooPut(r *tref, cm []uint32, fam, logB int, ent []uint32) bool {
	walk := tc.walk[:0]
	defer func() { tc.walk = walk[:0] }()
	var cur [maxEntryWords]uint32
	copy(cur[:], ent)
	last := -1
	for kick := 0; kick <= tc.cfg.maxKicks; kick++ {
		var pos [CuckooWays]int
		for j := range pos {
			pos[j] = j<<logB + top(tc.hash(fam, j, tc.hkey(cm, cur[:])), logB)
			if occ := tc.read(r, walk, pos[j]); occ[tc.p+EntID] == EmptyID {
				walk = append(walk, walkStep{pos: pos[j], ent: cur})
				tc.commit(r, walk)
				return true
			}
		}
		j := tc.rng.IntN(CuckooWays)
		if pos[j] == last {
			j = (j + 1 + tc.rng.IntN(CuckooWays-1)) % CuckooWays
		}
		victim := tc.read(r, walk, pos[j])
		walk = append(walk, walkStep{pos: pos[j], ent: cur})
		cur, last = victim, pos[j]
		tc.kicks++
	}
	return false
}

func (tc *tuple) commit(r *tref, walk []walkStep) {
	for i := range walk {
		base := walk[i].pos * tc.e
		for j := 0; j < tc.e; j++ {
			r.set(base+j, walk[i].ent[j])
		}
	}
}

// buildScratch lays out c's members (and extra, if not nil) in a scratch
// table of 2^logB buckets per subtable with family fam.
func (tc *tuple) buildScratch(c *class, fam, logB int, extra *dmatch) ([]uint32, bool) {
	size := tc.tableWords(logB)
	if cap(tc.scratch) < size {
		tc.scratch = make([]uint32, size)
	}
	buf := tc.scratch[:size]
	clear(buf)
	for i := tc.p + EntID; i < size; i += tc.e {
		buf[i] = EmptyID
	}
	r := &tref{w: buf}
	cm := tc.cmask(c)
	for _, d := range c.members {
		if !tc.cuckooPut(r, cm, fam, logB, tc.entryOf(d)) {
			return nil, false
		}
	}
	if extra != nil && !tc.cuckooPut(r, cm, fam, logB, tc.entryOf(extra)) {
		return nil, false
	}
	return buf, true
}

func (tc *tuple) writeBlock(unitOff int, buf []uint32) {
	base := uint32(unitOff * tc.unit)
	for i, v := range buf {
		tc.m.Set(RegionEntries, base+uint32(i), v)
	}
}

// writeDesc writes c's descriptor.
func (tc *tuple) writeDesc(c *class) {
	base := uint32(c.slot * tc.d)
	for i, w := range tc.proj {
		tc.m.Set(RegionClasses, base+uint32(i), c.mask[w])
	}
	p := base + uint32(tc.p)
	tc.m.Set(RegionClasses, p+DescFamily, uint32(c.family))
	tc.m.Set(RegionClasses, p+DescTable, uint32(tc.tableWord(c)))
	tc.m.Set(RegionClasses, p+DescLogB, uint32(c.logB))
	tc.m.Set(RegionClasses, p+DescMaxPrio, uint32(c.maxPrio))
	tc.m.Set(RegionClasses, p+DescCount, uint32(len(c.members)))
	tc.m.Set(RegionClasses, p+DescSel, c.sel)
	for w := 0; w < PreWords; w++ {
		tc.m.Set(RegionClasses, p+uint32(DescPre+w), c.preWord(w))
	}
	if tc.bloom {
		tc.m.Set(RegionClasses, p+DescBloom, uint32(c.bloomU*bloomUnitWord))
		tc.m.Set(RegionClasses, p+DescLogBits, uint32(c.logBits))
	}
}

func (tc *tuple) insert(d *dmatch) error {
	if tc.merge {
		return tc.insertMerge(d)
	}
	sibs := tc.byMask[d.m.Mask]
	for _, c := range sibs {
		ok, err := tc.place(c, d)
		if err != nil || ok {
			return err
		}
	}
	if err := tc.newClass(d, d.m.Mask); err != nil {
		return err
	}
	if len(sibs) > 0 {
		tc.splits++
	}
	return nil
}

// place inserts d into c. It reports false when c cannot take it (full, or
// no family works at the largest table size), and errNoRoom when the image
// has no room to grow c; in both cases nothing changed.
func (tc *tuple) place(c *class, d *dmatch) (bool, error) {
	if c.closed || len(c.members) >= tc.cfg.ClassCapacity {
		return false, nil
	}
	n := len(c.members) + 1
	newBloom, newLogBits := -1, 0
	if tc.bloom && 1<<c.logBits < 8*n {
		newLogBits = bloomLogBits(n)
		off, ok := tc.blm.alloc(newLogBits - bloomUnitLog)
		if !ok {
			return false, errNoRoom
		}
		newBloom = off
	}
	placed, rehashed, err := tc.placeTable(c, d)
	if err != nil || !placed {
		if newBloom >= 0 {
			tc.blm.release(newBloom, newLogBits-bloomUnitLog)
		}
		if err == nil {
			c.closed = true
		}
		return false, err
	}
	tc.addMember(c, d)
	switch {
	case newBloom >= 0:
		tc.blm.release(c.bloomU, c.logBits-bloomUnitLog)
		c.bloomU, c.logBits = newBloom, newLogBits
		tc.refillBloom(c)
	case rehashed:
		tc.refillBloom(c)
	default:
		tc.bloomAdd(c, d)
	}
	tc.writeDesc(c)
	return true, nil
}

// placeTable puts d's entry into c's cuckoo table: in place, else re-hashed
// with the other families, else in a doubled table. rehashed reports that
// the family or the table changed.
func (tc *tuple) placeTable(c *class, d *dmatch) (placed, rehashed bool, err error) {
	n := len(c.members) + 1
	if n <= tc.loadLimit(c.logB) || c.logB >= tc.maxLogB {
		if tc.cuckooPut(tc.liveRef(c), tc.cmask(c), c.family, c.logB, tc.entryOf(d)) {
			return true, false, nil
		}
		for i := 1; i < tc.k; i++ {
			fam := (c.family + i) % tc.k
			tc.rehashes++
			if buf, ok := tc.buildScratch(c, fam, c.logB, d); ok {
				tc.writeBlock(c.tbl, buf)
				c.family = fam
				return true, true, nil
			}
		}
	}
	for logB := c.logB + 1; logB <= tc.maxLogB; logB++ {
		off, ok := tc.ent.alloc(logB)
		if !ok {
			return false, false, errNoRoom
		}
		tc.grows++
		for i := 0; i < tc.k; i++ {
			fam := (c.family + i) % tc.k
			if i > 0 {
				tc.rehashes++
			}
			if buf, ok := tc.buildScratch(c, fam, logB, d); ok {
				tc.ent.release(c.tbl, c.logB)
				c.tbl, c.logB, c.family = off, logB, fam
				tc.writeBlock(off, buf)
				return true, true, nil
			}
		}
		tc.ent.release(off, logB)
	}
	return false, false, nil
}

// addMember records d in c (its entry is already in the table).
func (tc *tuple) addMember(c *class, d *dmatch) {
	d.cls, d.cpos = c, len(c.members)
	c.members = append(c.members, d)
	if c.prioAdd(d.hprio) && c.opos >= 0 {
		tc.reorder(c)
	}
	if tc.hint != nil {
		tc.hint[c.mask]--
	}
	if tc.merge {
		c.dups[dupKey(c, d)]++
	}
	tc.preAdd(c, d)
}

// preBucket returns d's prefilter bucket in c.
func (tc *tuple) preBucket(c *class, d *dmatch) int {
	return PreBucket(c.sel, tc.entryOf(d)[:tc.p])
}

// preWord returns word w of c's prefilter bitmap, from its counts.
func (c *class) preWord(w int) uint32 {
	var x uint32
	for i, n := range c.pcnt[w*32 : w*32+32] {
		if n != 0 {
			x |= 1 << i
		}
	}
	return x
}

// preAdd counts d in c's prefilter, setting its bucket's bit in the image.
func (tc *tuple) preAdd(c *class, d *dmatch) {
	b := tc.preBucket(c, d)
	if c.pcnt[b] == 0xffff {
		return // saturated: stays set
	}
	if c.pcnt[b]++; c.pcnt[b] == 1 {
		tc.m.Set(RegionClasses, uint32(c.slot*tc.d+tc.p+DescPre+b>>5), c.preWord(b>>5))
	}
}

// preDel uncounts d from c's prefilter, clearing its bucket's bit in the
// image when no member is left in it.
func (tc *tuple) preDel(c *class, d *dmatch) {
	b := tc.preBucket(c, d)
	if c.pcnt[b] == 0 || c.pcnt[b] == 0xffff {
		return
	}
	if c.pcnt[b]--; c.pcnt[b] == 0 {
		tc.m.Set(RegionClasses, uint32(c.slot*tc.d+tc.p+DescPre+b>>5), c.preWord(b>>5))
	}
}

// newClass opens a class of mask (d's own, or for merge a relaxed one) for d.
func (tc *tuple) newClass(d *dmatch, mask Key) error {
	n := 1
	if tc.hint != nil {
		n = min(max(tc.hint[d.m.Mask], 1), tc.cfg.ClassCapacity)
	}
	slot := -1
	if tc.freeSlots.len() > 0 {
		slot = tc.freeSlots.pop()
	} else if tc.slotTop < len(tc.slots) {
		slot = tc.slotTop
		tc.slotTop++
	} else {
		return errNoRoom
	}
	logB := tc.fitLogB(n)
	off, ok := tc.ent.alloc(logB)
	if !ok {
		tc.freeSlots.push(slot)
		return errNoRoom
	}
	c := &class{slot: slot, mask: mask, logB: logB, tbl: off, prios: map[uint16]int32{}, opos: -1}
	projectKey(&mask, tc.proj, c.pmask[:tc.p])
	c.sel = PreSelector(c.pmask[:tc.p])
	if tc.merge {
		c.nbits = maskBits(&mask)
		c.dups = map[uint64]uint8{}
	}
	if tc.bloom {
		c.logBits = bloomLogBits(n)
		if c.bloomU, ok = tc.blm.alloc(c.logBits - bloomUnitLog); !ok {
			tc.ent.release(off, logB)
			tc.freeSlots.push(slot)
			return errNoRoom
		}
	}
	buf, _ := tc.buildScratch(c, 0, logB, d) // one entry always fits
	tc.writeBlock(off, buf)
	tc.addMember(c, d)
	if tc.bloom {
		tc.refillBloom(c)
	}
	tc.slots[slot] = c
	tc.byMask[c.mask] = append(tc.byMask[c.mask], c)
	i := sort.Search(len(tc.order), func(i int) bool { return tc.order[i].maxPrio < c.maxPrio })
	tc.order = slices.Insert(tc.order, i, c)
	tc.writeOrder(i, len(tc.order))
	tc.m.Set(RegionHeader, HdrCount, uint32(len(tc.order)))
	tc.writeDesc(c)
	return nil
}

// writeOrder rewrites order positions lo..hi-1.
func (tc *tuple) writeOrder(lo, hi int) {
	for i := lo; i < hi && i < len(tc.order); i++ {
		tc.order[i].opos = i
		tc.m.Set(RegionOrder, uint32(i), uint32(tc.order[i].slot))
	}
}

// reorder moves c to its place after its max priority changed.
func (tc *tuple) reorder(c *class) {
	old := c.opos
	tc.order = slices.Delete(tc.order, old, old+1)
	i := sort.Search(len(tc.order), func(i int) bool { return tc.order[i].maxPrio < c.maxPrio })
	tc.order = slices.Insert(tc.order, i, c)
	tc.writeOrder(min(old, i), max(old, i)+1)
	tc.m.Set(RegionClasses, uint32(c.slot*tc.d+tc.p+DescMaxPrio), uint32(c.maxPrio))
}

// findEntry returns the position of d's entry in c's table, or -1.
func (tc *tuple) findEntry(c *class, d *dmatch) int {
	ent := tc.entryOf(d)
	key := ent[:tc.p]
	hk := tc.hkey(tc.cmask(c), ent)
	w := tc.m.Words(RegionEntries)
	base := tc.tableWord(c)
	for j := 0; j < CuckooWays; j++ {
		pos := j<<c.logB + top(tc.hash(c.family, j, hk), c.logB)
		e := w[base+pos*tc.e:]
		if e[tc.p+EntID] != EmptyID && slices.Equal(e[:tc.p], key) &&
			(!tc.merge || slices.Equal(e[tc.p+EntMask:tc.p+EntMask+tc.p], ent[tc.p+EntMask:tc.p+EntMask+tc.p])) {
			return pos
		}
	}
	return -1
}

func (tc *tuple) entryWord(c *class, pos, i int) uint32 {
	return uint32(tc.tableWord(c) + pos*tc.e + i)
}

func (tc *tuple) setHead(d *dmatch, id RuleID, prio uint16) {
	c := d.cls
	if pos := tc.findEntry(c, d); pos >= 0 {
		tc.m.Set(RegionEntries, tc.entryWord(c, pos, tc.p+EntID), uint32(id))
		tc.m.Set(RegionEntries, tc.entryWord(c, pos, tc.p+EntPrio), uint32(prio))
	}
	old := d.hprio
	d.hid, d.hprio = id, prio
	if old == prio {
		return
	}
	ch := c.prioDel(old)
	if c.prioAdd(prio) || ch {
		tc.reorder(c)
	}
}

func (tc *tuple) remove(d *dmatch) {
	c := d.cls
	if pos := tc.findEntry(c, d); pos >= 0 {
		tc.m.Set(RegionEntries, tc.entryWord(c, pos, tc.p+EntID), EmptyID)
	}
	if tc.merge {
		if k := dupKey(c, d); c.dups[k] <= 1 {
			delete(c.dups, k)
		} else {
			c.dups[k]--
		}
	}
	last := c.members[len(c.members)-1]
	c.members[d.cpos], last.cpos = last, d.cpos
	c.members = c.members[:len(c.members)-1]
	d.cls = nil
	c.closed = false
	if len(c.members) == 0 {
		tc.dropClass(c)
		return
	}
	tc.bloomDel(c, d)
	tc.preDel(c, d)
	if c.prioDel(d.hprio) {
		tc.reorder(c)
	}
	tc.m.Set(RegionClasses, uint32(c.slot*tc.d+tc.p+DescCount), uint32(len(c.members)))
}

// dropClass removes an empty class.
func (tc *tuple) dropClass(c *class) {
	i := c.opos
	tc.order = slices.Delete(tc.order, i, i+1)
	tc.writeOrder(i, len(tc.order))
	tc.m.Set(RegionHeader, HdrCount, uint32(len(tc.order)))
	tc.ent.release(c.tbl, c.logB)
	if tc.bloom {
		tc.blm.release(c.bloomU, c.logBits-bloomUnitLog)
	}
	tc.slots[c.slot] = nil
	tc.freeSlots.push(c.slot)
	sibs := tc.byMask[c.mask]
	sibs = slices.DeleteFunc(sibs, func(x *class) bool { return x == c })
	if len(sibs) == 0 {
		delete(tc.byMask, c.mask)
	} else {
		tc.byMask[c.mask] = sibs
	}
}

// prioAdd counts a head priority; it reports whether maxPrio changed.
func (c *class) prioAdd(p uint16) bool {
	c.prios[p]++
	if len(c.prios) == 1 && c.prios[p] == 1 || p > c.maxPrio {
		changed := c.maxPrio != p
		c.maxPrio = p
		return changed
	}
	return false
}

// prioDel uncounts a head priority; it reports whether maxPrio changed.
func (c *class) prioDel(p uint16) bool {
	if n := c.prios[p] - 1; n > 0 {
		c.prios[p] = n
		return false
	}
	delete(c.prios, p)
	if p != c.maxPrio || len(c.prios) == 0 {
		return false
	}
	if len(c.prios) <= 64 {
		c.maxPrio = 0
		for q := range c.prios {
			c.maxPrio = max(c.maxPrio, q)
		}
		return true
	}
	for q := int(p) - 1; q >= 0; q-- {
		if _, ok := c.prios[uint16(q)]; ok {
			c.maxPrio = uint16(q)
			break
		}
	}
	return true
}

// bloomBits returns the two Bloom filter bits of d in c.
func (tc *tuple) bloomBits(c *class, d *dmatch) (int, int) {
	key := tc.hkey(tc.cmask(c), tc.entryOf(d))
	return top(tc.hash(c.family, bloomFunc0, key), c.logBits), top(tc.hash(c.family, bloomFunc0+1, key), c.logBits)
}

func (tc *tuple) bloomWord(c *class, b int) uint32 { return uint32(c.bloomU*bloomUnitWord + b>>5) }

func (tc *tuple) bloomAdd(c *class, d *dmatch) {
	if !tc.bloom {
		return
	}
	b1, b2 := tc.bloomBits(c, d)
	for _, b := range [2]int{b1, b2} {
		switch c.bcnt[b] {
		case 0:
			w := tc.bloomWord(c, b)
			tc.m.Set(RegionBloom, w, tc.m.Get(RegionBloom, w)|1<<(b&31))
		case 0xffff:
			continue // saturated: stays set
		}
		c.bcnt[b]++
	}
}

func (tc *tuple) bloomDel(c *class, d *dmatch) {
	if !tc.bloom {
		return
	}
	b1, b2 := tc.bloomBits(c, d)
	for _, b := range [2]int{b1, b2} {
		switch c.bcnt[b] {
		case 0, 0xffff:
			continue
		case 1:
			w := tc.bloomWord(c, b)
			tc.m.Set(RegionBloom, w, tc.m.Get(RegionBloom, w)&^(1<<(b&31)))
		}
		c.bcnt[b]--
	}
}

// refillBloom recounts c's Bloom filter from its members and rewrites it.
func (tc *tuple) refillBloom(c *class) {
	if !tc.bloom {
		return
	}
	nbits := 1 << c.logBits
	if cap(c.bcnt) < nbits {
		c.bcnt = make([]uint16, nbits)
	}
	c.bcnt = c.bcnt[:nbits]
	clear(c.bcnt)
	for _, d := range c.members {
		b1, b2 := tc.bloomBits(c, d)
		for _, b := range [2]int{b1, b2} {
			if c.bcnt[b] < 0xffff {
				c.bcnt[b]++
			}
		}
	}
	base := uint32(c.bloomU * bloomUnitWord)
	for w := 0; w < nbits/32; w++ {
		var x uint32
		for i := 0; i < 32; i++ {
			if c.bcnt[w*32+i] != 0 {
				x |= 1 << i
			}
		}
		tc.m.Set(RegionBloom, base+uint32(w), x)
	}
}

// rebuild lays out a fresh image: every distinct match re-inserted, class
// tables sized for their contents, head-room doubled, retrying with more
// room if the estimate falls short.
func (tc *tuple) rebuild(proj []int, ds []*dmatch) error {
	tc.proj, tc.p = proj, len(proj)
	tc.e, tc.d = EntryWordsFor(tc.cfg.Algo, tc.p), ClassWords(tc.p)
	tc.unit = CuckooWays * tc.e
	counts := map[Key]int{}
	for _, d := range ds {
		counts[d.m.Mask]++
	}
	entUnits, bloomUnits, classes := 0, 0, 0
	for _, n := range counts {
		for n > 0 {
			c := min(n, tc.cfg.ClassCapacity)
			entUnits += 1 << tc.fitLogB(c)
			bloomUnits += 1 << (bloomLogBits(c) - bloomUnitLog)
			classes++
			n -= c
		}
	}
	live := tc.m
	defer func() { tc.m = live }()
	for attempt := 0; attempt < 8; attempt++ {
		sizes := [numRegions]int{
			RegionHeader:  HeaderWords,
			RegionSeeds:   seedWords(tc.k),
			RegionClasses: max(tc.cfg.minUnits, 2*classes) << attempt * tc.d,
			RegionOrder:   max(tc.cfg.minUnits, 2*classes) << attempt,
			RegionEntries: max(tc.cfg.minUnits, 2*entUnits) << attempt * tc.unit,
		}
		if tc.bloom {
			sizes[RegionBloom] = max(tc.cfg.minUnits, 2*bloomUnits) << attempt * bloomUnitWord
		}
		for _, s := range sizes {
			if s > 1<<31 {
				return fmt.Errorf("flow: image region of %d words too large", s)
			}
		}
		err := tc.build(sizes, ds, counts)
		if err == nil {
			live.Replace(tc.m.Image())
			return nil
		}
		if err != errNoRoom {
			return err
		}
	}
	return fmt.Errorf("flow: could not lay out %d matches", len(ds))
}

// build inserts ds into a fresh image of the given sizes, written through a
// scratch mirror (tc.m).
func (tc *tuple) build(sizes [numRegions]int, ds []*dmatch, counts map[Key]int) error {
	tc.m = bubble.NewMirror(newImage(sizes))
	nslots := sizes[RegionOrder]
	tc.byMask = map[Key][]*class{}
	tc.slots = make([]*class, nslots)
	tc.freeSlots, tc.slotTop, tc.order = tc.freeSlots[:0], 0, tc.order[:0]
	tc.ent = newBlockAlloc(sizes[RegionEntries] / tc.unit)
	tc.blm = newBlockAlloc(sizes[RegionBloom] / bloomUnitWord)
	if !tc.merge { // merged classes do not follow masks: they grow as they fill
		tc.hint = maps(counts)
		defer func() { tc.hint = nil }()
	}
	writeHeader(tc.m, tc.cfg.Algo, tc.proj, tc.k, tc.e, tc.d)
	for i, s := range tc.seeds {
		tc.m.Set(RegionSeeds, uint32(2*i), uint32(s))
		tc.m.Set(RegionSeeds, uint32(2*i+1), uint32(s>>32))
	}
	for _, d := range ds {
		d.cls = nil
		if err := tc.insert(d); err != nil {
			return err
		}
	}
	return nil
}

func maps(m map[Key]int) map[Key]int {
	c := make(map[Key]int, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

func (tc *tuple) stats(s *Stats) {
	s.Classes = len(tc.order)
	for _, c := range tc.order {
		s.Entries += len(c.members)
		s.MaxClassEntries = max(s.MaxClassEntries, len(c.members))
		if tc.bloom {
			s.BloomBits += 1 << c.logBits
		}
	}
	s.Rehashes, s.Grows, s.Splits, s.Kicks = tc.rehashes, tc.grows, tc.splits, tc.kicks
}
