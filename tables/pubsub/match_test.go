package pubsub

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"
)

func mustParse(t testing.TB, text string) []Spec {
	t.Helper()
	specs, err := Parse(text)
	if err != nil {
		t.Fatalf("Parse(%q): %v", text, err)
	}
	return specs
}

func mustEvent(t testing.TB, js string) Event {
	t.Helper()
	e, err := DecodeJSON([]byte(js))
	if err != nil {
		t.Fatalf("DecodeJSON(%s): %v", js, err)
	}
	return e
}

func tableOf(t testing.TB, specs []Spec) *Table {
	t.Helper()
	tb := New()
	if _, err := tb.AddSpecs(specs); err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestSemanticsEdgeCases pins the semantics of the issue down, case by case,
// for the brute-force evaluator and the indexed matcher alike.
func TestSemanticsEdgeCases(t *testing.T) {
	cases := []struct {
		name, subs, event string
		want              []uint32
	}{
		{"missing attribute under !=", `1: x != 5`, `{"y": 1}`, nil},
		{"!= present", `1: x != 5`, `{"x": 4}`, []uint32{1}},
		{"!= equal", `1: x != 5`, `{"x": 5}`, nil},
		{"!= type mismatch string", `1: x != 5`, `{"x": "5"}`, nil},
		{"!= type mismatch bool", `1: x != "a"`, `{"x": true}`, nil},
		{"= type mismatch", `1: x = true`, `{"x": 1}`, nil},
		{"bool !=", `1: x != true`, `{"x": false}`, []uint32{1}},
		{"bool = false", `1: x = false`, `{"x": false}`, []uint32{1}},
		{"bool against number", `1: x != false`, `{"x": 0}`, nil},
		{"empty string =", `1: s = ""`, `{"s": ""}`, []uint32{1}},
		{"empty prefix", `1: s ^= ""`, `{"s": ""}`, []uint32{1}},
		{"empty substring", `1: s *= ""`, `{"s": "abc"}`, []uint32{1}},
		{"empty suffix", `1: s $= ""`, `{"s": "x"}`, []uint32{1}},
		{"empty string <", `1: s < "a"`, `{"s": ""}`, []uint32{1}},
		{"prefix equal to whole string", `1: s ^= "abc"`, `{"s": "abc"}`, []uint32{1}},
		{"prefix longer than string", `1: s ^= "abcd"`, `{"s": "abc"}`, nil},
		{"suffix equal to whole string", `1: s $= "abc"`, `{"s": "abc"}`, []uint32{1}},
		{"substring whole", `1: s *= "abc"`, `{"s": "abc"}`, []uint32{1}},
		{"substring middle", `1: s *= "b"`, `{"s": "abc"}`, []uint32{1}},
		{"substring twice in value", `1: s *= "a" && s *= "b"`, `{"s": "abab"}`, []uint32{1}},
		{"string byte order", `1: s < "b"`, `{"s": "B"}`, []uint32{1}},
		{"string order prefix", `1: s > "ab"`, `{"s": "abc"}`, []uint32{1}},
		{"string <= equal", `1: s <= "ab"`, `{"s": "ab"}`, []uint32{1}},
		{"int64 max =", `1: x = 9223372036854775807`, `{"x": 9223372036854775807}`, []uint32{1}},
		{"int64 max > max-1", `1: x > 9223372036854775806`, `{"x": 9223372036854775807}`, []uint32{1}},
		{"int64 min <", `1: x < -9223372036854775807`, `{"x": -9223372036854775808}`, []uint32{1}},
		{"int64 min >= min", `1: x >= -9223372036854775808`, `{"x": -9223372036854775808}`, []uint32{1}},
		{"int64 max vs max-1 as ints differ", `1: x != 9223372036854775806`, `{"x": 9223372036854775807}`, []uint32{1}},
		{"int64 max vs float 2^63 equal as floats", `1: x = 9.223372036854775807e18`, `{"x": 9223372036854775807}`, []uint32{1}},
		{"int vs float 2^63 not less", `1: x < 9.223372036854775807e18`, `{"x": 9223372036854775806}`, nil},
		{"float event vs int constraint", `1: x = 3`, `{"x": 3.0}`, []uint32{1}},
		{"int event vs float constraint", `1: x = 3.0`, `{"x": 3}`, []uint32{1}},
		{"int vs float <", `1: x < 3.5`, `{"x": 3}`, []uint32{1}},
		{"float vs int >", `1: x > 3`, `{"x": 3.5}`, []uint32{1}},
		{"float != int equal", `1: x != 3`, `{"x": 3.0}`, nil},
		{"int != float", `1: x != 2.5`, `{"x": 2}`, []uint32{1}},
		{"2^53+1 int vs float", `1: x = 9007199254740992.0`, `{"x": 9007199254740993}`, []uint32{1}},
		{"2^53+1 ints differ", `1: x = 9007199254740992`, `{"x": 9007199254740993}`, nil},
		{"negative zero", `1: x = -0.0`, `{"x": 0}`, []uint32{1}},
		{"two constraints on one name, range", `1: x > 1 && x < 5`, `{"x": 3}`, []uint32{1}},
		{"two constraints on one name, out", `1: x > 1 && x < 5`, `{"x": 5}`, nil},
		{"two != on one name", `1: x != 1 && x != 2`, `{"x": 2}`, nil},
		{"same constraint twice", `1: x = 1 && x = 1`, `{"x": 1}`, []uint32{1}},
		{"two types on one name", `1: x = 1 && x = "1"`, `{"x": 1}`, nil},
		{"alternatives", "1: x = 1 || y = 2", `{"y": 2}`, []uint32{1}},
		{"lines are alternatives", "1: x = 1\n1: y = 2", `{"y": 2}`, []uint32{1}},
		{"same filter on several ports", "3: x = 1\n1: x = 1\n2: x = 1", `{"x": 1}`, []uint32{1, 2, 3}},
		{"port without matching subscription", "1: x = 1\n2: x = 2", `{"x": 1}`, []uint32{1}},
		{"name true", `1: true = true`, `{"true": true}`, []uint32{1}},
		{"conjunction needs all", `1: x = 1 && y = 2`, `{"x": 1}`, nil},
		{"port 0 and max", "0: x = 1\n4294967295: x = 1", `{"x": 1}`, []uint32{0, 4294967295}},
		{"empty event", `1: x != 1`, `{}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			specs := mustParse(t, c.subs)
			e := mustEvent(t, c.event)
			if got := BruteMatch(specs, &e); !slices.Equal(got, c.want) {
				t.Errorf("brute: %s on %s = %v, want %v", c.subs, c.event, got, c.want)
			}
			tb := tableOf(t, specs)
			if got := tb.Match(&e); !slices.Equal(got, c.want) {
				t.Errorf("matcher: %s on %s = %v, want %v", c.subs, c.event, got, c.want)
			}
			if got := EvalLayout(tb.Layout(), &e); !slices.Equal(got, c.want) {
				t.Errorf("layout: %s on %s = %v, want %v", c.subs, c.event, got, c.want)
			}
		})
	}
}

func TestEmptyTable(t *testing.T) {
	tb := New()
	e := mustEvent(t, `{"x": 1}`)
	if got := tb.Match(&e); len(got) != 0 {
		t.Fatalf("empty table matched %v", got)
	}
}

// randGen draws subscriptions and events from small domains, so that
// constraints are often satisfied, values collide across types and the
// numeric edge cases come up.
type randGen struct{ r *rand.Rand }

var (
	rgNames  = []string{"a", "b", "c", "true"}
	rgInts   = []int64{math.MinInt64, -3, -1, 0, 1, 2, 3, 1 << 53, 1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64}
	rgFloats = []float64{math.Inf(-1), -2.5, -1, math.Copysign(0, -1), 0, 0.5, 1, 2, 3, 1 << 53, 9.223372036854775807e18, math.Inf(1)}
)

func (g randGen) str() string {
	b := make([]byte, g.r.Intn(4))
	for i := range b {
		b[i] = "abA"[g.r.Intn(3)]
	}
	return string(b)
}

func (g randGen) value() Value {
	switch g.r.Intn(10) {
	case 0, 1, 2:
		return Int(rgInts[g.r.Intn(len(rgInts))])
	case 3, 4:
		return Float(rgFloats[g.r.Intn(len(rgFloats))])
	case 5, 6, 7, 8:
		return Str(g.str())
	}
	return Bool(g.r.Intn(2) == 1)
}

func (g randGen) constraint() Constraint {
	for {
		c := Constraint{Name: rgNames[g.r.Intn(len(rgNames))], Op: Op(g.r.Intn(int(numOps))), Value: g.value()}
		if c.Op.Applies(c.Value.Type) {
			return c
		}
	}
}

func (g randGen) spec(ports int) Spec {
	s := Spec{Port: uint32(g.r.Intn(ports))}
	for nf := 1 + g.r.Intn(3); nf > 0; nf-- {
		f := make(Filter, 1+g.r.Intn(3))
		for k := range f {
			f[k] = g.constraint()
		}
		s.Filters = append(s.Filters, f)
	}
	return s
}

func (g randGen) event() Event {
	var e Event
	for _, n := range rgNames {
		if g.r.Intn(3) > 0 {
			e.Attrs = append(e.Attrs, Attr{Name: n, Value: g.value()})
		}
	}
	return e
}

// TestMatcherAgainstBrute compares the indexed matcher (and the device
// layout's evaluator) with the brute-force evaluator on random
// subscriptions and events, under adds, removals and port replacements.
func TestMatcherAgainstBrute(t *testing.T) {
	for seed := int64(1); seed <= 30; seed++ {
		g := randGen{rand.New(rand.NewSource(seed))}
		tb := New()
		ports := 1 + g.r.Intn(8)
		for round := 0; round < 20; round++ {
			switch op := g.r.Intn(10); {
			case op < 5:
				var specs []Spec
				for n := 1 + g.r.Intn(20); n > 0; n-- {
					specs = append(specs, g.spec(ports))
				}
				if _, err := tb.AddSpecs(specs); err != nil {
					t.Fatal(err)
				}
			case op < 8:
				subs := tb.List()
				for _, s := range subs {
					if g.r.Intn(3) == 0 {
						if err := tb.Remove(s.ID); err != nil {
							t.Fatal(err)
						}
					}
				}
			case op < 9:
				tb.RemovePort(uint32(g.r.Intn(ports)))
			default:
				s := g.spec(ports)
				if _, _, err := tb.SetPort(s.Port, s.Filters); err != nil {
					t.Fatal(err)
				}
			}
			checkEvents(t, tb, tb.Layout(), g, 30, fmt.Sprintf("seed %d round %d", seed, round))
		}
	}
}

// checkEvents matches n events of g with tb's matcher, its batch matcher
// and the device layout lay, each against the brute-force evaluator over
// tb's subscriptions; where names the test's step in a failure.
func checkEvents(t *testing.T, tb *Table, lay *Layout, g randGen, n int, where string) {
	t.Helper()
	specs := tb.Specs()
	evs := make([]Event, n)
	for i := range evs {
		evs[i] = g.event()
	}
	batch := tb.MatchBatch(evs, nil)
	for i := range evs {
		want := BruteMatch(specs, &evs[i])
		got := tb.Match(&evs[i])
		if !slices.Equal(got, want) || !slices.Equal(batch[i], want) {
			t.Fatalf("%s: event %v: matcher %v, batch %v, brute %v\nsubscriptions:\n%s",
				where, evs[i].String(), got, batch[i], want, specsText(specs))
		}
		if got := EvalLayout(lay, &evs[i]); !slices.Equal(got, want) {
			t.Fatalf("%s: event %v: device layout %v, brute %v\nsubscriptions:\n%s",
				where, evs[i].String(), got, want, specsText(specs))
		}
	}
}

func specsText(specs []Spec) string {
	var b strings.Builder
	for _, s := range specs {
		fmt.Fprintln(&b, s.String())
	}
	return b.String()
}

// TestScenarioAgainstBrute checks the matcher on a small CCM-like scenario.
func TestScenarioAgainstBrute(t *testing.T) {
	sc := DefaultScenario()
	sc.FiltersMin, sc.FiltersMax = 300, 400
	sc.Names, sc.Values, sc.Words = 8, 6, 5
	specs := sc.Subscriptions()
	tb := tableOf(t, specs)
	matched := 0
	for _, e := range sc.Events(2000) {
		want := BruteMatch(specs, &e)
		if got := tb.Match(&e); !slices.Equal(got, want) {
			t.Fatalf("event %v: matcher %v, brute %v", e.String(), got, want)
		}
		matched += len(want)
	}
	if matched == 0 {
		t.Fatal("the scenario matched nothing: the comparison tests little")
	}
}

func TestCountersAndExplain(t *testing.T) {
	tb := New()
	id1, err := tb.Add(1, mustParse(t, `1: x = 1 && y > 2 || z = "q"`)[0].Filters)
	if err != nil {
		t.Fatal(err)
	}
	id2, _ := tb.Add(2, mustParse(t, `2: x = 1`)[0].Filters)
	e := mustEvent(t, `{"x": 1, "y": 1}`)
	if got := tb.Match(&e); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("match %v", got)
	}
	e2 := mustEvent(t, `{"x": 1, "y": 3}`)
	for i := 0; i < 3; i++ {
		tb.Match(&e2)
	}
	if s, _ := tb.Get(id1); s.Matches != 3 {
		t.Errorf("subscription 1: %d matches, want 3", s.Matches)
	}
	if s, _ := tb.Get(id2); s.Matches != 4 {
		t.Errorf("subscription 2: %d matches, want 4", s.Matches)
	}
	x, err := tb.Explain(&e, id1)
	if err != nil {
		t.Fatal(err)
	}
	want := []Explanation{
		{ID: id1, Port: 1, Filter: 0, Satisfied: []bool{true, false}},
		{ID: id1, Port: 1, Filter: 1, Satisfied: []bool{false}},
	}
	if fmt.Sprint(x) != fmt.Sprint(want) {
		t.Errorf("explain %v, want %v", x, want)
	}
	all, _ := tb.Explain(&e2, 0)
	if len(all) != 2 || !all[0].Matched || all[0].ID != id1 || !all[1].Matched || all[1].ID != id2 {
		t.Errorf("explain all %+v", all)
	}
	if _, err := tb.Explain(&e, 99); err == nil {
		t.Error("explain of a missing id succeeded")
	}
	if err := tb.Remove(id1); err != nil {
		t.Fatal(err)
	}
	if err := tb.Remove(id1); err == nil {
		t.Error("second removal succeeded")
	}
	if got := tb.Match(&e2); !slices.Equal(got, []uint32{2}) {
		t.Fatalf("after removal: %v", got)
	}
	if st := tb.Stats(); st != (Stats{Subscriptions: 1, Filters: 1, Constraints: 1, Names: 1, Ports: 1}) {
		t.Errorf("stats %+v", st)
	}
	if ids := tb.RemovePort(2); !slices.Equal(ids, []ID{id2}) {
		t.Errorf("RemovePort: %v", ids)
	}
	if st := tb.Stats(); st != (Stats{}) {
		t.Errorf("stats after removing everything %+v", st)
	}
}

func TestAddValidates(t *testing.T) {
	tb := New()
	bad := []Filter{
		{},
		{{Name: "x", Op: OpPrefix, Value: Int(1)}},
		{{Name: "x y", Op: OpEq, Value: Int(1)}},
		{{Name: "x", Op: OpEq, Value: Float(math.NaN())}},
		{{Name: "x", Op: OpEq, Value: Str(strings.Repeat("a", 256))}},
	}
	for _, f := range bad {
		if _, err := tb.Add(1, []Filter{f}); err == nil {
			t.Errorf("Add(%v) succeeded", f)
		}
	}
	if _, err := tb.Add(1, nil); err == nil {
		t.Error("empty predicate accepted")
	}
	if st := tb.Stats(); st != (Stats{}) {
		t.Errorf("a failed Add changed the table: %+v", st)
	}
}

// stableTable returns a table of nsubs random subscriptions (seed), nevs
// random events and the brute-force evaluator's answers for them: the
// stable part of the concurrency tests, which churn other ports beside it.
func stableTable(t *testing.T, seed int64, nsubs, nevs int) (*Table, []Event, [][]uint32) {
	t.Helper()
	g := randGen{rand.New(rand.NewSource(seed))}
	var stable []Spec
	for i := 0; i < nsubs; i++ {
		stable = append(stable, g.spec(4))
	}
	tb := tableOf(t, stable)
	evs := make([]Event, nevs)
	for i := range evs {
		evs[i] = g.event()
	}
	want := make([][]uint32, len(evs))
	for i := range evs {
		want[i] = BruteMatch(stable, &evs[i])
	}
	return tb, evs, want
}

// TestConcurrentMatchAndUpdate matches while another goroutine adds and
// removes subscriptions of other ports: the answers for the stable ports
// must stay those of the brute-force evaluator (run with -race).
func TestConcurrentMatchAndUpdate(t *testing.T) {
	tb, evs, want := stableTable(t, 7, 40, 200)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		wr := randGen{rand.New(rand.NewSource(8))}
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			s := wr.spec(4)
			s.Port += 100
			id, err := tb.Add(s.Port, s.Filters)
			if err != nil {
				t.Error(err)
				return
			}
			if n%2 == 0 {
				tb.Remove(id)
			}
			if n%50 == 0 {
				tb.RemovePort(100 + uint32(n%4))
			}
		}
	}()
	var mwg sync.WaitGroup
	for w := 0; w < 2; w++ {
		mwg.Add(1)
		go func(w int) {
			defer mwg.Done()
			for round := 0; round < 20; round++ {
				for i := range evs {
					got := tb.Match(&evs[i])
					got = slices.DeleteFunc(got, func(p uint32) bool { return p >= 100 })
					if !slices.Equal(got, want[i]) {
						t.Errorf("worker %d: event %d: %v, want %v", w, i, got, want[i])
						return
					}
				}
			}
		}(w)
	}
	mwg.Wait()
	close(stop)
	wg.Wait()
}
