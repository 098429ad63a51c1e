package flow

import (
	"math/bits"

	"github.com/gswitch/gswitch/tables/bubble"
)

// The regions of a flow table's device image. Every algorithm has the same
// six; the ones it does not use are empty.
const (
	// RegionHeader holds HeaderWords words (Hdr* offsets).
	RegionHeader bubble.Region = iota
	// RegionSeeds holds the hash families: Families × HashFuncs ×
	// HashCoefs 64-bit coefficients, each as two words (low, high).
	RegionSeeds
	// RegionClasses holds class descriptors of ClassWords(P) words, indexed
	// by class slot.
	RegionClasses
	// RegionOrder holds class slots in descending max priority; the header's
	// HdrCount says how many are in use. It has one word per class slot.
	RegionOrder
	// RegionEntries holds the cuckoo tables of the classes (tuple, bloom) or
	// the rule slots (linear).
	RegionEntries
	// RegionBloom holds the classes' Bloom filter bits (bloom).
	RegionBloom
	numRegions
)

var regionNames = []string{"header", "seeds", "classes", "order", "entries", "bloom"}

// Header words.
const (
	HdrMagic   = 0                  // LayoutMagic
	HdrVersion = 1                  // LayoutVersion
	HdrAlgo    = 2                  // Algo
	HdrP       = 3                  // P: projected key words
	HdrProj    = 4                  // KeyWords words: the projection (key word indices, ascending; the first P are used, the rest 0)
	HdrFamily  = HdrProj + KeyWords // hash families in the seeds region (tuple, bloom)
	HdrCount   = HdrFamily + 1      // linear: slot high-water mark; tuple, bloom: classes in the order region
	HdrEntry   = HdrCount + 1       // words per entry (tuple, bloom: EntryWords(P)) or per slot (linear: SlotWords(P))
	HdrClass   = HdrEntry + 1       // words per class descriptor (tuple, bloom: ClassWords(P))

	HeaderWords = HdrClass + 1
)

// Layout identification.
const (
	LayoutMagic   = 0x4753464c // "GSFL"
	LayoutVersion = 2
)

// Hashing: each family has HashFuncs functions (three for the cuckoo
// subtables, two for the Bloom filter), each with HashCoefs coefficients:
// h(x) = (a[0] + Σ a[1+i]·x[i]) mod 2^64 over the P projected (masked) key
// words x; a table of 2^b buckets uses h >> (64-b).
const (
	HashFuncs   = 5
	HashCoefs   = KeyWords + 1
	CuckooWays  = 3
	MaxFamilies = 64
	bloomFunc0  = CuckooWays
)

// Class descriptor words after the P mask words.
const (
	DescFamily  = 0 // hash family
	DescTable   = 1 // word offset of the cuckoo table in RegionEntries
	DescLogB    = 2 // log2 buckets per subtable
	DescMaxPrio = 3 // highest priority among the class's entries
	DescCount   = 4 // entries in the class
	DescBloom   = 5 // word offset of the Bloom filter in RegionBloom (bloom)
	DescLogBits = 6 // log2 Bloom filter bits (bloom)
	DescSel     = 7 // the prefilter's selector (PreSelector)
	DescPre     = 8 // PreWords words: the prefilter's bitmap, bit PreBucket(sel, value) set for each entry
	DescFixed   = DescPre + PreWords

	// MaxLogB bounds a class's DescLogB: larger is a corrupt descriptor,
	// whose class the lookups skip.
	MaxLogB = 30
)

// The prefilter: a class's descriptor holds a bitmap of PreBuckets bits,
// one for each value of 8 bits of the key that its selector picks within
// the class mask (two nibbles, each of one projected key word), set where
// an entry of the class has that value. A packet whose bucket's bit is
// clear matches nothing in the class, and the lookup skips the class
// before it hashes the key for the Bloom filter or the probe: the same
// answers for a few instructions. On ClassBench acl1's 100 merged
// classes, a packet's walk does the Bloom test on 6.8 classes instead of
// 25.9.
const (
	PreBuckets = 256
	PreWords   = PreBuckets / 32
)

// PreSelector returns the prefilter selector of a class of projected mask
// cm: bits 0-4 word w0, 5-9 shift s0, 10-13 nibble mask m0, 14-18 word w1,
// 19-23 shift s1, 24-27 nibble mask m1. The nibbles are the lowest four
// bits of the class mask in the two words it has most bits in (the last
// bits of a prefix, or the low bits of an exact field, vary the most among
// rules); with one such word, its next four bits.
func PreSelector(cm []uint32) uint32 {
	w0, w1 := -1, -1
	for w, m := range cm {
		n := bits.OnesCount32(m)
		switch {
		case n == 0:
		case w0 < 0 || n > bits.OnesCount32(cm[w0]):
			w0, w1 = w, w0
		case w1 < 0 || n > bits.OnesCount32(cm[w1]):
			w1 = w
		}
	}
	if w0 < 0 {
		return 0
	}
	s0 := uint32(bits.TrailingZeros32(cm[w0]))
	m0 := cm[w0] >> s0 & 15
	var s1, m1 uint32
	if w1 >= 0 {
		s1 = uint32(bits.TrailingZeros32(cm[w1]))
		m1 = cm[w1] >> s1 & 15
	} else if s0+4 < 32 {
		w1, s1 = w0, s0+4
		m1 = cm[w0] >> s1 & 15
	} else {
		w1 = w0
	}
	return uint32(w0) | s0<<5 | m0<<10 | uint32(w1)<<14 | s1<<19 | m1<<24
}

// PreBucket returns the prefilter bucket of projected key k under selector
// sel (a word at or past len(k) reads as 0).
func PreBucket(sel uint32, k []uint32) int {
	w0, s0, m0 := sel&31, sel>>5&31, sel>>10&15
	w1, s1, m1 := sel>>14&31, sel>>19&31, sel>>24&15
	var x0, x1 uint32
	if int(w0) < len(k) {
		x0 = k[w0]
	}
	if int(w1) < len(k) {
		x1 = k[w1]
	}
	return int(x0>>s0&m0 | (x1>>s1&m1)<<4)
}

// preHas reports whether descriptor tail d (the words after the mask)
// has bucket b's bit set.
func preHas(d []uint32, b int) bool { return d[DescPre+b>>5]&(1<<(b&31)) != 0 }

// Entry words after the P key words (tuple, bloom, merge); linear slots are
// [priority, id, value P words, mask P words]. A merge entry holds its
// rule's value in the P key words and its rule's mask in the P words after
// EntMask.
const (
	EntID    = 0
	EntPrio  = 1
	EntFixed = 2
	EntMask  = 2 // merge: first mask word, after the P value words
)

// Linear slot words: the priority, the id (EmptyID: an empty slot), then P
// value words from SlotValue and P mask words after them.
const (
	SlotPrio  = 0
	SlotID    = 1
	SlotValue = 2
	SlotFixed = 2
)

// maxEntryWords bounds EntryWordsFor.
const maxEntryWords = 2*KeyWords + EntFixed

// EmptyID marks an empty cuckoo entry or linear slot.
const EmptyID = uint32(NoMatch)

// Bloom filter sizes.
const (
	minLogBits    = 9  // 512 bits
	MaxLogBits    = 31 // larger is a corrupt descriptor (DescLogBits), whose class the lookups skip
	bloomUnitLog  = 9  // allocation unit: 512 bits = 16 words
	bloomUnitWord = 16
	bitsPerEntry  = 16
)

// EntryWords returns the words of one cuckoo entry for P projected words
// (tuple, bloom).
func EntryWords(p int) int { return p + EntFixed }

// EntryWordsFor returns the words of one cuckoo entry of algorithm a for P
// projected words: P+2 (tuple, bloom) or 2P+2 (merge: value, id, priority,
// mask).
func EntryWordsFor(a Algo, p int) int {
	if a == Merge {
		return 2*p + EntFixed
	}
	return EntryWords(p)
}

// ClassWords returns the words of one class descriptor for P projected words.
func ClassWords(p int) int { return p + DescFixed }

// SlotWords returns the words of one linear slot for P projected words.
func SlotWords(p int) int { return SlotFixed + 2*p }

// seedWords returns the size of the seeds region for k families.
func seedWords(k int) int { return k * HashFuncs * HashCoefs * 2 }

// coefIndex returns the index of a coefficient in a []uint64 of all seeds.
func coefIndex(family, fn int) int { return (family*HashFuncs + fn) * HashCoefs }

// writeHeader writes the header common to all algorithms.
func writeHeader(m *bubble.Mirror, a Algo, proj []int, families, entryWords, classWords int) {
	m.Set(RegionHeader, HdrMagic, LayoutMagic)
	m.Set(RegionHeader, HdrVersion, LayoutVersion)
	m.Set(RegionHeader, HdrAlgo, uint32(a))
	m.Set(RegionHeader, HdrP, uint32(len(proj)))
	for i := 0; i < KeyWords; i++ {
		v := uint32(0)
		if i < len(proj) {
			v = uint32(proj[i])
		}
		m.Set(RegionHeader, uint32(HdrProj+i), v)
	}
	m.Set(RegionHeader, HdrFamily, uint32(families))
	m.Set(RegionHeader, HdrEntry, uint32(entryWords))
	m.Set(RegionHeader, HdrClass, uint32(classWords))
}

// newImage returns an empty image with the six regions sized.
func newImage(sizes [numRegions]int) *bubble.Image {
	return bubble.NewImage(regionNames, sizes[:])
}

// projectKey writes the projected words of k into dst (len(proj) words).
func projectKey(k *Key, proj []int, dst []uint32) {
	for i, w := range proj {
		dst[i] = k[w]
	}
}
