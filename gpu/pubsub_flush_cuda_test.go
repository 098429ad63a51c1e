//go:build cuda

package gpu

import (
	"math/rand/v2"
	"testing"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// BenchmarkCUDAPubsubFlush times one batch of 1,024 events (Submit and
// Wait, on one goroutine as the churn bench matches) with no update
// pending ("quiet") and with one subscription change's bubbles pending
// ("change": the change is made untimed before each batch, so the batch
// queues the live scatter first). The difference is what a live update
// costs the batch that makes it visible (bench pubsub --churn's loss).
func BenchmarkCUDAPubsubFlush(b *testing.B) {
	c, err := NewCUDA(0)
	if err != nil {
		b.Skipf("SKIPPED: no usable CUDA device: %v", err)
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(61, 62))
	specs, evs := randomPubsub(rng, 20, 20000, 5, 1024)
	more, _ := randomPubsub(rng, 20, 200, 5, 0)
	tb := pubsub.New()
	if _, err := tb.AddSpecs(specs); err != nil {
		b.Fatal(err)
	}
	dev := pubsub.NewDevice(tb)
	dev.Mirror().Sync()
	m, err := c.PubsubMatcher(dev.Layout(), 4)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	var ids []pubsub.ID
	change := func(b *testing.B, i int) {
		if i%2 == 0 || len(ids) == 0 {
			s := more[i%len(more)]
			id, err := tb.Add(s.Port, s.Filters)
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		} else {
			if err := tb.Remove(ids[0]); err != nil {
				b.Fatal(err)
			}
			ids = ids[1:]
		}
		u := dev.Update(tb)
		if u.Full != nil {
			b.Fatal("a change made a whole image")
		}
		if err := m.Update(u, dev.Layout().Names); err != nil {
			b.Fatal(err)
		}
	}
	out := make([][]uint32, len(evs))
	for _, mode := range []string{"quiet", "change"} {
		b.Run(mode, func(b *testing.B) {
			var words int
			for i := 0; b.Loop(); i++ {
				if mode == "change" {
					b.StopTimer()
					m.live.mu.Lock()
					words -= m.live.pn
					m.live.mu.Unlock()
					change(b, i)
					m.live.mu.Lock()
					words += m.live.pn
					m.live.mu.Unlock()
					b.StartTimer()
				}
				if _, _, _, err := m.matchRange(evs, out, nil, 0); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(words)/float64(b.N), "words/batch")
		})
	}
}
