package pubsub

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
)

func TestLayoutHeader(t *testing.T) {
	tb := tableOf(t, mustParse(t, "1: a = \"xyz\" && b > 2\n7: a != \"q\""))
	l := tb.Layout()
	h := l.Image.Words[RegionHeader]
	want := []uint32{LayoutMagic, LayoutVersion, 2, 3, 4, 2, 2}
	if !slices.Equal(h, want) {
		t.Fatalf("header %v, want %v", h, want)
	}
	if got := l.Image.Words[RegionPorts]; !slices.Equal(got, []uint32{1, 7}) {
		t.Errorf("ports %v", got)
	}
	// "xyz" then "q", packed little-endian.
	if got := l.Image.Words[RegionStrings]; !slices.Equal(got, []uint32{'x' | 'y'<<8 | 'z'<<16 | 'q'<<24}) {
		t.Errorf("strings %#x", got)
	}
	if l.Names["a"] != 0 || l.Names["b"] != 1 {
		t.Errorf("names %v", l.Names)
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
