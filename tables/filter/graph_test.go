package filter

import (
	"strings"
	"testing"
)

// TestCriteriaUniqueAcrossFilters: a set of filters shares criteria and
// sub-predicates; each appears once, and the set answers as the filters
// alone do.
func TestCriteriaUniqueAcrossFilters(t *testing.T) {
	specs := []Spec{{"a", "tcp port 80"}, {"b", "tcp port 80 and host 10.0.0.1"}, {"c", "host 10.0.0.1"},
		{"d", "not tcp port 80"}, {"e", "ip"}, {"f", "ip6 or ip"}}
	p, err := Compile(specs, LinkEthernet, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, c := range p.Criteria {
		if seen[c.String()] {
			t.Errorf("criterion %s twice", c.String())
		}
		seen[c.String()] = true
	}
	nodes := map[Node]bool{}
	for _, n := range p.Nodes {
		if nodes[n] {
			t.Errorf("node %+v twice", n)
		}
		nodes[n] = true
	}
	// "not tcp port 80" is one node over "tcp port 80"'s root.
	if n := p.Nodes[p.Roots[3]-int32(len(p.Criteria))]; n.Op != OpNot || n.A != p.Roots[0] {
		t.Errorf("filter d is %+v, want not(%d)", n, p.Roots[0])
	}
	var sum int
	for _, s := range specs {
		q, _ := CompileOne(s.Expr, LinkEthernet, false, nil)
		sum += len(q.Criteria)
	}
	if len(p.Criteria) >= sum {
		t.Errorf("%d criteria in the set, %d in the filters alone: nothing shared", len(p.Criteria), sum)
	}
}

func TestBytePlan(t *testing.T) {
	p, err := Compile([]Spec{{"a", "tcp dst port 80"}, {"b", "ether[len - 1] = 0"}, {"c", "greater 100"}}, LinkEthernet, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	pl := p.Plan
	if !pl.Full || !pl.WireLen {
		t.Errorf("plan %+v: want Full (computed offset) and WireLen", pl)
	}
	if r := pl.IPv4[14]; len(r) != 1 || r[0] != (Range{2, 2}) {
		t.Errorf("IPv4 transport ranges %+v, want [2,4)", r)
	}
	p, _ = Compile([]Spec{{"a", "host 10.0.0.1"}}, LinkEthernet, false, nil)
	// ether type at 12..14; ARP/RARP addresses at 28..32 and 38..42; IPv4
	// addresses at 26..34.
	want := []Range{{12, 2}, {26, 8}, {38, 4}}
	if got := p.Plan.Abs; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("plan %+v, want %+v", got, want)
	}
}

func TestErrorsOneLineWithPosition(t *testing.T) {
	for expr, pos := range map[string]string{
		"tcp port 80 and":    "position 15",
		"host 10.0.0.1 or $": "position 17",
		"port 70000":         "position 10",
		"vlan 5000":          "position 9",
		"tcp[0:3] = 1":       "position 6",
	} {
		_, err := Compile([]Spec{{"mine", expr}}, LinkEthernet, false, nil)
		if err == nil || !strings.HasPrefix(err.Error(), "filter mine: "+pos+":") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v (want filter mine: %s)", expr, err, pos)
		}
	}
	if _, err := Compile([]Spec{{"a b", "tcp"}}, LinkEthernet, false, nil); err == nil {
		t.Error("a name with a space accepted")
	}
	if _, err := Compile([]Spec{{"a", "tcp"}, {"a", "udp"}}, LinkEthernet, false, nil); err == nil {
		t.Error("duplicate names accepted")
	}
}

// TestIndexedSetEqualsUnindexed: the CPU path's filter index only skips
// filters that reject: a large set answers as the three-stage evaluation
// (which walks nothing and uses no index) on every packet.
func TestIndexedSetEqualsUnindexed(t *testing.T) {
	specs := benchSpecs(400)
	specs = append(specs, Spec{"x1", "host 10.0.0.1 or port 80"}, Spec{"x2", "not host 10.0.0.2"},
		Spec{"x3", "src 10.0.0.1 and dst port 80"}, Spec{"x4", "vlan 100 or vlan 300"}, Spec{"x5", "tcp[100] = 1 or host 10.0.0.1"})
	p, err := Compile(specs, LinkEthernet, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.index) == 0 || len(p.unindexed) > len(specs)/2 {
		t.Fatalf("%d index groups, %d of %d filters unindexed", len(p.index), len(p.unindexed), len(specs))
	}
	ev := NewEvaluator(p)
	a, b := make([]uint64, p.Words()), make([]uint64, p.Words())
	for i, pk := range ethernetCorpus() {
		ev.Eval(pk.data, pk.wire, a)
		ev.EvalStages(pk.data, pk.wire, b)
		for w := range a {
			if a[w] != b[w] {
				t.Fatalf("packet %d: indexed %x, three stages %x (word %d)", i, a[w], b[w], w)
			}
		}
	}
	t.Logf("%d filters: %d index groups, %d unindexed", len(specs), len(p.index), len(p.unindexed))
}
