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

// TestChunkOrder checks the order a scatter writes a chunk in: writing the
// chunk's words in order gives the image that applying the Updates in turn
// gives; each word is written once; every word that is no pointer comes
// before every pointer; pointers go deepest region (highest offset) first,
// and each launch's pointers lie in one region.
func TestChunkOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := []uint32{0, 100, 250, 400}
	lens := []uint32{100, 150, 150, 60}
	const words = 460
	for round := 0; round < 300; round++ {
		allPtr := round%5 == 4
		var want, got [words]uint32
		var p pending
		var bs []bubble.Bubble
		for k := rng.IntN(200); k >= 0; k-- {
			r := rng.IntN(len(base))
			v := rng.Uint32()
			if rng.IntN(2) == 0 {
				v &^= 0xff // a leaf
			}
			b := bubble.Bubble{Region: bubble.Region(r), Offset: uint32(rng.IntN(int(lens[r]))), Value: v}
			bs = append(bs, b)
			want[base[r]+b.Offset] = v
		}
		var c chunk
		if round%2 == 0 {
			p.add(bs, base, words) // one Update
			c = p.take(base, allPtr)
		} else { // in pieces
			for i := 0; i < len(bs); {
				j := min(len(bs), i+1+rng.IntN(20))
				p.add(bs[i:j], base, words)
				i = j
			}
			c = p.take(base, allPtr)
			if len(p.off) != 0 || p.dup {
				t.Fatalf("round %d: take left %d pending writes", round, len(p.off))
			}
		}
		written := map[uint32]bool{}
		for i, o := range c.off {
			if written[o] {
				t.Fatalf("round %d: word %d written twice", round, o)
			}
			written[o] = true
			got[o] = c.val[i]
		}
		if got != want {
			t.Fatalf("round %d: the chunk's writes differ from the bubbles applied in turn", round)
		}
		if len(c.ends) == 0 || c.ends[len(c.ends)-1] != len(c.off) {
			t.Fatalf("round %d: launches end at %v for %d writes", round, c.ends, len(c.off))
		}
		lo, seenPtr := 0, false
		for _, hi := range c.ends {
			if hi <= lo {
				t.Fatalf("round %d: empty or reversed launch %d..%d", round, lo, hi)
			}
			ptr := allPtr || c.val[lo]&0xff != 0
			for i := lo; i < hi; i++ {
				isPtr := allPtr || c.val[i]&0xff != 0
				switch {
				case isPtr != ptr:
					t.Fatalf("round %d: a launch mixes leaves and pointers", round)
				case !isPtr && seenPtr:
					t.Fatalf("round %d: a leaf after a pointer", round)
				case isPtr && regionOf(base, c.off[i]) != regionOf(base, c.off[lo]):
					t.Fatalf("round %d: a pointer launch spans regions", round)
				case isPtr && i > lo && c.off[i] > c.off[i-1]:
					t.Fatalf("round %d: pointers not deepest first", round)
				}
			}
			if ptr && seenPtr && regionOf(base, c.off[lo]) >= regionOf(base, c.off[lo-1]) {
				t.Fatalf("round %d: pointer launches not deepest region first", round)
			}
			seenPtr = seenPtr || ptr
			lo = hi
		}
	}
}
