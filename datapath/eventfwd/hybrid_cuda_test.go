//go:build cuda

package eventfwd

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// TestCUDAHybridDefault is the wired path on the GPU: CCM's default
// scenario (about 1M constraints) in a table, the hybrid matcher on
// gpu.OpenEventDevice (what gswitchd uses), events in batches of 1024 and
// of 20 compared bit for bit with the CPU matcher, then subscription
// changes pushed through Sync (bubbles to the device) and the comparison
// again.
func TestCUDAHybridDefault(t *testing.T) {
	sc := pubsub.DefaultScenario()
	specs := sc.Subscriptions()
	tab := pubsub.New()
	t0 := time.Now()
	if _, err := tab.AddSpecs(specs); err != nil {
		t.Fatal(err)
	}
	deploy := time.Since(t0)
	t0 = time.Now()
	h, err := NewHybrid(HybridConfig{Table: tab, Open: func(l *pubsub.Layout) (Device, error) { return gpu.OpenEventDevice(l) }})
	if err != nil {
		t.Skipf("SKIPPED: no usable CUDA device, the GPU matcher is not tested: %v", err)
	}
	defer h.Close()
	t.Logf("deploy %v, layout and device load %v; %s", deploy, time.Since(t0), h.Counters().Device)
	evs := sc.Events(20000)
	compare := func(what string, per int) {
		t.Helper()
		want := tab.MatchBatch(evs, nil)
		for lo := 0; lo < len(evs); lo += per {
			hi := min(lo+per, len(evs))
			got := h.MatchBatch(evs[lo:hi], nil)
			for i := range got {
				if w := want[lo+i]; !slices.Equal(got[i], w) && len(got[i])+len(w) > 0 {
					t.Fatalf("%s: event %d %s: device %v, cpu %v", what, lo+i, evs[lo+i].String(), got[i], w)
				}
			}
		}
	}
	compare("batches of 1024", 1024)
	compare("batches of 20", 20)
	more := sc
	more.Seed = 7
	extra := more.Subscriptions()[:50]
	for round := 0; round < 5; round++ {
		ids, err := tab.AddSpecs(extra[10*round : 10*round+10])
		if err != nil {
			t.Fatal(err)
		}
		if round%2 == 1 {
			if err := tab.Remove(ids[0]); err != nil {
				t.Fatal(err)
			}
		}
		t0 := time.Now()
		if err := h.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: sync %v", round, time.Since(t0))
		compare("after a change", 4096)
	}
	k := h.Counters()
	if k.Fallbacks != 0 || k.Off != "" || k.DeviceBatches == 0 || k.Updates != 5 {
		t.Fatalf("counters %+v: want every batch on the device, 5 updates", k)
	}
	t.Logf("counters %+v", k)
}
