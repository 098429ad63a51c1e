package gpu

import (
	"path/filepath"
	"testing"

	"github.com/gswitch/gswitch/tables/filter"
	"github.com/gswitch/gswitch/tables/filter/filtertest"
)

// testPacketFilter runs pf (made for each capture's link type by open) over
// every test capture and wants EvalStages' answers on the whole packets:
// bitmaps and counts.
func testPacketFilter(t *testing.T, open func(p *filter.Program) PacketFilter, extra []filter.Spec) {
	for _, path := range filtertest.Captures(t) {
		link, pkts := filtertest.ReadCapture(t, path)
		var specs []filter.Spec
		for _, sp := range append(filtertest.Specs(120), extra...) {
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
			ok, err := b.Add(pk.Data, pk.Wire)
			if err != nil || !ok {
				t.Fatalf("%s: add: %v %v", path, ok, err)
			}
			ev.EvalStages(pk.Data, pk.Wire, out)
			wantBits = append(wantBits, append([]uint64(nil), out...))
			for f := range want {
				m := uint32(out[f/64] >> (f % 64) & 1)
				want[f] += m
				wantBytes[f] += uint64(m) * uint64(pk.Wire)
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
