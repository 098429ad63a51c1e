package re

import (
	"math/rand/v2"
	"testing"
)

// TestFPIndex runs random puts, gets and deletes on the index and on a map
// with the same keys (markers' fingerprints: low bits zero, some sharing
// their home cell's neighbourhood), and compares them after every step,
// through growth and long runs of deletions.
func TestFPIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(51, 52))
	x := newFPIndex()
	want := map[uint64]uint16{}
	var keys []uint64
	for step := 0; step < 200000; step++ {
		var fp uint64
		if len(keys) > 0 && r.IntN(3) > 0 {
			fp = keys[r.IntN(len(keys))]
		} else {
			fp = r.Uint64() &^ 0xff // 8 low bits zero
			if r.IntN(4) == 0 {
				fp = uint64(r.IntN(64)) << 8 // few distinct values: long runs
			}
			keys = append(keys, fp)
		}
		switch op := r.IntN(10); {
		case op < 5 || step < 50000:
			v := uint16(r.Uint32())
			x.put(fp).latest.pos = v
			want[fp] = v
		case op < 8:
			x.del(fp)
			delete(want, fp)
		default:
			s := x.get(fp)
			v, ok := want[fp]
			if (s != nil) != ok || (ok && s.latest.pos != v) {
				t.Fatalf("step %d: get %#x = %v, want %v (present %v)", step, fp, s, v, ok)
			}
		}
		if step%5000 == 0 || step > 199000 {
			if x.len() != len(want) {
				t.Fatalf("step %d: %d held, want %d", step, x.len(), len(want))
			}
			for k, v := range want {
				if s := x.get(k); s == nil || s.latest.pos != v {
					t.Fatalf("step %d: %#x lost or wrong", step, k)
				}
			}
		}
	}
	if len(x.cells) <= tableMinCells {
		t.Errorf("index never grew: %d cells", len(x.cells))
	}
}

// TestIDTable runs random sets, gets and conditional deletes on the logs'
// id table and on a map, and compares them, through growth.
func TestIDTable(t *testing.T) {
	r := rand.New(rand.NewPCG(53, 54))
	x := newIDTable()
	want := map[uint64]*entry{}
	var keys []uint64
	for step := 0; step < 200000; step++ {
		var k uint64
		if len(keys) > 0 && r.IntN(3) > 0 {
			k = keys[r.IntN(len(keys))]
		} else {
			k = r.Uint64()
			if r.IntN(4) == 0 {
				k = uint64(r.IntN(64)) // few distinct small values: long runs
			}
			keys = append(keys, k)
		}
		switch op := r.IntN(10); {
		case op < 5 || step < 50000:
			v := &entry{id: k}
			x.set(k, v)
			want[k] = v
		case op < 8:
			v := want[k]
			if r.IntN(4) == 0 {
				v = &entry{} // not k's: must stay
			} else {
				delete(want, k)
			}
			x.delIf(k, v)
		default:
			if got := x.get(k); got != want[k] {
				t.Fatalf("step %d: get %#x = %p, want %p", step, k, got, want[k])
			}
		}
		if step%5000 == 0 || step > 199000 {
			if x.len() != len(want) {
				t.Fatalf("step %d: %d held, want %d", step, x.len(), len(want))
			}
			for k, v := range want {
				if x.get(k) != v {
					t.Fatalf("step %d: %#x lost or wrong", step, k)
				}
			}
		}
	}
	if len(x.cells) <= tableMinCells {
		t.Errorf("table never grew: %d cells", len(x.cells))
	}
}
