package lpm

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net/netip"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
)

type lpmFlags struct {
	benchutil.CommonFlags
	fib           string
	family        int
	updatesPerSec int
	updates       int
	duration      time.Duration
	traffic       string
	levels        int
	kernelOnly    bool
	maxDelay      time.Duration
	applyOn       string
	eng           benchutil.GPUEngine // --backend gpu
	pipe          *benchutil.Pipe     // --backend gpu: pinned batches of the traffic being measured
	gpuTable      gpu.TableID         // the table the GPU lookups go to (the family being measured)
}

// Run runs "gswitchctl bench lpm" with the command-line arguments args
// (the flags after "bench lpm"), the results to stdout, the flags' usage
// to stderr. Its errors wrap benchutil.ErrUsage for a bad command line and
// benchutil.ErrMismatch for wrong answers under --check; ctx ends the run
// between two families.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f lpmFlags
	fs := flag.NewFlagSet("gswitchctl bench lpm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.Register(fs, 1<<20)
	fs.StringVar(&f.fib, "fib", "", "routing table: one CIDR per line, .gz allowed (required)")
	fs.IntVar(&f.family, "family", 0, "4 or 6: only that family (0: both, one run each)")
	fs.IntVar(&f.updatesPerSec, "updates-per-sec", 0, "also measure lookups while this many route updates/s are applied (0: no)")
	fs.IntVar(&f.updates, "updates", 100000, "updates applied back to back to measure the update rate (0: skip)")
	fs.DurationVar(&f.duration, "duration", 2*time.Second, "length of each lookups-under-updates measurement")
	fs.StringVar(&f.traffic, "traffic", "both", "random (uniform addresses), table (addresses inside table prefixes) or both")
	fs.IntVar(&f.levels, "levels", 0, "trie levels (0: chosen automatically); strides by GAMT Algorithm 3")
	fs.BoolVar(&f.kernelOnly, "kernel-only", false, "gpu backend: time only the lookup kernel (no end-to-end figure)")
	fs.StringVar(&f.applyOn, "apply-on", "updater", "gpu backend, under updates: the goroutine that hands each Sync's update to the backend (Backend.Apply): updater (the one applying the route updates, as the agent's control plane does; an update counts as visible at the first Submit after its Apply returned) or lookup (the one submitting the batches, before its next Submit: Apply's host work is charged to the lookups)")
	fs.DurationVar(&f.maxDelay, "max-delay", 0, "gpu backend: also feed the traffic key by key through the dynamic batcher (batches of --batch closed when full or when their oldest key waited this long) and report its rate and batch latency (0: no)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gswitchctl bench lpm --fib FILE [flags]\n\nBuilds the GAMT trie from the table, times batched lookups, route updates and\nlookups under updates, and with --check compares against a reference that tries every prefix length.\n\n")
		fs.PrintDefaults()
	}
	if err := benchutil.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	if f.Backend == "gpu" {
		batchSet := false
		fs.Visit(func(fl *flag.Flag) { batchSet = batchSet || fl.Name == "batch" })
		if !batchSet {
			f.Batch = 1 << 20
		}
		eng, err := f.OpenGPU()
		if err != nil {
			return err
		}
		defer eng.Close()
		f.eng = eng
	}
	prefixes, err := lpm.OpenPrefixFile(f.fib)
	if err != nil {
		return err
	}
	var rs []benchutil.Result
	for _, fam := range []lpm.Family{lpm.IPv4, lpm.IPv6} {
		if f.family != 0 && int(fam) != f.family {
			continue
		}
		var sel []netip.Prefix
		for _, p := range prefixes {
			if p.Addr().Is4() == (fam == lpm.IPv4) {
				sel = append(sel, p)
			}
		}
		if len(sel) == 0 {
			if f.family != 0 {
				return fmt.Errorf("%s: no IPv%d prefixes", f.fib, fam)
			}
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		out, err := benchLPMFamily(&f, fam, sel)
		if err != nil {
			return err
		}
		rs = append(rs, out...)
	}
	if len(rs) == 0 {
		return fmt.Errorf("%s: no prefixes", f.fib)
	}
	if err := benchutil.PrintResults(stdout, f.JSON, rs); err != nil {
		return err
	}
	return benchutil.CheckOutcome(rs)
}

func (f *lpmFlags) validate() error {
	if err := f.CommonFlags.Validate(); err != nil {
		return err
	}
	switch {
	case f.fib == "":
		return fmt.Errorf("%w: bench lpm needs --fib FILE", benchutil.ErrUsage)
	case f.family != 0 && f.family != 4 && f.family != 6:
		return fmt.Errorf("%w: --family must be 4 or 6", benchutil.ErrUsage)
	case f.updatesPerSec < 0 || f.updates < 0:
		return fmt.Errorf("%w: update counts must not be negative", benchutil.ErrUsage)
	case f.duration <= 0:
		return fmt.Errorf("%w: --duration must be positive", benchutil.ErrUsage)
	case f.applyOn != "updater" && f.applyOn != "lookup":
		return fmt.Errorf("%w: --apply-on %q: want updater or lookup", benchutil.ErrUsage, f.applyOn)
	case f.traffic != "random" && f.traffic != "table" && f.traffic != "both":
		return fmt.Errorf("%w: --traffic must be random, table or both", benchutil.ErrUsage)
	case f.levels < 0:
		return fmt.Errorf("%w: --levels must not be negative", benchutil.ErrUsage)
	case f.Streams < 1 || f.Streams > 64:
		return fmt.Errorf("%w: --streams must be in 1..64", benchutil.ErrUsage)
	case f.Chunk < 0:
		return fmt.Errorf("%w: --chunk must not be negative", benchutil.ErrUsage)
	}
	return nil
}

// lpmTraffic is one traffic set in the forms the lookups take.
type lpmTraffic struct {
	name  string
	addrs []netip.Addr
	v4    []uint32
	v6    []lpm.Addr6
}

func newLPMTraffic(name string, addrs []netip.Addr) *lpmTraffic {
	tr := &lpmTraffic{name: name, addrs: addrs}
	for _, a := range addrs {
		if a.Is4() {
			b := a.As4()
			tr.v4 = append(tr.v4, uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]))
		} else {
			tr.v6 = append(tr.v6, benchutil.Addr6(a))
		}
	}
	return tr
}

func (tr *lpmTraffic) len() int { return len(tr.addrs) }

// lookup looks up addresses [lo, hi) in batches, the results into out[lo:hi].
func (tr *lpmTraffic) lookup(v *lpm.View, out []uint32, lo, hi, batch int) {
	for i := lo; i < hi; i += batch {
		j := min(i+batch, hi)
		if tr.v4 != nil {
			v.LookupBatch4(tr.v4[i:j], out[i:j])
		} else {
			v.LookupBatch6(tr.v6[i:j], out[i:j])
		}
	}
}

func benchLPMFamily(f *lpmFlags, fam lpm.Family, prefixes []netip.Prefix) ([]benchutil.Result, error) {
	routes := make([]lpm.Route, len(prefixes))
	for i, p := range prefixes {
		routes[i] = lpm.Route{Prefix: p, NextHop: lpm.SyntheticNextHop(p)}
	}
	opts := lpm.Options{Levels: f.levels}
	t0 := time.Now()
	tab, err := lpm.Build(fam, routes, opts)
	if err != nil {
		return nil, err
	}
	buildMS := float64(time.Since(t0).Microseconds()) / 1000
	ref := lpm.NewReference(fam)
	for _, r := range routes {
		if err := ref.Insert(r.Prefix, r.NextHop); err != nil {
			return nil, err
		}
	}
	st := tab.Stats()

	var traffics []*lpmTraffic
	if f.traffic != "table" {
		traffics = append(traffics, newLPMTraffic("random", lpm.RandomAddrs(fam, f.Lookups, f.Seed)))
	}
	if f.traffic != "random" {
		traffics = append(traffics, newLPMTraffic("table", lpm.TableAddrs(prefixes, f.Lookups, f.Seed+1)))
	}
	// Enough updates for the back-to-back run and, with slack for start-up,
	// every lookups-under-updates run.
	underRun := float64(f.updatesPerSec) * (2*f.duration.Seconds() + 1) * float64(f.Rounds)
	trace := lpm.UpdateTrace(prefixes, f.updates+int(underRun)*len(traffics)+1, f.Seed+2)
	next := 0 // the next trace entry to apply

	var rs []benchutil.Result
	for _, tr := range traffics {
		r := benchutil.NewResult("lpm", &f.CommonFlags)
		r.Algo, r.Family, r.Traffic = "gamt", int(fam), tr.name
		r.Entries, r.BuildMS = len(prefixes), buildMS
		r.Data = fmt.Sprintf("%s (IPv%d, %d prefixes, next hops: a hash of the prefix into 1..256); traffic: %s; updates: %s",
			f.fib, fam, len(prefixes), trafficDescription(tr.name, f.Seed), lpm.UpdateTraceDescription)

		// Idle lookups on the table's own view.
		outs := make([]uint32, tr.len())
		view := tab.View()
		cpuBatch := f.Batch
		if f.eng != nil {
			cpuBatch = 256
		}
		rates, total := benchutil.TimeRounds(f.Rounds, func() int {
			return benchutil.Parallel(f.Threads, func(t int) int {
				lo, hi := t*tr.len()/f.Threads, (t+1)*tr.len()/f.Threads
				tr.lookup(view, outs, lo, hi, cpuBatch)
				return hi - lo
			})
		})
		r.Lookups, r.MLPS = total, benchutil.Median(rates)/1e6
		r.NsPerLookup = 1e9 / benchutil.Median(rates) * float64(f.Threads)

		if f.eng != nil {
			if err := gpuLookups(&r, f, fam, tab, ref, tr, cpuBatch); err != nil {
				return nil, err
			}
		}
		if f.updatesPerSec > 0 {
			if next, err = underUpdates(&r, f, tab, ref, trace, next, tr); err != nil {
				return nil, err
			}
			if f.eng != nil && f.Check {
				// The device image, kept only by Backend.Apply, against the
				// reference with the same updates.
				c, m, err := checkLPM(func(out []uint32) error { return gpuLook(f, tr, 0, len(out), out, f.Batch) }, ref, tr, f.CheckSample)
				if err != nil {
					return nil, err
				}
				r.Checked, r.Mismatches = r.Checked+c, r.Mismatches+m
			}
		}
		if f.updates > 0 && r.UpdateMaxPerSec == 0 && tr == traffics[0] {
			n := min(f.updates, len(trace)-next)
			t0 := time.Now()
			if err := applyUpdates(tab, trace[next:next+n], 1000); err != nil {
				return nil, err
			}
			r.UpdateMaxPerSec = float64(n) / time.Since(t0).Seconds()
			if err := applyUpdates(ref, trace[next:next+n], 0); err != nil {
				return nil, err
			}
			next += n
		}
		st = tab.Stats()
		r.ImageBytes, r.BytesPerEntry = st.ImageBytes, st.BytesPerPrefix
		r.Layout = fmt.Sprintf("strides %v, nodes per level %v, %d rebuilds so far", st.Strides, st.NodesPerLevel, st.Rebuilds)
		if f.Check {
			v := tab.View()
			c, m, _ := checkLPM(func(out []uint32) error {
				tr.lookup(v, out, 0, len(out), 256)
				return nil
			}, ref, tr, f.CheckSample)
			r.Checked, r.Mismatches = r.Checked+c, r.Mismatches+m
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func trafficDescription(name string, seed uint64) string {
	if name == "random" {
		return fmt.Sprintf("uniformly random addresses (seed %d)", seed)
	}
	return fmt.Sprintf("in-table: an address drawn uniformly inside a prefix drawn uniformly from the table (seed %d)", seed+1)
}

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

// spinUntil waits for t without sleeping: a sleeping updater would be woken
// by the timer of whichever processor holds it, often the lookup loop's,
// and preempt it; a spinning one keeps a core of its own, as a control-plane
// core beside a datapath core does.
func spinUntil(t time.Time) {
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}

// gpuLookups loads the table's current image into the GPU backend and times
// the traffic's lookups there in batches of f.batch: end to end through
// pinned batches (the datapath's way: keys written into the backend's
// batches, at most --depth in flight; mlps), end to end through the slice
// API (LookupLPM4/6: the host copies into and out of pinned staging
// included; mlps_staged), and the kernel alone (CUDA events); with --check
// it compares the GPU's answers with the reference. The CPU figure already
// in r moves to mlps_cpu.
func gpuLookups(r *benchutil.Result, f *lpmFlags, fam lpm.Family, tab *lpm.Table, ref *lpm.Reference, tr *lpmTraffic, cpuBatch int) error {
	kind, id := gpu.LPM4, gpu.TableID(4)
	if fam == lpm.IPv6 {
		kind, id = gpu.LPM6, 6
	}
	tab.Mirror().Sync()
	if err := f.eng.Load(id, kind, tab.Mirror().Image()); err != nil {
		return err
	}
	f.gpuTable = id
	n := tr.len()
	batch := min(f.Batch, n)
	if f.pipe != nil {
		f.pipe.Free()
	}
	var err error
	if f.pipe, err = newLPMPipe(f, tr, id, batch); err != nil {
		return err
	}
	look := func(lo, hi int, out []uint32) error { return gpuLook(f, tr, lo, hi, out, batch) }
	r.MLPSCPU, r.BatchCPU = r.MLPS, cpuBatch
	r.Batch, r.Streams, r.Depth, r.GPU = batch, f.Streams, f.pipe.Depth, f.eng.Device()
	r.MLPS, r.NsPerLookup, r.Lookups = 0, 0, 0
	r.Notes = fmt.Sprintf("gpu backend: mlps = end to end with the keys already in pinned batches of %d (the datapath's way), %d stream(s), at most %d batches in flight, copies in and out included; batch_latency_us = Submit to results on the host; mlps_staged = the same through LookupLPM (host copies into and out of pinned staging included); mlps_kernel = the kernel alone on one batch (CUDA events); mlps_cpu = the CPU backend (batch %d, %d thread(s)) on the same traffic; under updates: the pinned pipeline, each Sync's update applied through Backend.Apply before the next Submit", batch, f.Streams, f.pipe.Depth, cpuBatch, f.Threads)
	if !f.kernelOnly {
		rate, lat, err := benchutil.PipeRounds(f.pipe, f.Rounds, max(n, 4*f.pipe.Depth*batch))
		if err != nil {
			return err
		}
		r.MLPS, r.NsPerLookup = rate/1e6, 1e9/rate
		r.BatchLatencyUs, r.BatchLatencyP99Us = benchutil.LatencyStats(lat)
		r.Lookups = int64(max(n, 4*f.pipe.Depth*batch)) * int64(f.Rounds)
		out := make([]uint32, n)
		if err := look(0, n, out); err != nil { // warm-up
			return err
		}
		rates, _ := benchutil.TimeRounds(f.Rounds, func() int {
			if e := look(0, n, out); e != nil && err == nil {
				err = e
			}
			return n
		})
		if err != nil {
			return err
		}
		r.MLPSStaged = benchutil.Median(rates) / 1e6
	}
	if f.maxDelay > 0 {
		if err := batcherRun(r, f, tr, id, batch); err != nil {
			return err
		}
	}
	iters := max(3, min(200, (1<<26)/batch))
	var ms float64
	if tr.v4 != nil {
		ms, err = f.eng.KernelTimeLPM4(id, tr.v4[:batch], iters)
	} else {
		ms, err = f.eng.KernelTimeLPM6(id, tr.v6[:batch], iters)
	}
	if err != nil {
		return err
	}
	r.MLPSKernel = float64(batch) / ms / 1e3
	if f.Check {
		c, m, err := checkLPM(func(out []uint32) error { return look(0, len(out), out) }, ref, tr, f.CheckSample)
		if err != nil {
			return err
		}
		r.Checked, r.Mismatches = r.Checked+c, r.Mismatches+m
		c, m, err = checkPipe(f, ref, tr)
		if err != nil {
			return err
		}
		r.Checked, r.Mismatches = r.Checked+c, r.Mismatches+m
	}
	return nil
}

// newLPMPipe fills pinned batches of batch keys with the traffic, in order,
// wrapping around.
func newLPMPipe(f *lpmFlags, tr *lpmTraffic, id gpu.TableID, batch int) (*benchutil.Pipe, error) {
	return benchutil.NewAddrPipe(f.eng, id, tr.v4, tr.v6, batch, f.PipeDepth())
}

// checkPipe runs the pipe's batches once and compares a sample of their
// answers, up to --check-sample keys, with the reference.
func checkPipe(f *lpmFlags, ref *lpm.Reference, tr *lpmTraffic) (checked, mismatches int, err error) {
	p := f.pipe
	n := tr.len()
	for bi, b := range p.Batches {
		if checked >= f.CheckSample {
			break
		}
		if err := f.eng.Submit(p.ID, b); err != nil {
			return checked, mismatches, err
		}
		if err := b.Wait(); err != nil {
			return checked, mismatches, err
		}
		for k := 0; k < b.N && checked < f.CheckSample; k++ {
			want, _ := ref.Lookup(tr.addrs[(bi*b.Cap+k)%n]) // the key newLPMPipe put there
			if b.Out[k] != want {
				if mismatches < 5 {
					fmt.Fprintf(benchutil.MismatchLog, "gpu pinned batch: key %d: got %d, reference %d\n", k, b.Out[k], want)
				}
				mismatches++
			}
			checked++
		}
	}
	return checked, mismatches, nil
}

// gpuLook looks up the traffic's addresses [lo, hi) on the GPU backend's
// current table in calls of batch addresses, the results into out[:hi-lo].
func gpuLook(f *lpmFlags, tr *lpmTraffic, lo, hi int, out []uint32, batch int) error {
	for i := lo; i < hi; i += batch {
		j := min(i+batch, hi)
		var err error
		if tr.v4 != nil {
			err = f.eng.LookupLPM4(f.gpuTable, tr.v4[i:j], out[i-lo:j-lo])
		} else {
			err = f.eng.LookupLPM6(f.gpuTable, tr.v6[i:j], out[i-lo:j-lo])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// batcherRun feeds the traffic key by key through a gpu.Batcher (the
// datapath's dynamic batching) for --duration and reports its rate and
// batch latency (first key's arrival to results), one producer goroutine.
func batcherRun(r *benchutil.Result, f *lpmFlags, tr *lpmTraffic, id gpu.TableID, batch int) error {
	kind, width := gpu.LPM4, 1
	if tr.v6 != nil {
		kind, width = gpu.LPM6, 4
	}
	q, err := gpu.NewBatcher(f.eng, id, gpu.BatcherConfig{Kind: kind, Width: width, MaxBatch: batch, MaxDelay: f.maxDelay, Depth: f.PipeDepth()}, nil)
	if err != nil {
		return err
	}
	defer q.Close()
	n := tr.len()
	start := time.Now()
	deadline := start.Add(f.duration)
	keys := 0
	for k := 0; ; k++ {
		b, i, err := q.Next()
		if err != nil {
			return err
		}
		if tr.v4 != nil {
			b.Keys[i] = tr.v4[k%n]
		} else {
			b.Addrs6()[i] = tr.v6[k%n]
		}
		if err := q.Commit(); err != nil {
			return err
		}
		keys++
		if k%256 == 255 {
			now := time.Now()
			if err := q.Poll(now); err != nil {
				return err
			}
			if now.After(deadline) {
				break
			}
		}
	}
	if err := q.Flush(); err != nil {
		return err
	}
	st := q.Stats()
	r.MaxDelayUs = float64(f.maxDelay.Nanoseconds()) / 1e3
	r.BatcherMLPS = float64(st.Keys) / time.Since(start).Seconds() / 1e6
	r.BatcherLatencyUs = float64(st.Latency.Nanoseconds()) / 1e3 / float64(max(st.Batches, 1))
	r.BatcherMaxLatencyUs = float64(st.MaxLatency.Nanoseconds()) / 1e3
	r.BatcherByDelay = st.ByDelay
	r.Notes += fmt.Sprintf("; --max-delay: %d keys fed one by one from one goroutine into a gpu.Batcher (batches of %d closed when full or after %v), %d batches, %d closed by the delay; batcher_latency_us = first key's arrival to the batch's results, mean", keys, batch, f.maxDelay, st.Batches, st.ByDelay)
	return nil
}
