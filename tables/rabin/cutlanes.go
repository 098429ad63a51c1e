package rabin

// The cut search's lanes. A fingerprint f of degree below d is kept
// left-aligned, g = f·x^s with s = 64−d, in a uint64: multiplying by x^8 is
// then g<<8, which drops the 8 bits that rose to degree d and above by
// itself, and those 8 bits are g>>56, a constant shift. A step of a lane is
//
//	g' = g<<8 ^ modL[g>>56] ^ (b_in<<s ^ stepL[b_out])
//
// where modL[t] = (t·x^d mod P)·x^s and stepL[o] = (o·x^{8w} mod P)·x^s:
// on the dependency chain one shift, one look-up and one XOR; the leaving
// and entering bytes' terms are off it. A window's fingerprint has its low
// AvgBits zero when g & (mask<<s) is zero.

// laneBlock is how many candidates each of the four lanes checks per
// round: a round costs laneBlock steps of the four lanes side by side, and
// a cut found in a lane other than the first still costs the whole round.
const laneBlock = 4 << 10

// laneSpan is the bytes a round of lanes reads: the windows of its four
// lanes' candidates, the first window's first byte to the last window's
// last.
const laneSpan = 4*laneBlock + ChunkWindow - 1

// laneTables are the Cutter's left-aligned tables.
type laneTables struct {
	s     uint   // 64 − deg
	maskL uint64 // mask<<s
	modL  [256]uint64
	stepL [256]uint64
}

func (c *Cutter) initLanes() {
	d := c.p.Pol.Deg()
	lt := &c.lt
	lt.s = uint(64 - d)
	lt.maskL = c.mask << lt.s
	xd := c.p.Pol.mod(uint64(1) << uint(d))
	for b := range lt.modL {
		lt.modL[b] = c.p.Pol.MulMod(uint64(b), xd) << lt.s
		lt.stepL[b] = c.step[b] << lt.s
	}
}

// warm returns the left-aligned fingerprint of w (ChunkWindow bytes).
func (lt *laneTables) warm(w *[ChunkWindow]byte) uint64 {
	var g uint64
	s := lt.s & 63
	for _, b := range w {
		g = g<<8 ^ lt.modL[g>>56] ^ uint64(b)<<s
	}
	return g
}

// round checks the 4·laneBlock candidates whose windows end at
// a[ChunkWindow−1 ..], lane k those ending in a[ChunkWindow−1+k·laneBlock ..
// ChunkWindow−1+(k+1)·laneBlock). It returns the first candidate with a cut
// (i: the window ending at a[ChunkWindow−1+i]) and its fingerprint, or −1.
func (lt *laneTables) round(a *[laneSpan]byte) (int, uint64) {
	const B, W = laneBlock, ChunkWindow
	g0 := lt.warm((*[W]byte)(a[0*B:]))
	g1 := lt.warm((*[W]byte)(a[1*B:]))
	g2 := lt.warm((*[W]byte)(a[2*B:]))
	g3 := lt.warm((*[W]byte)(a[3*B:]))
	m := lt.maskL
	s := lt.s & 63
	mod, step := &lt.modL, &lt.stepL
	var hits cutHits
	hits.reset()
	if hits.note(0, m, g0, g1, g2, g3) {
		return hits.first(s)
	}
	for j := 1; j < B; j++ {
		// Candidate j of lane k takes in a[k·B+W−1+j] and lets go of
		// a[k·B+j−1].
		x0 := step[a[0*B+j-1]] ^ uint64(a[0*B+W-1+j])<<s
		x1 := step[a[1*B+j-1]] ^ uint64(a[1*B+W-1+j])<<s
		x2 := step[a[2*B+j-1]] ^ uint64(a[2*B+W-1+j])<<s
		x3 := step[a[3*B+j-1]] ^ uint64(a[3*B+W-1+j])<<s
		g0 = g0<<8 ^ mod[g0>>56] ^ x0
		g1 = g1<<8 ^ mod[g1>>56] ^ x1
		g2 = g2<<8 ^ mod[g2>>56] ^ x2
		g3 = g3<<8 ^ mod[g3>>56] ^ x3
		if g0&m == 0 || g1&m == 0 || g2&m == 0 || g3&m == 0 {
			if hits.note(j, m, g0, g1, g2, g3) {
				break
			}
		}
	}
	return hits.first(s)
}

// cutHits are the lanes' first hits in a round.
type cutHits struct {
	at  [4]int // candidate in the lane, −1: none yet
	cut [4]uint64
}

func (h *cutHits) reset() { h.at = [4]int{-1, -1, -1, -1} }

// note records the lanes' hits at candidate j (left-aligned fingerprints
// g0..g3, mask m) and says whether lane 0 has one: the earliest of all, so
// the round is over.
//
//go:noinline
func (h *cutHits) note(j int, m uint64, g0, g1, g2, g3 uint64) bool {
	for k, g := range [4]uint64{g0, g1, g2, g3} {
		if g&m == 0 && h.at[k] < 0 {
			h.at[k], h.cut[k] = j, g
		}
	}
	return h.at[0] >= 0
}

// first returns the earliest hit as round does.
func (h *cutHits) first(s uint) (int, uint64) {
	for k := range h.at {
		if h.at[k] >= 0 {
			return k*laneBlock + h.at[k], h.cut[k] >> s
		}
	}
	return -1, 0
}
