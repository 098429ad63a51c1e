package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
)

// coalesceTable loads a synthetic flow table into a CPU backend and
// returns it, the table's projection and traffic keys.
func coalesceTable(t testing.TB, id TableID) (*CPU, []int, []flow.Key) {
	t.Helper()
	im, proj, keys := coalesceImage(t)
	b := NewCPU()
	t.Cleanup(func() { b.Close() })
	if err := b.Load(id, Flow, im); err != nil {
		t.Fatal(err)
	}
	return b, proj, keys
}

// coalesceImage builds a synthetic flow table: its image, projection and
// traffic keys.
func coalesceImage(t testing.TB) (*bubble.Image, []int, []flow.Key) {
	t.Helper()
	sp, err := flow.ParseSynthetic("2000,16")
	if err != nil {
		t.Fatal(err)
	}
	rules := sp.Generate(5)
	tab, err := flow.NewTable(flow.Config{Algo: flow.Tuple, MaxEntries: 1 << 14, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if _, _, err := tab.Add(r, 0); err != nil {
			t.Fatal(err)
		}
	}
	return tab.Mirror().Sync().Full, tab.UsedWords(), flow.SynthTraffic(sp, rules, 4096, 6)
}

// slowLooker is a backend that records each call's batch size and holds
// every call until gate is closed (nil gate: no wait).
type slowLooker struct {
	be    FlowLooker
	gate  chan struct{}
	calls atomic.Int64
	sizes chan int
	fail  error
}

func (s *slowLooker) LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	s.calls.Add(1)
	if s.sizes != nil {
		s.sizes <- n
	}
	if s.gate != nil {
		<-s.gate
	}
	if s.fail != nil {
		return s.fail
	}
	return s.be.LookupFlow(id, soa, n, out)
}

// TestCoalescerExactResults: many goroutines look up slices of the traffic
// through a Coalescer at once (entering as the datapath's goroutines do);
// every result equals a direct lookup of the same keys, and batches were
// shared.
func TestCoalescerExactResults(t *testing.T) {
	const id = 7
	cpu, proj, keys := coalesceTable(t, id)
	want := make([]flow.RuleID, len(keys))
	if err := cpu.LookupFlow(id, flow.PackSoA(keys, proj, nil), len(keys), want); err != nil {
		t.Fatal(err)
	}
	c, err := NewCoalescer(cpu, CoalescerConfig{MaxBatch: 1024, MinBatch: 256, MaxDelay: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	const callers, rounds = 8, 40
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var soa []uint32
			out := make([]flow.RuleID, 256)
			for r := range rounds {
				n := 1 + (g*37+r*11)%200
				lo := (g*512 + r*97) % (len(keys) - n)
				soa = flow.PackSoA(keys[lo:lo+n], proj, soa)
				c.Enter()
				err := c.LookupFlow(id, soa, n, out)
				c.Leave()
				if err != nil {
					t.Errorf("caller %d round %d: %v", g, r, err)
					return
				}
				for i := range n {
					if out[i] != want[lo+i] {
						t.Errorf("caller %d round %d key %d: rule %d, want %d", g, r, i, out[i], want[lo+i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	s := c.Stats()
	t.Logf("%+v", s)
	if s.Callers != callers*rounds || s.Direct != 0 {
		t.Fatalf("stats %+v: want %d lookups answered through batches", s, callers*rounds)
	}
	if s.Batches >= s.Callers {
		t.Errorf("no batch was shared: %d batches for %d lookups", s.Batches, s.Callers)
	}
	if s.InFlight != 0 {
		t.Errorf("%d batches still in flight", s.InFlight)
	}
}

// TestCoalescerOneBatchWhileInFlight: while a slow batch is in flight,
// other callers' keys gather into one pending batch, which closes as soon
// as every active caller waits (not after MaxDelay, an hour here), and is
// looked up in one backend call.
func TestCoalescerOneBatchWhileInFlight(t *testing.T) {
	const id = 2
	cpu, proj, keys := coalesceTable(t, id)
	slow := &slowLooker{be: cpu, gate: make(chan struct{}), sizes: make(chan int, 16)}
	c, err := NewCoalescer(slow, CoalescerConfig{MaxBatch: 1 << 16, MinBatch: 1, MaxDelay: time.Hour, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	const callers, n = 6, 100
	look := func(lo int) error {
		out := make([]flow.RuleID, n)
		c.Enter()
		defer c.Leave()
		if err := c.LookupFlow(id, flow.PackSoA(keys[lo:lo+n], proj, nil), n, out); err != nil {
			return err
		}
		want := make([]flow.RuleID, n)
		if err := cpu.LookupFlow(id, flow.PackSoA(keys[lo:lo+n], proj, nil), n, want); err != nil {
			return err
		}
		for i := range want {
			if out[i] != want[i] {
				return errors.New("result differs from the direct lookup")
			}
		}
		return nil
	}
	errs := make(chan error, callers+1)
	go func() { errs <- look(0) }()
	if got := <-slow.sizes; got != n { // the first caller alone: quiet, nothing in flight
		t.Fatalf("first batch %d keys, want %d", got, n)
	}
	for g := range callers {
		go func() { errs <- look(n * (g + 1)) }()
	}
	// Every caller is now waiting (one in flight, six pending, Depth 1):
	// the pending batch waits for the slot.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c.mu.Lock()
		b := c.blocked
		c.mu.Unlock()
		if b == callers+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers blocked, want %d", b, callers+1)
		}
		time.Sleep(time.Millisecond)
	}
	if slow.calls.Load() != 1 {
		t.Fatalf("%d backend calls before the first returned, want 1", slow.calls.Load())
	}
	close(slow.gate)
	select {
	case got := <-slow.sizes:
		if got != callers*n {
			t.Fatalf("second batch %d keys, want %d", got, callers*n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the pending batch did not close when the slot freed")
	}
	for range callers + 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s := c.Stats(); s.Batches != 2 || s.Callers != callers+1 || s.ByDelay != 0 {
		t.Fatalf("stats %+v: want 2 batches of %d lookups, none closed by delay", s, callers+1)
	}
}

// TestCoalescerDelayAndErrors: without Enter a small batch closes after
// MaxDelay; a backend error reaches every member of the batch.
func TestCoalescerDelayAndErrors(t *testing.T) {
	const id = 1
	cpu, proj, keys := coalesceTable(t, id)
	boom := errors.New("device gone")
	slow := &slowLooker{be: cpu, fail: boom}
	c, err := NewCoalescer(slow, CoalescerConfig{MinBatch: 4096, MaxDelay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]flow.RuleID, 10)
			if err := c.LookupFlow(id, flow.PackSoA(keys[g*10:g*10+10], proj, nil), 10, out); !errors.Is(err, boom) {
				t.Errorf("caller %d: error %v, want %v", g, err, boom)
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Errorf("batch closed after %v, before MaxDelay", d)
	}
	if s := c.Stats(); s.ByDelay == 0 {
		t.Errorf("stats %+v: want batches closed by delay", s)
	}
	if _, err := NewCoalescer(cpu, CoalescerConfig{MaxDelay: -1}); err == nil {
		t.Error("a negative delay was accepted")
	}
}

// TestCoalescerDirectWithoutDevice: over an Engine with no device every
// lookup goes straight to the CPU backend, with no batch and no waiting.
func TestCoalescerDirectWithoutDevice(t *testing.T) {
	const id = 4
	cpu, proj, keys := coalesceTable(t, id)
	e := NewEngine(EngineConfig{})
	defer e.Close()
	im, _, _ := coalesceImage(t)
	if err := e.Load(id, Flow, im); err != nil {
		t.Fatal(err)
	}
	c, err := NewCoalescer(e, CoalescerConfig{MaxDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]flow.RuleID, 64)
	want := make([]flow.RuleID, 64)
	soa := flow.PackSoA(keys[:64], proj, nil)
	if err := c.LookupFlow(id, soa, 64, out); err != nil {
		t.Fatal(err)
	}
	if err := cpu.LookupFlow(id, soa, 64, want); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("key %d: %d, want %d", i, out[i], want[i])
		}
	}
	if s := c.Stats(); s.Direct != 1 || s.Batches != 0 {
		t.Fatalf("stats %+v: want one direct lookup", s)
	}
	if e.Devices() != 0 || e.DeviceServes(id, 1<<20) {
		t.Fatal("an engine without devices says a device serves the table")
	}
}

// TestCoalescerGeneration: Coalesces follows the Engine's placement, and
// Generation moves whenever it may have changed: a calibration that moves
// the table to the device, a device taken out of service. A backend that
// cannot tell is always coalesced, at generation 0.
func TestCoalescerGeneration(t *testing.T) {
	const id = 3
	var devNs atomic.Uint64 // math.Float64bits
	devNs.Store(math.Float64bits(1e9))
	e := NewEngine(EngineConfig{Devices: []Backend{NewCPU()}, MinBatch: 64, Mode: ModeAuto,
		Auto: AutoConfig{Delay: time.Millisecond, HostNsPerKey: -1}, Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)),
		measureDev: func(Backend, TableID, *calibSample) (float64, error) { return math.Float64frombits(devNs.Load()), nil }})
	defer e.Close()
	tab, err := flow.NewTable(flow.Config{Algo: flow.Tuple, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	addClasses(t, tab, 0, 1)
	g0 := e.PlacementGeneration()
	if err := e.Load(id, Flow, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	c, err := NewCoalescer(e, CoalescerConfig{MinBatch: 64})
	if err != nil {
		t.Fatal(err)
	}
	g1 := c.Generation()
	if g1 == g0 {
		t.Errorf("loading a new table left the generation at %d", g0)
	}
	waitCalibrated(t, e, id)
	if c.Coalesces(id) {
		t.Fatal("a table on the CPU is coalesced")
	}
	devNs.Store(math.Float64bits(1e-3))
	addClasses(t, tab, 1, 1)
	syncTable(t, e, id, tab)
	waitBackend(t, e, id, "device")
	g2 := c.Generation()
	if g2 == g1 || !c.Coalesces(id) {
		t.Fatalf("moved to the device: generation %d (was %d), coalesced %v", g2, g1, c.Coalesces(id))
	}

	// A device that fails moves the generation, and nothing is coalesced.
	f := newFlaky(1) // the Load succeeds, the first lookup fails
	e2 := NewEngine(EngineConfig{Devices: []Backend{f}, MinBatch: 1, Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))})
	defer e2.Close()
	if err := e2.Load(id, Flow, tab.Mirror().Image().Clone()); err != nil {
		t.Fatal(err)
	}
	c2, err := NewCoalescer(e2, CoalescerConfig{MinBatch: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := c2.Generation()
	if !c2.Coalesces(id) {
		t.Fatal("a table on a device in service is not coalesced")
	}
	out := make([]flow.RuleID, 4)
	if err := e2.LookupFlow(id, make([]uint32, 4*len(tab.UsedWords())), 4, out); err != nil {
		t.Fatal(err) // the CPU answers for the failed device
	}
	if c2.Generation() == g || c2.Coalesces(id) {
		t.Fatalf("after the device failed: generation %d (was %d), coalesced %v", c2.Generation(), g, c2.Coalesces(id))
	}

	c3, err := NewCoalescer(FlowLooker(e2.CPU()), CoalescerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if c3.Generation() != 0 || !c3.Coalesces(id) {
		t.Errorf("a backend without placement: generation %d, coalesced %v", c3.Generation(), c3.Coalesces(id))
	}
}

// echoLooker answers each key with its first word as the rule id.
type echoLooker struct{}

func (echoLooker) LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	for i := range n {
		out[i] = flow.RuleID(soa[i])
	}
	return nil
}

// TestCoalescerAllocatesNothing: two callers looking up through shared
// batches (a leader and a member each time, or one alone) allocate
// nothing in the Coalescer once warm: a finished batch is reused and a
// member's wake-up comes from a pool. The answers are each caller's own.
func TestCoalescerAllocatesNothing(t *testing.T) {
	// MinBatch above both callers' keys: a batch closes when both wait in
	// it (or its delay runs out), so most have a leader and a member.
	c, err := NewCoalescer(echoLooker{}, CoalescerConfig{MinBatch: 64, MaxDelay: 200 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	const n, rounds = 8, 3000
	run := func(rounds int) error {
		errs := make([]error, 2)
		// Both are callers before either looks up: on a loaded host one
		// could otherwise run all its rounds alone.
		activeCallers(c, 2, func(k int) {
			soa, out := make([]uint32, n), make([]flow.RuleID, n)
			for r := range rounds {
				for i := range soa {
					soa[i] = uint32(k<<20 | r<<4 | i)
				}
				if err := c.LookupFlow(1, soa, n, out); err != nil {
					errs[k] = err
					return
				}
				for i := range out {
					if out[i] != flow.RuleID(soa[i]) {
						errs[k] = fmt.Errorf("caller %d round %d: key %d answered %d, want %d", k, r, i, out[i], soa[i])
						return
					}
				}
			}
		})
		return errors.Join(errs...)
	}
	if err := run(200); err != nil { // warm: the pools and the free batches
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := run(rounds); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	per := float64(after.Mallocs-before.Mallocs) / (2 * rounds)
	st := c.Stats()
	t.Logf("%.4f allocations a lookup; %d batches for %d callers", per, st.Batches, st.Callers)
	if per > 0.02 && !raceEnabled {
		t.Errorf("%.4f allocations a lookup through the Coalescer, want none", per)
	}
	if st.Callers <= st.Batches {
		t.Errorf("no batch had two members (%d batches, %d callers): the members' path was not run", st.Batches, st.Callers)
	}
}

// activeCallers runs fn(0) ... fn(n-1) on goroutines of their own, each an
// active caller of c (Enter to Leave) from before any of them starts to
// after it returns, and waits for them all.
func activeCallers(c *Coalescer, n int, fn func(k int)) {
	var wg, entered sync.WaitGroup
	entered.Add(n)
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Enter()
			defer c.Leave()
			entered.Done()
			entered.Wait()
			fn(k)
		}()
	}
	wg.Wait()
}
