package gpu

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gswitch/gswitch/tables/lpm"
)

// TestCPULookupsDuringUpdates runs batch lookups on several goroutines
// while updates are applied (bubbles, and whole images from rebuilds: the
// table has no head-room), and checks that every batch saw one state: the
// batch's addresses all lie in one prefix whose next hop each update
// changes, and some updates also insert and delete other prefixes, so a
// batch that saw half an update would mix next hops. The answers must also
// never go back to an older state, and the race detector watches the
// left-right copies.
func TestCPULookupsDuringUpdates(t *testing.T) {
	tab, err := lpm.New(lpm.IPv4, lpm.Options{HeadRoom: -1, MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	hot := netip.MustParsePrefix("10.0.0.0/12")
	if err := tab.Insert(hot, 1); err != nil {
		t.Fatal(err)
	}
	b := NewCPU()
	defer b.Close()
	const id = 3
	if err := b.Load(id, LPM4, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	// Addresses spread over the hot prefix, in blocks the churn below
	// does not cover (it inserts /24s under 10.8.0.0/13).
	var addrs []uint32
	for i := range uint32(512) {
		addrs = append(addrs, 10<<24|(i*977)%(8<<16))
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	var batches atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]uint32, len(addrs))
			last := uint32(0)
			for !stop.Load() {
				if err := b.LookupLPM4(id, addrs, out); err != nil {
					t.Errorf("reader %d: %v", g, err)
					return
				}
				for i, v := range out {
					if v != out[0] {
						t.Errorf("reader %d: one batch saw next hops %d (address %d) and %d (address 0)", g, v, i, out[0])
						return
					}
				}
				if out[0] < last {
					t.Errorf("reader %d: next hop went back from %d to %d", g, last, out[0])
					return
				}
				last = out[0]
				batches.Add(1)
			}
		}()
	}
	var fulls, bubbles int
	for step := uint32(2); step < 200; step++ {
		if err := tab.Insert(hot, step); err != nil {
			t.Fatal(err)
		}
		churn := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 8 + byte(step%8), byte(step), 0}), 24)
		if step%3 == 0 {
			_ = tab.Insert(churn, 7)
		} else {
			_ = tab.Delete(churn)
		}
		u := tab.Mirror().Sync()
		if u.Full != nil {
			fulls++
		}
		bubbles += len(u.Bubbles)
		if err := b.Apply(id, u); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d batches read during %d whole images and %d bubbles", batches.Load(), fulls, bubbles)
	if fulls == 0 || bubbles == 0 {
		t.Fatalf("the updates did not exercise both kinds: %d whole images, %d bubbles", fulls, bubbles)
	}
	out := make([]uint32, len(addrs))
	if err := b.LookupLPM4(id, addrs, out); err != nil || out[0] != 199 {
		t.Fatalf("after the updates: next hop %d, %v; want 199", out[0], err)
	}
}
