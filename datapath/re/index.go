package re

// table is the open-addressing hash table of the encoder's index (marker
// fingerprint → slots; idTable below is the same for the logs' ids), in place
// of Go maps: the encoder updates a fingerprint's slots for each marker it
// logs and each marker it evicts, and with a map that is a read and a write
// each; here one probe returns the value's address. Linear probing from a
// multiplicative hash of the key (markers have their low mask bits zero,
// so the whole key is hashed); deletion shifts the following cells of the
// run back (no tombstones); the table doubles at three quarters full.
// Not safe for concurrent use: the encoder's or decoder's mutex guards it.
type table[V any] struct {
	cells []cell[V]
	mask  uint64 // len(cells) − 1, a power of two minus one
	shift uint   // 64 − log2(len(cells))
	n     int    // occupied cells
	sink  uint64 // touch's loads go here (so that they are made)
}

type cell[V any] struct {
	key  uint64
	full bool
	v    V
}

// fpIndex is the encoder's index.
type fpIndex = table[slots]

const tableMinCells = 1 << 10

func newTable[V any]() table[V] {
	var x table[V]
	x.alloc(tableMinCells)
	return x
}

func newFPIndex() fpIndex { return newTable[slots]() }

func (x *table[V]) alloc(n int) {
	x.cells = make([]cell[V], n)
	x.mask = uint64(n - 1)
	x.shift = 64
	for m := n; m > 1; m >>= 1 {
		x.shift--
	}
	x.n = 0
}

// home returns k's home cell.
func (x *table[V]) home(k uint64) uint64 { return (k * 0x9e3779b97f4a7c15) >> x.shift }

// get returns k's value, or nil. The address is valid until the next put
// or del.
func (x *table[V]) get(k uint64) *V {
	for i := x.home(k); ; i = (i + 1) & x.mask {
		c := &x.cells[i]
		if !c.full {
			return nil
		}
		if c.key == k {
			return &c.v
		}
	}
}

// touch loads the home cells of keys, which a caller is about to look
// up one by one: the loads are independent, so their cache misses overlap
// (a table of a large log's markers is far larger than the caches, and
// each look-up of a new fingerprint misses), where the look-ups one after
// the other would wait for each miss in turn.
func (x *table[V]) touch(keys []uint64) {
	s := x.sink
	for _, k := range keys {
		s += x.cells[x.home(k)].key
	}
	x.sink = s
}

// put returns k's value, inserting a zero one when absent. The address is
// valid until the next put or del.
func (x *table[V]) put(k uint64) *V {
	if 4*(x.n+1) > 3*len(x.cells) {
		x.grow()
	}
	for i := x.home(k); ; i = (i + 1) & x.mask {
		c := &x.cells[i]
		if !c.full {
			c.key, c.full = k, true
			x.n++
			return &c.v
		}
		if c.key == k {
			return &c.v
		}
	}
}

// del removes k, if present.
func (x *table[V]) del(k uint64) {
	i := x.home(k)
	for ; x.cells[i].key != k || !x.cells[i].full; i = (i + 1) & x.mask {
		if !x.cells[i].full {
			return
		}
	}
	// Backward shift: move each following cell of the run into the hole
	// when its home does not lie cyclically in (hole, its cell].
	hole := i
	for j := (i + 1) & x.mask; x.cells[j].full; j = (j + 1) & x.mask {
		h := x.home(x.cells[j].key)
		if (j-h)&x.mask >= (j-hole)&x.mask {
			x.cells[hole] = x.cells[j]
			hole = j
		}
	}
	x.cells[hole] = cell[V]{}
	x.n--
}

func (x *table[V]) grow() {
	old := x.cells
	x.alloc(2 * len(old))
	for _, c := range old {
		if c.full {
			*x.put(c.key) = c.v
		}
	}
}

// len returns the number of keys held.
func (x *table[V]) len() int { return x.n }

// idTable is table for the logs' ids (payload id → entry), with cells of
// 16 bytes (a nil entry marks an empty cell) rather than table's 24: four
// to a cache line. A log of 64 MiB holds about 46,000 payloads of 1,448
// bytes, a table of 1 MiB, which the caches do not keep; each look-up of a
// cold id is a miss, and smaller cells make fewer.
type idTable struct {
	cells []idCell
	mask  uint64
	shift uint
	n     int
}

type idCell struct {
	key uint64
	v   *entry
}

func newIDTable() idTable {
	var x idTable
	x.alloc(tableMinCells)
	return x
}

func (x *idTable) alloc(n int) {
	x.cells = make([]idCell, n)
	x.mask = uint64(n - 1)
	x.shift = 64
	for m := n; m > 1; m >>= 1 {
		x.shift--
	}
	x.n = 0
}

func (x *idTable) home(k uint64) uint64 { return (k * 0x9e3779b97f4a7c15) >> x.shift }

// get returns k's entry, or nil.
func (x *idTable) get(k uint64) *entry {
	for i := x.home(k); ; i = (i + 1) & x.mask {
		c := &x.cells[i]
		if c.v == nil {
			return nil
		}
		if c.key == k {
			return c.v
		}
	}
}

// set makes v (not nil) k's entry.
func (x *idTable) set(k uint64, v *entry) {
	if 4*(x.n+1) > 3*len(x.cells) {
		x.grow()
	}
	for i := x.home(k); ; i = (i + 1) & x.mask {
		c := &x.cells[i]
		if c.v == nil {
			c.key, c.v = k, v
			x.n++
			return
		}
		if c.key == k {
			c.v = v
			return
		}
	}
}

// delIf removes k when its entry is v.
func (x *idTable) delIf(k uint64, v *entry) {
	i := x.home(k)
	for ; x.cells[i].key != k || x.cells[i].v == nil; i = (i + 1) & x.mask {
		if x.cells[i].v == nil {
			return
		}
	}
	if x.cells[i].v != v {
		return
	}
	// Backward shift, as table.del.
	hole := i
	for j := (i + 1) & x.mask; x.cells[j].v != nil; j = (j + 1) & x.mask {
		h := x.home(x.cells[j].key)
		if (j-h)&x.mask >= (j-hole)&x.mask {
			x.cells[hole] = x.cells[j]
			hole = j
		}
	}
	x.cells[hole] = idCell{}
	x.n--
}

func (x *idTable) grow() {
	old := x.cells
	x.alloc(2 * len(old))
	for _, c := range old {
		if c.v != nil {
			x.set(c.key, c.v)
		}
	}
}

func (x *idTable) len() int { return x.n }
