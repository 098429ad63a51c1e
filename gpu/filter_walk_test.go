package gpu

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/filter"
	"github.com/gswitch/gswitch/tables/filter/filtertest"
)

// TestWalkEvaluatorEqualsEval: the walk form with its index (the CPU twin
// of gpf_walk) answers what filter.Evaluator.Eval answers, packet by
// packet, on every test capture, whole and reduced to the set's rows,
// for sets of 120 and 1,000 filters and one with offsets read from the
// packet; and the index indexes most of a monitoring set.
func TestWalkEvaluatorEqualsEval(t *testing.T) {
	for _, n := range []int{120, 1000} {
		for _, path := range filtertest.Captures(t) {
			link, pkts := filtertest.ReadCapture(t, path)
			var specs []filter.Spec
			for _, sp := range append(filtertest.Specs(n), filter.Spec{Name: "var", Expr: "tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420"}) {
				if _, err := filter.CompileOne(sp.Expr, link, false, nil); err == nil {
					specs = append(specs, sp)
				}
			}
			p, err := filter.Compile(specs, link, false, nil)
			if err != nil {
				t.Fatal(err)
			}
			l := p.Layout()
			ix := BuildWalkIndex(l)
			we := NewWalkEvaluator(l, ix)
			ev := filter.NewEvaluator(p)
			snap, _ := FilterSnap(l, 1<<16)
			want, got, red := make([]uint64, p.Words()), make([]uint64, p.Words()), make([]uint64, p.Words())
			matches := 0
			for k, pk := range pkts {
				ev.Eval(pk.Data, pk.Wire, want)
				we.Eval(pk.Data, pk.Wire, got)
				we.Eval(pk.Data[:min(len(pk.Data), snap)], pk.Wire, red)
				for w := range want {
					if got[w] != want[w] || red[w] != want[w] {
						for f := w * 64; f < min(len(specs), w*64+64); f++ {
							b := uint64(1) << (f % 64)
							if got[w]&b != want[w]&b || red[w]&b != want[w]&b {
								t.Fatalf("%s packet %d filter %d (%s): walk %v (reduced %v), Eval %v", filepath.Base(path), k, f, specs[f].Expr,
									got[w]&b != 0, red[w]&b != 0, want[w]&b != 0)
							}
						}
					}
					matches += popcount64(want[w])
				}
			}
			if we.dups != 0 {
				t.Fatalf("%s: %d filters accepted twice (reached through two fields)", filepath.Base(path), we.dups)
			}
			if n == 1000 && link == filter.LinkEthernet && len(ix.Unindexed) > len(specs)/4 {
				t.Errorf("%s: %d of %d filters unindexed", filepath.Base(path), len(ix.Unindexed), len(specs))
			}
			t.Logf("%s: %d filters (%d unindexed, %d fields, %d slots, %d entries), %d packets, %d matches, equal",
				filepath.Base(path), len(specs), len(ix.Unindexed), len(ix.Fields)/WalkFieldWords, len(ix.Table)/WalkSlotWords, len(ix.IDs), len(pkts), matches)
		}
	}
}

func popcount64(w uint64) int {
	n := 0
	for ; w != 0; w &= w - 1 {
		n++
	}
	return n
}

// TestWalkIndexManyPaths: a filter whose control-flow form has
// exponentially many paths (a chain of or-ed pairs, all of which must
// hold) is indexed or walked always, quickly, and answers Eval's answer.
func TestWalkIndexManyPaths(t *testing.T) {
	e := "(ip[1] = 1 or ip[2] = 2)"
	for i := 3; i < 40; i++ {
		e += fmt.Sprintf(" and (ip[%d] = %d or udp[%d] = %d)", i, i, i%8, i)
	}
	specs := []filter.Spec{{Name: "many", Expr: e}, {Name: "p", Expr: "udp port 53"}}
	p, err := filter.Compile(specs, filter.LinkEthernet, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ix := BuildWalkIndex(p.Layout())
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("the index took %v", d)
	}
	we := NewWalkEvaluator(p.Layout(), ix)
	ev := filter.NewEvaluator(p)
	for _, path := range filtertest.Captures(t) {
		link, pkts := filtertest.ReadCapture(t, path)
		if link != filter.LinkEthernet {
			continue
		}
		want, got := make([]uint64, 1), make([]uint64, 1)
		for k, pk := range pkts {
			ev.Eval(pk.Data, pk.Wire, want)
			we.Eval(pk.Data, pk.Wire, got)
			if want[0] != got[0] {
				t.Fatalf("%s packet %d: walk %b, Eval %b", filepath.Base(path), k, got[0], want[0])
			}
		}
	}
	t.Logf("%d of 2 filters walked always; index built in %v", len(ix.Unindexed), time.Since(t0))
}
