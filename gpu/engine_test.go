package gpu

import (
	"bytes"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
)

// flaky is a test double of a device: a CPU backend that, once broken,
// fails every call with an error that is not a table's fault, as a device
// does after a failed launch. The real device faults are tested on the GPU
// (cuda_engine_test.go); this one tests the Engine's routing without one.
type flaky struct {
	*CPU
	after atomic.Int64 // calls before it breaks (<0: never)
}

var errDeviceLost = errors.New("device lost (test double)")

func newFlaky(after int64) *flaky {
	f := &flaky{CPU: NewCPU()}
	f.after.Store(after)
	return f
}

func (f *flaky) broken() bool { return f.after.Add(-1) < 0 }

func (f *flaky) Name() string { return "flaky" }
func (f *flaky) Load(id TableID, k Kind, im *bubble.Image) error {
	if f.broken() {
		return errDeviceLost
	}
	return f.CPU.Load(id, k, im)
}
func (f *flaky) Apply(id TableID, u bubble.Update) error {
	if f.broken() {
		return errDeviceLost
	}
	return f.CPU.Apply(id, u)
}
func (f *flaky) LookupLPM4(id TableID, a []uint32, out []uint32) error {
	if f.broken() {
		return errDeviceLost
	}
	return f.CPU.LookupLPM4(id, a, out)
}
func (f *flaky) LookupLPM6(id TableID, a []lpm.Addr6, out []uint32) error {
	if f.broken() {
		return errDeviceLost
	}
	return f.CPU.LookupLPM6(id, a, out)
}
func (f *flaky) LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	if f.broken() {
		return errDeviceLost
	}
	return f.CPU.LookupFlow(id, soa, n, out)
}
func (f *flaky) Submit(id TableID, b *Batch) error {
	if f.broken() {
		return errDeviceLost
	}
	return f.CPU.Submit(id, b)
}

func TestEngineCPUOnly(t *testing.T) {
	e := NewEngine(EngineConfig{})
	defer e.Close()
	testRandomLPM(t, e, lpm.IPv4, 5000, 5000, 20)
	testRejects(t, e)
	testFlowRejects(t, e)
	if s := e.Stats(); s.KeysOnCPU == 0 || s.KeysOnDevice != 0 {
		t.Fatalf("stats %+v: want every key on the CPU", s)
	}
}

func TestEngineReplicas(t *testing.T) {
	a, b := NewCPU(), NewCPU()
	e := NewEngine(EngineConfig{Devices: []Backend{a, b}, MinBatch: 1})
	defer e.Close()
	testRandomLPM(t, e, lpm.IPv4, 5000, 5000, 20)
	testRandomLPM(t, e, lpm.IPv6, 3000, 3000, 10)
	testRandomFlowAll(t, e, false)
	s := e.Stats()
	if s.Devices[0].Keys == 0 || s.Devices[1].Keys == 0 || s.Fallbacks != 0 {
		t.Fatalf("stats %+v: want keys on both replicas and no fallback", s)
	}
}

func TestEngineMinBatch(t *testing.T) {
	dev := NewCPU()
	e := NewEngine(EngineConfig{Devices: []Backend{dev}, MinBatch: 100})
	defer e.Close()
	tab, err := lpm.New(lpm.IPv4, lpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Load(1, LPM4, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	out := make([]uint32, 1000)
	if err := e.LookupLPM4(1, make([]uint32, 99), out); err != nil {
		t.Fatal(err)
	}
	if err := e.LookupLPM4(1, make([]uint32, 1000), out); err != nil {
		t.Fatal(err)
	}
	if s := e.Stats(); s.KeysOnCPU != 99 || s.KeysOnDevice != 1000 {
		t.Fatalf("stats %+v: want the 99-key batch on the CPU, the 1000-key one on the device", s)
	}
}

// TestEngineFallback breaks the device at every point of a table's life in
// turn: the answers stay those of the table, the device is reported down
// once, and the metrics say so.
func TestEngineFallback(t *testing.T) {
	for _, after := range []int64{0, 1, 5, 40, 90} {
		var logs bytes.Buffer
		dev := newFlaky(after)
		e := NewEngine(EngineConfig{Devices: []Backend{dev}, MinBatch: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		testRandomLPM(t, e, lpm.IPv4, 3000, 3000, 20)
		testRandomFlowAll(t, e, false)
		s := e.Stats()
		if s.Devices[0].Up {
			t.Fatalf("after %d: device still up after it failed: %+v", after, s)
		}
		if n := strings.Count(logs.String(), "device failed"); n != 1 {
			t.Fatalf("after %d: %d log lines of the failure, want 1:\n%s", after, n, logs.String())
		}
		var m bytes.Buffer
		if err := e.WriteMetrics(&m); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(m.String(), `gswitch_backend_device_up{device="0",name="flaky"} 0`) {
			t.Fatalf("after %d: metrics do not show the device down:\n%s", after, m.String())
		}
		e.Close()
	}
}

func TestEngineOpen(t *testing.T) {
	if _, err := Open("tpu", nil, 0, nil); err == nil {
		t.Fatal("Open accepted backend tpu")
	}
	e, err := Open("auto", nil, 0, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	e, err = Open("cpu", nil, 0, nil)
	if err != nil || len(e.Stats().Devices) != 0 {
		t.Fatalf("Open cpu: %v, %+v", err, e)
	}
	e.Close()
}

// TestEngineCPUPathAllocates nothing: the datapath and the route lookups
// call it per batch, and an allocating lookup goroutine is drafted into
// every garbage collection's marking.
func TestEngineCPUPathAllocates(t *testing.T) {
	eng, err := Open("cpu", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	addrs, out := loadTenSlash8(t, eng, 1, 256)
	if a := testing.AllocsPerRun(100, func() { _ = eng.LookupLPM4(1, addrs, out) }); a != 0 {
		t.Errorf("LookupLPM4 on the CPU allocates %v times per call", a)
	}
	if out[0] != 3 {
		t.Errorf("lookup: %d, want 3", out[0])
	}
}

// TestEngineFullUpdateNotShared: a Full update given to the Engine reaches
// its CPU backend and a CPU standing in for a device as two images, so
// that the bubbles one applies later never write what the other's lookups
// read (they shared one before 2026-11-26: a race under -race in agent's
// placement test).
func TestEngineFullUpdateNotShared(t *testing.T) {
	const id = 3
	dev := NewCPU()
	e := NewEngine(EngineConfig{Devices: []Backend{dev}, MinBatch: 64})
	defer e.Close()
	im, _, _ := coalesceImage(t)
	if err := e.Load(id, Flow, im); err != nil {
		t.Fatal(err)
	}
	full, _, _ := coalesceImage(t)
	if err := e.Apply(id, bubble.Update{Full: full}); err != nil {
		t.Fatal(err)
	}
	a, b := e.cpu.tables[id], dev.tables[id]
	for i := range a.inst {
		for j := range b.inst {
			if a.inst[i].img == b.inst[j].img {
				t.Fatalf("copy %d of the engine's CPU and copy %d of the device share one image", i, j)
			}
		}
	}
}

// TestEngineDevicePathAllocates: a lookup that goes to the one device
// serving its table (a CPU backend standing in for it) allocates nothing
// in the Engine, flow and IPv4 alike, and is the device's.
func TestEngineDevicePathAllocates(t *testing.T) {
	e := NewEngine(EngineConfig{Devices: []Backend{NewCPU()}, MinBatch: 1})
	defer e.Close()
	addrs, out := loadTenSlash8(t, e, 1, 256)
	soa, ids := loadInPortFlow(t, e, 2, 256)
	if a := testing.AllocsPerRun(100, func() { _ = e.LookupLPM4(1, addrs, out) }); a != 0 {
		t.Errorf("LookupLPM4 on the device allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(100, func() { _ = e.LookupFlow(2, soa, 256, ids) }); a != 0 {
		t.Errorf("LookupFlow on the device allocates %v times per call", a)
	}
	// A batch submitted to the device and waited for (the datapath
	// workers' runs in flight, the Gatherer's batches): nothing either.
	bt, err := e.NewBatch(Flow, len(soa)/256, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer bt.Free()
	copy(bt.Keys, soa)
	bt.N = 256
	if a := testing.AllocsPerRun(100, func() {
		if err := e.Submit(2, bt); err != nil {
			t.Fatal(err)
		}
		if err := bt.Wait(); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Submit and Wait on the device allocate %v times per batch", a)
	}
	if got := bt.Rules()[0]; got != ids[0] {
		t.Errorf("the submitted batch's first rule %d, the lookup's %d", got, ids[0])
	}
	if out[0] != 3 || ids[0] == flow.NoMatch {
		t.Errorf("lookups: %d, %v; want 3 and a rule", out[0], ids[0])
	}
	if s := e.Stats(); s.KeysOnDevice == 0 || s.KeysOnCPU != 0 {
		t.Errorf("stats %+v: want every key on the device", s)
	}
}

// lostAtWait is a device whose submissions are accepted and whose waits
// fail, as a device lost while a batch is in flight.
type lostAtWait struct{ *CPU }

func (lostAtWait) Submit(id TableID, b *Batch) error {
	b.impl, b.sub = lostBatch{}, true
	return nil
}

type lostBatch struct{}

func (lostBatch) wait(*Batch) error { return errDeviceLost }
func (lostBatch) ready(*Batch) bool { return true }
func (lostBatch) free(*Batch)       {}

// TestEngineFallbackAtWait: a batch whose device fails after its Submit
// is answered by the CPU at its Wait, counted a fallback and the keys the
// CPU's, and the device is out of service.
func TestEngineFallbackAtWait(t *testing.T) {
	e := NewEngine(EngineConfig{Devices: []Backend{lostAtWait{NewCPU()}}, MinBatch: 1})
	defer e.Close()
	soa, _ := loadInPortFlow(t, e, 2, 64)
	bt, err := e.NewBatch(Flow, len(soa)/64, 64)
	if err != nil {
		t.Fatal(err)
	}
	copy(bt.Keys, soa)
	bt.N = 64
	if err := e.Submit(2, bt); err != nil {
		t.Fatal(err)
	}
	if err := bt.Wait(); err != nil {
		t.Fatalf("Wait: %v; want the CPU's answer", err)
	}
	for i, r := range bt.Rules()[:64] {
		if r == flow.NoMatch {
			t.Fatalf("packet %d: no match; want the in_port rule", i)
		}
	}
	s := e.Stats()
	if s.Fallbacks != 1 || s.KeysOnCPU != 64 || s.KeysOnDevice != 0 || len(s.Devices) != 1 || s.Devices[0].Up {
		t.Errorf("stats %+v: want one fallback, 64 keys on the CPU, the device down", s)
	}
}

// loadInPortFlow loads flow table id into e, one rule on in_port 7, and
// returns the packed keys of n packets received on port 7 and room for
// their answers.
func loadInPortFlow(t *testing.T, e *Engine, id TableID, n int) ([]uint32, []flow.RuleID) {
	t.Helper()
	ft, err := flow.NewTable(flow.Config{Algo: flow.Merge, MaxEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	var m flow.Match
	m.SetInPort(7)
	if _, _, err := ft.Add(flow.Rule{Match: m, Priority: 1}, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.Load(id, Flow, ft.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	keys := make([]flow.Key, n)
	for i := range keys {
		_ = keys[i].SetUint(flow.FieldInPort, 7)
	}
	return flow.PackSoA(keys, ft.UsedWords(), nil), make([]flow.RuleID, n)
}

// loadTenSlash8 loads IPv4 table id into e, 10.0.0.0/8 to 3, and returns n
// addresses in it and room for their answers.
func loadTenSlash8(t *testing.T, e *Engine, id TableID, n int) ([]uint32, []uint32) {
	t.Helper()
	tab, err := lpm.New(lpm.IPv4, lpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Insert(netip.MustParsePrefix("10.0.0.0/8"), 3); err != nil {
		t.Fatal(err)
	}
	if err := e.Load(id, LPM4, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	addrs := make([]uint32, n)
	for i := range addrs {
		addrs[i] = 10<<24 | uint32(i)
	}
	return addrs, make([]uint32, n)
}
