package bubble

import (
	"math/rand/v2"
	"testing"
)

// TestBubblesReproduceImage writes random words, syncs at random points and
// checks that a mirror fed only with Updates always equals the image.
func TestBubblesReproduceImage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	m := NewMirror(NewImage([]string{"a", "b", "c"}, []int{1, 100, 1000}))
	var mirror *Image
	for step := 0; step < 20000; step++ {
		switch rng.IntN(100) {
		case 0:
			u := m.Sync()
			if err := u.ApplyTo(&mirror); err != nil {
				t.Fatal(err)
			}
			if d := mirror.Diff(m.Image()); d != "" {
				t.Fatalf("step %d: mirror differs: %s", step, d)
			}
		case 1:
			if rng.IntN(20) == 0 {
				im := NewImage([]string{"a", "b"}, []int{7, rng.IntN(500) + 1})
				m.Replace(im)
			}
		default:
			im := m.Image()
			r := Region(rng.IntN(len(im.Words)))
			off := uint32(rng.IntN(len(im.Words[r])))
			m.Set(r, off, rng.Uint32()%4)
		}
	}
}

func TestSyncCountsUniquePositions(t *testing.T) {
	m := NewMirror(NewImage([]string{"a"}, []int{64}))
	m.Sync()
	for i := 0; i < 10; i++ {
		m.Set(0, 3, uint32(i+1))
		m.Set(0, 63, uint32(i+1))
	}
	m.Set(0, 5, 0) // unchanged value: no bubble
	if m.Pending() != 2 {
		t.Fatalf("pending %d, want 2", m.Pending())
	}
	u := m.Sync()
	if len(u.Bubbles) != 2 || u.Bubbles[0] != (Bubble{0, 3, 10}) || u.Bubbles[1] != (Bubble{0, 63, 10}) {
		t.Fatalf("bubbles %v", u.Bubbles)
	}
	if u2 := m.Sync(); len(u2.Bubbles) != 0 || u2.Full != nil {
		t.Fatalf("second sync not empty: %+v", u2)
	}
}

func TestApplyRejectsOutOfRange(t *testing.T) {
	im := NewImage([]string{"a"}, []int{4})
	if err := im.Apply([]Bubble{{0, 1, 5}, {0, 4, 1}}); err == nil {
		t.Fatal("out-of-range bubble accepted")
	}
	if im.Words[0][1] != 0 {
		t.Fatal("a rejected bubble list changed the image")
	}
	if err := im.Apply([]Bubble{{1, 0, 5}}); err == nil {
		t.Fatal("bubble for a missing region accepted")
	}
}
