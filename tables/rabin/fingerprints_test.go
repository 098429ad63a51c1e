package rabin

import (
	"math/rand/v2"
	"testing"
)

// TestFingerprints compares Fingerprints with FingerprintAt window by
// window, for several windows, runs of every length up to 80 (one chain
// below eight windows) and positions, appended after what dst held.
func TestFingerprints(t *testing.T) {
	r := rand.New(rand.NewPCG(71, 72))
	pay := make([]byte, 700)
	for i := range pay {
		pay[i] = byte(r.Uint32())
	}
	for _, w := range []int{1, 16, 32, 48, 64} {
		m, err := NewMarker(DefaultPol, w, 8)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n <= 80; n++ {
			a := w - 1 + r.IntN(len(pay)-w-n+1)
			g := m.Fingerprints([]uint64{7}, pay, a, a+n)
			if len(g) != 1+n || g[0] != 7 {
				t.Fatalf("window %d, %d windows: %d values, first %d", w, n, len(g), g[0])
			}
			for k, f := range g[1:] {
				if want := m.FingerprintAt(pay, a+k); f != want {
					t.Fatalf("window %d, windows from %d: %d: %#x, want %#x", w, a, k, f, want)
				}
			}
		}
	}
}
