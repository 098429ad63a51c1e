package flow

// blockAlloc carves a region into power-of-two blocks of units: free lists per
// size, a bump pointer for untouched space, larger free blocks split in
// halves. It does not merge freed blocks: when it has no room the table
// rebuilds its image compactly, with head-room.
type blockAlloc struct {
	capUnits int
	top      int
	used     int
	free     [32][]int
}

func newBlockAlloc(capUnits int) blockAlloc { return blockAlloc{capUnits: capUnits} }

// alloc returns the unit offset of a free block of 2^order units.
func (a *blockAlloc) alloc(order int) (int, bool) {
	if order < 0 || order >= len(a.free) {
		return 0, false
	}
	size := 1 << order
	if n := len(a.free[order]); n > 0 {
		off := a.free[order][n-1]
		a.free[order] = a.free[order][:n-1]
		a.used += size
		return off, true
	}
	for k := order + 1; k < len(a.free); k++ {
		n := len(a.free[k])
		if n == 0 {
			continue
		}
		off := a.free[k][n-1]
		a.free[k] = a.free[k][:n-1]
		for j := k - 1; j >= order; j-- {
			a.free[j] = append(a.free[j], off+1<<j)
		}
		a.used += size
		return off, true
	}
	if a.top+size > a.capUnits {
		return 0, false
	}
	off := a.top
	a.top += size
	a.used += size
	return off, true
}

// release returns a block to its free list.
func (a *blockAlloc) release(off, order int) {
	a.free[order] = append(a.free[order], off)
	a.used -= 1 << order
}
