package flow

import (
	"math/rand/v2"
	"testing"
)

// checkPrefilters checks every class's prefilter in the image: the
// selector is the class's, and the bitmap has exactly the buckets of the
// class's members (a stale set bit costs only speed, so answers alone do
// not show it).
func checkPrefilters(t *testing.T, tab *Table, what string) {
	t.Helper()
	tc, ok := tab.cls.(*tuple)
	if !ok {
		t.Fatalf("%s: not a tuple-family table", what)
	}
	words := tc.m.Words(RegionClasses)
	for _, c := range tc.order {
		var want [PreWords]uint32
		for _, d := range c.members {
			var v [KeyWords]uint32
			projectKey(&d.m.Value, tc.proj, v[:tc.p])
			b := PreBucket(c.sel, v[:tc.p])
			want[b>>5] |= 1 << (b & 31)
		}
		base := c.slot*tc.d + tc.p
		if words[base+DescSel] != c.sel {
			t.Fatalf("%s: class %d: selector %#x in the image, %#x in the class", what, c.slot, words[base+DescSel], c.sel)
		}
		for w := range want {
			if got := words[base+DescPre+w]; got != want[w] {
				t.Fatalf("%s: class %d: prefilter word %d is %#08x, its members give %#08x", what, c.slot, w, got, want[w])
			}
		}
	}
}

// TestPrefilterBitmaps adds a synthetic rule set to each tuple-family
// algorithm, deletes half of it and adds some back, checking after each
// phase that every prefilter bitmap is exactly its class's members' and
// that the answers equal a scan.
func TestPrefilterBitmaps(t *testing.T) {
	spec, err := ParseSynthetic("4096,64")
	if err != nil {
		t.Fatal(err)
	}
	rules := spec.Generate(11)
	keys := SynthTraffic(spec, rules, 3000, 12)
	for _, algo := range []Algo{Tuple, Bloom, Merge} {
		tab, err := NewTable(Config{Algo: algo, Seed: 5})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]RuleID, len(rules))
		for i := range rules {
			if ids[i], _, err = tab.Add(rules[i], 0); err != nil {
				t.Fatalf("%v: rule %d: %v", algo, i, err)
			}
		}
		checkPrefilters(t, tab, algo.String()+" after adds")
		rng := rand.New(rand.NewPCG(3, 4))
		live := make([]bool, len(rules))
		for i := range rules {
			live[i] = true
			if rng.IntN(2) == 0 {
				if _, ok := tab.DeleteID(ids[i]); !ok {
					t.Fatalf("%v: deleting rule %d", algo, i)
				}
				live[i] = false
			}
		}
		checkPrefilters(t, tab, algo.String()+" after deletes")
		for i := range rules {
			if !live[i] && rng.IntN(4) == 0 {
				if _, _, err := tab.Add(rules[i], 0); err != nil {
					t.Fatal(err)
				}
				live[i] = true
			}
		}
		checkPrefilters(t, tab, algo.String()+" after re-adds")
		var kept []Rule
		tab.Rules(func(_ RuleID, r *Rule) bool {
			kept = append(kept, *r)
			return true
		})
		out := make([]RuleID, len(keys))
		tab.LookupBatch(keys, out)
		for i := range keys {
			want := BruteForce(kept, &keys[i])
			if want == NoMatch {
				if out[i] != NoMatch {
					t.Fatalf("%v: packet %d: rule %d, want none", algo, i, out[i])
				}
				continue
			}
			if r, ok := tab.Rule(out[i]); !ok || r.Priority != kept[want].Priority || !r.Match.Matches(&keys[i]) {
				t.Fatalf("%v: packet %d: rule %d, the scan finds %s priority %d", algo, i, out[i], kept[want].Match.String(), kept[want].Priority)
			}
		}
	}
}

// TestPrefilterPrunesACL1 checks that the prefilter does its job on the
// real acl1 set under merged search: of the classes a packet's walk
// reaches (before the early exit), it passes fewer than a third to the
// Bloom filter (6.8 of 25.9 when written).
func TestPrefilterPrunesACL1(t *testing.T) {
	cb := loadACL1(t)
	rules, err := ExpandClassBench(cb)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := NewTable(Config{Algo: Merge, MaxEntries: 300000})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if _, _, err := tab.Add(r, 0); err != nil {
			t.Fatal(err)
		}
	}
	checkPrefilters(t, tab, "acl1")
	v := tab.View()
	keys := ClassBenchTraffic(cb, 20000, 1)
	var reached, passed int
	pk := make([]uint32, v.p)
	for i := range keys {
		projectKey(&keys[i], v.proj[:v.p], pk)
		want, _ := v.Lookup(pk)
		var best uint64
		for _, slot := range v.order[:v.hdr[HdrCount]] {
			d := v.desc[int(slot)*v.dw+v.p:]
			if best>>32 > uint64(d[DescMaxPrio]) {
				break
			}
			reached++
			if preHas(d, PreBucket(d[DescSel], pk)) {
				passed++
			}
			// The walk's best so far, from the table's own classes.
			c := tab.cls.(*tuple).slots[slot]
			for _, dm := range c.members {
				if dm.m.Matches(&keys[i]) {
					if r := uint64(dm.hprio)<<32 | uint64(^uint32(dm.hid)); r > best {
						best = r
					}
				}
			}
		}
		if got := RuleID(NoMatch); best != 0 {
			if got = RankID(best); got != want {
				t.Fatalf("packet %d: the walk finds rule %d, the View %d", i, got, want)
			}
		}
	}
	r, p := float64(reached)/float64(len(keys)), float64(passed)/float64(len(keys))
	t.Logf("acl1 merge: %d classes; per packet %.2f reached, %.2f pass the prefilter", tab.Stats().Classes, r, p)
	if p*3 > r {
		t.Errorf("the prefilter passes %.2f of %.2f classes per packet: want fewer than a third", p, r)
	}
}
