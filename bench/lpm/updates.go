package lpm

// Route updates: back to back, and paced while lookups run on a mirror
// kept by bubbles (or on the GPU backend through Backend.Apply).

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
)

// routeTable is what both the trie and the reference offer for updates.
type routeTable interface {
	Insert(p netip.Prefix, nh uint32) error
	Delete(p netip.Prefix) error
}

// applyUpdates applies trace entries; syncEvery > 0 gathers the bubbles every
// so many updates, as the datapath would before a batch.
func applyUpdates(t routeTable, trace []lpm.Update, syncEvery int) error {
	tab, _ := t.(*lpm.Table)
	for i, u := range trace {
		var err error
		if u.Withdraw {
			err = t.Delete(u.Prefix)
		} else {
			err = t.Insert(u.Prefix, u.NextHop)
		}
		if err != nil {
			return fmt.Errorf("update %d (%+v): %w", i, u, err)
		}
		if tab != nil && syncEvery > 0 && (i+1)%syncEvery == 0 {
			tab.Mirror().Sync()
		}
	}
	if tab != nil && syncEvery > 0 {
		tab.Mirror().Sync()
	}
	return nil
}

// syncMsg carries one Sync's update to the lookup side, with the times at
// which the updates it covers were applied to the table; delivered says
// the updater already handed u to the backend (--apply-on updater).
type syncMsg struct {
	u         bubble.Update
	applied   []time.Time
	delivered bool
}

// underUpdates measures lookups on a mirror that a second goroutine keeps up
// to date through bubbles while it applies updatesPerSec route updates to the
// table: GAMT's update mechanism with the CPU as the device. Each round times
// the same loop, with the same two goroutines, once at update rate 0
// (mlps_idle) and once at the asked rate, so the loss compares like with like
// on a noisy machine; rates are medians.
func underUpdates(r *benchutil.Result, f *lpmFlags, tab *lpm.Table, ref *lpm.Reference, trace []lpm.Update, next int, tr *lpmTraffic) (int, error) {
	// After a Sync, nothing is pending: a clone of the image is the mirror.
	tab.Mirror().Sync()
	mirror := tab.Mirror().Image().Clone()
	var idles, unders, lats []float64
	var updates int
	var updTime time.Duration
	for round := range f.Rounds {
		// The idle run keeps the updater goroutine spinning too, at rate 0,
		// so that only the updates differ between the two; the order of the
		// two alternates so that neither always runs on a warmer machine.
		var discard []float64
		idle := func() error {
			_, _, err := updateRound(r, f, 0, tab, trace[next:], &mirror, tr, &idles, &discard)
			return err
		}
		if round%2 == 0 {
			if err := idle(); err != nil {
				return next, err
			}
		}
		n, d, err := updateRound(r, f, f.updatesPerSec, tab, trace[next:], &mirror, tr, &unders, &lats)
		if err == nil && round%2 == 1 {
			err = idle()
		}
		if err != nil {
			return next, err
		}
		if err := applyUpdates(ref, trace[next:next+n], 0); err != nil {
			return next, err
		}
		next += n
		updates, updTime = updates+n, updTime+d
	}
	// The CPU mirror, fed only with bubbles, must now equal the table's
	// image (on the GPU backend --check compares the device's answers).
	if f.eng == nil {
		if d := mirror.Diff(tab.Mirror().Image()); d != "" {
			r.Mismatches++
			fmt.Fprintln(benchutil.MismatchLog, "the mirror kept by bubbles differs from the table image:", d)
		}
	}
	// The loss is the median of the rounds' paired losses: each pair ran
	// back to back, so a drift of the machine's speed cancels out.
	losses := make([]float64, len(idles))
	for i := range idles {
		losses[i] = 100 * (idles[i] - unders[i]) / idles[i]
	}
	r.MLPSIdle, r.MLPSUnderUpdates = benchutil.Median(idles)/1e6, benchutil.Median(unders)/1e6
	r.LossPct = benchutil.Median(losses)
	for _, l := range losses {
		r.LossPctRounds = append(r.LossPctRounds, math.Round(l*100)/100)
	}
	if f.eng != nil {
		r.ApplyOn = f.applyOn
	}
	r.UpdatesPerSec = float64(updates) / updTime.Seconds()
	r.VisibleP50us, r.VisibleP99us = benchutil.Percentile(lats, 50), benchutil.Percentile(lats, 99)
	return next, nil
}

// updateRound runs one timed lookup loop on the mirror while trace entries
// are applied to the table at the configured rate. It returns how many were
// applied and over how long; the lookup rate and latencies are appended.
func updateRound(r *benchutil.Result, f *lpmFlags, rate int, tab *lpm.Table, trace []lpm.Update, mirror **bubble.Image, tr *lpmTraffic, rates, lats *[]float64) (int, time.Duration, error) {
	msgs := make(chan syncMsg, 1024)
	done := make(chan struct{})
	type updOut struct {
		n   int
		d   time.Duration
		err error
	}
	upd := make(chan updOut, 1)
	go func() {
		t0 := time.Now()
		var deliver func(bubble.Update) error
		if f.eng != nil && f.applyOn == "updater" {
			deliver = func(u bubble.Update) error { return f.eng.Apply(f.gpuTable, u) }
		}
		n, err := paceUpdates(tab, trace, rate, msgs, done, deliver)
		upd <- updOut{n, time.Since(t0), err}
	}()
	under, lat, bubbles, reloads, err := mirrorLookups(f, mirror, tr, msgs)
	close(done)
	for m := range msgs { // what was synced after the lookups stopped
		if err == nil && !m.delivered {
			err = applySync(f, mirror, m.u)
		}
		bubbles += uint64(len(m.u.Bubbles))
	}
	u := <-upd
	if err == nil {
		err = u.err
	}
	*rates, *lats = append(*rates, under), append(*lats, lat...)
	r.Bubbles, r.Rebuilds = r.Bubbles+bubbles, r.Rebuilds+reloads
	return u.n, u.d, err
}

// paceUpdates applies trace entries at rate per second until done is closed,
// syncing the mirror after each step and sending what it gathered; with
// deliver, it hands each Sync's update to the backend itself first.
func paceUpdates(tab *lpm.Table, trace []lpm.Update, rate int, msgs chan<- syncMsg, done <-chan struct{}, deliver func(bubble.Update) error) (int, error) {
	defer close(msgs)
	start := time.Now()
	n := 0
	for {
		select {
		case <-done:
			return n, nil
		default:
		}
		due := min(int(time.Since(start).Seconds()*float64(rate)), len(trace))
		if due == n && n == len(trace) {
			return n, fmt.Errorf("update trace exhausted after %d updates", n)
		}
		var applied []time.Time
		for ; n < due; n++ {
			if err := applyUpdates(tab, trace[n:n+1], 0); err != nil {
				return n, err
			}
			applied = append(applied, time.Now())
		}
		if len(applied) > 0 {
			m := syncMsg{u: tab.Mirror().Sync(), applied: applied}
			if deliver != nil {
				if err := deliver(m.u); err != nil {
					return n, err
				}
				m.delivered = true
			}
			msgs <- m
		}
		spinUntil(time.Now().Add(50 * time.Microsecond))
	}
}

// mirrorLookups looks up the traffic in batches on the mirror for the
// configured duration, applying every pending Update between two batches.
// It returns the lookup rate, the update-to-visible latencies in µs, and the
// bubbles and full reloads applied.
func mirrorLookups(f *lpmFlags, mirror **bubble.Image, tr *lpmTraffic, msgs <-chan syncMsg) (rate float64, lat []float64, bubbles, reloads uint64, err error) {
	if f.eng != nil {
		return gpuUnderUpdates(f, mirror, msgs)
	}
	view, err := lpm.NewView(*mirror)
	if err != nil {
		return 0, nil, 0, 0, err
	}
	out := make([]uint32, f.Batch)
	n, i := 0, 0
	start := time.Now()
	deadline := start.Add(f.duration)
	for {
		for pending := true; pending && msgs != nil; {
			select {
			case m, ok := <-msgs:
				if !ok {
					msgs = nil
					break
				}
				if m.u.Full != nil {
					reloads++
				}
				bubbles += uint64(len(m.u.Bubbles))
				if err := applySync(f, mirror, m.u); err != nil {
					return 0, nil, 0, 0, err
				}
				if m.u.Full != nil && f.eng == nil {
					if view, err = lpm.NewView(*mirror); err != nil {
						return 0, nil, 0, 0, err
					}
				}
				now := time.Now()
				for _, t := range m.applied {
					lat = append(lat, float64(now.Sub(t).Nanoseconds())/1e3)
				}
			default:
				pending = false
			}
		}
		j := min(i+f.Batch, tr.len())
		switch {
		case tr.v4 != nil:
			view.LookupBatch4(tr.v4[i:j], out[:j-i])
		default:
			view.LookupBatch6(tr.v6[i:j], out[:j-i])
		}
		n += j - i
		if i = j; i == tr.len() {
			i = 0
		}
		if (f.eng != nil || n%(64*f.Batch) < f.Batch) && time.Now().After(deadline) {
			break
		}
	}
	return float64(n) / time.Since(start).Seconds(), lat, bubbles, reloads, nil
}

// gpuUnderUpdates is mirrorLookups on the GPU backend: the pinned pipeline
// runs for the configured duration and, before each Submit, every pending
// Update goes to the device through Backend.Apply (--apply-on lookup) or,
// already applied by the updater, counts as visible (--apply-on updater).
func gpuUnderUpdates(f *lpmFlags, mirror **bubble.Image, msgs <-chan syncMsg) (rate float64, lat []float64, bubbles, reloads uint64, err error) {
	between := func() error {
		for msgs != nil {
			select {
			case m, ok := <-msgs:
				if !ok {
					msgs = nil
					return nil
				}
				if m.u.Full != nil {
					reloads++
				}
				bubbles += uint64(len(m.u.Bubbles))
				if !m.delivered {
					if err := applySync(f, mirror, m.u); err != nil {
						return err
					}
				}
				now := time.Now()
				for _, t := range m.applied {
					lat = append(lat, float64(now.Sub(t).Nanoseconds())/1e3)
				}
			default:
				return nil
			}
		}
		return nil
	}
	n, d, _, err := f.pipe.Run(0, time.Now().Add(f.duration), between)
	if err != nil {
		return 0, nil, 0, 0, err
	}
	return float64(n) / d.Seconds(), lat, bubbles, reloads, nil
}

// applySync hands one Sync's update to whatever the lookups run on: the GPU
// backend (through Backend.Apply) or else the CPU mirror.
func applySync(f *lpmFlags, mirror **bubble.Image, u bubble.Update) error {
	if f.eng != nil {
		return f.eng.Apply(f.gpuTable, u)
	}
	return u.ApplyTo(mirror)
}

// checkLPM compares a sample of the traffic's lookups, the first ones, with
// the reference; lookup fills out with the answers for the first len(out).
func checkLPM(lookup func(out []uint32) error, ref *lpm.Reference, tr *lpmTraffic, sample int) (checked, mismatches int, err error) {
	if sample == 0 {
		sample = 200000
	}
	sample = min(sample, tr.len())
	out := make([]uint32, sample)
	if err := lookup(out); err != nil {
		return 0, 0, err
	}
	var bad []string
	for i := 0; i < sample; i++ {
		want, ok := ref.Lookup(tr.addrs[i])
		if !ok {
			want = 0
		}
		if out[i] != want {
			mismatches++
			if len(bad) < 5 {
				bad = append(bad, fmt.Sprintf("%s: got next hop %d, want %d", tr.addrs[i], out[i], want))
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		fmt.Fprintln(benchutil.MismatchLog, "mismatches:", strings.Join(bad, "; "))
	}
	return sample, mismatches, nil
}
