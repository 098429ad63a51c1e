package forward

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/tables/flow"
)

func TestParseFwdFlags(t *testing.T) {
	f, err := parseFwdFlags([]string{"--targets", "bridge,gswitchd", "--rules", "1k,10000", "--rates", "max,1.5M,250k"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.targets, []string{"bridge", "gswitchd"}) || !slices.Equal(f.rules, []int{1000, 10000}) {
		t.Errorf("targets %v rules %v", f.targets, f.rules)
	}
	if !slices.Equal(f.rates, []int64{250000, 1500000, 0}) { // ascending, max last
		t.Errorf("rates %v", f.rates)
	}
	def, err := parseFwdFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(def.targets, []string{"gswitchd", "ovs", "bridge", "plain"}) || !slices.Equal(def.rules, []int{1000, 10000}) || def.flowmods != 100000 || def.rates[len(def.rates)-1] != 0 || def.rxQueues != 1 || def.rounds != 1 {
		t.Errorf("defaults: %+v", def)
	}
	if f, err := parseFwdFlags([]string{"--targets", "gswitchd", "--pairs", "4", "--rules", "4,100"}, &bytes.Buffer{}); err != nil || f.pairs != 4 {
		t.Errorf("--pairs 4 with gswitchd: %v", err)
	}
	if f, err := parseFwdFlags([]string{"--targets", "plain,gswitchd", "--pairs", "2", "--rounds", "3"}, &bytes.Buffer{}); err != nil || f.pairs != 2 || f.rounds != 3 {
		t.Errorf("--pairs 2 --rounds 3 with plain and gswitchd: %v", err)
	}
	for _, bad := range [][]string{
		{"--targets", "gswitchd,linux"}, {"--targets", "ovs,ovs"}, {"--rules", "0"}, {"--rules", "1.5"},
		{"--rates", "fast"}, {"--rates", "1M,1000k"}, {"--rates", "-5"}, {"--duration", "1ms"},
		{"--flowmod-batch", "0"}, {"--backend", "tpu"}, {"--rx-queues", "0"}, {"--rx-queues", "65"}, {"extra"},
		{"--pairs", "0"}, {"--pairs", "33"}, {"--pairs", "2"}, {"--targets", "gswitchd", "--pairs", "4", "--rules", "3"},
		{"--batch-size", "-1"}, {"--min-batch", "-2"}, {"--rounds", "0"}, {"--rounds", "101"},
		{"--targets", "plain,bridge", "--pairs", "2"}, {"--targets", "plain,plain"},
		{"--sink-rps", "x"}, {"--sink-rps", "3-1"}, {"--switch-cpus", "0;1"}, {"--switch-cpus", "0-3 && x"}, {"--switch-cpus", "$(x)"},
	} {
		if _, err := parseFwdFlags(bad, &bytes.Buffer{}); !errors.Is(err, benchutil.ErrUsage) {
			t.Errorf("%v: err %v, want a usage error", bad, err)
		}
	}
}

func TestRuleSet(t *testing.T) {
	const n = 300
	file := ruleFile(n)
	lines := strings.Split(strings.TrimSuffix(file, "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	if lines[n-1] != "priority=100,in_port=1,actions=output:2" || lines[0] != "priority=200,ip,nw_dst=10.128.0.1,actions=drop" {
		t.Errorf("first %q last %q", lines[0], lines[n-1])
	}
	if len(slices.Compact(slices.Sorted(slices.Values(lines)))) != n {
		t.Error("repeated rules")
	}
	msgs := ruleFlowMods(n, 1, 7)
	if len(msgs) != n {
		t.Fatalf("%d FLOW_MODs", len(msgs))
	}
	// Every message decodes, the misses never match the traffic's
	// destination, and the last is the one rule that does.
	traffic := net.IPv4(10, 0, 0, 2).To4()
	for i, m := range msgs {
		fm, oerr := openflow.DecodeFlowMod(m)
		if oerr != nil {
			t.Fatalf("FLOW_MOD %d: %v", i, oerr)
		}
		if i < n-1 {
			want := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(lines[i], "priority=200,ip,nw_dst="), ",actions=drop")).To4()
			if fm.Priority != missPriority || !bytes.Equal(ipBytes(missDst(i)), want) || bytes.Equal(want, traffic) {
				t.Fatalf("FLOW_MOD %d: priority %d dst %s, file says %s", i, fm.Priority, ipString(missDst(i)), want)
			}
			continue
		}
		if fm.Priority != matchPriority || len(fm.Instructions.Apply) != 1 || fm.Instructions.Apply[0].Port != 2 {
			t.Errorf("the matching rule: %+v", fm)
		}
	}
	// With pairs, the last rules forward each pair's ports: 1 to 2, 3 to 4, 5 to 6.
	msgs = ruleFlowMods(10, 3, 1)
	if len(msgs) != 10 {
		t.Fatalf("%d FLOW_MODs for 10 rules and 3 pairs", len(msgs))
	}
	for k, m := range msgs[7:] {
		fm, oerr := openflow.DecodeFlowMod(m)
		in, mask := fm.Match.GetUint(flow.FieldInPort)
		if oerr != nil || mask == 0 || in != uint64(2*k+1) || len(fm.Instructions.Apply) != 1 || fm.Instructions.Apply[0].Port != uint32(2*k+2) {
			t.Errorf("pair %d's rule: %+v %v", k, fm, oerr)
		}
	}
}

func ipBytes(a uint32) []byte { return []byte{byte(a >> 24), byte(a >> 16), byte(a >> 8), byte(a)} }

func TestForwardMath(t *testing.T) {
	if lossPct(1000, 999) != 0.1 || lossPct(0, 0) != 0 || lossPct(10, 12) != 0 || lossPct(4, 0) != 100 {
		t.Error("lossPct")
	}
	steps := []Step{
		{Sent: 100, OfferedPPS: 250e3, LossPct: 0},
		{Sent: 100, OfferedPPS: 500e3, LossPct: 0.05},
		{Sent: 100, OfferedPPS: 1e6, LossPct: 0.1}, // at the threshold: lossy
		{Sent: 100, OfferedPPS: 1.2e6, LossPct: 3},
	}
	if got := maxLossless(steps); got != 500e3 {
		t.Errorf("maxLossless %v", got)
	}
	if maxLossless(steps[2:]) != 0 {
		t.Error("maxLossless of lossy steps")
	}
	// A series that lost at one step and not at the next: max_lossless
	// counts the higher step, lossless_to stops below the lossy one. The
	// steps are taken in the order of their asked rates, whatever the
	// order they ran in.
	dip := []Step{
		{Sent: 100, AskedPPS: 5e6, OfferedPPS: 4.9e6, LossPct: 0},
		{Sent: 100, AskedPPS: 4e6, OfferedPPS: 4e6, LossPct: 0.05},
		{Sent: 100, AskedPPS: 4.5e6, OfferedPPS: 4.5e6, LossPct: 1.7},
		{Sent: 100, AskedPPS: 6e6, OfferedPPS: 5.2e6, LossPct: 9},
	}
	if got, want := maxLossless(dip), 4.9e6; got != want {
		t.Errorf("maxLossless of a dip %v, want %v", got, want)
	}
	if got, want := losslessTo(dip), 4e6; got != want {
		t.Errorf("losslessTo of a dip %v, want %v", got, want)
	}
	if losslessTo(dip[2:]) != 0 || losslessTo(nil) != 0 {
		t.Error("losslessTo of steps lossy from the lowest")
	}
	if got := losslessTo(steps); got != 500e3 {
		t.Errorf("losslessTo %v", got)
	}
	lat := []time.Duration{1 * time.Microsecond, 2 * time.Microsecond, 3 * time.Microsecond, 100 * time.Microsecond}
	if durPercentile(lat, 50) != 3 || durPercentile(lat, 100) != 100 || durPercentile(nil, 50) != 0 {
		t.Errorf("percentiles %v %v", durPercentile(lat, 50), durPercentile(lat, 100))
	}
	if framesDue(1_000_000, 1500*time.Microsecond) != 1500 {
		t.Error("framesDue")
	}
}

func TestRoundOrder(t *testing.T) {
	ts := []string{"gswitchd", "ovs", "plain"}
	if got := roundOrder(ts, 1); !slices.Equal(got, ts) {
		t.Errorf("round 1: %v", got)
	}
	if got := roundOrder(ts, 2); !slices.Equal(got, []string{"plain", "ovs", "gswitchd"}) {
		t.Errorf("round 2: %v", got)
	}
	if !slices.Equal(ts, []string{"gswitchd", "ovs", "plain"}) || !slices.Equal(roundOrder(ts, 3), ts) {
		t.Errorf("round 3, or the list was reversed in place: %v", ts)
	}
}

func TestFwdMedians(t *testing.T) {
	st := func(target string, round int, asked int64, fwd, loss, ml float64) Step {
		return Step{Target: target, Rules: 10, Round: round, AskedPPS: asked, Sent: 100, OfferedPPS: float64(asked),
			ForwardedPPS: fwd, LossPct: loss, MaxLosslessPPS: ml, Machine: "m", Time: fmt.Sprint(round)}
	}
	steps := []Step{
		st("gswitchd", 1, 1e6, 1e6, 0, 1e6), st("gswitchd", 1, 0, 1.2e6, 5, 1e6),
		st("plain", 1, 1e6, 1e6, 0.05, 1e6), st("plain", 1, 0, 1.3e6, 2, 1e6),
		st("plain", 2, 1e6, 0.9e6, 10, 0), st("plain", 2, 0, 1.1e6, 4, 0),
		st("gswitchd", 2, 1e6, 0.99e6, 1, 0), st("gswitchd", 2, 0, 1.1e6, 8, 0),
		st("gswitchd", 3, 1e6, 1e6, 0, 1e6), st("gswitchd", 3, 0, 1.3e6, 6, 1e6),
	}
	meds := fwdMedians(steps)
	if len(meds) != 4 {
		t.Fatalf("%d medians, want 4 (2 targets × 2 rates): %+v", len(meds), meds)
	}
	g, p := meds[0], meds[2]
	if g.Target != "gswitchd" || g.AskedPPS != 1e6 || g.Rounds != 3 || g.ForwardedPPS != 1e6 || g.LossPct != 0 || g.LosslessRounds != 2 || g.MaxLosslessPPS != 1e6 || g.Time != "3" {
		t.Errorf("gswitchd at 1M: %+v", g)
	}
	if gm := meds[1]; gm.AskedPPS != 0 || gm.ForwardedPPS != 1.2e6 || gm.LossPct != 6 || gm.LosslessRounds != 0 {
		t.Errorf("gswitchd at max: %+v", gm)
	}
	if p.Target != "plain" || p.Rounds != 2 || p.ForwardedPPS != 0.95e6 || p.LossPct != 5.025 || p.LosslessRounds != 1 || p.MaxLosslessPPS != 0.5e6 {
		t.Errorf("plain at 1M: %+v", p)
	}
}

func TestTestFrame(t *testing.T) {
	dst, _ := net.ParseMAC("02:00:00:00:00:02")
	src, _ := net.ParseMAC("02:00:00:00:00:01")
	f := testFrame(dst, src, 10003)
	stamp(f, 7, 42)
	if len(f) != frameLen || !isTestFrame(f, 7) || isTestFrame(f, 8) || isTestFrame(f[:40], 7) {
		t.Fatal("isTestFrame")
	}
	if ipChecksum(f[14:34]) != 0 {
		t.Error("IPv4 header checksum does not verify")
	}
	if f[34] != 10003>>8 || f[35] != 10003&255 {
		t.Error("source port")
	}
}

// TestParseTargetsRing: gswitchd and plain targets take @block or @frame
// (their --rx-ring), in one run beside the same target with the other
// ring; only gswitchd's take workers.
func TestParseTargetsRing(t *testing.T) {
	got, err := parseTargets("gswitchd-cpu@block,gswitchd-cpu@frame,gswitchd-auto,plain,plain@frame")
	if err != nil || len(got) != 5 || got[1] != "gswitchd-cpu@frame" || got[4] != "plain@frame" {
		t.Fatalf("parseTargets = %v, %v", got, err)
	}
	if b, r := splitRing(got[0]); b != "gswitchd-cpu" || r != "block" {
		t.Errorf("splitRing(%q) = %q, %q", got[0], b, r)
	}
	if !isPlain("plain@frame") || !isPlain("plain") || isPlain("gswitchd@frame") {
		t.Error("isPlain")
	}
	for _, bad := range []string{"plain@frame+w2", "plain@", "plain@ring", "ovs@frame", "gswitchd@v3", "gswitchd-cpu@frame,gswitchd-cpu@frame", "gswitchd-tpu",
		"gswitchd@", "gswitchd@w0", "gswitchd@w", "gswitchd@wx", "gswitchd@w1025", "gswitchd@frame+block", "gswitchd@w2+w3", "plain@w2", "gswitchd@frame+"} {
		if _, err := parseTargets(bad); err == nil {
			t.Errorf("parseTargets(%q) accepted", bad)
		}
	}
}

// TestTargetOpts: a gswitchd target's options, a ring, wN datapath
// workers (--rx-workers), their runs in flight, shared batches and eager
// close, in any order.
func TestTargetOpts(t *testing.T) {
	for _, c := range []struct {
		opts string
		want tgtOpts
	}{{"", tgtOpts{}}, {"frame", tgtOpts{ring: "frame"}}, {"w4", tgtOpts{workers: 4}}, {"frame+w4", tgtOpts{ring: "frame", workers: 4}},
		{"w16+block", tgtOpts{ring: "block", workers: 16}}, {"frame+w8+f4", tgtOpts{ring: "frame", workers: 8, flight: 4}},
		{"f2+w3", tgtOpts{workers: 3, flight: 2}}, {"w8+f2+s2", tgtOpts{workers: 8, flight: 2, shared: 2}},
		{"frame+w8+f1+eager", tgtOpts{ring: "frame", workers: 8, flight: 1, eager: true}}, {"eager+w2", tgtOpts{workers: 2, eager: true}}} {
		if got, err := targetOpts(c.opts); err != nil || got != c.want {
			t.Errorf("targetOpts(%q) = %+v, %v; want %+v", c.opts, got, err, c.want)
		}
	}
	for _, bad := range []string{"f4", "w2+f0", "w2+f65", "w2+fx", "w2+f2+f3", "w2+s2", "w2+f2+s0", "w2+f2+s65", "w2+f2+s1+s2",
		"eager", "frame+eager", "w2+eager+eager", "w2+Eager"} {
		if _, err := targetOpts(bad); err == nil {
			t.Errorf("targetOpts(%q) accepted", bad)
		}
	}
	if got, err := parseTargets("gswitchd-auto@frame,gswitchd-auto@frame+w4,plain"); err != nil || len(got) != 3 {
		t.Errorf("parseTargets with workers = %v, %v", got, err)
	}
}
