package filter

import (
	"fmt"
	"testing"
)

// benchSpecs returns n typical monitoring filters (hosts, nets, ports,
// protocols, flags, VLANs).
func benchSpecs(n int) []Spec {
	var specs []Spec
	for i := 0; len(specs) < n; i++ {
		var e string
		switch i % 8 {
		case 0:
			e = fmt.Sprintf("host 10.0.%d.%d", i/250, i%250)
		case 1:
			e = fmt.Sprintf("tcp port %d", 1000+i)
		case 2:
			e = fmt.Sprintf("net 192.168.%d.0/24 and udp", i%256)
		case 3:
			e = fmt.Sprintf("src host 10.0.0.%d and dst port %d", i%250, 80+i)
		case 4:
			e = "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0"
		case 5:
			e = fmt.Sprintf("vlan %d and ip", i%4000)
		case 6:
			e = fmt.Sprintf("ip6 and udp portrange %d-%d", i, i+100)
		case 7:
			e = fmt.Sprintf("icmp or arp host 10.0.0.%d", i%250)
		}
		specs = append(specs, Spec{Name: fmt.Sprintf("f%d", i), Expr: e})
	}
	return specs
}

func benchEval(b *testing.B, n int) {
	p, err := Compile(benchSpecs(n), LinkEthernet, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	var pkts []testPacket
	for _, pk := range ethernetCorpus() {
		if len(pk.data) == int(pk.wire) { // whole packets, as most captures
			pkts = append(pkts, pk)
		}
	}
	ev := NewEvaluator(p)
	out := make([]uint64, p.Words())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pk := &pkts[i%len(pkts)]
		ev.Eval(pk.data, pk.wire, out)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
	b.ReportMetric(float64(len(p.Criteria)), "criteria")
	b.ReportMetric(float64(len(p.Nodes)), "nodes")
}

func BenchmarkEval1(b *testing.B)    { benchEval(b, 1) }
func BenchmarkEval100(b *testing.B)  { benchEval(b, 100) }
func BenchmarkEval1000(b *testing.B) { benchEval(b, 1000) }
