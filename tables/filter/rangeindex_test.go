package filter

import (
	"fmt"
	"strings"
	"testing"
)

// TestRangeIndex: port-range filters are range-indexed, and a set with
// them answers as the three stages do on every packet of the corpus,
// including truncated ones.
func TestRangeIndex(t *testing.T) {
	var specs []Spec
	for i := range 60 {
		var e string
		switch i % 6 {
		case 0:
			e = fmt.Sprintf("ip6 and udp portrange %d-%d", 1000+i*7, 1100+i*7)
		case 1:
			e = fmt.Sprintf("tcp src portrange %d-%d", i*500, i*500+50)
		case 2:
			e = fmt.Sprintf("udp[2:2] >= %d and udp[2:2] <= %d", 50+i, 60+i)
		case 3:
			e = fmt.Sprintf("portrange %d-%d or host 10.0.0.%d", i, i+3, i)
		case 4:
			e = fmt.Sprintf("tcp[0:2] > %d and not tcp[0:2] > %d", 20+i, 90+i)
		case 5:
			e = fmt.Sprintf("udp[0:2] >= %d", i) // unbounded above: not range-indexed
		}
		specs = append(specs, Spec{fmt.Sprintf("r%d", i), e})
	}
	specs = append(specs, Spec{"p53", "port 53"}, Spec{"p80", "portrange 80-80"}, Spec{"all", "portrange 0-65535"})
	p, err := Compile(specs, LinkEthernet, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.ranges) == 0 {
		t.Fatal("no range index")
	}
	ranged := 0
	for f, g := range p.cfgs {
		if p.rangeCut(g) != nil {
			ranged++
		} else if strings.HasPrefix(specs[f].Expr, "ip6 and ") {
			t.Errorf("%s: not range-indexed", specs[f].Expr)
		}
	}
	ev := NewEvaluator(p)
	a, b := make([]uint64, p.Words()), make([]uint64, p.Words())
	n := 0
	for i, pk := range ethernetCorpus() {
		ev.Eval(pk.data, pk.wire, a)
		ev.EvalStages(pk.data, pk.wire, b)
		for w := range a {
			if a[w] != b[w] {
				t.Fatalf("packet %d: indexed %x, three stages %x (word %d)", i, a[w], b[w], w)
			}
			for x := a[w]; x != 0; x &= x - 1 {
				n++
			}
		}
	}
	t.Logf("%d of %d filters range-indexed in %d indexes; %d matches", ranged, len(specs), len(p.ranges), n)
}
