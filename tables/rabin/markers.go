package rabin

import "fmt"

// Marker finds the markers of payloads: positions whose window's fingerprint
// has its low Bits zero.
type Marker struct {
	*Tables
	Bits int
	mask uint64
}

// NewMarker returns a Marker for polynomial p, window w and b mask bits
// (1..32).
func NewMarker(p Pol, w, b int) (*Marker, error) {
	t, err := NewTables(p, w)
	if err != nil {
		return nil, err
	}
	if b < 1 || b > 32 || b >= p.Deg() {
		return nil, fmt.Errorf("rabin: %d mask bits, want 1..32 and below the polynomial's degree %d", b, p.Deg())
	}
	return &Marker{Tables: t, Bits: b, mask: 1<<uint(b) - 1}, nil
}

// Markers appends to dst the marker positions of payload, in increasing
// order, and returns it.
func (m *Marker) Markers(dst []int32, payload []byte) []int32 {
	w := m.W
	if len(payload) < w {
		return dst
	}
	var f uint64
	for _, b := range payload[:w-1] {
		f = m.append(f, b)
	}
	mask := m.mask
	for i := w - 1; i < len(payload); i++ {
		f = m.append(f, payload[i])
		if f&mask == 0 {
			dst = append(dst, int32(i))
		}
		f ^= m.out[payload[i-w+1]]
	}
	return dst
}

// MarkersFP is Markers that also appends each marker's fingerprint to fps.
func (m *Marker) MarkersFP(pos []int32, fps []uint64, payload []byte) ([]int32, []uint64) {
	w := m.W
	if len(payload) < w {
		return pos, fps
	}
	var f uint64
	for _, b := range payload[:w-1] {
		f = m.append(f, b)
	}
	mask := m.mask
	for i := w - 1; i < len(payload); i++ {
		f = m.append(f, payload[i])
		if f&mask == 0 {
			pos = append(pos, int32(i))
			fps = append(fps, f)
		}
		f ^= m.out[payload[i-w+1]]
	}
	return pos, fps
}

// FingerprintAt returns the fingerprint of the window ending at position i
// of payload (i >= W−1).
func (m *Marker) FingerprintAt(payload []byte, i int) uint64 {
	return m.Fingerprint(payload[i-m.W+1 : i+1])
}
