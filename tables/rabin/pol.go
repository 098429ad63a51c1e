package rabin

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Pol is a polynomial over GF(2): bit i is the coefficient of x^i.
type Pol uint64

// DefaultPol is the default polynomial: irreducible, degree 53.
const DefaultPol Pol = 0x3DA3358B4DC173

// Deg returns the polynomial's degree, -1 for the zero polynomial.
func (p Pol) Deg() int { return bits.Len64(uint64(p)) - 1 }

// String writes the polynomial in hexadecimal, as ParsePol reads it.
func (p Pol) String() string { return "0x" + strconv.FormatUint(uint64(p), 16) }

// mulX returns a·x mod p for a of degree below p's (p of degree 1..63).
func (p Pol) mulX(a uint64) uint64 {
	d := uint(p.Deg())
	a <<= 1
	if a&(1<<d) != 0 {
		a ^= uint64(p)
	}
	return a
}

// MulMod returns a·b mod p, for a and b of degree below p's.
func (p Pol) MulMod(a, b uint64) uint64 {
	var r uint64
	for b != 0 {
		if b&1 != 0 {
			r ^= a
		}
		a = p.mulX(a)
		b >>= 1
	}
	return r
}

// mod returns a mod p for any a.
func (p Pol) mod(a uint64) uint64 {
	d := p.Deg()
	for i := 63; i >= d; i-- {
		if a&(1<<uint(i)) != 0 {
			a ^= uint64(p) << uint(i-d)
		}
	}
	return a
}

// gcd returns the greatest common divisor of a and b.
func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, Pol(b).mod(a)
	}
	return a
}

// Irreducible reports whether p has no factor of degree 1..deg/2, by
// Rabin's test: gcd(x^(2^i) − x mod p, p) = 1 for every such i.
func (p Pol) Irreducible() bool {
	d := p.Deg()
	if d < 1 {
		return false
	}
	if d == 1 {
		return true
	}
	sq := uint64(2) // x
	for i := 1; i <= d/2; i++ {
		sq = p.MulMod(sq, sq) // x^(2^i) mod p
		if gcd(uint64(p), sq^2) != 1 {
			return false
		}
	}
	return true
}

// ParsePol reads a polynomial written as an integer (hexadecimal with 0x,
// else decimal) and checks that its degree lies in [minDeg, maxDeg] and that
// it is irreducible.
func ParsePol(s string, minDeg, maxDeg int) (Pol, error) {
	t := strings.TrimSpace(s)
	base := 10
	if strings.HasPrefix(t, "0x") || strings.HasPrefix(t, "0X") {
		t, base = t[2:], 16
	}
	v, err := strconv.ParseUint(t, base, 64)
	if err != nil {
		return 0, fmt.Errorf("polynomial %q: not an integer (hexadecimal with 0x, or decimal)", s)
	}
	p := Pol(v)
	if d := p.Deg(); d < minDeg || d > maxDeg {
		return 0, fmt.Errorf("polynomial %s: degree %d, want %d..%d", p, d, minDeg, maxDeg)
	}
	if !p.Irreducible() {
		return 0, fmt.Errorf("polynomial %s: not irreducible over GF(2)", p)
	}
	return p, nil
}

// ErrPol is returned for a polynomial that cannot be used for rolling.
var ErrPol = errors.New("rabin: the polynomial's degree must be 9..63")
