package gpu

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gswitch/gswitch/tables/flow"
)

// BatchBackend is what a Gatherer needs of a backend: batches in its
// memory, submitted apart from their wait (the Engine; every Backend).
type BatchBackend interface {
	NewBatch(kind Kind, width, capacity int) (*Batch, error)
	Submit(id TableID, b *Batch) error
}

// DefaultGatherDepth is GatherConfig.Depth's default.
const DefaultGatherDepth = 2

// Gatherer gathers the flow lookups that several callers make without
// waiting (the datapath workers' runs in flight) into shared device
// batches: GSwitch §7.4's batching across ports and queues, for callers
// that go on with other work while their keys are looked up. It is the
// Coalescer's counterpart for such callers: nobody blocks to form a
// batch, and nobody is woken to hand results over; each caller polls its
// own share.
//
// A caller reserves room for its n keys in the open batch of the table
// (Reserve), packs them straight into the batch's pinned memory (columns
// Stride words apart), says so (Packed), and later asks whether its
// results are in (Ready, without waiting) or waits for them (Wait), reads
// them (Results) and gives its share back (Release). An open batch is
// closed and submitted
//
//   - when it has no room for the next reservation (full);
//   - when a member has packed its keys and fewer than Depth batches are
//     in flight (a device slot is free: GSwitch's group commit; the keys
//     reserved while batches are in flight form the next batch);
//   - when a batch in flight is retired (its results are in) and the open
//     batch's keys are all packed;
//   - when a member waits for it (Wait): a caller that needs its results
//     never waits for a slot; unless GatherConfig.WaitForSlot, where with
//     every slot busy the waiting member retires the oldest batch in
//     flight first (waiting for it), whose retirement submits the open
//     batch with the runs packed meanwhile.
//
// The batch is submitted once its members have all packed, by the one
// that packs last or by the closer. Callers find a batch in flight done
// by polling (Ready: the batch's Ready, a load of the word the device
// writes on CUDA); the first that finds it so retires it (collects its
// error, frees its slot and submits an open batch that was waiting for
// one).
//
// Results are exact: every key gets what a lookup of its own would have
// returned from the table as it stood when the batch was submitted; a
// caller that needs the table as it stands later (the datapath after a
// change) checks that itself.
//
// Concurrency: mu guards the batches' states and the counters; Submit
// and a retiring Wait run without it (flags on the batch keep others
// off). A share's keys are written by its member alone, between Reserve
// and Packed, in a part of the batch no one else writes. Lock order: a
// caller may hold its own locks (the switch's read lock) while it calls
// in; the Gatherer calls the backend's Submit with no lock of its own.
type Gatherer struct {
	be  BatchBackend
	cfg GatherConfig

	mu     sync.Mutex
	open   []*gbatch // one per table at most
	flight []*gbatch // batches submitted and not yet retired, oldest first
	free   []*gbatch // retired and released, for reuse (their pinned memory kept)
	stats  GatherStats
}

// GatherConfig configures a Gatherer.
type GatherConfig struct {
	MaxBatch int // keys per batch at most (0: DefaultCoalescerMaxBatch)
	Depth    int // batches in flight before a packed batch waits for a slot (0: DefaultGatherDepth)
	// WaitForSlot: a member that waits for its open batch while Depth
	// batches are in flight retires the oldest of them first instead of
	// closing its own (so its batch gathers the runs packed during that
	// lookup). gswitchd sets it with GSWITCH_GATHER_WAIT=slot, for
	// comparisons.
	WaitForSlot bool
}

// GatherStats counts what a Gatherer did.
type GatherStats struct {
	Batches  uint64 // batches submitted
	Keys     uint64 // keys in them
	Shares   uint64 // reservations in them
	ByFull   uint64 // closed with no room for a reservation
	ByIdle   uint64 // closed with a slot free, as a member packed or a batch was retired
	ByWait   uint64 // closed because a member waited for its results
	MaxKeys  int    // the largest batch
	InFlight int    // batches in flight now
}

// gbatch is one shared batch.
type gbatch struct {
	table   TableID
	b       *Batch
	n       int  // keys reserved
	packing int  // members that have reserved and not yet packed
	refs    int  // members that have not released
	shares  int  // reservations made
	closed  bool // takes no more reservations
	subbing bool // being submitted (by the member that found it ready to go)
	sub     bool // submitted: in flight until retired
	retired bool // its results are in, err set
	err     error
	// Ready's look without mu (the members poll between their ring
	// reads; on mu, eight workers' polls would queue behind each other):
	// subA and retA are sub and retired, set with them; poll is the right
	// to look at b (its Ready and Wait are its owner's): the member that
	// takes it looks and, finding the batch done, retires it and keeps it.
	subA, retA, poll atomic.Bool
}

// Share is a caller's place in a shared batch: the batch, its offset and
// its count of keys. The zero Share is none.
type Share struct {
	g      *gbatch
	off, n int
}

// Keys returns the share's key columns: word j of its key k is at
// [j*Stride+k] (the batch's structure of arrays, Stride its Cap).
func (s Share) Keys() []uint32 { return s.g.b.Keys[s.off:] }

// Stride is the distance between the share's key columns, in words.
func (s Share) Stride() int { return s.g.b.Cap }

// Valid reports whether s is a share (not the zero Share).
func (s Share) Valid() bool { return s.g != nil }

// NewGatherer returns a Gatherer over be.
func NewGatherer(be BatchBackend, cfg GatherConfig) (*Gatherer, error) {
	if cfg.MaxBatch < 0 || cfg.Depth < 0 {
		return nil, fmt.Errorf("gpu: gatherer: negative setting in %+v", cfg)
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultCoalescerMaxBatch
	}
	if cfg.Depth == 0 {
		cfg.Depth = DefaultGatherDepth
	}
	return &Gatherer{be: be, cfg: cfg}, nil
}

// Stats returns the Gatherer's counters.
func (g *Gatherer) Stats() GatherStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.stats
	s.InFlight = len(g.flight)
	return s
}

// Reserve takes room for n keys of table id, width words each (the
// table's projection), in the table's open batch, opening one when there
// is none, its keys another width, or no room. The caller writes its keys
// into the share's Keys (columns Stride apart) and then calls Packed.
func (g *Gatherer) Reserve(id TableID, width, n int) (Share, error) {
	if n <= 0 || n > g.cfg.MaxBatch {
		return Share{}, fmt.Errorf("gpu: gatherer: %d keys: want 1..%d", n, g.cfg.MaxBatch)
	}
	var launch *gbatch
	g.mu.Lock()
	o := g.openOf(id)
	if o != nil && (o.b.Width != width || o.n+n > o.b.Cap) {
		g.stats.ByFull++
		launch = g.closeLocked(o)
		o = nil
	}
	if o == nil {
		var err error
		if o, err = g.newBatch(id, width); err != nil {
			g.mu.Unlock()
			g.submit(launch)
			return Share{}, err
		}
		g.open = append(g.open, o)
	}
	s := Share{g: o, off: o.n, n: n}
	o.n += n
	o.packing++
	o.refs++
	o.shares++
	g.mu.Unlock()
	g.submit(launch)
	return s, nil
}

// Packed says the share's keys are written. The batch is closed and
// submitted now when a device slot is free (see Gatherer).
func (g *Gatherer) Packed(s Share) {
	var launch *gbatch
	g.mu.Lock()
	o := s.g
	o.packing--
	if !o.closed && len(g.flight) < g.cfg.Depth {
		g.stats.ByIdle++
		launch = g.closeLocked(o)
	} else if o.closed {
		launch = g.readyLocked(o)
	}
	g.mu.Unlock()
	g.submit(launch)
}

// Ready reports, without waiting, whether the share's results are in. A
// caller that finds its batch done retires it (see Gatherer).
func (g *Gatherer) Ready(s Share) bool {
	o := s.g
	if o.retA.Load() {
		return true
	}
	if !o.subA.Load() || !o.poll.CompareAndSwap(false, true) {
		return false // not submitted, or another member is looking
	}
	if !o.b.Ready() {
		o.poll.Store(false)
		return false
	}
	g.retire(o)
	return true
}

// Wait waits for the share's results and returns the batch's error: it
// closes and submits the batch if it is still open, and waits for it in
// the backend's way (Batch.Wait) unless another member is already doing so.
func (g *Gatherer) Wait(s Share) error {
	o := s.g
	for {
		var launch *gbatch
		g.mu.Lock()
		switch {
		case o.retired:
			err := o.err
			g.mu.Unlock()
			return err
		case !o.closed && g.cfg.WaitForSlot && len(g.flight) >= g.cfg.Depth:
			// Every slot is busy: retire the oldest batch in flight (its
			// finish submits o), unless another member is at it.
			if x := g.flight[0]; x.sub && x.poll.CompareAndSwap(false, true) {
				g.mu.Unlock()
				g.retire(x)
				continue
			}
		case !o.closed:
			g.stats.ByWait++
			launch = g.closeLocked(o)
		case o.sub && o.poll.CompareAndSwap(false, true):
			g.mu.Unlock()
			g.retire(o)
			continue
		}
		g.mu.Unlock()
		if launch != nil {
			g.submit(launch)
			continue
		}
		// Its members are still packing, it is being submitted, or
		// another member is in its Wait: moments.
		runtime.Gosched()
	}
}

// Results returns the share's results (after Ready or Wait): flow.RuleIDs
// in the order of its keys. They stay valid until Release.
func (s Share) Results() []flow.RuleID { return s.g.b.Rules()[s.off : s.off+s.n] }

// Release gives the share back; its Keys and Results are not to be used
// afterwards. A share whose batch was not retired yet is waited for first.
func (g *Gatherer) Release(s Share) {
	if s.g == nil {
		return
	}
	if !g.Ready(s) {
		_ = g.Wait(s)
	}
	g.mu.Lock()
	o := s.g
	o.refs--
	if o.refs == 0 {
		// Kept for the next batch, however many: no more are ever made
		// than are in use at once, and a backend's batch is costly to
		// make and to free (pinned memory, device buffers, an event; on
		// CUDA each through the context's goroutine, and a free of
		// device memory waits for the device). Keeping a few and freeing
		// the rest made them again and again as the batches came and
		// went (TestGathererReusesBatches).
		g.free = append(g.free, o)
	}
	g.mu.Unlock()
}

// openOf returns the open batch of table id, or nil (mu held).
func (g *Gatherer) openOf(id TableID) *gbatch {
	for _, o := range g.open {
		if o.table == id {
			return o
		}
	}
	return nil
}

// newBatch returns an empty batch of table id (mu held): a released one of
// the same width reused, or a new one.
func (g *Gatherer) newBatch(id TableID, width int) (*gbatch, error) {
	for i, o := range g.free {
		if o.b.Width == width {
			g.free = append(g.free[:i], g.free[i+1:]...)
			o.reset(id)
			return o, nil
		}
	}
	b, err := g.be.NewBatch(Flow, width, g.cfg.MaxBatch)
	if err != nil {
		return nil, err
	}
	return &gbatch{table: id, b: b}, nil
}

// reset makes the released batch o an empty batch of table id.
func (o *gbatch) reset(id TableID) {
	o.table, o.n, o.packing, o.refs, o.shares, o.err = id, 0, 0, 0, 0, nil
	o.closed, o.subbing, o.sub, o.retired = false, false, false, false
	o.subA.Store(false)
	o.retA.Store(false)
	o.poll.Store(false)
}

// closeLocked takes o out of the open batches (mu held) and returns it
// when it is to be submitted now (every member packed), else nil: its
// last member's Packed submits it.
func (g *Gatherer) closeLocked(o *gbatch) *gbatch {
	o.closed = true
	for i, x := range g.open {
		if x == o {
			g.open = append(g.open[:i], g.open[i+1:]...)
			break
		}
	}
	return g.readyLocked(o)
}

// readyLocked returns the closed batch o for submission when its members
// have all packed and nobody submits it yet (mu held), else nil.
func (g *Gatherer) readyLocked(o *gbatch) *gbatch {
	if o.packing > 0 || o.subbing || o.sub {
		return nil
	}
	o.subbing = true
	g.flight = append(g.flight, o)
	return o
}

// submit submits the batch readyLocked handed out (nil: nothing), without
// mu. A Submit that fails (the backend's own fallbacks aside) is the
// batch's error: it is retired at once.
func (g *Gatherer) submit(o *gbatch) {
	if o == nil {
		return
	}
	o.b.N = o.n
	err := g.be.Submit(o.table, o.b)
	g.mu.Lock()
	o.subbing, o.sub = false, true
	g.stats.Batches++
	g.stats.Keys += uint64(o.n)
	g.stats.Shares += uint64(o.shares)
	g.stats.MaxKeys = max(g.stats.MaxKeys, o.n)
	if err != nil {
		o.poll.Store(true) // nothing to wait for: retired below, as a failed Wait would be
	}
	o.subA.Store(true)
	g.mu.Unlock()
	if err != nil {
		g.finish(o, fmt.Errorf("gpu: gatherer: submit: %w", err))
	}
}

// retire collects the batch's outcome (its Wait, which returns at once
// once it is Ready) and frees its slot; the caller holds o.poll.
func (g *Gatherer) retire(o *gbatch) { g.finish(o, o.b.Wait()) }

// finish retires o with err and submits an open batch whose members have
// all packed, now that a slot is free.
func (g *Gatherer) finish(o *gbatch, err error) {
	var launch *gbatch
	g.mu.Lock()
	o.retired, o.err = true, err
	o.retA.Store(true)
	if i := slices.Index(g.flight, o); i >= 0 {
		g.flight = slices.Delete(g.flight, i, i+1)
	}
	for _, p := range g.open {
		if p.n > 0 && p.packing == 0 && len(g.flight) < g.cfg.Depth {
			g.stats.ByIdle++
			launch = g.closeLocked(p)
			break
		}
	}
	g.mu.Unlock()
	g.submit(launch)
}

// Close frees the batches' memory; shares must all be released.
func (g *Gatherer) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.flight) > 0 || len(g.open) > 0 {
		return errors.New("gpu: gatherer: closed with batches open or in flight")
	}
	for _, o := range g.free {
		o.b.Free()
	}
	g.free = nil
	return nil
}
