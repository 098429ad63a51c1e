package filters

import (
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/tables/filter"
)

// Config is one live filter. Ports empty: every port.
type Config struct {
	Name       string
	Expression string
	Ports      []uint32
	Capture    *CaptureConfig // nil: count only
}

// CaptureConfig is a filter's capture file: pcapng, rotated when it would
// grow past MaxBytes (0: never), keeping MaxFiles files in all (0: 1 when
// MaxBytes is 0, else 2).
type CaptureConfig struct {
	File     string
	MaxBytes int64
	MaxFiles int
}

// Info is a filter's description and counters (gswitchctl filters, the
// control socket's /v1/filters).
type Info struct {
	Name       string
	Expression string
	Ports      []uint32 // empty: every port
	Packets    uint64
	Bytes      uint64
	Capture    string `json:",omitempty"` // the capture file; empty: none
	Captured   uint64 `json:",omitempty"` // packets written to the capture
	Dropped    uint64 `json:",omitempty"` // packets the capture's full queue dropped
	WriteError string `json:",omitempty"` // the capture's first write error
	Added      time.Time
}

// ErrNotFound is Delete's and Info's error for a name no filter has.
var ErrNotFound = errors.New("no such filter")

// ErrExists is Add's error for a name in use.
var ErrExists = errors.New("filter exists")

// entry is one filter: its configuration, counters and capture, shared by
// every compiled generation that includes it.
type entry struct {
	cfg     Config
	added   time.Time
	packets atomic.Uint64
	bytes   atomic.Uint64
	capture *capture // nil: none
}

// portProg is one port's compiled filters.
type portProg struct {
	prog    *filter.Program
	entries []*entry // filter i of prog
	memo    bool     // keep answers in a filter.Memo (enough filters to pay)
	capture []uint64 // bit i: filter i captures; nil: none does
	pool    sync.Pool
}

// memoMinFilters: a program of fewer filters evaluates about as fast as
// a memo looks a frame up (~40 ns). (A variable: BenchmarkRx100 turns
// memos off.)
var memoMinFilters = 8

// scratch is one receive loop's per-batch state, pooled per portProg.
type scratch struct {
	ev      *filter.Evaluator // without a memo
	memo    *filter.Memo      // nil: none
	out     []uint64
	packets []uint64 // per filter, this batch
	bytes   []uint64

	// Per memo slot, this batch: the frames that took its answers and
	// their bytes, and the slots touched (counted per filter once per
	// slot at the batch's end).
	slotPackets []uint32
	slotBytes   []uint64
	touched     []int32
}

// generation is an immutable compiled set: the programs assembled by the
// last merge, the filters added since (each compiled alone: the side
// path) and the filters deleted since (not counted). A merge folds side
// and dead into the programs.
type generation struct {
	ports map[uint32]*portProg // ports that some filter names
	all   *portProg            // filters of every port, for ports not in ports; nil: none
	side  []*portProg          // one filter each, added after the programs were assembled
	dead  map[*entry]bool      // filters of the programs deleted since; nil: none
}

// on reports whether e's filter observes port.
func (e *entry) on(port uint32) bool {
	if len(e.cfg.Ports) == 0 {
		return true
	}
	_, ok := slices.BinarySearch(e.cfg.Ports, port)
	return ok
}

// Set is the live filters of a switch (a pipeline.RxStage). The zero Set
// is not usable: use New.
type Set struct {
	mu      sync.Mutex        // serializes Add, Delete, Close and the merge's swap
	entries map[string]*entry // copied on write: a snapshot stays valid
	order   []string          // names in the order added; copied on write
	gen     atomic.Pointer[generation]
	names   *filter.Names
	comp    *filter.Compiler // keeps each expression compiled: a change compiles one filter
	log     *slog.Logger
	queue   int

	seq     uint64     // changes so far (mu)
	merging bool       // a merge goroutine runs (mu)
	merged  *sync.Cond // on mu: signalled when a merge goroutine ends
}

// Options tune a Set. Zero values take defaults.
type Options struct {
	Names      *filter.Names // port and protocol names; nil: the system's
	Logger     *slog.Logger  // nil: slog.Default()
	QueueDepth int           // capture queue, in packets (default 4096)
}

// New returns an empty set.
func New(o Options) *Set {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.QueueDepth <= 0 {
		o.QueueDepth = 4096
	}
	if o.Names == nil {
		o.Names = filter.SystemNames()
	}
	s := &Set{entries: map[string]*entry{}, names: o.Names, log: o.Logger, queue: o.QueueDepth,
		comp: filter.NewCompiler(filter.LinkEthernet, false, o.Names)}
	s.merged = sync.NewCond(&s.mu)
	s.gen.Store(&generation{})
	return s
}

// Check compiles one filter alone: nil, or the error Add would give.
func (s *Set) Check(c Config) error {
	// Through the set's compiler: Add then finds the filter compiled.
	_, err := s.comp.Compile([]filter.Spec{{Name: c.Name, Expr: c.Expression}})
	if err != nil {
		return err
	}
	if c.Capture != nil {
		if c.Capture.File == "" {
			return fmt.Errorf("filter %s: capture without a file", c.Name)
		}
		if c.Capture.MaxBytes < 0 || c.Capture.MaxFiles < 0 {
			return fmt.Errorf("filter %s: capture max_bytes and max_files must not be negative", c.Name)
		}
	}
	return nil
}

// Add adds a filter, evaluated from the next batch on. A bad expression
// is an error naming the filter and the position; a name in use is
// ErrExists; either changes nothing.
func (s *Set) Add(c Config) error {
	if err := s.Check(c); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addLocked(c)
}

// addLocked is Add after the check, with s.mu held.
func (s *Set) addLocked(c Config) error {
	c.Ports = slices.Clone(c.Ports)
	slices.Sort(c.Ports)
	c.Ports = slices.Compact(c.Ports)
	if _, ok := s.entries[c.Name]; ok {
		return fmt.Errorf("filter %s: %w", c.Name, ErrExists)
	}
	e := &entry{cfg: c, added: time.Now()}
	// The side path: the filter compiled alone (Check left its unit in
	// the compiler) and evaluated after the programs from the next batch
	// on; the merge assembles it into them later.
	side, err := s.program(nil, []*entry{e})
	if err != nil {
		return err
	}
	if c.Capture != nil {
		if e.capture, err = openCapture(*c.Capture, s.queue, s.log.With("filter", c.Name)); err != nil {
			return fmt.Errorf("filter %s: %w", c.Name, err)
		}
	}
	next := maps(s.entries)
	next[c.Name] = e
	s.entries = next
	s.order = append(slices.Clip(s.order), c.Name)
	old := s.gen.Load()
	g := *old
	g.side = append(slices.Clip(old.side), side)
	s.publishLocked(&g)
	return nil
}

// publishLocked stores g (the next batch sees it) and starts a merge
// unless one runs: it folds g's side path and deleted filters into the
// programs. s.mu is held.
func (s *Set) publishLocked(g *generation) {
	s.gen.Store(g)
	s.seq++
	if !s.merging {
		s.merging = true
		go s.merge()
	}
}

// merge assembles the programs of the current filters off the datapath
// and off s.mu (the set's compiler has each filter compiled), then swaps
// them in if nothing changed meanwhile, else starts over on the newer
// set. Every generation it replaces counts each filter once per frame
// (in a program or on the side path), as the merged one does: the swap
// loses and double-counts nothing.
func (s *Set) merge() {
	for {
		s.mu.Lock()
		seq, entries, order := s.seq, s.entries, slices.Clone(s.order)
		s.mu.Unlock()
		g, err := s.compile(entries, order)
		s.mu.Lock()
		if err != nil { // cannot happen: each filter compiled on its own
			s.log.Error("merging the live filters", "err", err)
		}
		if err != nil || seq == s.seq {
			if err == nil {
				s.gen.Store(g)
			}
			s.merging = false
			s.merged.Broadcast()
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// Settle waits until the filters added and deleted so far are assembled
// into the programs (no side path left). Counting is exact either way;
// tests and benchmarks use it.
func (s *Set) Settle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.merging {
		s.merged.Wait()
	}
}

// Delete removes a filter from the next batch on and closes its capture
// (after writing what is queued).
func (s *Set) Delete(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deleteLocked(name)
}

// deleteLocked is Delete with s.mu held.
func (s *Set) deleteLocked(name string) error {
	e, ok := s.entries[name]
	if !ok {
		return fmt.Errorf("filter %s: %w", name, ErrNotFound)
	}
	next := maps(s.entries)
	delete(next, name)
	order := slices.DeleteFunc(slices.Clone(s.order), func(n string) bool { return n == name })
	s.entries, s.order = next, order
	// Off the side path, or marked dead in the programs until the merge.
	old := s.gen.Load()
	g := *old
	g.side = slices.DeleteFunc(slices.Clone(old.side), func(pp *portProg) bool { return pp.entries[0] == e })
	if len(g.side) == len(old.side) {
		g.dead = make(map[*entry]bool, len(old.dead)+1)
		for d := range old.dead {
			g.dead[d] = true
		}
		g.dead[e] = true
	}
	s.publishLocked(&g)
	if e.capture != nil {
		e.capture.close()
	}
	return nil
}

// Close stops every capture writer after it has written what is queued.
// Rx keeps counting afterwards but captures nothing.
func (s *Set) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.merging {
		s.merged.Wait()
	}
	for _, e := range s.entries {
		if e.capture != nil {
			e.capture.close()
		}
	}
}

func maps(m map[string]*entry) map[string]*entry {
	n := make(map[string]*entry, len(m)+1)
	for k, v := range m {
		n[k] = v
	}
	return n
}

// compile builds the generation of entries (names in order), reusing the
// programs of the current generation whose filters did not change.
func (s *Set) compile(entries map[string]*entry, order []string) (*generation, error) {
	g := &generation{ports: map[uint32]*portProg{}}
	var all []*entry
	named := map[uint32][]*entry{}
	for _, n := range order {
		e := entries[n]
		if len(e.cfg.Ports) == 0 {
			all = append(all, e)
			continue
		}
		for _, p := range e.cfg.Ports {
			named[p] = append(named[p], e)
		}
	}
	var err error
	old := s.gen.Load()
	if len(all) > 0 {
		if g.all, err = s.program(old.all, all); err != nil {
			return nil, err
		}
	}
	for p, es := range named {
		// A port's filters: those naming it and those of every port, in
		// the order added.
		es = append(es, all...)
		sort.SliceStable(es, func(i, j int) bool { return es[i].added.Before(es[j].added) })
		if g.ports[p], err = s.program(old.ports[p], es); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// program returns the program of filters es: prev itself when it has
// the same filters (a change elsewhere leaves this port's program as it
// is), else one assembled by the set's compiler.
func (s *Set) program(prev *portProg, es []*entry) (*portProg, error) {
	if prev != nil && slices.Equal(prev.entries, es) {
		return prev, nil
	}
	specs := make([]filter.Spec, len(es))
	for i, e := range es {
		specs[i] = filter.Spec{Name: e.cfg.Name, Expr: e.cfg.Expression}
	}
	p, err := s.comp.Compile(specs)
	if err != nil {
		return nil, err
	}
	pp := &portProg{prog: p, entries: es, memo: len(es) >= memoMinFilters}
	for i, e := range es {
		if e.cfg.Capture != nil { // (its capture opens after its side program is made)
			if pp.capture == nil {
				pp.capture = make([]uint64, p.Words())
			}
			pp.capture[i/64] |= 1 << (i % 64)
		}
	}
	pp.pool.New = func() any {
		sc := &scratch{out: make([]uint64, p.Words()), packets: make([]uint64, len(es)), bytes: make([]uint64, len(es))}
		if pp.memo {
			sc.memo = filter.NewMemo(p)
			sc.slotPackets, sc.slotBytes = make([]uint32, filter.MemoSlots), make([]uint64, filter.MemoSlots)
		} else {
			sc.ev = filter.NewEvaluator(p)
		}
		return sc
	}
	return pp, nil
}

// Rx evaluates the port's filters on a batch (pipeline.RxStage); frames
// pass unchanged. One generation serves the whole batch: the port's
// program, then the side path's filters that observe the port.
func (s *Set) Rx(port uint32, frames [][]byte, scratchBuf []byte) ([][]byte, []byte) {
	g := s.gen.Load()
	if len(frames) == 0 {
		return frames, scratchBuf
	}
	pp := g.ports[port]
	if pp == nil {
		pp = g.all
	}
	if pp != nil {
		pp.rx(frames, g.dead)
	}
	for _, sp := range g.side {
		if sp.entries[0].on(port) {
			sp.rx(frames, nil)
		}
	}
	return frames, scratchBuf
}

// rx evaluates pp's filters on frames and adds to their counters, those
// in dead excepted. With a memo, a frame's answers are usually a slot's
// (filter.Memo: a frame that reads what an earlier one read gets its
// answers); the frames and bytes are summed per slot and added to the
// slot's filters once at the batch's end. Capturing filters are offered
// their frames one by one.
func (pp *portProg) rx(frames [][]byte, dead map[*entry]bool) {
	sc := pp.pool.Get().(*scratch)
	var now int64
	if sc.memo != nil {
		sc.memo.Begin()
	}
	for _, f := range frames {
		n := uint32(len(f))
		var out []uint64
		if sc.memo == nil {
			out = sc.out
			sc.ev.Eval(f, n, out)
		} else {
			var slot int
			out, slot = sc.memo.Eval(f, n)
			if slot >= 0 {
				if sc.slotPackets[slot] == 0 {
					sc.touched = append(sc.touched, int32(slot))
				}
				sc.slotPackets[slot]++
				sc.slotBytes[slot] += uint64(n)
				if pp.capture != nil {
					now = pp.offer(out, f, now, dead)
				}
				continue
			}
		}
		sc.count(out, 1, uint64(n))
		if pp.capture != nil {
			now = pp.offer(out, f, now, dead)
		}
	}
	for _, slot := range sc.touched {
		sc.count(sc.memo.Answers(int(slot)), uint64(sc.slotPackets[slot]), sc.slotBytes[slot])
		sc.slotPackets[slot], sc.slotBytes[slot] = 0, 0
	}
	sc.touched = sc.touched[:0]
	for i, n := range sc.packets {
		if n != 0 {
			if e := pp.entries[i]; dead == nil || !dead[e] {
				e.packets.Add(n)
				e.bytes.Add(sc.bytes[i])
			}
			sc.packets[i], sc.bytes[i] = 0, 0
		}
	}
	pp.pool.Put(sc)
}

// count adds packets and bytes to the batch's counts of the filters set
// in out.
func (sc *scratch) count(out []uint64, packets, bytes uint64) {
	for w, word := range out {
		for word != 0 {
			i := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			sc.packets[i] += packets
			sc.bytes[i] += bytes
		}
	}
}

// offer offers frame f to the captures of the filters set in out (dead
// excepted); now is the batch's capture time, taken at the first offer.
func (pp *portProg) offer(out []uint64, f []byte, now int64, dead map[*entry]bool) int64 {
	for w, word := range out {
		word &= pp.capture[w]
		for word != 0 {
			i := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if e := pp.entries[i]; e.capture != nil && (dead == nil || !dead[e]) {
				if now == 0 {
					now = time.Now().UnixNano()
				}
				e.capture.offer(f, now)
			}
		}
	}
	return now
}

// Filters describes every filter, in the order added.
func (s *Set) Filters() []Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Info, 0, len(s.order))
	for _, n := range s.order {
		out = append(out, s.entries[n].info())
	}
	return out
}

// Info describes one filter.
func (s *Set) Info(name string) (Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[name]
	if !ok {
		return Info{}, fmt.Errorf("filter %s: %w", name, ErrNotFound)
	}
	return e.info(), nil
}

func (e *entry) info() Info {
	in := Info{Name: e.cfg.Name, Expression: e.cfg.Expression, Ports: slices.Clone(e.cfg.Ports),
		Packets: e.packets.Load(), Bytes: e.bytes.Load(), Added: e.added}
	if in.Ports == nil {
		in.Ports = []uint32{}
	}
	if c := e.capture; c != nil {
		in.Capture = c.cfg.File
		in.Captured = c.written.Load()
		in.Dropped = c.dropped.Load()
		if err := c.err.Load(); err != nil {
			in.WriteError = (*err).Error()
		}
	}
	return in
}

// packetOf is a queued capture record.
type packetOf = pcapfile.Packet
