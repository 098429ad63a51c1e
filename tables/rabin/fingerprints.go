package rabin

import "slices"

// Fingerprints appends to dst the fingerprints of payload's windows ending
// in [a, b) (W−1 <= a <= b <= len(payload)), in order, and returns it. The
// windows are split into four runs rolled side by side (fastLanes' steps:
// four independent chains of look-ups that the processor overlaps, where
// one chain waits for each step in turn), each run started on the W bytes
// of its first window; fewer than eight windows take one chain.
func (m *Marker) Fingerprints(dst []uint64, payload []byte, a, b int) []uint64 {
	w, n := m.W, b-a
	if n <= 0 {
		return dst
	}
	at := len(dst)
	dst = slices.Grow(dst, n)[:at+n]
	g := dst[at:]
	mod, step, shift := &m.mod, &m.step, m.shift
	L := n / 4
	if L < 2 {
		var f uint64
		for _, c := range payload[a-w+1 : a+1] {
			f = (f<<8 | uint64(c)) ^ mod[byte(f>>shift)]
		}
		g[0] = f
		for t := a + 1; t < b; t++ {
			f = (f<<8 | uint64(payload[t])) ^ mod[byte(f>>shift)] ^ step[payload[t-w]]
			g[t-a] = f
		}
		return dst
	}
	a1, a2, a3 := a+L, a+2*L, a+3*L
	w0 := payload[a-w+1 : a+1]
	w1, w2, w3 := payload[a1-w+1 : a1+1][:len(w0)], payload[a2-w+1 : a2+1][:len(w0)], payload[a3-w+1 : a3+1][:len(w0)]
	var f0, f1, f2, f3 uint64
	for j, c0 := range w0 {
		x0, x1, x2, x3 := mod[byte(f0>>shift)], mod[byte(f1>>shift)], mod[byte(f2>>shift)], mod[byte(f3>>shift)]
		f0 = (f0<<8 | uint64(c0)) ^ x0
		f1 = (f1<<8 | uint64(w1[j])) ^ x1
		f2 = (f2<<8 | uint64(w2[j])) ^ x2
		f3 = (f3<<8 | uint64(w3[j])) ^ x3
	}
	g[0], g[L], g[2*L], g[3*L] = f0, f1, f2, f3
	// Lane k's step j takes in byte a_k+j and lets go of byte a_k+j−W.
	in0 := payload[a+1 : a1]
	in1, in2, in3 := payload[a1+1 : a2][:len(in0)], payload[a2+1 : a3][:len(in0)], payload[a3+1 : a3+L][:len(in0)]
	out0 := payload[a+1-w : a1-w][:len(in0)]
	out1, out2, out3 := payload[a1+1-w : a2-w][:len(in0)], payload[a2+1-w : a3-w][:len(in0)], payload[a3+1-w : a3+L-w][:len(in0)]
	g0 := g[1:L][:len(in0)]
	g1, g2, g3 := g[L+1 : 2*L][:len(in0)], g[2*L+1 : 3*L][:len(in0)], g[3*L+1 : 4*L][:len(in0)]
	for j, c0 := range in0 {
		x0 := mod[byte(f0>>shift)] ^ step[out0[j]]
		x1 := mod[byte(f1>>shift)] ^ step[out1[j]]
		x2 := mod[byte(f2>>shift)] ^ step[out2[j]]
		x3 := mod[byte(f3>>shift)] ^ step[out3[j]]
		f0 = (f0<<8 | uint64(c0)) ^ x0
		f1 = (f1<<8 | uint64(in1[j])) ^ x1
		f2 = (f2<<8 | uint64(in2[j])) ^ x2
		f3 = (f3<<8 | uint64(in3[j])) ^ x3
		g0[j], g1[j], g2[j], g3[j] = f0, f1, f2, f3
	}
	// The remainder: lane 3 rolls on to b.
	for t := a3 + L; t < b; t++ {
		f3 = (f3<<8 | uint64(payload[t])) ^ mod[byte(f3>>shift)] ^ step[payload[t-w]]
		g[t-a] = f3
	}
	return dst
}
