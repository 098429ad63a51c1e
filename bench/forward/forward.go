package forward

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/tables/filter"
	"github.com/gswitch/gswitch/tables/flow"
)

// lossThresholdPct is the loss under which a step counts as lossless.
const lossThresholdPct = 0.1

// fwdFlags are bench forward's flags.
type fwdFlags struct {
	targets      []string // gswitchd, ovs, bridge, plain
	rules        []int
	rates        []int64 // frames/s; 0 is "max" (as fast as the sender can)
	duration     time.Duration
	settle       time.Duration
	flowmods     int
	flowmodBatch int
	gswitchd     string
	backend      string
	maxDelay     string
	sharedDelay  string // gswitchd's --shared-delay; empty: not given
	swFlags      string // more gswitchd flags, space-separated
	plainFlags   string // more plain forwarder flags, space-separated
	rxQueues     int
	pairs        int
	batchSize    int // gswitchd's --batch-size; 0: its default
	minBatch     int // gswitchd's --min-batch; 0: its default
	srcPorts     int
	batch        int
	sink         string // counter or ring
	rounds       int    // times the whole target list runs, alternating its order
	json         bool
	ruleset      string // trivial, synthetic:N,C[,...] or classbench:FILE
	flows        int    // rule-set traffic: frame templates per pair
	check        bool   // rule-set traffic: fail on any frame the rules drop that arrived
	switchCPUs   string // taskset -c LIST for the switch under test (gswitchd, plain); empty: any
	benchCPUs    string // the bench's own cores (cpus.go): a LIST, "any", or empty (with switchCPUs: the others)
	sinkRPS      string // the cores the sinks' receive work runs on (cpus.go): a LIST, "bench" (the bench's cores), "off" or empty (the sender's)
	classifier   string // gswitchd's --classifier
	latencyStep  bool   // after a gswitchd series, a step at half its lossless rate
	filters      string // --filters FILE: gswitchd-filters' live filters
	filterSpecs  []filter.Spec
	// eventMinBatch is gswitchd's pubsub min_batch with --ruleset events
	// (0: its default).
	eventMinBatch int
	logDir        string // where gswitchd's logs are kept (info level); empty: the temporary directory, warn level
}

// fwdTargets: gswitchd runs with --backend; gswitchd-cpu, gswitchd-gpu
// and gswitchd-auto with the CPU, the GPU and the auto backend whatever
// --backend says; gswitchd-filters as gswitchd, with the live filters of
// --filters on every port (filters.go). A gswitchd target may end in
// @OPTS, options joined by +: block or frame, gswitchd's --rx-ring
// (without: block, gswitchd's default), wN, its --rx-workers N
// (gswitchd-auto@frame+w4), and with wN fK, its --worker-in-flight K
// (gswitchd-auto@frame+w8+f4), and with fK sM, its --worker-shared M
// (gswitchd-auto@frame+w8+f2+s2), and with wN eager, its --worker-close
// eager (gswitchd-auto@frame+w8+f1+eager), so that variants are measured
// in one run.
var fwdTargets = []string{"gswitchd", "gswitchd-cpu", "gswitchd-gpu", "gswitchd-auto", "gswitchd-filters", "ovs", "bridge", "plain"}

// splitRing splits a target into its base name and its @ring suffix (the
// options after the @, unchecked).
func splitRing(target string) (string, string) {
	base, ring, _ := strings.Cut(target, "@")
	return base, ring
}

// tgtOpts are a gswitchd target's @ options.
type tgtOpts struct {
	ring    string // block or frame (empty: not given)
	workers int    // datapath workers, --rx-workers (0: not given)
	flight  int    // a worker's runs in flight, --worker-in-flight (0: not given)
	shared  int    // the workers' shared device batches in flight, --worker-shared (0: not given)
	eager   bool   // --worker-close eager (false: not given)
}

// targetOpts reads a gswitchd target's @ options: block or frame, wN, fK
// (K of a worker's runs in flight: with wN only) and sM (the workers'
// lookups in shared batches, M in flight: with fK only) and eager (the
// workers' eager close: with wN only), each once, in
// any order.
func targetOpts(opts string) (tgtOpts, error) {
	var o tgtOpts
	if opts == "" {
		return o, nil
	}
	for _, p := range strings.Split(opts, "+") {
		switch {
		case (p == "block" || p == "frame") && o.ring == "":
			o.ring = p
		case p == "eager" && !o.eager:
			o.eager = true
		case strings.HasPrefix(p, "w") && o.workers == 0:
			n, err := strconv.Atoi(p[1:])
			if err != nil || n < 1 || n > 1024 {
				return tgtOpts{}, fmt.Errorf("option %q: want wN, N datapath workers from 1 to 1024", p)
			}
			o.workers = n
		case strings.HasPrefix(p, "f") && o.flight == 0:
			n, err := strconv.Atoi(p[1:])
			if err != nil || n < 1 || n > 64 {
				return tgtOpts{}, fmt.Errorf("option %q: want fK, K of a worker's runs in flight from 1 to 64", p)
			}
			o.flight = n
		case strings.HasPrefix(p, "s") && o.shared == 0:
			n, err := strconv.Atoi(p[1:])
			if err != nil || n < 1 || n > 64 {
				return tgtOpts{}, fmt.Errorf("option %q: want sM, M shared batches in flight from 1 to 64", p)
			}
			o.shared = n
		default:
			return tgtOpts{}, fmt.Errorf("option %q: want block, frame, wN, fK, sM or eager, each once", p)
		}
	}
	if o.flight > 0 && o.workers == 0 {
		return tgtOpts{}, fmt.Errorf("option f%d: a worker's runs in flight want datapath workers (wN)", o.flight)
	}
	if o.eager && o.workers == 0 {
		return tgtOpts{}, errors.New("option eager: a worker's eager close wants datapath workers (wN)")
	}
	if o.shared > 0 && o.flight == 0 {
		return tgtOpts{}, fmt.Errorf("option s%d: shared batches want a worker's runs in flight (fK)", o.shared)
	}
	return o, nil
}

// isGswitchd reports whether target is one of gswitchd's.
func isGswitchd(target string) bool { return strings.HasPrefix(target, "gswitchd") }

// isPlain reports whether target is the plain forwarder (plain, plain@block,
// plain@frame).
func isPlain(target string) bool { b, _ := splitRing(target); return b == "plain" }

// trivial reports whether the run uses the trivial rule set (--rules).
func (f *fwdFlags) trivial() bool { return f.ruleset == "trivial" }

func parseFwdFlags(args []string, stderr io.Writer) (*fwdFlags, error) {
	fs := flag.NewFlagSet("bench forward", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &fwdFlags{}
	targets := fs.String("targets", "gswitchd,ovs,bridge,plain", "switches to measure, in this order: `LIST` of gswitchd (its --backend), gswitchd-cpu, gswitchd-gpu, gswitchd-auto (gswitchd with that backend; any gswitchd target may end in @ and options joined by +: block or frame, its --rx-ring, wN, its --rx-workers N, with wN fK, its --worker-in-flight K, with fK sM, its --worker-shared M, and with wN eager, its --worker-close eager, e.g. gswitchd-auto@frame+w4+f2+s2), ovs (Open vSwitch, userspace datapath), bridge (Linux bridge), plain (the floor: a Go forwarder of the same AF_PACKET ports with no tables, each frame sent on from the receive ring; plain@frame on frame rings, and its steps report its per-frame latency)")
	rules := fs.String("rules", "1000,10000", "installed OpenFlow rule counts, one series each: `LIST` (N-1 exact ipv4_dst rules that do not match the traffic plus one in_port=1,actions=output:2; k/M suffixes)")
	rates := fs.String("rates", "250k,500k,1M,1.5M,2M,max", "offered loads in frames/s, one step each: `LIST` (k/M suffixes; max: as fast as the sender can)")
	fs.DurationVar(&f.duration, "duration", 3*time.Second, "traffic time of each step")
	fs.DurationVar(&f.settle, "settle", 300*time.Millisecond, "wait after a step's last frame before the sink's count is read")
	fs.IntVar(&f.flowmods, "flowmods", 100000, "FLOW_MODs for the installation-rate measurement (gswitchd and ovs; 0: skip it)")
	fs.IntVar(&f.flowmodBatch, "flowmod-batch", 1000, "FLOW_MODs between barriers")
	fs.StringVar(&f.gswitchd, "gswitchd", "", "gswitchd `BINARY` (default: gswitchd beside gswitchctl, else built from this tree with go build)")
	fs.StringVar(&f.backend, "backend", "cpu", "gswitchd's lookup backend: cpu, gpu or auto")
	fs.StringVar(&f.maxDelay, "max-delay", "50us", "gswitchd's --max-delay")
	fs.StringVar(&f.swFlags, "gswitchd-flags", "", "more flags for every gswitchd target, space-separated: `FLAGS` (e.g. \"--in-flight 8\")")
	fs.StringVar(&f.plainFlags, "plain-flags", "", "more flags for the plain targets (gswitchctl bench plain-forwarder), space-separated: `FLAGS` (e.g. \"--tags as-read\")")
	fs.StringVar(&f.sharedDelay, "shared-delay", "", "gswitchd's --shared-delay: the part of --max-delay a lookup may wait in a shared device batch (empty: gswitchd's default)")
	fs.IntVar(&f.batchSize, "batch-size", 0, "gswitchd's --batch-size, frames per batch at most (0: gswitchd's default)")
	fs.IntVar(&f.minBatch, "min-batch", 0, "gswitchd's --min-batch, the smallest batch its GPU backend classifies on the GPU (0: gswitchd's default; smaller batches go to the CPU)")
	fs.IntVar(&f.pairs, "pairs", 1, "generator/sink pairs, each on its own two switch ports (2k+1 to 2k+2) with its own sender thread, sharing the asked rate; more than 1 only with --targets gswitchd and plain")
	fs.IntVar(&f.rxQueues, "rx-queues", 1, "gswitchd's --rx-queues: receive queues per port, 1..64 (the traffic's --src-ports flows spread over them)")
	fs.IntVar(&f.srcPorts, "src-ports", 16, "UDP source ports the traffic cycles through")
	fs.IntVar(&f.batch, "batch", 64, "frames per sendmmsg of the generator")
	fs.StringVar(&f.sink, "sink", "counter", "how each sink counts what reaches it: counter (its interface's rx_packets; no socket, so the sink's receive costs the switch under test least) or ring (an AF_PACKET ring counting only this step's test frames; its copy runs in the switch's transmit call)")
	fs.IntVar(&f.rounds, "rounds", 1, "run the target list `N` times, in turn forwards and backwards (gswitchd,plain then plain,gswitchd ...), and print each target's medians over the rounds (the FLOW_MOD runs: first round only)")
	fs.StringVar(&f.ruleset, "ruleset", "trivial", "table 0's rules: `SET` of trivial (--rules: N-1 exact ipv4_dst rules that miss plus an in_port rule per pair), synthetic:N,C[,F,Cm,f] (GSwitch §6: N rules in C classes) or classbench:FILE (e.g. ../shared/data/classbench/acl1_20000.txt); with a rule set, each rule goes to table 1 (in_port to the pair's other port) or drops (one in 8), and the traffic hits the rules uniformly")
	fs.IntVar(&f.flows, "flows", 65536, "rule-set traffic: different frames (headers) per pair, sent in turn, a power of two")
	fs.BoolVar(&f.check, "check", false, "rule-set traffic: with --sink ring, check every frame that arrives against the rules (a frame its rule drops must not arrive) and against the frame sent (it must arrive unchanged, its VLAN tag included: altered), and fail the run on any; with either sink, fail when more frames arrive than the rules forward")
	fs.StringVar(&f.classifier, "classifier", "merge", "gswitchd's --classifier, its flow tables' search: `ALGO` of linear, tuple, bloom or merge (the fastest on many classes)")
	fs.IntVar(&f.eventMinBatch, "event-min-batch", 0, "--ruleset events: gswitchd's pubsub min_batch, the smallest batch of events its GPU matches (0: gswitchd's default)")
	fs.StringVar(&f.filters, "filters", "", "target gswitchd-filters: live filters on every port of gswitchd, one `FILE` line NAME: EXPRESSION each (as bench filter's --filters-file); measure with --targets gswitchd,gswitchd-filters --rounds N for the cost")
	fs.BoolVar(&f.latencyStep, "latency-step", false, "after each gswitchd or plain series with a lossless rate, one more step at half that rate (half_lossless: its latency_p50_us and latency_p99_us are the latency of a switch that is not overloaded)")
	fs.StringVar(&f.switchCPUs, "switch-cpus", "", "run gswitchd and plain on these cores only: `LIST` for taskset -c (e.g. 0-3); empty: any core")
	fs.StringVar(&f.benchCPUs, "bench-cpus", "", "run the bench itself (its generators and sinks) on these cores: `LIST` (e.g. 4-15) or any; default: with --switch-cpus every other core, so that generators and switch do not share cores, else any")
	fs.StringVar(&f.sinkRPS, "sink-rps", "", "steer the kernel's receive work for the frames the switch sends (veth runs it on the sending core) to these cores, by RPS in the sinks' namespaces: `LIST`, bench (the bench's own cores) or off (the default: veth's way; on the H200 machine RPS made both gswitchd and plain slower)")
	fs.StringVar(&f.logDir, "log-dir", "", "keep gswitchd's logs, at info level (the backend's placement decisions), in `DIR`: one file per target, appended")
	fs.BoolVar(&f.json, "json", false, "print one JSON object per step, per flow-mod run and (with --rounds above 1) per median instead of tables")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, fmt.Errorf("%w: %v", benchutil.ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("%w: bench forward: unexpected argument %q", benchutil.ErrUsage, fs.Arg(0))
	}
	var err error
	if f.targets, err = parseTargets(*targets); err != nil {
		return nil, fmt.Errorf("%w: --targets: %v", benchutil.ErrUsage, err)
	}
	if f.rules, err = parseCounts(*rules); err != nil {
		return nil, fmt.Errorf("%w: --rules: %v", benchutil.ErrUsage, err)
	}
	if f.rates, err = parseRates(*rates); err != nil {
		return nil, fmt.Errorf("%w: --rates: %v", benchutil.ErrUsage, err)
	}
	switch {
	case f.duration < 100*time.Millisecond:
		return nil, fmt.Errorf("%w: --duration %v is under 100ms", benchutil.ErrUsage, f.duration)
	case f.flowmods < 0:
		return nil, fmt.Errorf("%w: --flowmods %d is negative", benchutil.ErrUsage, f.flowmods)
	case f.flowmodBatch < 1:
		return nil, fmt.Errorf("%w: --flowmod-batch %d: at least 1", benchutil.ErrUsage, f.flowmodBatch)
	case f.srcPorts < 1 || f.srcPorts > 60000:
		return nil, fmt.Errorf("%w: --src-ports %d: 1 to 60000", benchutil.ErrUsage, f.srcPorts)
	case f.batch < 1 || f.batch > 4096:
		return nil, fmt.Errorf("%w: --batch %d: 1 to 4096", benchutil.ErrUsage, f.batch)
	case f.batchSize < 0 || f.minBatch < 0:
		return nil, fmt.Errorf("%w: --batch-size %d, --min-batch %d: not negative", benchutil.ErrUsage, f.batchSize, f.minBatch)
	case f.rounds < 1 || f.rounds > 100:
		return nil, fmt.Errorf("%w: --rounds %d: 1 to 100", benchutil.ErrUsage, f.rounds)
	case f.pairs < 1 || f.pairs > 32:
		return nil, fmt.Errorf("%w: --pairs %d: 1 to 32", benchutil.ErrUsage, f.pairs)
	case f.pairs > 1 && (slices.Contains(f.targets, "ovs") || slices.Contains(f.targets, "bridge")):
		return nil, fmt.Errorf("%w: --pairs %d: only with --targets gswitchd and plain (the bridge would flood every frame to all the pairs' ports)", benchutil.ErrUsage, f.pairs)
	case f.ruleset == "trivial" && slices.Min(f.rules) < f.pairs:
		return nil, fmt.Errorf("%w: --rules %d: at least one rule per pair (%d)", benchutil.ErrUsage, slices.Min(f.rules), f.pairs)
	case f.rxQueues < 1 || f.rxQueues > 64:
		return nil, fmt.Errorf("%w: --rx-queues %d: 1 to 64", benchutil.ErrUsage, f.rxQueues)
	case f.sink != "counter" && f.sink != "ring":
		return nil, fmt.Errorf("%w: --sink %q: counter or ring", benchutil.ErrUsage, f.sink)
	case f.backend != "cpu" && f.backend != "gpu" && f.backend != "auto":
		return nil, fmt.Errorf("%w: --backend %q: cpu, gpu or auto", benchutil.ErrUsage, f.backend)
	case f.flows < 1 || f.flows > 1<<22 || f.flows&(f.flows-1) != 0:
		return nil, fmt.Errorf("%w: --flows %d: a power of two, 1 to 4M", benchutil.ErrUsage, f.flows)
	}
	if f.switchCPUs != "" { // parsed here, so that taskset gets nothing but a core list
		if _, err := parseCPUList(f.switchCPUs); err != nil {
			return nil, fmt.Errorf("%w: --switch-cpus: %v", benchutil.ErrUsage, err)
		}
	}
	if _, _, err := benchCPUs(f.benchCPUs, f.switchCPUs); err != nil {
		return nil, fmt.Errorf("%w: --bench-cpus: %v", benchutil.ErrUsage, err)
	}
	if f.sinkRPS != "" && f.sinkRPS != "off" && f.sinkRPS != "bench" {
		if _, err := parseCPUList(f.sinkRPS); err != nil {
			return nil, fmt.Errorf("%w: --sink-rps: %v (or bench, off)", benchutil.ErrUsage, err)
		}
	}
	if slices.ContainsFunc(f.targets, func(t string) bool { b, _ := splitRing(t); return b == "gswitchd-filters" }) != (f.filters != "") {
		return nil, fmt.Errorf("%w: --filters FILE and the target gswitchd-filters go together", benchutil.ErrUsage)
	}
	if f.filters != "" {
		if f.filterSpecs, err = readFilterSpecs(f.filters); err != nil {
			return nil, fmt.Errorf("%w: --filters: %v", benchutil.ErrUsage, err)
		}
	}
	if isEvents(f.ruleset) && slices.ContainsFunc(f.targets, func(t string) bool { return !isGswitchd(t) && !isPlain(t) }) {
		return nil, fmt.Errorf("%w: --ruleset events: only gswitchd targets and plain (the others have no content-based forwarding)", benchutil.ErrUsage)
	}
	if f.eventMinBatch < 0 {
		return nil, fmt.Errorf("%w: --event-min-batch %d: not negative", benchutil.ErrUsage, f.eventMinBatch)
	}
	if _, err := flow.ParseAlgo(f.classifier); err != nil {
		return nil, fmt.Errorf("%w: --classifier: %v", benchutil.ErrUsage, err)
	}
	if err := parseRuleset(f.ruleset); err != nil {
		return nil, fmt.Errorf("%w: --ruleset: %v", benchutil.ErrUsage, err)
	}
	return f, nil
}

// parseTargets reads a comma-separated list of known targets, no repeats.
func parseTargets(s string) ([]string, error) {
	var out []string
	for _, t := range strings.Split(s, ",") {
		t = strings.TrimSpace(t)
		base, opts := splitRing(t)
		if !slices.Contains(fwdTargets, base) {
			return nil, fmt.Errorf("unknown target %q (want gswitchd, gswitchd-cpu, gswitchd-gpu, gswitchd-auto, gswitchd-filters, ovs, bridge or plain)", t)
		}
		if base != t && !isGswitchd(base) && base != "plain" {
			return nil, fmt.Errorf("target %q: only gswitchd and plain targets take options (@block, @frame; gswitchd also @wN)", t)
		}
		o, err := targetOpts(opts)
		if err != nil || base != t && opts == "" {
			return nil, fmt.Errorf("target %q: %v", t, cmp.Or(err, errors.New("no option after @")))
		}
		if base == "plain" && o.workers > 0 {
			return nil, fmt.Errorf("target %q: plain takes @block or @frame only (a goroutine per pair)", t)
		}
		if slices.Contains(out, t) {
			return nil, fmt.Errorf("target %q twice", t)
		}
		out = append(out, t)
	}
	return out, nil
}

// parseSI reads a positive number with an optional k or M suffix
// ("1.5M" = 1500000); the result must be a whole number.
func parseSI(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k") || strings.HasSuffix(s, "K"):
		mult, s = 1e3, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, s[:len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v <= 0 || v*mult > 1e12 {
		return 0, fmt.Errorf("%q is not a positive number (k and M suffixes allowed)", s)
	}
	n := v * mult
	if n != float64(int64(n)) {
		return 0, fmt.Errorf("%q is not a whole number", s)
	}
	return int64(n), nil
}

// parseCounts reads the --rules list: positive counts, no repeats.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := parseSI(p)
		if err != nil {
			return nil, err
		}
		if n > 10_000_000 {
			return nil, fmt.Errorf("%d rules: at most 10M", n)
		}
		if slices.Contains(out, int(n)) {
			return nil, fmt.Errorf("%d twice", n)
		}
		out = append(out, int(n))
	}
	return out, nil
}

// parseRates reads the --rates list: rates in frames/s, "max" as 0 (last).
func parseRates(s string) ([]int64, error) {
	var out []int64
	for _, p := range strings.Split(s, ",") {
		var n int64
		if strings.TrimSpace(p) != "max" {
			var err error
			if n, err = parseSI(p); err != nil {
				return nil, err
			}
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%q twice", strings.TrimSpace(p))
		}
		out = append(out, n)
	}
	// Ascending, max last: the lossless rate is read off in that order.
	slices.SortFunc(out, func(a, b int64) int {
		switch {
		case a == b:
			return 0
		case a == 0:
			return 1
		case b == 0:
			return -1
		case a < b:
			return -1
		}
		return 1
	})
	return out, nil
}

// Step is one offered-load step, one JSON line with --json.
type Step struct {
	Bench        string  `json:"bench"`                      // forward
	Target       string  `json:"target"`                     // gswitchd | ovs | bridge | plain
	Backend      string  `json:"backend"`                    // gswitchd's backend; empty otherwise
	RxRing       string  `json:"rx_ring,omitempty"`          // gswitchd's --rx-ring: block or frame
	RxWorkers    int     `json:"rx_workers,omitempty"`       // gswitchd's --rx-workers (0: a goroutine per receive queue)
	WorkerFlight int     `json:"worker_in_flight,omitempty"` // gswitchd's --worker-in-flight (0: not given)
	WorkerShared int     `json:"worker_shared,omitempty"`    // gswitchd's --worker-shared (0: not given)
	WorkerClose  string  `json:"worker_close,omitempty"`     // gswitchd's --worker-close, when given (eager)
	MaxDelay     string  `json:"max_delay,omitempty"`        // gswitchd's --max-delay
	SharedDelay  string  `json:"shared_delay,omitempty"`     // gswitchd's --shared-delay, when given
	SwitchFlags  string  `json:"gswitchd_flags,omitempty"`   // --gswitchd-flags
	PlainFlags   string  `json:"plain_flags,omitempty"`      // --plain-flags
	Rules        int     `json:"rules"`                      // installed rules (0 for the bridge and plain)
	Ruleset      string  `json:"ruleset"`                    // --ruleset: trivial, synthetic:N,C or classbench:FILE
	Round        int     `json:"round"`                      // 1..--rounds
	Pairs        int     `json:"pairs"`                      // generator/sink pairs (port pairs of the switch)
	RxQueues     int     `json:"rx_queues"`                  // gswitchd's receive queues per port
	AskedPPS     int64   `json:"asked_pps"`
	OfferedPPS   float64 `json:"offered_pps"`   // frames the sender's kernel accepted per second
	ForwardedPPS float64 `json:"forwarded_pps"` // frames the sink received per second of the step
	Sent         uint64  `json:"sent"`
	Received     uint64  `json:"received"`
	// Expected is the frames the rules forward of those sent (all of them
	// for the trivial set and for targets without rules), DroppedByRule
	// the rest; loss_pct is Received against Expected. Misrouted (ring
	// sink, rule-set traffic) counts frames that arrived although their
	// rule drops them; Altered (the same) frames that arrived with other
	// bytes than they were sent with, the mark aside (a VLAN tag lost, a
	// field rewritten).
	Expected       uint64  `json:"expected"`
	DroppedByRule  uint64  `json:"dropped_by_rule"`
	Misrouted      uint64  `json:"misrouted"`
	Altered        uint64  `json:"altered,omitempty"`
	LossPct        float64 `json:"loss_pct"`
	MaxLosslessPPS float64 `json:"max_lossless_pps"` // the series': highest offered_pps with loss < 0.1%
	// LosslessToPPS is the series' highest offered_pps with loss < 0.1%
	// at that step and at every step asked a lower rate: where a switch
	// lost at one step and not at a higher one (a queue that fell behind
	// and did not catch up within the step), max_lossless_pps counts the
	// higher step and this does not.
	LosslessToPPS float64 `json:"lossless_to_pps"`
	FrameBytes    int     `json:"frame_bytes"` // on the wire, FCS included
	DurationS     float64 `json:"duration_s"`
	Sink          string  `json:"sink"`            // how the sinks counted: counter or ring (--sink)
	SinkRingDrops uint64  `json:"sink_ring_drops"` // frames the sink's own ring dropped (a sink limit, not the switch's)
	BacklogDrops  uint64  `json:"backlog_drops"`   // frames the kernel dropped from its per-CPU input backlogs (/proc/net/softnet_stat, whole machine)
	// gswitchd's own port counters over the step (control socket): frames
	// its generator ports (1, 3, ...) received, and dropped or lost to a
	// full receive ring (rx_dropped + rx_over_err), frames its sink ports
	// (2, 4, ...) sent.
	SwitchRx        uint64 `json:"switch_rx,omitempty"`
	SwitchRxDropped uint64 `json:"switch_rx_dropped,omitempty"`
	SwitchTx        uint64 `json:"switch_tx,omitempty"`
	// gswitchd's backend: keys (frames, per table looked up) classified
	// on the CPU and on GPUs over the step.
	SwitchKeysOnCPU uint64 `json:"switch_keys_cpu,omitempty"`
	SwitchKeysOnGPU uint64 `json:"switch_keys_gpu,omitempty"`
	// gswitchd's per-frame latency over the step (its histogram
	// gswitch_frame_latency_seconds: receive ring to the end of the
	// pipeline), p50 and p99 in µs; HalfLossless marks the step run after
	// the series at half its max_lossless_pps (not part of the series).
	LatencyP50us float64 `json:"latency_p50_us,omitempty"`
	LatencyP99us float64 `json:"latency_p99_us,omitempty"`
	// The same by stage (gswitch_frame_latency_stage_seconds: ring,
	// batch, run, which add up to the latency): [p50, p99] in µs.
	LatencyStages map[string][2]float64 `json:"latency_stages_us,omitempty"`
	// How long gswitchd's changes held its datapath back during the step
	// (gswitch_switch_write_lock_seconds), by op with any: [count, p99,
	// the largest bucket's bound] in µs.
	WriteLock map[string][3]float64 `json:"write_lock_us,omitempty"`
	// With datapath workers: the time of a worker's run by part
	// (gswitch_worker_run_part_seconds: parse, lookup, decide, send), a
	// value per timed run (one in 8): [p50, p99] in µs.
	RunParts map[string][2]float64 `json:"run_parts_us,omitempty"`
	// The waits of gswitchd's receive queues' readers for their runners
	// during the step (gswitch_receive_stalls_total and its seconds: a
	// queue's --batch-depth batches unfinished, its ring filling).
	ReaderStalls  uint64  `json:"reader_stalls,omitempty"`
	ReaderStallMs float64 `json:"reader_stall_ms,omitempty"`
	// With batches in flight (per queue, a GPU): the hand-overs of a
	// queue's ordered transmit from one batch to the next during the step,
	// and the transmit's idle time between them, in ms summed over the
	// queues: waiting for the next batch's goroutine to wake (it was
	// ready) or for the next batch to come to its transmit (its lookups and
	// actions, or under light traffic its batch's close)
	// (gswitch_transmit_handovers_total,
	// gswitch_transmit_handover_idle_seconds_total{why}).
	Handovers        uint64  `json:"handovers,omitempty"`
	HandoverWakeMs   float64 `json:"handover_wake_ms,omitempty"`
	HandoverLookupMs float64 `json:"handover_lookup_ms,omitempty"`
	// With a GPU: the shared device batches' time by stage over the step
	// (gswitch_shared_batch_stage_seconds: form, start, slot, lookup,
	// handback), [p50, p99] in µs; and the mean frames of the batches
	// gswitchd ran (gswitch_batch_frames).
	SharedStages   map[string][2]float64 `json:"shared_stages_us,omitempty"`
	BatchFramesAvg float64               `json:"batch_frames_mean,omitempty"`
	// With --worker-shared: the workers' shared device batches over the
	// step (gswitch_gatherer_*): how many went to the device, their mean
	// keys and runs, and how many closed by why (full: no room for a run;
	// idle: a device slot free; wait: a worker waited for its run's
	// results, which closes its batch at once).
	GatherBatches    uint64            `json:"gather_batches,omitempty"`
	GatherKeysMean   float64           `json:"gather_keys_mean,omitempty"`
	GatherSharesMean float64           `json:"gather_shares_mean,omitempty"`
	GatherClosed     map[string]uint64 `json:"gather_closed,omitempty"`
	// With resident lookups (gswitchd's --resident-lookups): the lookups posted to
	// the devices' resident kernels over the step, and their launches.
	ResidentLookups  uint64 `json:"resident_lookups,omitempty"`
	ResidentLaunches uint64 `json:"resident_launches,omitempty"`
	HalfLossless     bool   `json:"half_lossless,omitempty"`
	// --ruleset events: what matched gswitchd's events (cpu, or the
	// device) and the events it matched on the device and on the CPU since
	// it started, read after the series.
	EventMatcher string `json:"event_matcher,omitempty"`
	EventsOnGPU  uint64 `json:"events_gpu,omitempty"`
	EventsOnCPU  uint64 `json:"events_cpu,omitempty"`
	// CPU over the step and its settle time: cores the whole machine kept
	// busy (/proc/stat: senders, sinks, the kernel's veth work, the switch)
	// and cores gswitchd's process used (its user and system time).
	BusyCores   float64 `json:"busy_cores"`
	StealCores  float64 `json:"steal_cores"` // a virtual machine's CPU its hypervisor ran something else on
	SwitchCores float64 `json:"switch_cores,omitempty"`
	// SwitchCPUPerFrameUs is the switch process's CPU time over the step
	// and its settle time (user and system, as switch_cores) in µs per
	// frame forwarded (Received): its CPU per forwarded frame by its own
	// accounting. 0 when nothing arrived.
	SwitchCPUPerFrameUs float64 `json:"switch_cpu_us_per_frame,omitempty"`
	// SwitchSysPerFrameUs is the system time's part of it: the kernel in
	// the switch's system calls (its reads, polls and sends; the receive
	// work a send runs on veth is softirq time, switch_cpus_softirq, on
	// a kernel that accounts interrupt time).
	SwitchSysPerFrameUs float64 `json:"switch_sys_us_per_frame,omitempty"`
	// With --switch-cpus: how many of those cores were busy over the step
	// (/proc/stat's per-core lines, the switch's process and the kernel's
	// work on them alike: a switch whose cores are all busy is bound by
	// them), and of that the interrupt and softirq work (on veth, the
	// receive path of the frames the switch sends, run in its send calls).
	SwitchCPUsBusy    float64 `json:"switch_cpus_busy,omitempty"`
	SwitchCPUsSoftirq float64 `json:"switch_cpus_softirq,omitempty"`
	// The cores the switch and the bench were held to (--switch-cpus,
	// --bench-cpus; empty: any).
	SwitchCPUs string `json:"switch_cpus,omitempty"`
	BenchCPUs  string `json:"bench_cpus,omitempty"`
	// The cores the kernel's receive work for the sinks ran on (RPS,
	// --sink-rps; empty: the sending core, veth's own way).
	SinkRPS string `json:"sink_rps_cpus,omitempty"`
	Machine string `json:"machine"`
	Time    string `json:"time"`

	// gswitchd-filters: the live filters gswitchd reported running and
	// the matches they counted over the series so far (its metrics).
	Filters       int    `json:"filters,omitempty"`
	FilterMatches uint64 `json:"filter_matches,omitempty"`
}

// FlowMods is one flow-installation run.
type FlowMods struct {
	Bench          string  `json:"bench"` // flowmods
	Target         string  `json:"target"`
	Backend        string  `json:"backend"`
	FlowMods       int     `json:"flowmods"`
	Batch          int     `json:"batch"`
	FlowModsPerSec float64 `json:"flowmods_per_sec"` // first FLOW_MOD sent to last barrier reply
	BarrierP50us   float64 `json:"barrier_p50_us"`   // barrier request sent to reply received, after each batch
	BarrierP99us   float64 `json:"barrier_p99_us"`
	BarrierMaxus   float64 `json:"barrier_max_us"`
	Machine        string  `json:"machine"`
	Time           string  `json:"time"`
}

// lossPct is the loss of a step in percent (0 when nothing was sent; a
// receive count above the sent count, from stray frames, is no loss).
func lossPct(sent, received uint64) float64 {
	if sent == 0 || received >= sent {
		return 0
	}
	return 100 * float64(sent-received) / float64(sent)
}

// maxLossless is the highest offered rate among steps under the loss
// threshold (0 if none).
func maxLossless(steps []Step) float64 {
	best := 0.0
	for _, s := range steps {
		if s.Sent > 0 && s.LossPct < lossThresholdPct && s.OfferedPPS > best {
			best = s.OfferedPPS
		}
	}
	return best
}

// losslessTo returns the highest offered rate of steps with loss under
// the threshold there and at every step asked a lower rate (0: the
// lowest step lost).
func losslessTo(steps []Step) float64 {
	byAsked := slices.Clone(steps)
	slices.SortStableFunc(byAsked, func(a, b Step) int { return cmp.Compare(a.AskedPPS, b.AskedPPS) })
	best := 0.0
	for _, s := range byAsked {
		if s.Sent == 0 || s.LossPct >= lossThresholdPct {
			break
		}
		best = max(best, s.OfferedPPS)
	}
	return best
}

// percentile is the p-th percentile (0..100) of sorted durations, in µs.
func durPercentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1)*p/100 + 0.5)
	return float64(sorted[i]) / 1e3
}

// Run runs "gswitchctl bench forward" with the command-line arguments args
// (the flags after "bench forward"), the tables or JSON lines to stdout,
// progress to stderr. Its errors wrap benchutil.ErrUsage for a bad command
// line. ctx, SIGINT or SIGTERM end the run; the namespaces, links and
// processes it made are removed on every return.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFwdFlags(args, stderr)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return errors.New("bench forward needs root (network namespaces, veth pairs, AF_PACKET)")
	}
	if slices.Contains(f.targets, "ovs") {
		if err := checkOVSTools(); err != nil {
			return err
		}
	}
	if set, ok, err := benchCPUs(f.benchCPUs, f.switchCPUs); err != nil {
		return err
	} else if ok {
		if err := pinProcess(set); err != nil {
			return err
		}
		f.benchCPUs = cpuListString(set)
		fmt.Fprintf(stderr, "bench forward: the bench on cores %s, the switch on %s\n", f.benchCPUs, f.switchCPUs)
	} else if f.switchCPUs != "" && f.benchCPUs == "" {
		fmt.Fprintf(stderr, "bench forward: --switch-cpus %s leaves the bench no core of its own: it shares the switch's\n", f.switchCPUs)
	}
	switch f.sinkRPS {
	case "off":
		f.sinkRPS = ""
	case "bench":
		if f.benchCPUs == "" || f.benchCPUs == "any" {
			return fmt.Errorf("%w: --sink-rps bench: the bench has no cores of its own (--switch-cpus, --bench-cpus)", benchutil.ErrUsage)
		}
		f.sinkRPS = f.benchCPUs
	}
	if f.sinkRPS != "" {
		fmt.Fprintf(stderr, "bench forward: the sinks' receive work on cores %s (RPS)\n", f.sinkRPS)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	env, err := newFwdEnv(ctx, f, stderr)
	if err != nil {
		return err
	}
	defer env.close()
	// The generator, sink and switch share the machine: say how much.
	fmt.Fprintf(stderr, "bench forward: %s; targets %s\n", benchutil.Machine(), strings.Join(f.targets, ","))
	var all []Step
	var fms []FlowMods
	for r := 1; r <= f.rounds; r++ {
		env.round = r
		for _, target := range roundOrder(f.targets, r) {
			steps, fm, err := env.runTarget(target)
			all = append(all, steps...)
			fms = append(fms, fm...)
			if err != nil {
				printForward(stdout, f.json, all, fms, nil)
				return fmt.Errorf("%s: %w", target, err)
			}
		}
	}
	var meds []StepMedian
	if f.rounds > 1 {
		meds = fwdMedians(all)
	}
	printForward(stdout, f.json, all, fms, meds)
	return nil
}

// roundOrder is the order of the targets in round r (from 1): as given in
// odd rounds, reversed in even ones, so that a machine that slows down or
// speeds up during the run favours no target.
func roundOrder(targets []string, r int) []string {
	if r%2 == 1 {
		return targets
	}
	rev := slices.Clone(targets)
	slices.Reverse(rev)
	return rev
}

// StepMedian is one target's, rule count's and offered load's medians over
// the rounds, one JSON line with --json and --rounds above 1.
type StepMedian struct {
	Bench          string  `json:"bench"` // forward-median
	Target         string  `json:"target"`
	Backend        string  `json:"backend"`
	Rules          int     `json:"rules"`
	AskedPPS       int64   `json:"asked_pps"`
	Rounds         int     `json:"rounds"`
	OfferedPPS     float64 `json:"offered_pps"`
	ForwardedPPS   float64 `json:"forwarded_pps"`
	LossPct        float64 `json:"loss_pct"`
	LosslessRounds int     `json:"lossless_rounds"`  // rounds whose step lost under 0.1%
	MaxLosslessPPS float64 `json:"max_lossless_pps"` // the median of the rounds' series' max_lossless_pps
	LosslessToPPS  float64 `json:"lossless_to_pps"`  // the median of the rounds' series' lossless_to_pps
	StealCores     float64 `json:"steal_cores"`
	Machine        string  `json:"machine"`
	Time           string  `json:"time"`
}

// fwdMedians groups the steps by target, backend, rules and asked rate, in
// their first order, and takes each group's medians.
func fwdMedians(steps []Step) []StepMedian {
	type key struct {
		target, backend string
		rules           int
		asked           int64
	}
	var order []key
	groups := map[key][]Step{}
	for _, s := range steps {
		k := key{s.Target, s.Backend, s.Rules, s.AskedPPS}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], s)
	}
	out := make([]StepMedian, 0, len(order))
	for _, k := range order {
		g := groups[k]
		col := func(f func(Step) float64) float64 {
			v := make([]float64, len(g))
			for i, s := range g {
				v[i] = f(s)
			}
			return benchutil.Median(v)
		}
		m := StepMedian{
			Bench: "forward-median", Target: k.target, Backend: k.backend, Rules: k.rules, AskedPPS: k.asked, Rounds: len(g),
			OfferedPPS:     col(func(s Step) float64 { return s.OfferedPPS }),
			ForwardedPPS:   col(func(s Step) float64 { return s.ForwardedPPS }),
			LossPct:        col(func(s Step) float64 { return s.LossPct }),
			MaxLosslessPPS: col(func(s Step) float64 { return s.MaxLosslessPPS }),
			LosslessToPPS:  col(func(s Step) float64 { return s.LosslessToPPS }),
			StealCores:     col(func(s Step) float64 { return s.StealCores }),
			Machine:        g[0].Machine, Time: g[len(g)-1].Time,
		}
		for _, s := range g {
			if s.Sent > 0 && s.LossPct < lossThresholdPct {
				m.LosslessRounds++
			}
		}
		out = append(out, m)
	}
	return out
}

// printForward prints the steps, flow-mod runs and medians as tables or
// JSON lines.
func printForward(w io.Writer, asJSON bool, steps []Step, fms []FlowMods, meds []StepMedian) {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, s := range steps {
			enc.Encode(s)
		}
		for _, m := range fms {
			enc.Encode(m)
		}
		for _, m := range meds {
			enc.Encode(m)
		}
		return
	}
	asked := func(pps int64) string {
		if pps > 0 {
			return strconv.FormatInt(pps, 10)
		}
		return "max"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\trules\tround\tasked pps\toffered pps\tforwarded pps\tloss %\tmax lossless pps\tlossless to pps\t")
	for _, s := range steps {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.0f\t%.0f\t%.3f\t%.0f\t%.0f\t\n", s.Target, s.Rules, s.Round, asked(s.AskedPPS), s.OfferedPPS, s.ForwardedPPS, s.LossPct, s.MaxLosslessPPS, s.LosslessToPPS)
	}
	tw.Flush()
	if len(meds) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "medians: target\trules\trounds\tasked pps\toffered pps\tforwarded pps\tloss %\tlossless rounds\tmax lossless pps\tlossless to pps\t")
		for _, m := range meds {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%.0f\t%.0f\t%.3f\t%d\t%.0f\t%.0f\t\n", m.Target, m.Rules, m.Rounds, asked(m.AskedPPS), m.OfferedPPS, m.ForwardedPPS, m.LossPct, m.LosslessRounds, m.MaxLosslessPPS, m.LosslessToPPS)
		}
		tw.Flush()
	}
	if len(fms) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "target\tflowmods\tbatch\tflowmods/s\tbarrier p50 µs\tbarrier p99 µs\tbarrier max µs\t")
	for _, m := range fms {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t\n", m.Target, m.FlowMods, m.Batch, m.FlowModsPerSec, m.BarrierP50us, m.BarrierP99us, m.BarrierMaxus)
	}
	tw.Flush()
}
