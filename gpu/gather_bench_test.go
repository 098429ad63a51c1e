package gpu

import (
	"sync/atomic"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
)

// BenchmarkSharedLookups is the host side of a lookup of 32 keys made by
// many goroutines at once (4 per processor, as the datapath's queues or
// workers make them) on the CPU backend: straight to the backend
// (direct), through a Coalescer (each caller blocks until its shared
// batch is answered, the leader waking the others), and through a
// Gatherer (each caller reserves, packs, waits on its share and releases
// it). ns/op is per lookup; what the two shared paths add to direct is
// their hand-off cost, without a device's time.
func BenchmarkSharedLookups(b *testing.B) {
	cpu, proj, keys := coalesceTable(b, 0)
	benchSharedLookups(b, cpu, proj, keys)
}

// benchSharedLookups is BenchmarkSharedLookups over be (table 0 loaded).
func benchSharedLookups(b *testing.B, be interface {
	BatchBackend
	FlowLooker
}, proj []int, keys []flow.Key) {
	const n = 32
	var next atomic.Int64
	slice := func() []flow.Key {
		lo := int(next.Add(n)) % (len(keys) - n)
		return keys[lo : lo+n]
	}
	b.Run("direct", func(b *testing.B) {
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			var soa []uint32
			out := make([]flow.RuleID, n)
			for pb.Next() {
				soa = flow.PackSoA(slice(), proj, soa)
				if err := be.LookupFlow(0, soa, n, out); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("coalescer", func(b *testing.B) {
		c, err := NewCoalescer(be, CoalescerConfig{MinBatch: 1})
		if err != nil {
			b.Fatal(err)
		}
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			var soa []uint32
			out := make([]flow.RuleID, n)
			for pb.Next() {
				soa = flow.PackSoA(slice(), proj, soa)
				c.Enter()
				err := c.LookupFlow(0, soa, n, out)
				c.Leave()
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
		st := c.Stats()
		b.ReportMetric(float64(st.Keys)/float64(max(st.Batches, 1)), "keys/batch")
	})
	b.Run("gatherer", func(b *testing.B) {
		g, err := NewGatherer(be, GatherConfig{})
		if err != nil {
			b.Fatal(err)
		}
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			out := make([]flow.RuleID, n)
			for pb.Next() {
				ks := slice()
				s, err := g.Reserve(0, len(proj), n)
				if err != nil {
					b.Error(err)
					return
				}
				dst, stride := s.Keys(), s.Stride()
				for k := range ks {
					for j, w := range proj {
						dst[j*stride+k] = ks[k][w]
					}
				}
				g.Packed(s)
				if err := g.Wait(s); err != nil {
					b.Error(err)
					return
				}
				copy(out, s.Results())
				g.Release(s)
			}
		})
		st := g.Stats()
		b.ReportMetric(float64(st.Keys)/float64(max(st.Batches, 1)), "keys/batch")
	})
}
