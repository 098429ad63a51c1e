package packet

import (
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
)

// benchMix is a traffic mix: mostly TCP and UDP over IPv4, some IPv6, VLAN,
// ARP and neighbour discovery, as a datapath port sees it.
func benchMix() [][]byte {
	return [][]byte{
		e4(ip4(0, pTC, tcp(40000, 443, 0x010))),
		e4(ip4(0, pTC, tcp(443, 40000, 0x018)), make([]byte, 1000)),
		e4(ip4(0, pUD, udp(5353, 53, make([]byte, 40)))),
		cat(eth(macB, macA, 0x8100), tag(0, 10, v4), ip4(0, pTC, tcp(1, 2, 0x010))),
		e6(pTC, tcp(1, 2, 0x010)),
		e6(pUD, udp(546, 547, nil)),
		e4(ip4(0, pTC, tcp(40000, 443, 0x002))),
		e4(ip4(0, pI4, icmp4(8, 0))),
		cat(eth(macB, macA, flow.EthTypeARP), arp(1, macA, "10.1.1.1", macC, "10.1.1.2")),
		e6(pI6, icmp6(135, 0, nd("fe80::1234", llOpt(1, macC)))),
		e6(ipProtoHopOpts, ext(pUD, 8), udp(1, 2, nil)),
		e4(ip4(0, pUD, udp(4789, 4789, make([]byte, 50)))),
	}
}

// BenchmarkParse reports ns per frame over the mix.
func BenchmarkParse(b *testing.B) {
	frames := benchMix()
	var k flow.Key
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		for _, f := range frames {
			if Parse(&k, f, 1) != OK {
				b.Fatal("bench frame does not parse")
			}
		}
		n += len(frames)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/packet")
}

// BenchmarkParseIPv4TCP is the common case alone.
func BenchmarkParseIPv4TCP(b *testing.B) {
	f := e4(ip4(0, pTC, tcp(40000, 443, 0x010)))
	var k flow.Key
	b.ReportAllocs()
	for b.Loop() {
		Parse(&k, f, 1)
	}
}
