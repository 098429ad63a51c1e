package gpu

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/internal/kick"
	"github.com/gswitch/gswitch/tables/flow"
)

// FlowLooker is what a Coalescer needs of a backend: a flow lookup (every
// Backend, and the Engine, has it).
type FlowLooker interface {
	LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error
}

// deviceServer is what a Coalescer asks of a backend, when it has it,
// before holding a lookup back: would a batch of n keys of table id go to
// a device? (Engine.DeviceServes.) A backend without it is always
// coalesced.
type deviceServer interface {
	DeviceServes(id TableID, n int) bool
}

// deviceFloor is what a Coalescer asks of a backend, when it has it, for
// the smallest batch of a table worth a device (Engine.DeviceMinBatch: a
// costly table's calibrated floor, below MinBatch): a pending batch that
// large closes as a device-sized one does.
type deviceFloor interface {
	DeviceMinBatch(id TableID) int
}

// DeviceMinBatch returns the smallest batch of table id that goes to a
// device: its calibrated floor (AutoConfig.SmallBatch) where it has one,
// else MinBatch.
func (e *Engine) DeviceMinBatch(id TableID) int { return e.minBatchFor(id) }

// placementGen is what a Coalescer asks of a backend, when it has it, to
// tell its users when DeviceServes's answers may have changed
// (Engine.PlacementGeneration).
type placementGen interface {
	PlacementGeneration() uint64
}

// DeviceServes reports whether a flow lookup of n keys in table id would
// go to a device now: n is at least the table's floor (DeviceMinBatch) and
// a device in service holds the table. A Coalescer passes lookups of the tables no device serves
// straight through.
func (e *Engine) DeviceServes(id TableID, n int) bool { return !e.cpuServes(id, n) }

// DefaultCoalescerMaxBatch is CoalescerConfig.MaxBatch's default.
const DefaultCoalescerMaxBatch = 8192

// Coalescer gathers the flow lookups that concurrent callers (the
// datapath's goroutines, one per receive queue) make of one table into
// shared device batches, GSwitch §7.4's dynamic batching across ports and
// queues: each caller's keys (flow.PackSoA order) are concatenated column
// by column into one batch, the batch is looked up in one backend call,
// and each caller gets its slice of the results. A caller blocks in
// LookupFlow until its results are in; the other goroutines of the
// datapath go on (reading their rings, running their actions) meanwhile.
//
// A pending batch of a table is closed, and looked up, when
//
//   - it holds MaxBatch keys or more (full);
//   - its oldest key has waited MaxDelay;
//   - it holds MinBatch keys or more and no batch is in flight (group
//     commit: the keys that come while it is looked up form the next);
//     here and below, MinBatch is the table's own floor where the backend
//     has a lower one (Engine.DeviceMinBatch: a costly table's batches go
//     to a device from a few keys);
//   - every active caller (see Enter) is blocked in the Coalescer, so that
//     no further keys can come before something completes, and either no
//     batch is in flight or the batch holds MinBatch keys or more (a
//     device-sized batch) and fewer than Depth batches are in flight;
//   - or it holds MinBatch keys and fewer than Depth batches are in flight
//     while no caller is registered as active (callers that do not use
//     Enter).
//
// Batches below MinBatch keys are answered by the backend's own rule (the
// Engine's: on the CPU). A table that no device would serve even a full
// batch of (Engine.DeviceServes; the CPU backend, a device that failed, a
// table the device cannot hold) is looked up directly in the caller, with
// no waiting: the CPU path costs what it cost without a Coalescer.
//
// The first caller of a batch (its leader) waits for it to close and runs
// the backend call; the others wait for its results. Results are exact:
// every key gets what a lookup of its own batch would have returned, and
// an error of the shared call is every member's error.
//
// A leader's wait for MaxDelay under a millisecond arms a timerfd from a
// pool (package kick), so that an idle process wakes at the deadline and
// not a millisecond later (the Go runtime's resolution when it sleeps).
//
// Each batch is timed in stages (Stages; see Stage): form, start, lookup
// and handback, a few time.Now calls per batch into atomic counters.
//
// Concurrency: one mutex (mu) guards the pending batches and the counters;
// the backend call runs without it, and the stage histogram needs none. A
// batch's closeAt is written under mu before its kick. The leader
// publishes the results under mu: it writes the outcome into each
// member's waiter and sends on its channel, after which no member reads
// the batch, so the batch is reused at once (recycle) and nothing is
// allocated per batch or per member once warm. Safe for concurrent use.
type Coalescer struct {
	be  FlowLooker
	ds  deviceServer // be's, or nil
	df  deviceFloor  // be's, or nil
	pg  placementGen // be's, or nil
	cfg CoalescerConfig

	mu       sync.Mutex
	pending  []*cgroup // the open batches, one per table at most (a slice: a few tables, scanned on every call)
	active   int       // callers between Enter and Leave
	blocked  int       // callers inside LookupFlow whose batch is pending or in flight (a batch's leader counts its members out when its results are in)
	inflight int       // batches closed and not yet answered
	stats    CoalescerStats
	free     []*cgroup     // finished batches, for new ones (no allocation per batch)
	waiters  sync.Pool     // *waiter: a member's wake-up (no allocation per member)
	timers   sync.Pool     // *time.Timer, stopped: the leaders' MaxDelay (no allocation per batch)
	direct   atomic.Uint64 // Stats.Direct (no lock on the direct path)
	kickers  kick.Pool     // keep the leaders' sub-millisecond MaxDelay on time (package kick)
	stages   StageHist     // per batch: form, start, lookup, handback (see Stage; no lock)
}

// CoalescerConfig configures a Coalescer.
type CoalescerConfig struct {
	MaxBatch int           // keys per batch at most before it is closed as full (0: DefaultCoalescerMaxBatch)
	MinBatch int           // the smallest batch worth a device (0: DefaultMinBatch)
	MaxDelay time.Duration // the longest a key waits for its batch to close (0: 100µs)
	Depth    int           // batches in flight before a quiescent batch waits (0: 4)
}

// CoalescerStats counts what a Coalescer did.
type CoalescerStats struct {
	Batches  uint64 // shared batches looked up
	Keys     uint64 // keys in them
	Callers  uint64 // caller lookups they answered
	Direct   uint64 // caller lookups passed straight through (no device for the table)
	ByFull   uint64 // batches closed full
	ByDelay  uint64 // batches closed by MaxDelay
	ByQuiet  uint64 // batches closed because every active caller was waiting
	ByIdle   uint64 // batches of MinBatch keys closed with a device slot free (none in flight, or no caller registered)
	MaxKeys  int    // the largest batch
	InFlight int    // batches in flight now
}

// cgroup is one shared batch: its members' keys and result slices.
type cgroup struct {
	table   TableID
	opened  time.Time
	n       int
	width   int // words per key (len(soa)/n of the first member)
	soas    [][]uint32
	ns      []int
	outs    [][]flow.RuleID
	closed  bool
	closeAt time.Time     // when close took it out of the pending batches
	doneAt  time.Time     // when its results were in
	kick    chan struct{} // wakes the leader once the batch is closed (cap 1)
	waiters []*waiter     // the members but the leader, woken when the results are in
	err     error
	keys    []uint32 // the concatenated columns
	results []flow.RuleID
}

// waiter is a member's wake-up: the leader writes the batch's outcome into
// it and sends on ch (cap 1), so that the member never reads the batch
// again and the batch can be reused at once (a channel closed per batch
// was an allocation per batch).
type waiter struct {
	ch     chan struct{}
	err    error
	doneAt time.Time
}

// NewCoalescer returns a Coalescer over be.
func NewCoalescer(be FlowLooker, cfg CoalescerConfig) (*Coalescer, error) {
	if cfg.MaxBatch < 0 || cfg.MinBatch < 0 || cfg.MaxDelay < 0 || cfg.Depth < 0 {
		return nil, fmt.Errorf("gpu: coalescer: negative setting in %+v", cfg)
	}
	if cfg.MaxBatch == 0 {
		cfg.MaxBatch = DefaultCoalescerMaxBatch
	}
	if cfg.MinBatch == 0 {
		cfg.MinBatch = DefaultMinBatch
	}
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = 100 * time.Microsecond
	}
	if cfg.Depth == 0 {
		cfg.Depth = 4
	}
	c := &Coalescer{be: be, cfg: cfg}
	c.ds, _ = be.(deviceServer)
	c.df, _ = be.(deviceFloor)
	c.pg, _ = be.(placementGen)
	return c, nil
}

// Coalesces reports whether lookups of table id are held for shared
// batches now: a device would serve a full batch of the table. When it
// is false LookupFlow passes the table's lookups straight to the backend,
// and a caller that makes no lookup of another table may as well call the
// backend itself, with no Enter, Leave or hand-off to a goroutine that
// may wait (the datapath's synchronous path). A backend that cannot tell
// (no DeviceServes) is always coalesced.
func (c *Coalescer) Coalesces(id TableID) bool {
	return c.ds == nil || c.ds.DeviceServes(id, max(c.cfg.MaxBatch, c.cfg.MinBatch))
}

// Generation is the backend's PlacementGeneration (0, constant, for a
// backend without one): Coalesces's answers change only after it has
// moved. Read it before asking Coalesces, and ask again once it differs.
func (c *Coalescer) Generation() uint64 {
	if c.pg == nil {
		return 0
	}
	return c.pg.PlacementGeneration()
}

// Config returns the Coalescer's settings, defaults filled in.
func (c *Coalescer) Config() CoalescerConfig { return c.cfg }

// Enter registers a caller as active: it will call LookupFlow soon (a
// datapath goroutine that holds a batch of frames). Every Enter is matched
// by a Leave once the caller has no more lookups to make for its batch.
// Active callers let a batch close as soon as all of them are waiting,
// without waiting out MaxDelay.
func (c *Coalescer) Enter() {
	c.mu.Lock()
	c.active++
	c.mu.Unlock()
}

// Leave ends an Enter.
func (c *Coalescer) Leave() {
	c.mu.Lock()
	c.active--
	c.evaluate()
	c.mu.Unlock()
}

// Stats returns the Coalescer's counters.
func (c *Coalescer) Stats() CoalescerStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.InFlight = c.inflight
	s.Direct = c.direct.Load()
	return s
}

// Stages returns the per-batch stage times of the shared batches (see
// Stage): form, start, lookup and handback are this Coalescer's; slot is
// the process's CUDA backends' (their slice lookups' wait for a staging
// slot), empty without one.
func (c *Coalescer) Stages() []StageStats {
	st := c.stages.Stats()
	st[StageSlot] = backendStages.Stats()[StageSlot]
	return st
}

// LookupFlow classifies n packets whose keys are in soa (flow.PackSoA
// order over table id's projection: exactly n words per projected word,
// as PackSoA returns them) into out[0:n], in a shared batch when a device
// serves the table (see Coalescer).
func (c *Coalescer) LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	if n <= 0 || !c.Coalesces(id) {
		if n > 0 {
			c.direct.Add(1)
		}
		return c.be.LookupFlow(id, soa, n, out)
	}
	if len(out) < n {
		return ErrShortOut
	}
	if len(soa)%n != 0 {
		return fmt.Errorf("%w: %d words for %d packets", ErrShortKeys, len(soa), n)
	}
	width := len(soa) / n
	c.mu.Lock()
	g := c.pendingOf(id)
	if g != nil && g.width != width {
		// Keys of another projection (the table was rebuilt between the
		// members' packing): close the batch, start another.
		c.close(g)
		g = nil
	}
	leader := g == nil
	var w *waiter
	if leader {
		g = c.newGroup(id, width)
		c.pending = append(c.pending, g)
	} else {
		w = c.waiter()
		g.waiters = append(g.waiters, w)
	}
	g.soas = append(g.soas, soa)
	g.ns = append(g.ns, n)
	g.outs = append(g.outs, out)
	g.n += n
	c.blocked++
	c.evaluate()
	c.mu.Unlock()

	if !leader {
		// The leader counted this caller out of blocked when the results
		// came in: a member wakes without taking mu.
		<-w.ch
		c.stages.Observe(StageHandBack, time.Since(w.doneAt))
		err := w.err
		w.err = nil
		c.waiters.Put(w)
		return err
	}
	c.await(g)
	members := len(g.ns) // closed: no caller joins any more
	start := time.Now()
	c.stages.Observe(StageStart, start.Sub(g.closeAt))
	c.run(g)
	g.doneAt = time.Now()
	c.stages.Observe(StageLookup, g.doneAt.Sub(start))
	c.mu.Lock()
	c.blocked -= members // the leader and every member: no longer waiting for the device
	c.inflight--
	c.stats.Batches++
	c.stats.Keys += uint64(g.n)
	c.stats.Callers += uint64(len(g.ns))
	c.stats.MaxKeys = max(c.stats.MaxKeys, g.n)
	err := g.err
	for _, w := range g.waiters {
		w.err, w.doneAt = g.err, g.doneAt
		w.ch <- struct{}{}
	}
	c.recycle(g)
	c.evaluate()
	c.mu.Unlock()
	return err
}

// waiter returns a member's wake-up, its channel empty.
func (c *Coalescer) waiter() *waiter {
	if w, ok := c.waiters.Get().(*waiter); ok {
		return w
	}
	return &waiter{ch: make(chan struct{}, 1)}
}

// newGroup returns an empty batch of table id (mu held): a finished one
// reused, with its buffers and its (empty) kick channel, or a new one.
func (c *Coalescer) newGroup(id TableID, width int) *cgroup {
	k := len(c.free)
	if k == 0 {
		return &cgroup{table: id, opened: time.Now(), width: width, kick: make(chan struct{}, 1)}
	}
	g := c.free[k-1]
	c.free[k-1] = nil
	c.free = c.free[:k-1]
	*g = cgroup{table: id, opened: time.Now(), width: width, kick: g.kick,
		soas: g.soas[:0], ns: g.ns[:0], outs: g.outs[:0], waiters: g.waiters[:0], keys: g.keys, results: g.results}
	return g
}

// await waits, as g's leader, until g is closed: by evaluate (a kick) or
// by its delay running out.
func (c *Coalescer) await(g *cgroup) {
	select {
	case <-g.kick:
		// Closed already (evaluate, as the leader added its keys: the
		// other callers were all waiting, or the batch was full): no timer
		// to arm, which costs three system calls with the kicker.
	default:
		c.sleep(g)
	}
	c.mu.Lock()
	if !g.closed {
		c.stats.ByDelay++
		c.close(g)
	}
	c.mu.Unlock()
}

// sleep waits for g's kick or for its delay to run out.
func (c *Coalescer) sleep(g *cgroup) {
	wait := c.cfg.MaxDelay - time.Since(g.opened)
	if wait <= 0 {
		return
	}
	t, _ := c.timers.Get().(*time.Timer)
	if t == nil {
		t = time.NewTimer(wait)
	} else {
		t.Reset(wait) // stopped, its channel empty (Go 1.23 timers)
	}
	var k *kick.Kicker
	if wait < kick.Threshold { // see package kick: else an idle process wakes ~1 ms late
		k = c.kickers.Get()
		k.Arm(wait)
	}
	select {
	case <-g.kick:
	case <-t.C:
	}
	t.Stop()
	c.timers.Put(t)
	c.kickers.Put(k)
}

// close takes g out of the pending batches and counts it in flight (mu
// held); its leader runs it.
func (c *Coalescer) close(g *cgroup) {
	if g.closed {
		return
	}
	g.closed = true
	g.closeAt = time.Now()
	c.stages.Observe(StageForm, g.closeAt.Sub(g.opened))
	if i := slices.Index(c.pending, g); i >= 0 {
		c.pending = slices.Delete(c.pending, i, i+1)
	}
	c.inflight++
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// evaluate closes the pending batches that are ready (mu held).
func (c *Coalescer) evaluate() {
	quiet := c.active > 0 && c.blocked >= c.active
	for i := 0; i < len(c.pending); {
		g, n := c.pending[i], len(c.pending)
		floor := c.cfg.MinBatch // a device-sized batch
		if c.df != nil {
			floor = max(1, min(floor, c.df.DeviceMinBatch(g.table)))
		}
		switch {
		case g.n >= c.cfg.MaxBatch:
			c.stats.ByFull++
			c.close(g)
		case quiet && (c.inflight == 0 || g.n >= floor && c.inflight < c.cfg.Depth):
			c.stats.ByQuiet++
			c.close(g)
		case c.inflight == 0 && g.n >= floor:
			// The device is idle and the batch is worth it: waiting for
			// the other callers would leave it idle longer (the keys that
			// come meanwhile form the next batch: group commit).
			c.stats.ByIdle++
			c.close(g)
		case c.active == 0 && g.n >= floor && c.inflight < c.cfg.Depth:
			c.stats.ByIdle++
			c.close(g)
		}
		if len(c.pending) == n { // (close took g out: the next one is at i now)
			i++
		}
	}
}

// pendingOf returns the open batch of table id, or nil (mu held).
func (c *Coalescer) pendingOf(id TableID) *cgroup {
	for _, g := range c.pending {
		if g.table == id {
			return g
		}
	}
	return nil
}

// run looks g up: one member alone with its own buffers, several through
// the concatenated columns, the results scattered back.
func (c *Coalescer) run(g *cgroup) {
	if len(g.ns) == 1 {
		g.err = c.be.LookupFlow(g.table, g.soas[0], g.ns[0], g.outs[0])
		return
	}
	n, p := g.n, g.width
	if cap(g.keys) < n*p {
		g.keys = make([]uint32, n*p)
	}
	keys := g.keys[:n*p]
	off := 0
	for m, soa := range g.soas {
		k := g.ns[m]
		for j := 0; j < p; j++ {
			copy(keys[j*n+off:j*n+off+k], soa[j*k:(j+1)*k])
		}
		off += k
	}
	if cap(g.results) < n {
		g.results = make([]flow.RuleID, n)
	}
	res := g.results[:n]
	g.err = c.be.LookupFlow(g.table, keys, n, res)
	if g.err == nil {
		off = 0
		for m, out := range g.outs {
			k := g.ns[m]
			copy(out[:k], res[off:off+k])
			off += k
		}
	}
}

// recycle keeps the finished batch g for a later one (mu held; its
// members were woken and read nothing of it after: their slices, dropped
// here, are theirs again).
func (c *Coalescer) recycle(g *cgroup) {
	select { // the kick of a batch closed by its delay is still in the channel
	case <-g.kick:
	default:
	}
	clear(g.soas)
	clear(g.outs)
	clear(g.waiters)
	g.err = nil
	if len(c.free) < 2*c.cfg.Depth {
		c.free = append(c.free, g)
	}
}

// Devices returns the number of device backends the Engine was given (in
// service or not).
func (e *Engine) Devices() int { return len(e.devs) }
