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
// it). Each packs its keys afresh (direct and coalescer into a new
// buffer, as gatherer packs into its share). ns/op is per lookup; what
// the two shared paths add to direct is their hand-off cost, without a
// device's time.
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
	// each runs look on slices of the keys from goroutines of their own, 4
	// per processor.
	each := func(b *testing.B, look func(ks []flow.Key, out []flow.RuleID) error) {
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			out := make([]flow.RuleID, n)
			for pb.Next() {
				if err := look(slice(), out); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("direct", func(b *testing.B) {
		each(b, func(ks []flow.Key, out []flow.RuleID) error {
			return be.LookupFlow(0, flow.PackSoA(ks, proj, nil), n, out)
		})
	})
	b.Run("coalescer", func(b *testing.B) {
		c, err := NewCoalescer(be, CoalescerConfig{MinBatch: 1})
		if err != nil {
			b.Fatal(err)
		}
		each(b, func(ks []flow.Key, out []flow.RuleID) error {
			c.Enter()
			defer c.Leave()
			return c.LookupFlow(0, flow.PackSoA(ks, proj, nil), n, out)
		})
		st := c.Stats()
		b.ReportMetric(float64(st.Keys)/float64(max(st.Batches, 1)), "keys/batch")
	})
	b.Run("gatherer", func(b *testing.B) {
		g, err := NewGatherer(be, GatherConfig{})
		if err != nil {
			b.Fatal(err)
		}
		each(b, func(ks []flow.Key, out []flow.RuleID) error {
			s, err := g.Reserve(0, len(proj), n)
			if err != nil {
				return err
			}
			dst, stride := s.Keys(), s.Stride()
			for k := range ks {
				for j, w := range proj {
					dst[j*stride+k] = ks[k][w]
				}
			}
			g.Packed(s)
			err = g.Wait(s)
			copy(out, s.Results())
			g.Release(s)
			return err
		})
		st := g.Stats()
		b.ReportMetric(float64(st.Keys)/float64(max(st.Batches, 1)), "keys/batch")
	})
}
