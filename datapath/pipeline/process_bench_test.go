package pipeline

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// countDev is a Device that counts what it is given and keeps nothing;
// its link state is made once, as afpacket.Port's is.
type countDev struct {
	fakeDev
	link   afpacket.LinkInfo
	frames int
}

func (d *countDev) Link() afpacket.LinkInfo { return d.link }

func (d *countDev) Send(frames [][]byte) (int, error) {
	d.frames += len(frames)
	return len(frames), nil
}

// BenchmarkProcess times Switch.Process on the rule set of gswitchctl
// bench forward (N-1 exact ipv4_dst rules the traffic misses and
// in_port=1,actions=output:2) with 64-byte UDP frames of 16 flows, in
// batches of 128, on the CPU backend: the datapath's own cost per frame,
// without the kernel's receive and send.
func BenchmarkProcess(b *testing.B) {
	for _, rules := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("rules=%d", rules), func(b *testing.B) {
			r := newRig(b, 1, FailSecure)
			out := installTrivial(b, r, rules)
			const batch = 128
			frames := make([][]byte, batch)
			for i := range frames {
				f := make([]byte, 60)
				copy(f, []byte{2, 0, 0, 0, 0, 0xfe, 2, 0, 0, 0, 0, 1, 8, 0, 0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17})
				copy(f[26:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
				binary.BigEndian.PutUint16(f[34:], uint16(10000+i%16))
				binary.BigEndian.PutUint16(f[36:], 9)
				binary.BigEndian.PutUint16(f[38:], 26)
				frames[i] = f
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				r.sw.Process(1, frames)
			}
			b.StopTimer()
			if out.frames != b.N*batch {
				b.Fatalf("port 2 got %d frames of %d", out.frames, b.N*batch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/frame")
		})
	}
}

// installTrivial adds port 2 (a counting device) to r's switch and
// installs bench forward's trivial set: rules-1 exact ipv4_dst rules
// that miss, and in_port=1,actions=output:2.
func installTrivial(b *testing.B, r *rig, rules int) *countDev {
	out := &countDev{}
	out.link = out.fakeDev.Link()
	if err := r.sw.AddPort(2, out); err != nil {
		b.Fatal(err)
	}
	for i := range rules - 1 {
		var m flow.Match
		m.SetEthType(flow.EthTypeIPv4)
		if err := m.SetIPv4Dst(0x0a800000+uint32(i), 32); err != nil {
			b.Fatal(err)
		}
		r.flowMod(b, &rule.FlowMod{Command: rule.FlowAdd, Priority: 200, Match: m})
	}
	r.flowMod(b, &rule.FlowMod{Command: rule.FlowAdd, Priority: 100, Match: matchInPort(1), Instructions: applyOut(2)})
	return out
}
