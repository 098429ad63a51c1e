//go:build cuda

package gpu

import (
	"fmt"
	"os"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
)

// BenchmarkCUDAFlowKernel measures the flow kernels side by side on the
// same tables (Bloom and merged) and packets: flow_lookup with refilled
// lanes (the mode of large batches), flow_lookup with one thread per
// packet walking its classes to the end, with a warp per packet (the mode
// of small batches), and flow_lookup_split (G threads per packet, a
// 64-bit atomicMax merging their ranks; Bloom only), reporting Mpackets/s
// of the kernels alone. Every kernel's answers must equal the pipeline's.
func BenchmarkCUDAFlowKernel(b *testing.B) {
	c, err := NewCUDA(0)
	if err != nil {
		b.Skipf("SKIPPED: no usable CUDA device: %v", err)
	}
	defer c.Close()
	sets := []struct {
		name  string
		rules func() ([]flow.Rule, []flow.Key)
	}{
		{"acl1", func() ([]flow.Rule, []flow.Key) {
			fh, err := os.Open(acl1Path(b))
			if err != nil {
				b.Fatal(err)
			}
			defer fh.Close()
			cb, err := flow.ReadClassBench(fh, "acl1")
			if err != nil {
				b.Fatal(err)
			}
			rules, err := flow.ExpandClassBench(cb)
			if err != nil {
				b.Fatal(err)
			}
			return rules, flow.ClassBenchTraffic(cb, 1<<20, 1)
		}},
		{"131072,512", func() ([]flow.Rule, []flow.Key) {
			s, err := flow.ParseSynthetic("131072,512")
			if err != nil {
				b.Fatal(err)
			}
			rules := s.Generate(1)
			return rules, flow.SynthTraffic(s, rules, 1<<18, 2)
		}},
	}
	for si, set := range sets {
		rules, keys := set.rules()
		for ai, algo := range []flow.Algo{flow.Bloom, flow.Merge} {
			tab, err := flow.NewTable(flow.Config{Algo: algo, MaxEntries: 300000})
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rules {
				tab.Add(r, 0)
			}
			id := TableID(100 + 2*si + ai)
			if err := c.Load(id, Flow, tab.Mirror().Sync().Full); err != nil {
				b.Fatal(err)
			}
			n := len(keys)
			soa := flow.PackSoA(keys, tab.UsedWords(), nil)
			want := make([]flow.RuleID, n)
			if err := c.LookupFlow(id, soa, n, want); err != nil {
				b.Fatal(err)
			}
			same := func(b *testing.B, kernel string, got []flow.RuleID) {
				for i := range want {
					if got[i] != want[i] {
						b.Fatalf("packet %d: %s says rule %d, the pipeline %d", i, kernel, got[i], want[i])
					}
				}
			}
			name := fmt.Sprintf("%s/%v", set.name, algo)
			for _, m := range []struct {
				name string
				mode int
			}{{"refill", FlowRefill}, {"one-thread-per-packet", FlowThreadPerPacket}, {"warp-per-packet", FlowWarpPerPacket}} {
				b.Run(name+"/"+m.name, func(b *testing.B) {
					ms, got, err := c.KernelTimeFlowMode(id, soa, n, m.mode, max(b.N, 3))
					if err != nil {
						b.Fatal(err)
					}
					same(b, m.name, got)
					b.ReportMetric(float64(n)/ms/1e3, "Mpps")
				})
			}
			if algo != flow.Bloom {
				continue
			}
			for _, g := range []int{2, 4, 8, 16} {
				b.Run(fmt.Sprintf("%s/split-%d-atomicMax", name, g), func(b *testing.B) {
					ms, got, err := c.FlowSplitTime(id, soa, n, g, max(b.N, 3))
					if err != nil {
						b.Fatal(err)
					}
					same(b, "split", got)
					b.ReportMetric(float64(n)/ms/1e3, "Mpps")
				})
			}
		}
	}
}
