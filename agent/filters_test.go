package agent

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
)

// TestFilterConfigMistakes: a bad filter is a one-line configuration error
// naming the filter (and for an expression the position).
func TestFilterConfigMistakes(t *testing.T) {
	cases := []struct {
		filters []FilterConfig
		want    string
	}{
		{[]FilterConfig{{Name: "web", Expression: "tcp port 80 and and"}}, "filter web: position"},
		{[]FilterConfig{{Name: "web", Expression: "tcp port"}}, "filter web: position"},
		{[]FilterConfig{{Name: "a b", Expression: "tcp"}}, "bad filter name"},
		{[]FilterConfig{{Name: "w", Expression: "tcp"}, {Name: "w", Expression: "udp"}}, "filter w given twice"},
		{[]FilterConfig{{Name: "w", Expression: "tcp", Ports: []uint32{7}}}, "filter w: no port 7"},
		{[]FilterConfig{{Name: "w", Expression: "tcp", Capture: &FilterCaptureConfig{}}}, "filter w: capture without a file"},
		{[]FilterConfig{{Name: "b", Expression: "bpf:@/nonexistent/prog.bpf"}}, "filter b: position 5: bpf:@/nonexistent/prog.bpf"},
		{[]FilterConfig{{Name: "b", Expression: "bpf:2,6 0 0 1"}}, "filter b: position 4"},
	}
	for _, c := range cases {
		cfg := testConfig(t.TempDir())
		cfg.Filters = c.filters
		_, err := check(cfg)
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: error %v, want a one-line configuration error containing %q", c.filters, err, c.want)
		}
	}
}

func TestFiltersYAML(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.yaml")
	yaml := "ports:\n  - {number: 1, interface: lo}\nfilters:\n  - name: web\n    expression: tcp port 80\n    ports: [1, 1]\n    capture: {file: /tmp/web.pcapng, max_bytes: 1000000, max_files: 4}\n  - {name: dns, expression: udp port 53}\n"
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := loadArgs(t, "--config", p)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Filters) != 2 || c.Filters[0].Capture == nil || c.Filters[0].Capture.MaxFiles != 4 ||
		c.Filters[0].Capture.MaxBytes != 1000000 || len(c.Filters[0].Ports) != 2 || c.Filters[1].Expression != "udp port 53" {
		t.Fatalf("filters: %+v", c.Filters)
	}
}

// TestFilterBPFFile: a live filter "bpf:@FILE" is configured with the
// program that FILE holds.
func TestFilterBPFFile(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "ip.bpf")
	if err := os.WriteFile(prog, []byte("4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(dir)
	cfg.Filters = []FilterConfig{{Name: "ip", Expression: "bpf:@" + prog}}
	if _, err := check(cfg); err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Filters[0].config()
	if err != nil || c.Expression != "bpf:4,40 0 0 12,21 0 1 2048,6 0 0 262144,6 0 0 0" {
		t.Fatalf("%+v, %v", c, err)
	}
}

// TestFiltersOverCtl: configured filters are listed; add, show and del
// over the control socket; a bad expression is refused with one line and
// changes nothing; the counters are in /metrics.
func TestFiltersOverCtl(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Filters = []FilterConfig{{Name: "dns", Expression: "udp port 53"}}
	a, err := New(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := ctl.NewClient(a.CtlSocket())
	defer cl.Close()
	fs, err := cl.Filters(ctx)
	if err != nil || len(fs) != 1 || fs[0].Name != "dns" || fs[0].Expression != "udp port 53" {
		t.Fatalf("filters: %+v, %v", fs, err)
	}
	_, err = cl.AddFilter(ctx, ctl.FilterRequest{Name: "bad", Expression: "ip and (tcp"})
	if err == nil || !strings.HasPrefix(err.Error(), "filter bad: position") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("bad add: %v", err)
	}
	if _, err = cl.AddFilter(ctx, ctl.FilterRequest{Name: "p", Expression: "tcp", Ports: []uint32{9}}); err == nil || !strings.Contains(err.Error(), "no port 9") {
		t.Fatalf("add on a missing port: %v", err)
	}
	if in, err := cl.AddFilter(ctx, ctl.FilterRequest{Name: "web", Expression: "tcp port 80"}); err != nil || in.Name != "web" {
		t.Fatalf("add: %+v, %v", in, err)
	}
	if _, err := cl.AddFilter(ctx, ctl.FilterRequest{Name: "web", Expression: "tcp"}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("add twice: %v", err)
	}
	if in, err := cl.Filter(ctx, "web"); err != nil || in.Expression != "tcp port 80" {
		t.Fatalf("show: %+v, %v", in, err)
	}
	resp, err := http.Get("http://" + a.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`gswitch_filter_packets_total{filter="web"} 0`, `gswitch_filter_bytes_total{filter="dns"} 0`, "gswitch_filters 2"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if _, err := cl.DeleteFilter(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.DeleteFilter(ctx, "web"); err == nil || !strings.Contains(err.Error(), "no such filter") {
		t.Fatalf("delete twice: %v", err)
	}
	if fs, err := cl.Filters(ctx); err != nil || len(fs) != 1 {
		t.Fatalf("after delete: %+v, %v", fs, err)
	}
}
