package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
)

// testConfig is the default configuration on the CPU backend with the
// control socket in dir and the metrics and P4Runtime servers on
// loopback ports the kernel picks.
func testConfig(dir string) Config {
	c := DefaultConfig()
	c.Backend = "cpu"
	c.CtlSocket = filepath.Join(dir, "gswitchd.sock")
	c.Metrics = "127.0.0.1:0"
	c.P4RT.Listen = "127.0.0.1:0"
	return c
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// startAgent runs a on a goroutine; the returned function stops it (as a
// signal does) and returns Run's error.
func startAgent(t *testing.T, a *Agent) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var stopped bool
	var err error
	stop = func() error {
		if !stopped {
			cancel()
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return 10s after its context ended")
			}
			stopped = true
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestAgentLifecycle starts an agent without ports, reads it over the
// control socket, /metrics and the P4Runtime port, and stops it: Run
// returns nil and the socket file is gone.
func TestAgentLifecycle(t *testing.T) {
	dir := t.TempDir()
	a, err := New(testConfig(dir), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if a.Switch() == nil || a.Engine() == nil || a.OpenFlow() == nil || a.P4RT() == nil || a.Router() != nil ||
		a.MetricsAddr() == nil || a.P4RTAddr() == nil || a.RouteTable(254) != nil || a.Port(1) != nil {
		t.Fatalf("accessors of an agent without ports: switch %v engine %v router %v metrics %v p4rt %v",
			a.Switch(), a.Engine(), a.Router(), a.MetricsAddr(), a.P4RTAddr())
	}
	if got := a.TableIDs(); len(got) != 2 || got[0].Owner != flowTablesOwner || got[1].Owner != lpmShapeIDsOwner {
		t.Fatalf("table ids without a router: %v", got)
	}
	stop := startAgent(t, a)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := ctl.NewClient(a.CtlSocket())
	defer cl.Close()
	st, err := cl.Stats(ctx)
	if err != nil || st.DatapathID != 1 || st.Backend == "" {
		t.Fatalf("ctl stats: %+v, %v", st, err)
	}
	tabs, err := cl.Tables(ctx)
	if err != nil || len(tabs) != 4 {
		t.Fatalf("ctl tables: %d, %v; want the default 4", len(tabs), err)
	}
	rs, err := cl.Routes(ctx, 0, 0)
	if err != nil || len(rs.Tables) != 0 {
		t.Fatalf("ctl routes without a router: %+v, %v", rs, err)
	}
	if fi, err := os.Stat(a.CtlSocket()); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket: %v, %v; want mode 0600", fi, err)
	}

	resp, err := http.Get("http://" + a.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"gswitch_openflow_connections 0\n", "gswitch_openflow_controllers 0\n", "gswitch_openflow_packet_in_rate_limited_total 0\n", "gswitch_openflow_output_drops_total 0\n", "# TYPE gswitch_openflow_connections gauge"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4;") { // promhttp adds charset and escaping
		t.Errorf("/metrics Content-Type %q", ct)
	}
	c, err := net.DialTimeout("tcp", a.P4RTAddr().String(), time.Second)
	if err != nil {
		t.Fatalf("P4Runtime port: %v", err)
	}
	c.Close()

	if err := stop(); err != nil {
		t.Fatalf("Run after its context ended: %v, want nil", err)
	}
	if _, err := os.Stat(a.CtlSocket()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the control socket is still there after stop: %v", err)
	}
	if _, err := cl.Stats(ctx); !errors.Is(err, ctl.ErrNotRunning) {
		t.Fatalf("ctl after stop: %v, want ErrNotRunning", err)
	}
	if _, err := net.DialTimeout("tcp", a.MetricsAddr().String(), time.Second); err == nil {
		t.Fatal("the metrics port still accepts after stop")
	}
	if err := a.Run(context.Background()); err == nil {
		t.Fatal("a second Run succeeded")
	}
	a.Close() // after Run: nothing left to do
}

// TestAgentClose: Close stops a running agent (Run returns nil), and
// closes one that never ran, freeing its listeners.
func TestAgentClose(t *testing.T) {
	dir := t.TempDir()
	a, err := New(testConfig(dir), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Run(context.Background()) }()
	waitServing(t, a.CtlSocket())
	a.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Close")
	}
	a.Close()

	b, err := New(testConfig(dir), quietLog())
	if err != nil {
		t.Fatalf("a second agent on the same socket after the first stopped: %v", err)
	}
	addr := b.MetricsAddr().String()
	b.Close()
	b.Close()
	if _, err := os.Stat(b.CtlSocket()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the control socket of an agent closed before Run: %v", err)
	}
	if l, err := net.Listen("tcp", addr); err != nil {
		t.Fatalf("the metrics address of an agent closed before Run is still taken: %v", err)
	} else {
		l.Close()
	}
	if err := b.Run(context.Background()); err == nil {
		t.Fatal("Run after Close succeeded")
	}
}

// TestNewRefusesBadConfig: New checks the configuration as the flags do,
// and a start failure (a live socket) leaves nothing open.
func TestNewRefusesBadConfig(t *testing.T) {
	dir := t.TempDir()
	c := testConfig(dir)
	c.Tables = 0
	if _, err := New(c, quietLog()); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "tables 0") {
		t.Fatalf("tables 0: %v, want a configuration error", err)
	}
	if _, err := New(Config{}, quietLog()); !errors.Is(err, ErrConfig) {
		t.Fatalf("a zero Config: %v, want a configuration error", err)
	}
	a, err := New(testConfig(dir), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, a)
	waitServing(t, a.CtlSocket())
	c = testConfig(dir)
	if _, err := New(c, quietLog()); err == nil || errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "another gswitchd") {
		t.Fatalf("a second agent on a live socket: %v, want a start error", err)
	}
}

// waitServing returns once the agent's control socket answers a query:
// its Run is running.
func waitServing(t *testing.T, path string) {
	t.Helper()
	cl := ctl.NewClient(path)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.Stats(ctx); err != nil {
		t.Fatalf("the control socket %s: %v", path, err)
	}
}
