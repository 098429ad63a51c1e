package classify

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
)

type classifyFlags struct {
	benchutil.CommonFlags
	classbench string
	synthetic  string
	algo       string
	eng        benchutil.GPUEngine // --backend gpu
	gpuBatch   int                 // packets per LookupFlow call (0: all the traffic in one)
	kernelOnly bool
}

// linearBudget bounds the rule comparisons of one timed round of linear
// search (and of a default --check sample) so a round takes about a second.
const linearBudget = 2e8

// Run runs "gswitchctl bench classify" with the command-line arguments
// args (the flags after "bench classify"), the results to stdout, the
// flags' usage to stderr. Its errors wrap benchutil.ErrUsage for a bad
// command line and benchutil.ErrMismatch for wrong answers under --check;
// ctx ends the run between two algorithms.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f classifyFlags
	fs := flag.NewFlagSet("gswitchctl bench classify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.Register(fs, 1<<20)
	fs.StringVar(&f.classbench, "classbench", "", "ClassBench filter file (e.g. ../shared/data/classbench/acl1_20000.txt)")
	fs.StringVar(&f.synthetic, "synthetic", "", "synthetic rule set N,C[,F,Cm,f]: N rules in C classes, F full classes, Cm overlapping classes, f fields (GSwitch §6)")
	fs.StringVar(&f.algo, "algo", "all", "linear, tuple, bloom, merge or all (one run each)")
	fs.BoolVar(&f.kernelOnly, "kernel-only", false, "gpu backend: time only the lookup kernel (no end-to-end figures; --check still compares the answers)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gswitchctl bench classify (--classbench FILE | --synthetic N,C[,F,Cm,f]) [flags]\n\nBuilds a flow table with each classifier, times batched lookups of packet keys\ndrawn from the rules, and with --check compares against a scan of every rule.\n\n")
		fs.PrintDefaults()
	}
	if err := benchutil.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := f.validate(); err != nil {
		return err
	}
	algos, err := parseAlgos(f.algo)
	if err != nil {
		return err
	}
	if f.Backend == "gpu" {
		fs.Visit(func(fl *flag.Flag) {
			if fl.Name == "batch" {
				f.gpuBatch = f.Batch
			}
		})
		eng, err := f.OpenGPU()
		if err != nil {
			return err
		}
		defer eng.Close()
		f.eng = eng
	}
	set, err := loadRuleSet(&f)
	if err != nil {
		return err
	}
	var rs []benchutil.Result
	for _, a := range algos {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, err := benchClassifyAlgo(&f, a, set)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	if err := benchutil.PrintResults(stdout, f.JSON, rs); err != nil {
		return err
	}
	return benchutil.CheckOutcome(rs)
}

func (f *classifyFlags) validate() error {
	if err := f.CommonFlags.Validate(); err != nil {
		return err
	}
	if (f.classbench == "") == (f.synthetic == "") {
		return fmt.Errorf("%w: bench classify needs exactly one of --classbench FILE and --synthetic N,C[,F,Cm,f]", benchutil.ErrUsage)
	}
	return nil
}

func parseAlgos(s string) ([]flow.Algo, error) {
	if s == "all" {
		return []flow.Algo{flow.Linear, flow.Tuple, flow.Bloom, flow.Merge}, nil
	}
	var out []flow.Algo
	for _, name := range strings.Split(s, ",") {
		a, err := flow.ParseAlgo(name)
		if err != nil {
			return nil, fmt.Errorf("%w: --algo: %v", benchutil.ErrUsage, err)
		}
		out = append(out, a)
	}
	return out, nil
}

// ruleSet is the rules of one benchmark and its traffic.
type ruleSet struct {
	rules   []flow.Rule
	sources int // rules in the source (before range expansion)
	keys    []flow.Key
	data    string
}

func loadRuleSet(f *classifyFlags) (*ruleSet, error) {
	if f.classbench != "" {
		fh, err := os.Open(f.classbench)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		cb, err := flow.ReadClassBench(fh, f.classbench)
		if err != nil {
			return nil, err
		}
		rules, err := flow.ExpandClassBench(cb)
		if err != nil {
			return nil, err
		}
		return &ruleSet{
			rules: rules, sources: len(cb),
			keys: flow.ClassBenchTraffic(cb, f.Lookups, f.Seed),
			data: fmt.Sprintf("ClassBench %s: %d rules, %d entries after port-range expansion, priority by line order; traffic: headers drawn inside random rules plus uniform ones (seed %d)",
				f.classbench, len(cb), len(rules), f.Seed),
		}, nil
	}
	spec, err := flow.ParseSynthetic(f.synthetic)
	if err != nil {
		return nil, fmt.Errorf("%w: --synthetic: %v", benchutil.ErrUsage, err)
	}
	rules := spec.Generate(f.Seed)
	return &ruleSet{
		rules: rules, sources: len(rules),
		keys: flow.SynthTraffic(spec, rules, f.Lookups, f.Seed+1),
		data: fmt.Sprintf("synthetic %s (GSwitch §6 shape: %s; seed %d); traffic: packets from random rule groups, wildcard bits random (seed %d)",
			f.synthetic, spec, f.Seed, f.Seed+1),
	}, nil
}

func benchClassifyAlgo(f *classifyFlags, algo flow.Algo, set *ruleSet) (benchutil.Result, error) {
	r := benchutil.NewResult("classify", &f.CommonFlags)
	r.Algo, r.Traffic, r.Data, r.Rules = algo.String(), "rules", set.data, set.sources

	tab, err := flow.NewTable(flow.Config{Algo: algo, MaxEntries: max(len(set.rules), 1<<20), Seed: f.Seed})
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	for i := range set.rules {
		if _, _, err := tab.Add(set.rules[i], 0); err != nil {
			return r, fmt.Errorf("adding rule %d (%s): %w", i, set.rules[i].Match.String(), err)
		}
	}
	r.BuildMS = float64(time.Since(t0).Microseconds()) / 1000
	st := tab.Stats()
	r.Entries, r.Classes, r.ImageBytes = tab.Len(), st.Classes, st.ImageBytes
	r.BytesPerEntry = float64(st.ImageBytes) / float64(max(1, tab.Len()))
	r.Layout = fmt.Sprintf("projected key words %v", tab.UsedWords())

	keys := set.keys
	if algo == flow.Linear {
		// Scanning every rule: time fewer packets so a round stays near a second.
		keys = keys[:max(1000, min(len(keys), int(linearBudget/float64(max(1, tab.Len())))))]
		if len(keys) < len(set.keys) {
			r.Notes = fmt.Sprintf("linear search timed on the first %d of the %d packets", len(keys), len(set.keys))
		}
	}
	out := make([]flow.RuleID, len(keys))
	rates, total := benchutil.TimeRounds(f.Rounds, func() int {
		return benchutil.Parallel(f.Threads, func(t int) int {
			lo, hi := t*len(keys)/f.Threads, (t+1)*len(keys)/f.Threads
			for i := lo; i < hi; i += f.Batch {
				j := min(i+f.Batch, hi)
				tab.LookupBatch(keys[i:j], out[i:j])
			}
			return hi - lo
		})
	})
	r.Lookups, r.MPPS = total, benchutil.Median(rates)/1e6
	r.NsPerLookup = 1e9 / benchutil.Median(rates) * float64(f.Threads)
	if f.eng != nil {
		return r, gpuClassify(&r, f, tab, keys, out)
	}
	if f.Check {
		r.Checked, r.Mismatches = checkClassify(tab, keys, out, f.CheckSample)
	}
	return r, nil
}

// gpuClassify loads the table's image into the GPU backend and times
// LookupFlow on the packets packed in SoA order (end to end: pinned staging,
// copies in and out, kernel; and the kernel alone with CUDA events). cpuOut
// holds the CPU's answers for keys, compared with the GPU's on every packet
// under --check, besides the brute-force sample.
func gpuClassify(r *benchutil.Result, f *classifyFlags, tab *flow.Table, keys []flow.Key, cpuOut []flow.RuleID) error {
	const id = gpu.TableID(1)
	tab.Mirror().Sync()
	if err := f.eng.Load(id, gpu.Flow, tab.Mirror().Image()); err != nil {
		return err
	}
	n := len(keys)
	batch := n
	if f.gpuBatch > 0 {
		batch = min(f.gpuBatch, n)
	}
	words := tab.UsedWords()
	type part struct {
		soa    []uint32
		lo, hi int
	}
	var parts []part
	for lo := 0; lo < n; lo += batch {
		hi := min(lo+batch, n)
		parts = append(parts, part{flow.PackSoA(keys[lo:hi], words, nil), lo, hi})
	}
	r.MPPSCPU, r.BatchCPU = r.MPPS, r.Batch
	pp, err := benchutil.NewPipe(f.eng, id, gpu.Flow, len(words), batch, n, f.PipeDepth(), func(b *gpu.Batch, i int) {
		ks := make([]flow.Key, batch)
		for k := range ks {
			ks[k] = keys[(i*batch+k)%n]
		}
		flow.PackSoA(ks, words, b.Keys)
		b.N = batch
	})
	if err != nil {
		return err
	}
	defer pp.Free()
	r.Batch, r.Streams, r.Depth, r.GPU = batch, f.Streams, pp.Depth, f.eng.Device()
	r.Notes = strings.TrimPrefix(r.Notes+"; ", "; ") + fmt.Sprintf("gpu backend: mpps = end to end with the projected keys already in pinned batches of %d in SoA order (the datapath's way), %d stream(s), at most %d in flight, copies in and out included; batch_latency_us = Submit to results on the host; mpps_staged = LookupFlow calls of %d packets (keys packed in SoA order beforehand; host copies into and out of pinned staging included); mpps_kernel = flow_lookup alone on one batch (CUDA events); mpps_cpu = Table.LookupBatch (batch %d, %d thread(s)) on the same packets", batch, f.Streams, pp.Depth, batch, r.BatchCPU, f.Threads)
	out := make([]flow.RuleID, n)
	look := func() error {
		for _, p := range parts {
			if err := f.eng.LookupFlow(id, p.soa, p.hi-p.lo, out[p.lo:p.hi]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := look(); err != nil { // warm-up, and the answers --check compares
		return err
	}
	if !f.kernelOnly {
		rate, lat, err := benchutil.PipeRounds(pp, f.Rounds, max(n, 4*pp.Depth*batch))
		if err != nil {
			return err
		}
		r.MPPS, r.NsPerLookup = rate/1e6, 1e9/rate
		r.BatchLatencyUs, r.BatchLatencyP99Us = benchutil.LatencyStats(lat)
		r.Lookups = int64(max(n, 4*pp.Depth*batch)) * int64(f.Rounds)
		rates, _ := benchutil.TimeRounds(f.Rounds, func() int {
			if e := look(); e != nil && err == nil {
				err = e
			}
			return n
		})
		if err != nil {
			return err
		}
		r.MPPSStaged = benchutil.Median(rates) / 1e6
	} else {
		r.MPPS, r.NsPerLookup, r.Lookups = 0, 0, 0
	}
	// The pinned batches' answers against the CPU's, batch by batch.
	pinDiff := 0
	for i, b := range pp.Batches {
		if err := f.eng.Submit(id, b); err != nil {
			return err
		}
		if err := b.Wait(); err != nil {
			return err
		}
		for k, got := range b.Rules()[:b.N] {
			if want := cpuOut[(i*batch+k)%n]; got != want {
				pinDiff++
			}
		}
	}
	p0 := parts[0]
	iters := max(3, min(200, (1<<26)/max(1, p0.hi-p0.lo)))
	if tab.Config().Algo == flow.Linear {
		iters = 3
	}
	ms, err := f.eng.KernelTimeFlow(id, p0.soa, p0.hi-p0.lo, iters)
	if err != nil {
		return err
	}
	if ms > 0 {
		r.MPPSKernel = float64(p0.hi-p0.lo) / ms / 1e3
	}
	if f.Check {
		r.Checked, r.Mismatches = checkClassify(tab, keys, out, f.CheckSample)
		diff := 0
		for i := range out {
			if out[i] != cpuOut[i] {
				if diff < 5 {
					fmt.Fprintf(benchutil.MismatchLog, "gpu/cpu mismatch: packet %d: gpu rule %d, cpu rule %d\n", i, out[i], cpuOut[i])
				}
				diff++
			}
		}
		r.Mismatches += diff + pinDiff
		r.Notes += fmt.Sprintf("; --check: %d packets against the brute-force reference, all %d against the CPU's answers (%d differ), and the %d pinned batches' answers too (%d differ)", r.Checked, n, diff, len(pp.Batches), pinDiff)
	}
	return nil
}

// checkClassify compares the lookups of a sample of keys (their results are
// in got) with a scan of every rule in the table.
func checkClassify(tab *flow.Table, keys []flow.Key, got []flow.RuleID, sample int) (checked, mismatches int) {
	var byID []flow.Rule
	tab.Rules(func(id flow.RuleID, r *flow.Rule) bool {
		for int(id) >= len(byID) {
			byID = append(byID, flow.Rule{})
		}
		byID[id] = *r
		return true
	})
	if len(byID) != tab.Len() {
		fmt.Fprintf(benchutil.MismatchLog, "rule ids are not dense (%d ids for %d rules): the reference would see phantom rules\n", len(byID), tab.Len())
		return 0, 1
	}
	if sample == 0 {
		sample = int(linearBudget / float64(max(1, len(byID))))
	}
	sample = max(1, min(sample, len(keys)))
	for i := 0; i < sample; i++ {
		want := flow.BruteForce(byID, &keys[i])
		if got[i] != want {
			if mismatches < 5 {
				fmt.Fprintf(benchutil.MismatchLog, "mismatch: packet %d: got rule %d, want %d\n", i, got[i], want)
			}
			mismatches++
		}
	}
	return sample, mismatches
}
