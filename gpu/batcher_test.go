package gpu

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/lpm"
)

func TestBatcher(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab, err := lpm.Build(lpm.IPv4, randomRoutes(rng, lpm.IPv4, 3000), lpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(EngineConfig{Devices: []Backend{NewCPU()}, MinBatch: 64})
	defer e.Close()
	if err := e.Load(1, LPM4, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	var keys, got []uint32
	q, err := NewBatcher(e, 1, BatcherConfig{Kind: LPM4, Width: 1, MaxBatch: 100, MaxDelay: time.Millisecond, Depth: 2}, func(b *Batch) {
		got = append(got, b.Out[:b.N]...)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	add := func(n int) {
		for range n {
			b, i, err := q.Next()
			if err != nil {
				t.Fatal(err)
			}
			a := rng.Uint32()
			b.Keys[i] = a
			keys = append(keys, a)
			if err := q.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(1050) // ten full batches, 50 keys waiting
	if err := q.Poll(time.Now()); err != nil {
		t.Fatal(err)
	}
	if s := q.Stats(); s.Batches != 10 || s.ByDelay != 0 {
		t.Fatalf("%+v: want 10 full batches submitted, the 11th open", s)
	}
	time.Sleep(2 * time.Millisecond)
	if err := q.Poll(time.Now()); err != nil {
		t.Fatal(err)
	}
	if s := q.Stats(); s.Batches != 11 || s.ByDelay != 1 {
		t.Fatalf("%+v: want the 50-key batch closed by the delay", s)
	}
	add(7)
	if err := q.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Fatalf("%d results for %d keys", len(got), len(keys))
	}
	for i, a := range keys {
		if want := tab.Lookup4(a); got[i] != want {
			t.Fatalf("key %d (%#x): got %d, table says %d", i, a, got[i], want)
		}
	}
	s, es := q.Stats(), e.Stats()
	if s.Keys != 1057 || es.KeysOnCPU != 57 || es.KeysOnDevice != 1000 {
		t.Fatalf("batcher %+v, engine %+v: want the 50- and 7-key batches (below MinBatch) on the CPU, the rest on the device", s, es)
	}
}
