package flow

import (
	"fmt"
	"strings"
)

// Rule is one flow entry as the classifier sees it.
type Rule struct {
	Match    Match
	Priority uint16
	Cookie   uint64
	// Action is an opaque reference to the entry's instructions, which the
	// CPU keeps (GSwitch keeps actions off the GPU).
	Action uint32
}

// RuleID identifies a rule in a Table. Ids are dense (the lowest free id is
// given out first) so that they index CPU-side arrays and GPU results.
type RuleID uint32

// NoMatch is the RuleID of "no rule": no rule matched, or an empty slot of an
// image.
const NoMatch RuleID = ^RuleID(0)

// Entry is a rule with its id, as Delete returns them.
type Entry struct {
	ID   RuleID
	Rule Rule
}

// Rank orders rules: higher priority wins and, among equal priorities, the
// lower id. Ranks compare as integers, so a GPU resolves a lookup with one
// 64-bit atomicMax; rank 0 is "no rule".
func Rank(prio uint16, id RuleID) uint64 {
	return uint64(prio)<<32 | uint64(^uint32(id))
}

// RankID returns the RuleID encoded in a rank (NoMatch for rank 0).
func RankID(rank uint64) RuleID { return RuleID(^uint32(rank)) }

// Algo selects a classifier.
type Algo uint8

// The classifiers (GSwitch §4).
const (
	// Linear scans every rule slot.
	Linear Algo = iota
	// Tuple is tuple-space search: a cuckoo hash table per mask class.
	Tuple
	// Bloom is tuple-space search with a Bloom filter in front of each class.
	Bloom
	// Merge is tuple-space search over merged classes (TupleMerge): a class's
	// hash covers a coarser mask than its rules', each entry carries its
	// rule's own mask, so a few classes hold what tuple search spreads over
	// hundreds.
	Merge
)

// filtered reports whether the algorithm's classes have Bloom filters:
// Bloom, and Merge (a filter over each merged class's class keys).
func (a Algo) filtered() bool { return a == Bloom || a == Merge }

var algoNames = []string{"linear", "tuple", "bloom", "merge"}

// String returns "linear", "tuple", "bloom" or "merge".
func (a Algo) String() string {
	if int(a) < len(algoNames) {
		return algoNames[a]
	}
	return fmt.Sprintf("algo%d", uint8(a))
}

// ParseAlgo reads an Algo's name (case-insensitive).
func ParseAlgo(s string) (Algo, error) {
	for i, n := range algoNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Algo(i), nil
		}
	}
	return 0, fmt.Errorf("unknown classifier %q (want linear, tuple, bloom or merge)", s)
}

// Config configures a Table.
type Config struct {
	Algo Algo
	// MaxEntries bounds the number of rules (0: 1<<20; at most 1<<24).
	MaxEntries int
	// ClassCapacity bounds the distinct matches in one class's cuckoo table;
	// a mask with more is split over several classes (0: 1<<16).
	ClassCapacity int
	// Seed seeds the hash families and the cuckoo walks.
	Seed uint64

	// Tuning knobs for tests (zero: the defaults).
	minLogB    int // log2 buckets of a new class's subtables
	maxKicks   int // cuckoo kicks before an insertion fails
	families   int // hash families in the seeds region
	minUnits   int // minimum entry units / class slots / linear slots of an image
	fillFactor float64
}

// Default sizes.
const (
	DefaultMaxEntries    = 1 << 20
	DefaultClassCapacity = 1 << 16
	maxMaxEntries        = 1 << 24
	defaultFamilies      = 8
	defaultMaxKicks      = 500
	defaultMinLogB       = 2
	defaultMinUnits      = 64
	defaultFill          = 0.9
)

func (c *Config) normalize() error {
	if c.Algo > Merge {
		return fmt.Errorf("%w: unknown algorithm %d", ErrBadConfig, c.Algo)
	}
	if c.MaxEntries == 0 {
		c.MaxEntries = DefaultMaxEntries
	}
	if c.MaxEntries < 0 || c.MaxEntries > maxMaxEntries {
		return fmt.Errorf("%w: MaxEntries %d not in 1..%d", ErrBadConfig, c.MaxEntries, maxMaxEntries)
	}
	if c.ClassCapacity == 0 {
		c.ClassCapacity = DefaultClassCapacity
	}
	if c.ClassCapacity < 1 || c.ClassCapacity > maxMaxEntries {
		return fmt.Errorf("%w: ClassCapacity %d not in 1..%d", ErrBadConfig, c.ClassCapacity, maxMaxEntries)
	}
	if c.minLogB <= 0 {
		c.minLogB = defaultMinLogB
	}
	if c.maxKicks <= 0 {
		c.maxKicks = defaultMaxKicks
	}
	if c.families <= 0 || c.families > MaxFamilies {
		c.families = defaultFamilies
	}
	if c.minUnits <= 0 {
		c.minUnits = defaultMinUnits
	}
	if c.fillFactor <= 0 || c.fillFactor > 1 {
		c.fillFactor = defaultFill
	}
	return nil
}

// AddFlags modify Add.
type AddFlags uint8

const (
	// CheckOverlap rejects the rule (ErrOverlap) when a rule of the same
	// priority overlaps it (OFPFF_CHECK_OVERLAP). An identical match counts
	// as overlapping, as in Open vSwitch.
	CheckOverlap AddFlags = 1 << iota
)

// Selector chooses the rules a Modify or Delete applies to (OpenFlow 1.3
// §6.4).
type Selector struct {
	// Match and Priority: with Strict, rules with an identical match and
	// priority; otherwise every rule whose match Match covers (all packets
	// that match the rule match Match), any priority.
	Match    Match
	Priority uint16
	Strict   bool
	// Cookie and CookieMask: only rules with
	// rule.Cookie&CookieMask == Cookie&CookieMask.
	Cookie, CookieMask uint64
	// Filter, when not nil, must also accept the rule (e.g. out_port).
	Filter func(RuleID, *Rule) bool
}

// Stats describes a Table.
type Stats struct {
	Algo  Algo
	Rules int // rules in the table
	// Matches is the number of distinct matches: the entries of the image
	// (rules with an identical match at other priorities hang in a CPU-side
	// chain behind the best one).
	Matches int
	Masks   int // distinct masks
	// Classes is the number of cuckoo classes in the image (several share a
	// mask after a split); 0 for linear search.
	Classes         int
	Entries         int // entries in the image
	MaxClassEntries int // the largest class
	ProjectedWords  int // key words in the image's projection
	ImageBytes      int
	BytesPerRule    float64
	BloomBits       int    // all classes' Bloom filter bits
	Generation      uint64 // image generation (one per rebuild)
	Rehashes        uint64 // class tables re-hashed with another family
	Grows           uint64 // class tables doubled
	Splits          uint64 // classes opened for a mask that already had one
	Rebuilds        uint64 // whole images rebuilt off-line
	Kicks           uint64 // cuckoo evictions
	Writes          uint64 // image words changed through the mirror
}
