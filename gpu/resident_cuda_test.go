//go:build cuda

package gpu

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gswitch/gswitch/tables/flow"
)

// withResident turns the resident lookups on, with n slots and an idle
// time of idle, for the backends the test starts, and back off at its end.
func withResident(t *testing.T, n int, idle time.Duration) {
	t.Helper()
	oldN, oldIdle := residentSlots, residentIdle
	residentSlots, residentIdle = n, idle
	t.Cleanup(func() { residentSlots, residentIdle = oldN, oldIdle })
}

// residentCUDA is newTestCUDA with resident lookups on; it fails if they
// did not start.
func residentCUDA(t *testing.T, n int, idle time.Duration) *CUDA {
	t.Helper()
	withResident(t, n, idle)
	c := newTestCUDA(t)
	if c.res == nil || !strings.Contains(c.Device(), "resident lookups:") {
		t.Fatalf("resident lookups did not start: %s", c.Device())
	}
	return c
}

// TestCUDAResidentFlowRandom is the flow conformance of TestCUDAFlowRandom
// with resident lookups (8 slots, an idle time of 200 µs, so that the
// kernel leaves and is launched again many times): its small lookups (1, 7 and 64
// keys after the load and after every round of updates, and the garbage
// images') are answered by the resident kernel, bit for bit as the
// flow.Table says, every update before them seen.
func TestCUDAResidentFlowRandom(t *testing.T) {
	c := residentCUDA(t, 8, 200*time.Microsecond)
	testRandomFlowAll(t, c, true)
	_, posts, launches := c.ResidentStats()
	t.Logf("resident: %d lookups posted, %d launches", posts, launches)
	if posts == 0 || launches < 2 {
		t.Fatalf("resident: %d lookups posted, %d launches: the small lookups did not go to the resident kernel, or it was never launched again", posts, launches)
	}
}

// TestCUDAResidentGatherer is TestCUDAGatherer with resident lookups (4
// slots: more batches than slots, so that some go through the streams):
// 8 goroutines' shares, exact against the CPU backend.
func TestCUDAResidentGatherer(t *testing.T) {
	c := residentCUDA(t, 4, 500*time.Microsecond)
	cpu, proj, keys := coalesceTable(t, 0)
	im, _, _ := coalesceImage(t)
	e := NewEngine(EngineConfig{Devices: []Backend{c}, MinBatch: 1})
	t.Cleanup(func() { e.Close() })
	if err := e.Load(0, Flow, im); err != nil {
		t.Fatal(err)
	}
	testGathererExact(t, e, cpu, proj, keys)
	_, posts, launches := c.ResidentStats()
	t.Logf("resident: %d lookups posted, %d launches", posts, launches)
	if posts == 0 {
		t.Fatal("no lookup went to the resident kernel")
	}
	if s := e.Stats(); s.KeysOnDevice == 0 || s.Fallbacks != 0 {
		t.Fatalf("engine stats %+v: not on the device, or fallbacks", s)
	}
}

// TestCUDAResidentClose closes a backend whose resident kernel is alive
// (an idle time of 1 s): Close stops it rather than waiting for it to go
// idle.
func TestCUDAResidentClose(t *testing.T) {
	c := residentCUDA(t, 2, time.Second) // its cleanup's Close, after this one, does nothing
	cpu, proj, keys := coalesceTable(t, 0)
	im, _, _ := coalesceImage(t)
	if err := c.Load(0, Flow, im); err != nil {
		t.Fatal(err)
	}
	testGathererExact(t, c, cpu, proj, keys)
	// The Gatherer's Close freed its batches, which stops the kernel: a
	// lookup of 7 keys launches it again.
	soa := flow.PackSoA(keys[:7], proj, nil)
	out := make([]flow.RuleID, 7)
	if err := c.LookupFlow(0, soa, 7, out); err != nil {
		t.Fatal(err)
	}
	if !c.res.alive() {
		t.Fatal("the resident kernel is not alive after the lookups")
	}
	t0 := time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 500*time.Millisecond {
		t.Fatalf("Close took %v with a resident kernel alive", d)
	}
}

// BenchmarkCUDAResidentLatency measures a resident lookup's latency on
// the 131,072-rule, 512-class set (merged tuple search), from Submit to
// the caller seeing its results: callers 1 or 8 at once (each its own
// batch, so its own slot), n keys a lookup, a gap between a caller's
// lookups (0, or 25 µs, as under a datapath's traffic), the caller
// spinning on Ready (a worker's reap) or in Wait (its finishOldest), and
// the kernel's idle time 2 ms (the default: under these lookups it never
// leaves) or 20 µs (with a gap of 25 µs it leaves between a caller's
// lookups, so that most of them find it gone: a launch's cost). It
// reports p50, p90, p99 and p99.9 in µs over 4,000 lookups a caller after
// 200 untimed ones, the kernel's own part of them (svc: from its block
// seeing the request to its results written, by the device's clock; the
// slot's RS_SVC) at the p50 and p99, the share of lookups whose block
// staged its table first (a launch's first), and the launches per 1,000
// lookups; every answer is checked against the flow.Table's.
func BenchmarkCUDAResidentLatency(b *testing.B) {
	s, err := flow.ParseSynthetic("131072,512")
	if err != nil {
		b.Fatal(err)
	}
	rules := s.Generate(1)
	keys := flow.SynthTraffic(s, rules, 1<<12, 2)
	tab, err := flow.NewTable(flow.Config{Algo: flow.Merge, MaxEntries: 300000})
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range rules {
		tab.Add(r, 0)
	}
	want := make([]flow.RuleID, len(keys))
	tab.LookupBatch(keys, want)
	proj := tab.UsedWords()
	im := tab.Mirror().Sync().Full
	oldN, oldIdle := residentSlots, residentIdle
	defer func() { residentSlots, residentIdle = oldN, oldIdle }()
	for _, idle := range []time.Duration{2 * time.Millisecond, 20 * time.Microsecond} {
		residentSlots, residentIdle = 64, idle
		c, err := NewCUDA(0)
		if err != nil {
			b.Skipf("SKIPPED: no usable CUDA device: %v", err)
		}
		if c.res == nil {
			c.Close()
			b.Fatalf("resident lookups did not start: %s", c.Device())
		}
		if err := c.Load(7, Flow, im); err != nil {
			c.Close()
			b.Fatal(err)
		}
		type cfg struct {
			callers, n int
			gap        time.Duration
			wait       bool
		}
		var cfgs []cfg
		for _, callers := range []int{1, 8} {
			for _, gap := range []time.Duration{0, 25 * time.Microsecond} {
				for _, wait := range []bool{false, true} {
					cfgs = append(cfgs, cfg{callers, 4, gap, wait})
				}
			}
		}
		cfgs = append(cfgs, cfg{8, 16, 25 * time.Microsecond, false}, cfg{8, 64, 25 * time.Microsecond, false})
		for _, k := range cfgs {
			how := "spin"
			if k.wait {
				how = "wait"
			}
			name := fmt.Sprintf("idle=%v/callers=%d/n=%d/gap=%v/%s", idle, k.callers, k.n, k.gap, how)
			b.Run(name, func(b *testing.B) {
				ds, svc, staged, launches, err := residentLatency(c, proj, keys, want, k.callers, k.n, k.gap, k.wait)
				if err != nil {
					b.Fatal(err)
				}
				q := func(ds []time.Duration, p float64) float64 {
					if len(ds) == 0 {
						return 0
					}
					return float64(ds[int(p*float64(len(ds)-1))].Nanoseconds()) / 1e3
				}
				b.ReportMetric(q(ds, 0.5), "p50-us")
				b.ReportMetric(q(ds, 0.9), "p90-us")
				b.ReportMetric(q(ds, 0.99), "p99-us")
				b.ReportMetric(q(ds, 0.999), "p99.9-us")
				b.ReportMetric(q(svc, 0.5), "svc-p50-us")
				b.ReportMetric(q(svc, 0.99), "svc-p99-us")
				b.ReportMetric(float64(staged)*100/float64(len(ds)), "staged-%")
				b.ReportMetric(float64(launches)*1000/float64(len(ds)), "launches/1k")
			})
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// residentLatency runs BenchmarkCUDAResidentLatency's lookups on c's
// table 7: callers goroutines, each 200 untimed and 4,000 timed lookups of
// n keys (keys taken in turn), and returns the timed latencies and the
// kernel's service times (those it reported) sorted, the lookups whose
// block staged its table first, and the kernel's launches meanwhile. An
// answer that differs from want is an error.
func residentLatency(c *CUDA, proj []int, keys []flow.Key, want []flow.RuleID, callers, n int, gap time.Duration, wait bool) ([]time.Duration, []time.Duration, int, uint64, error) {
	const warm, timed = 200, 4000
	var mu sync.Mutex
	var all, svcs []time.Duration
	staged := 0
	var firstErr error
	_, _, l0 := c.ResidentStats()
	var wg sync.WaitGroup
	for g := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := func() error {
				bt, err := c.NewBatch(Flow, len(proj), residentKeys)
				if err != nil {
					return err
				}
				defer bt.Free()
				cb, ok := bt.impl.(*cudaBatch)
				if !ok || cb.rslot < 0 {
					return fmt.Errorf("caller %d: the batch does not go to the resident kernel", g)
				}
				mine, svc := make([]time.Duration, 0, timed), make([]time.Duration, 0, timed)
				st := 0
				soa := make([]uint32, 0, len(proj)*residentKeys)
				for i := range warm + timed {
					at := (g*7919 + i*n) % (len(keys) - n)
					soa = flow.PackSoA(keys[at:at+n], proj, soa[:0])
					for j := range proj { // PackSoA's stride is n; the batch's is its Cap
						copy(bt.Keys[j*bt.Cap:j*bt.Cap+n], soa[j*n:(j+1)*n])
					}
					bt.N = n
					t0 := time.Now()
					if err := c.Submit(7, bt); err != nil {
						return err
					}
					if !cb.rposted {
						return fmt.Errorf("caller %d, lookup %d: not posted to the resident kernel", g, i)
					}
					if !wait {
						for !bt.Ready() {
						}
					}
					if err := bt.Wait(); err != nil {
						return err
					}
					d := time.Since(t0)
					if i >= warm {
						mine = append(mine, d)
						// The kernel writes the service word after the
						// completion word: wait for this request's.
						sw := (*uint64)(unsafe.Pointer(&c.res.slot(cb.rslot)[rsSvc]))
						for t1 := time.Now(); time.Since(t1) < time.Millisecond; {
							if v := atomic.LoadUint64(sw); uint32(v>>32) == c.res.reqs[cb.rslot] {
								svc = append(svc, time.Duration(v&0x7FFFFFFF))
								if v&(1<<31) != 0 {
									st++
								}
								break
							}
						}
					}
					for j, r := range bt.Rules()[:n] {
						if r != want[at+j] {
							return fmt.Errorf("caller %d, lookup %d, key %d: rule %d, want %d", g, i, at+j, r, want[at+j])
						}
					}
					for t1 := time.Now(); time.Since(t1) < gap; {
					}
				}
				mu.Lock()
				all, svcs, staged = append(all, mine...), append(svcs, svc...), staged+st
				mu.Unlock()
				return nil
			}()
			if err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	_, _, l1 := c.ResidentStats()
	if firstErr != nil {
		return nil, nil, 0, 0, firstErr
	}
	slices.Sort(all)
	slices.Sort(svcs)
	return all, svcs, staged, l1 - l0, nil
}
