package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// autoAgent starts an agent with --backend auto and --min-batch minBatch
// (without ports, the batch a device is priced at) whose Engine has a CPU
// backend standing in for a device, priced at devNs a key (the CPU is
// timed; devNs 0: the agent's own engine, a real device in the cuda
// build, timed too), recalibrating 5 ms after a change; tuple search, so
// that a table's CPU cost grows with its classes.
func autoAgent(t *testing.T, devNs float64, minBatch int) (*Agent, *ctl.Client) {
	t.Helper()
	cfg := testConfig(t.TempDir())
	cfg.Backend, cfg.Classifier, cfg.Tables, cfg.MinBatch = "auto", "tuple", 2, minBatch
	st, err := check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	st.openEngine = func(backend string, ordinals []int, ec gpu.EngineConfig) (*gpu.Engine, error) {
		ec.Auto.Delay = 5 * time.Millisecond
		if devNs <= 0 {
			return gpu.OpenConfig(backend, ordinals, ec)
		}
		ec.Mode, ec.Devices = backend, []gpu.Backend{gpu.NewCPU()}
		ec.Auto.HostNsPerKey, ec.Auto.FixedDeviceNsPerKey = -1, devNs
		return gpu.NewEngine(ec), nil
	}
	a, err := start(st, quietLog(), nil)
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, a)
	waitServing(t, a.CtlSocket())
	c := ctl.NewClient(a.CtlSocket())
	t.Cleanup(func() { c.Close() })
	return a, c
}

// classRule is a rule of class k: ipv4_src/8+k/16 and ipv4_dst/8+k%16
// (256 classes for k < 256), each rule of a class its own addresses (i).
func classRule(k, i int) *rule.FlowMod {
	var m flow.Match
	m.SetEthType(flow.EthTypeIPv4)
	sl, dl := 8+k/16, 8+k%16
	_ = m.SetIPv4Src(uint32(i+1)<<(32-sl), sl)
	_ = m.SetIPv4Dst(uint32(k+1)<<(32-dl), dl)
	return &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: m, BufferID: rule.NoBuffer,
		OutPort: rule.PortAny, OutGroup: rule.GroupAny}
}

// table0 returns flow table 0's engine table as /v1/backend gives it.
func table0(t *testing.T, c *ctl.Client) gpu.TableBackend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := c.Backend(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range b.Tables {
		if tb.Table == 0 {
			return tb
		}
	}
	t.Fatalf("no engine table 0 in %+v", b.Tables)
	return gpu.TableBackend{}
}

// recalibrated waits for a calibration after 'after' and returns the
// table then.
func recalibrated(t *testing.T, c *ctl.Client, after uint64) gpu.TableBackend {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if tb := table0(t, c); tb.Calibrations > after {
			return tb
		}
		if time.Now().After(deadline) {
			t.Fatalf("no calibration after #%d in 20 s: %+v", after, table0(t, c))
		}
	}
}

// TestAutoPlacementFollowsTable: with --backend auto, a flow table grown
// class by class moves from the CPU to the device once the calibration
// finds its CPU lookups dearer than the device's price, its path from
// direct to the shared device batches, and deleting the classes again
// brings it back; the control socket (show tables' BACKEND, PATH and WHY
// columns) says so at each step, with the classes counted.
func TestAutoPlacementFollowsTable(t *testing.T) {
	const devNs = 1000 // a tuple lookup costs some 7-40 ns a class (7 on the 2-core VM in 2026-11: 1,800-3,500 ns at 130-256 classes, at the margin of a 1,500 ns device): 25 to 180 classes
	a, c := autoAgent(t, devNs, 64)
	if tb := growAndShrink(t, a, c); tb.DeviceNsPerKey != devNs {
		t.Fatalf("the device priced at %v ns a key, not %v: %+v", tb.DeviceNsPerKey, float64(devNs), tb)
	}
}

// growAndShrink adds classes to flow table 0, 8 at a time, each time
// waiting for the calibration, until the table moves to the device (at
// most 256), checks the control socket's answer there, deletes the
// classes but one and waits for the table to come back to the CPU. It
// returns the table as it was on the device.
func growAndShrink(t *testing.T, a *Agent, c *ctl.Client) gpu.TableBackend {
	t.Helper()
	sw := a.Switch()
	if err := sw.FlowMod(classRule(0, 0)); err != nil {
		t.Fatal(err)
	}
	tb := recalibrated(t, c, 0)
	for tb.Classes != 1 {
		tb = recalibrated(t, c, tb.Calibrations)
	}
	if tb.Backend != "cpu" || tb.Path != "direct" || tb.Owner != flowTablesOwner || !strings.Contains(tb.Reason, "the CPU is cheaper") {
		t.Fatalf("one class: %+v", tb)
	}
	t.Logf("1 class: %s, %s", tb.Backend, tb.Reason)
	classes := 1
	for tb.Backend != "device" {
		if classes >= 256 {
			t.Fatalf("256 classes and still on the CPU: %+v", tb)
		}
		for k := classes; k < classes+8; k++ {
			if err := sw.FlowMod(classRule(k, 0)); err != nil {
				t.Fatal(err)
			}
		}
		classes += 8
		tb = recalibrated(t, c, tb.Calibrations)
		for tb.Classes != classes {
			tb = recalibrated(t, c, tb.Calibrations)
		}
	}
	t.Logf("%d classes: %s, %s", classes, tb.Backend, tb.Reason)
	if tb.Path != "shared" || !onDeviceByRule(tb) {
		t.Fatalf("moved to the device: %+v", tb)
	}
	onDev := tb
	// Shrink it back to one class.
	for k := 1; k < classes; k++ {
		del := classRule(k, 0)
		del.Command = rule.FlowDeleteStrict
		if err := sw.FlowMod(del); err != nil {
			t.Fatal(err)
		}
	}
	for tb.Classes != 1 {
		tb = recalibrated(t, c, tb.Calibrations)
	}
	if tb.Backend != "cpu" || tb.Path != "direct" {
		t.Fatalf("shrunk to one class: %+v", tb)
	}
	t.Logf("1 class again: %s, %s", tb.Backend, tb.Reason)
	return onDev
}

// onDeviceByRule reports whether a table on the device is there by
// gpu.Choose's rule at its last calibration: just moved (the device
// cheaper by more than the margin) or staying (the CPU not cheaper by
// more than the margin). The calibration the test reads may be a later
// one than the one that moved the table, with the CPU's cost measured
// lower (a busy machine times the CPU's lookups high now and then).
func onDeviceByRule(tb gpu.TableBackend) bool {
	switch {
	case tb.Backend != "device":
		return false
	case strings.HasSuffix(tb.Reason, ": the device is cheaper"):
		return tb.CPUNsPerKey > tb.DeviceNsPerKey*gpu.SwitchMargin
	case strings.HasSuffix(tb.Reason, ": the device is cheaper or within the margin"):
		return tb.CPUNsPerKey*gpu.SwitchMargin >= tb.DeviceNsPerKey
	}
	return false
}

// TestAutoPlacementLPMShaped: an LPM-shaped flow table's LPM image is
// calibrated too (addresses walked down its trie, priced at --batch-size),
// and /v1/backend marks it with the flow table's number, as show tables
// needs to give the table its images' backend.
func TestAutoPlacementLPMShaped(t *testing.T) {
	a, c := autoAgent(t, 1500, 64)
	for k := range 200 {
		var m flow.Match
		m.SetEthType(flow.EthTypeIPv4)
		if err := m.SetIPv4Dst(0x0a000000|uint32(k)<<8, 24); err != nil {
			t.Fatal(err)
		}
		if err := a.Switch().FlowMod(&rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: 24, Match: m,
			BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ; ; time.Sleep(5 * time.Millisecond) {
		b, err := c.Backend(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tb := range b.Tables {
			if tb.Owner != lpmShapeIDsOwner || tb.Calibrations == 0 || tb.Classes == 0 {
				continue
			}
			if tb.OwnerTable != 1 || tb.Kind != "lpm4" || tb.Backend != "cpu" || tb.Path != "direct" || tb.Batch != 256 ||
				!strings.Contains(tb.Reason, "the CPU is cheaper") {
				t.Fatalf("the LPM image of table 1: %+v", tb)
			}
			t.Logf("%+v", tb)
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("no calibrated LPM image of table 1 in 20 s: %+v", b.Tables)
		}
	}
}

// TestResidentLookupsReachEngine: --resident-lookups and --resident-idle
// reach the engine's opening (gpu.EngineConfig.Resident), and without
// them the devices take the environment's settings (the zero value).
func TestResidentLookupsReachEngine(t *testing.T) {
	for _, c := range []struct {
		slots int
		want  gpu.ResidentConfig
	}{{0, gpu.ResidentConfig{}}, {16, gpu.ResidentConfig{Slots: 16, Idle: 5 * time.Millisecond}}} {
		cfg := testConfig(t.TempDir())
		cfg.Resident, cfg.ResidentIdle = c.slots, 5*time.Millisecond
		st, err := check(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var got gpu.ResidentConfig
		st.openEngine = func(backend string, ordinals []int, ec gpu.EngineConfig) (*gpu.Engine, error) {
			got = ec.Resident
			return gpu.OpenConfig("cpu", nil, ec)
		}
		a, err := start(st, quietLog(), nil)
		if err != nil {
			t.Fatal(err)
		}
		a.close()
		if got != c.want {
			t.Errorf("resident lookups %d: the engine was opened with %+v, want %+v", c.slots, got, c.want)
		}
	}
}
