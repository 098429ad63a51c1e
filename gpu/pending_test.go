package gpu

import (
	"math/rand/v2"
	"testing"

	"github.com/gswitch/gswitch/tables/bubble"
)

// TestPendingLastWriteWins checks the CUDA backend's queue of applied
// bubbles: after any sequence of adds, compact leaves each written word once
// with its last value, and the dirty bits match the list.
func TestPendingLastWriteWins(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const words = 300
	base := []uint32{0, 100, 250}
	lens := []uint32{100, 150, 50}
	for round := 0; round < 200; round++ {
		var p pending
		want := map[uint32]uint32{}
		for a := rng.IntN(5); a >= 0; a-- {
			var bs []bubble.Bubble
			for k := rng.IntN(40); k >= 0; k-- {
				r := rng.IntN(3)
				b := bubble.Bubble{Region: bubble.Region(r), Offset: uint32(rng.IntN(int(lens[r]))), Value: rng.Uint32()}
				bs = append(bs, b)
			}
			var uniq []bubble.Bubble
			seen := map[uint32]bool{}
			for _, b := range bs {
				if o := base[b.Region] + b.Offset; !seen[o] {
					seen[o] = true
					for _, c := range bs { // the Update carries the latest value
						if base[c.Region]+c.Offset == o {
							b.Value = c.Value
						}
					}
					uniq = append(uniq, b)
				}
			}
			for _, b := range uniq {
				want[base[b.Region]+b.Offset] = b.Value
			}
			p.add(uniq, base, words)
		}
		p.compact()
		if len(p.off) != len(want) {
			t.Fatalf("round %d: %d pending writes, want %d", round, len(p.off), len(want))
		}
		for i, o := range p.off {
			if want[o] != p.val[i] {
				t.Fatalf("round %d: word %d = %d, want %d", round, o, p.val[i], want[o])
			}
			if p.dirty[o>>6]&(1<<(o&63)) == 0 {
				t.Fatalf("round %d: word %d pending but not dirty", round, o)
			}
		}
		p.reset()
		for _, d := range p.dirty {
			if d != 0 {
				t.Fatalf("round %d: dirty bits left after reset", round)
			}
		}
	}
}
