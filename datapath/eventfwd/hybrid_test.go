package eventfwd

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// flakyDevice wraps a device and fails its matches or updates on demand.
type flakyDevice struct {
	Device
	failMatch, failUpdate bool
	matches, updates      int
	mu                    sync.Mutex
}

func (d *flakyDevice) Match(evs []pubsub.Event, out [][]uint32) ([][]uint32, error) {
	d.mu.Lock()
	d.matches++
	fail := d.failMatch
	d.mu.Unlock()
	if fail {
		return out[:0], errors.New("device lost")
	}
	return d.Device.Match(evs, out)
}

func (d *flakyDevice) Update(u bubble.Update, names map[string]uint32) error {
	d.updates++
	if d.failUpdate {
		return errors.New("device lost")
	}
	return d.Device.Update(u, names)
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// hybridOf returns a table of the scenario's subscriptions and a Hybrid on
// a Go layout device (gpu.LayoutDevice: the kernel's computation from the
// mirrored words), wrapped so that it can fail.
func hybridOf(t *testing.T, specs []pubsub.Spec) (*pubsub.Table, *Hybrid, *flakyDevice) {
	t.Helper()
	tab := pubsub.New()
	if _, err := tab.AddSpecs(specs); err != nil {
		t.Fatal(err)
	}
	fd := &flakyDevice{}
	h, err := NewHybrid(HybridConfig{Table: tab, MinBatch: 8, Log: quiet(), Open: func(l *pubsub.Layout) (Device, error) {
		d := &gpu.LayoutDevice{}
		if err := d.Update(bubble.Update{Full: l.Image.Clone()}, l.Names); err != nil {
			return nil, err
		}
		fd.Device = d
		return fd, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return tab, h, fd
}

// layoutHybridOf is hybridOf with the layout device itself, unwrapped, so
// that what it brings back beyond Device (the deciding filter slots, live
// updates) reaches the Hybrid.
func layoutHybridOf(t *testing.T, specs []pubsub.Spec) (*pubsub.Table, *Hybrid) {
	t.Helper()
	tab := pubsub.New()
	if _, err := tab.AddSpecs(specs); err != nil {
		t.Fatal(err)
	}
	h, err := NewHybrid(HybridConfig{Table: tab, MinBatch: 8, Log: quiet(), Open: func(l *pubsub.Layout) (Device, error) {
		d := &gpu.LayoutDevice{}
		return d, d.Update(bubble.Update{Full: l.Image.Clone()}, l.Names)
	}})
	if err != nil {
		t.Fatal(err)
	}
	return tab, h
}

func checkBatch(t *testing.T, what string, h *Hybrid, specs []pubsub.Spec, evs []pubsub.Event) {
	t.Helper()
	got := h.MatchBatch(evs, nil)
	if len(got) != len(evs) {
		t.Fatalf("%s: %d answers for %d events", what, len(got), len(evs))
	}
	for i := range evs {
		if want := pubsub.BruteMatch(specs, &evs[i]); !slices.Equal(got[i], want) && len(got[i])+len(want) > 0 {
			t.Fatalf("%s: event %d %s: %v, brute %v", what, i, evs[i].String(), got[i], want)
		}
	}
}

// TestHybridDeviceAndCPU: big batches go to the device, small ones to the
// CPU, both exact.
func TestHybridDeviceAndCPU(t *testing.T) {
	sc := pubsub.DefaultScenario()
	sc.FiltersMin, sc.FiltersMax = 300, 400
	sc.Names, sc.Values, sc.Words = 10, 8, 6
	specs := sc.Subscriptions()
	_, h, _ := hybridOf(t, specs)
	evs := sc.Events(300)
	checkBatch(t, "batch of 300", h, specs, evs)
	checkBatch(t, "batch of 5", h, specs, evs[:5])
	k := h.Counters()
	if k.DeviceBatches != 1 || k.DeviceEvents != 300 || k.CPUBatches != 1 || k.CPUEvents != 5 || k.Fallbacks != 0 || h.Backend() != "layout" {
		t.Fatalf("counters %+v, backend %s", k, h.Backend())
	}
}

// TestHybridChurn changes the subscriptions many times; after each Sync
// (the API's barrier) the device answers the new table exactly, the
// changes having reached it as bubbles.
func TestHybridChurn(t *testing.T) {
	sc := pubsub.DefaultScenario()
	sc.FiltersMin, sc.FiltersMax = 100, 150
	sc.Names, sc.Values, sc.Words = 8, 6, 5
	specs := sc.Subscriptions()
	tab, h, _ := hybridOf(t, specs)
	evs := sc.Events(200)
	more := sc
	more.Seed = 9
	extra := more.Subscriptions()
	r := rand.New(rand.NewSource(1))
	for round := 0; round < 30; round++ {
		switch r.Intn(3) {
		case 0:
			s := extra[r.Intn(len(extra))]
			if _, err := tab.Add(s.Port, s.Filters); err != nil {
				t.Fatal(err)
			}
		case 1:
			subs := tab.List()
			if err := tab.Remove(subs[r.Intn(len(subs))].ID); err != nil {
				t.Fatal(err)
			}
		default:
			s := extra[r.Intn(len(extra))]
			if _, _, err := tab.SetPort(s.Port, s.Filters); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		checkBatch(t, "after a change", h, tab.Specs(), evs)
	}
	k := h.Counters()
	if k.Updates == 0 || k.Bubbles == 0 || k.Fallbacks != 0 || k.CPUBatches != 0 {
		t.Fatalf("counters %+v: want updates as bubbles, every batch on the device", k)
	}
}

// TestHybridFallback: a batch the device fails is matched on the CPU; a
// failed update turns the device off and the CPU serves the new table.
func TestHybridFallback(t *testing.T) {
	specs, err := pubsub.Parse("1: x > 5\n2: s ^= \"ab\"\n")
	if err != nil {
		t.Fatal(err)
	}
	tab, h, fd := hybridOf(t, specs)
	var evs []pubsub.Event
	for i := 0; i < 20; i++ {
		evs = append(evs, pubsub.Event{Attrs: []pubsub.Attr{{Name: "x", Value: pubsub.Int(int64(i))}, {Name: "s", Value: pubsub.Str("abc"[:i%4])}}})
	}
	fd.failMatch = true
	checkBatch(t, "device failing", h, specs, evs)
	if k := h.Counters(); k.Fallbacks != 1 || k.LastError == "" || k.CPUBatches != 1 || fd.matches != 1 {
		t.Fatalf("counters %+v", k)
	}
	fd.failMatch, fd.failUpdate = false, true
	if _, err := tab.Add(3, []pubsub.Filter{{{Name: "x", Op: pubsub.OpLt, Value: pubsub.Int(3)}}}); err != nil {
		t.Fatal(err)
	}
	if err := h.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if h.Backend() != "cpu" || h.Counters().Off == "" {
		t.Fatalf("backend %s, counters %+v after a failed update", h.Backend(), h.Counters())
	}
	checkBatch(t, "device off", h, tab.Specs(), evs)
	if fd.matches != 1 {
		t.Errorf("the device was asked %d times after it went off", fd.matches-1)
	}
}

// TestStageOnHybrid runs event frames through the stage with the hybrid
// matcher from several goroutines, subscriptions changing in between.
func TestStageOnHybrid(t *testing.T) {
	sc := pubsub.Scenario{Interfaces: 4, FiltersMin: 20, FiltersMax: 40, ConstraintsMin: 1, ConstraintsMax: 3,
		Names: 6, AttrsMin: 2, AttrsMax: 5, NumericShare: 0.5, Values: 8, Words: 8, Seed: 3}
	specs := sc.Subscriptions()
	_, h, _ := hybridOf(t, specs)
	evs := sc.Events(400)
	out := &sink{}
	st, err := New(Config{UDPPort: 9, Matcher: h, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	frames := make([][]byte, len(evs))
	for i := range evs {
		b, err := evs[i].AppendWire(nil)
		if err != nil {
			t.Fatal(err)
		}
		frames[i] = udpFrame(t, "10.0.0.1", "10.0.0.2", 9, b, 0)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g * 100; i < (g+1)*100; i += 20 {
				st.Rx(1, slices.Clone(frames[i:i+20]), nil)
			}
		}()
	}
	wg.Wait()
	want := map[uint32]int{}
	for i := range evs {
		for _, p := range pubsub.BruteMatch(specs, &evs[i]) {
			if p != 1 {
				want[p]++
			}
		}
	}
	for p, n := range want {
		if len(out.got[p]) != n {
			t.Errorf("port %d: %d events, oracle says %d", p, len(out.got[p]), n)
		}
	}
	if k := h.Counters(); k.DeviceBatches != 20 {
		t.Errorf("counters %+v: want 20 batches on the device", k)
	}
}

// TestHybridCountsDeviceMatches: a device that brings back the deciding
// filter slots (gpu.LayoutDevice, as the CUDA matcher) credits the
// subscriptions: after a device batch the counters rose by one per
// delivery, as after the same batch on the CPU.
func TestHybridCountsDeviceMatches(t *testing.T) {
	sc := pubsub.DefaultScenario()
	sc.FiltersMin, sc.FiltersMax = 300, 400
	sc.Names, sc.Values, sc.Words = 10, 8, 6
	specs := sc.Subscriptions()
	tab, h := layoutHybridOf(t, specs)
	sum := func() uint64 {
		var n uint64
		for _, s := range tab.List() {
			n += s.Matches
		}
		return n
	}
	evs := sc.Events(300)
	got := h.MatchBatch(evs, nil)
	delivered := 0
	for _, ps := range got {
		delivered += len(ps)
	}
	if delivered == 0 {
		t.Fatal("no deliveries: the test needs some")
	}
	if n := sum(); n != uint64(delivered) {
		t.Errorf("device batch: counters %d for %d deliveries", n, delivered)
	}
	tab.MatchBatch(evs, nil)
	if n := sum(); n != 2*uint64(delivered) {
		t.Errorf("after the CPU batch: counters %d, want %d", n, 2*delivered)
	}
	if k := h.Counters(); k.DeviceBatches != 1 || k.Recounts != 0 {
		t.Errorf("counters %+v", k)
	}
}

// slowDevice holds its updates until release is closed.
type slowDevice struct {
	Device
	entered chan struct{}
	release chan struct{}
}

func (d *slowDevice) Update(u bubble.Update, names map[string]uint32) error {
	close(d.entered)
	<-d.release
	return d.Device.Update(u, names)
}

// TestHybridBatchDuringUpdate checks where a batch goes while the device
// is being updated: it waits for the update and is matched on the device
// (the default), or goes to the CPU (CPUDuringUpdates); both answer with
// the change.
func TestHybridBatchDuringUpdate(t *testing.T) {
	sc := pubsub.DefaultScenario()
	sc.FiltersMin, sc.FiltersMax = 20, 30
	specs := sc.Subscriptions()
	evs := sc.Events(64)
	for _, toCPU := range []bool{false, true} {
		tab := pubsub.New()
		if _, err := tab.AddSpecs(specs); err != nil {
			t.Fatal(err)
		}
		sd := &slowDevice{entered: make(chan struct{}), release: make(chan struct{})}
		h, err := NewHybrid(HybridConfig{Table: tab, MinBatch: 8, Log: quiet(), CPUDuringUpdates: toCPU,
			Open: func(l *pubsub.Layout) (Device, error) {
				d := &gpu.LayoutDevice{}
				if err := d.Update(bubble.Update{Full: l.Image.Clone()}, l.Names); err != nil {
					return nil, err
				}
				sd.Device = d
				return sd, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		f := pubsub.Filter{{Name: evs[0].Attrs[0].Name, Op: pubsub.OpEq, Value: evs[0].Attrs[0].Value}}
		if _, err := tab.Add(777, []pubsub.Filter{f}); err != nil {
			t.Fatal(err)
		}
		all := append(slices.Clone(specs), pubsub.Spec{Port: 777, Filters: []pubsub.Filter{f}})
		done := make(chan error, 1)
		go func() { done <- h.Sync(context.Background()) }()
		<-sd.entered
		got := make(chan [][]uint32, 1)
		go func() { got <- h.MatchBatch(evs, nil) }()
		if toCPU {
			res := <-got
			close(sd.release)
			if k := h.Counters(); k.CPUBatches != 1 || k.DeviceBatches != 0 {
				t.Errorf("CPUDuringUpdates: counters %+v, want the batch on the CPU", k)
			}
			checkAnswers(t, "on the CPU during an update", res, all, evs)
		} else {
			time.Sleep(20 * time.Millisecond) // the batch reaches the lock
			select {
			case <-got:
				t.Fatal("the batch did not wait for the update")
			default:
			}
			close(sd.release)
			res := <-got
			if k := h.Counters(); k.DeviceBatches != 1 || k.CPUBatches != 0 {
				t.Errorf("counters %+v, want the batch on the device after the update", k)
			}
			checkAnswers(t, "after waiting for the update", res, all, evs)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		h.Close()
	}
}

func checkAnswers(t *testing.T, what string, got [][]uint32, specs []pubsub.Spec, evs []pubsub.Event) {
	t.Helper()
	if len(got) != len(evs) {
		t.Fatalf("%s: %d answers for %d events", what, len(got), len(evs))
	}
	for i := range evs {
		if want := pubsub.BruteMatch(specs, &evs[i]); !slices.Equal(got[i], want) && len(got[i])+len(want) > 0 {
			t.Fatalf("%s: event %d: %v, brute %v", what, i, got[i], want)
		}
	}
}

// TestHybridLiveUpdates matches batches on one goroutine while another
// changes the subscriptions and syncs, on a device whose updates are live
// (gpu.LayoutDevice: Sync does not hold the batches): every batch answers
// exactly as the brute-force evaluator over the subscriptions of one
// version between the last sync done before it and the last begun after
// it, and every batch stays on the device.
func TestHybridLiveUpdates(t *testing.T) {
	sc := pubsub.DefaultScenario()
	sc.FiltersMin, sc.FiltersMax = 60, 90
	sc.Names, sc.Values, sc.Words = 8, 6, 5
	specs := sc.Subscriptions()
	tab, h := layoutHybridOf(t, specs)
	defer h.Close()
	if _, ok := h.dev.(LiveDevice); !ok {
		t.Fatal("the layout device is not a LiveDevice")
	}
	evs := sc.Events(64)
	more := sc
	more.Seed = 11
	extra := more.Subscriptions()
	var mu sync.Mutex
	versions := [][]pubsub.Spec{tab.Specs()} // versions[v]: the subscriptions after sync v
	var begun, done atomic.Int64
	stop := make(chan struct{})
	churned := make(chan error, 1)
	go func() {
		r := rand.New(rand.NewSource(3))
		for i := 0; ; i++ {
			select {
			case <-stop:
				churned <- nil
				return
			default:
			}
			if i%2 == 0 {
				s := extra[r.Intn(len(extra))]
				if _, err := tab.Add(s.Port, s.Filters); err != nil {
					churned <- err
					return
				}
			} else if subs := tab.List(); len(subs) > 0 {
				if err := tab.Remove(subs[r.Intn(len(subs))].ID); err != nil {
					churned <- err
					return
				}
			}
			snap := tab.Specs()
			mu.Lock()
			versions = append(versions, snap)
			mu.Unlock()
			begun.Add(1)
			if err := h.Sync(context.Background()); err != nil {
				churned <- err
				return
			}
			done.Add(1)
			time.Sleep(50 * time.Microsecond)
		}
	}()
	const batches = 60
	for b := 0; b < batches; b++ {
		lo := done.Load()
		got := h.MatchBatch(evs, nil)
		hi := begun.Load()
		mu.Lock()
		cands := versions[lo : hi+1]
		mu.Unlock()
		ok := false
		for v := len(cands) - 1; v >= 0 && !ok; v-- {
			ok = true
			for i := range evs {
				if want := pubsub.BruteMatch(cands[v], &evs[i]); !slices.Equal(got[i], want) && len(got[i])+len(want) > 0 {
					ok = false
					break
				}
			}
		}
		if !ok {
			close(stop)
			<-churned
			t.Fatalf("batch %d: the answers are those of no version %d..%d", b, lo, hi)
		}
	}
	close(stop)
	if err := <-churned; err != nil {
		t.Fatal(err)
	}
	k := h.Counters()
	if k.CPUBatches != 0 || k.DeviceBatches != batches || k.Updates == 0 {
		t.Fatalf("counters %+v: want every batch on the device, updates applied", k)
	}
	t.Logf("%d syncs during %d batches", done.Load(), batches)
}
