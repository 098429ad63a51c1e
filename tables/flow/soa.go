package flow

// PackSoA writes the projected keys of a batch in structure-of-arrays order
// (GSwitch Algorithm 3): word words[j] of packet i goes to
// dst[j*len(keys)+i], so that consecutive GPU threads read consecutive words.
// Only the projected words are written (gPF's packet reduction); an index
// outside the key reads as 0. It reuses dst's storage and returns it.
func PackSoA(keys []Key, words []int, dst []uint32) []uint32 {
	n := len(keys)
	size := n * len(words)
	if cap(dst) < size {
		dst = make([]uint32, size)
	}
	dst = dst[:size]
	for j, w := range words {
		col := dst[j*n : (j+1)*n]
		if w < 0 || w >= KeyWords {
			clear(col)
			continue
		}
		for i := range keys {
			col[i] = keys[i][w]
		}
	}
	return dst
}
