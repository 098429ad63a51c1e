package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/internal/diag"
	ps "github.com/gswitch/gswitch/tables/pubsub"
)

// Batch is one batch size's throughput.
type Batch struct {
	Batch        int     `json:"batch"`
	EventsPerSec float64 `json:"events_per_sec"`
	USPerEvent   float64 `json:"us_per_event"`
	// EventsPerCPUSec is events per second of the matching thread's CPU
	// time (--threads 1 only): on a shared machine, what one core that
	// is not taken away does.
	EventsPerCPUSec float64 `json:"events_per_cpu_sec,omitempty"`
}

// Result is one point of the benchmark (the package doc gives its JSON).
type Result struct {
	Work          string  `json:"work"`
	Backend       string  `json:"backend"`
	Sweep         string  `json:"sweep"`
	Point         string  `json:"point"`
	Interfaces    int     `json:"interfaces"`
	Filters       int     `json:"filters"`
	Constraints   int     `json:"constraints"`
	Names         int     `json:"names"`
	Attrs         string  `json:"attrs"`
	ConsPerFilter string  `json:"constraints_per_filter"`
	NumericShare  float64 `json:"numeric_share"`
	Zipf          float64 `json:"zipf"`
	DeployMS      float64 `json:"deploy_ms"`
	ChangeP50US   float64 `json:"change_p50_us"`
	// DeployDeviceMS is the image's copy for the device and its load
	// (gpu backend), from the moment the image is built, while the
	// table's indexes are still filled (part of DeployTableMS; the CUDA
	// context and kernel were opened from the start meanwhile).
	DeployDeviceMS float64 `json:"deploy_device_ms,omitempty"`
	// DeployLayoutMS is the device layout's build (gpu backend; part of
	// DeployTableMS: pubsub.Table.AddSpecsDevice builds it while the
	// indexes are filled).
	DeployLayoutMS float64 `json:"deploy_layout_ms,omitempty"`
	// ChangeVisibleP50US is one change (an add or a remove) until the
	// device answers with it: the table's change, the layout's bubbles
	// (pubsub.Device.Update) and their copy to the device (gpu backend).
	ChangeVisibleP50US float64 `json:"change_visible_p50_us,omitempty"`
	ChangeVisibleP99US float64 `json:"change_visible_p99_us,omitempty"`
	// DeviceBytes is the device image's size (gpu backend).
	DeviceBytes     int     `json:"device_bytes,omitempty"`
	LatencyP50US    float64 `json:"latency_p50_us"`
	LatencyP99US    float64 `json:"latency_p99_us"`
	LatencyCPUP50US float64 `json:"latency_cpu_p50_us"`
	Batches         []Batch `json:"batches"`
	// LatencyParts breaks the single event's wall time down (gpu, the
	// small-batch path: p50 of each part, µs).
	LatencyParts *LatencyParts `json:"latency_parts,omitempty"`
	// LatencyModes is the single event's latency in each small-batch mode
	// (gpu, --small-modes), the default mode's included.
	LatencyModes []ModeLatency `json:"latency_modes,omitempty"`
	// DeployTableMS is the part of DeployMS that is the table's bulk add
	// (gpu backend: with the device image built and loaded alongside, so
	// it is all of DeployMS).
	DeployTableMS float64 `json:"deploy_table_ms"`
	// Churn is throughput under subscription changes (--churn).
	Churn         *Churn  `json:"churn,omitempty"`
	Threads       int     `json:"threads"`
	Events        int     `json:"events"`
	Rounds        int     `json:"rounds"`
	PortsPerEvent float64 `json:"ports_per_event"`
	Checked       int     `json:"checked"`
	Mismatches    int     `json:"mismatches"`
	Machine       string  `json:"machine"`
	GPU           string  `json:"gpu"`
	GoVersion     string  `json:"go"`
	Time          string  `json:"time"`
}

// LatencyParts is the p50 of each part of one event's match on the
// small-batch path, in µs: encoding by name, queueing the copies and the
// launch (one cgo call), waiting for the answer, decoding the ports.
type LatencyParts struct {
	Mode     string  `json:"mode"`
	EncodeUS float64 `json:"encode_us"`
	QueueUS  float64 `json:"queue_us"`
	WaitUS   float64 `json:"wait_us"`
	DecodeUS float64 `json:"decode_us"`
}

// ModeLatency is one small-batch mode's single-event latency.
type ModeLatency struct {
	Mode   string  `json:"mode"`
	Splits int     `json:"splits,omitempty"` // blocks per event (0: the matcher's rule)
	P50US  float64 `json:"p50_us"`
	P99US  float64 `json:"p99_us"`
	Error  string  `json:"error,omitempty"` // why the mode could not be set up
	// Parts is the p50 of each part of the mode's calls.
	Parts *LatencyParts `json:"parts,omitempty"`
}

type flags struct {
	churn          float64
	churnBatch     int
	churnClients   int
	churnSeconds   float64
	churnOp        string
	cpuprofile     string
	smallModes     []string
	smallSplits    []int
	sweep          string
	scale          float64
	events         int
	batches        []int
	latencySamples int
	rounds         int
	threads        int
	check          int
	backend        string
	seed           int64
	json           bool
}

// point is one scenario of a sweep.
type point struct {
	sweep, name string
	sc          ps.Scenario
}

var sweepNames = []string{"attrs", "constraints", "filters", "interfaces", "names", "numeric", "zipf"}

// Run runs "gswitchctl bench pubsub" with args (the flags after "bench
// pubsub"), the results to stdout, usage to stderr. Its errors wrap
// benchutil.ErrUsage for a bad command line and benchutil.ErrMismatch for
// answers that disagree with the brute-force evaluator; ctx ends the run
// between two points.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.backend == "gpu" && !gpu.EventDeviceBuilt {
		return errors.New("bench pubsub --backend gpu: the GPU matcher is not in this build (build with -tags cuda, or use --backend cpu)")
	}
	pts, err := points(f)
	if err != nil {
		return err
	}
	stopProf, err := diag.StartCPUProfile(f.cpuprofile)
	if err != nil {
		return fmt.Errorf("bench pubsub --cpuprofile: %w", err)
	}
	defer stopProf()
	var rs []Result
	for _, p := range pts {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := runPoint(f, p)
		if err != nil {
			return err
		}
		if f.json {
			if err := json.NewEncoder(stdout).Encode(r); err != nil {
				return err
			}
		}
		rs = append(rs, r)
	}
	if !f.json {
		printTable(stdout, rs)
	}
	for _, r := range rs {
		if r.Mismatches > 0 {
			return fmt.Errorf("%w: %s %s: %d of %d events", benchutil.ErrMismatch, r.Sweep, r.Point, r.Mismatches, r.Checked)
		}
	}
	return nil
}

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("gswitchctl bench pubsub", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.sweep, "sweep", "none", "none (the base scenario), all, or a comma-separated list of "+strings.Join(sweepNames, ", "))
	fs.Float64Var(&f.scale, "scale", 1, "multiply the filters per interface by `F` (0.01: a quick run)")
	fs.IntVar(&f.events, "events", 20000, "events per timed round: `N`")
	batches := fs.String("batches", "1,1024,16384", "batch sizes of the throughput figures: `LIST`")
	fs.IntVar(&f.latencySamples, "latency-samples", 2000, "events timed one at a time: `N`")
	fs.IntVar(&f.rounds, "rounds", 5, "timed rounds; rates are the median")
	fs.IntVar(&f.threads, "threads", 1, "matching goroutines in the throughput figures")
	fs.IntVar(&f.check, "check", 100, "events compared with the brute-force evaluator: `N` (0: none)")
	fs.StringVar(&f.backend, "backend", "cpu", "matcher: cpu, or gpu (the CUDA matcher on device 0; a build with -tags cuda)")
	fs.Int64Var(&f.seed, "seed", 1, "seed of the scenario generator")
	fs.BoolVar(&f.json, "json", false, "print one JSON object per point")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to `FILE`")
	fs.Float64Var(&f.churn, "churn", 0, "also measure throughput with `RATE` subscription changes per second applied (0: not)")
	fs.IntVar(&f.churnBatch, "churn-batch", 1024, "events per batch of the --churn rounds")
	fs.IntVar(&f.churnClients, "churn-clients", 1, "goroutines making the --churn changes, each its share of the rate, each change visible before its next")
	fs.Float64Var(&f.churnSeconds, "churn-seconds", 1, "about how long each --churn round matches")
	fs.StringVar(&f.churnOp, "churn-op", "change", "what each --churn change does: change (add or remove a subscription, made visible), table (the table's change only: the gpu path's device is not updated until the round ends), lock (the table's write lock taken and released, no change), cpu (10 µs of busy work, no change: what a change's CPU alone costs the matching)")
	smallSplits := fs.String("small-splits", "8,16,32", "gpu: blocks per event whose single-event latency is measured too, in the default small-batch mode (empty: none)")
	smallModes := fs.String("small-modes", "copy,mapped,flag,graph,off", "gpu: the small-batch modes whose single-event latency is measured too (empty: none)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: gswitchctl bench pubsub [flags]\n\nContent-based matching on CCM's default scenario and its sweeps: deploy time,\nchange time, per-event latency, events/s in batches.\n\n")
		fs.PrintDefaults()
	}
	if err := benchutil.ParseFlags(fs, args); err != nil {
		return nil, err
	}
	for _, s := range strings.Split(*batches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: --batches %q: want positive numbers", benchutil.ErrUsage, *batches)
		}
		f.batches = append(f.batches, n)
	}
	for _, m := range strings.Split(*smallModes, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		if _, err := gpu.ParseSmallMode(m); err != nil {
			return nil, fmt.Errorf("%w: --small-modes: %v", benchutil.ErrUsage, err)
		}
		f.smallModes = append(f.smallModes, m)
	}
	for _, x := range strings.Split(*smallSplits, ",") {
		if x = strings.TrimSpace(x); x == "" {
			continue
		}
		n, err := strconv.Atoi(x)
		if err != nil || n < 1 || n > 256 {
			return nil, fmt.Errorf("%w: --small-splits %q: want numbers 1..256", benchutil.ErrUsage, *smallSplits)
		}
		f.smallSplits = append(f.smallSplits, n)
	}
	switch {
	case f.churnOp != "change" && f.churnOp != "table" && f.churnOp != "lock" && f.churnOp != "cpu":
		return nil, fmt.Errorf("%w: --churn-op %q: want change, table, lock or cpu", benchutil.ErrUsage, f.churnOp)
	case f.churn < 0 || f.churnBatch < 1 || f.churnSeconds <= 0 || f.churnClients < 1 || f.churnClients > 256:
		return nil, fmt.Errorf("%w: --churn wants at least 0, --churn-batch at least 1, --churn-seconds more than 0, --churn-clients 1..256", benchutil.ErrUsage)
	case f.scale <= 0 || f.scale > 100:
		return nil, fmt.Errorf("%w: --scale %g: want more than 0, at most 100", benchutil.ErrUsage, f.scale)
	case f.events < 1, f.latencySamples < 1, f.rounds < 1, f.threads < 1, f.check < 0:
		return nil, fmt.Errorf("%w: --events, --latency-samples, --rounds and --threads want at least 1, --check at least 0", benchutil.ErrUsage)
	case f.backend != "cpu" && f.backend != "gpu":
		return nil, fmt.Errorf("%w: --backend %q: want cpu or gpu", benchutil.ErrUsage, f.backend)
	}
	return f, nil
}

// points lists the scenarios the flags ask for.
func points(f *flags) ([]point, error) {
	base := ps.DefaultScenario()
	base.Seed = f.seed
	base.FiltersMin = max(1, int(float64(base.FiltersMin)*f.scale))
	base.FiltersMax = max(base.FiltersMin, int(float64(base.FiltersMax)*f.scale))
	if f.sweep == "none" || f.sweep == "" {
		return []point{{"none", "default", base}}, nil
	}
	want := strings.Split(f.sweep, ",")
	if f.sweep == "all" {
		want = sweepNames
	}
	var pts []point
	for _, w := range want {
		add := func(name string, mod func(*ps.Scenario)) {
			sc := base
			mod(&sc)
			pts = append(pts, point{w, name, sc})
		}
		switch w {
		case "attrs":
			for _, a := range [][2]int{{1, 1}, {3, 5}, {8, 8}, {16, 16}} {
				add(fmt.Sprintf("%d-%d", a[0], a[1]), func(s *ps.Scenario) { s.AttrsMin, s.AttrsMax = a[0], a[1] })
			}
		case "constraints":
			for _, c := range [][2]int{{1, 1}, {3, 5}, {8, 8}, {12, 12}} {
				add(fmt.Sprintf("%d-%d", c[0], c[1]), func(s *ps.Scenario) { s.ConstraintsMin, s.ConstraintsMax = c[0], c[1] })
			}
		case "filters":
			for _, m := range []float64{0.1, 0.5, 1, 2} {
				add(fmt.Sprintf("x%g", m), func(s *ps.Scenario) {
					s.FiltersMin, s.FiltersMax = max(1, int(float64(s.FiltersMin)*m)), max(1, int(float64(s.FiltersMax)*m))
				})
			}
		case "interfaces":
			for _, n := range []int{10, 25, 50, 100} {
				add(strconv.Itoa(n), func(s *ps.Scenario) {
					k := float64(s.Interfaces) / float64(n)
					s.Interfaces = n
					s.FiltersMin, s.FiltersMax = max(1, int(float64(s.FiltersMin)*k)), max(1, int(float64(s.FiltersMax)*k))
				})
			}
		case "names":
			for _, n := range []int{10, 100, 1000, 10000} {
				add(strconv.Itoa(n), func(s *ps.Scenario) { s.Names = n })
			}
		case "numeric":
			for _, x := range []float64{0, 0.5, 1} {
				add(fmt.Sprint(x), func(s *ps.Scenario) { s.NumericShare = x })
			}
		case "zipf":
			for _, z := range []float64{1.2, 2} {
				add(fmt.Sprint(z), func(s *ps.Scenario) { s.Zipf = z })
			}
		default:
			return nil, fmt.Errorf("%w: --sweep %q: want none, all or some of %s", benchutil.ErrUsage, w, strings.Join(sweepNames, ", "))
		}
	}
	for _, p := range pts {
		if err := p.sc.Validate(); err != nil {
			return nil, fmt.Errorf("%w: %s %s: %v", benchutil.ErrUsage, p.sweep, p.name, err)
		}
	}
	return pts, nil
}

func runPoint(f *flags, p point) (Result, error) {
	sc := p.sc
	r := Result{Work: "pubsub", Backend: f.backend, Sweep: p.sweep, Point: p.name, Interfaces: sc.Interfaces,
		Attrs: fmt.Sprintf("%d-%d", sc.AttrsMin, sc.AttrsMax), ConsPerFilter: fmt.Sprintf("%d-%d", sc.ConstraintsMin, sc.ConstraintsMax),
		NumericShare: sc.NumericShare, Zipf: sc.Zipf, Threads: f.threads, Events: f.events, Rounds: f.rounds,
		Machine: benchutil.Machine(), GPU: "none", GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)}
	specs := sc.Subscriptions()
	evs := sc.Events(max(f.events, f.latencySamples))
	runtime.GC()
	tab := ps.New()
	t0 := time.Now()
	var open func(*ps.Layout) (gpu.EventDevice, error)
	if f.backend == "gpu" {
		// The device's context and kernel load while the table and its
		// layout are built.
		open = gpu.StartEventDevice()
	}
	var img *ps.Device
	var dev gpu.EventDevice
	var devErr error
	if f.backend == "gpu" {
		// The device image is built alongside the table's indexes, and
		// loaded on the device as soon as it is built (its first update
		// is a copy of it, which the device keeps), while the indexes
		// are still being filled.
		var err error
		if _, img, err = tab.AddSpecsDevice(specs, func(d *ps.Device) {
			t1 := time.Now()
			u := d.Mirror().Sync()
			dev, devErr = open(&ps.Layout{Image: u.Full, Names: d.Layout().Names})
			r.DeployDeviceMS = float64(time.Since(t1).Microseconds()) / 1000
		}); err != nil {
			return r, err
		}
		r.DeployLayoutMS = float64(img.BuildTime.Microseconds()) / 1000
		if devErr != nil {
			return r, fmt.Errorf("bench pubsub --backend gpu: %w", devErr)
		}
		defer dev.Close()
	} else if _, err := tab.AddSpecs(specs); err != nil {
		return r, err
	}
	r.DeployTableMS = float64(time.Since(t0).Microseconds()) / 1000
	// match is the backend's batch matcher: the table's, or the device's
	// (deploying it includes building the layout and loading it).
	match := func(evs []ps.Event, out [][]uint32) ([][]uint32, error) { return tab.MatchBatch(evs, out), nil }
	if dev != nil {
		r.GPU = dev.Describe()
		r.DeviceBytes = img.Layout().Image.Bytes()
		match = dev.Match
	}
	r.DeployMS = float64(time.Since(t0).Microseconds()) / 1000
	st := tab.Stats()
	r.Filters, r.Constraints, r.Names = st.Filters, st.Constraints, st.Names
	r.ChangeP50US = changeP50(tab, specs, f.seed)
	if dev != nil {
		var err error
		if r.ChangeVisibleP50US, r.ChangeVisibleP99US, err = changeVisible(tab, img, dev, specs, f.seed); err != nil {
			return r, err
		}
		r.GPU = dev.Describe()
	}
	var err error
	sp, _ := dev.(gpu.SmallPath)
	var parts []gpu.SmallTimes
	var after func()
	if sp != nil {
		after = func() { parts = append(parts, sp.SmallTimes()) }
	}
	if r.LatencyP50US, r.LatencyP99US, r.LatencyCPUP50US, err = latency(match, evs[:f.latencySamples], after); err != nil {
		return r, err
	}
	if sp != nil {
		r.LatencyParts = latencyParts(sp.SmallMode().String(), parts)
		if r.LatencyModes, err = latencyModes(sp, match, evs[:f.latencySamples], f.smallModes, f.smallSplits); err != nil {
			return r, err
		}
	}
	evs = evs[:f.events]
	ports := 0
	var errMu sync.Mutex
	var runErr error
	for _, b := range f.batches {
		var per, perCPU []float64
		for range f.rounds {
			t0 := time.Now()
			var cpu int64
			n := benchutil.Parallel(f.threads, func(th int) int {
				if f.threads == 1 {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					c0 := threadCPU()
					defer func() { cpu = threadCPU() - c0 }()
				}
				var out [][]uint32
				m := 0
				for lo := 0; lo < len(evs); lo += b {
					var err error
					if out, err = match(evs[lo:min(lo+b, len(evs))], out); err != nil {
						errMu.Lock()
						runErr = err
						errMu.Unlock()
						return 0
					}
					for _, o := range out {
						m += len(o)
					}
				}
				if th == 0 {
					ports = m
				}
				return len(evs)
			})
			per = append(per, float64(n)/time.Since(t0).Seconds())
			if cpu > 0 {
				perCPU = append(perCPU, float64(n)/(float64(cpu)/1e9))
			}
		}
		if runErr != nil {
			return r, runErr
		}
		rate := benchutil.Median(per)
		r.Batches = append(r.Batches, Batch{Batch: b, EventsPerSec: rate, USPerEvent: 1e6 / rate * float64(f.threads),
			EventsPerCPUSec: benchutil.Median(perCPU)})
	}
	r.PortsPerEvent = float64(ports) / float64(len(evs))
	for i := range min(f.check, len(evs)) {
		r.Checked++
		got, err := match(evs[i:i+1], nil)
		if err != nil {
			return r, err
		}
		if want := ps.BruteMatch(specs, &evs[i]); !slices.Equal(got[0], want) && len(got[0])+len(want) > 0 {
			r.Mismatches++
		}
	}
	if f.churn > 0 {
		if dev != nil { // the hybrid opens a device of its own
			dev.Close()
		}
		if r.Churn, err = runChurn(f, tab, specs, evs); err != nil {
			return r, fmt.Errorf("bench pubsub --churn: %w", err)
		}
	}
	return r, nil
}

// changeP50 times subscription changes: the Add of a filter like the
// scenario's and its Remove, 200 of each; the p50 in µs.
func changeP50(tab *ps.Table, specs []ps.Spec, seed int64) float64 {
	rng := rand.New(rand.NewSource(seed))
	var lat []float64
	for range 200 {
		s := specs[rng.Intn(len(specs))]
		t0 := time.Now()
		id, err := tab.Add(s.Port, s.Filters)
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
		if err != nil {
			continue
		}
		t0 = time.Now()
		tab.Remove(id)
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	return benchutil.Percentile(lat, 50)
}

// changeVisible times subscription changes until the device has them: the
// Add (or Remove) of a filter like the scenario's, the layout's bubbles and
// the device's update (what the subscription API's barrier waits for), 200
// of each; p50 and p99 in µs.
func changeVisible(tab *ps.Table, img *ps.Device, dev gpu.EventDevice, specs []ps.Spec, seed int64) (p50, p99 float64, err error) {
	rng := rand.New(rand.NewSource(seed + 1))
	var lat []float64
	apply := func() error {
		u := img.Update(tab)
		return dev.Update(u, img.Layout().Names)
	}
	for range 200 {
		s := specs[rng.Intn(len(specs))]
		t0 := time.Now()
		id, err := tab.Add(s.Port, s.Filters)
		if err != nil {
			return 0, 0, err
		}
		if err := apply(); err != nil {
			return 0, 0, err
		}
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
		t0 = time.Now()
		tab.Remove(id)
		if err := apply(); err != nil {
			return 0, 0, err
		}
		lat = append(lat, float64(time.Since(t0).Nanoseconds())/1e3)
	}
	return benchutil.Percentile(lat, 50), benchutil.Percentile(lat, 99), nil
}

// latency matches the events one at a time on a locked thread: wall p50,
// p99 and thread CPU p50, in µs.
func latency(match func([]ps.Event, [][]uint32) ([][]uint32, error), evs []ps.Event, after func()) (p50, p99, cpu50 float64, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out [][]uint32
	wall := make([]float64, len(evs))
	cpu := make([]float64, len(evs))
	for i := range evs {
		c0 := threadCPU()
		t0 := time.Now()
		if out, err = match(evs[i:i+1], out); err != nil {
			return 0, 0, 0, err
		}
		t1 := time.Now()
		cpu[i] = float64(threadCPU()-c0) / 1e3
		wall[i] = float64(t1.Sub(t0).Nanoseconds()) / 1e3
		if after != nil {
			after()
		}
	}
	return benchutil.Percentile(wall, 50), benchutil.Percentile(wall, 99), benchutil.Percentile(cpu, 50), nil
}

// latencyParts is the p50 of each part of the small-batch calls.
func latencyParts(mode string, ts []gpu.SmallTimes) *LatencyParts {
	if len(ts) == 0 {
		return nil
	}
	p := func(get func(gpu.SmallTimes) int64) float64 {
		v := make([]float64, len(ts))
		for i, t := range ts {
			v[i] = float64(get(t)) / 1e3
		}
		return benchutil.Percentile(v, 50)
	}
	return &LatencyParts{Mode: mode, EncodeUS: p(func(t gpu.SmallTimes) int64 { return t.Encode }),
		QueueUS: p(func(t gpu.SmallTimes) int64 { return t.Queue }), WaitUS: p(func(t gpu.SmallTimes) int64 { return t.Wait }),
		DecodeUS: p(func(t gpu.SmallTimes) int64 { return t.Decode })}
}

// latencyModes times the single event in each small-batch mode, then
// restores the matcher's mode.
func latencyModes(sp gpu.SmallPath, match func([]ps.Event, [][]uint32) ([][]uint32, error), evs []ps.Event, modes []string, splits []int) ([]ModeLatency, error) {
	orig := sp.SmallMode()
	defer sp.SetSmallMode(orig)
	var out []ModeLatency
	var parts []gpu.SmallTimes
	after := func() { parts = append(parts, sp.SmallTimes()) }
	for _, n := range splits {
		if err := sp.SetSmallSplits(n); err != nil {
			return nil, err
		}
		parts = parts[:0]
		p50, p99, _, err := latency(match, evs, after)
		if err != nil {
			return nil, err
		}
		out = append(out, ModeLatency{Mode: orig.String(), Splits: n, P50US: p50, P99US: p99, Parts: latencyParts(orig.String(), parts)})
	}
	if err := sp.SetSmallSplits(0); err != nil {
		return nil, err
	}
	for _, name := range modes {
		mode, err := gpu.ParseSmallMode(name)
		if err != nil {
			return nil, err
		}
		if err := sp.SetSmallMode(mode); err != nil {
			return nil, err
		}
		if _, err := match(evs[:1], nil); err != nil { // the path is made on first use
			return nil, err
		}
		if err := sp.SmallError(); err != nil { // that mode could not be set up: say so, go on
			out = append(out, ModeLatency{Mode: name, Error: err.Error()})
			continue
		}
		parts = parts[:0]
		p50, p99, _, err := latency(match, evs, after)
		if err != nil {
			return nil, err
		}
		var pp *LatencyParts
		if mode != gpu.SmallOff {
			pp = latencyParts(name, parts)
		}
		out = append(out, ModeLatency{Mode: name, P50US: p50, P99US: p99, Parts: pp})
	}
	return out, nil
}

// threadCPU returns the calling thread's CPU time in ns.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

func printTable(w io.Writer, rs []Result) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(w, "bench pubsub (%s backend) on %s, %s, %s\n", rs[0].Backend, rs[0].Machine, rs[0].GoVersion, rs[0].Time)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	hdr := "sweep\tpoint\tifaces\tfilters\tconstraints\tdeploy ms\tchange µs\tvisible µs\tp50 µs\tp99 µs\tcpu p50 µs"
	for _, b := range rs[0].Batches {
		hdr += fmt.Sprintf("\tev/s b=%d (per cpu-s)", b.Batch)
	}
	fmt.Fprintln(tw, hdr+"\tports/ev\tchecked\t")
	for _, r := range rs {
		line := fmt.Sprintf("%s\t%s\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f", r.Sweep, r.Point, r.Interfaces, r.Filters, r.Constraints,
			r.DeployMS, r.ChangeP50US, r.ChangeVisibleP50US, r.LatencyP50US, r.LatencyP99US, r.LatencyCPUP50US)
		for _, b := range r.Batches {
			line += fmt.Sprintf("\t%.0f (%.0f)", b.EventsPerSec, b.EventsPerCPUSec)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%d/%d ok\t\n", line, r.PortsPerEvent, r.Checked-r.Mismatches, r.Checked)
	}
	tw.Flush()
	for _, r := range rs {
		fmt.Fprintf(w, "%s %s: deploy %.1f ms = table %.1f", r.Sweep, r.Point, r.DeployMS, r.DeployTableMS)
		if r.DeployDeviceMS > 0 {
			fmt.Fprintf(w, " (with the device image built alongside in %.1f, then loaded on the device in %.1f)", r.DeployLayoutMS, r.DeployDeviceMS)
		}
		fmt.Fprintln(w)
		if p := r.LatencyParts; p != nil {
			fmt.Fprintf(w, "  one event (%s), p50 of each part: encode %.2f µs, queue %.2f µs, wait %.2f µs, decode %.2f µs\n",
				p.Mode, p.EncodeUS, p.QueueUS, p.WaitUS, p.DecodeUS)
		}
		for _, m := range r.LatencyModes {
			if m.Error != "" {
				fmt.Fprintf(w, "  one event, small-batch mode %s: %s\n", m.Mode, m.Error)
				continue
			}
			fmt.Fprintf(w, "  one event, small-batch mode %s, blocks per event %d (0: the matcher's rule): p50 %.1f µs, p99 %.1f µs", m.Mode, m.Splits, m.P50US, m.P99US)
			if p := m.Parts; p != nil {
				fmt.Fprintf(w, " (p50 parts: encode %.2f, queue %.2f, wait %.2f, decode %.2f µs)", p.EncodeUS, p.QueueUS, p.WaitUS, p.DecodeUS)
			}
			fmt.Fprintln(w)
		}
		if c := r.Churn; c != nil {
			reached := "reached"
			if !c.RateReached {
				reached = "NOT reached"
			}
			fmt.Fprintf(w, "  churn (%s, %d clients, batches of %d, %d rounds of %d events): %.0f ev/s quiet, %.0f ev/s with %.0f changes/s (asked %.0f: %s): loss %.2f%% (median of %d pairs of rounds; quartiles %.2f, %.2f%%; of the medians %.2f%%); change p50 %.1f µs, p99 %.1f µs; %d batches on the CPU\n",
				c.Path, c.Clients, c.Batch, c.Rounds, c.RoundEvents, c.QuietEventsPerSec, c.ChurnEventsPerSec, c.AchievedRate, c.Rate, reached, c.LossPct,
				len(c.PairLossPct), c.LossP25Pct, c.LossP75Pct, c.LossOfMediansPct, c.ChangeP50US, c.ChangeP99US, c.CPUBatches)
		}
	}
}
