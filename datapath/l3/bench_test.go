package l3

import (
	"testing"

	"github.com/google/gopacket/layers"
)

// BenchmarkRoute routes batches of 256 UDP packets of 256 flows to a
// resolved neighbour on the CPU engine: parse, lookup, ECMP pick,
// counters, TTL, MACs.
func BenchmarkRoute(b *testing.B) {
	g := newRig(b)
	g.send(2, arpFrame(b, layers.ARPReply, mac2, host2, "10.0.2.2", mac2, "10.0.2.1"))
	tmpl := make([][]byte, 256)
	for i := range tmpl {
		tmpl[i] = udp4(b, "10.0.1.2", "10.0.2.2", 64, uint16(1000+i))
	}
	frames := make([][]byte, len(tmpl))
	n := 0
	out := func(uint32, []byte) { n++ }
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i, f := range tmpl {
			frames[i] = append(frames[i][:0], f...)
		}
		g.r.Route(1, frames, out)
	}
	b.StopTimer()
	if n != b.N*len(tmpl) {
		b.Fatalf("forwarded %d of %d", n, b.N*len(tmpl))
	}
	b.ReportMetric(float64(b.N*len(tmpl))/b.Elapsed().Seconds()/1e6, "Mpps")
}
