package filter

import "testing"

func TestZZIndexStats(t *testing.T) {
	for _, n := range []int{100, 1000} {
		p, _ := Compile(benchSpecs(n), LinkEthernet, false, nil)
		nodes := 0
		for _, f := range p.unindexed {
			nodes += len(p.cfgs[f].nodes)
		}
		t.Logf("%d: unindexed %d (cfg nodes %d), index groups %d, groups %d singles %d", n, len(p.unindexed), nodes, len(p.index), len(p.groups), len(p.singles))
	}
}
