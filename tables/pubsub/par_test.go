package pubsub

import (
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

// TestParallelBuildIdentical builds a table (AddSpecs) and its device
// layout (NewDevice) sequentially and on several goroutines: the indexes,
// the layout's words and slots, and the answers are the same; a bad spec
// late in the list gives the sequential check's error.
func TestParallelBuildIdentical(t *testing.T) {
	defer func(w int) { buildWorkers = w }(buildWorkers)
	sc := DefaultScenario()
	sc.FiltersMin, sc.FiltersMax = 900, 1100
	specs := sc.Subscriptions()
	evs := sc.Events(500)
	build := func(w int) (*Table, *Device) {
		buildWorkers = w
		tb := New()
		if _, err := tb.AddSpecs(specs); err != nil {
			t.Fatal(err)
		}
		// Changes after the bulk: one by one, then another bulk.
		if _, err := tb.Add(5, specs[7].Filters); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.AddSpecs(specs[:3000]); err != nil {
			t.Fatal(err)
		}
		return tb, NewDevice(tb)
	}
	seqT, seqD := build(1)
	for _, w := range []int{2, 4, 7} {
		parT, parD := build(w)
		// The hashed structures' list numbering follows a random hash
		// seed (two sequential builds differ there too): their contents
		// per key are compared, the rest as is.
		for n, x := range seqT.names {
			y := parT.names[n]
			if y == nil || x.n != y.n || !reflect.DeepEqual(x.ints, y.ints) || !reflect.DeepEqual(x.floats, y.floats) ||
				!reflect.DeepEqual(x.strs, y.strs) || !reflect.DeepEqual(x.neNum, y.neNum) || !reflect.DeepEqual(x.neStr, y.neStr) ||
				!reflect.DeepEqual(x.bTrue, y.bTrue) || !reflect.DeepEqual(x.bFalse, y.bFalse) ||
				!sameKeyed(&x.eqInt, &y.eqInt) || !sameKeyed(&x.eqStr, &y.eqStr) || !sameKeyed(&x.prefix.keyed, &y.prefix.keyed) ||
				!sameKeyed(&x.suffix.keyed, &y.suffix.keyed) || !sameKeyed(&x.contains.keyed, &y.contains.keyed) ||
				x.prefix.count != y.prefix.count || x.contains.count != y.contains.count {
				t.Fatalf("workers %d: name %s's index differs from the sequential build's", w, n)
			}
		}
		if len(seqT.names) != len(parT.names) {
			t.Fatalf("workers %d: %d names, sequential %d", w, len(parT.names), len(seqT.names))
		}
		if !reflect.DeepEqual(seqT.info, parT.info) || seqT.constraints != parT.constraints {
			t.Fatalf("workers %d: slots differ", w)
		}
		a, b := seqD.Layout().Image, parD.Layout().Image
		for r := range a.Words {
			if !slices.Equal(a.Words[r], b.Words[r]) {
				t.Fatalf("workers %d: layout region %d differs", w, r)
			}
		}
		if !reflect.DeepEqual(seqD.slots, parD.slots) || !reflect.DeepEqual(seqD.lists, parD.lists) || seqD.cons != parD.cons {
			t.Fatalf("workers %d: the layout's slot bookkeeping differs", w)
		}
		for i := range evs {
			if x, y := seqT.Match(&evs[i]), parT.Match(&evs[i]); !slices.Equal(x, y) {
				t.Fatalf("workers %d: event %d: %v, sequential %v", w, i, y, x)
			}
		}
	}
	bad := slices.Clone(specs)
	bad[len(bad)-10] = Spec{Port: 1}
	bad[len(bad)-5] = Spec{Port: 2, Filters: []Filter{{{Name: "x", Op: OpPrefix, Value: Int(5)}}}}
	buildWorkers = 1
	_, want := New().AddSpecs(bad)
	buildWorkers = 4
	_, got := New().AddSpecs(bad)
	if want == nil || got == nil || got.Error() != want.Error() {
		t.Errorf("a bad spec: parallel %v, sequential %v", got, want)
	}
}

// sameKeyed compares two keyed structures key by key (each key's slots in
// order).
func sameKeyed[K comparable](a, b *keyed[K]) bool {
	if len(a.m) != len(b.m) {
		return false
	}
	for k, i := range a.m {
		j, ok := b.m[k]
		if !ok || !slices.Equal(a.lists[i], b.lists[j]) {
			return false
		}
	}
	return true
}

// TestRadixSortRefsParallel compares the parallel radix sort with the
// sequential one on keys that differ in a few bytes, in all, and in none.
func TestRadixSortRefsParallel(t *testing.T) {
	defer func(w int) { buildWorkers = w }(buildWorkers)
	r := rand.New(rand.NewSource(7))
	for _, mask := range [][2]uint64{{0xff, 0x3<<40 | 0xff00}, {^uint64(0), ^uint64(0)}, {0, 0}, {1 << 63, 0}, {0, 3}} {
		for _, n := range []int{9000, 20011} {
			refs := make([]slotRef, n)
			for i := range refs {
				refs[i] = slotRef{hi: r.Uint64() & mask[0], lo: r.Uint64() & mask[1], idx: uint32(i)}
			}
			buildWorkers = 1
			want := slices.Clone(radixSortRefs(slices.Clone(refs)))
			for _, w := range []int{2, 3, 8} {
				buildWorkers = w
				if got := radixSortRefs(slices.Clone(refs)); !slices.Equal(got, want) {
					t.Fatalf("mask %#x, %d refs, %d workers: differs from the sequential sort", mask, n, w)
				}
			}
		}
	}
}

// TestAddSpecsDevice: the image AddSpecsDevice builds alongside the
// indexes is NewDevice's, word for word, with the same name table and
// slot log position (an Update after a change gives the same bubbles); the
// table is AddSpecs' (same slots and answers). Run with -race: the build
// and the index pass share the table.
func TestAddSpecsDevice(t *testing.T) {
	defer func(w int) { buildWorkers = w }(buildWorkers)
	sc := DefaultScenario()
	sc.FiltersMin, sc.FiltersMax = 900, 1100
	specs := sc.Subscriptions()
	evs := sc.Events(300)
	for _, w := range []int{1, 4} {
		buildWorkers = w
		a := New()
		if _, err := a.AddSpecs(specs); err != nil {
			t.Fatal(err)
		}
		da := NewDevice(a)
		b := New()
		var early *Device
		if _, db, err := b.AddSpecsDevice(specs, func(d *Device) { early = d }); err != nil {
			t.Fatal(err)
		} else {
			if early != db {
				t.Fatalf("workers %d: built was called with %p, not the device returned (%p)", w, early, db)
			}
			ia, ib := da.Layout().Image, db.Layout().Image
			for r := range ia.Words {
				if !slices.Equal(ia.Words[r], ib.Words[r]) {
					t.Fatalf("workers %d: region %d differs from NewDevice's", w, r)
				}
			}
			if !reflect.DeepEqual(da.Layout().Names, db.Layout().Names) || da.seq != db.seq {
				t.Fatalf("workers %d: names or slot log position differ", w)
			}
			if !reflect.DeepEqual(a.info, b.info) || a.constraints != b.constraints || a.filters != b.filters || a.active != b.active ||
				!reflect.DeepEqual(a.live, b.live) {
				t.Fatalf("workers %d: slots differ", w)
			}
			for _, tb := range []*Table{a, b} {
				if _, err := tb.Add(3, specs[5].Filters); err != nil {
					t.Fatal(err)
				}
			}
			ua, ub := da.Update(a), db.Update(b)
			if !reflect.DeepEqual(ua, ub) {
				t.Fatalf("workers %d: the update after a change differs", w)
			}
			all := b.Specs()
			for i := range evs {
				if x, y := a.Match(&evs[i]), b.Match(&evs[i]); !slices.Equal(x, y) {
					t.Fatalf("workers %d: event %d: %v, AddSpecs' table %v", w, i, y, x)
				}
				if got, want := EvalLayout(db.Layout(), &evs[i]), BruteMatch(all, &evs[i]); !slices.Equal(got, want) && len(got)+len(want) > 0 {
					t.Fatalf("workers %d: event %d: layout %v, brute %v", w, i, got, want)
				}
			}
		}
	}
}
