package agent

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/datapath/l3"
	"github.com/gswitch/gswitch/gpu"
)

// TestTableIDsLayout: the agent's fixed ranges and the router's first
// allocation give today's numbering (flow tables from 0, the router at
// l3.DefaultTableIDBase, LPM-shaped tables from 1<<24).
func TestTableIDsLayout(t *testing.T) {
	d := &Agent{ids: NewTableIDs()}
	lpmBase, err := d.reserveTableIDs()
	if err != nil {
		t.Fatal(err)
	}
	if lpmBase != 1<<24 {
		t.Fatalf("LPM-shaped tables' base %#x, want 1<<24", lpmBase)
	}
	r, err := d.ids.Alloc(routerIDsOwner, 2*3)
	if err != nil {
		t.Fatal(err)
	}
	if r.First != l3.DefaultTableIDBase || r.N != 6 {
		t.Fatalf("router range %v, want 6 ids from %#x", r, l3.DefaultTableIDBase)
	}
	got := d.ids.Ranges()
	if len(got) != 3 || got[0].Owner != flowTablesOwner || got[1].Owner != routerIDsOwner || got[2].Owner != lpmShapeIDsOwner {
		t.Fatalf("ranges %v", got)
	}
	for id, owner := range map[gpu.TableID]string{0: flowTablesOwner, 253: flowTablesOwner, 1<<20 + 5: routerIDsOwner,
		1<<24 | 3<<16 | 7: lpmShapeIDsOwner} {
		if o, ok := d.ids.Owner(id); !ok || o.Owner != owner {
			t.Errorf("Owner(%#x) = %v, %v; want %s", id, o, ok, owner)
		}
	}
	for _, id := range []gpu.TableID{256, 1<<20 + 6, 1<<25 + 1} {
		if o, ok := d.ids.Owner(id); ok {
			t.Errorf("Owner(%#x) = %v, want none", id, o)
		}
	}
	// A second allocation goes to the next free block.
	if r2, err := d.ids.Alloc("more", 1); err != nil || r2.First != 2<<20 {
		t.Fatalf("second allocation %v, %v; want 1 id at %#x", r2, err, 2<<20)
	}
}

func TestTableIDsErrors(t *testing.T) {
	a := NewTableIDs()
	if _, err := a.Reserve("a", 100, 50); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		first gpu.TableID
		n     uint64
		want  string
	}{
		{120, 1, "b [0x78, 0x79) overlaps a [0x64, 0x96)"},
		{90, 11, "overlaps a"},
		{149, 10, "overlaps a"},
		{10, 0, "do not fit"},
		{1<<32 - 2, 3, "do not fit"},
	} {
		if _, err := a.Reserve("b", c.first, c.n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Reserve(%#x, %d): %v, want an error with %q", c.first, c.n, err, c.want)
		}
	}
	for _, c := range []struct {
		first gpu.TableID
		n     uint64
	}{{90, 10}, {150, 1}, {1<<32 - 1, 1}} {
		if _, err := a.Reserve("c", c.first, c.n); err != nil {
			t.Errorf("Reserve(%#x, %d) beside the others: %v", c.first, c.n, err)
		}
	}
	// Alloc takes the lowest aligned start that fits: one id fits at 0
	// below the reservations, 200 do not and go to the next block; a
	// range that needs the whole space cannot fit.
	if r, err := a.Alloc("d", 0); err != nil || r.First != 0 || r.N != 1 {
		t.Fatalf("Alloc(0): %v, %v; want one id at 0", r, err)
	}
	if r, err := a.Alloc("d", 200); err != nil || r.First != IDBlock {
		t.Fatalf("Alloc(200): %v, %v; want 200 ids at %#x", r, err, IDBlock)
	}
	if _, err := a.Alloc("e", 1<<32); err == nil || !strings.Contains(err.Error(), "no free range") {
		t.Fatalf("Alloc of the whole space: %v", err)
	}
}

// TestTableIDsDisjoint: random reservations and allocations never hand
// out overlapping ranges (checked against a brute-force scan of the
// ranges handed out before).
func TestTableIDsDisjoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	a := NewTableIDs()
	var given []IDRange
	for i := range 2000 {
		n := uint64(1 + rng.IntN(3*IDBlock))
		var r IDRange
		var err error
		if i%2 == 0 {
			r, err = a.Reserve("r", gpu.TableID(rng.Uint32()>>4), n)
		} else {
			r, err = a.Alloc("a", n)
			if err == nil && uint64(r.First)%IDBlock != 0 {
				t.Fatalf("Alloc gave %v, not aligned to %#x", r, IDBlock)
			}
		}
		overlaps := false
		for _, g := range given {
			if uint64(g.First) < uint64(r.First)+n && uint64(r.First) < g.end() {
				overlaps = true
			}
		}
		if err == nil && overlaps {
			t.Fatalf("%v overlaps an earlier range", r)
		}
		if err == nil {
			given = append(given, r)
		}
	}
	if len(a.Ranges()) != len(given) {
		t.Fatalf("%d ranges kept, %d handed out", len(a.Ranges()), len(given))
	}
}
