package ctl

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
)

type fakeSource struct{}

func (fakeSource) PortInfos() []pipeline.PortInfo {
	return []pipeline.PortInfo{{Desc: openflow.Port{No: 1, Name: "veth1"}, Up: true, Stats: openflow.PortStats{PortNo: 1, RxPackets: 5}}}
}
func (fakeSource) TableInfos() []pipeline.TableInfo {
	return []pipeline.TableInfo{{ID: 0, Active: 2, Lookups: 9, Matched: 4}}
}
func (fakeSource) Flows() []pipeline.FlowInfo {
	return []pipeline.FlowInfo{{Table: 0, Priority: 7, Match: "in_port=1", Instructions: "apply_actions(output:2)", Packets: 3}}
}
func (fakeSource) Backend() gpu.EngineStats { return gpu.EngineStats{KeysOnCPU: 11, MinBatch: 2048} }
func (fakeSource) Stats() Stats {
	return Stats{DatapathID: 0x42, Backend: "cpu", Counters: pipeline.Counters{MissDrops: 6, FailMode: "secure"}}
}

func TestClientServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, %v: want 0600", fi.Mode().Perm(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, fakeSource{}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "another gswitchd") {
		t.Errorf("second Listen on a live socket: %v", err)
	}
	c := NewClient(path)
	defer c.Close()
	qctx, qcancel := context.WithTimeout(ctx, 5*time.Second)
	defer qcancel()
	ports, err := c.Ports(qctx)
	if err != nil || len(ports) != 1 || ports[0].Desc.Name != "veth1" || ports[0].Stats.RxPackets != 5 {
		t.Errorf("ports %+v, %v", ports, err)
	}
	tables, err := c.Tables(qctx)
	if err != nil || len(tables) != 1 || tables[0].Lookups != 9 {
		t.Errorf("tables %+v, %v", tables, err)
	}
	flows, err := c.Flows(qctx)
	if err != nil || len(flows) != 1 || flows[0].Match != "in_port=1" || flows[0].Packets != 3 {
		t.Errorf("flows %+v, %v", flows, err)
	}
	be, err := c.Backend(qctx)
	if err != nil || be.KeysOnCPU != 11 {
		t.Errorf("backend %+v, %v", be, err)
	}
	st, err := c.Stats(qctx)
	if err != nil || st.DatapathID != 0x42 || st.Counters.MissDrops != 6 {
		t.Errorf("stats %+v, %v", st, err)
	}
	var v any
	if err := c.get(qctx, "/v1/nope", &v); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown query: %v, want a 404 error", err)
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Listen(path)
	if err != nil {
		t.Fatalf("stale file not replaced: %v", err)
	}
	l.Close()
}
