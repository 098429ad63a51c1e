package agent

import (
	"fmt"
	"slices"
	"sync"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/lpmshape"
)

// IDRange is a range of engine table ids: N ids from First, handed to
// Owner.
type IDRange struct {
	Owner string
	First gpu.TableID
	N     uint64
}

// end is one past the range's last id.
func (r IDRange) end() uint64 { return uint64(r.First) + r.N }

// Contains reports whether id is in the range.
func (r IDRange) Contains(id gpu.TableID) bool {
	return uint64(id) >= uint64(r.First) && uint64(id) < r.end()
}

func (r IDRange) String() string {
	return fmt.Sprintf("%s [%#x, %#x)", r.Owner, r.First, r.end())
}

// IDBlock is the alignment of the ranges Alloc hands out: each starts at
// a multiple of 1<<20. With the flow tables at 0, the router's first
// range is 1<<20, the id its tables have always had.
const IDBlock = 1 << 20

// maxIDs is the size of the engine's table-id space (gpu.TableID).
const maxIDs = 1 << 32

// TableIDs allocates the engine's table ids: every table of the engine
// (gpu.Engine.Load) is named by a gpu.TableID, and the parts of the agent
// that load tables (the pipeline's flow tables and LPM-shaped tables, the
// router's route tables) each get a range of their own from one TableIDs,
// so that no two of them can name the same table. Reserve takes a range
// that a part fixes itself; Alloc hands out the lowest free range aligned
// to IDBlock. It is safe for concurrent use.
type TableIDs struct {
	mu     sync.Mutex
	ranges []IDRange // sorted by First, disjoint
}

// NewTableIDs returns an allocator with every id free.
func NewTableIDs() *TableIDs { return &TableIDs{} }

// Reserve takes the n ids from first for owner; an overlap with a range
// handed out before is an error naming both.
func (a *TableIDs) Reserve(owner string, first gpu.TableID, n uint64) (IDRange, error) {
	r := IDRange{Owner: owner, First: first, N: n}
	if n == 0 || r.end() > maxIDs {
		return IDRange{}, fmt.Errorf("engine table ids: %s: %d ids from %#x do not fit the table-id space", owner, n, first)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if o, ok := a.overlapLocked(r); ok {
		return IDRange{}, fmt.Errorf("engine table ids: %s overlaps %s", r, o)
	}
	a.insertLocked(r)
	return r, nil
}

// Alloc hands owner the lowest range of n ids (at least one) that starts
// at a multiple of IDBlock and overlaps no range handed out before.
func (a *TableIDs) Alloc(owner string, n uint64) (IDRange, error) {
	n = max(n, 1)
	a.mu.Lock()
	defer a.mu.Unlock()
	r := IDRange{Owner: owner, N: n}
	for first := uint64(0); first+n <= maxIDs; {
		r.First = gpu.TableID(first)
		o, ok := a.overlapLocked(r)
		if !ok {
			a.insertLocked(r)
			return r, nil
		}
		first = (o.end() + IDBlock - 1) / IDBlock * IDBlock // the next block after the range in the way
	}
	return IDRange{}, fmt.Errorf("engine table ids: no free range of %d ids for %s", n, owner)
}

// Ranges returns the ranges handed out, ascending.
func (a *TableIDs) Ranges() []IDRange {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.ranges)
}

// Owner returns the range that holds id.
func (a *TableIDs) Owner(id gpu.TableID) (IDRange, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.ranges {
		if r.Contains(id) {
			return r, true
		}
	}
	return IDRange{}, false
}

// overlapLocked returns the first range (by First) that overlaps r.
func (a *TableIDs) overlapLocked(r IDRange) (IDRange, bool) {
	for _, o := range a.ranges {
		if uint64(o.First) < r.end() && uint64(r.First) < o.end() {
			return o, true
		}
	}
	return IDRange{}, false
}

func (a *TableIDs) insertLocked(r IDRange) {
	i, _ := slices.BinarySearchFunc(a.ranges, r.First, func(x IDRange, f gpu.TableID) int { return int(int64(x.First) - int64(f)) })
	a.ranges = slices.Insert(a.ranges, i, r)
}

// The ranges of the pipeline's engine table ids: it numbers its flow
// tables' images by table (0..254), fixed, and its LPM-shaped tables'
// images base | table<<16 | group slot (tables/lpmshape), with the base
// the agent reserves here and hands to pipeline.Config.LPMIDBase.
const (
	flowTableIDs     = 256
	lpmShapeIDBase   = gpu.TableID(lpmshape.DefaultIDBase)
	lpmShapeIDs      = 1 << 24
	flowTablesOwner  = "flow tables"
	lpmShapeIDsOwner = "lpm-shaped flow tables"
	routerIDsOwner   = "router"
)

// reserveTableIDs reserves the pipeline's ranges before the router
// allocates its own, and returns the LPM-shaped tables' base.
func (d *Agent) reserveTableIDs() (lpmBase gpu.TableID, err error) {
	if _, err := d.ids.Reserve(flowTablesOwner, 0, flowTableIDs); err != nil {
		return 0, err
	}
	r, err := d.ids.Reserve(lpmShapeIDsOwner, lpmShapeIDBase, lpmShapeIDs)
	return r.First, err
}
