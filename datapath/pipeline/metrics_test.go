package pipeline

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/tables/rule"
)

// oddName is a port name with every character the text format escapes
// (quote, backslash, newline) and some it passes as they are (tab, a
// control character); Linux accepts all of them in an interface name.
const oddName = "a\"b\\c\nd\te\x01"

// switchMetricNames are the metric families the switch's collector writes:
// the names of the text writer it replaced.
var switchMetricNames = []string{
	"gswitch_batch_frames", "gswitch_batches_closed_total", "gswitch_frame_latency_seconds", "gswitch_frame_latency_stage_seconds", "gswitch_group_drops_total", "gswitch_learned_macs",
	"gswitch_malformed_frames_total", "gswitch_meter_drops_total", "gswitch_no_route_total", "gswitch_offload_drops_total",
	"gswitch_port_rx_bytes_total", "gswitch_port_rx_dropped_total", "gswitch_port_rx_packets_total",
	"gswitch_port_tx_bytes_total", "gswitch_port_tx_dropped_total", "gswitch_port_tx_packets_total",
	"gswitch_receive_stall_seconds_total", "gswitch_receive_stalls_total",
	"gswitch_standalone", "gswitch_switch_write_lock_seconds", "gswitch_table_flows", "gswitch_table_lookups_total", "gswitch_table_lpm",
	"gswitch_table_lpm_conflicts", "gswitch_table_lpm_transitions_total", "gswitch_table_matched_total",
	"gswitch_table_miss_drops_total", "gswitch_transmit_handover_idle_seconds_total", "gswitch_transmit_handovers_total", "gswitch_unsupported_actions_total", "gswitch_worker_run_part_seconds",
}

// metricsRig is a switch of ports p1, p2 and oddName (3, whose device
// reports known counters) with a flow from 1 to 2, after a frame on 1
// (forwarded), two on 2 (table misses) and a batch of a frame and a
// truncated one on 3 (a miss, a malformed frame).
func metricsRig(t *testing.T) *rig {
	r := newRig(t, 2, FailSecure)
	if err := r.sw.AddPort(3, statsDev{&fakeDev{name: oddName}}); err != nil {
		t.Fatal(err)
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: applyOut(2)})
	f := udpFrame(t, "10.0.0.1", "10.0.0.2")
	r.sw.Process(1, [][]byte{f})
	r.sw.Process(2, [][]byte{udpFrame(t, "10.0.0.2", "10.0.0.1"), udpFrame(t, "10.0.0.2", "10.0.0.1")})
	r.sw.Process(3, [][]byte{udpFrame(t, "10.0.0.3", "10.0.0.1"), f[:10]})
	return r
}

// statsDev is a fakeDev whose device counters are known.
type statsDev struct{ *fakeDev }

func (statsDev) Stats() (afpacket.Stats, error) {
	return afpacket.Stats{RxPackets: 7, RxBytes: 700, TxPackets: 5, TxBytes: 500, TxErrors: 1}, nil
}

// TestCollector compares the collector's output on the rig with the
// counts the rig's traffic makes, the odd port name escaped.
func TestCollector(t *testing.T) {
	r := metricsRig(t)
	c := r.sw.Collector()
	if problems, err := testutil.CollectAndLint(c); err != nil || len(problems) != 0 {
		t.Fatalf("lint: %v %v", err, problems)
	}
	odd := `name="a\"b\\c\nd` + "\te\x01" + `"`
	want := fmt.Sprintf(`# HELP gswitch_batch_frames Frames per batch run through the pipeline.
# TYPE gswitch_batch_frames histogram
gswitch_batch_frames_bucket{le="1"} 1
gswitch_batch_frames_bucket{le="4"} 3
gswitch_batch_frames_bucket{le="16"} 3
gswitch_batch_frames_bucket{le="64"} 3
gswitch_batch_frames_bucket{le="256"} 3
gswitch_batch_frames_bucket{le="1024"} 3
gswitch_batch_frames_bucket{le="4096"} 3
gswitch_batch_frames_bucket{le="16384"} 3
gswitch_batch_frames_bucket{le="65536"} 3
gswitch_batch_frames_bucket{le="+Inf"} 3
gswitch_batch_frames_sum 5
gswitch_batch_frames_count 3
# HELP gswitch_batches_closed_total Batches a port loop closed, by why: full (batch size reached) or delay (the oldest frame waited the maximum delay).
# TYPE gswitch_batches_closed_total counter
gswitch_batches_closed_total{why="delay"} 0
gswitch_batches_closed_total{why="full"} 0
# HELP gswitch_port_rx_bytes_total Bytes received.
# TYPE gswitch_port_rx_bytes_total counter
gswitch_port_rx_bytes_total{%[1]s,port="3"} 700
gswitch_port_rx_bytes_total{name="p1",port="1"} 0
gswitch_port_rx_bytes_total{name="p2",port="2"} 0
# HELP gswitch_port_rx_dropped_total Received frames dropped (malformed, table miss, no route).
# TYPE gswitch_port_rx_dropped_total counter
gswitch_port_rx_dropped_total{%[1]s,port="3"} 2
gswitch_port_rx_dropped_total{name="p1",port="1"} 0
gswitch_port_rx_dropped_total{name="p2",port="2"} 2
# HELP gswitch_port_rx_packets_total Frames received.
# TYPE gswitch_port_rx_packets_total counter
gswitch_port_rx_packets_total{%[1]s,port="3"} 7
gswitch_port_rx_packets_total{name="p1",port="1"} 0
gswitch_port_rx_packets_total{name="p2",port="2"} 0
# HELP gswitch_port_tx_bytes_total Bytes sent.
# TYPE gswitch_port_tx_bytes_total counter
gswitch_port_tx_bytes_total{%[1]s,port="3"} 500
gswitch_port_tx_bytes_total{name="p1",port="1"} 0
gswitch_port_tx_bytes_total{name="p2",port="2"} 0
# HELP gswitch_port_tx_dropped_total Frames the device refused.
# TYPE gswitch_port_tx_dropped_total counter
gswitch_port_tx_dropped_total{%[1]s,port="3"} 1
gswitch_port_tx_dropped_total{name="p1",port="1"} 0
gswitch_port_tx_dropped_total{name="p2",port="2"} 0
# HELP gswitch_port_tx_packets_total Frames sent.
# TYPE gswitch_port_tx_packets_total counter
gswitch_port_tx_packets_total{%[1]s,port="3"} 5
gswitch_port_tx_packets_total{name="p1",port="1"} 0
gswitch_port_tx_packets_total{name="p2",port="2"} 0
# HELP gswitch_standalone 1 while the switch acts as a learning switch (standalone fail mode, no controller).
# TYPE gswitch_standalone gauge
gswitch_standalone 0
# HELP gswitch_table_flows Flow entries in the table.
# TYPE gswitch_table_flows gauge
gswitch_table_flows{table="0"} 1
gswitch_table_flows{table="1"} 0
gswitch_table_flows{table="2"} 0
# HELP gswitch_table_lookups_total Packets looked up in the table.
# TYPE gswitch_table_lookups_total counter
gswitch_table_lookups_total{table="0"} 4
gswitch_table_lookups_total{table="1"} 0
gswitch_table_lookups_total{table="2"} 0
# HELP gswitch_table_matched_total Packets that matched an entry of the table.
# TYPE gswitch_table_matched_total counter
gswitch_table_matched_total{table="0"} 1
gswitch_table_matched_total{table="1"} 0
gswitch_table_matched_total{table="2"} 0
# HELP gswitch_table_miss_drops_total Packets dropped on a table miss without a table-miss entry.
# TYPE gswitch_table_miss_drops_total counter
gswitch_table_miss_drops_total 3
`, odd)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"gswitch_port_rx_packets_total", "gswitch_port_rx_bytes_total", "gswitch_port_tx_packets_total",
		"gswitch_port_tx_bytes_total", "gswitch_port_rx_dropped_total", "gswitch_port_tx_dropped_total", "gswitch_table_flows", "gswitch_table_lookups_total",
		"gswitch_table_matched_total", "gswitch_table_miss_drops_total", "gswitch_batch_frames",
		"gswitch_batches_closed_total", "gswitch_standalone"); err != nil {
		t.Fatal(err)
	}
	var malformed uint64
	for _, v := range r.sw.Counters().Malformed {
		malformed += v
	}
	if malformed != 1 {
		t.Fatalf("%d malformed frames counted, want 1", malformed)
	}
}

// TestWriteMetrics parses WriteMetrics' text with the library's parser:
// every family of the switch is there with its type, the odd port name
// comes back as it was, and the malformed frame is counted by reason.
func TestWriteMetrics(t *testing.T) {
	r := metricsRig(t)
	var b strings.Builder
	if err := WriteMetrics(&b, r.sw); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("the metrics do not parse: %v\n%s", err, b.String())
	}
	var names []string
	for name, mf := range mfs {
		names = append(names, name)
		if typ := mf.GetType().String(); strings.HasSuffix(name, "_total") != (typ == "COUNTER") {
			t.Errorf("%s is a %s", name, typ)
		}
	}
	slices.Sort(names)
	if !slices.Equal(names, switchMetricNames) {
		t.Fatalf("metric families %q, want %q", names, switchMetricNames)
	}
	var found bool
	for _, m := range mfs["gswitch_port_rx_packets_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "name" && l.GetValue() == oddName {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no port named %q:\n%s", oddName, b.String())
	}
	var malformed float64
	for _, m := range mfs["gswitch_malformed_frames_total"].Metric {
		malformed += m.Counter.GetValue()
	}
	if malformed != 1 || mfs["gswitch_batch_frames"].GetType().String() != "HISTOGRAM" {
		t.Errorf("malformed frames %v, batch_frames a %v:\n%s", malformed, mfs["gswitch_batch_frames"].GetType(), b.String())
	}
}
