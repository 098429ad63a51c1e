package gpu

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gswitch/gswitch/tables/lpm"
)

// namedCPU is a CPU backend standing in for a device of any name.
type namedCPU struct {
	*CPU
	name string
}

func (n namedCPU) Name() string { return n.name }

// TestEngineCollector: an Engine of a healthy device with an odd name
// (quote, backslash, newline, an invalid byte) and a flaky one that fails
// its first lookup. A 5-key lookup runs on the CPU (MinBatch 10); a
// 100-key one is split 50/50, the flaky half failing over to the CPU; the
// next 100 keys all go to the healthy device.
func TestEngineCollector(t *testing.T) {
	good := namedCPU{NewCPU(), "dev\"0\\\nx\xff"}
	e := NewEngine(EngineConfig{Devices: []Backend{good, newFlaky(1)}, MinBatch: 10, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer e.Close()
	tab, err := lpm.New(lpm.IPv4, lpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(1, LPM4, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	out := make([]uint32, 100)
	for _, n := range []int{5, 100, 100} {
		if err := e.LookupLPM4(1, make([]uint32, n), out); err != nil {
			t.Fatal(err)
		}
	}
	c := e.Collector()
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	want := `# HELP gswitch_backend_device_up Whether the device serves lookups (0: failed, its lookups run on the CPU).
# TYPE gswitch_backend_device_up gauge
gswitch_backend_device_up{device="0",name="dev\"0\\\nx` + "\uFFFD" + `"} 1
gswitch_backend_device_up{device="1",name="flaky"} 0
# HELP gswitch_backend_fallbacks_total Device lookups that failed and were answered by the CPU backend.
# TYPE gswitch_backend_fallbacks_total counter
gswitch_backend_fallbacks_total 1
# HELP gswitch_backend_keys_total Keys looked up, by backend.
# TYPE gswitch_backend_keys_total counter
gswitch_backend_keys_total{backend="cpu",device=""} 55
gswitch_backend_keys_total{backend="device",device="0"} 150
gswitch_backend_keys_total{backend="device",device="1"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"gswitch_backend_device_up", "gswitch_backend_fallbacks_total", "gswitch_backend_keys_total"); err != nil {
		t.Fatal(err)
	}
	// The memory gauge: the healthy device's, 0 for the failed one.
	var b strings.Builder
	if err := e.WriteMetrics(&b); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v\n%s", err, b.String())
	}
	mem := mfs["gswitch_backend_device_memory_bytes"]
	if mem == nil || len(mem.Metric) != 2 || mem.Metric[0].Gauge.GetValue() != float64(good.MemoryUsed()) ||
		mem.Metric[0].Gauge.GetValue() == 0 || mem.Metric[1].Gauge.GetValue() != 0 {
		t.Fatalf("memory: %v, want %d and 0:\n%s", mem, good.MemoryUsed(), b.String())
	}
}

// TestEngineCollectorCPUOnly: without devices only the fallbacks and the
// CPU's keys are there.
func TestEngineCollectorCPUOnly(t *testing.T) {
	e := NewEngine(EngineConfig{})
	defer e.Close()
	if n := testutil.CollectAndCount(e.Collector()); n != 2 {
		t.Fatalf("%d metrics, want 2", n)
	}
}

// residentCPU is a CPU backend standing in for a device whose resident
// lookups are on or off.
type residentCPU struct {
	namedCPU
	on              bool
	posts, launches uint64
}

func (r residentCPU) ResidentStats() (bool, uint64, uint64) { return r.on, r.posts, r.launches }

// TestEngineCollectorResident: a device with resident lookups on has its
// lookups and launches counted; one with them off (a CUDA device without
// GSWITCH_CUDA_RESIDENT) and one without them (the CPU) have no series.
func TestEngineCollectorResident(t *testing.T) {
	on := residentCPU{namedCPU{NewCPU(), "on"}, true, 7, 3}
	off := residentCPU{namedCPU{NewCPU(), "off"}, false, 0, 0}
	e := NewEngine(EngineConfig{Devices: []Backend{on, off, namedCPU{NewCPU(), "plain"}}})
	defer e.Close()
	s := e.Stats()
	if d := s.Devices[0]; !d.Resident || d.ResidentLookups != 7 || d.ResidentLaunches != 3 {
		t.Fatalf("device 0: %+v", d)
	}
	if s.Devices[1].Resident || s.Devices[2].Resident {
		t.Fatalf("devices 1, 2: %+v %+v", s.Devices[1], s.Devices[2])
	}
	want := `# HELP gswitch_backend_resident_launches_total Launches of the device's resident kernel (each leaves once no lookup has come for its idle time, --resident-idle, or when stopped for a free, an allocation or a newer version of the tables).
# TYPE gswitch_backend_resident_launches_total counter
gswitch_backend_resident_launches_total{device="0"} 3
# HELP gswitch_backend_resident_lookups_total Lookups posted to the device's resident kernel (--resident-lookups; only devices with resident lookups on).
# TYPE gswitch_backend_resident_lookups_total counter
gswitch_backend_resident_lookups_total{device="0"} 7
`
	c := e.Collector()
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"gswitch_backend_resident_lookups_total", "gswitch_backend_resident_launches_total"); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
}
