package gpu

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/flow"
)

func TestChoose(t *testing.T) {
	for _, c := range []struct {
		name string
		cur  Placement
		c    Costs
		min  int
		want Placement
		why  string
	}{
		{"device far cheaper", OnCPU, Costs{800, 10, 2048}, 2048, OnDevice, "the device is cheaper"},
		{"cpu far cheaper", OnCPU, Costs{20, 10 * 20, 2048}, 2048, OnCPU, "the CPU is cheaper"},
		{"back to the cpu", OnDevice, Costs{20, 200, 2048}, 2048, OnCPU, "the CPU is cheaper"},
		{"stays on the device", OnDevice, Costs{800, 10, 2048}, 2048, OnDevice, "the device is cheaper"},
		// Within SwitchMargin neither moves.
		{"within margin from cpu", OnCPU, Costs{100, 90, 2048}, 2048, OnCPU, "within the margin"},
		{"within margin from device", OnDevice, Costs{90, 100, 2048}, 2048, OnDevice, "within the margin"},
		{"just past the margin", OnCPU, Costs{126, 100, 2048}, 2048, OnDevice, "the device is cheaper"},
		{"just short of the margin", OnCPU, Costs{124, 100, 2048}, 2048, OnCPU, "within the margin"},
		{"just past the margin back", OnDevice, Costs{100, 126, 2048}, 2048, OnCPU, "the CPU is cheaper"},
		// A batch the device never gets, or costs not measured: the CPU.
		{"batch below min-batch", OnDevice, Costs{800, 10, 1024}, 2048, OnCPU, "below --min-batch"},
		{"no batch", OnCPU, Costs{800, 10, 0}, 0, OnCPU, "below --min-batch"},
		{"device not measured", OnDevice, Costs{800, 0, 2048}, 2048, OnCPU, "not measured"},
		{"device NaN", OnDevice, Costs{800, math.NaN(), 2048}, 2048, OnCPU, "not measured"},
		{"cpu Inf", OnCPU, Costs{math.Inf(1), 10, 2048}, 2048, OnCPU, "not measured"},
	} {
		got, why := Choose(c.cur, c.c, c.min)
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: Choose(%v, %+v, %d) = %v, %q; want %v, %q", c.name, c.cur, c.c, c.min, got, why, c.want, c.why)
		}
	}
	if _, why := Choose(OnCPU, Costs{812.4, 9.13, 2048}, 2048); !strings.Contains(why, "cpu 812 ns vs device 9.13 ns per key at 2048-key batches") {
		t.Errorf("reason %q does not give the costs", why)
	}
}

// addClasses adds rules from..from+n-1 to tab, each with a mask of its own (ipv4_src
// and ipv4_dst prefix lengths), all at one priority, so that a lookup
// visits every class; it returns their ids.
func addClasses(t *testing.T, tab *flow.Table, from, n int) []flow.RuleID {
	t.Helper()
	var ids []flow.RuleID
	for k := from; k < from+n; k++ {
		var m flow.Match
		m.SetEthType(0x0800)
		ls, ld := 1+k%32, 1+k/32
		mask := func(l int) uint32 { return ^uint32(0) << (32 - l) }
		if err := m.SetIPv4Src((0x0a000000|uint32(k)*2654435761)&mask(ls), ls); err != nil {
			t.Fatal(err)
		}
		if err := m.SetIPv4Dst(0xc0a80000&mask(ld), ld); err != nil {
			t.Fatal(err)
		}
		id, _, err := tab.Add(flow.Rule{Match: m, Priority: 10}, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// sync applies tab's pending changes to table id of e.
func syncTable(t *testing.T, e *Engine, id TableID, tab *flow.Table) {
	t.Helper()
	if err := e.Apply(id, tab.Mirror().Sync()); err != nil {
		t.Fatal(err)
	}
}

func backendOf(t *testing.T, e *Engine, id TableID) TableBackend {
	t.Helper()
	for _, tb := range e.TableBackends() {
		if tb.Table == id {
			return tb
		}
	}
	t.Fatalf("table %d not in TableBackends %+v", id, e.TableBackends())
	return TableBackend{}
}

// waitCalibrated waits for table id's first calibration.
func waitCalibrated(t *testing.T, e *Engine, id TableID) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); backendOf(t, e, id).Calibrations == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("table %d: no calibration in 20 s: %+v", id, backendOf(t, e, id))
		}
	}
}

// waitBackend waits until table id is served by want.
func waitBackend(t *testing.T, e *Engine, id TableID, want string) TableBackend {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		tb := backendOf(t, e, id)
		if tb.Backend == want {
			return tb
		}
		if time.Now().After(deadline) {
			t.Fatalf("table %d: still %s after 20 s, want %s: %+v", id, tb.Backend, want, tb)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestEngineAutoPlacement: with a device (a CPU backend standing in for
// one, whose cost per key the test sets), a trivial flow table stays on
// the CPU and a many-class one moves to the device; rules added to the
// trivial one move it, and deleting them moves it back. The CPU's costs
// are measured, so the device's is set between the two tables' measured
// costs (far from both: their ratio is near the ratio of their classes).
func TestEngineAutoPlacement(t *testing.T) {
	var devNs atomic.Uint64 // math.Float64bits
	devNs.Store(math.Float64bits(1e9))
	var logs bytes.Buffer
	e := NewEngine(EngineConfig{Devices: []Backend{NewCPU()}, MinBatch: 256, Mode: ModeAuto,
		Auto:   AutoConfig{Delay: 5 * time.Millisecond, HostNsPerKey: -1}, // the device's cost is exactly the one set
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		measureDev: func(b Backend, id TableID, s *calibSample) (float64, error) {
			if err := s.lookup(b, id); err != nil { // the device holds the table
				return 0, err
			}
			return math.Float64frombits(devNs.Load()), nil
		}})
	defer e.Close()

	small, err := flow.NewTable(flow.Config{Algo: flow.Tuple, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	big, err := flow.NewTable(flow.Config{Algo: flow.Tuple, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	addClasses(t, small, 0, 1)
	addClasses(t, big, 0, 400)
	for id, tab := range map[TableID]*flow.Table{1: small, 2: big} {
		if err := e.Load(id, Flow, tab.Mirror().Sync().Full); err != nil {
			t.Fatal(err)
		}
	}
	// Both calibrated against a device dearer than anything: on the CPU.
	for id := TableID(1); id <= 2; id++ {
		waitCalibrated(t, e, id)
	}
	ts, tb := backendOf(t, e, 1), backendOf(t, e, 2)
	if ts.Backend != "cpu" || tb.Backend != "cpu" || ts.Classes != 1 || tb.Classes != 400 {
		t.Fatalf("before: %+v, %+v; want both on the CPU, with 1 and 400 classes", ts, tb)
	}
	if tb.CPUNsPerKey < 8*ts.CPUNsPerKey {
		t.Fatalf("400 classes cost %.1f ns/key, 1 class %.1f: want a ratio of at least 8", tb.CPUNsPerKey, ts.CPUNsPerKey)
	}
	mid := math.Sqrt(ts.CPUNsPerKey * tb.CPUNsPerKey)
	devNs.Store(math.Float64bits(mid))
	t.Logf("cpu: %.1f ns/key (1 class), %.1f ns/key (400 classes); device set to %.1f ns/key", ts.CPUNsPerKey, tb.CPUNsPerKey, mid)

	// A change of class count recalibrates: the big table moves.
	addClasses(t, big, 400, 1)
	syncTable(t, e, 2, big)
	got := waitBackend(t, e, 2, "device")
	if got.Classes != 401 || !strings.Contains(got.Reason, "the device is cheaper") || got.DeviceNsPerKey != mid || got.Batch != 256 {
		t.Errorf("big table: %+v", got)
	}
	if backendOf(t, e, 1).Backend != "cpu" {
		t.Errorf("small table moved: %+v", backendOf(t, e, 1))
	}
	// Lookups follow the placement.
	before := e.Stats()
	out := make([]flow.RuleID, 1024)
	for id, tab := range map[TableID]*flow.Table{1: small, 2: big} {
		soa := make([]uint32, len(tab.UsedWords())*1024)
		if err := e.LookupFlow(id, soa, 1024, out); err != nil {
			t.Fatal(err)
		}
	}
	after := e.Stats()
	if after.KeysOnCPU-before.KeysOnCPU != 1024 || after.KeysOnDevice-before.KeysOnDevice != 1024 {
		t.Errorf("keys on cpu +%d, on device +%d; want 1024 each", after.KeysOnCPU-before.KeysOnCPU, after.KeysOnDevice-before.KeysOnDevice)
	}

	// Rules added to the small table move it; deleted, it comes back.
	ids := addClasses(t, small, 1, 400)
	syncTable(t, e, 1, small)
	waitBackend(t, e, 1, "device")
	for _, id := range ids {
		if _, ok := small.DeleteID(id); !ok {
			t.Fatalf("delete %d", id)
		}
	}
	syncTable(t, e, 1, small)
	got = waitBackend(t, e, 1, "cpu")
	if got.Classes != 1 || !strings.Contains(got.Reason, "the CPU is cheaper") {
		t.Errorf("small table after the deletes: %+v", got)
	}
	var m bytes.Buffer
	if err := e.WriteMetrics(&m); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`gswitch_table_backend{backend="cpu",table="1"} 1`, `gswitch_table_backend{backend="device",table="2"} 1`,
		`gswitch_table_backend{backend="device",table="1"} 0`, `gswitch_table_lookup_cost_seconds{backend="cpu",table="2"}`} {
		if !strings.Contains(m.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, m.String())
		}
	}
	e.Close() // the calibrator has stopped writing the log
	if !strings.Contains(logs.String(), "table placed") {
		t.Errorf("no log line of the moves:\n%s", logs.String())
	}
}

// TestEngineAutoHostCost: the host's cost per key of a device lookup
// (AutoConfig.HostNsPerKey) is added to the device's measured cost, so a
// large one keeps a one-class table on the CPU however cheap the device's
// own time per key is; without it the table moves; 0 is the default.
func TestEngineAutoHostCost(t *testing.T) {
	for _, tc := range []struct {
		host  float64
		want  string  // "" for either
		devNs float64 // the cost Choose saw
	}{{1e6, "cpu", 1e6 + 0.001}, {-1, "device", 0.001}, {0, "", DefaultHostNsPerKey + 0.001}} {
		e := NewEngine(EngineConfig{Devices: []Backend{NewCPU()}, MinBatch: 64, Mode: ModeAuto,
			Auto: AutoConfig{Delay: time.Millisecond, HostNsPerKey: tc.host},
			measureDev: func(Backend, TableID, *calibSample) (float64, error) {
				return 0.001, nil // far below any CPU lookup
			}})
		tab, err := flow.NewTable(flow.Config{Algo: flow.Tuple, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		addClasses(t, tab, 0, 1)
		if err := e.Load(1, Flow, tab.Mirror().Sync().Full); err != nil {
			t.Fatal(err)
		}
		waitCalibrated(t, e, 1)
		got := backendOf(t, e, 1)
		e.Close()
		if (tc.want != "" && got.Backend != tc.want) || got.DeviceNsPerKey != tc.devNs {
			t.Errorf("HostNsPerKey %v: %+v; want backend %q, device %v ns/key", tc.host, got, tc.want, tc.devNs)
		}
	}
}

// TestEngineAutoModes: what TableBackends says without a device, with
// --backend cpu and gpu, and for a table no device holds.
func TestEngineAutoModes(t *testing.T) {
	tab, err := flow.NewTable(flow.Config{Algo: flow.Tuple, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	addClasses(t, tab, 0, 3)
	for _, c := range []struct {
		cfg     EngineConfig
		backend string
		reason  string
	}{
		{EngineConfig{Mode: ModeAuto}, "cpu", "no usable GPU"},
		{EngineConfig{Mode: ModeCPU}, "cpu", "--backend cpu"},
		{EngineConfig{Mode: ModeGPU, Devices: []Backend{NewCPU()}}, "device", "--backend gpu"},
		{EngineConfig{Devices: []Backend{NewCPU()}}, "device", "--backend gpu"},
		{EngineConfig{Mode: ModeAuto, Devices: []Backend{newFlaky(0)}, Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))}, "cpu", "the device failed"},
	} {
		e := NewEngine(c.cfg)
		if err := e.Load(7, Flow, tab.Mirror().Image().Clone()); err != nil {
			t.Fatal(err)
		}
		tb := backendOf(t, e, 7)
		if tb.Backend != c.backend || !strings.Contains(tb.Reason, c.reason) || tb.Kind != "flow" {
			t.Errorf("mode %q: %+v, want %s (%s)", c.cfg.Mode, tb, c.backend, c.reason)
		}
		if s := e.Stats(); len(s.Tables) != 1 || s.Tables[0] != tb {
			t.Errorf("mode %q: Stats().Tables %+v", c.cfg.Mode, s.Tables)
		}
		e.Close()
	}
}

// TestEngineAutoDeviceError: a device that cannot look the table up
// during a calibration leaves the table on the CPU, saying why.
func TestEngineAutoDeviceError(t *testing.T) {
	tab, err := flow.NewTable(flow.Config{Algo: flow.Tuple, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	addClasses(t, tab, 0, 50)
	e := NewEngine(EngineConfig{Devices: []Backend{NewCPU()}, MinBatch: 64, Mode: ModeAuto, Auto: AutoConfig{Delay: time.Millisecond},
		Logger: slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)),
		measureDev: func(Backend, TableID, *calibSample) (float64, error) {
			return 0, errors.Join(ErrBadUpdate, errors.New("test: the device rejects it"))
		}})
	defer e.Close()
	if err := e.Load(3, Flow, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	waitCalibrated(t, e, 3)
	if tb := backendOf(t, e, 3); tb.Backend != "cpu" || !strings.Contains(tb.Reason, "the device rejects it") {
		t.Errorf("%+v", tb)
	}
	if !e.Stats().Devices[0].Up {
		t.Error("a calibration's device error took the device out of service")
	}
	// An empty table is not measured on the device: the CPU.
	empty, err := flow.NewTable(flow.Config{Algo: flow.Tuple, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(4, Flow, empty.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	waitCalibrated(t, e, 4)
	if tb := backendOf(t, e, 4); tb.Backend != "cpu" || !strings.Contains(tb.Reason, "empty table") || tb.DeviceNsPerKey != 0 {
		t.Errorf("empty table: %+v", tb)
	}
}

// TestTimeDeviceLookup: the default device cost is the wall time of a
// batch per key.
func TestTimeDeviceLookup(t *testing.T) {
	tab, err := flow.NewTable(flow.Config{Algo: flow.Tuple, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	addClasses(t, tab, 0, 2)
	dev := &slowDevice{CPU: NewCPU(), delay: 2 * time.Millisecond}
	if err := dev.Load(1, Flow, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	p := len(tab.UsedWords())
	keys := &calibSample{kind: Flow, n: 1000, p: p, soa: make([]uint32, p*1000)}
	ns, err := timeDeviceLookup(dev, 1, keys)
	if err != nil {
		t.Fatal(err)
	}
	if ns < 2000 || ns > 1e6 {
		t.Errorf("%.0f ns/key for 1000 keys in 2 ms batches", ns)
	}
	if _, err := timeDeviceLookup(dev, 9, keys); !errors.Is(err, ErrNoTable) {
		t.Errorf("a missing table: %v", err)
	}
}

// slowDevice is a device whose flow lookups take at least delay.
type slowDevice struct {
	*CPU
	delay time.Duration
}

func (d *slowDevice) LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	time.Sleep(d.delay)
	return d.CPU.LookupFlow(id, soa, n, out)
}
