package lpm

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/gpu"
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

// spinUntil waits for t without sleeping: a sleeping updater would be woken
// by the timer of whichever processor holds it, often the lookup loop's,
// and preempt it; a spinning one keeps a core of its own, as a control-plane
// core beside a datapath core does.
func spinUntil(t time.Time) {
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}
