package gpu

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
)

// CPU is the Backend that answers lookups on the CPU from its own mirror of
// each table's image. It is always available, and it is the reference the
// device backends are tested against.
//
// Lookups never wait for updates: each table is held twice (a left-right
// pair, see lrTable), an update is applied to the copy no lookup reads,
// the lookups are switched over to it, and once the last lookup of the
// other copy has left, the update is applied there too. A read-write lock
// around the table instead had lookups queue behind every waiting update:
// at 100,000 route changes/s it cost 60-77% of the lookups on both the
// 2-core VM and a 16-core host, where without it the loss was within the
// noise.
type CPU struct {
	mu     sync.RWMutex // guards tables (the map) and closed; lookups and Apply take it for reading
	closed bool
	tables map[TableID]*lrTable
}

// lrTable is one table held twice (Load and every Apply write both
// copies). Readers enter the copy 'read' names; a writer (one at a time)
// updates the copy no reader is in, points 'read' at it, waits until no
// reader is left in the other, and updates that too (see write). A reader
// that loaded 'read' just before a switch announces itself on the old
// copy, sees 'read' changed and backs off without reading, so a writer
// never writes a copy that is being read.
type lrTable struct {
	kind    Kind
	wmu     sync.Mutex // serializes writers
	read    atomic.Int32
	readers [2]readerCount
	inst    [2]*cpuTable
}

// readerCount is padded to its own cache line: readers of the two copies
// do not share one.
type readerCount struct {
	n atomic.Int64
	_ [56]byte
}

// enter returns the copy to read and its index, for leave.
func (t *lrTable) enter() (*cpuTable, int32) {
	for {
		i := t.read.Load()
		t.readers[i].n.Add(1)
		if t.read.Load() == i {
			return t.inst[i], i
		}
		t.readers[i].n.Add(-1)
	}
}

func (t *lrTable) leave(i int32) { t.readers[i].n.Add(-1) }

// write runs f on both copies: first on copy 1, which no lookup reads
// between writes; then the lookups are sent to copy 1, and once the last
// lookup of copy 0 has left, f runs on copy 0 and the lookups are sent back
// to it. f(i) updates t.inst[i]; if it fails on copy 1 it must have changed
// nothing, and the error is returned with both copies as they were. It does
// not fail on copy 0, which is in the state copy 1 was in.
//
// Copy 0 is the one lookups read except during a write's short window, so
// that a lookup goroutine's caches stay warm on one copy: flipping the
// lookups to the other copy at every write (the textbook left-right) made
// them read alternate copies, 5,000 times a second under bench routes'
// updates, and refill their caches from the other each time (the full
// IPv4 table's lookups lost 23% under 100,000 updates/s on the H100 host).
func (t *lrTable) write(f func(i int32) error) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.drain(1) // lookups that entered copy 1 in the previous write's window
	if err := f(1); err != nil {
		return err
	}
	t.read.Store(1)
	t.drain(0)
	err := f(0)
	t.read.Store(0)
	return err
}

// drain waits until no lookup is in copy i ('read' points elsewhere).
func (t *lrTable) drain(i int32) {
	for spins := 0; t.readers[i].n.Load() != 0; spins++ {
		if spins < 64 {
			continue
		}
		runtime.Gosched()
	}
}

// cpuTable is one copy of a table: its image and the views that read it.
type cpuTable struct {
	kind   Kind
	img    *bubble.Image
	layout *lpmLayout
	view   *lpm.View // reads img in place, so it sees applied bubbles
	flay   *flowLayout
	fview  *flow.View // Flow: likewise
}

// layoutOf checks im as an image of kind and returns a table holding it.
func layoutOf(kind Kind, im *bubble.Image) (*cpuTable, error) {
	if kind == Flow {
		l, v, err := newFlowLayout(im)
		if err != nil {
			return nil, err
		}
		return &cpuTable{kind: kind, img: im, flay: l, fview: v}, nil
	}
	l, v, err := newLPMLayout(kind, im)
	if err != nil {
		return nil, err
	}
	return &cpuTable{kind: kind, img: im, layout: l, view: v}, nil
}

// flowWidth returns the projection width of flow table id.
func (c *CPU) flowWidth(id TableID) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	lt, err := c.lookupTable(id, Flow, 0, 0)
	if err != nil {
		return 0, err
	}
	t, i := lt.enter()
	defer lt.leave(i)
	return t.flay.p, nil
}

// keyWidth is the words per key of the table's lookups.
func (t *cpuTable) keyWidth() int {
	if t.flay != nil {
		return t.flay.p
	}
	return keyWidth(t.kind, 0)
}

// NewCPU returns an empty CPU backend.
func NewCPU() *CPU { return &CPU{tables: make(map[TableID]*lrTable)} }

// Name returns "cpu".
func (c *CPU) Name() string { return "cpu" }

// Device describes the device: the host CPU.
func (c *CPU) Device() string { return "host CPU (Go)" }

// Load installs a copy of im as table id, replacing any table of that id.
func (c *CPU) Load(id TableID, kind Kind, im *bubble.Image) error {
	if im == nil {
		return fmt.Errorf("%w: nil image", ErrBadUpdate)
	}
	lt := &lrTable{kind: kind}
	for i := range lt.inst {
		nt, err := layoutOf(kind, im.Clone())
		if err != nil {
			return err
		}
		lt.inst[i] = nt
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.tables[id] = lt
	return nil
}

// Apply brings table id up to date with u. A Full image is taken over (as
// bubble.Mirror.Sync hands out a fresh copy): the caller must not write to
// it afterwards.
func (c *CPU) Apply(id TableID, u bubble.Update) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	lt, err := c.table(id)
	if err != nil {
		return err
	}
	if u.Full != nil {
		full := [2]*bubble.Image{u.Full, u.Full.Clone()}
		return lt.write(func(i int32) error {
			nt, err := layoutOf(lt.kind, full[i])
			if err != nil {
				return err
			}
			lt.inst[i] = nt
			return nil
		})
	}
	if len(u.Bubbles) == 0 {
		return nil
	}
	return lt.write(func(i int32) error {
		t := lt.inst[i]
		if i == 0 { // copy 1 passed the checks, and copy 0 is in its state
			return u.ApplyTo(&t.img)
		}
		if u.Generation != t.img.Generation {
			return fmt.Errorf("%w: bubbles of generation %d for an image of generation %d", ErrBadUpdate, u.Generation, t.img.Generation)
		}
		var err error
		if t.kind == Flow {
			err = t.flay.checkBubbles(u.Bubbles)
		} else {
			err = t.layout.checkBubbles(u.Bubbles)
		}
		if err != nil {
			return err
		}
		return u.ApplyTo(&t.img)
	})
}

func (c *CPU) table(id TableID) (*lrTable, error) {
	if c.closed {
		return nil, ErrClosed
	}
	t := c.tables[id]
	if t == nil {
		return nil, fmt.Errorf("%w: %d", ErrNoTable, id)
	}
	return t, nil
}

func (c *CPU) lookupTable(id TableID, kind Kind, n, nout int) (*lrTable, error) {
	t, err := c.table(id)
	if err != nil {
		return nil, err
	}
	if t.kind != kind {
		return nil, fmt.Errorf("%w: table %d is %v, lookup is %v", ErrKind, id, t.kind, kind)
	}
	if nout < n {
		return nil, ErrShortOut
	}
	return t, nil
}

// LookupLPM4 looks up IPv4 addresses in table id.
func (c *CPU) LookupLPM4(id TableID, addrs []uint32, out []uint32) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	lt, err := c.lookupTable(id, LPM4, len(addrs), len(out))
	if err != nil {
		return err
	}
	t, i := lt.enter()
	defer lt.leave(i)
	t.view.LookupBatch4(addrs, out[:len(addrs)])
	return nil
}

// LookupLPM6 looks up IPv6 addresses in table id.
func (c *CPU) LookupLPM6(id TableID, addrs []lpm.Addr6, out []uint32) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	lt, err := c.lookupTable(id, LPM6, len(addrs), len(out))
	if err != nil {
		return err
	}
	t, i := lt.enter()
	defer lt.leave(i)
	t.view.LookupBatch6(addrs, out[:len(addrs)])
	return nil
}

// LookupFlow classifies n packets (projected keys in soa, SoA order) in
// table id; a run of equal keys is searched once
// (flow.View.LookupBatchSoA).
func (c *CPU) LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	return c.lookupFlow(id, soa, n, out, false)
}

// lookupFlowEach is LookupFlow with a search for every key
// (flow.View.LookupBatchSoAEach): what a calibration times.
func (c *CPU) lookupFlowEach(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	return c.lookupFlow(id, soa, n, out, true)
}

func (c *CPU) lookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID, each bool) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	lt, err := c.lookupTable(id, Flow, 0, 0)
	if err != nil {
		return err
	}
	t, i := lt.enter()
	defer lt.leave(i)
	if err := checkFlowBatch(t.flay, soa, n, out); err != nil {
		return err
	}
	if each {
		return t.fview.LookupBatchSoAEach(soa, n, n, out)
	}
	return t.fview.LookupBatchSoA(soa, n, out)
}

// NewBatch returns a batch in ordinary memory (see Batch).
func (c *CPU) NewBatch(kind Kind, width, capacity int) (*Batch, error) {
	return newHostBatch(kind, width, capacity)
}

// Submit looks up b's keys in table id at once; b.Wait returns the error.
// The batch may be one of another backend's (a device batch's memory is
// host memory too): that is how a device's batches fall back to the CPU.
func (c *CPU) Submit(id TableID, b *Batch) error {
	if b == nil || b.impl == nil {
		return fmt.Errorf("gpu: submit of a freed batch")
	}
	if b.sub || b.cpuDone {
		return fmt.Errorf("gpu: batch submitted again before Wait")
	}
	b.cpuErr, b.cpuDone = c.lookupOnCPU(id, b), true
	return nil
}

// lookupOnCPU looks up b's keys in table id now.
func (c *CPU) lookupOnCPU(id TableID, b *Batch) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	lt, err := c.table(id)
	if err != nil {
		return err
	}
	t, i := lt.enter()
	defer lt.leave(i)
	sub := b.sub
	b.sub = false // checkSubmit's view: a fallback runs on a waited batch
	err = checkSubmit(b, t.kind, t.keyWidth())
	b.sub = sub
	if err != nil {
		return err
	}
	return c.lookupBatch(t, b)
}

// lookupBatch looks up b's keys in t, a copy the caller has entered.
func (c *CPU) lookupBatch(t *cpuTable, b *Batch) error {
	switch t.kind {
	case LPM4:
		t.view.LookupBatch4(b.Keys[:b.N], b.Out[:b.N])
	case LPM6:
		t.view.LookupBatch6(b.Addrs6()[:b.N], b.Out[:b.N])
	case Flow:
		return t.fview.LookupBatchSoAStride(b.Keys, b.N, b.Cap, b.Rules())
	}
	return nil
}

// MemoryUsed returns the bytes of the images held (both copies of each
// table).
func (c *CPU) MemoryUsed() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var n int64
	for _, lt := range c.tables {
		lt.wmu.Lock() // the images' sizes change only under it
		for _, t := range lt.inst {
			n += int64(t.img.Bytes())
		}
		lt.wmu.Unlock()
	}
	return n
}

// Close drops every table; later calls return ErrClosed.
func (c *CPU) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.tables = nil
	return nil
}

var _ Backend = (*CPU)(nil)
