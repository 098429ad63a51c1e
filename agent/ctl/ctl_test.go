package ctl

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rule"
)

type fakeSource struct{}

func (fakeSource) PortInfos() []pipeline.PortInfo {
	return []pipeline.PortInfo{{Desc: rule.Port{No: 1, Name: "veth1"}, Up: true, Stats: rule.PortStats{PortNo: 1, RxPackets: 5}}}
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

// TestListenRefusesNonSocket: Listen never deletes what is not a stale
// socket at its path (a regular file, a directory, a symbolic link), and
// says so in one line.
func TestListenRefusesNonSocket(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "precious")
	if err := os.WriteFile(file, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{file: "a regular file", sub: "a directory", link: "a symbolic link"} {
		l, err := Listen(path)
		if err == nil {
			l.Close()
			t.Fatalf("Listen(%s) over %s succeeded", path, kind)
		}
		if msg := err.Error(); !strings.Contains(msg, "not a socket") || !strings.Contains(msg, kind) || strings.Contains(msg, "\n") {
			t.Errorf("Listen over %s: %q: want a one-line refusal naming it", kind, msg)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep me" {
		t.Fatalf("the regular file was touched: %q, %v", b, err)
	}
	if fi, err := os.Stat(sub); err != nil || !fi.IsDir() {
		t.Fatalf("the directory was touched: %v", err)
	}
}

// TestListenReplacesStaleSocket: a socket nobody answers on (a daemon
// killed with SIGKILL leaves one) is replaced.
func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctl.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("stale socket missing: %v", err)
	}
	l2, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l2.Close()
}

// TestListenModeFromTheStart: the socket file has mode 0600 as soon as it
// exists (bound under a narrowed umask), whatever the process umask, and
// the umask is restored afterwards.
func TestListenModeFromTheStart(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "ctl.sock")
	l, err := listenUmask(path, 0o777&^SocketMode)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != SocketMode {
		t.Errorf("socket mode right after bind %v: want %v", fi.Mode().Perm(), os.FileMode(SocketMode))
	}
	if cur := syscall.Umask(0); cur != 0 {
		t.Errorf("umask after Listen %#o: want it restored to 0", cur)
	}
}
