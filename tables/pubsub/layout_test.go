package pubsub

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
)

func TestLayoutHeader(t *testing.T) {
	tb := tableOf(t, mustParse(t, "1: a = \"xyz\" && b > 2\n7: a != \"q\" && b < 3.5"))
	l := tb.Layout()
	w := l.Image.Words
	h := w[RegionHeader]
	// 2 names; anchors: one list per name, an entry and 2 of room each; 2+2
	// words for "a = xyz" and "b > 2", 2+3 for "a != q" and "b < 3.5" (a
	// float: a long record); 4 string bytes; 2 slots; 2 ports.
	want := []uint32{LayoutMagic, LayoutVersion, 2, 6, 9, 4, 2, 2}
	if !slices.Equal(h, want) {
		t.Fatalf("header %v, want %v", h, want)
	}
	if got := w[RegionPorts][:2]; !slices.Equal(got, []uint32{1, 7}) {
		t.Errorf("ports %v", got)
	}
	// "xyz" then "q", packed little-endian.
	if got := w[RegionStrings][0]; got != 'x'|'y'<<8|'z'<<16|'q'<<24 {
		t.Errorf("strings %#x", got)
	}
	if l.Names["a"] != 0 || l.Names["b"] != 1 {
		t.Errorf("names %v", l.Names)
	}
	// Slot 0 anchors on a (both lists empty: its first name), slot 1 on b
	// (a's list is longer by then).
	if got := w[RegionNames][:4]; !slices.Equal(got, []uint32{0, 1, 3, 1}) {
		t.Errorf("names region %v", got)
	}
	if w[RegionAnchorSlot][0] != 0 || w[RegionAnchorSlot][3] != 1 {
		t.Errorf("anchor slots %v", w[RegionAnchorSlot][:4])
	}
	if sig := w[RegionAnchorSig][0]; sig != 3 {
		t.Errorf("slot 0's signature %#x, want names 0 and 1", sig)
	}
	// Records of slot 0: a = "xyz" (short string: offset 0, length 3),
	// b > 2 (short integer).
	cw := w[RegionConstraints]
	if f := w[RegionFilters][:4]; !slices.Equal(f, []uint32{0, 0<<8 | 2, 4, 1<<8 | 2}) {
		t.Errorf("filters %v", f)
	}
	rec := []uint32{0<<8 | ShortRecord | uint32(TypeString)<<4 | uint32(OpEq), 0<<8 | 3,
		1<<8 | ShortRecord | uint32(TypeInt)<<4 | uint32(OpGt), 2}
	if !slices.Equal(cw[:4], rec) {
		t.Errorf("records %#x, want %#x", cw[:4], rec)
	}
	if cw[6]&ShortRecord != 0 || cw[6]>>4&7 != uint32(TypeFloat) {
		t.Errorf("float record %#x", cw[6])
	}
}

// TestDeviceBubbles keeps a mirror of the device image up to date with
// the bubbles of each change and checks that matching from the mirror's
// words gives the brute-force answers.
func TestDeviceBubbles(t *testing.T) {
	g := randGen{rand.New(rand.NewSource(3))}
	tb := New()
	var specs []Spec
	for i := 0; i < 30; i++ {
		specs = append(specs, g.spec(5))
	}
	if _, err := tb.AddSpecs(specs); err != nil {
		t.Fatal(err)
	}
	dev := NewDevice(tb)
	var mirror *bubble.Image
	u := dev.Mirror().Sync()
	if err := u.ApplyTo(&mirror); err != nil {
		t.Fatal(err)
	}
	full, bubbles := 0, 0
	for round := 0; round < 40; round++ {
		if g.r.Intn(2) == 0 {
			s := g.spec(5)
			if _, err := tb.Add(s.Port, s.Filters); err != nil {
				t.Fatal(err)
			}
		} else if subs := tb.List(); len(subs) > 0 {
			if err := tb.Remove(subs[g.r.Intn(len(subs))].ID); err != nil {
				t.Fatal(err)
			}
		}
		u := dev.Update(tb)
		if u.Full != nil {
			full++
		} else {
			bubbles += len(u.Bubbles)
		}
		if err := u.ApplyTo(&mirror); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if d := mirror.Diff(dev.Mirror().Image()); d != "" {
			t.Fatalf("round %d: mirror differs: %s", round, d)
		}
		cur := tb.Specs()
		l := &Layout{Image: mirror, Names: dev.Layout().Names}
		for i := 0; i < 20; i++ {
			e := g.event()
			want := BruteMatch(cur, &e)
			if got := EvalLayout(l, &e); !slices.Equal(got, want) {
				t.Fatalf("round %d: event %v: mirror %v, brute %v", round, e.String(), got, want)
			}
		}
	}
	if bubbles == 0 {
		t.Error("no update went out as bubbles")
	}
	t.Logf("%d full images, %d bubbles", full, bubbles)
}

// TestDeviceChangeIsBubbles checks that one subscription change on a
// CCM-like table costs bubbles for its own words only (no new generation),
// that the mirror kept by those bubbles answers as the brute-force
// evaluator, and that an Update behind a trimmed slot log (a bulk add of
// more filters than the log keeps) compares every slot and stays right.
func TestDeviceChangeIsBubbles(t *testing.T) {
	sc := DefaultScenario()
	sc.FiltersMin, sc.FiltersMax = 1000, 1200
	specs := sc.Subscriptions()
	tb := tableOf(t, specs)
	dev := NewDevice(tb)
	var mirror *bubble.Image
	u := dev.Mirror().Sync()
	if err := u.ApplyTo(&mirror); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(5))
	maxBubbles := 0
	var ids []ID
	for round := 0; round < 300; round++ {
		if len(ids) > 0 && rng.Intn(2) == 0 {
			k := rng.Intn(len(ids))
			if err := tb.Remove(ids[k]); err != nil {
				t.Fatal(err)
			}
			ids = append(ids[:k], ids[k+1:]...)
		} else {
			s := specs[rng.Intn(len(specs))]
			id, err := tb.Add(s.Port, s.Filters)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		u := dev.Update(tb)
		if u.Full != nil {
			t.Fatalf("round %d: a change built a new generation", round)
		}
		maxBubbles = max(maxBubbles, len(u.Bubbles))
		if err := u.ApplyTo(&mirror); err != nil {
			t.Fatal(err)
		}
	}
	if maxBubbles > 64 {
		t.Errorf("a change wrote %d words", maxBubbles)
	}
	check := func(what string) {
		t.Helper()
		cur := tb.Specs()
		l := &Layout{Image: mirror, Names: dev.Layout().Names}
		for _, e := range sc.Events(100) {
			if got, want := EvalLayout(l, &e), BruteMatch(cur, &e); !slices.Equal(got, want) {
				t.Fatalf("%s: event %s: mirror %v, brute %v", what, e.String(), got, want)
			}
		}
	}
	check("after single changes")
	// A bulk add past the slot log's length, then a removal of as many.
	more := sc
	more.Seed, more.FiltersMin, more.FiltersMax = 9, 3400, 3400
	ms := more.Subscriptions()[:slotLogMax+100]
	added, err := tb.AddSpecs(ms)
	if err != nil {
		t.Fatal(err)
	}
	u = dev.Update(tb)
	if err := u.ApplyTo(&mirror); err != nil {
		t.Fatal(err)
	}
	check("after a bulk add")
	for _, id := range added {
		tb.Remove(id)
	}
	u = dev.Update(tb)
	if err := u.ApplyTo(&mirror); err != nil {
		t.Fatal(err)
	}
	check("after removing it")
	t.Logf("largest single change: %d words; %d generations", maxBubbles, dev.Rebuilds)
}

// TestDeviceGrowth grows a small table by filters on new names and new
// ports, one change per Update: the image outgrows its head-room now and
// then (a new generation, a full image), anchor lists move to the end of
// their regions, and the mirror kept by the updates always answers as the
// brute-force evaluator.
func TestDeviceGrowth(t *testing.T) {
	tb := tableOf(t, mustParse(t, "1: a0 = 1"))
	dev := NewDevice(tb)
	var mirror *bubble.Image
	u := dev.Mirror().Sync()
	if err := u.ApplyTo(&mirror); err != nil {
		t.Fatal(err)
	}
	full := 0
	for i := 1; i < 1500; i++ {
		f := Filter{{Name: fmt.Sprintf("a%d", i%300), Op: OpGe, Value: Int(int64(i % 7))},
			{Name: fmt.Sprintf("b%d", i), Op: OpPrefix, Value: Str(fmt.Sprintf("s%d", i%50))}}
		if _, err := tb.Add(uint32(1+i%120), []Filter{f}); err != nil {
			t.Fatal(err)
		}
		u := dev.Update(tb)
		if u.Full != nil {
			full++
		}
		if err := u.ApplyTo(&mirror); err != nil {
			t.Fatal(err)
		}
		if i%100 != 0 {
			continue
		}
		cur := tb.Specs()
		l := &Layout{Image: mirror, Names: dev.Layout().Names}
		for k := 0; k < 30; k++ {
			e := Event{Attrs: []Attr{{Name: fmt.Sprintf("a%d", (i+k)%300), Value: Int(int64(k % 9))},
				{Name: fmt.Sprintf("b%d", (i*7+k)%i+1), Value: Str(fmt.Sprintf("s%dx", k%60))}}}
			if got, want := EvalLayout(l, &e), BruteMatch(cur, &e); !slices.Equal(got, want) {
				t.Fatalf("after %d adds: event %s: mirror %v, brute %v", i, e.String(), got, want)
			}
		}
	}
	if full == 0 || full > 60 {
		t.Errorf("%d new generations in 1,499 adds", full)
	}
	t.Logf("%d new generations in 1,499 adds", full)
}
