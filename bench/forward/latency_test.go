package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/internal/prom"
)

func TestLatencyQuantiles(t *testing.T) {
	page := func(c1, c2, c3, inf uint64) string {
		return `# HELP gswitch_frame_latency_seconds x
# TYPE gswitch_frame_latency_seconds histogram
gswitch_frame_latency_seconds_bucket{le="1e-05"} ` + itoa(c1) + `
gswitch_frame_latency_seconds_bucket{le="2e-05"} ` + itoa(c2) + `
gswitch_frame_latency_seconds_bucket{le="4e-05"} ` + itoa(c3) + `
gswitch_frame_latency_seconds_bucket{le="+Inf"} ` + itoa(inf) + `
gswitch_frame_latency_seconds_sum 0.1
gswitch_frame_latency_seconds_count ` + itoa(inf) + `
`
	}
	h0, err := parseLatency(strings.NewReader(page(10, 10, 10, 10)))
	if err != nil {
		t.Fatal(err)
	}
	h1, err := parseLatency(strings.NewReader(page(10, 60, 109, 110)))
	if err != nil {
		t.Fatal(err)
	}
	d := h1.since(h0).total // 50 in (10, 20] µs, 49 in (20, 40], 1 beyond
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	if p := d.quantile(0.5); !near(p, 20) {
		t.Errorf("p50 %v µs, want 20", p)
	}
	if p := d.quantile(0.25); !near(p, 15) {
		t.Errorf("p25 %v µs, want 15", p)
	}
	if p := d.quantile(0.995); !near(p, 40) {
		t.Errorf("p99.5 %v µs, want the last finite bound 40", p)
	}
	if (&latHist{}).quantile(0.5) != 0 || h0.since(h0).total.quantile(0.99) != 0 || d.since(nil) != nil || h0.since(nil) != nil {
		t.Error("empty histograms")
	}
	// p50p99 takes the named histograms with samples, in the names' order,
	// and leaves out empty and absent ones.
	qs, text := p50p99(map[string]*latHist{"run": d, "ring": h0.since(h0).total}, "ring", "batch", "run")
	if len(qs) != 1 || !near(qs["run"][0], 20) || text != fmt.Sprintf(" run 20/%.0fµs", qs["run"][1]) {
		t.Errorf("p50p99: %v %q", qs, text)
	}
	if qs, text := p50p99(nil, "ring"); qs != nil || text != "" {
		t.Errorf("p50p99 of none: %v %q", qs, text)
	}
	if _, err := parseLatency(strings.NewReader("other_metric 1\n")); err == nil {
		t.Error("a page without the histogram")
	}
	if len(h1.stages) != 0 {
		t.Errorf("stages from a page without them: %v", h1.stages)
	}
	// The stages, as gswitchd writes them.
	stage := func(name string, c1, inf uint64) string {
		return `gswitch_frame_latency_stage_seconds_bucket{stage="` + name + `",le="1e-05"} ` + itoa(c1) + `
gswitch_frame_latency_stage_seconds_bucket{stage="` + name + `",le="+Inf"} ` + itoa(inf) + `
gswitch_frame_latency_stage_seconds_sum{stage="` + name + `"} 0.1
gswitch_frame_latency_stage_seconds_count{stage="` + name + `"} ` + itoa(inf) + `
`
	}
	s0, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + "# TYPE gswitch_frame_latency_stage_seconds histogram\n" + stage("ring", 1, 1) + stage("run", 0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	s1, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + "# TYPE gswitch_frame_latency_stage_seconds histogram\n" + stage("ring", 11, 11) + stage("run", 0, 10)))
	if err != nil {
		t.Fatal(err)
	}
	sd := s1.since(s0)
	if len(sd.stages) != 2 || !near(sd.stages["ring"].quantile(0.99), 9.9) || !near(sd.stages["run"].quantile(0.5), 10) {
		t.Errorf("stages: ring p99 %v µs (want 9.9), run p50 %v µs (want the last finite bound 10)", sd.stages["ring"].quantile(0.99), sd.stages["run"].quantile(0.5))
	}
	if _, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + "gswitch_frame_latency_stage_seconds 3\n")); err == nil {
		t.Error("a stage series without a stage label")
	}

	// The workers' run parts, by the label part, read as the stages are.
	part := func(name string, c1, inf uint64) string {
		return strings.ReplaceAll(strings.ReplaceAll(stage(name, c1, inf), "gswitch_frame_latency_stage_seconds", runPartMetric), "stage=", "part=")
	}
	const partType = "# TYPE " + runPartMetric + " histogram\n"
	r0, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + partType + part("lookup", 2, 2) + part("send", 0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	r1, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + partType + part("lookup", 12, 12) + part("send", 0, 10)))
	if err != nil {
		t.Fatal(err)
	}
	rd := r1.since(r0)
	if len(rd.runParts) != 2 || rd.runParts["lookup"].count() != 10 || !near(rd.runParts["send"].quantile(0.5), 10) {
		t.Errorf("run parts: %d, lookup's runs %d (want 10), send p50 %v µs (want 10)", len(rd.runParts), rd.runParts["lookup"].count(), rd.runParts["send"].quantile(0.5))
	}
	if _, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + runPartMetric + " 3\n")); err == nil {
		t.Error("a run part series without a part label")
	}

	// The readers' stalls: the counters' growth over the step; a page
	// without them (an older gswitchd) says nothing of them.
	stalls := func(n int, sec string) string {
		return "# TYPE " + stallsMetric + " counter\n" + stallsMetric + " " + itoa(uint64(n)) + "\n# TYPE " + stallTimeMetric + " counter\n" + stallTimeMetric + " " + sec + "\n"
	}
	t0, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + stalls(3, "0.5")))
	if err != nil {
		t.Fatal(err)
	}
	t1, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + stalls(10, "0.75")))
	if err != nil {
		t.Fatal(err)
	}
	if d := t1.since(t0); d.stalls != 7 || d.stallSec != 0.25 {
		t.Errorf("stalls over the step: %v, %v s; want 7, 0.25", d.stalls, d.stallSec)
	}
	if d := t1.since(s0); d.stalls != -1 {
		t.Errorf("stalls since a page without them: %v, want -1 (unknown)", d.stalls)
	}

	// The transmit hand-overs and their idle by why, the shared batches'
	// stages (read as the stages are) and the frames per batch: their
	// growth over the step.
	hand := func(n int, wake, look string) string {
		return "# TYPE " + handoversMetric + " counter\n" + handoversMetric + " " + itoa(uint64(n)) + "\n# TYPE " + handoverIdleMetric + " counter\n" +
			handoverIdleMetric + `{why="wake"} ` + wake + "\n" + handoverIdleMetric + `{why="lookup"} ` + look + "\n"
	}
	shared := func(name string, c1, inf uint64) string {
		return strings.ReplaceAll(stage(name, c1, inf), "gswitch_frame_latency_stage_seconds", sharedStageMetric)
	}
	batches := func(n int, sum string) string {
		return "# TYPE " + batchMetric + " histogram\n" + batchMetric + `_bucket{le="+Inf"} ` + itoa(uint64(n)) + "\n" + batchMetric + "_sum " + sum + "\n" + batchMetric + "_count " + itoa(uint64(n)) + "\n"
	}
	const sharedType = "# TYPE " + sharedStageMetric + " histogram\n"
	h0p, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + hand(4, "0.5", "1") + sharedType + shared("lookup", 2, 2) + batches(10, "100")))
	if err != nil {
		t.Fatal(err)
	}
	h1p, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + hand(14, "0.75", "1.5") + sharedType + shared("lookup", 2, 12) + batches(30, "700")))
	if err != nil {
		t.Fatal(err)
	}
	hd := h1p.since(h0p)
	if hd.handovers != 10 || hd.idle["wake"] != 0.25 || hd.idle["lookup"] != 0.5 {
		t.Errorf("hand-overs over the step: %v, idle %v; want 10, wake 0.25 and lookup 0.5 s", hd.handovers, hd.idle)
	}
	if hd.shared["lookup"].count() != 10 || !near(hd.shared["lookup"].quantile(0.5), 10) {
		t.Errorf("shared lookups over the step: %d, p50 %v µs; want 10, 10", hd.shared["lookup"].count(), hd.shared["lookup"].quantile(0.5))
	}
	if hd.batches != 20 || hd.frames != 600 {
		t.Errorf("batches over the step: %v, %v frames; want 20, 600", hd.batches, hd.frames)
	}
	if d := h1p.since(s0); d.handovers != -1 {
		t.Errorf("hand-overs since a page without them: %v, want -1 (unknown)", d.handovers)
	}
	if _, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + hand(1, "0.5", "1") + handoverIdleMetric + " 3\n")); err == nil {
		t.Error("a hand-over idle series without a why label")
	}

	// The workers' shared batches: the counters' growth over the step; a
	// page without them (no --worker-shared) says nothing of them.
	gather := func(batches, keys, shares, full, idle, wait int) string {
		c := func(name string, v int) string {
			return "# TYPE " + name + " counter\n" + name + " " + itoa(uint64(v)) + "\n"
		}
		return c(gatherBatchesMetric, batches) + c(gatherKeysMetric, keys) + c(gatherSharesMetric, shares) +
			"# TYPE " + gatherClosedMetric + " counter\n" + gatherClosedMetric + `{why="full"} ` + itoa(uint64(full)) + "\n" +
			gatherClosedMetric + `{why="idle"} ` + itoa(uint64(idle)) + "\n" + gatherClosedMetric + `{why="wait"} ` + itoa(uint64(wait)) + "\n"
	}
	g0, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + gather(10, 200, 20, 1, 4, 5)))
	if err != nil {
		t.Fatal(err)
	}
	g1, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + gather(30, 1000, 80, 1, 14, 15)))
	if err != nil {
		t.Fatal(err)
	}
	if gd := g1.since(g0); gd.gather != 20 || gd.gatherKeys != 800 || gd.gatherShares != 60 ||
		gd.gatherClosed["full"] != 0 || gd.gatherClosed["idle"] != 10 || gd.gatherClosed["wait"] != 10 {
		t.Errorf("shared batches over the step: %v batches, %v keys, %v shares, closed %v; want 20, 800, 60, full 0 idle 10 wait 10",
			gd.gather, gd.gatherKeys, gd.gatherShares, gd.gatherClosed)
	}
	if d := g1.since(s0); d.gather != -1 {
		t.Errorf("shared batches since a page without them: %v, want -1 (unknown)", d.gather)
	}
	if _, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + gather(1, 1, 1, 0, 0, 1) + gatherClosedMetric + " 3\n")); err == nil {
		t.Error("a shared batches' close series without a why label")
	}

	// The resident lookups, summed over the devices: their growth over the
	// step; a page without them says nothing of them.
	resident := func(l0, l1, n0, n1 int) string {
		return "# TYPE " + residentLookupsMetric + " counter\n" + residentLookupsMetric + `{device="0"} ` + itoa(uint64(l0)) + "\n" +
			residentLookupsMetric + `{device="1"} ` + itoa(uint64(l1)) + "\n# TYPE " + residentLaunchesMetric + " counter\n" +
			residentLaunchesMetric + `{device="0"} ` + itoa(uint64(n0)) + "\n" + residentLaunchesMetric + `{device="1"} ` + itoa(uint64(n1)) + "\n"
	}
	r0p, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + resident(10, 5, 1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	r1p, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + resident(110, 25, 3, 2)))
	if err != nil {
		t.Fatal(err)
	}
	if rd := r1p.since(r0p); rd.resident != 120 || rd.residentLaunches != 3 {
		t.Errorf("resident lookups over the step: %v, %v launches; want 120, 3", rd.resident, rd.residentLaunches)
	}
	if d := r1p.since(s0); d.resident != -1 {
		t.Errorf("resident lookups since a page without them: %v, want -1 (unknown)", d.resident)
	}
	if _, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + resident(1, 1, 1, 1) + residentLookupsMetric + " 3\n")); err == nil {
		t.Error("a resident lookups series without a device label")
	}

	// The write-lock spans by op: counted, p99 and the largest bucket's
	// bound over the step; an op without spans in the step has count 0.
	lock := func(op string, c1, c2, inf uint64) string {
		return `gswitch_switch_write_lock_seconds_bucket{op="` + op + `",le="1e-05"} ` + itoa(c1) + `
gswitch_switch_write_lock_seconds_bucket{op="` + op + `",le="0.004"} ` + itoa(c2) + `
gswitch_switch_write_lock_seconds_bucket{op="` + op + `",le="+Inf"} ` + itoa(inf) + `
gswitch_switch_write_lock_seconds_sum{op="` + op + `"} 0.1
gswitch_switch_write_lock_seconds_count{op="` + op + `"} ` + itoa(inf) + `
`
	}
	const lockType = "# TYPE gswitch_switch_write_lock_seconds histogram\n"
	w0, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + lockType + lock("expire", 0, 0, 0) + lock("flow_mod", 5, 5, 5)))
	if err != nil {
		t.Fatal(err)
	}
	w1, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + lockType + lock("expire", 0, 4, 4) + lock("flow_mod", 5, 5, 5)))
	if err != nil {
		t.Fatal(err)
	}
	wd := w1.since(w0)
	if e := wd.writeLock["expire"]; e.count() != 4 || e.max() != 4000 || e.quantile(0.99) < 10 {
		t.Errorf("expire spans: %d, max %v µs (want 4, 4000), p99 %v µs", e.count(), e.max(), e.quantile(0.99))
	}
	if f := wd.writeLock["flow_mod"]; f.count() != 0 || f.max() != 0 {
		t.Errorf("flow_mod spans in the step: %d, max %v µs (want none)", f.count(), f.max())
	}
	if _, err := parseLatency(strings.NewReader(page(1, 1, 1, 1) + "gswitch_switch_write_lock_seconds 3\n")); err == nil {
		t.Error("a write-lock series without an op label")
	}
}

func itoa(n uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestPlainLatencyPage: the plain forwarder's latency histograms, one per
// pair, are exported as one gswitch_frame_latency_seconds that the bench
// reads as it reads gswitchd's.
func TestPlainLatencyPage(t *testing.T) {
	a, b := new(pipeline.LatencyHistogram), new(pipeline.LatencyHistogram)
	done := time.Unix(100, 0)
	a.Observe([]int64{done.UnixNano() - 10_000, done.UnixNano() - 10_000, 0}, done) // 10 µs twice; 0: no timestamp
	b.Observe([]int64{done.UnixNano() - 1_000_000}, done)                           // 1 ms
	var page strings.Builder
	if err := prom.WriteText(&page, pipeline.LatencyCollector(a, b)); err != nil {
		t.Fatal(err)
	}
	p, err := parseLatency(strings.NewReader(page.String()))
	if err != nil {
		t.Fatalf("parseLatency: %v\n%s", err, page.String())
	}
	if n := p.total.count(); n != 3 {
		t.Errorf("count %d, want 3\n%s", n, page.String())
	}
	if p50, p99 := p.total.quantile(0.5), p.total.quantile(0.99); p50 < 8 || p50 > 12 || p99 < 800 || p99 > 1100 {
		t.Errorf("p50 %.1f µs, p99 %.1f µs: want about 10 and 1000 (a bucket is √2 wide)", p50, p99)
	}
}

// TestPlainForwarderUsage: a bad ring or a stray argument is a usage
// error, before any port is opened.
func TestPlainForwarderUsage(t *testing.T) {
	for _, args := range [][]string{{"--rx-ring", "ring"}, {"--pairs", "0"}, {"extra"}} {
		err := RunPlainForwarder(context.Background(), args, io.Discard, io.Discard)
		if !errors.Is(err, benchutil.ErrUsage) {
			t.Errorf("RunPlainForwarder(%q) = %v, want a usage error", args, err)
		}
	}
}
