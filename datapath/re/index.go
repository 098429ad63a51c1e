package re

// fpIndex is the encoder's index: marker fingerprint → slots. It is an
// open-addressing table with linear probing, in place of a Go map because
// the encoder updates a slot's value for each marker it logs and each
// marker it evicts: with a map that is a read and a write each, here one
// probe that returns the value's address. Fingerprints are below 2^63 (a
// polynomial has degree at most 63), so a stored key is fp with bit 63 set
// and 0 marks an empty cell. Markers have their low mask bits zero, so the
// home cell comes from a multiplicative hash of the whole fingerprint.
// Deletion shifts the following cells of the run back (no tombstones).
// Not safe for concurrent use: the encoder's mutex guards it.
type fpIndex struct {
	cells []fpCell
	mask  uint64 // len(cells) − 1, a power of two minus one
	shift uint   // 64 − log2(len(cells))
	n     int    // occupied cells
}

type fpCell struct {
	key uint64 // fp | occupied, or 0
	s   slots
}

const (
	occupied        = 1 << 63
	fpIndexMinCells = 1 << 10
)

func newFPIndex() fpIndex {
	var x fpIndex
	x.alloc(fpIndexMinCells)
	return x
}

func (x *fpIndex) alloc(n int) {
	x.cells = make([]fpCell, n)
	x.mask = uint64(n - 1)
	x.shift = 64
	for m := n; m > 1; m >>= 1 {
		x.shift--
	}
	x.n = 0
}

// home returns fp's home cell.
func (x *fpIndex) home(fp uint64) uint64 { return (fp * 0x9e3779b97f4a7c15) >> x.shift }

// get returns fp's slots, or nil.
func (x *fpIndex) get(fp uint64) *slots {
	k := fp | occupied
	for i := x.home(fp); ; i = (i + 1) & x.mask {
		c := &x.cells[i]
		if c.key == k {
			return &c.s
		}
		if c.key == 0 {
			return nil
		}
	}
}

// put returns fp's slots, inserting empty ones when absent. The address is
// valid until the next put or del.
func (x *fpIndex) put(fp uint64) *slots {
	if 4*(x.n+1) > 3*len(x.cells) {
		x.grow()
	}
	k := fp | occupied
	for i := x.home(fp); ; i = (i + 1) & x.mask {
		c := &x.cells[i]
		if c.key == k {
			return &c.s
		}
		if c.key == 0 {
			c.key = k
			x.n++
			return &c.s
		}
	}
}

// del removes fp, if present.
func (x *fpIndex) del(fp uint64) {
	k := fp | occupied
	i := x.home(fp)
	for ; x.cells[i].key != k; i = (i + 1) & x.mask {
		if x.cells[i].key == 0 {
			return
		}
	}
	// Backward shift: move each following cell of the run into the hole
	// when its home does not lie cyclically in (hole, its cell].
	hole := i
	for j := (i + 1) & x.mask; x.cells[j].key != 0; j = (j + 1) & x.mask {
		h := x.home(x.cells[j].key &^ occupied)
		if (j-h)&x.mask >= (j-hole)&x.mask {
			x.cells[hole] = x.cells[j]
			hole = j
		}
	}
	x.cells[hole] = fpCell{}
	x.n--
}

func (x *fpIndex) grow() {
	old := x.cells
	x.alloc(2 * len(old))
	for _, c := range old {
		if c.key != 0 {
			*x.put(c.key &^ occupied) = c.s
		}
	}
}

// len returns the number of fingerprints held.
func (x *fpIndex) len() int { return x.n }
