package forward

import (
	"math"
	"strings"
	"testing"
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
