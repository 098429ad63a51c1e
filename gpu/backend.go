package gpu

import (
	"errors"
	"fmt"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
)

// TableID names one table loaded into a backend.
type TableID uint32

// Kind says what a table's image encodes and so which lookups it answers.
type Kind uint8

// The kinds of table a backend can hold.
const (
	LPM4 Kind = iota + 1 // GAMT image of IPv4 routes (package lpm)
	LPM6                 // GAMT image of IPv6 routes, full 128-bit prefixes
	Flow                 // flow table image (package flow): linear, tuple or Bloom search
)

func (k Kind) String() string {
	switch k {
	case LPM4:
		return "lpm4"
	case LPM6:
		return "lpm6"
	case Flow:
		return "flow"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Backend holds tables mirrored as bubble images and answers lookups on them.
//
// Load installs a table's image (the backend keeps its own copy). Apply brings
// a table up to date with one bubble.Update: a whole image of a new
// generation, or bubbles of the current one; it is all-or-nothing (a bad
// Update returns an error and changes nothing) and every lookup that starts
// after Apply returns sees all of it. The lookups write out[i] for each
// addrs[i]; out must be at least as long as addrs.
//
// Implementations are safe for concurrent use.
type Backend interface {
	Name() string
	Device() string
	Load(table TableID, kind Kind, im *bubble.Image) error
	Apply(table TableID, u bubble.Update) error
	LookupLPM4(table TableID, addrs []uint32, out []uint32) error
	LookupLPM6(table TableID, addrs []lpm.Addr6, out []uint32) error
	// LookupFlow classifies n packets whose projected keys are in soa in
	// structure-of-arrays order (flow.PackSoA over the projection of the
	// table's image: P words per packet, word j of packet i at soa[j*n+i])
	// into out[0:n]: the best rule's id, flow.NoMatch if none.
	LookupFlow(table TableID, soa []uint32, n int, out []flow.RuleID) error
	// NewBatch allocates a batch of capacity keys of width words for
	// tables of kind (see Batch), in memory the backend chooses.
	NewBatch(kind Kind, width, capacity int) (*Batch, error)
	// Submit starts the lookup of b's N keys in table id; b.Wait waits for
	// it. b must come from this backend's NewBatch. Like the other lookups
	// it sees every Apply that returned before it.
	Submit(table TableID, b *Batch) error
	MemoryUsed() int64
	Close() error
}

// Errors the backends return (wrapped with details).
var (
	ErrClosed       = errors.New("gpu: backend closed")
	ErrNoTable      = errors.New("gpu: no such table")
	ErrKind         = errors.New("gpu: table is of another kind")
	ErrShortOut     = errors.New("gpu: output shorter than input")
	ErrBadUpdate    = errors.New("gpu: update rejected")
	ErrTooManyLevel = errors.New("gpu: image has more levels than the device kernels handle")
	ErrShortKeys    = errors.New("gpu: key buffer shorter than n packets of the projection")
)

// MaxDeviceLevels is the most trie levels the device kernels handle (their
// level descriptors live in a fixed shared-memory array).
const MaxDeviceLevels = 32

// lpmLayout describes a checked GAMT image: its strides and where each region
// sits when all regions are laid end to end in one word buffer (the device
// layout: region r starts at word regionBase[r]).
type lpmLayout struct {
	gen     uint64
	fam     lpm.Family
	strides []uint32 // per level
	offs    []uint32 // per level: the first address bit it consumes
	regions
}

// regions places an image's regions end to end in one word buffer, the
// device layout of every table: region r starts at word base[r].
type regions struct {
	regionBase []uint32 // per region
	regionLen  []uint32
	total      uint64 // words in all regions
}

// layRegions lays im's regions end to end; the offsets must fit 32 bits.
func layRegions(im *bubble.Image) (regions, error) {
	var l regions
	for _, w := range im.Words {
		l.regionBase = append(l.regionBase, uint32(l.total))
		l.regionLen = append(l.regionLen, uint32(len(w)))
		l.total += uint64(len(w))
		if l.total >= 1<<32 {
			return l, fmt.Errorf("%w: image of %d words does not fit 32-bit offsets", ErrBadUpdate, l.total)
		}
	}
	return l, nil
}

// newLPMLayout checks im as a GAMT image of kind's family (lpm.NewView does
// the full check: meta, region sizes, every pointer) and returns its layout
// and a View of it.
func newLPMLayout(kind Kind, im *bubble.Image) (*lpmLayout, *lpm.View, error) {
	want := lpm.IPv4
	switch kind {
	case LPM4:
	case LPM6:
		want = lpm.IPv6
	default:
		return nil, nil, fmt.Errorf("%w: %v is not an LPM kind", ErrKind, kind)
	}
	v, err := lpm.NewView(im)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrBadUpdate, err)
	}
	if v.Family() != want {
		return nil, nil, fmt.Errorf("%w: image is %v, table kind %v", ErrKind, v.Family(), kind)
	}
	l := &lpmLayout{gen: im.Generation, fam: v.Family()}
	meta := im.Words[0]
	off := uint32(0)
	for i := 0; i < v.Levels(); i++ {
		s := meta[3+i]
		l.strides = append(l.strides, s)
		l.offs = append(l.offs, off)
		off += s
	}
	if l.regions, err = layRegions(im); err != nil {
		return nil, nil, err
	}
	return l, v, nil
}

// A level descriptor of the GAMT kernels (kernels/gamt.cu, through the
// generated kernels/layout.h): LevelDescWords words per level.
const (
	LevelDescBase   = 0 // the level's base word in the flat buffer
	LevelDescStride = 1 // its stride
	LevelDescOff    = 2 // the first address bit it consumes
	LevelDescWords  = 3
)

// levelDesc returns the device kernels' level descriptors: per level its
// base word in the flat buffer, its stride and its first address bit.
func (l *lpmLayout) levelDesc() []uint32 {
	d := make([]uint32, LevelDescWords*len(l.strides))
	for i, s := range l.strides {
		e := d[LevelDescWords*i:]
		e[LevelDescBase], e[LevelDescStride], e[LevelDescOff] = l.regionBase[1+i], s, l.offs[i]
	}
	return d
}

// checkBubbles checks an update's bubbles against the layout before any is
// written: each inside its region, none in the meta region (the layout is
// fixed within a generation), and every pointer entry aimed at a deeper level
// and a node that level has, so a lookup on the updated image, on the CPU or
// on the device, can never index outside it.
func (l *lpmLayout) checkBubbles(bs []bubble.Bubble) error {
	nl := uint32(len(l.strides))
	for _, b := range bs {
		r := uint32(b.Region)
		if r >= uint32(len(l.regionLen)) || b.Offset >= l.regionLen[r] {
			return fmt.Errorf("%w: bubble (%d, %d) outside the image", ErrBadUpdate, b.Region, b.Offset)
		}
		if r == 0 {
			return fmt.Errorf("%w: bubble writes the meta region (word %d)", ErrBadUpdate, b.Offset)
		}
		j := b.Value & 0xff
		if j == 0 {
			continue
		}
		if i := r - 1; j <= i || j >= nl || b.Value>>8 >= l.regionLen[1+j]>>l.strides[j] {
			return fmt.Errorf("%w: bubble (%d, %d) = %#x points outside the image", ErrBadUpdate, b.Region, b.Offset, b.Value)
		}
	}
	return nil
}
