package pubsub

import (
	"hash/maphash"
	"math"
	"math/rand"
	"slices"
	"testing"
)

// oneByOne builds a table by adding the specs one at a time (below bulkMin:
// no bulk, no slot-order sort).
func oneByOne(t *testing.T, specs []Spec) *Table {
	t.Helper()
	tb := New()
	for _, s := range specs {
		if _, err := tb.Add(s.Port, s.Filters); err != nil {
			t.Fatal(err)
		}
	}
	return tb
}

// TestBulkAddMatchesOneByOne holds a bulk add (hashed structures filled by
// runs, slots in index order) equal, event by event, to the same
// subscriptions added one by one and to the brute-force evaluator, on
// random subscriptions (every type and operator) added to an empty table
// and to a populated one, and with every string hash colliding.
func TestBulkAddMatchesOneByOne(t *testing.T) {
	for _, collide := range []bool{false, true} {
		if collide {
			bulkHash = func(maphash.Seed, string) uint64 { return 7 }
		}
		for seed := int64(1); seed <= 4; seed++ {
			g := randGen{rand.New(rand.NewSource(seed))}
			var first, second []Spec
			for i := 0; i < 400; i++ {
				first = append(first, g.spec(6))
				second = append(second, g.spec(6))
			}
			bulk := New()
			for _, part := range [][]Spec{first, second} {
				if _, err := bulk.AddSpecs(part); err != nil {
					t.Fatal(err)
				}
			}
			ref := oneByOne(t, append(slices.Clone(first), second...))
			all := bulk.Specs()
			for i := 0; i < 400; i++ {
				e := g.event()
				want := BruteMatch(all, &e)
				if got, one := bulk.Match(&e), ref.Match(&e); !slices.Equal(got, want) || !slices.Equal(one, want) {
					t.Fatalf("collide %v seed %d: event %s: bulk %v, one by one %v, brute %v", collide, seed, e.String(), got, one, want)
				}
			}
			// Removing half of the bulk's subscriptions keeps it exact.
			for _, s := range bulk.List() {
				if s.ID%2 == 0 {
					if err := bulk.Remove(s.ID); err != nil {
						t.Fatal(err)
					}
				}
			}
			all = bulk.Specs()
			for i := 0; i < 200; i++ {
				e := g.event()
				if got, want := bulk.Match(&e), BruteMatch(all, &e); !slices.Equal(got, want) {
					t.Fatalf("collide %v seed %d after removals: event %s: %v, brute %v", collide, seed, e.String(), got, want)
				}
			}
		}
	}
	bulkHash = maphash.String
}

func floatBits(f float64) uint64 { return math.Float64bits(f) }

// TestRadixSortRefs compares the radix sort with a stable comparison sort
// on keys that differ in a few bytes, in all, and in none.
func TestRadixSortRefs(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for _, mask := range [][2]uint64{{0xff, 0x3<<40 | 0xff00}, {^uint64(0), ^uint64(0)}, {0, 0}, {1 << 63, 0}} {
		refs := make([]slotRef, 5000)
		for i := range refs {
			refs[i] = slotRef{hi: r.Uint64() & mask[0], lo: r.Uint64() & mask[1], idx: uint32(i)}
		}
		want := slices.Clone(refs)
		slices.SortStableFunc(want, func(a, b slotRef) int {
			if a.hi != b.hi {
				return cmpU64(a.hi, b.hi)
			}
			return cmpU64(a.lo, b.lo)
		})
		if got := radixSortRefs(refs); !slices.Equal(got, want) {
			t.Fatalf("mask %#x: radix sort differs from a stable sort", mask)
		}
	}
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
