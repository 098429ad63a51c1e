//go:build cuda

package gpu

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/flow"
)

// BenchmarkCUDASmallBatchLatency measures what a small lookup batch (the
// datapath's shared batches hold a few hundred keys) costs in time on the
// 131,072-rule, 512-class set: the flow kernel alone (refilled lanes, and
// a warp per packet, the mode of batches up to flowWarpMax; for Bloom
// images also flow_lookup_split with G threads a packet), and a whole LookupFlow of the backend (keys in, kernel, results
// out, the caller's wait) from one caller and from eight at once, as
// p50/p99 microseconds of 300 calls each after 20 untimed ones (until
// 2026-11-26 afternoon the first calls, which make the callers' lookup
// slots, were timed too). The answers of every path are checked against
// the backend's own answers for the whole traffic.
func BenchmarkCUDASmallBatchLatency(b *testing.B) {
	c, err := NewCUDA(0)
	if err != nil {
		b.Skipf("SKIPPED: no usable CUDA device: %v", err)
	}
	defer c.Close()
	s, err := flow.ParseSynthetic("131072,512")
	if err != nil {
		b.Fatal(err)
	}
	rules := s.Generate(1)
	keys := flow.SynthTraffic(s, rules, 1<<14, 2)
	for ai, algo := range []flow.Algo{flow.Merge, flow.Bloom} {
		tab, err := flow.NewTable(flow.Config{Algo: algo, MaxEntries: 300000})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rules {
			tab.Add(r, 0)
		}
		id := TableID(120 + ai)
		if err := c.Load(id, Flow, tab.Mirror().Sync().Full); err != nil {
			b.Fatal(err)
		}
		proj := tab.UsedWords()
		want := make([]flow.RuleID, len(keys))
		if err := c.LookupFlow(id, flow.PackSoA(keys, proj, nil), len(keys), want); err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{64, 256, 1024, 4096, 16384} {
			soa := flow.PackSoA(keys[:n], proj, nil)
			check := func(b *testing.B, what string, got []flow.RuleID) {
				for i := range n {
					if got[i] != want[i] {
						b.Errorf("%s: packet %d: rule %d, want %d", what, i, got[i], want[i])
						return
					}
				}
			}
			name := fmt.Sprintf("%v/n=%d", algo, n)
			for _, m := range []struct {
				name string
				mode int
			}{{"refill", FlowRefill}, {"warp", FlowWarpPerPacket}} {
				b.Run(name+"/kernel-"+m.name, func(b *testing.B) {
					ms, got, err := c.KernelTimeFlowMode(id, soa, n, m.mode, max(b.N, 50))
					if err != nil {
						b.Fatal(err)
					}
					check(b, m.name, got)
					b.ReportMetric(ms*1e3, "us/launch")
				})
			}
			if algo == flow.Bloom {
				for _, g := range []int{8, 32} {
					b.Run(fmt.Sprintf("%s/kernel-split-%d", name, g), func(b *testing.B) {
						ms, got, err := c.FlowSplitTime(id, soa, n, g, max(b.N, 50))
						if err != nil {
							b.Fatal(err)
						}
						check(b, "split", got)
						b.ReportMetric(ms*1e3, "us/launch")
					})
				}
			}
			for _, callers := range []int{1, 8} {
				b.Run(fmt.Sprintf("%s/lookup-%d-callers", name, callers), func(b *testing.B) {
					const calls, warmCalls = 300, 20
					var mu sync.Mutex
					var ds []time.Duration
					var wg sync.WaitGroup
					for range callers {
						wg.Add(1)
						go func() {
							defer wg.Done()
							out := make([]flow.RuleID, n)
							mine := make([]time.Duration, 0, calls)
							// Untimed first calls: the callers' lookup
							// slots are made on first need (pinned and
							// device memory, a stream), which is no
							// lookup's steady latency.
							for range warmCalls {
								if err := c.LookupFlow(id, soa, n, out); err != nil {
									b.Error(err)
									return
								}
							}
							for range calls {
								t0 := time.Now()
								if err := c.LookupFlow(id, soa, n, out); err != nil {
									b.Error(err)
									return
								}
								mine = append(mine, time.Since(t0))
							}
							check(b, "lookup", out)
							mu.Lock()
							ds = append(ds, mine...)
							mu.Unlock()
						}()
					}
					wg.Wait()
					slices.Sort(ds)
					if len(ds) == 0 {
						b.Fatal("no lookups")
					}
					b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds())/1e3, "p50-us")
					b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds())/1e3, "p99-us")
				})
			}
		}
	}
}
