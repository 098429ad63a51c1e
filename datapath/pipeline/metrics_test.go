package pipeline

import (
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/rule"
)

func TestWriteMetrics(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: applyOut(2)})
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	r.sw.Process(2, [][]byte{udpFrame(t, "10.0.0.2", "10.0.0.1"), udpFrame(t, "10.0.0.2", "10.0.0.1")})
	var b strings.Builder
	if err := WriteMetrics(&b, r.sw); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"gswitch_table_flows{table=\"0\"} 1\n",
		"gswitch_table_lookups_total{table=\"0\"} 3\n",
		"gswitch_table_matched_total{table=\"0\"} 1\n",
		"gswitch_table_miss_drops_total 2\n",
		"gswitch_port_rx_dropped_total{port=\"2\",name=\"p2\"} 2\n",
		"gswitch_batch_frames_bucket{le=\"1\"} 1\n",
		"gswitch_batch_frames_bucket{le=\"4\"} 2\n",
		"gswitch_batch_frames_bucket{le=\"+Inf\"} 2\n",
		"gswitch_batch_frames_sum 3\ngswitch_batch_frames_count 2\n",
		"# TYPE gswitch_meter_drops_total counter\n",
		"# TYPE gswitch_standalone gauge\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}
