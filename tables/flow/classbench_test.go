package flow

import (
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/internal/shareddata"
)

// loadACL1 reads the shared ClassBench acl1 filter set; a missing file fails
// the test.
func loadACL1(t testing.TB) []CBRule {
	t.Helper()
	path := shareddata.Path(t, "classbench/acl1_20000.txt")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rules, err := ReadClassBench(f, path)
	if err != nil {
		t.Fatal(err)
	}
	return rules
}

// TestClassBenchACL1 loads the real acl1 filter set, expands it, builds every
// classifier and checks 20K packets against a scan of every rule and against
// ClassBench's own range semantics.
func TestClassBenchACL1(t *testing.T) {
	cb := loadACL1(t)
	if len(cb) != 2572 {
		t.Fatalf("acl1: %d filters, want 2572", len(cb))
	}
	rules, err := ExpandClassBench(cb)
	if err != nil {
		t.Fatal(err)
	}
	keys := ClassBenchTraffic(cb, 20000, 1)
	want := make([]RuleID, len(keys))
	wantCB := make([]int, len(keys))
	hits := 0
	for i := range keys {
		want[i] = BruteForce(rules, &keys[i])
		h := CBHeaderOf(&keys[i])
		wantCB[i] = CBFirstMatch(cb, &h)
		if wantCB[i] >= 0 {
			hits++
		}
		// the expansion keeps ClassBench's semantics
		if got := -1; want[i] != NoMatch {
			got = int(rules[want[i]].Cookie)
			if got != wantCB[i] {
				t.Fatalf("packet %d %+v: expanded rules pick filter %d, ClassBench %d", i, h, got, wantCB[i])
			}
		} else if wantCB[i] != -1 {
			t.Fatalf("packet %d %+v: no expanded rule, ClassBench filter %d", i, h, wantCB[i])
		}
	}
	if hits < len(keys)*3/4 {
		t.Errorf("only %d of %d packets match a filter", hits, len(keys))
	}
	for _, a := range algos {
		tab, err := NewTable(Config{Algo: a, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rules {
			if id, _, err := tab.Add(rules[i], 0); err != nil || id != RuleID(i) {
				t.Fatalf("%v: adding rule %d (%s): id %d, %v", a, i, rules[i].Match.String(), id, err)
			}
		}
		out := make([]RuleID, len(keys))
		tab.LookupBatch(keys, out)
		for i := range keys {
			if out[i] != want[i] {
				t.Fatalf("%v: packet %d: got rule %d, want %d", a, i, out[i], want[i])
			}
		}
		st := tab.Stats()
		t.Logf("%v: %d filters, %d rules, %d classes, projection %v, %d image bytes (%.1f per rule), %d%% of packets match",
			a, len(cb), st.Rules, st.Classes, tab.UsedWords(), st.ImageBytes, st.BytesPerRule, 100*hits/len(keys))
	}
}

func TestReadClassBenchErrors(t *testing.T) {
	good := "@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x06/0xFF\t0x0000/0x0200\t"
	for _, tc := range []struct{ line, want string }{
		{"1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x06/0xFF", "starts with @"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80", "4 tab-separated fields"},
		{good + "\tx\ty", "fields, want 5 or 6"},
		{"@1.2.3/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x06/0xFF", "dotted quad"},
		{"@1.2.3.256/32\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x06/0xFF", "not in 0..255"},
		{"@1.2.3.0/33\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x06/0xFF", "prefix length"},
		{"@1.2.3.1/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x06/0xFF", "host bits"},
		{"@1.2.3.0/24\t5.6.0.0\t0 : 65535\t80 : 80\t0x06/0xFF", "a.b.c.d/len"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65536\t80 : 80\t0x06/0xFF", "0..65535"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t81 : 80\t0x06/0xFF", "lo > hi"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 - 65535\t80 : 80\t0x06/0xFF", "lo : hi"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x06/0x0F", "want 0x00 or 0xFF"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x06/0x00", "outside the mask"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t6/255", "hexadecimal"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x106/0xFF", "hexadecimal"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x06/0xFF\t0x1000/0x0100", "outside the mask"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x11/0xFF\t0x1000/0x1000", "need protocol 6"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x00/0x00", "OpenFlow matches ports only"},
		{"@1.2.3.0/24\t5.6.0.0/16\t0 : 65535\t80 : 80\t0x01/0xFF", "OpenFlow matches ports only"},
	} {
		in := good + "\n\n" + tc.line + "\n"
		_, err := ReadClassBench(strings.NewReader(in), "x.txt")
		if err == nil || !strings.HasPrefix(err.Error(), "x.txt:3: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got %v, want x.txt:3: ...%s", tc.line, err, tc.want)
		}
	}
	long := "@" + strings.Repeat("1", maxCBLine+10)
	if _, err := ReadClassBench(strings.NewReader(good+"\n"+long), "y"); err == nil || !strings.HasPrefix(err.Error(), "y:2: ") {
		t.Errorf("long line: %v", err)
	}
	rs, err := ReadClassBench(strings.NewReader(good+"\n@0.0.0.0/0\t0.0.0.0/0\t0 : 65535\t0 : 65535\t0x00/0x00\n"), "z")
	if err != nil || len(rs) != 2 || rs[1].Line != 2 || rs[0].FlagsMask != 0x200 {
		t.Errorf("good lines: %v %+v", err, rs)
	}
	if _, err := ExpandClassBench([]CBRule{{SrcPortLo: 5, SrcPortHi: 6, DstPortHi: 0xffff}}); err == nil {
		t.Error("ExpandClassBench accepted ports without a protocol")
	}
	if _, err := ExpandClassBench([]CBRule{{SrcPortHi: 0xffff, DstPortHi: 0xffff, FlagsMask: 1, Flags: 1}}); err == nil {
		t.Error("ExpandClassBench accepted flags without TCP")
	}
}

// TestRangePrefixes checks that the expansion of random ranges covers
// exactly the range with the minimal number of prefixes (at most 30).
func TestRangePrefixes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for i := 0; i < 2000; i++ {
		lo, hi := uint16(rng.Uint32()), uint16(rng.Uint32())
		if i%5 == 0 {
			lo = uint16(rng.IntN(4))
		}
		if lo > hi {
			lo, hi = hi, lo
		}
		ps := RangePrefixes(lo, hi)
		if len(ps) > 30 {
			t.Fatalf("%d..%d: %d prefixes", lo, hi, len(ps))
		}
		for _, x := range []int{int(lo) - 1, int(lo), int(hi), int(hi) + 1, int(lo) + rng.IntN(int(hi)-int(lo)+1)} {
			if x < 0 || x > 65535 {
				continue
			}
			in := 0
			for _, p := range ps {
				if uint16(x)&p[1] == p[0] {
					in++
				}
			}
			if want := b2i(x >= int(lo) && x <= int(hi)); in != want {
				t.Fatalf("%d..%d: port %d in %d prefixes of %v", lo, hi, x, in, ps)
			}
		}
	}
	if ps := RangePrefixes(0, 65535); len(ps) != 1 || ps[0] != [2]uint16{0, 0} {
		t.Fatalf("full range: %v", ps)
	}
	if ps := RangePrefixes(1, 65534); len(ps) != 30 {
		t.Fatalf("1..65534: %d prefixes, want 30", len(ps))
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
