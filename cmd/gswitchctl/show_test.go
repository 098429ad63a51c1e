package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
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
	out := func(p uint32) openflow.Action {
		return openflow.Action{Kind: openflow.ActOutput, Port: p, MaxLen: openflow.MaxLenNoBuffer}
	}
	bucket := openflow.Bucket{Weight: 5, WatchPort: openflow.PortAny, WatchGroup: openflow.GroupAny, Actions: []openflow.Action{out(2)}}
	if err := sw.GroupMod(&openflow.GroupMod{Command: openflow.GroupAdd, Group: openflow.Group{ID: 7, Type: openflow.GroupTypeSelect, Buckets: []openflow.Bucket{bucket}}}); err != nil {
		t.Fatal(err)
	}
	if err := sw.MeterMod(&openflow.MeterMod{Command: openflow.MeterAdd, MeterConfig: openflow.MeterConfig{ID: 3, Flags: openflow.MeterKbps,
		Bands: []openflow.MeterBand{{Type: openflow.BandDrop, Rate: 1000}}}}); err != nil {
		t.Fatal(err)
	}
	var m flow.Match
	m.SetInPort(1)
	fm := &openflow.FlowMod{Command: openflow.FlowAdd, Priority: 100, Cookie: 0x2a, Match: openflow.Match{Match: m},
		BufferID: openflow.NoBuffer, OutPort: openflow.PortAny, OutGroup: openflow.GroupAny,
		Instructions: openflow.Instructions{Has: openflow.HasMeter | openflow.HasApplyActions, Meter: 3,
			Apply: []openflow.Action{{Kind: openflow.ActGroup, ID: 7}}}}
	if err := sw.FlowMod(fm); err != nil {
		t.Fatal(err)
	}
	// Table 1 is a routing table: LPM-shaped.
	var route flow.Match
	route.SetEthType(flow.EthTypeIPv4)
	if err := route.SetIPv4Dst(10<<24, 8); err != nil {
		t.Fatal(err)
	}
	if err := sw.FlowMod(&openflow.FlowMod{Command: openflow.FlowAdd, TableID: 1, Priority: 8, Match: openflow.Match{Match: route},
		BufferID: openflow.NoBuffer, OutPort: openflow.PortAny, OutGroup: openflow.GroupAny,
		Instructions: openflow.Instructions{Has: openflow.HasApplyActions, Apply: []openflow.Action{out(2)}}}); err != nil {
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
		{[]string{"--socket", sock, "tables"}, []string{"TABLE", "ACTIVE", "LOOKUPS", "SEARCH", "\n0 ", "linear\n", "lpm\n"}},
		{[]string{"groups", "--socket=" + sock}, []string{"group_id=7", "type=select", "ref_count=1", "weight=5", "actions=output:2"}},
		{[]string{"meters", "--socket", sock}, []string{"meter=3", "kbps", "flow_count=1", "type=drop", "rate=1000"}},
		{[]string{"ports", "--socket", sock}, []string{"PORT", "NAME", "RX_PKTS"}},
		{[]string{"backend", "--socket", sock}, []string{"keys on CPU:", "devices:"}},
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
