package rabin

import "fmt"

// Marker finds the markers of payloads: positions whose window's fingerprint
// has its low Bits zero.
type Marker struct {
	*Tables
	Bits int
	mask uint64
	// step[o] = o · x^{8W} mod P: sliding the window with one look-up per
	// leaving byte (see fastLanes).
	step [256]uint64
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
	m := &Marker{Tables: t, Bits: b, mask: 1<<uint(b) - 1}
	for o := range m.step {
		m.step[o] = t.append(t.out[o], 0)
	}
	return m, nil
}

// Markers appends to dst the marker positions of payload, in increasing
// order, and returns it.
func (m *Marker) Markers(dst []int32, payload []byte) []int32 {
	dst, _ = m.markers(dst, nil, payload, false)
	return dst
}

// MarkersFP is Markers that also appends each marker's fingerprint to fps.
func (m *Marker) MarkersFP(pos []int32, fps []uint64, payload []byte) ([]int32, []uint64) {
	return m.markers(pos, fps, payload, true)
}

// laneMin is the shortest payload hashed in lanes: shorter ones, where the
// lanes' warm-up would cost more than it saves, take one chain.
const laneMin = 512

// laneHits is the most markers one lane keeps on its own; a payload with
// more (long runs of zeros have a marker at every byte) takes one chain.
const laneHits = 64

func (m *Marker) markers(pos []int32, fps []uint64, payload []byte, withFP bool) ([]int32, []uint64) {
	if len(payload) < m.W {
		return pos, fps
	}
	if len(payload) >= laneMin && len(payload) >= 8*m.W {
		if p, f, ok := m.fastLanes(pos, fps, payload, withFP); ok {
			return p, f
		}
	}
	return m.oneChain(pos, fps, payload, withFP)
}

// oneChain rolls one fingerprint over the whole payload.
func (m *Marker) oneChain(pos []int32, fps []uint64, payload []byte, withFP bool) ([]int32, []uint64) {
	w := m.W
	var f uint64
	for _, b := range payload[:w-1] {
		f = m.append(f, b)
	}
	mask := m.mask
	for i := w - 1; i < len(payload); i++ {
		f = m.append(f, payload[i])
		if f&mask == 0 {
			pos = append(pos, int32(i))
			if withFP {
				fps = append(fps, f)
			}
		}
		f ^= m.out[payload[i-w+1]]
	}
	return pos, fps
}

// fastLanes splits the window ends of payload into four stretches of equal
// length whose fingerprints roll side by side (four independent chains of
// table look-ups that the processor overlaps), each started on the W bytes
// of its first window; the last stretch takes the remainder. Each step is
//
//	F(i+1) = (F(i)·x^8 + b(i+1)) mod P − b(i−W+1)·x^{8W} mod P
//
// with one look-up for the reduction (mod, by the bits that rose above
// the degree) and one for the leaving byte (step), which does not depend
// on the chain: the reduction is linear, so the leaving byte's term can be
// reduced in advance. ok is false when a lane found more than laneHits
// markers (the caller takes one chain then).
func (m *Marker) fastLanes(pos []int32, fps []uint64, payload []byte, withFP bool) ([]int32, []uint64, bool) {
	w := m.W
	n := len(payload)
	first := w - 1       // the first window end
	L := (n - first) / 4 // window ends per lane
	a1, a2, a3 := first+L, first+2*L, first+3*L
	f0 := m.Fingerprint(payload[first-w+1 : first+1])
	f1 := m.Fingerprint(payload[a1-w+1 : a1+1])
	f2 := m.Fingerprint(payload[a2-w+1 : a2+1])
	f3 := m.Fingerprint(payload[a3-w+1 : a3+1])
	var hp [4][laneHits]int32
	var hf [4][laneHits]uint64
	var hn [4]int
	mask := m.mask
	hit := func(k int, at int, f uint64) bool {
		if hn[k] == laneHits {
			return false
		}
		hp[k][hn[k]], hf[k][hn[k]] = int32(at), f
		hn[k]++
		return true
	}
	if f0&mask == 0 && !hit(0, first, f0) || f1&mask == 0 && !hit(1, a1, f1) ||
		f2&mask == 0 && !hit(2, a2, f2) || f3&mask == 0 && !hit(3, a3, f3) {
		return pos, fps, false
	}
	// Lane k's step j takes in byte a_k+j and lets go of byte a_k+j−W.
	in0, in1, in2, in3 := payload[first+1:a1], payload[a1+1:a2], payload[a2+1:a3], payload[a3+1:a3+L]
	out0, out1, out2, out3 := payload[first+1-w:a1-w], payload[a1+1-w:a2-w], payload[a2+1-w:a3-w], payload[a3+1-w:a3+L-w]
	mod, step, shift := &m.mod, &m.step, m.shift
	out0, out1, out2, out3 = out0[:len(in0)], out1[:len(in0)], out2[:len(in0)], out3[:len(in0)]
	in1, in2, in3 = in1[:len(in0)], in2[:len(in0)], in3[:len(in0)]
	for j, b0 := range in0 {
		x0 := mod[byte(f0>>shift)] ^ step[out0[j]]
		x1 := mod[byte(f1>>shift)] ^ step[out1[j]]
		x2 := mod[byte(f2>>shift)] ^ step[out2[j]]
		x3 := mod[byte(f3>>shift)] ^ step[out3[j]]
		f0 = (f0<<8 | uint64(b0)) ^ x0
		f1 = (f1<<8 | uint64(in1[j])) ^ x1
		f2 = (f2<<8 | uint64(in2[j])) ^ x2
		f3 = (f3<<8 | uint64(in3[j])) ^ x3
		if (f0&mask == 0 || f1&mask == 0 || f2&mask == 0 || f3&mask == 0) &&
			!m.laneHit(&hp, &hf, &hn, first+1+j, L, f0, f1, f2, f3) {
			return pos, fps, false
		}
	}
	// The remainder: lane 3 rolls on to the payload's end.
	for i := a3 + L; i < n; i++ {
		f3 = (f3<<8 | uint64(payload[i])) ^ mod[byte(f3>>shift)] ^ step[payload[i-w]]
		if f3&mask == 0 && !hit(3, i, f3) {
			return pos, fps, false
		}
	}
	for k := range hn {
		for h := 0; h < hn[k]; h++ {
			pos = append(pos, hp[k][h])
			if withFP {
				fps = append(fps, hf[k][h])
			}
		}
	}
	return pos, fps, true
}

// laneHit records the lanes' markers at window end at (lane 0's; lane k's
// is L·k further); false when a lane is full.
func (m *Marker) laneHit(hp *[4][laneHits]int32, hf *[4][laneHits]uint64, hn *[4]int, at, L int, f0, f1, f2, f3 uint64) bool {
	for k, f := range [4]uint64{f0, f1, f2, f3} {
		if f&m.mask != 0 {
			continue
		}
		if hn[k] == laneHits {
			return false
		}
		hp[k][hn[k]], hf[k][hn[k]] = int32(at+k*L), f
		hn[k]++
	}
	return true
}

// FingerprintAt returns the fingerprint of the window ending at position i
// of payload (i >= W−1).
func (m *Marker) FingerprintAt(payload []byte, i int) uint64 {
	return m.Fingerprint(payload[i-m.W+1 : i+1])
}
