package forward

import (
	"math"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
)

// FuzzMarkOf: the sink's reading of a received frame's mark never panics,
// and a rule-set frame's mark reads back as stamped.
func FuzzMarkOf(f *testing.F) {
	var k flow.Key
	_ = k.SetUint(flow.FieldEthType, flow.EthTypeIPv4)
	for _, proto := range []uint64{flow.IPProtoTCP, flow.IPProtoUDP, flow.IPProtoICMP, 47} {
		_ = k.SetUint(flow.FieldIPProto, proto)
		fr, _ := frameOf(&k)
		f.Add(fr)
	}
	f.Add([]byte{})
	f.Add(make([]byte, 13))
	f.Fuzz(func(t *testing.T, d []byte) {
		markOf(d)
		if len(d) < 64 {
			return
		}
		var k flow.Key
		_ = k.SetUint(flow.FieldEthType, flow.EthTypeIPv4)
		_ = k.SetUint(flow.FieldIPProto, uint64(d[0]))
		_ = k.SetUint(flow.FieldVlanVID, uint64(d[1]&1)<<12|uint64(d[2]))
		fr, off := frameOf(&k)
		fs := &frameSet{tmpl: [][]byte{fr}, markOff: []int{off}}
		fs.stamp(fr, 0, uint32(d[3]), uint64(d[4]))
		if st, seq, ok := markOf(fr); !ok || st != uint32(d[3]) || seq != uint32(d[4]) {
			t.Fatalf("proto %d: mark %v %d %d", d[0], ok, st, seq)
		}
	})
}

// FuzzParseLatency: a metrics page of any content is an error or a
// histogram whose quantiles are finite and ordered.
func FuzzParseLatency(f *testing.F) {
	f.Add("gswitch_frame_latency_seconds_bucket{le=\"1e-05\"} 3\ngswitch_frame_latency_seconds_bucket{le=\"+Inf\"} 4\ngswitch_frame_latency_seconds_sum 1\ngswitch_frame_latency_seconds_count 4\n")
	f.Add("# TYPE gswitch_frame_latency_seconds histogram\ngswitch_frame_latency_seconds_count 0\n")
	f.Add("x 1\n")
	f.Add("gswitch_frame_latency_seconds_count 1\ngswitch_frame_latency_stage_seconds_bucket{stage=\"ring\",le=\"1e-05\"} 3\ngswitch_frame_latency_stage_seconds_count{stage=\"ring\"} 4\n")
	f.Add("gswitch_frame_latency_seconds_count 1\ngswitch_gatherer_batches_total 3\ngswitch_gatherer_keys_total +Inf\ngswitch_gatherer_closed_total{why=\"idle\"} 2\n")
	f.Add("gswitch_frame_latency_seconds_count 1\ngswitch_backend_resident_lookups_total{device=\"0\"} 1e308\ngswitch_backend_resident_lookups_total{device=\"1\"} 1e308\n")
	f.Fuzz(func(t *testing.T, page string) {
		h, err := parseLatency(strings.NewReader(page))
		if err != nil {
			return
		}
		if p50, p99 := h.total.quantile(0.5), h.total.quantile(0.99); p50 < 0 || p99 < 0 {
			t.Fatalf("quantiles %v %v", p50, p99)
		}
		for st, sh := range h.stages {
			if p50, p99 := sh.quantile(0.5), sh.quantile(0.99); p50 < 0 || p99 < 0 {
				t.Fatalf("stage %s: quantiles %v %v", st, p50, p99)
			}
		}
		for op, wh := range h.writeLock {
			if p99, m := wh.quantile(0.99), wh.max(); p99 < 0 || m < 0 || wh.count() == 0 && (p99 != 0 || m != 0) {
				t.Fatalf("write lock %s: p99 %v, max %v of %d", op, p99, m, wh.count())
			}
		}
		if d := h.since(h); d != nil && d.total.count() != 0 {
			t.Fatalf("a page less itself holds %d values", d.total.count())
		}
		// The counters are finite and not negative, so the step's means
		// (series.go) are numbers JSON can hold.
		for _, v := range []float64{h.gather, h.gatherKeys, h.gatherShares, h.stalls, h.stallSec, h.handovers, h.resident, h.residentLaunches} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < -1 {
				t.Fatalf("a counter read as %v", v)
			}
		}
		for why, v := range h.gatherClosed {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("shared batches closed %s: %v", why, v)
			}
		}
	})
}
