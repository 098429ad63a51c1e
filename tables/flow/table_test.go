package flow

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
)

var algos = []Algo{Linear, Tuple, Bloom, Merge}

// smallConfig returns a configuration with tiny sizes, so that re-hashes,
// grows, splits and rebuilds all happen on small rule sets.
func smallConfig(a Algo, seed uint64, classCap int) Config {
	return Config{Algo: a, Seed: seed, ClassCapacity: classCap, minLogB: 1 + int(seed%2), minUnits: 2, families: 3 + int(seed%3)}
}

// model is a reference implementation of OpenFlow 1.3 flow-table semantics:
// a map from id to rule, scanned for everything.
type model struct {
	rules map[RuleID]Rule
	max   int
}

func newModel(max int) *model { return &model{rules: map[RuleID]Rule{}, max: max} }

func (m *model) add(r Rule, flags AddFlags) (RuleID, bool, error) {
	if err := r.Match.Validate(); err != nil {
		return NoMatch, false, err
	}
	if flags&CheckOverlap != 0 {
		for _, o := range m.rules {
			if o.Priority == r.Priority && o.Match.Overlaps(&r.Match) {
				return NoMatch, false, ErrOverlap
			}
		}
	}
	for id, o := range m.rules {
		if o.Priority == r.Priority && o.Match == r.Match {
			m.rules[id] = r
			return id, true, nil
		}
	}
	if len(m.rules) >= m.max {
		return NoMatch, false, ErrTableFull
	}
	id := RuleID(0)
	for {
		if _, ok := m.rules[id]; !ok {
			break
		}
		id++
	}
	m.rules[id] = r
	return id, false, nil
}

func (m *model) sel(s Selector) []RuleID {
	var ids []RuleID
	for id, r := range m.rules {
		if s.Strict {
			if r.Match != s.Match || r.Priority != s.Priority {
				continue
			}
		} else if !s.Match.Covers(&r.Match) {
			continue
		}
		if r.Cookie&s.CookieMask != s.Cookie&s.CookieMask {
			continue
		}
		if s.Filter != nil && !s.Filter(id, &r) {
			continue
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (m *model) all(k *Key) []RuleID {
	var ids []RuleID
	for id, r := range m.rules {
		if r.Match.Matches(k) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b RuleID) int {
		return cmp.Compare(Rank(m.rules[b].Priority, b), Rank(m.rules[a].Priority, a))
	})
	return ids
}

func (m *model) best(k *Key) RuleID {
	if all := m.all(k); len(all) > 0 {
		return all[0]
	}
	return NoMatch
}

func (m *model) list() []Rule {
	var rs []Rule
	for _, r := range m.rules {
		rs = append(rs, r)
	}
	return rs
}

// checkAgainst compares the table's rules and lookups with the model.
func checkAgainst(t *testing.T, tab *Table, m *model, keys []Key, what string) {
	t.Helper()
	if tab.Len() != len(m.rules) {
		t.Fatalf("%s: Len %d, model %d", what, tab.Len(), len(m.rules))
	}
	n := 0
	tab.Rules(func(id RuleID, r *Rule) bool {
		n++
		if mr, ok := m.rules[id]; !ok || mr != *r {
			t.Fatalf("%s: rule %d = %v, model has %v (present %v)", what, id, r.Match.String(), mr.Match.String(), ok)
		}
		return true
	})
	if n != len(m.rules) {
		t.Fatalf("%s: Rules visited %d, model %d", what, n, len(m.rules))
	}
	var all []RuleID
	for i := range keys {
		k := &keys[i]
		want := m.best(k)
		got, ok := tab.Lookup(k)
		if got != want || ok != (want != NoMatch) {
			t.Fatalf("%s: key %d %v: Lookup %d (%v), want %d; all matches %v", what, i, k, got, ok, want, m.all(k))
		}
		all = tab.LookupAll(k, all[:0])
		if wantAll := m.all(k); !slices.Equal(all, wantAll) {
			t.Fatalf("%s: key %d: LookupAll %v, want %v", what, i, all, wantAll)
		}
	}
	out := make([]RuleID, len(keys))
	tab.LookupBatch(keys, out)
	for i := range keys {
		if want := m.best(&keys[i]); out[i] != want {
			t.Fatalf("%s: LookupBatch key %d: %d, want %d", what, i, out[i], want)
		}
	}
}

// TestLookupMatchesBruteForce builds random rule sets (1 to 50 classes, all
// protocol families) with each algorithm and checks Lookup, LookupAll and
// LookupBatch against a scan of every rule.
func TestLookupMatchesBruteForce(t *testing.T) {
	for _, a := range algos {
		for seed := uint64(1); seed <= 12; seed++ {
			rng := rand.New(rand.NewPCG(seed, uint64(a)))
			classes := 1 + rng.IntN(50)
			nrules := 1 + rng.IntN(300)
			g := newRuleGen(rng, classes, []int{3, 10, 40}[seed%3])
			classCap := []int{1, 3, 16, 0}[seed%4]
			tab, err := NewTable(smallConfig(a, seed, classCap))
			if err != nil {
				t.Fatal(err)
			}
			m := newModel(DefaultMaxEntries)
			for i := 0; i < nrules; i++ {
				r := g.rule(t)
				id, rep, err := tab.Add(r, 0)
				mid, mrep, merr := m.add(r, 0)
				if err != nil || merr != nil || id != mid || rep != mrep {
					t.Fatalf("%v seed %d: Add %v = %d,%v,%v; model %d,%v,%v", a, seed, r.Match.String(), id, rep, err, mid, mrep, merr)
				}
			}
			keys := make([]Key, 400)
			rl := m.list()
			for i := range keys {
				keys[i] = g.key(rl, i%2 == 0)
			}
			checkAgainst(t, tab, m, keys, fmt.Sprintf("%v seed %d (%d classes, %d rules)", a, seed, classes, nrules))
			// the dense reference of the package agrees too
			byID := make([]Rule, tab.Len())
			tab.Rules(func(id RuleID, r *Rule) bool { byID[id] = *r; return true })
			for i := range keys {
				got, _ := tab.Lookup(&keys[i])
				if want := BruteForce(byID, &keys[i]); got != want {
					t.Fatalf("BruteForce disagrees: %d vs %d", got, want)
				}
				if all := tab.LookupAll(&keys[i], nil); !slices.Equal(all, BruteForceAll(byID, &keys[i], nil)) {
					t.Fatalf("BruteForceAll disagrees")
				}
			}
		}
	}
}

// randomSelector returns a selector built from an existing rule (or a random
// one), strict or not, with random cookie masks and, sometimes, a filter.
func randomSelector(rng *rand.Rand, g *ruleGen, rules []Rule) Selector {
	var s Selector
	if len(rules) > 0 && rng.IntN(4) != 0 {
		r := rules[rng.IntN(len(rules))]
		s.Match, s.Priority = r.Match, r.Priority
		if rng.IntN(2) == 0 {
			// widen: drop a random field
			f := allFields[rng.IntN(len(allFields))]
			s.Match.Clear(f)
			if s.Match.Validate() != nil {
				s.Match = r.Match
			}
		}
	} else {
		s.Match = g.rule(nil).Match
		s.Priority = uint16(rng.IntN(8))
	}
	if rng.IntN(10) == 0 {
		s.Match = Match{}
	}
	s.Strict = rng.IntN(2) == 0
	if rng.IntN(3) == 0 {
		s.Cookie, s.CookieMask = uint64(rng.IntN(4)), uint64(rng.IntN(4))
	}
	if rng.IntN(5) == 0 {
		odd := rng.IntN(2) == 0
		s.Filter = func(id RuleID, r *Rule) bool { return (r.Action%2 == 1) == odd }
	}
	return s
}

// TestOperationsAgainstModel runs random interleavings of Add (with and
// without CheckOverlap), Modify and Delete (strict and not, cookie masks,
// filters) against the reference model, on tiny image sizes.
func TestOperationsAgainstModel(t *testing.T) {
	for _, a := range algos {
		for seed := uint64(1); seed <= 6; seed++ {
			rng := rand.New(rand.NewPCG(seed, 100+uint64(a)))
			g := newRuleGen(rng, 1+rng.IntN(30), 4)
			maxN := 40 + rng.IntN(200)
			tab, err := NewTable(Config{Algo: a, Seed: seed, MaxEntries: maxN, ClassCapacity: []int{2, 5, 0}[seed%3], minLogB: 1, minUnits: 2, families: 2})
			if err != nil {
				t.Fatal(err)
			}
			m := newModel(maxN)
			var keys []Key
			for step := 0; step < 1500; step++ {
				what := fmt.Sprintf("%v seed %d step %d", a, seed, step)
				switch op := rng.IntN(10); {
				case op < 6:
					r := g.rule(t)
					if len(m.rules) > 0 && rng.IntN(5) == 0 { // same match, other priority or same
						o := m.list()[rng.IntN(len(m.rules))]
						r.Match = o.Match
						if rng.IntN(2) == 0 {
							r.Priority = o.Priority
						}
					}
					var flags AddFlags
					if rng.IntN(4) == 0 {
						flags = CheckOverlap
					}
					id, rep, err := tab.Add(r, flags)
					mid, mrep, merr := m.add(r, flags)
					if !errors.Is(err, merr) || id != mid || rep != mrep {
						t.Fatalf("%s: Add = %d,%v,%v; model %d,%v,%v", what, id, rep, err, mid, mrep, merr)
					}
				case op < 8:
					s := randomSelector(rng, g, m.list())
					got := entryIDs(tab.Delete(s))
					want := m.sel(s)
					for _, id := range want {
						delete(m.rules, id)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s: Delete %+v = %v, model %v", what, s, got, want)
					}
				default:
					s := randomSelector(rng, g, m.list())
					act := rng.Uint32()
					got := tab.Modify(s, act)
					want := m.sel(s)
					for _, id := range want {
						r := m.rules[id]
						r.Action = act
						m.rules[id] = r
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s: Modify = %v, model %v", what, got, want)
					}
				}
				if step%50 == 0 || step == 1499 {
					rl := m.list()
					keys = keys[:0]
					for i := 0; i < 60; i++ {
						keys = append(keys, g.key(rl, i%2 == 0))
					}
					checkAgainst(t, tab, m, keys, what)
				}
			}
		}
	}
}

func entryIDs(es []Entry) []RuleID {
	var ids []RuleID
	for _, e := range es {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestCountersMove checks that tiny sizes make every update path happen:
// re-hash with another family, grow, split and whole-image rebuild.
func TestCountersMove(t *testing.T) {
	for _, a := range []Algo{Tuple, Bloom} {
		rng := rand.New(rand.NewPCG(5, 5))
		g := newRuleGen(rng, 3, 1000)
		tab, err := NewTable(Config{Algo: a, Seed: 3, ClassCapacity: 40, minLogB: 1, minUnits: 2, families: 2, fillFactor: 1})
		if err != nil {
			t.Fatal(err)
		}
		m := newModel(DefaultMaxEntries)
		for i := 0; i < 3000; i++ {
			r := g.rule(t)
			r.Priority = uint16(rng.IntN(65536))
			if _, _, err := tab.Add(r, 0); err != nil {
				t.Fatal(err)
			}
			_, _, _ = m.add(r, 0)
		}
		st := tab.Stats()
		t.Logf("%v: %+v", a, st)
		if st.Rehashes == 0 || st.Grows == 0 || st.Splits == 0 || st.Rebuilds < 2 {
			t.Errorf("%v: counters did not all move: %+v", a, st)
		}
		var keys []Key
		for i := 0; i < 300; i++ {
			keys = append(keys, g.key(m.list(), i%2 == 0))
		}
		checkAgainst(t, tab, m, keys, a.String())
	}
}

// TestMirrorFollowsBubbles keeps a mirror current only with Sync updates
// through random operations and checks it equals the table's image and
// answers like the table, for every algorithm.
func TestMirrorFollowsBubbles(t *testing.T) {
	for _, a := range algos {
		rng := rand.New(rand.NewPCG(9, uint64(a)))
		g := newRuleGen(rng, 20, 8)
		tab, err := NewTable(smallConfig(a, 4, 6))
		if err != nil {
			t.Fatal(err)
		}
		m := newModel(DefaultMaxEntries)
		var mirror *bubble.Image
		for step := 0; step < 2000; step++ {
			switch rng.IntN(5) {
			case 0, 1, 2:
				r := g.rule(t)
				_, _, _ = tab.Add(r, 0)
				_, _, _ = m.add(r, 0)
			case 3:
				if rng.IntN(30) == 0 {
					if err := tab.Compact(); err != nil {
						t.Fatal(err)
					}
				}
				s := randomSelector(rng, g, m.list())
				tab.Delete(s)
				for _, id := range m.sel(s) {
					delete(m.rules, id)
				}
			default:
				if rng.IntN(3) == 0 {
					continue
				}
				u := tab.Mirror().Sync()
				if err := u.ApplyTo(&mirror); err != nil {
					t.Fatalf("%v step %d: %v", a, step, err)
				}
				if d := mirror.Diff(tab.Mirror().Image()); d != "" {
					t.Fatalf("%v step %d: mirror differs: %s", a, step, d)
				}
				v, err := NewView(mirror)
				if err != nil {
					t.Fatalf("%v step %d: view of the mirror: %v", a, step, err)
				}
				words := tab.UsedWords()
				if !slices.Equal(v.Words(), words) {
					t.Fatalf("projection %v vs %v", v.Words(), words)
				}
				keys := make([]Key, 64)
				rl := m.list()
				for i := range keys {
					keys[i] = g.key(rl, i%2 == 0)
				}
				soa := PackSoA(keys, words, nil)
				out := make([]RuleID, len(keys))
				if err := v.LookupBatchSoA(soa, len(keys), out); err != nil {
					t.Fatal(err)
				}
				for i := range keys {
					want, _ := tab.Lookup(&keys[i])
					if out[i] != want || want != m.best(&keys[i]) {
						t.Fatalf("%v step %d: mirror says %d, table %d, model %d", a, step, out[i], want, m.best(&keys[i]))
					}
				}
			}
		}
		if tab.Mirror().Replaced < 2 {
			t.Errorf("%v: no rebuild happened (Replaced %d)", a, tab.Mirror().Replaced)
		}
	}
}

// TestProjectionAndCompact checks that the projection widens with a rule
// that needs a new word (a new generation), stays while a generation lasts,
// and narrows on Compact; and that DeleteID removes one rule.
func TestProjectionAndCompact(t *testing.T) {
	for _, a := range algos {
		tab, err := NewTable(Config{Algo: a})
		if err != nil {
			t.Fatal(err)
		}
		if len(tab.UsedWords()) != 0 {
			t.Fatalf("empty table projects %v", tab.UsedWords())
		}
		all := Rule{Priority: 1} // matches every packet: no words
		if id, _, err := tab.Add(all, 0); err != nil || id != 0 {
			t.Fatal(id, err)
		}
		r1 := Rule{Match: mustParse(t, "eth_type=0x800,ip_proto=6,tcp_dst=80"), Priority: 5}
		r2 := Rule{Match: mustParse(t, "eth_type=0x800,ipv4_dst=10.0.0.0/8"), Priority: 7}
		gen := tab.Mirror().Image().Generation
		_, _, _ = tab.Add(r1, 0)
		if w := tab.UsedWords(); !slices.Equal(w, []int{9, 20}) || tab.Mirror().Image().Generation == gen {
			t.Fatalf("%v: projection %v after tcp_dst (generation %d)", a, w, tab.Mirror().Image().Generation)
		}
		id2, _, _ := tab.Add(r2, 0)
		if w := tab.UsedWords(); !slices.Equal(w, []int{9, 16, 20}) {
			t.Fatalf("%v: projection %v", a, w)
		}
		gen = tab.Mirror().Image().Generation
		if _, ok := tab.DeleteID(id2); !ok {
			t.Fatal("DeleteID")
		}
		if _, ok := tab.DeleteID(id2); ok {
			t.Fatal("DeleteID twice")
		}
		if w := tab.UsedWords(); !slices.Equal(w, []int{9, 16, 20}) || tab.Mirror().Image().Generation != gen {
			t.Fatalf("%v: projection shrank within a generation: %v", a, w)
		}
		var k Key
		_ = k.SetUint(FieldEthType, EthTypeIPv4)
		_ = k.SetUint(FieldIPProto, IPProtoTCP)
		_ = k.SetUint(FieldTCPDst, 80)
		if id, ok := tab.Lookup(&k); !ok || id != 1 {
			t.Fatalf("%v: lookup %d", a, id)
		}
		if err := tab.Compact(); err != nil {
			t.Fatal(err)
		}
		if w := tab.UsedWords(); !slices.Equal(w, []int{9, 20}) {
			t.Fatalf("%v: projection %v after Compact", a, w)
		}
		if id, ok := tab.Lookup(&k); !ok || id != 1 {
			t.Fatalf("%v: lookup after Compact %d", a, id)
		}
		_ = k.SetUint(FieldTCPDst, 81)
		if id, ok := tab.Lookup(&k); !ok || id != 0 {
			t.Fatalf("%v: lookup of the catch-all %d", a, id)
		}
		if st := tab.Stats(); st.Rules != 2 || st.Matches != 2 || st.ProjectedWords != 2 || st.Rebuilds < 3 {
			t.Fatalf("%v: stats %+v", a, st)
		}
	}
}

// TestLookupBatchSoARunsOfEqualKeys checks the batch lookup's runs of
// equal keys (a key equal to the one before it takes its answer), and
// LookupBatchSoAEach, against one lookup per key, for every algorithm: runs of 1 to 40 equal keys,
// which cross the chunks' boundaries, keys that recur later but not next
// to each other, and a stride wider than the batch.
func TestLookupBatchSoARunsOfEqualKeys(t *testing.T) {
	for _, a := range algos {
		rng := rand.New(rand.NewPCG(11, uint64(a)))
		g := newRuleGen(rng, 20, 8)
		tab, err := NewTable(smallConfig(a, 4, 6))
		if err != nil {
			t.Fatal(err)
		}
		var rl []Rule
		for range 200 {
			r := g.rule(t)
			rl = append(rl, r)
			_, _, _ = tab.Add(r, 0)
		}
		v, err := NewView(tab.Mirror().Image())
		if err != nil {
			t.Fatal(err)
		}
		words := tab.UsedWords()
		for trial := range 50 {
			var keys []Key
			pool := make([]Key, 1+rng.IntN(6))
			for i := range pool {
				pool[i] = g.key(rl, i%2 == 0)
			}
			for len(keys) < 300 {
				k := pool[rng.IntN(len(pool))]
				for range 1 + rng.IntN(40) {
					keys = append(keys, k)
				}
			}
			n := len(keys)
			stride := n + trial%3
			soa := make([]uint32, len(words)*stride)
			for j, wd := range words {
				for i := range keys {
					soa[j*stride+i] = keys[i][wd]
				}
			}
			out, each := make([]RuleID, n), make([]RuleID, n)
			if err := v.LookupBatchSoAStride(soa, n, stride, out); err != nil {
				t.Fatal(err)
			}
			if err := v.LookupBatchSoAEach(soa, n, stride, each); err != nil {
				t.Fatal(err)
			}
			for i := range keys {
				if want, _ := tab.Lookup(&keys[i]); out[i] != want || each[i] != want {
					t.Fatalf("%v trial %d: packet %d of %d: batch says %d, a search a key %d, a lookup of its own %d", a, trial, i, n, out[i], each[i], want)
				}
			}
		}
	}
}
