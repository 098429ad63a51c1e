package re

import (
	"math/rand/v2"
	"testing"
)

// TestCRCCombine: the CRC-32C of a concatenation from its parts' equals
// the one computed over the whole, for parts of every length up to 2,100
// bytes and some long ones, with the shift cache hit and missed.
func TestCRCCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	buf := make([]byte, 70000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	var c crcShift
	check := func(la, lb int) {
		a, b := buf[:la], buf[la:la+lb]
		if got, want := c.combine(checksum32c(a), checksum32c(b), lb), checksum32c(buf[:la+lb]); got != want {
			t.Fatalf("A %d bytes, B %d: combined %#x, want %#x", la, lb, got, want)
		}
	}
	for lb := 0; lb <= 2100; lb++ {
		check(r.IntN(80), lb)
		check(r.IntN(80), lb) // the cache hit
		if lb%97 == 0 {
			for k := 0; k < 2*hotRepeat; k++ { // the table built and used
				check(r.IntN(80), lb)
			}
			if !c.hotOK || c.hotN != lb {
				t.Fatalf("no table for %d bytes after %d in a row", lb, 2*hotRepeat)
			}
		}
	}
	for _, lb := range []int{9000, 65535, 65536, 69000} {
		check(1+r.IntN(100), lb)
	}
	check(0, 0)
}
