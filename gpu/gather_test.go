package gpu

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
)

// heldBackend is the CPU backend with batches that are looked up at Submit
// but read as done only once released (release), as a device's batch in
// flight would: Ready is false and Wait blocks until then.
type heldBackend struct {
	cpu     *CPU
	mu      sync.Mutex
	held    []*heldImpl
	submits atomic.Int64
	fail    error
}

type heldImpl struct {
	done chan struct{}
	rel  atomic.Bool
}

func (h *heldImpl) wait(*Batch) error { <-h.done; return nil }
func (h *heldImpl) ready(*Batch) bool { return h.rel.Load() }
func (h *heldImpl) free(*Batch)       {}

func (h *heldBackend) NewBatch(kind Kind, width, capacity int) (*Batch, error) {
	return newHostBatch(kind, width, capacity)
}

func (h *heldBackend) Submit(id TableID, b *Batch) error {
	h.submits.Add(1)
	if h.fail != nil {
		return h.fail
	}
	if err := h.cpu.lookupOnCPU(id, b); err != nil {
		return err
	}
	hi := &heldImpl{done: make(chan struct{})}
	b.impl, b.sub = hi, true
	h.mu.Lock()
	h.held = append(h.held, hi)
	h.mu.Unlock()
	return nil
}

// heldCount is the number of batches held.
func (h *heldBackend) heldCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// release lets the oldest held batch be done.
func (h *heldBackend) release(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.held) == 0 {
		t.Fatal("no batch held")
	}
	hi := h.held[0]
	h.held = h.held[1:]
	hi.rel.Store(true)
	close(hi.done)
}

// heldGatherer is a Gatherer of depth 1 and batches of max keys over a
// heldBackend of coalesceTable's table (id 0), with the CPU backend, the
// table's projection and traffic keys.
func heldGatherer(t *testing.T, max int) (*CPU, []int, []flow.Key, *heldBackend, *Gatherer) {
	cpu, proj, keys := coalesceTable(t, 0)
	hb := &heldBackend{cpu: cpu}
	g, err := NewGatherer(hb, GatherConfig{MaxBatch: max, Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	return cpu, proj, keys, hb, g
}

// gatherShare reserves a share of keys (the traffic keys from k on),
// packs them, and returns it with the direct lookup's results.
func gatherShare(t *testing.T, g *Gatherer, be FlowLooker, proj []int, keys []flow.Key) (Share, []flow.RuleID) {
	t.Helper()
	n := len(keys)
	s, err := g.Reserve(0, len(proj), n)
	if err != nil {
		t.Fatal(err)
	}
	dst, stride := s.Keys(), s.Stride()
	for k := range keys {
		for j, w := range proj {
			dst[j*stride+k] = keys[k][w]
		}
	}
	g.Packed(s)
	want := make([]flow.RuleID, n)
	if err := be.LookupFlow(0, flow.PackSoA(keys, proj, nil), n, want); err != nil {
		t.Fatal(err)
	}
	return s, want
}

func checkShare(t *testing.T, s Share, want []flow.RuleID) {
	t.Helper()
	got := s.Results()
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("key %d of a share of %d: %d, a lookup of its own %d", i, len(want), got[i], want[i])
		}
	}
}

// TestGathererExact: goroutines reserve, pack, poll or wait for and
// release shares of one table at once, on the CPU backend; every share's
// results equal a lookup of its own keys, and every share was counted in
// a submitted batch.
func TestGathererExact(t *testing.T) {
	cpu, proj, keys := coalesceTable(t, 0)
	testGathererExact(t, cpu, cpu, proj, keys)
}

// TestGathererReusesBatches: goroutines that hold several shares each in
// batches of one share, and give them back together, keep many batches in
// use at once and release them in bursts; a batch is made only while none
// released is free, so no more are made than are ever in use. (The
// Gatherer first kept 2*Depth+2 released batches and freed the others:
// on CUDA each was made again later, pinned memory, device buffers and an
// event, through the context's goroutine, and a free of device memory
// waits for the device.)
func TestGathererReusesBatches(t *testing.T) {
	cpu, proj, keys := coalesceTable(t, 0)
	mk := &makingBackend{BatchBackend: cpu}
	g, err := NewGatherer(mk, GatherConfig{MaxBatch: 64})
	if err != nil {
		t.Fatal(err)
	}
	const workers, rounds, held = 8, 40, 6
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			shares := make([]Share, held)
			wants := make([][]flow.RuleID, held)
			for range rounds {
				for i := range held {
					n := 33 + rng.IntN(32) // two never fit in a batch
					k := rng.IntN(len(keys) - n)
					shares[i], wants[i] = gatherShare(t, g, cpu, proj, keys[k:k+n])
				}
				for i := range held {
					if err := g.Wait(shares[i]); err != nil {
						t.Error(err)
						return
					}
					checkShare(t, shares[i], wants[i])
				}
				for i := range held {
					g.Release(shares[i])
				}
			}
		}()
	}
	wg.Wait()
	if n, most := mk.made.Load(), int64(workers*held+1); n > most {
		t.Errorf("%d batches made, more than the %d ever in use: released batches are not reused", n, most)
	}
	if err := g.Close(); err != nil {
		t.Error(err)
	}
}

// makingBackend counts the batches a BatchBackend makes.
type makingBackend struct {
	BatchBackend
	made atomic.Int64
}

func (m *makingBackend) NewBatch(kind Kind, width, capacity int) (*Batch, error) {
	m.made.Add(1)
	return m.BatchBackend.NewBatch(kind, width, capacity)
}

// testGathererExact is TestGathererExact with the batches on be (table 0
// loaded), the direct lookups on cpu.
func testGathererExact(t *testing.T, be BatchBackend, cpu *CPU, proj []int, keys []flow.Key) {
	g, err := NewGatherer(be, GatherConfig{MaxBatch: 256})
	if err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 8, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for r := range rounds {
				n := 1 + rng.IntN(64)
				k := rng.IntN(len(keys) - n)
				s, want := gatherShare(t, g, cpu, proj, keys[k:k+n])
				if r%2 == 0 {
					for !g.Ready(s) {
						runtime.Gosched()
					}
				} else if err := g.Wait(s); err != nil {
					t.Error(err)
					return
				}
				checkShare(t, s, want)
				g.Release(s)
			}
		}()
	}
	wg.Wait()
	st := g.Stats()
	if st.Shares != workers*rounds || st.Batches == 0 || st.InFlight != 0 {
		t.Errorf("stats %+v: want %d shares, no batch in flight", st, workers*rounds)
	}
	t.Logf("%d shares in %d batches, the largest %d keys", st.Shares, st.Batches, st.MaxKeys)
	if err := g.Close(); err != nil {
		t.Error(err)
	}
}

// TestGathererGroupCommit: with its one slot busy, the shares packed
// meanwhile wait in the open batch, and the batch in flight's retirement
// submits them together; Ready is false until a share's batch is done.
func TestGathererGroupCommit(t *testing.T) {
	cpu, proj, keys, hb, g := heldGatherer(t, 256)
	a, wantA := gatherShare(t, g, cpu, proj, keys[:10])
	b, wantB := gatherShare(t, g, cpu, proj, keys[10:30])
	c, wantC := gatherShare(t, g, cpu, proj, keys[30:33])
	if hb.submits.Load() != 1 || g.Ready(a) || g.Ready(b) {
		t.Fatalf("%d batches submitted, a ready %v, b ready %v: want 1, the first held", hb.submits.Load(), g.Ready(a), g.Ready(b))
	}
	hb.release(t)
	if !g.Ready(a) {
		t.Fatal("the released batch is not ready")
	}
	checkShare(t, a, wantA)
	g.Release(a)
	if hb.submits.Load() != 2 || g.Ready(b) {
		t.Fatalf("%d batches submitted, b ready %v: want b and c submitted together by a's retirement, held", hb.submits.Load(), g.Ready(b))
	}
	hb.release(t)
	if err := g.Wait(c); err != nil || !g.Ready(b) {
		t.Fatalf("wait for c: %v, b ready %v", err, g.Ready(b))
	}
	checkShare(t, b, wantB)
	checkShare(t, c, wantC)
	g.Release(b)
	g.Release(c)
	if st := g.Stats(); st.Batches != 2 || st.MaxKeys != 23 || st.Shares != 3 || st.InFlight != 0 {
		t.Errorf("stats %+v: want 2 batches, the larger of 23 keys", st)
	}
}

// TestGathererWaitForces: a member that waits does not wait for a slot:
// its batch is submitted at once, beyond Depth, and its Wait returns once
// that batch is done, whatever the batch before it does.
func TestGathererWaitForces(t *testing.T) {
	cpu, proj, keys, hb, g := heldGatherer(t, 256)
	a, _ := gatherShare(t, g, cpu, proj, keys[:4])
	b, wantB := gatherShare(t, g, cpu, proj, keys[4:8])
	done := make(chan error, 1)
	go func() { done <- g.Wait(b) }()
	for hb.heldCount() != 2 {
		runtime.Gosched() // b's Wait submits its batch
	}
	hb.mu.Lock()
	second := hb.held[1]
	hb.mu.Unlock()
	second.rel.Store(true)
	close(second.done)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkShare(t, b, wantB)
	g.Release(b)
	hb.release(t) // a's
	g.Release(a)
	if st := g.Stats(); st.ByWait != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v: want one batch closed by a Wait", st)
	}
}

// TestGathererWaitForSlot: with WaitForSlot and its one slot busy, a
// member that waits for its open batch does not close it: it waits for
// the batch in flight, whose retirement submits the open batch with a
// share packed meanwhile, one batch for both.
func TestGathererWaitForSlot(t *testing.T) {
	cpu, proj, keys := coalesceTable(t, 0)
	hb := &heldBackend{cpu: cpu}
	g, err := NewGatherer(hb, GatherConfig{MaxBatch: 256, Depth: 1, WaitForSlot: true})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := gatherShare(t, g, cpu, proj, keys[:4]) // submitted: the slot is free
	b, wantB := gatherShare(t, g, cpu, proj, keys[4:8])
	done := make(chan error, 1)
	go func() { done <- g.Wait(b) }()
	c, wantC := gatherShare(t, g, cpu, proj, keys[8:12]) // joins b's batch
	if n := hb.heldCount(); n != 1 {
		t.Fatalf("%d batches submitted before the first is done; want 1 (b's Wait must not close its batch)", n)
	}
	hb.release(t) // a's: b's Wait retires it, and its batch goes with c's keys
	for hb.heldCount() != 1 {
		runtime.Gosched()
	}
	hb.release(t)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkShare(t, b, wantB)
	if err := g.Wait(c); err != nil {
		t.Fatal(err)
	}
	checkShare(t, c, wantC)
	for _, s := range []Share{a, b, c} {
		g.Release(s)
	}
	if st := g.Stats(); st.Batches != 2 || st.Shares != 3 || st.ByWait != 0 || st.InFlight != 0 {
		t.Errorf("stats %+v: want 2 batches of 3 shares, none closed by a Wait", st)
	}
}

// waitAll waits for the shares, releasing hb's held batches meanwhile,
// and releases them.
func waitAll(t *testing.T, g *Gatherer, hb *heldBackend, shares ...Share) {
	t.Helper()
	errs := make(chan error, len(shares))
	for _, s := range shares {
		go func() { errs <- g.Wait(s) }()
	}
	for left := len(shares); left > 0; {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
			left--
		default:
			if hb.heldCount() > 0 {
				hb.release(t)
			}
		}
	}
	for _, s := range shares {
		g.Release(s)
	}
}

// TestGathererFullAndErrors: a reservation that does not fit closes the
// open batch; a reservation too large, or of another width, is refused or
// starts a batch of its own; a Submit that fails is every member's error.
func TestGathererFullAndErrors(t *testing.T) {
	cpu, proj, keys, hb, g := heldGatherer(t, 64)
	if _, err := g.Reserve(0, len(proj), 65); err == nil {
		t.Error("a reservation of 65 keys in batches of 64 was accepted")
	}
	a, _ := gatherShare(t, g, cpu, proj, keys[:40])   // submitted: the slot was free
	b, _ := gatherShare(t, g, cpu, proj, keys[40:80]) // open: the slot is busy
	c, _ := gatherShare(t, g, cpu, proj, keys[80:120])
	if st := g.Stats(); st.ByFull != 1 || hb.submits.Load() != 2 {
		t.Errorf("stats %+v, %d submitted: want b's batch closed full (and submitted: a full batch takes no slot)", st, hb.submits.Load())
	}
	waitAll(t, g, hb, a, b, c)
	hb.fail = errors.New("device gone")
	d, _ := gatherShare(t, g, cpu, proj, keys[:3])
	if err := g.Wait(d); err == nil || !g.Ready(d) {
		t.Errorf("a batch whose Submit failed: Wait %v, Ready %v; want the error, ready", err, g.Ready(d))
	}
	g.Release(d)
	if err := g.Close(); err != nil {
		t.Error(err)
	}
}
