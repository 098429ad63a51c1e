package gpu

import (
	"fmt"
	"sync"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
)

// CPU is the Backend that answers lookups on the CPU from its own mirror of
// each table's image. It is always available, and it is the reference the
// device backends are tested against.
type CPU struct {
	mu     sync.RWMutex
	closed bool
	tables map[TableID]*cpuTable
}

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
	t, err := c.lookupTable(id, Flow, 0, 0)
	if err != nil {
		return 0, err
	}
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
func NewCPU() *CPU { return &CPU{tables: make(map[TableID]*cpuTable)} }

// Name returns "cpu".
func (c *CPU) Name() string { return "cpu" }

// Device describes the device: the host CPU.
func (c *CPU) Device() string { return "host CPU (Go)" }

// Load installs a copy of im as table id, replacing any table of that id.
func (c *CPU) Load(id TableID, kind Kind, im *bubble.Image) error {
	if im == nil {
		return fmt.Errorf("%w: nil image", ErrBadUpdate)
	}
	nt, err := layoutOf(kind, im.Clone())
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.tables[id] = nt
	return nil
}

// Apply brings table id up to date with u. A Full image is taken over (as
// bubble.Mirror.Sync hands out a fresh copy): the caller must not write to
// it afterwards.
func (c *CPU) Apply(id TableID, u bubble.Update) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, err := c.table(id)
	if err != nil {
		return err
	}
	if u.Full != nil {
		nt, err := layoutOf(t.kind, u.Full)
		if err != nil {
			return err
		}
		*t = *nt
		return nil
	}
	if len(u.Bubbles) == 0 {
		return nil
	}
	if u.Generation != t.img.Generation {
		return fmt.Errorf("%w: bubbles of generation %d for an image of generation %d", ErrBadUpdate, u.Generation, t.img.Generation)
	}
	if t.kind == Flow {
		err = t.flay.checkBubbles(u.Bubbles)
	} else {
		err = t.layout.checkBubbles(u.Bubbles)
	}
	if err != nil {
		return err
	}
	return u.ApplyTo(&t.img)
}

func (c *CPU) table(id TableID) (*cpuTable, error) {
	if c.closed {
		return nil, ErrClosed
	}
	t := c.tables[id]
	if t == nil {
		return nil, fmt.Errorf("%w: %d", ErrNoTable, id)
	}
	return t, nil
}

func (c *CPU) lookupTable(id TableID, kind Kind, n, nout int) (*cpuTable, error) {
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
	t, err := c.lookupTable(id, LPM4, len(addrs), len(out))
	if err != nil {
		return err
	}
	t.view.LookupBatch4(addrs, out[:len(addrs)])
	return nil
}

// LookupLPM6 looks up IPv6 addresses in table id.
func (c *CPU) LookupLPM6(id TableID, addrs []lpm.Addr6, out []uint32) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, err := c.lookupTable(id, LPM6, len(addrs), len(out))
	if err != nil {
		return err
	}
	t.view.LookupBatch6(addrs, out[:len(addrs)])
	return nil
}

// LookupFlow classifies n packets (projected keys in soa, SoA order) in
// table id.
func (c *CPU) LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, err := c.lookupTable(id, Flow, 0, 0)
	if err != nil {
		return err
	}
	if err := checkFlowBatch(t.flay, soa, n, out); err != nil {
		return err
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
	t, err := c.table(id)
	if err != nil {
		return err
	}
	sub := b.sub
	b.sub = false // checkSubmit's view: a fallback runs on a waited batch
	err = checkSubmit(b, t.kind, t.keyWidth())
	b.sub = sub
	if err != nil {
		return err
	}
	return c.lookupBatch(t, b)
}

// lookupBatch looks up b's keys in t; the caller holds c.mu.
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

// MemoryUsed returns the bytes of the images held.
func (c *CPU) MemoryUsed() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var n int64
	for _, t := range c.tables {
		n += int64(t.img.Bytes())
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
