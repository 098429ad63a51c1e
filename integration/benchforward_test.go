package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBenchForwardGswitchd runs "gswitchctl bench forward" for a few
// seconds at low rates against gswitchd only (the path CI can take without
// Open vSwitch's daemons being measured): it builds its own namespaces
// with netlink, installs 100 rules, sends, counts (with each --sink), and installs 2000
// FLOW_MODs with barriers. At 5 and 10 kframes/s the switch must forward
// (nearly) everything, in one of two runs; the JSON lines must carry the
// documented fields.
func TestBenchForwardGswitchd(t *testing.T) {
	needRoot(t)
	ctl := gswitchctlBinary(t)
	gsw := gswitchdBinary(t)
	// A shared CI machine can stall the switch for 100 ms and more (the
	// run that prompted this had 0.7 of its 2 cores stolen by the host),
	// and its receive ring overflows: a step may lose frames once. A
	// switch that does not forward loses them in the second run too.
	// Both ways of counting at the sink: its interface's counter (the
	// default) and a ring that checks every frame is a test frame of the
	// step.
	for _, sink := range []string{"counter", "ring"} {
		for try := 1; ; try++ {
			lossy := benchForwardOnce(t, ctl, gsw, sink)
			if lossy == "" {
				break
			}
			if try == 2 {
				t.Fatalf("--sink %s: gswitchd lost frames at a low rate in two runs; the second: %s", sink, lossy)
			}
			t.Logf("--sink %s: run %d lost frames at a low rate, running again: %s", sink, try, lossy)
		}
	}
}

// benchForwardOnce runs the benchmark once, checks its JSON lines, and
// returns the report of a step that lost frames ("" if none did).
func benchForwardOnce(t *testing.T, ctl, gsw, sink string) (lossy string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ctl, "bench", "forward", "--targets", "gswitchd", "--gswitchd", gsw,
		"--rules", "100", "--rates", "5k,10k", "--duration", "1s", "--flowmods", "2000", "--flowmod-batch", "500", "--sink", sink, "--json")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench forward: %v\n%s\n%s", err, out, stderr.String())
	}
	var steps, fms int
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		switch m["bench"] {
		case "forward":
			steps++
			for _, k := range []string{"target", "rules", "offered_pps", "forwarded_pps", "loss_pct", "max_lossless_pps"} {
				if _, ok := m[k]; !ok {
					t.Errorf("step without %s: %s", k, sc.Text())
				}
			}
			if m["target"] != "gswitchd" || m["rules"] != 100.0 || m["sink"] != sink {
				t.Errorf("step %s", sc.Text())
			}
			// The switch's CPU per forwarded frame goes with its cores: both
			// there, or (less than a tick of CPU time) neither.
			cores, _ := m["switch_cores"].(float64)
			perFrame, _ := m["switch_cpu_us_per_frame"].(float64)
			if recv, _ := m["received"].(float64); (cores > 0 && recv > 0) != (perFrame > 0) || perFrame > 1e6 {
				t.Errorf("switch_cores %v, received %v, switch_cpu_us_per_frame %v: %s", cores, recv, perFrame, sc.Text())
			}
			// Its system time's part is a part of it (the same samples).
			if sys, _ := m["switch_sys_us_per_frame"].(float64); sys < 0 || sys > perFrame {
				t.Errorf("switch_sys_us_per_frame %v of switch_cpu_us_per_frame %v: %s", sys, perFrame, sc.Text())
			}
			// Generous: a busy CI machine may drop a few frames, but at
			// these rates a switch that forwards must pass almost all.
			if loss, _ := m["loss_pct"].(float64); loss > 5 || m["forwarded_pps"].(float64) < 2000 {
				lossy = sc.Text() + "\n" + stderr.String()
			}
		case "flowmods":
			fms++
			if m["flowmods"] != 2000.0 || m["flowmods_per_sec"].(float64) <= 0 || m["barrier_p99_us"].(float64) < m["barrier_p50_us"].(float64) {
				t.Errorf("flowmods %s", sc.Text())
			}
		default:
			t.Errorf("unknown line %s", sc.Text())
		}
	}
	if steps != 2 || fms != 1 {
		t.Errorf("%d steps and %d flow-mod runs, want 2 and 1:\n%s", steps, fms, out)
	}
	return lossy
}

// TestBenchForwardRoundsPlain runs bench forward's plain target (a
// forwarder of the same AF_PACKET ports with no tables, started by
// gswitchctl in the switch namespace) and gswitchd for two rounds in
// alternating order, and checks each round's steps and the medians.
func TestBenchForwardRoundsPlain(t *testing.T) {
	needRoot(t)
	ctl := gswitchctlBinary(t)
	gsw := gswitchdBinary(t)
	for try := 1; ; try++ {
		lossy := benchForwardRounds(t, ctl, gsw)
		if lossy == "" {
			return
		}
		if try == 2 {
			t.Fatalf("a target lost frames at 5 kframes/s in two runs; the second: %s", lossy)
		}
		t.Logf("run %d lost frames at a low rate, running again: %s", try, lossy)
	}
}

func benchForwardRounds(t *testing.T, ctl, gsw string) (lossy string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, ctl, "bench", "forward", "--targets", "plain,gswitchd", "--rounds", "2", "--gswitchd", gsw,
		"--rules", "100", "--rates", "5k", "--duration", "1s", "--flowmods", "0", "--json")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench forward: %v\n%s\n%s", err, out, stderr.String())
	}
	var order []string
	medians := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		target, _ := m["target"].(string)
		switch m["bench"] {
		case "forward":
			order = append(order, fmt.Sprintf("%s/%v", target, m["round"]))
			if want := map[string]float64{"plain": 0, "gswitchd": 100}[target]; m["rules"] != want {
				t.Errorf("%s step with rules %v, want %v", target, m["rules"], want)
			}
			if loss, _ := m["loss_pct"].(float64); loss > 5 {
				lossy = sc.Text() + "\n" + stderr.String()
			}
			if p50, _ := m["latency_p50_us"].(float64); p50 <= 0 {
				t.Errorf("%s step without its per-frame latency: %s", target, sc.Text())
			}
		case "forward-median":
			medians[target] = m
		default:
			t.Errorf("unexpected line %s", sc.Text())
		}
	}
	if want := []string{"plain/1", "gswitchd/1", "gswitchd/2", "plain/2"}; strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("steps in order %v, want %v", order, want)
	}
	for _, target := range []string{"plain", "gswitchd"} {
		m := medians[target]
		if m == nil || m["rounds"] != 2.0 || m["forwarded_pps"].(float64) < 2000 {
			t.Errorf("%s median %v", target, m)
		}
	}
	if !strings.Contains(stderr.String(), "plain forwarder: p2 rx 0 ring-drops 0 tx ") {
		t.Errorf("the plain forwarder's counters are not in the log:\n%s", stderr.String())
	}
	return lossy
}

// TestBenchForwardPlainFrame runs the plain target on frame rings
// (plain@frame): every frame arrives, and the steps report the ring and
// the forwarder's per-frame latency, read from its metrics listener.
func TestBenchForwardPlainFrame(t *testing.T) {
	needRoot(t)
	var step struct {
		Target   string  `json:"target"`
		RxRing   string  `json:"rx_ring"`
		Received int64   `json:"received"`
		Sent     int64   `json:"sent"`
		P50      float64 `json:"latency_p50_us"`
		P99      float64 `json:"latency_p99_us"`
	}
	out, stderr := plainStep(t, &step, "--targets", "plain@frame")
	if step.Target != "plain@frame" || step.RxRing != "frame" || step.Sent == 0 || step.Received < step.Sent*9/10 {
		t.Errorf("step: target %q, ring %q, sent %d, received %d; want plain@frame, frame and (nearly) every frame\n%s", step.Target, step.RxRing, step.Sent, step.Received, stderr)
	}
	if step.P50 <= 0 || step.P99 < step.P50 {
		t.Errorf("latency p50 %.0f µs, p99 %.0f µs: want a histogram read from the forwarder\n%s", step.P50, step.P99, out)
	}
}

// plainStep runs one step of bench forward (two pairs, 5 kframes/s for
// 1 s, JSON) with args, decodes its first line into step and returns the
// output and the log.
func plainStep(t *testing.T, step any, args ...string) (out []byte, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gswitchctlBinary(t), append([]string{"bench", "forward", "--pairs", "2",
		"--rates", "5k", "--duration", "1s", "--json"}, args...)...)
	var log syncBuffer
	cmd.Stderr = &log
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench forward %q: %v\n%s\n%s", args, err, out, log.String())
	}
	if err := json.Unmarshal([]byte(strings.SplitN(string(out), "\n", 2)[0]), step); err != nil {
		t.Fatalf("not a JSON step: %q: %v", out, err)
	}
	return out, log.String()
}

// TestBenchForwardSinkRPS runs the plain target with the sinks' receive
// work steered to core 0 by RPS (--sink-rps 0): the bench checks, in each
// sink's namespace, that the sink's interface took the namespace's mask,
// and its steps record the cores; the frames still arrive.
func TestBenchForwardSinkRPS(t *testing.T) {
	needRoot(t)
	if _, err := os.Stat("/proc/sys/net/core/rps_default_mask"); err != nil {
		t.Skipf("this kernel has no rps_default_mask (Linux 6.2 and later): %v", err)
	}
	var step struct {
		Received int64  `json:"received"`
		Sent     int64  `json:"sent"`
		SinkRPS  string `json:"sink_rps_cpus"`
	}
	_, stderr := plainStep(t, &step, "--targets", "plain", "--sink-rps", "0")
	if step.SinkRPS != "0" || step.Sent == 0 || step.Received < step.Sent*9/10 {
		t.Errorf("step: sink_rps_cpus %q, sent %d, received %d; want 0 and (nearly) every frame\n%s", step.SinkRPS, step.Sent, step.Received, stderr)
	}
	if !strings.Contains(stderr, "the sinks' receive work on cores 0 (RPS)") {
		t.Errorf("no line about the sinks' cores:\n%s", stderr)
	}
}
