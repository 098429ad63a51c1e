package forward

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/gswitch/gswitch/tables/filter"
)

// TestFiltersConfig: the filters file is read and checked, and the
// configuration written for gswitchd holds the same filters on every port.
func TestFiltersConfig(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.txt")
	text := "# monitoring\nweb: tcp port 80 or tcp port 443\n\ndns: udp port 53\nq: ip[2:2] > 100 or vlan 5\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	specs, err := readFilterSpecs(file)
	if err != nil {
		t.Fatal(err)
	}
	want := []filter.Spec{{Name: "web", Expr: "tcp port 80 or tcp port 443"}, {Name: "dns", Expr: "udp port 53"},
		{Name: "q", Expr: "ip[2:2] > 100 or vlan 5"}}
	if !slices.Equal(specs, want) {
		t.Fatalf("read %v, want %v", specs, want)
	}
	path, err := filtersConfig(dir, specs)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	var cfg struct {
		Filters []struct {
			Name       string   `yaml:"name"`
			Expression string   `yaml:"expression"`
			Ports      []uint32 `yaml:"ports"`
		} `yaml:"filters"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	if len(cfg.Filters) != len(want) {
		t.Fatalf("%d filters in\n%s", len(cfg.Filters), b)
	}
	for i, f := range cfg.Filters {
		if f.Name != want[i].Name || f.Expression != want[i].Expr || len(f.Ports) != 0 {
			t.Fatalf("filter %d: %+v, want %+v on every port", i, f, want[i])
		}
	}
	for name, bad := range map[string]string{"syntax": "x: tcp port port\n", "form": "no colon here\n", "empty": "# none\n"} {
		os.WriteFile(file, []byte(bad), 0o644)
		if _, err := readFilterSpecs(file); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseFilterMetrics(t *testing.T) {
	page := `# HELP gswitch_filters Live filters installed.
# TYPE gswitch_filters gauge
gswitch_filters 3
gswitch_filter_packets_total{filter="a"} 10
gswitch_filter_packets_total{filter="b c"} 5
gswitch_filter_bytes_total{filter="a"} 999
gswitch_port_rx_packets_total{port="1"} 7
`
	n, m, ok := parseFilterMetrics(strings.NewReader(page))
	if !ok || n != 3 || m != 15 {
		t.Fatalf("got %d filters, %d matches, ok %v", n, m, ok)
	}
	if _, _, ok := parseFilterMetrics(strings.NewReader("go_goroutines 5\n")); ok {
		t.Fatal("a page without gswitch_filters: ok")
	}
}

func FuzzParseFilterMetrics(f *testing.F) {
	f.Add("gswitch_filters 2\ngswitch_filter_packets_total{filter=\"a\"} 1e3\n")
	f.Add("gswitch_filter_packets_total{filter=\"}\"} NaN\n{}\n")
	f.Fuzz(func(t *testing.T, page string) {
		parseFilterMetrics(strings.NewReader(page))
	})
}
