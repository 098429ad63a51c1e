package flow

import "github.com/gswitch/gswitch/tables/bubble"

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
	LayoutVersion = 1
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
	descFixed   = 7
)

// Entry words after the P key words (tuple, bloom, merge); linear slots are
// [priority, id, value P words, mask P words]. A merge entry holds its
// rule's value in the P key words and its rule's mask in the P words after
// EntMask.
const (
	EntID    = 0
	EntPrio  = 1
	entFixed = 2
	EntMask  = 2 // merge: first mask word, after the P value words
)

// maxEntryWords bounds EntryWordsFor.
const maxEntryWords = 2*KeyWords + entFixed

// EmptyID marks an empty cuckoo entry or linear slot.
const EmptyID = uint32(NoMatch)

// Bloom filter sizes.
const (
	minLogBits    = 9 // 512 bits
	maxLogBits    = 31
	bloomUnitLog  = 9 // allocation unit: 512 bits = 16 words
	bloomUnitWord = 16
	bitsPerEntry  = 16
)

// EntryWords returns the words of one cuckoo entry for P projected words
// (tuple, bloom).
func EntryWords(p int) int { return p + entFixed }

// EntryWordsFor returns the words of one cuckoo entry of algorithm a for P
// projected words: P+2 (tuple, bloom) or 2P+2 (merge: value, id, priority,
// mask).
func EntryWordsFor(a Algo, p int) int {
	if a == Merge {
		return 2*p + entFixed
	}
	return EntryWords(p)
}

// ClassWords returns the words of one class descriptor for P projected words.
func ClassWords(p int) int { return p + descFixed }

// SlotWords returns the words of one linear slot for P projected words.
func SlotWords(p int) int { return 2 + 2*p }

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
