package routes

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/route"
)

// benchTable is the kernel and route table id the benchmark uses.
const benchTable = 100

// benchPorts is the number of veth "ports" of the benchmark's namespace.
const benchPorts = 4

type routesBenchFlags struct {
	benchutil.CommonFlags
	fib           string
	family        int
	updatesPerSec int
	duration      time.Duration
	tick          time.Duration
	via           string
	samples       int
	rcvbuf        int
	senders       int
	cpuprofile    string
	mutexprofile  string
}

// Result is one bench routes run (one family), one JSON object.
type Result struct {
	Work             string  `json:"work"` // routes
	Backend          string  `json:"backend"`
	Via              string  `json:"via"` // netlink | direct
	Family           int     `json:"family"`
	Routes           int     `json:"routes"`         // routes loaded
	RoutesPerSec     float64 `json:"routes_per_sec"` // loaded routes / time from the first change to all visible on the Engine
	KernelPerSec     float64 `json:"kernel_routes_per_sec,omitempty"`
	LoadSec          float64 `json:"load_sec"`
	VisibleSamples   int     `json:"visible_samples"`
	VisibleP50us     float64 `json:"visible_p50_us"` // one change (add or delete) to the Engine's lookup returning it
	VisibleP99us     float64 `json:"visible_p99_us"`
	VisibleMaxUs     float64 `json:"visible_max_us"`
	MLPSIdle         float64 `json:"mlps_idle"`
	MLPSUnderUpdates float64 `json:"mlps_under_updates,omitempty"`
	// Every round's figure, idle and under updates in pairs, for the spread
	// behind the medians.
	MLPSIdleRounds  []float64 `json:"mlps_idle_rounds,omitempty"`
	MLPSUnderRounds []float64 `json:"mlps_under_updates_rounds,omitempty"`
	LossPct         float64   `json:"loss_pct"`
	LossPctRounds   []float64 `json:"loss_pct_rounds,omitempty"` // each pair's loss, of which loss_pct is the median
	UpdatesAsked    int       `json:"updates_per_sec_asked"`
	UpdatesPerSec   float64   `json:"updates_per_sec"` // achieved while the lookups ran
	Overflows       uint64    `json:"overflows,omitempty"`
	Rebuilds        int       `json:"rebuilds"`  // off-line rebuilds of the family's trie during the lookups under updates
	GCCycles        uint32    `json:"gc_cycles"` // Go garbage collections during the lookups under updates
	Resyncs         uint64    `json:"resyncs,omitempty"`
	Batch           int       `json:"batch"`
	Rounds          int       `json:"rounds"`
	TickUs          float64   `json:"tick_us,omitempty"` // --tick: the updater's period
	Checked         int       `json:"checked"`
	Mismatches      int       `json:"mismatches"`
	Machine         string    `json:"machine"`
	GPU             string    `json:"gpu"`
	GoVersion       string    `json:"go"`
	Time            string    `json:"time"`
	Data            string    `json:"data"`
	Notes           string    `json:"notes,omitempty"`
}

// Run runs "gswitchctl bench routes" with the command-line arguments args
// (the flags after "bench routes"), each family's result to stdout as it
// is done, the flags' usage and progress to stderr. Its errors wrap
// benchutil.ErrUsage for a bad command line and benchutil.ErrMismatch for
// wrong answers under --check; ctx ends the run between two families.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f routesBenchFlags
	fs := flag.NewFlagSet("gswitchctl bench routes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.Register(fs, 1<<18)
	fs.Lookup("backend").Usage = "lookup backend: cpu, gpu, or cpu,gpu for both in this run (gpu needs the cuda build)"
	fs.StringVar(&f.fib, "fib", "", "routing table: one CIDR per line, .gz allowed (required)")
	fs.IntVar(&f.family, "family", 0, "4 or 6: only that family (0: both, one run each)")
	fs.IntVar(&f.updatesPerSec, "updates-per-sec", 0, "also measure lookups while this many route changes/s go through the route source (0: no)")
	fs.DurationVar(&f.duration, "duration", time.Second, "length of each timed lookup run")
	fs.DurationVar(&f.tick, "tick", 200*time.Microsecond, "--updates-per-sec: the updater hands over the changes due every `D`, as one batch")
	fs.StringVar(&f.via, "via", "netlink", "route source: netlink (a private namespace's kernel table, mirrored by kernelfib) or direct (route.Table.Add/Delete)")
	fs.IntVar(&f.samples, "samples", 400, "changes timed for the update-to-visible latency (half adds, half deletes)")
	fs.IntVar(&f.senders, "netlink-senders", 4, "--via netlink: netlink sockets sending the changes at once, each prefix's changes on one of them, in order")
	fs.IntVar(&f.rcvbuf, "receive-buffer", 64<<20, "--via netlink: the mirror's netlink receive buffer in bytes (an overflow resyncs)")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE`")
	fs.StringVar(&f.mutexprofile, "mutexprofile", "", "write a profile of the whole run's lock contention to `FILE`")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gswitchctl bench routes --fib FILE [flags]\n\nLoads the table through a route source (by default a private network namespace's kernel\ntable, mirrored over netlink) into a route.Table whose LPM images a gpu.Engine serves, and\nmeasures routes/s into the Engine-visible table, update-to-visible latency, and Engine lookups\nwith and without route changes flowing; --check compares lookups with a brute-force reference.\n\n")
		fs.PrintDefaults()
	}
	if err := benchutil.ParseFlags(fs, args); err != nil {
		return err
	}
	// --backend may name both: cpu,gpu runs every measurement on each, one
	// engine after the other, in this one run.
	backends := strings.Split(f.Backend, ",")
	for _, b := range backends {
		f.Backend = strings.TrimSpace(b)
		if err := f.validate(); err != nil {
			return err
		}
	}
	batchSet := false
	fs.Visit(func(fl *flag.Flag) { batchSet = batchSet || fl.Name == "batch" })
	cpuBatch := f.Batch
	if f.cpuprofile != "" {
		pf, err := os.Create(f.cpuprofile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if f.mutexprofile != "" {
		runtime.SetMutexProfileFraction(5)
		defer func() {
			if pf, err := os.Create(f.mutexprofile); err == nil {
				pprof.Lookup("mutex").WriteTo(pf, 0)
				pf.Close()
			}
		}()
	}
	prefixes, err := lpm.OpenPrefixFile(f.fib)
	if err != nil {
		return err
	}
	v4, v6 := lpm.SplitFamilies(prefixes)
	var rs []Result
	for _, b := range backends {
		f.Backend = strings.TrimSpace(b)
		f.Batch = cpuBatch
		if f.Backend == "gpu" && !batchSet {
			// A GPU round trip costs tens of µs: 256 keys a call
			// measures the latency, not the lookups. 1M keys, as bench
			// lpm: with 64K the lookup goroutine is bound by its driver
			// calls (~9 µs a batch on the H100 host, 6,000 M/s against
			// 11,000 with 1M, measured 2026-11-22), and any work beside it on the
			// host shows as loss under updates.
			f.Batch = 1 << 20
		}
		eng, err := f.openEngine()
		if err != nil {
			return err
		}
		for _, c := range []struct {
			fam lpm.Family
			ps  []netip.Prefix
		}{{lpm.IPv4, v4}, {lpm.IPv6, v6}} {
			if f.family != 0 && int(c.fam) != f.family {
				continue
			}
			if len(c.ps) == 0 {
				if f.family != 0 {
					eng.Close()
					return fmt.Errorf("%s: no IPv%d prefixes", f.fib, c.fam)
				}
				continue
			}
			if err := ctx.Err(); err != nil {
				eng.Close()
				return err
			}
			r, err := benchRoutesFamily(&f, eng, c.fam, c.ps, stderr)
			if err != nil {
				eng.Close()
				return err
			}
			rs = append(rs, r)
			printRoutesResult(stdout, f.JSON, r)
		}
		eng.Close()
	}
	if len(rs) == 0 {
		return fmt.Errorf("%s: no prefixes", f.fib)
	}
	for _, r := range rs {
		if r.Mismatches > 0 {
			return fmt.Errorf("%w: %d lookups disagree with the brute-force reference", benchutil.ErrMismatch, r.Mismatches)
		}
	}
	return nil
}

func (f *routesBenchFlags) validate() error {
	if err := f.CommonFlags.Validate(); err != nil {
		return err
	}
	switch {
	case f.fib == "":
		return fmt.Errorf("%w: bench routes needs --fib FILE", benchutil.ErrUsage)
	case f.family != 0 && f.family != 4 && f.family != 6:
		return fmt.Errorf("%w: --family must be 4 or 6", benchutil.ErrUsage)
	case f.updatesPerSec < 0:
		return fmt.Errorf("%w: --updates-per-sec must not be negative", benchutil.ErrUsage)
	case f.duration <= 0:
		return fmt.Errorf("%w: --duration must be positive", benchutil.ErrUsage)
	case f.senders < 1 || f.senders > 64:
		return fmt.Errorf("%w: --netlink-senders %d: 1 to 64", benchutil.ErrUsage, f.senders)
	case f.tick < 10*time.Microsecond || f.tick > time.Second:
		return fmt.Errorf("%w: --tick %v: 10µs to 1s", benchutil.ErrUsage, f.tick)
	case f.via != "netlink" && f.via != "direct":
		return fmt.Errorf("%w: --via must be netlink or direct", benchutil.ErrUsage)
	case f.samples < 0 || f.rcvbuf < 0:
		return fmt.Errorf("%w: --samples and --receive-buffer must not be negative", benchutil.ErrUsage)
	case f.via == "netlink" && os.Geteuid() != 0:
		return fmt.Errorf("%w: --via netlink makes a network namespace and needs root (or use --via direct)", benchutil.ErrUsage)
	}
	return nil
}

// openEngine opens the gpu.Engine of --backend (cpu: the CPU backend alone).
func (f *routesBenchFlags) openEngine() (*gpu.Engine, error) {
	ords, err := f.Ordinals()
	if err != nil {
		return nil, err
	}
	eng, err := gpu.Open(f.Backend, ords, f.MinBatch, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return nil, err
	}
	if f.Backend == "gpu" {
		if err := eng.SetStreams(f.Streams, f.Chunk); err != nil {
			eng.Close()
			return nil, err
		}
	}
	return eng, nil
}

// benchRoute makes prefix p's route of variant v: one or two next hops on
// ports 1..benchPorts, gateways in the ports' subnets (as the benchmark
// namespace addresses them), the kernel's default metric.
func benchRoute(p netip.Prefix, v uint32) route.Route {
	r := route.Route{Table: benchTable, Prefix: p, Source: route.SourceKernel}
	if !p.Addr().Is4() {
		r.Metric = 1024
	}
	for k := range 1 + v%2 {
		port := 1 + (v+k)%benchPorts
		r.NextHops = append(r.NextHops, route.NextHop{Gateway: benchGateway(port, 2+int(v%200), p.Addr().Is4()), Port: port, Weight: 1 + k})
	}
	return r
}

func benchGateway(port uint32, host int, v4 bool) netip.Addr {
	if v4 {
		return netip.AddrFrom4([4]byte{10, 255, byte(port), byte(host)})
	}
	return netip.MustParseAddr(fmt.Sprintf("2001:db8:ff:%d::%x", port, host))
}

// benchRoutesFamily runs the benchmark on one family's prefixes.
func benchRoutesFamily(f *routesBenchFlags, eng *gpu.Engine, fam lpm.Family, ps []netip.Prefix, stderr io.Writer) (Result, error) {
	r := Result{Work: "routes", Backend: f.Backend, Via: f.via, Family: int(fam), Batch: f.Batch, Rounds: f.Rounds,
		TickUs:       float64(f.tick) / 1e3,
		UpdatesAsked: f.updatesPerSec, Machine: benchutil.Machine(), GPU: "none", GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)}
	if f.Backend == "gpu" {
		r.GPU = eng.Device()
	}
	ps = lpm.Dedupe(ps)
	rng := rand.New(rand.NewPCG(f.Seed, 3))
	rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	nProbe := min(f.samples/2+1, len(ps)/10)
	probes, load := ps[:nProbe], ps[nProbe:]
	r.Routes = len(load)
	r.Data = fmt.Sprintf("%s (IPv%d, %d distinct prefixes: %d loaded, %d held back as latency probes; routes: 1-2 next hops on %d ports derived from the prefix); lookups: uniformly random addresses (seed %d); updates: %s",
		f.fib, fam, len(ps), len(load), len(probes), benchPorts, f.Seed, lpm.UpdateTraceDescription)

	tb, err := route.New(benchTable, route.Options{})
	if err != nil {
		return r, err
	}
	kind, id := gpu.LPM4, gpu.TableID(200)
	if fam == lpm.IPv6 {
		kind, id = gpu.LPM6, 201
	}
	var applyErr atomic.Pointer[error]
	v4, v6 := tb.Attach(func(uf lpm.Family, u bubble.Update) {
		if uf != fam {
			return
		}
		if err := eng.Apply(id, u); err != nil {
			applyErr.CompareAndSwap(nil, &err)
		}
	})
	img := v4
	if fam == lpm.IPv6 {
		img = v6
	}
	if err := eng.Load(id, kind, img); err != nil {
		return r, err
	}
	var src routeSource = directSource{tb}
	var nl *netlinkSource
	if f.via == "netlink" {
		if nl, err = newNetlinkSource(tb, f.rcvbuf, f.senders); err != nil {
			return r, err
		}
		src = nl
	}
	defer src.close()
	look := newEngineLookup(eng, id, fam)
	defer look.close()
	if f.Backend == "gpu" {
		look.pipeDepth = f.PipeDepth()
	}

	// Load.
	want := make(map[netip.Prefix]route.Route, len(ps))
	routes := make([]route.Route, len(load))
	for i, p := range load {
		routes[i] = benchRoute(p, lpm.SyntheticNextHop(p))
		want[p] = routes[i]
	}
	t0 := time.Now()
	if nl != nil {
		cs := make([]route.Change, len(routes))
		for i := range routes {
			cs[i].Route = routes[i]
		}
		if err := nl.update(cs); err != nil {
			return r, fmt.Errorf("bench routes: loading the kernel table: %w", err)
		}
		r.KernelPerSec = float64(len(routes)) / time.Since(t0).Seconds()
		for tb.Len() < len(routes) {
			time.Sleep(time.Millisecond)
		}
	} else {
		for i := range routes {
			if err := src.add(&routes[i]); err != nil {
				return r, err
			}
		}
	}
	// Visible on the Engine: the last route loaded answers there.
	last := routes[len(routes)-1].Prefix
	if !waitVisible(look, tb, last.Addr(), last, true, 30*time.Second) {
		return r, fmt.Errorf("bench routes: %v not visible on the engine 30 s after the load", last)
	}
	r.LoadSec = time.Since(t0).Seconds()
	r.RoutesPerSec = float64(len(routes)) / r.LoadSec
	fmt.Fprintf(stderr, "bench routes: IPv%d: %d routes loaded via %s in %.1f s\n", fam, len(routes), f.via, r.LoadSec)

	// Update-to-visible latency: add a held-back prefix, then delete it.
	ref := newRouteRef(want)
	var lats []float64
	for i, p := range probes {
		if len(lats) >= f.samples {
			break
		}
		a, ok := ref.addrFor(p, rng)
		if !ok {
			continue
		}
		rt := benchRoute(p, uint32(i))
		for _, add := range []bool{true, false} {
			t0 := time.Now()
			if add {
				err = src.add(&rt)
			} else {
				err = src.del(p)
			}
			if err != nil {
				return r, err
			}
			if !waitVisible(look, tb, a, p, add, 5*time.Second) {
				return r, fmt.Errorf("bench routes: the %s of %v not visible on the engine after 5 s", map[bool]string{true: "add", false: "delete"}[add], p)
			}
			lats = append(lats, float64(time.Since(t0).Nanoseconds())/1e3)
		}
	}
	r.VisibleSamples = len(lats)
	r.VisibleP50us, r.VisibleP99us, r.VisibleMaxUs = benchutil.Percentile(lats, 50), benchutil.Percentile(lats, 99), benchutil.Percentile(lats, 100)

	// Lookups, idle and under updates (paired rounds).
	traffic := lpm.RandomAddrs(fam, f.Lookups, f.Seed+1)
	look.setTraffic(traffic)
	trace := lpm.UpdateTrace(load, int(float64(f.updatesPerSec)*(f.duration.Seconds()+0.5)*float64(f.Rounds))+1, f.Seed+2)
	next := 0
	var idles, unders []float64
	var updates int
	var updTime time.Duration
	// The updater sleeps between its ticks; the idle run keeps it ticking
	// at rate 0, so that only the updates differ between the two and what
	// they cost the lookups is their own work.
	timed := func(rate int) (float64, paceResult) {
		stop := make(chan struct{})
		res := make(chan paceResult, 1)
		go func() { res <- paceRoutes(src, trace[next:], rate, f.tick, stop) }()
		mlps := look.rate(f.duration, f.Batch)
		close(stop)
		return mlps, <-res
	}
	rebuilds0 := tb.LPMStats(fam).Rebuilds
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gc0 := ms.NumGC
	for round := range f.Rounds {
		// The order of the pair alternates, so that neither always runs on
		// a warmer machine.
		if round%2 == 0 || f.updatesPerSec == 0 {
			idle, _ := timed(0)
			idles = append(idles, idle)
		}
		if f.updatesPerSec == 0 {
			continue
		}
		under, pr := timed(f.updatesPerSec)
		unders = append(unders, under)
		if round%2 == 1 {
			idle, _ := timed(0)
			idles = append(idles, idle)
		}
		if pr.err != nil {
			return r, pr.err
		}
		for _, u := range trace[next : next+pr.n] {
			ref.apply(u)
		}
		next += pr.n
		updates, updTime = updates+pr.n, updTime+pr.d
	}
	r.Rebuilds = tb.LPMStats(fam).Rebuilds - rebuilds0
	runtime.ReadMemStats(&ms)
	r.GCCycles = ms.NumGC - gc0
	for i := range idles {
		r.MLPSIdleRounds = append(r.MLPSIdleRounds, math.Round(idles[i]/1e4)/100)
	}
	for i := range unders {
		r.MLPSUnderRounds = append(r.MLPSUnderRounds, math.Round(unders[i]/1e4)/100)
	}
	r.MLPSIdle = benchutil.Median(idles) / 1e6
	if f.updatesPerSec > 0 {
		losses := make([]float64, len(idles))
		for i := range idles {
			losses[i] = 100 * (idles[i] - unders[i]) / idles[i]
		}
		r.MLPSUnderUpdates, r.LossPct = benchutil.Median(unders)/1e6, benchutil.Median(losses)
		for _, l := range losses {
			r.LossPctRounds = append(r.LossPctRounds, math.Round(l*100)/100)
		}
		r.UpdatesPerSec = float64(updates) / updTime.Seconds()
	}

	// Wait for the source to catch up (a sentinel change applied last),
	// then check.
	sentinel := probes[len(probes)-1]
	if a, ok := ref.addrFor(sentinel, rng); ok {
		srt := benchRoute(sentinel, 7)
		if err := src.add(&srt); err != nil {
			return r, err
		}
		if !waitVisible(look, tb, a, sentinel, true, 60*time.Second) {
			return r, fmt.Errorf("bench routes: the route source did not catch up within 60 s")
		}
		if err := src.del(sentinel); err != nil {
			return r, err
		}
		if !waitVisible(look, tb, a, sentinel, false, 60*time.Second) {
			return r, fmt.Errorf("bench routes: the route source did not catch up within 60 s")
		}
	}
	if p := applyErr.Load(); p != nil {
		return r, fmt.Errorf("bench routes: the engine refused an update: %w", *p)
	}
	if nl != nil {
		st := nl.mirror.Stats()
		r.Overflows, r.Resyncs = st.Overflows, st.Resyncs
	}
	if f.Check {
		n := f.CheckSample
		if n == 0 {
			n = 100000
		}
		addrs := append(lpm.RandomAddrs(fam, n/2, f.Seed+3), lpm.TableAddrs(load, n-n/2, f.Seed+4)...)
		r.Checked, r.Mismatches = look.check(tb, ref, addrs, stderr)
	}
	r.Notes = fmt.Sprintf("routes_per_sec: from the first change to the last route answering on the Engine (%s); visible: %d changes (half adds, half deletes of held-back prefixes), from the change to the first Engine lookup (slice API, one address) returning it; mlps: %s of %d keys, one goroutine, median of %d rounds of %v, idle (the updater ticking, no changes) and under updates (the updater applying the changes due every %v as one batch) run back to back in alternating order, loss = median of the paired losses",
		map[string]string{"netlink": fmt.Sprintf("RTM_NEWROUTE to the namespace's kernel table, one per route over %d sockets at once, mirrored by kernelfib", f.senders), "direct": "route.Table.Add, one per route"}[f.via], len(lats),
		map[bool]string{false: "Engine.LookupLPM (slice API) in batches", true: fmt.Sprintf("pinned Engine batches (Submit/Wait, %d in flight)", look.pipeDepth)}[look.pipeDepth > 0],
		f.Batch, f.Rounds, f.duration, f.tick)
	return r, nil
}

func printRoutesResult(w io.Writer, asJSON bool, r Result) {
	if asJSON {
		_ = json.NewEncoder(w).Encode(r)
		return
	}
	fmt.Fprintf(w, "# %s, %s, %s, gpu: %s\n", r.Machine, r.GoVersion, r.Time, r.GPU)
	fmt.Fprintf(w, "routes %s via %s IPv%d: %d routes in %.2f s = %.0f routes/s into the engine-visible table", r.Backend, r.Via, r.Family, r.Routes, r.LoadSec, r.RoutesPerSec)
	if r.KernelPerSec > 0 {
		fmt.Fprintf(w, " (into the kernel: %.0f routes/s)", r.KernelPerSec)
	}
	fmt.Fprintf(w, "\n  update to visible: p50 %.0f µs, p99 %.0f µs, max %.0f µs (%d changes)\n", r.VisibleP50us, r.VisibleP99us, r.VisibleMaxUs, r.VisibleSamples)
	fmt.Fprintf(w, "  lookups: %.2f Mlookups/s idle", r.MLPSIdle)
	if r.UpdatesAsked > 0 {
		fmt.Fprintf(w, ", %.2f under %.0f updates/s (asked %d): loss %.2f%%", r.MLPSUnderUpdates, r.UpdatesPerSec, r.UpdatesAsked, r.LossPct)
	}
	fmt.Fprintln(w)
	if r.Overflows > 0 || r.Resyncs > 1 {
		fmt.Fprintf(w, "  netlink overflows %d, resyncs %d\n", r.Overflows, r.Resyncs)
	}
	if r.Checked > 0 {
		fmt.Fprintf(w, "  checked %d engine lookups against the brute-force reference: %d mismatches\n", r.Checked, r.Mismatches)
	}
	fmt.Fprintf(w, "  %s\n# data: %s\n", r.Notes, strings.TrimSpace(r.Data))
}
