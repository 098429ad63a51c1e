package flow

import "testing"

// TestMergeMergesClasses checks that merged tuple search holds a synthetic
// set of 128 masks in far fewer classes, with answers equal to a scan.
func TestMergeMergesClasses(t *testing.T) {
	spec, err := ParseSynthetic("8192,128")
	if err != nil {
		t.Fatal(err)
	}
	rules := spec.Generate(7)
	classes := map[Algo]int{}
	for _, a := range []Algo{Tuple, Merge} {
		tab, err := NewTable(Config{Algo: a, Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rules {
			if _, _, err := tab.Add(rules[i], 0); err != nil {
				t.Fatalf("%v: rule %d: %v", a, i, err)
			}
		}
		classes[a] = tab.Stats().Classes
		keys := SynthTraffic(spec, rules, 2000, 8)
		out := make([]RuleID, len(keys))
		tab.LookupBatch(keys, out)
		for i := range keys {
			if want := BruteForce(rules, &keys[i]); out[i] != RuleID(want) && !(want < 0 && out[i] == NoMatch) {
				t.Fatalf("%v: packet %d: rule %d, want %d", a, i, out[i], want)
			}
		}
	}
	if classes[Tuple] != 128 || classes[Merge] > 32 {
		t.Errorf("classes: tuple %d (want 128), merge %d (want at most 32)", classes[Tuple], classes[Merge])
	}
	t.Logf("classes: tuple %d, merge %d", classes[Tuple], classes[Merge])
}

// TestMergeLevels checks that every relaxed mask lies within the rule's
// mask, that each level contains the one before, and that the last is the
// mask itself.
func TestMergeLevels(t *testing.T) {
	spec, _ := ParseSynthetic("4096,256")
	for _, r := range spec.Generate(3) {
		m := r.Match.Mask
		ls := mergeLevels(&m, nil)
		if len(ls) == 0 || ls[len(ls)-1] != m {
			t.Fatalf("%s: levels %d, last is not the mask", r.Match.String(), len(ls))
		}
		for i := range ls {
			if !within(&ls[i], &m) || (i > 0 && !within(&ls[i-1], &ls[i])) {
				t.Fatalf("%s: level %d not nested within the mask", r.Match.String(), i)
			}
		}
	}
}
