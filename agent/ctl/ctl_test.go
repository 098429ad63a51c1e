package ctl

import (
	"context"
	"errors"
	"net"
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
func (fakeSource) Groups() []pipeline.GroupInfo {
	return []pipeline.GroupInfo{{ID: 4, Type: "select", Packets: 8, Buckets: []pipeline.BucketInfo{{Weight: 1, Actions: "output:2", Packets: 8}}}}
}
func (fakeSource) Meters() []pipeline.MeterInfo {
	return []pipeline.MeterInfo{{ID: 1, Flags: "pktps,burst", PacketsIn: 10, Bands: []pipeline.BandInfo{{Type: "drop", Rate: 5, Packets: 5}}}}
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
	groups, err := c.Groups(qctx)
	if err != nil || len(groups) != 1 || groups[0].Type != "select" || groups[0].Buckets[0].Packets != 8 {
		t.Errorf("groups %+v, %v", groups, err)
	}
	meters, err := c.Meters(qctx)
	if err != nil || len(meters) != 1 || meters[0].Bands[0].Rate != 5 {
		t.Errorf("meters %+v, %v", meters, err)
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

func TestClientNotRunning(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.sock")
	c := NewClient(missing)
	defer c.Close()
	_, err := c.Stats(context.Background())
	if !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), missing) {
		t.Errorf("no socket: %v, want ErrNotRunning naming the path", err)
	}
	// A socket file nobody listens on (a daemon that died).
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	c2 := NewClient(stale)
	defer c2.Close()
	if _, err := c2.Ports(context.Background()); !errors.Is(err, ErrNotRunning) {
		t.Errorf("stale socket: %v, want ErrNotRunning", err)
	}
}
