package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/controlproto/p4rt"
	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/l3"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/route"
)

// metricsDev is a switch port's device with known counters.
type metricsDev struct{ name string }

func (d metricsDev) Send(frames [][]byte) (int, error) { return len(frames), nil }
func (d metricsDev) Link() afpacket.LinkInfo {
	return afpacket.LinkInfo{Name: d.name, AdminUp: true, OperUp: true, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}}
}
func (d metricsDev) Stats() (afpacket.Stats, error) {
	return afpacket.Stats{RxPackets: 11, RxBytes: 1100}, nil
}

// oddPort is an interface name with the characters the text format
// escapes: quote, backslash, newline.
const oddPort = "eth\"1\\\n"

// wantFamilies are the gswitch_ metric families of an agent with a router
// port: the names of the hand-written text writer the collectors replaced.
var wantFamilies = []string{
	"gswitch_backend_fallbacks_total", "gswitch_backend_keys_total",
	"gswitch_batch_frames", "gswitch_batches_closed_total", "gswitch_frame_latency_seconds", "gswitch_frame_latency_stage_seconds", "gswitch_group_drops_total",
	"gswitch_l3_drops_total", "gswitch_l3_forwarded_bytes_total", "gswitch_l3_forwarded_packets_total",
	"gswitch_l3_icmp_rate_limited_total", "gswitch_l3_neighbours", "gswitch_l3_queued_total", "gswitch_l3_sent_total",
	"gswitch_learned_macs", "gswitch_malformed_frames_total", "gswitch_meter_drops_total", "gswitch_no_route_total",
	"gswitch_offload_drops_total", "gswitch_openflow_connections", "gswitch_openflow_controllers",
	"gswitch_openflow_output_drops_total", "gswitch_openflow_packet_in_rate_limited_total",
	"gswitch_port_rx_bytes_total", "gswitch_port_rx_dropped_total", "gswitch_port_rx_packets_total",
	"gswitch_port_tx_bytes_total", "gswitch_port_tx_dropped_total", "gswitch_port_tx_packets_total",
	"gswitch_receive_stall_seconds_total", "gswitch_receive_stalls_total",
	"gswitch_route_bytes_total", "gswitch_route_nexthop_packets_total", "gswitch_route_packets_total",
	"gswitch_standalone", "gswitch_switch_write_lock_seconds", "gswitch_table_backend", "gswitch_table_flows", "gswitch_table_lookups_total", "gswitch_table_lpm",
	"gswitch_table_lpm_conflicts", "gswitch_table_lpm_transitions_total", "gswitch_table_matched_total",
	"gswitch_table_miss_drops_total", "gswitch_transmit_handover_idle_seconds_total", "gswitch_transmit_handovers_total", "gswitch_unsupported_actions_total", "gswitch_worker_run_part_seconds",
}

// metricsAgent is an Agent of the CPU engine, a switch of one port
// (oddPort, a router port of 10.0.1.1/24 in table 254) and an agent
// without sessions, its metrics listener open on a free port.
func metricsAgent(t *testing.T) *Agent {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := &Agent{log: log}
	var err error
	if d.eng, err = gpu.Open("cpu", nil, 0, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.eng.Close() })
	if d.router, err = l3.New(l3.Config{Engine: d.eng, Logger: log, Transmit: func(uint32, [][]byte) {},
		Ports: []l3.PortConfig{{No: 1, MAC: l3.MAC{2, 0, 0, 0, 0, 1}, Table: 254, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.1.1/24")}}}}); err != nil {
		t.Fatal(err)
	}
	tab, err := route.New(254, route.Options{PortOK: d.router.Owns})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.router.AttachTable(tab); err != nil {
		t.Fatal(err)
	}
	for _, rt := range d.router.ConnectedRoutes(254) {
		if err := tab.Add(rt); err != nil {
			t.Fatal(err)
		}
	}
	if d.sw, err = pipeline.New(pipeline.Config{DatapathID: 1, Tables: 2, Classifier: d.eng, Router: d.router, Logger: log}); err != nil {
		t.Fatal(err)
	}
	if err := d.sw.AddPort(1, metricsDev{oddPort}); err != nil {
		t.Fatal(err)
	}
	d.agent = openflow.NewAgent(d.sw, openflow.Options{})
	if d.metL, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestServeMetrics runs the agent's metrics server on a real listener,
// scrapes /metrics, parses it with the library's parser, lints it, and
// finds every gswitch_ family of the text writer it replaced with its
// values, the port's odd name escaped.
func TestServeMetrics(t *testing.T) {
	d := metricsAgent(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.serveMetrics(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	url := "http://" + d.metL.Addr().String() + "/metrics"
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %v %s %q", url, err, resp.Status, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("the scrape does not parse: %v\n%s", err, body)
	}
	problems, err := promlint.New(strings.NewReader(string(body))).Lint()
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	var got []string
	for name := range mfs {
		if strings.HasPrefix(name, "gswitch_") {
			got = append(got, name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, wantFamilies) {
		t.Fatalf("gswitch_ families\n%q\nwant\n%q", got, wantFamilies)
	}
	if mfs["go_goroutines"] == nil || mfs["process_open_fds"] == nil {
		t.Errorf("no Go or process collector in the scrape")
	}
	want := `# HELP gswitch_openflow_connections OpenFlow sessions past the handshake (controllers and listener clients such as ovs-ofctl).
# TYPE gswitch_openflow_connections gauge
gswitch_openflow_connections 0
# HELP gswitch_openflow_controllers OpenFlow sessions to the configured controllers (--controller); 0 puts a standalone switch in learning mode.
# TYPE gswitch_openflow_controllers gauge
gswitch_openflow_controllers 0
# HELP gswitch_port_rx_packets_total Frames received.
# TYPE gswitch_port_rx_packets_total counter
gswitch_port_rx_packets_total{name="eth\"1\\\n",port="1"} 11
# HELP gswitch_route_packets_total Packets routed by a route.
# TYPE gswitch_route_packets_total counter
gswitch_route_packets_total{prefix="10.0.1.0/24",table="254"} 0
`
	if err := testutil.ScrapeAndCompare(url, strings.NewReader(want),
		"gswitch_openflow_connections", "gswitch_openflow_controllers", "gswitch_port_rx_packets_total", "gswitch_route_packets_total"); err != nil {
		t.Fatal(err)
	}
}

// TestBeyondLoopback: only a loopback metrics address goes without the
// start-up warning; ":PORT" (every interface) and a host address get it.
func TestBeyondLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:0": false, "[::1]:0": false, ":0": true, "0.0.0.0:0": true} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			if addr == "[::1]:0" {
				continue // no IPv6 loopback here
			}
			t.Fatal(err)
		}
		if got := beyondLoopback(l.Addr()); got != want {
			t.Errorf("beyondLoopback(%s listening as %s) = %v, want %v", addr, l.Addr(), got, want)
		}
		l.Close()
	}
}

// TestDeviceAndP4RuntimeMetrics: with shared device batches (a
// Coalescer, and the workers' Gatherer) and a P4Runtime server, their
// counters are on the page, lint-clean, the batches' closing reasons as
// labels of one family.
func TestDeviceAndP4RuntimeMetrics(t *testing.T) {
	d := metricsAgent(t)
	var err error
	if d.co, err = gpu.NewCoalescer(d.eng, gpu.CoalescerConfig{}); err != nil {
		t.Fatal(err)
	}
	if d.p4, err = p4rt.New(p4rt.Config{Switch: d.sw}); err != nil {
		t.Fatal(err)
	}
	if d.ga, err = gpu.NewGatherer(d.eng, gpu.GatherConfig{}); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(append(append(d.coalescerCollectors(), d.gathererCollectors()...), d.p4rtCollectors()...)...)
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	for name, n := range map[string]int{"gswitch_coalescer_batches_total": 1, "gswitch_coalescer_keys_total": 1, "gswitch_coalescer_direct_total": 1,
		"gswitch_coalescer_closed_total": 4, "gswitch_gatherer_batches_total": 1, "gswitch_gatherer_keys_total": 1, "gswitch_gatherer_shares_total": 1,
		"gswitch_gatherer_closed_total": 3, "gswitch_p4rt_packet_ins_total": 1, "gswitch_p4rt_packet_in_drops_total": 1, "gswitch_p4rt_packet_ins_filtered_total": 1} {
		if got, err := testutil.GatherAndCount(reg, name); err != nil || got != n {
			t.Errorf("%s: %d series (%v); want %d", name, got, err, n)
		}
	}
	d.co, d.ga, d.p4 = nil, nil, nil
	if len(d.coalescerCollectors())+len(d.gathererCollectors())+len(d.p4rtCollectors()) != 0 {
		t.Errorf("collectors without a Coalescer or a P4Runtime server")
	}
}
