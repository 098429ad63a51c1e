package benchutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gswitch/gswitch/tables/lpm"
)

func parse(t *testing.T, args ...string) (*CommonFlags, error) {
	t.Helper()
	var c CommonFlags
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.Register(fs, 1234)
	if err := ParseFlags(fs, args); err != nil {
		return &c, err
	}
	return &c, c.Validate()
}

func TestCommonFlagsDefaults(t *testing.T) {
	c, err := parse(t)
	if err != nil {
		t.Fatal(err)
	}
	want := CommonFlags{Backend: "cpu", Lookups: 1234, Rounds: 5, Batch: 256, Threads: 1, Seed: 1, GPUs: "0", MinBatch: 1, Streams: 4}
	if *c != want {
		t.Errorf("defaults %+v, want %+v", *c, want)
	}
	if c.PipeDepth() != 8 {
		t.Errorf("PipeDepth %d, want two per stream", c.PipeDepth())
	}
	c.Depth = 3
	if c.PipeDepth() != 3 {
		t.Errorf("PipeDepth with --depth 3: %d", c.PipeDepth())
	}
}

func TestCommonFlagsParse(t *testing.T) {
	c, err := parse(t, "--check", "--check-sample", "7", "--json", "--lookups", "9", "--rounds", "3", "--batch", "64",
		"--threads", "2", "--seed", "42", "--gpus", "0, 1,3")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Check || c.CheckSample != 7 || !c.JSON || c.Lookups != 9 || c.Rounds != 3 || c.Batch != 64 || c.Threads != 2 || c.Seed != 42 {
		t.Errorf("%+v", *c)
	}
	if ords, err := c.Ordinals(); err != nil || !slices.Equal(ords, []int{0, 1, 3}) {
		t.Errorf("Ordinals: %v %v", ords, err)
	}
	for _, bad := range [][]string{
		{"--backend", "tpu"}, {"--lookups", "0"}, {"--rounds", "0"}, {"--batch", "0"}, {"--threads", "0"},
		{"--threads", "1025"}, {"--check-sample", "-1"}, {"--rounds", "x"}, {"--nope"}, {"stray"},
	} {
		if _, err := parse(t, bad...); !errors.Is(err, ErrUsage) {
			t.Errorf("%q: %v, want a usage error", bad, err)
		}
	}
	if _, err := parse(t, "-h"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: %v, want flag.ErrHelp", err)
	}
	for _, g := range []string{"a", "-1", "0,,1"} {
		c := CommonFlags{GPUs: g}
		if _, err := c.Ordinals(); !errors.Is(err, ErrUsage) {
			t.Errorf("--gpus %q: %v, want a usage error", g, err)
		}
	}
}

// TestGPUBackendChoice: --backend gpu is a usage error exactly when the
// build has no GPU engine (no cuda tag).
func TestGPUBackendChoice(t *testing.T) {
	_, err := parse(t, "--backend", "gpu")
	if NewGPUEngine == nil && !errors.Is(err, ErrUsage) {
		t.Errorf("--backend gpu without the cuda tag: %v, want a usage error", err)
	}
	if NewGPUEngine != nil && err != nil {
		t.Errorf("--backend gpu with the cuda tag: %v", err)
	}
}

func TestMedianPercentile(t *testing.T) {
	if Median(nil) != 0 || Median([]float64{3}) != 3 || Median([]float64{5, 1, 3}) != 3 || Median([]float64{4, 1, 3, 2}) != 2.5 {
		t.Error("Median")
	}
	xs := []float64{5, 1, 4, 2, 3}
	if Median(xs); !slices.Equal(xs, []float64{5, 1, 4, 2, 3}) {
		t.Error("Median sorted its argument in place")
	}
	var hundred []float64
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, float64(i))
	}
	for p, want := range map[float64]float64{0: 1, 1: 1, 50: 50, 99: 99, 100: 100} {
		if got := Percentile(hundred, p); got != want {
			t.Errorf("Percentile %v: %v, want %v", p, got, want)
		}
	}
	if Percentile(nil, 50) != 0 || hundred[0] != 100 {
		t.Error("Percentile of nothing, or it sorted in place")
	}
	if m, p99 := LatencyStats([]float64{1, 2, 3, 10}); m != 4 || p99 != 10 {
		t.Errorf("LatencyStats %v %v", m, p99)
	}
	if m, p99 := LatencyStats(nil); m != 0 || p99 != 0 {
		t.Error("LatencyStats of nothing")
	}
}

func TestTimeRoundsParallel(t *testing.T) {
	calls := 0
	rates, total := TimeRounds(3, func() int { calls++; return 1000 })
	if calls != 3 || len(rates) != 3 || total != 3000 {
		t.Fatalf("%d calls, rates %v, total %d", calls, rates, total)
	}
	for _, r := range rates {
		if r <= 0 {
			t.Errorf("rate %v", r)
		}
	}
	var seen [4]atomic.Int32
	if n := Parallel(4, func(th int) int { seen[th].Add(1); return th + 1 }); n != 10 {
		t.Errorf("Parallel sum %d, want 10", n)
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Errorf("thread %d ran %d times", i, seen[i].Load())
		}
	}
	if n := Parallel(1, func(th int) int { return 7 + th }); n != 7 {
		t.Errorf("Parallel(1) %d", n)
	}
}

func TestPrintResults(t *testing.T) {
	c := CommonFlags{Backend: "cpu", Rounds: 3, Threads: 1, Batch: 256}
	r := NewResult("lpm", &c)
	r.Algo, r.Traffic, r.Entries, r.MLPS, r.Checked, r.Data = "gamt", "random", 10, 12.5, 100, "the data"
	if r.Machine == "" || r.GoVersion == "" || r.Time == "" || r.GPU != "none" || r.Rounds != 3 {
		t.Errorf("NewResult: %+v", r)
	}
	var js bytes.Buffer
	if err := PrintResults(&js, true, []Result{r, r}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(js.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d JSON lines, want 2", len(lines))
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil {
		t.Fatal(err)
	}
	// The keys every run has (the rest are omitempty).
	for _, k := range []string{"work", "backend", "algo", "data", "traffic", "entries", "lookups", "rounds", "threads", "batch",
		"ns_per_lookup", "build_ms", "bytes_per_entry", "image_bytes", "updates_per_sec", "checked", "mismatches", "machine", "gpu", "go", "time", "mlps"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, lines[0])
		}
	}
	var txt bytes.Buffer
	if err := PrintResults(&txt, false, []Result{r}); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"lpm cpu/gamt traffic=random entries=10: 12.50 Mlookups/s", "checked 100 lookups", "# data: the data"} {
		if !strings.Contains(txt.String(), w) {
			t.Errorf("text lacks %q:\n%s", w, txt.String())
		}
	}
	if err := CheckOutcome([]Result{r}); err != nil {
		t.Errorf("CheckOutcome without mismatches: %v", err)
	}
	r.Mismatches = 2
	if err := CheckOutcome([]Result{r, r}); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "4 lookups") {
		t.Errorf("CheckOutcome: %v", err)
	}
}

func TestAddr6(t *testing.T) {
	a := Addr6(netip.MustParseAddr("2001:db8::1:2"))
	if a != (lpm.Addr6{Hi: 0x20010db800000000, Lo: 0x0000000000010002}) {
		t.Errorf("Addr6 %#x %#x", a.Hi, a.Lo)
	}
}
