package flow

import (
	"fmt"
	"sync"
	"testing"
)

// benchSet is a rule set and its traffic.
type benchSet struct {
	name  string
	rules []Rule
	keys  []Key
}

var (
	benchOnce sync.Once
	benchSets []benchSet
)

// loadBenchSets builds the benchmark rule sets once: ClassBench acl1 and
// synthetic sets of 1K rules in 16 classes and 64K rules in 256 classes.
func loadBenchSets(b *testing.B) []benchSet {
	benchOnce.Do(func() {
		cb := loadACL1(b)
		rules, err := ExpandClassBench(cb)
		if err != nil {
			b.Fatal(err)
		}
		benchSets = append(benchSets, benchSet{"acl1", rules, ClassBenchTraffic(cb, 1<<16, 1)})
		for _, spec := range []string{"1024,16", "65536,256"} {
			s, err := ParseSynthetic(spec)
			if err != nil {
				b.Fatal(err)
			}
			rules := s.Generate(1)
			benchSets = append(benchSets, benchSet{fmt.Sprintf("synth-%d-%d", s.N, s.C), rules, SynthTraffic(s, rules, 1<<16, 2)})
		}
	})
	return benchSets
}

func buildBench(b *testing.B, a Algo, rules []Rule) *Table {
	tab, err := NewTable(Config{Algo: a, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	for i := range rules {
		if _, _, err := tab.Add(rules[i], 0); err != nil {
			b.Fatal(err)
		}
	}
	return tab
}

// BenchmarkLookup times one lookup (ns/op is per packet) with each
// classifier on each rule set; /batch times LookupBatch of 256 packets and
// reports ns per packet.
func BenchmarkLookup(b *testing.B) {
	sets := loadBenchSets(b)
	for _, a := range algos {
		for _, set := range sets {
			if a == Linear && len(set.rules) > 10000 {
				continue
			}
			b.Run(a.String()+"/"+set.name, func(b *testing.B) {
				tab := buildBench(b, a, set.rules)
				b.ResetTimer()
				i := 0
				for b.Loop() {
					tab.Lookup(&set.keys[i&(len(set.keys)-1)])
					i++
				}
			})
			b.Run(a.String()+"/"+set.name+"/batch", func(b *testing.B) {
				tab := buildBench(b, a, set.rules)
				out := make([]RuleID, 256)
				b.ResetTimer()
				i := 0
				for b.Loop() {
					off := (i * 256) & (len(set.keys) - 1)
					tab.LookupBatch(set.keys[off:off+256], out)
					i++
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*256), "ns/key")
			})
		}
	}
}

// BenchmarkAdd times adding the rules of each set to an empty table
// (ns/op is per rule).
func BenchmarkAdd(b *testing.B) {
	sets := loadBenchSets(b)
	for _, a := range algos {
		for _, set := range sets {
			if a == Linear && len(set.rules) > 10000 {
				continue
			}
			b.Run(a.String()+"/"+set.name, func(b *testing.B) {
				n := 0
				for b.Loop() {
					buildBench(b, a, set.rules)
					n += len(set.rules)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/rule")
			})
		}
	}
}
