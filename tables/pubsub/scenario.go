package pubsub

import (
	"fmt"
	"math/rand"
)

// Scenario describes a synthetic workload in the manner of CCM's evaluation
// (Margara & Cugola, DEBS'11): interfaces with many filters each, filters of
// a few constraints on distinct names, events of a few attributes. Names
// a0..a{Names-1} are typed: the first NumericShare of them are integer
// attributes, the others strings. Numeric constraints use = != > < on
// integers in [0, Values); string constraints use = != ^= *= on words of a
// vocabulary of Words words (^= a 1–3-byte prefix, *= a 2–3-byte piece of a
// word). Event values come from the same domains.
type Scenario struct {
	Interfaces                     int
	FiltersMin, FiltersMax         int // per interface
	ConstraintsMin, ConstraintsMax int // per filter
	Names                          int
	AttrsMin, AttrsMax             int // per event
	NumericShare                   float64
	Values                         int // integer domain size
	Words                          int // string vocabulary size
	// Zipf, when > 1, draws names with a Zipf distribution of that
	// exponent instead of uniformly.
	Zipf float64
	Seed int64
}

// DefaultScenario is CCM's default: 10 interfaces, 22,500–27,500 filters per
// interface, 3–5 constraints per filter (about 1M constraints), 100 names,
// events of 3–5 attributes, half numeric and half string.
func DefaultScenario() Scenario {
	return Scenario{
		Interfaces: 10, FiltersMin: 22500, FiltersMax: 27500,
		ConstraintsMin: 3, ConstraintsMax: 5, Names: 100, AttrsMin: 3, AttrsMax: 5,
		NumericShare: 0.5, Values: 100, Words: 100, Seed: 1,
	}
}

// Validate checks the scenario's ranges.
func (s Scenario) Validate() error {
	switch {
	case s.Interfaces < 1, s.FiltersMin < 1, s.FiltersMax < s.FiltersMin,
		s.ConstraintsMin < 1, s.ConstraintsMax < s.ConstraintsMin, s.ConstraintsMax > MaxFilter,
		s.Names < s.ConstraintsMax, s.Names < s.AttrsMax, s.AttrsMin < 1, s.AttrsMax < s.AttrsMin,
		s.NumericShare < 0, s.NumericShare > 1, s.Values < 1, s.Words < 1:
		return fmt.Errorf("pubsub: scenario %+v out of range", s)
	}
	return nil
}

type scenGen struct {
	s     Scenario
	r     *rand.Rand
	zipf  *rand.Zipf
	words []string
}

func (s Scenario) gen(stream int64) *scenGen {
	g := &scenGen{s: s}
	vr := rand.New(rand.NewSource(s.Seed))
	for i := 0; i < s.Words; i++ {
		b := make([]byte, 4+vr.Intn(7))
		for k := range b {
			b[k] = byte('a' + vr.Intn(26))
		}
		g.words = append(g.words, string(b))
	}
	g.r = rand.New(rand.NewSource(s.Seed*1000003 + stream))
	if s.Zipf > 1 {
		g.zipf = rand.NewZipf(g.r, s.Zipf, 1, uint64(s.Names-1))
	}
	return g
}

func (g *scenGen) between(lo, hi int) int { return lo + g.r.Intn(hi-lo+1) }

// names draws k distinct name indices.
func (g *scenGen) names(k int) []int {
	out := make([]int, 0, k)
	for len(out) < k {
		var n int
		if g.zipf != nil {
			n = int(g.zipf.Uint64())
		} else {
			n = g.r.Intn(g.s.Names)
		}
		dup := false
		for _, m := range out {
			dup = dup || m == n
		}
		if !dup {
			out = append(out, n)
		}
	}
	return out
}

func (g *scenGen) numeric(n int) bool { return float64(n) < g.s.NumericShare*float64(g.s.Names) }

func (g *scenGen) value(n int) Value {
	if g.numeric(n) {
		return Int(int64(g.r.Intn(g.s.Values)))
	}
	return Str(g.words[g.r.Intn(len(g.words))])
}

// Subscriptions returns the scenario's subscriptions: one spec of one filter
// each, ports 1..Interfaces.
func (s Scenario) Subscriptions() []Spec {
	g := s.gen(1)
	var specs []Spec
	for p := 1; p <= s.Interfaces; p++ {
		nf := g.between(s.FiltersMin, s.FiltersMax)
		for i := 0; i < nf; i++ {
			names := g.names(g.between(s.ConstraintsMin, s.ConstraintsMax))
			f := make(Filter, len(names))
			for k, n := range names {
				c := Constraint{Name: fmt.Sprintf("a%d", n), Value: g.value(n)}
				if g.numeric(n) {
					c.Op = [4]Op{OpEq, OpNe, OpGt, OpLt}[g.r.Intn(4)]
				} else {
					c.Op = [4]Op{OpEq, OpNe, OpPrefix, OpContains}[g.r.Intn(4)]
					w := c.Value.Str
					switch c.Op {
					case OpPrefix:
						c.Value = Str(w[:1+g.r.Intn(3)])
					case OpContains:
						l := 2 + g.r.Intn(2)
						i := g.r.Intn(len(w) - l + 1)
						c.Value = Str(w[i : i+l])
					}
				}
				f[k] = c
			}
			specs = append(specs, Spec{Port: uint32(p), Filters: []Filter{f}})
		}
	}
	return specs
}

// Events returns n events of the scenario (a stream independent of the
// subscriptions').
func (s Scenario) Events(n int) []Event {
	g := s.gen(2)
	evs := make([]Event, n)
	for i := range evs {
		names := g.names(g.between(s.AttrsMin, s.AttrsMax))
		e := Event{Attrs: make([]Attr, len(names))}
		for k, nm := range names {
			e.Attrs[k] = Attr{Name: fmt.Sprintf("a%d", nm), Value: g.value(nm)}
		}
		evs[i] = e
	}
	return evs
}
