package flow

import (
	"slices"
	"strings"
	"testing"
)

func TestParseSynthetic(t *testing.T) {
	for _, tc := range []struct {
		spec string
		want SynthSpec
	}{
		{"1024,16", SynthSpec{N: 1024, C: 16, Cm: 1, Fields: 12}},
		{"2000,40,4,3,12", SynthSpec{N: 2000, C: 40, F: 4, Cm: 3, Fields: 12}},
		{" 100 , 2 ,0", SynthSpec{N: 100, C: 2, Cm: 1, Fields: 12}},
		{"10,1,1,1,1", SynthSpec{N: 10, C: 1, F: 1, Cm: 1, Fields: 1}},
		{"50,15,1,2,4", SynthSpec{N: 50, C: 15, F: 1, Cm: 2, Fields: 4}},
	} {
		got, err := ParseSynthetic(tc.spec)
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.spec, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ spec, want string }{
		{"", "want N,C"},
		{"10", "want N,C"},
		{"1,2,3,4,5,6", "want N,C"},
		{"x,2", "not a number"},
		{"10,-2", "not a number"},
		{"0,0", "N=0"},
		{"10,20", "C=20 classes, want 1..N"},
		{"10,0", "C=0"},
		{"10,5,6", "F=6"},
		{"10,5,0,6", "Cm=6"},
		{"10,5,0,0", "Cm=0"},
		{"10,5,0,1,13", "f=13"},
		{"10,5,0,1,0", "f=0"},
		{"10,2,0,1,1", "1 fields allow 0 classes that are not full"},
		{"100,16,0,1,4", "4 fields allow 14"},
		{"100,2,2,1,4", "F=2 full classes, but 4 fields allow 1"},
		{"1000,700,626,1,12", "allow 625"},
		{"99999999,2", "not a number"},
	} {
		_, err := ParseSynthetic(tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.spec, err, tc.want)
		}
	}
	if s, _ := ParseSynthetic("64,4,1,2,12"); !strings.Contains(s.String(), "64 rules in 4 classes (1 full), 2 overlapping, 12 fields: in_port,eth_src") {
		t.Errorf("String: %s", s)
	}
}

// TestSynthGenerate checks generated sets against their definition: N valid
// rules, C distinct masks of which F match all f fields, N/C rules per class
// (give or take one), no repeated match and priority, deterministic, and
// traffic packets that match their group's Cm rules.
func TestSynthGenerate(t *testing.T) {
	for _, spec := range []string{"1000,16", "2000,40,4,3,12", "300,20,0,1,6", "500,30,25,2,7", "64,15,1,4,4", "10,1,1,1,1", "200,200,10,7,8"} {
		s, err := ParseSynthetic(spec)
		if err != nil {
			t.Fatal(err)
		}
		rules := s.Generate(3)
		if len(rules) != s.N {
			t.Fatalf("%s: %d rules", spec, len(rules))
		}
		if again := s.Generate(3); !slices.Equal(again, rules) {
			t.Fatalf("%s: not deterministic", spec)
		}
		perMask := map[Key]int{}
		full := 0
		seen := map[Match]map[uint16]bool{}
		allFieldsMask := synthAll(s.Fields)
		for i := range rules {
			r := &rules[i]
			if err := r.Match.Validate(); err != nil {
				t.Fatalf("%s: rule %d %s: %v", spec, i, r.Match.String(), err)
			}
			if perMask[r.Match.Mask] == 0 && fieldsOf(&r.Match) == allFieldsMask {
				full++
			}
			perMask[r.Match.Mask]++
			if seen[r.Match] == nil {
				seen[r.Match] = map[uint16]bool{}
			}
			if seen[r.Match][r.Priority] {
				t.Fatalf("%s: rule %d repeats a match and priority", spec, i)
			}
			seen[r.Match][r.Priority] = true
			for _, f := range allFields {
				if r.Match.Has(f) && r.Match.CheckField(f) == nil && !slices.Contains(synthFields[:s.Fields], f) {
					t.Fatalf("%s: rule %d uses %v beyond the first %d fields", spec, i, f, s.Fields)
				}
			}
		}
		if len(perMask) != s.C || full != s.F {
			t.Fatalf("%s: %d classes (%d full), want %d (%d)", spec, len(perMask), full, s.C, s.F)
		}
		for _, n := range perMask {
			if n < s.N/s.C || n > (s.N+s.C-1)/s.C {
				t.Fatalf("%s: a class of %d rules", spec, n)
			}
		}
		keys := SynthTraffic(s, rules, 500, 4)
		for i := range keys {
			matched := map[Key]bool{}
			for j := range rules {
				if rules[j].Match.Matches(&keys[i]) {
					matched[rules[j].Match.Mask] = true
				}
			}
			if len(matched) < min(s.Cm, s.C) && s.N%s.Cm == 0 {
				t.Fatalf("%s: packet %d matches rules in %d classes, want at least %d", spec, i, len(matched), s.Cm)
			}
		}
	}
}

// fieldsOf returns the set of synthFields a match uses, as a bit set.
func fieldsOf(m *Match) uint32 {
	var s uint32
	for i, f := range synthFields {
		if m.Has(f) {
			s |= 1 << i
		}
	}
	return s
}

// synthAll returns the bit set of the first f synthetic fields.
func synthAll(f int) uint32 { return uint32(1)<<f - 1 }
