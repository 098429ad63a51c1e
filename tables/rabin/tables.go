package rabin

import "fmt"

// Tables roll a fingerprint over a window of W bytes modulo Pol.
type Tables struct {
	Pol   Pol
	W     int
	shift uint
	out   [256]uint64 // b · x^{8(W−1)} mod Pol
	mod   [256]uint64 // t · x^d mod Pol | t · x^d (the second part truncated to 64 bits)
}

// NewTables builds the tables of polynomial p (degree 9..63) and window w
// (1..4096 bytes).
func NewTables(p Pol, w int) (*Tables, error) {
	d := p.Deg()
	if d < 9 || d > 63 {
		return nil, fmt.Errorf("%w (polynomial %s has degree %d)", ErrPol, p, d)
	}
	if w < 1 || w > 4096 {
		return nil, fmt.Errorf("rabin: window %d bytes, want 1..4096", w)
	}
	t := &Tables{Pol: p, W: w, shift: uint(d - 8)}
	// x^{8(w−1)} mod p, then each byte times it.
	xw := uint64(1)
	for i := 0; i < 8*(w-1); i++ {
		xw = p.mulX(xw)
	}
	for b := 0; b < 256; b++ {
		t.out[b] = p.MulMod(uint64(b), xw)
	}
	xd := p.mod(uint64(1) << uint(d)) // x^d mod p (d <= 63 fits)
	for b := 0; b < 256; b++ {
		t.mod[b] = p.MulMod(uint64(b), xd) ^ uint64(b)<<uint(d)
	}
	return t, nil
}

// append returns the fingerprint of the sequence f was the fingerprint of,
// with byte b appended (multiplied by x^8, b added, reduced).
func (t *Tables) append(f uint64, b byte) uint64 {
	return (f<<8 | uint64(b)) ^ t.mod[f>>t.shift]
}

// Fingerprint returns the fingerprint of window (any length; the formula of
// the package doc with w = len(window)), computed directly.
func (t *Tables) Fingerprint(window []byte) uint64 {
	var f uint64
	for _, b := range window {
		f = t.append(f, b)
	}
	return f
}

// roll slides the window: out leaves, in enters.
func (t *Tables) roll(f uint64, out, in byte) uint64 {
	return t.append(f^t.out[out], in)
}

// Roll slides a window of W bytes whose fingerprint is f by one byte: out
// leaves (the window's first byte), in enters.
func (t *Tables) Roll(f uint64, out, in byte) uint64 { return t.roll(f, out, in) }
