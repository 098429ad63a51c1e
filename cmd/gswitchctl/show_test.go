package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// switchSource serves a real pipeline.Switch (without ports) over the
// control socket, as gswitchd does.
type switchSource struct {
	sw  *pipeline.Switch
	eng *gpu.Engine
}

func (s switchSource) PortInfos() []pipeline.PortInfo   { return s.sw.PortInfos() }
func (s switchSource) TableInfos() []pipeline.TableInfo { return s.sw.TableInfos() }
func (s switchSource) Flows() []pipeline.FlowInfo       { return s.sw.Flows() }
func (s switchSource) Groups() []pipeline.GroupInfo     { return s.sw.Groups() }
func (s switchSource) Meters() []pipeline.MeterInfo     { return s.sw.Meters() }
func (s switchSource) Backend() gpu.EngineStats         { return s.eng.Stats() }
func (s switchSource) Stats() ctl.Stats {
	return ctl.Stats{DatapathID: 0xab, Backend: s.eng.Device(), Counters: s.sw.Counters()}
}

// serveSwitch starts a control socket for a switch with one flow, one
// select group and one meter, and returns the socket's path.
func serveSwitch(t *testing.T) string {
	t.Helper()
	eng, err := gpu.Open("cpu", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	sw, err := pipeline.New(pipeline.Config{DatapathID: 0xab, Tables: 2, Classifier: eng})
	if err != nil {
		t.Fatal(err)
	}
	out := func(p uint32) rule.Action {
		return rule.Action{Kind: rule.ActOutput, Port: p, MaxLen: rule.MaxLenNoBuffer}
	}
	bucket := rule.Bucket{Weight: 5, WatchPort: rule.PortAny, WatchGroup: rule.GroupAny, Actions: []rule.Action{out(2)}}
	if err := sw.GroupMod(&rule.GroupMod{Command: rule.GroupAdd, Group: rule.Group{ID: 7, Type: rule.GroupTypeSelect, Buckets: []rule.Bucket{bucket}}}); err != nil {
		t.Fatal(err)
	}
	if err := sw.MeterMod(&rule.MeterMod{Command: rule.MeterAdd, MeterConfig: rule.MeterConfig{ID: 3, Flags: rule.MeterKbps,
		Bands: []rule.MeterBand{{Type: rule.BandDrop, Rate: 1000}}}}); err != nil {
		t.Fatal(err)
	}
	var m flow.Match
	m.SetInPort(1)
	fm := &rule.FlowMod{Command: rule.FlowAdd, Priority: 100, Cookie: 0x2a, Match: m,
		BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny,
		Instructions: rule.Instructions{Has: rule.HasMeter | rule.HasApplyActions, Meter: 3,
			Apply: []rule.Action{{Kind: rule.ActGroup, ID: 7}}}}
	if err := sw.FlowMod(fm); err != nil {
		t.Fatal(err)
	}
	// Table 1 is a routing table: LPM-shaped.
	var route flow.Match
	route.SetEthType(flow.EthTypeIPv4)
	if err := route.SetIPv4Dst(10<<24, 8); err != nil {
		t.Fatal(err)
	}
	if err := sw.FlowMod(&rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: 8, Match: route,
		BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny,
		Instructions: rule.Instructions{Has: rule.HasApplyActions, Apply: []rule.Action{out(2)}}}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gswitchd.sock")
	l, err := ctl.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Serve(ctx, l, switchSource{sw: sw, eng: eng}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return path
}

func show(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(append([]string{"show"}, args...), &out, &errb)
	return out.String(), err
}

func TestShowTables(t *testing.T) {
	sock := serveSwitch(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"flows", "--socket", sock}, []string{"cookie=0x2a", "table=0", "n_packets=0", "priority=100", "meter:3", "group:7"}},
		{[]string{"--socket", sock, "tables"}, []string{"TABLE", "ACTIVE", "LOOKUPS", "SEARCH", "BACKEND", "\n0 ", "linear  cpu", "lpm     cpu", "--backend cpu\n"}},
		{[]string{"groups", "--socket=" + sock}, []string{"group_id=7", "type=select", "ref_count=1", "weight=5", "actions=output:2"}},
		{[]string{"meters", "--socket", sock}, []string{"meter=3", "kbps", "flow_count=1", "type=drop", "rate=1000"}},
		{[]string{"ports", "--socket", sock}, []string{"PORT", "NAME", "RX_PKTS"}},
		{[]string{"backend", "--socket", sock}, []string{"keys on CPU:", "devices:", "ENGINE_TABLE", "0x0 ", "flow", "--backend cpu"}},
		{[]string{"stats", "--socket", sock}, []string{"datapath id:", "0x00000000000000ab", "malformed frames:", "meter drops:", "fail mode:"}},
	}
	for _, c := range cases {
		out, err := show(t, c.args...)
		if err != nil {
			t.Errorf("show %v: %v", c.args, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("show %v: no %q in\n%s", c.args, w, out)
			}
		}
	}
}

func TestShowJSON(t *testing.T) {
	sock := serveSwitch(t)
	out, err := show(t, "groups", "--json", "--socket", sock)
	if err != nil {
		t.Fatal(err)
	}
	var gs []pipeline.GroupInfo
	if err := json.Unmarshal([]byte(out), &gs); err != nil || len(gs) != 1 || gs[0].ID != 7 || gs[0].Buckets[0].Weight != 5 {
		t.Fatalf("show groups --json: %v, %+v\n%s", err, gs, out)
	}
}

func TestShowErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.sock")
	_, err := show(t, "flows", "--socket", missing)
	if !errors.Is(err, ctl.ErrNotRunning) || !strings.Contains(err.Error(), missing) {
		t.Errorf("daemon not running: %v", err)
	}
	for _, args := range [][]string{{}, {"nothing"}, {"flows", "ports"}, {"flows", "--bogus"}} {
		if _, err := show(t, args...); err == nil {
			t.Errorf("show %q: no error", args)
		}
	}
	if _, err := show(t, "nothing"); !errors.Is(err, errUsage) {
		t.Errorf("show nothing: %v, want a usage error", err)
	}
}

// TestShowTablesAuto: with --backend auto and a device (a CPU backend
// standing in for one), show tables gives each table's backend with the
// classes and costs of its calibration.
func TestShowTablesAuto(t *testing.T) {
	eng := gpu.NewEngine(gpu.EngineConfig{Mode: gpu.ModeAuto, Devices: []gpu.Backend{gpu.NewCPU()}, MinBatch: 64,
		Auto: gpu.AutoConfig{Delay: time.Millisecond}})
	t.Cleanup(func() { eng.Close() })
	sw, err := pipeline.New(pipeline.Config{DatapathID: 0xab, Tables: 1, Classifier: eng})
	if err != nil {
		t.Fatal(err)
	}
	var m flow.Match
	m.SetInPort(1)
	if err := sw.FlowMod(&rule.FlowMod{Command: rule.FlowAdd, Priority: 100, Match: m,
		BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if ts := eng.TableBackends(); len(ts) == 1 && ts[0].Calibrations > 0 && ts[0].Classes == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no calibration of the table with its rule: %+v", eng.TableBackends())
		}
	}
	path := filepath.Join(t.TempDir(), "gswitchd.sock")
	l, err := ctl.Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctl.Serve(ctx, l, switchSource{sw: sw, eng: eng}) }()
	defer func() {
		cancel()
		<-done
	}()
	out, err := show(t, "tables", "--socket", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"BACKEND", "WHY", "auto: cpu ", " ns vs device ", "per key at 64-key batches", "(1 slot)"} {
		if !strings.Contains(out, w) {
			t.Errorf("no %q in\n%s", w, out)
		}
	}
	t.Logf("show tables:\n%s", out)
	if out, err = show(t, "backend", "--socket", path); err != nil || !strings.Contains(out, "ENGINE_TABLE") || !strings.Contains(out, "64 ") {
		t.Errorf("show backend: %v\n%s", err, out)
	}
	t.Logf("show backend:\n%s", out)
}
