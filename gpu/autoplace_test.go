package gpu

import (
	"bytes"
	"cmp"
	"log/slog"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/flow"
)

// addExact adds n rules of one class to tab, as bench forward's trivial
// set has them: ip, ipv4_dst=ADDR/32, addresses from..from+n-1.
func addExact(t *testing.T, tab *flow.Table, from, n int) {
	t.Helper()
	for k := from; k < from+n; k++ {
		var m flow.Match
		m.SetEthType(0x0800)
		if err := m.SetIPv4Dst(0xac100000+uint32(k), 32); err != nil {
			t.Fatal(err)
		}
		if _, _, err := tab.Add(flow.Rule{Match: m, Priority: 10}, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEngineAutoLoadedCalibration reproduces the trivial table's wrong
// placement on the H200 machine (2026-11-25) on the CPU: a one-class table
// of 10,000 exact rules, a device that costs 10 ns a key plus the default
// 300 ns of host cost (more where this machine's quiet CPU lookup is above
// a quarter of that: the race detector), and a calibration whose thread loses its core for a
// moment inside every timed lookup (calibStall: what the forwarding
// datapath and the kernel's network work did to gswitchd's calibrator,
// which ran 200 ms after the last FLOW_MOD, when bench forward's traffic
// had started). Timed on the wall clock, as the calibration did, the CPU
// looks dearer than the device and the table goes to the device; timed in
// the thread's CPU time, as it does now, the table stays on the CPU, and
// the calibration's log line gives the costs.
func TestEngineAutoLoadedCalibration(t *testing.T) {
	tab, err := flow.NewTable(flow.Config{Algo: flow.Merge, Seed: 1, MaxEntries: 16384})
	if err != nil {
		t.Fatal(err)
	}
	addExact(t, tab, 0, 10000)
	cpu := NewCPU()
	defer cpu.Close()
	if err := cpu.Load(1, Flow, tab.Mirror().Image().Clone()); err != nil {
		t.Fatal(err)
	}
	_, pw, soa, n, err := cpu.flowSample(1, calibKeys)
	if err != nil {
		t.Fatal(err)
	}
	keys, out := tile(soa, pw, n, calibKeys), make([]flow.RuleID, calibKeys)
	quietNs, err := timeCPULookup(calibKeys, func() error { return cpu.LookupFlow(1, keys, calibKeys, out) })
	if err != nil {
		t.Fatal(err)
	}
	devNs := max(10, 4*quietNs-DefaultHostNsPerKey)
	stallFor := max(time.Millisecond, time.Duration(10*quietNs*calibKeys))
	stall := func() { time.Sleep(stallFor) }

	// The old measurement: the wall clock, the stall counted.
	wallNs, err := timeLookup(calibKeys, wallClock, func() error {
		stall()
		return cpu.LookupFlow(1, keys, calibKeys, out)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, why := Choose(OnCPU, Costs{CPUNsPerKey: wallNs, DeviceNsPerKey: devNs + DefaultHostNsPerKey, Batch: 4096}, 64); got != OnDevice {
		t.Fatalf("the wall-clock calibration chose %v (%s): the reproduction does not reproduce", got, why)
	}

	// The Engine's calibration under the same stall.
	var logs bytes.Buffer
	e := NewEngine(EngineConfig{Devices: []Backend{NewCPU()}, MinBatch: 64, Mode: ModeAuto,
		Auto:   AutoConfig{Delay: time.Millisecond, Batch: 4096},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		measureDev: func(Backend, TableID, *calibSample) (float64, error) {
			return devNs, nil
		},
		calibStall: stall})
	if err := e.Load(1, Flow, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	waitCalibrated(t, e, 1)
	tb := backendOf(t, e, 1)
	e.Close()
	t.Logf("quiet: %.1f ns/key; stalled %v a run: wall clock %.1f ns/key, thread CPU time %+v", quietNs, stallFor, wallNs, tb)
	if tb.Backend != "cpu" || tb.CPUNsPerKey >= devNs+DefaultHostNsPerKey || tb.Classes != 1 {
		t.Fatalf("calibrated under load: %+v; want the CPU, timed below the device's %v ns", tb, devNs+DefaultHostNsPerKey)
	}
	for _, want := range []string{`msg="gpu: table calibrated" table=1 kind=flow backend=cpu was=cpu classes=1 cpu_ns_per_key=`,
		"device_measured_ns_per_key=", "host_ns_per_key=300 batch=4096 calibration=1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestEngineAutoWaitsForQuiet: a table whose class count changed is
// calibrated once its updates stop, not halfway through them: updates that
// do not change the class count still put the calibration off (within
// maxCalibrationWait).
func TestEngineAutoWaitsForQuiet(t *testing.T) {
	// A loaded machine can hold the test off its core for longer than the
	// delay between two updates, and the calibration then rightly runs:
	// such a try is done again, three at most.
	for try := 1; ; try++ {
		gap, ok := autoWaitsForQuiet(t)
		if ok {
			return
		}
		if try == 3 {
			t.Fatalf("the test was held up longer than the quiet delay in all three tries (the last for %v)", gap)
		}
		t.Logf("try %d: %v between two updates, longer than the quiet delay: trying again", try, gap)
	}
}

// autoWaitsForQuiet runs TestEngineAutoWaitsForQuiet once; it reports
// false with the gap between two updates if one was longer than the
// delay (the calibration it checks for may then run).
func autoWaitsForQuiet(t *testing.T) (time.Duration, bool) {
	const delay = 60 * time.Millisecond
	tab, err := flow.NewTable(flow.Config{Algo: flow.Tuple, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	e := NewEngine(EngineConfig{Devices: []Backend{NewCPU()}, MinBatch: 64, Mode: ModeAuto,
		Auto: AutoConfig{Delay: delay},
		measureDev: func(Backend, TableID, *calibSample) (float64, error) {
			return 1e6, nil
		}})
	defer e.Close()
	if err := e.Load(1, Flow, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	waitCalibrated(t, e, 1) // the empty table
	addExact(t, tab, 0, 1)  // a class: the table waits for a calibration
	syncTable(t, e, 1, tab)
	start := time.Now()
	last := start // the last update's end
	for k := 1; time.Since(start) < 400*time.Millisecond; k++ {
		addExact(t, tab, k, 1) // the same class
		gap := time.Since(last)
		syncTable(t, e, 1, tab)
		last = time.Now()
		if c := backendOf(t, e, 1).Calibrations; c != 1 {
			if gap >= delay {
				return gap, false
			}
			t.Fatalf("calibrated %d times while updates kept coming every 10 ms (%v in)", c, time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopped := time.Now()
	for backendOf(t, e, 1).Calibrations < 2 {
		if time.Since(stopped) > 10*time.Second {
			t.Fatal("no calibration after the updates stopped")
		}
		time.Sleep(2 * time.Millisecond)
	}
	if tb := backendOf(t, e, 1); tb.Classes != 1 {
		t.Errorf("after the updates: %+v", tb)
	}
	return 0, true
}

// TestEngineAutoSmallBatchFloor: a flow table placed on the devices gets
// batches below MinBatch on a device too, from the size whose CPU lookup
// takes as long as the device's small lookup (AutoConfig.SmallBatch keys,
// timed by the calibration); a table on the CPU keeps MinBatch; and
// SmallBatch < 0 keeps the MinBatch floor.
func TestEngineAutoSmallBatchFloor(t *testing.T) {
	tab, keys := costlyTable(t)
	for _, small := range []int{0, -1} {
		var sizes []int
		e := floorEngine(small, &sizes)
		if err := e.Load(1, Flow, tab.Mirror().Image().Clone()); err != nil {
			t.Fatal(err)
		}
		waitCalibrated(t, e, 1)
		tb := backendOf(t, e, 1)
		if tb.Backend != "device" {
			e.Close()
			t.Fatalf("SmallBatch %d: %+v; want the device", small, tb)
		}
		want := 0
		if small == 0 {
			want = int(min(max(math.Ceil(floorSmallNs/tb.CPUNsPerKey), DefaultSmallBatch), floorMinBatch))
		}
		if tb.DeviceFrom != want {
			t.Errorf("SmallBatch %d: DeviceFrom %d, want %d (CPU %.1f ns a key; device lookups timed at %v keys)", small, tb.DeviceFrom, want, tb.CPUNsPerKey, sizes)
		}
		if got := e.DeviceMinBatch(1); got != cmp.Or(want, floorMinBatch) {
			t.Errorf("SmallBatch %d: DeviceMinBatch %d, want %d", small, got, cmp.Or(want, floorMinBatch))
		}
		floor := cmp.Or(want, floorMinBatch)
		out := make([]flow.RuleID, len(keys))
		for _, n := range []int{floor - 1, floor} {
			before := e.Stats()
			part := flow.PackSoA(keys[:n], tab.UsedWords(), nil)
			if err := e.LookupFlow(1, part, n, out); err != nil {
				t.Fatal(err)
			}
			after := e.Stats()
			onDev := after.KeysOnDevice - before.KeysOnDevice
			if wantDev := n >= floor; (onDev == uint64(n)) != wantDev || after.KeysOnCPU-before.KeysOnCPU != uint64(n)-onDev {
				t.Errorf("SmallBatch %d: a lookup of %d keys (floor %d): %d on the device, %d on the CPU", small, n, floor, onDev, after.KeysOnCPU-before.KeysOnCPU)
			}
		}
		e.Close()
		t.Logf("SmallBatch %d: CPU %.1f ns a key, device from %d keys", small, tb.CPUNsPerKey, tb.DeviceFrom)
	}
}

// TestEngineAutoTrafficFloor: the floor of a GPU-placed table follows the
// CPU's cost per key on the lookups below it: after trafficWindow timed
// lookups (one in trafficEvery) it is the device's small lookup over
// their median cost, from 1 to MinBatch; a window of lookups costlier
// than the calibration's lowers it, a cheaper one raises it; a table on
// the CPU is never timed.
func TestEngineAutoTrafficFloor(t *testing.T) {
	tab, keys := costlyTable(t)
	var sizes []int
	e := floorEngine(0, &sizes)
	defer e.Close()
	if e.auto.cfg.TrafficFloor && os.Getenv("GSWITCH_TRAFFIC_FLOOR") != "on" {
		t.Fatal("TrafficFloor on by default")
	}
	e.auto.cfg.TrafficFloor = true // before the first lookup: read by them without a lock
	if err := e.Load(1, Flow, tab.Mirror().Image().Clone()); err != nil {
		t.Fatal(err)
	}
	waitCalibrated(t, e, 1)
	tb := backendOf(t, e, 1)
	p := (*e.auto.tabs.Load())[1]
	if tb.Backend != "device" || p.smallNs.Load() != int64(floorSmallNs) || tb.DeviceFrom < DefaultSmallBatch {
		t.Fatalf("after the calibration: %+v, small lookup %d ns", tb, p.smallNs.Load())
	}
	// The logic, with costs given: lookups of 2 keys at 5 µs a key (the
	// floor becomes 20 µs / 5 µs = 4), then at 40 ns a key (500, within
	// MinBatch), then at 1 ms a key (1: every lookup to the device).
	for _, c := range []struct {
		nsPerKey float64
		want     int
	}{{5000, 4}, {40, 500}, {1e6, 1}} {
		for range trafficWindow {
			e.observeSmall(p, 2, time.Duration(2*c.nsPerKey))
		}
		if got := backendOf(t, e, 1); got.DeviceFrom != c.want || got.TrafficCPUNsPerKey != c.nsPerKey || e.DeviceMinBatch(1) != c.want {
			t.Errorf("lookups at %v ns a key: DeviceFrom %d, traffic %v ns a key, DeviceMinBatch %d; want %d", c.nsPerKey, got.DeviceFrom, got.TrafficCPUNsPerKey, e.DeviceMinBatch(1), c.want)
		}
	}
	// The lookups themselves: with the floor at 500, lookups of 3 keys on
	// the CPU, one in trafficEvery timed; a window of them moves the floor
	// to the small lookup over what they cost.
	for range trafficWindow {
		e.observeSmall(p, 2, 80) // 40 ns a key: the floor back at 500
	}
	out := make([]flow.RuleID, 3)
	part := flow.PackSoA(keys[:3], tab.UsedWords(), nil)
	for range trafficEvery * trafficWindow {
		if err := e.LookupFlow(1, part, 3, out); err != nil {
			t.Fatal(err)
		}
	}
	got := backendOf(t, e, 1)
	if got.TrafficCPUNsPerKey <= 0 || got.TrafficCPUNsPerKey == 40 {
		t.Fatalf("no window of real lookups was timed: %+v", got)
	}
	if want := int(min(max(math.Ceil(floorSmallNs/got.TrafficCPUNsPerKey), 1), floorMinBatch)); got.DeviceFrom != want {
		t.Errorf("after real lookups at %.0f ns a key: DeviceFrom %d, want %d", got.TrafficCPUNsPerKey, got.DeviceFrom, want)
	}
	// A table on the CPU is not timed.
	if q := e.smallOnCPU(2, 1); q != nil {
		t.Errorf("an unknown table timed: %+v", q)
	}
	p.place.Store(uint32(OnCPU))
	for range 2 * trafficEvery {
		if e.smallOnCPU(1, 1) != nil {
			t.Fatal("a table on the CPU timed")
		}
	}
}

// The device of floorEngine: 20 µs for a small lookup, 1 ns a key at scale
// (the CPU: a few hundred); MinBatch 2048.
const floorMinBatch, floorSmallNs = 2048, 20000.0

// costlyTable is a merged table of 4,000 rules in 200 classes (a few
// hundred ns a key on the CPU) and traffic for it.
func costlyTable(t *testing.T) (*flow.Table, []flow.Key) {
	t.Helper()
	sp, err := flow.ParseSynthetic("4000,200")
	if err != nil {
		t.Fatal(err)
	}
	tab, err := flow.NewTable(flow.Config{Algo: flow.Merge, Seed: 1, MaxEntries: 1 << 14})
	if err != nil {
		t.Fatal(err)
	}
	rules := sp.Generate(1)
	for _, r := range rules {
		if _, _, err := tab.Add(r, 0); err != nil {
			t.Fatal(err)
		}
	}
	return tab, flow.SynthTraffic(sp, rules, 4096, 2)
}

// floorEngine is an auto Engine over a simulated device (a CPU backend
// priced by floorSmallNs and 1 ns a key) with AutoConfig.SmallBatch
// small; the batch sizes the calibration timed go to *sizes.
func floorEngine(small int, sizes *[]int) *Engine {
	return NewEngine(EngineConfig{Devices: []Backend{NewCPU()}, MinBatch: floorMinBatch, Mode: ModeAuto,
		Auto: AutoConfig{Delay: time.Millisecond, SmallBatch: small, HostNsPerKey: -1}, // no host cost: the device always wins at scale
		measureDev: func(_ Backend, _ TableID, s *calibSample) (float64, error) {
			*sizes = append(*sizes, s.n)
			if s.n < floorMinBatch {
				return floorSmallNs / float64(s.n), nil
			}
			return 1, nil
		}})
}

// TestCoalescerDeviceFloor: over an Engine, a pending batch of a table
// with a calibrated floor closes as a device-sized batch once it holds the
// floor's keys (the device idle), without waiting for the other active
// callers or its delay; below the floor it waits.
func TestCoalescerDeviceFloor(t *testing.T) {
	tab, keys := costlyTable(t)
	var sizes []int
	e := floorEngine(0, &sizes)
	defer e.Close()
	if err := e.Load(1, Flow, tab.Mirror().Image().Clone()); err != nil {
		t.Fatal(err)
	}
	waitCalibrated(t, e, 1)
	floor := e.DeviceMinBatch(1)
	if floor >= floorMinBatch {
		t.Fatalf("no floor below MinBatch: %+v", backendOf(t, e, 1))
	}
	c, err := NewCoalescer(e, CoalescerConfig{MinBatch: floorMinBatch, MaxDelay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.Enter() // another caller, active and not looking anything up
	defer c.Leave()
	c.Enter()
	defer c.Leave()
	out := make([]flow.RuleID, floor)
	for _, n := range []int{floor, floor - 1} {
		soa := flow.PackSoA(keys[:n], tab.UsedWords(), nil)
		t0 := time.Now()
		if err := c.LookupFlow(1, soa, n, out); err != nil {
			t.Fatal(err)
		}
		took := time.Since(t0)
		if wantWait := n < floor; (took >= 250*time.Millisecond) != wantWait {
			t.Errorf("a batch of %d keys (floor %d) took %v; waited out the delay: want %v", n, floor, took, wantWait)
		}
	}
	if s := c.Stats(); s.ByIdle != 1 || s.ByDelay != 1 {
		t.Errorf("closes: %+v; want one by idle (the floor's), one by delay", s)
	}
}
