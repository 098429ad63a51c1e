package gpu

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gswitch/gswitch/tables/filter"
)

type capPacket struct {
	data []byte
	wire uint32
}

// readCapture reads a classic pcap file (either byte order): its link type
// and packets. Enough for the test captures of tables/filter.
func readCapture(t testing.TB, path string) (uint32, []capPacket) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 {
		t.Fatalf("%s: short", path)
	}
	var bo binary.ByteOrder = binary.LittleEndian
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4, 0xa1b23c4d:
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		t.Fatalf("%s: not a pcap file", path)
	}
	link := bo.Uint32(b[20:])
	var ps []capPacket
	for off := 24; off+16 <= len(b); {
		incl, orig := int(bo.Uint32(b[off+8:])), bo.Uint32(b[off+12:])
		off += 16
		if off+incl > len(b) {
			break
		}
		ps = append(ps, capPacket{b[off : off+incl], orig})
		off += incl
	}
	return link, ps
}

// filterSpecs returns n monitoring filters (as tables/filter's benchmark)
// and a few whose criteria are expressions, some with offsets read from
// the packet.
func filterSpecs(n int) []filter.Spec {
	specs := []filter.Spec{
		{Name: "x0", Expr: "ip[2:2] > 100"},
		{Name: "x1", Expr: "len > 200 and tcp"},
		{Name: "x2", Expr: "tcp[13] & 2 != 0 or udp[8:2] = 0"},
		{Name: "x3", Expr: "ip[0] & 0xf > 5"},
		{Name: "x4", Expr: "ip[6:2] & 0x1fff = 0 and ip[9] + 1 = 7"},
	}
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
			e = fmt.Sprintf("icmp or arp host 10.0.0.%d or port 53", i%250)
		}
		specs = append(specs, filter.Spec{Name: fmt.Sprintf("f%d", i), Expr: e})
	}
	return specs[:n]
}

func captures(t testing.TB) []string {
	cs, err := filepath.Glob("../tables/filter/testdata/captures/*.pcap")
	if err != nil || len(cs) == 0 {
		t.Fatalf("no test captures: %v", err)
	}
	return cs
}

// testPacketFilter runs pf (made for each capture's link type by open) over
// every test capture and wants EvalStages' answers on the whole packets:
// bitmaps and counts.
func testPacketFilter(t *testing.T, open func(p *filter.Program) PacketFilter, extra []filter.Spec) {
	for _, path := range captures(t) {
		link, pkts := readCapture(t, path)
		var specs []filter.Spec
		for _, sp := range append(filterSpecs(120), extra...) {
			if _, err := filter.CompileOne(sp.Expr, link, false, nil); err == nil { // (no VLANs on loopback)
				specs = append(specs, sp)
			}
		}
		p, err := filter.Compile(specs, link, false, nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		pf := open(p)
		b, err := pf.NewBatch(len(pkts)+1, true)
		if err != nil {
			t.Fatal(err)
		}
		ev := filter.NewEvaluator(p)
		out := make([]uint64, p.Words())
		want := make([]uint32, len(p.Roots))
		wantBytes := make([]uint64, len(p.Roots))
		var wantBits [][]uint64
		for _, pk := range pkts {
			ok, err := b.Add(pk.data, pk.wire)
			if err != nil || !ok {
				t.Fatalf("%s: add: %v %v", path, ok, err)
			}
			ev.EvalStages(pk.data, pk.wire, out)
			wantBits = append(wantBits, append([]uint64(nil), out...))
			for f := range want {
				m := uint32(out[f/64] >> (f % 64) & 1)
				want[f] += m
				wantBytes[f] += uint64(m) * uint64(pk.wire)
			}
		}
		if err := pf.Submit(b); err != nil {
			t.Fatal(err)
		}
		if err := pf.Wait(b); err != nil {
			t.Fatal(err)
		}
		matches := 0
		for k := range pkts {
			for f := range want {
				g := b.Bits[k*b.BitWords+f/32] >> (f % 32) & 1
				if w := uint32(wantBits[k][f/64] >> (f % 64) & 1); g != w {
					t.Fatalf("%s %s: packet %d filter %d (%s): %d, want %d", pf.Name(), filepath.Base(path), k, f, specs[f].Expr, g, w)
				}
			}
		}
		for f := range want {
			if b.Counts[f] != want[f] || b.Bytes[f] != wantBytes[f] {
				t.Fatalf("%s %s: filter %d count %d bytes %d, want %d, %d", pf.Name(), filepath.Base(path), f, b.Counts[f], b.Bytes[f], want[f], wantBytes[f])
			}
			matches += int(want[f])
		}
		t.Logf("%s %s: %d packets, %d filters (%d criteria, %d nodes), snap %d (whole %v): %d matches, equal",
			pf.Name(), filepath.Base(path), len(pkts), len(p.Roots), len(p.Criteria), len(p.Nodes), b.Snap, b.Whole, matches)
		pf.FreeBatch(b)
		pf.Close()
	}
}

func TestCPUFilterReduced(t *testing.T) {
	testPacketFilter(t, func(p *filter.Program) PacketFilter { return NewCPUFilter(p, 0) }, nil)
	// Offsets read from the packet: whole packets.
	testPacketFilter(t, func(p *filter.Program) PacketFilter { return NewCPUFilter(p, 1<<16) },
		[]filter.Spec{{Name: "var", Expr: "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420"}})
}

func TestFilterSnap(t *testing.T) {
	for _, c := range []struct {
		expr    string
		bounded bool
	}{{"tcp port 80", true}, {"ip[2:2] > 100", true}, {"tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420", false}, {"len > 10", true}} {
		p, err := filter.CompileOne(c.expr, filter.LinkEthernet, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		snap, b := FilterSnap(p.Layout(), 2048)
		if b != c.bounded || (b && snap > 200) {
			t.Errorf("%q: snap %d bounded %v, want bounded %v", c.expr, snap, b, c.bounded)
		}
	}
}
