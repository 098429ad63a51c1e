package flow

import (
	"fmt"

	"github.com/gswitch/gswitch/tables/bubble"
)

// View answers lookups from a device image: the table's own, or a mirror of
// it kept current by bubbles. It is what a GPU kernel computes, on the CPU.
//
// NewView validates every word it reads, so a corrupt image gives an error.
// A View reads the header's counts, the descriptors, the order, the entries
// and the Bloom bits in place, so it sees bubbles applied to its image
// afterwards; the projection and the hash seeds, which only change with the
// generation, it reads once. Lookups check every offset they follow, so an
// image corrupted after NewView gives wrong answers, never a panic. Build a
// new View when a full image (a new generation) arrives.
type View struct {
	algo  Algo
	p     int
	proj  [KeyWords]int
	hdr   []uint32
	k     int
	coef  []coefs  // per hash function
	desc  []uint32 // classes
	order []uint32
	ent   []uint32
	bloom []uint32
	dw    int // words per descriptor
	ew    int // words per entry or slot
	nslot int // class slots (tuple, bloom) or rule slots (linear)
}

// NewView checks an image and returns a view of it.
func NewView(im *bubble.Image) (*View, error) {
	if im == nil || len(im.Words) != int(numRegions) {
		return nil, fmt.Errorf("flow: image has %d regions, want %d", regionCount(im), numRegions)
	}
	h := im.Words[RegionHeader]
	if len(h) < HeaderWords {
		return nil, fmt.Errorf("flow: header of %d words, want %d", len(h), HeaderWords)
	}
	if h[HdrMagic] != LayoutMagic || h[HdrVersion] != LayoutVersion {
		return nil, fmt.Errorf("flow: not a flow table image (magic %#x, version %d)", h[HdrMagic], h[HdrVersion])
	}
	v := &View{hdr: h, algo: Algo(h[HdrAlgo])}
	if v.algo > Merge {
		return nil, fmt.Errorf("flow: unknown algorithm %d", h[HdrAlgo])
	}
	if h[HdrP] > KeyWords {
		return nil, fmt.Errorf("flow: projection of %d words", h[HdrP])
	}
	v.p = int(h[HdrP])
	for i := 0; i < v.p; i++ {
		w := h[HdrProj+i]
		if w >= KeyWords || (i > 0 && int(w) <= v.proj[i-1]) {
			return nil, fmt.Errorf("flow: projection word %d is %d: not ascending key word indices", i, w)
		}
		v.proj[i] = int(w)
	}
	v.ent = im.Words[RegionEntries]
	var err error
	if v.algo == Linear {
		err = v.checkLinear()
	} else {
		err = v.checkTuple(im)
	}
	if err != nil {
		return nil, err
	}
	return v, nil
}

func regionCount(im *bubble.Image) int {
	if im == nil {
		return 0
	}
	return len(im.Words)
}

func (v *View) checkLinear() error {
	v.ew = SlotWords(v.p)
	if int(v.hdr[HdrEntry]) != v.ew || len(v.ent)%v.ew != 0 {
		return fmt.Errorf("flow: linear slots of %d words in a region of %d, want %d-word slots", v.hdr[HdrEntry], len(v.ent), v.ew)
	}
	v.nslot = len(v.ent) / v.ew
	if int64(v.hdr[HdrCount]) > int64(v.nslot) {
		return fmt.Errorf("flow: high-water mark %d beyond %d slots", v.hdr[HdrCount], v.nslot)
	}
	return nil
}

func (v *View) checkTuple(im *bubble.Image) error {
	h := v.hdr
	v.ew, v.dw = EntryWordsFor(v.algo, v.p), ClassWords(v.p)
	if int(h[HdrEntry]) != v.ew || int(h[HdrClass]) != v.dw {
		return fmt.Errorf("flow: entries of %d words and descriptors of %d, want %d and %d", h[HdrEntry], h[HdrClass], v.ew, v.dw)
	}
	if h[HdrFamily] < 1 || h[HdrFamily] > MaxFamilies {
		return fmt.Errorf("flow: %d hash families", h[HdrFamily])
	}
	v.k = int(h[HdrFamily])
	seeds := im.Words[RegionSeeds]
	if len(seeds) != seedWords(v.k) {
		return fmt.Errorf("flow: seeds region of %d words, want %d", len(seeds), seedWords(v.k))
	}
	v.coef = make([]coefs, v.k*HashFuncs)
	for i := range v.coef {
		for j := 0; j < HashCoefs; j++ {
			o := 2 * (i*HashCoefs + j)
			v.coef[i][j] = uint64(seeds[o]) | uint64(seeds[o+1])<<32
		}
	}
	v.desc, v.order, v.bloom = im.Words[RegionClasses], im.Words[RegionOrder], im.Words[RegionBloom]
	if len(v.desc)%v.dw != 0 || len(v.desc)/v.dw != len(v.order) {
		return fmt.Errorf("flow: %d descriptor words for %d order slots", len(v.desc), len(v.order))
	}
	v.nslot = len(v.order)
	n := h[HdrCount]
	if int64(n) > int64(len(v.order)) {
		return fmt.Errorf("flow: %d classes in an order of %d", n, len(v.order))
	}
	for i := 0; i < int(n); i++ {
		if err := v.checkClass(i); err != nil {
			return err
		}
	}
	return nil
}

// checkClass validates the descriptor at order position i.
func (v *View) checkClass(i int) error {
	slot := v.order[i]
	if int64(slot) >= int64(v.nslot) {
		return fmt.Errorf("flow: order %d names class slot %d of %d", i, slot, v.nslot)
	}
	d := v.desc[int(slot)*v.dw+v.p:]
	if _, ok := v.table(d); !ok {
		return fmt.Errorf("flow: class slot %d: family %d, table at %d of 2^%d buckets: outside the image", slot, d[DescFamily], d[DescTable], d[DescLogB])
	}
	if v.algo.filtered() {
		if _, ok := v.filter(d); !ok {
			return fmt.Errorf("flow: class slot %d: Bloom filter at %d of 2^%d bits: outside the image", slot, d[DescBloom], d[DescLogBits])
		}
	}
	return nil
}

// table returns a class's cuckoo table, checking the descriptor words after
// the mask (d) against the image.
func (v *View) table(d []uint32) ([]uint32, bool) {
	if d[DescFamily] >= uint32(v.k) || d[DescLogB] > MaxLogB {
		return nil, false
	}
	off, size := uint64(d[DescTable]), uint64(CuckooWays*v.ew)<<d[DescLogB]
	if off+size > uint64(len(v.ent)) {
		return nil, false
	}
	return v.ent[off : off+size], true
}

// filter returns a class's Bloom filter words.
func (v *View) filter(d []uint32) ([]uint32, bool) {
	lb := d[DescLogBits]
	if lb < 5 || lb > MaxLogBits {
		return nil, false
	}
	off, size := uint64(d[DescBloom]), uint64(1)<<(lb-5)
	if off+size > uint64(len(v.bloom)) {
		return nil, false
	}
	return v.bloom[off : off+size], true
}

// Algo returns the image's algorithm.
func (v *View) Algo() Algo { return v.algo }

// Words returns the projection: the key words a projected key holds, in order.
func (v *View) Words() []int { return append([]int(nil), v.proj[:v.p]...) }

// Lookup returns the best entry matching the projected key pk (the key words
// of Words, in order) and its rank; NoMatch and 0 if none matches or pk is
// shorter than the projection.
func (v *View) Lookup(pk []uint32) (RuleID, uint64) {
	if len(pk) < v.p {
		return NoMatch, 0
	}
	var rank uint64
	if v.algo == Linear {
		rank = v.linear(pk[:v.p])
	} else {
		rank = v.tuple(pk[:v.p], nil)
	}
	if rank == 0 {
		return NoMatch, 0
	}
	return RankID(rank), rank
}

// MatchAll appends to dst the id of every entry matching pk, in image order
// (not by rank), and returns it.
func (v *View) MatchAll(pk []uint32, dst []RuleID) []RuleID {
	if len(pk) < v.p {
		return dst
	}
	if v.algo == Linear {
		return v.linearAll(pk[:v.p], dst)
	}
	v.tuple(pk[:v.p], &dst)
	return dst
}

// LookupBatchSoA looks up n packets whose projected keys are in soa in SoA
// order (word j of packet i at soa[j*n+i], see PackSoA) into out[0:n].
func (v *View) LookupBatchSoA(soa []uint32, n int, out []RuleID) error {
	return v.LookupBatchSoAStride(soa, n, n, out)
}

// LookupBatchSoAStride is LookupBatchSoA over keys whose columns are stride
// words apart (word j of packet i at soa[j*stride+i], stride >= n): a batch
// buffer of some capacity that holds only n packets.
// A key equal to the one before it takes that key's answer (see below).
func (v *View) LookupBatchSoAStride(soa []uint32, n, stride int, out []RuleID) error {
	return v.lookupBatch(soa, n, stride, out, true)
}

// LookupBatchSoAEach is LookupBatchSoAStride with a search for every key,
// equal to the one before it or not: the cost of a key as a calibration
// times it, from a sample (rules' masked values) whose keys may repeat
// where traffic's would not.
func (v *View) LookupBatchSoAEach(soa []uint32, n, stride int, out []RuleID) error {
	return v.lookupBatch(soa, n, stride, out, false)
}

// lookupBatch is LookupBatchSoAStride; runs: a run of equal keys is
// searched once.
func (v *View) lookupBatch(soa []uint32, n, stride int, out []RuleID, runs bool) error {
	need := int64(0)
	if v.p > 0 {
		need = int64(v.p-1)*int64(stride) + int64(n)
	}
	if n < 0 || stride < n || len(out) < n || int64(len(soa)) < need {
		return fmt.Errorf("flow: batch of %d packets (stride %d) needs %d key words and %d results, got %d and %d", n, stride, need, n, len(soa), len(out))
	}
	var (
		pk      [chunk][KeyWords]uint32
		rep     [chunk]uint8 // packet i of the chunk has the answer of distinct key rep[i] (sameAsLast: of last)
		res     [chunk]RuleID
		last    [KeyWords]uint32 // the last distinct key looked up, lastID its answer
		lastID  RuleID
		hasLast bool
	)
	p := v.p
	for lo := 0; lo < n; lo += chunk {
		m := min(chunk, n-lo)
		for j := 0; j < p; j++ {
			col := soa[j*stride+lo : j*stride+lo+m]
			for i, x := range col {
				pk[i][j] = x
			}
		}
		// A key equal to the one before it takes that key's answer
		// instead of a search of its own: a batch of one flow, or a table
		// whose few fields most packets share (in_port), is searched once
		// per run of equal keys. The distinct keys move to the front.
		u := 0
		for i := 0; i < m; i++ {
			switch {
			case runs && u > 0 && sameKey(&pk[i], &pk[u-1], p):
				rep[i] = uint8(u - 1)
			case runs && u == 0 && hasLast && sameKey(&pk[i], &last, p):
				rep[i] = sameAsLast
			default:
				if u != i {
					copy(pk[u][:p], pk[i][:p])
				}
				rep[i] = uint8(u)
				u++
			}
		}
		if u > 0 {
			v.lookupChunk(&pk, u, res[:u])
		}
		for i, r := range rep[:m] {
			if r == sameAsLast {
				out[lo+i] = lastID
			} else {
				out[lo+i] = res[r]
			}
		}
		if u > 0 {
			copy(last[:p], pk[u-1][:p])
			lastID, hasLast = res[u-1], true
		}
	}
	return nil
}

// sameAsLast marks a packet of a chunk whose key is the last distinct key
// of the chunk before (LookupBatchSoAStride).
const sameAsLast = chunk

// sameKey reports whether the first p words of two projected keys are
// equal (words beyond p are not part of the key).
func sameKey(a, b *[KeyWords]uint32, p int) bool {
	for j := 0; j < p; j++ {
		if a[j] != b[j] {
			return false
		}
	}
	return true
}

// linear scans the slots below the high-water mark.
func (v *View) linear(pk []uint32) uint64 {
	n := min(int(v.hdr[HdrCount]), v.nslot)
	p, s := v.p, v.ew
	slots := v.ent[:n*s]
	var best uint64
	for off := 0; off+s <= len(slots); off += s {
		sl := slots[off : off+s]
		id := sl[1]
		if id == EmptyID {
			continue
		}
		rank := uint64(sl[0])<<32 | uint64(^id)
		if rank <= best {
			continue
		}
		if slotMatches(sl, p, pk) {
			best = rank
		}
	}
	return best
}

// slotMatches reports whether the projected key pk matches a linear slot
// [priority, id, value p words, mask p words].
func slotMatches(sl []uint32, p int, pk []uint32) bool {
	val, msk := sl[2:2+p], sl[2+p:2+2*p]
	for j, x := range pk {
		if x&msk[j] != val[j] {
			return false
		}
	}
	return true
}

func (v *View) linearAll(pk []uint32, dst []RuleID) []RuleID {
	n := min(int(v.hdr[HdrCount]), v.nslot)
	p, s := v.p, v.ew
	for off := 0; off+s <= n*s; off += s {
		sl := v.ent[off : off+s]
		if sl[1] == EmptyID {
			continue
		}
		if slotMatches(sl, p, pk) {
			dst = append(dst, RuleID(sl[1]))
		}
	}
	return dst
}

// tuple searches the classes in descending max priority, stopping when the
// best rank found beats every remaining class; with all != nil it visits
// every class and appends every match instead.
//
// Per class: the key is masked with the class mask (P words), hashed by the
// class's family (over all P words: words outside the mask are 0 and add
// nothing), tested against the Bloom filter (bloom), and the three candidate
// entries compared on all P words (an entry's words outside its mask are 0).
// A merged class's entries are each compared under their own mask, and
// every one that matches counts.
func (v *View) tuple(pk []uint32, all *[]RuleID) uint64 {
	n := min(int(v.hdr[HdrCount]), len(v.order))
	p, ew, dw := v.p, v.ew, v.dw
	var best uint64
	var mk [KeyWords]uint32
	for i := 0; i < n; i++ {
		slot := int(v.order[i])
		if slot >= v.nslot {
			continue
		}
		desc := v.desc[slot*dw : slot*dw+dw]
		d := desc[p:]
		if all == nil && best>>32 > uint64(d[DescMaxPrio]) {
			break
		}
		if !preHas(d, PreBucket(d[DescSel], pk[:p])) {
			continue
		}
		mask := desc[:p]
		key := mk[:len(mask)]
		pk := pk[:len(mask)]
		for j, m := range mask {
			key[j] = pk[j] & m
		}
		fam := int(d[DescFamily])
		if fam >= v.k {
			continue
		}
		fn := v.coef[fam*HashFuncs : fam*HashFuncs+HashFuncs]
		if v.algo.filtered() {
			f, ok := v.filter(d)
			if !ok {
				continue
			}
			sh := 64 - uint(d[DescLogBits])
			b1, b2 := hash2(&fn[bloomFunc0], &fn[bloomFunc0+1], key)
			b1, b2 = b1>>sh, b2>>sh
			if f[b1>>5]&(1<<(b1&31)) == 0 || f[b2>>5]&(1<<(b2&31)) == 0 {
				continue
			}
		}
		tbl, ok := v.table(d)
		if !ok {
			continue
		}
		// The three candidate buckets are computed first and their ids
		// loaded together, so that their cache misses overlap.
		logB := uint(d[DescLogB])
		sh := 64 - logB
		h0, h1, h2 := hash3(&fn[0], &fn[1], &fn[2], key)
		sz := 1 << logB
		p0 := int(h0>>sh) * ew
		p1 := (sz + int(h1>>sh)) * ew
		p2 := (2*sz + int(h2>>sh)) * ew
		id0, id1, id2 := tbl[p0+p+EntID], tbl[p1+p+EntID], tbl[p2+p+EntID]
		if v.algo == Merge {
			// Any of the three may match, each under its own mask.
			for _, e := range [3][]uint32{tbl[p0 : p0+ew], tbl[p1 : p1+ew], tbl[p2 : p2+ew]} {
				id := e[p+EntID]
				if id == EmptyID || !mergeMatches(e, p, pk) {
					continue
				}
				if all != nil {
					*all = append(*all, RuleID(id))
				} else if r := uint64(e[p+EntPrio])<<32 | uint64(^id); r > best {
					best = r
				}
			}
			continue
		}
		hit := -1
		switch {
		case id0 != EmptyID && keyEq(tbl[p0:p0+p], key):
			hit = p0
		case id1 != EmptyID && keyEq(tbl[p1:p1+p], key):
			hit = p1
		case id2 != EmptyID && keyEq(tbl[p2:p2+p], key):
			hit = p2
		}
		if hit < 0 {
			continue
		}
		e := tbl[hit : hit+ew]
		id := e[p+EntID]
		if all != nil {
			*all = append(*all, RuleID(id))
		} else if r := uint64(e[p+EntPrio])<<32 | uint64(^id); r > best {
			best = r
		}
	}
	return best
}

// coefs is one hash function's coefficients, padded to a power of two so
// that indexing needs no bounds check.
type coefs [32]uint64

// mergeMatches reports whether the projected key pk matches a merge entry
// [value p words, id, priority, mask p words].
func mergeMatches(e []uint32, p int, pk []uint32) bool {
	val, msk := e[:p], e[p+EntMask:p+EntMask+p]
	for j, x := range pk[:p] {
		if x&msk[j] != val[j] {
			return false
		}
	}
	return true
}

func keyEq(e, key []uint32) bool {
	e = e[:len(key)]
	for j, x := range key {
		if e[j] != x {
			return false
		}
	}
	return true
}

// hash3 computes the three cuckoo hashes h(x) = a[0] + Σ a[1+i]·x[i].
func hash3(a0, a1, a2 *coefs, x []uint32) (h0, h1, h2 uint64) {
	h0, h1, h2 = a0[0], a1[0], a2[0]
	for i, w := range x {
		j, y := (i+1)&31, uint64(w)
		h0 += a0[j] * y
		h1 += a1[j] * y
		h2 += a2[j] * y
	}
	return
}

// hash2 computes the two Bloom filter hashes.
func hash2(a0, a1 *coefs, x []uint32) (h0, h1 uint64) {
	h0, h1 = a0[0], a1[0]
	for i, w := range x {
		j, y := (i+1)&31, uint64(w)
		h0 += a0[j] * y
		h1 += a1[j] * y
	}
	return
}
