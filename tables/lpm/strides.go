package lpm

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// transactionBytes is the size of one memory transaction GAMT's Algorithm 3
// counts (a GPU L2 line).
const transactionBytes = 128

// nodeCounts returns D[b] for b in [0, width): the number of distinct b-bit
// truncations among the prefixes longer than b, which is the number of nodes a
// level starting at bit b has. keys must be sorted by address.
func nodeCounts(width int, keys []pkey) []int {
	d := make([]int, width)
	for b := range d {
		first := true
		var ph, pl uint64
		for _, k := range keys {
			if int(k.l) <= b {
				continue
			}
			h, l := maskBits(k.hi, k.lo, b)
			if first || h != ph || l != pl {
				d[b]++
				ph, pl, first = h, l, false
			}
		}
	}
	return d
}

// sortByAddr sorts keys by address (then length).
func sortByAddr(keys []pkey) {
	slices.SortFunc(keys, func(a, b pkey) int {
		if c := cmp.Compare(a.hi, b.hi); c != 0 {
			return c
		}
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		return cmp.Compare(a.l, b.l)
	})
}

// strideCost prices a level that starts at bit b with stride s.
type strideCost struct {
	capacity []uint64 // nodes allocated for a level starting at bit b
}

// bytes returns the level's size in bytes, or MaxUint64 if the encoding
// cannot hold it.
func (c strideCost) bytes(b, s int) uint64 {
	n := c.capacity[b]
	if n > maxNodes || n<<s > uint64(maxLevelWords) {
		return math.MaxUint64
	}
	return max(n, 1) << s * 4
}

func (c strideCost) transactions(b, s int) uint64 {
	return (c.bytes(b, s) + transactionBytes - 1) / transactionBytes
}

// chooseStrides is GAMT's Algorithm 3: of all ways to cut width bits into
// levels strides of 1..maxStride bits, it takes one whose widest level (in
// bytes, capacity included) is smallest and, among those, the one with the
// fewest memory transactions over all levels (sum of ceil(bytes/128)). Both
// passes are exact dynamic programs over (levels left, first bit). Ties go to
// the wider first stride, which ends more lookups early.
func chooseStrides(width, levels, maxStride int, c strideCost) ([]int, error) {
	if levels < 1 || levels > width || levels*maxStride < width {
		return nil, fmt.Errorf("lpm: %d levels of at most %d bits cannot cover %d: %w", levels, maxStride, width, ErrOptions)
	}
	best := minMaxLevel(width, levels, maxStride, c)
	if best == math.MaxUint64 {
		return nil, fmt.Errorf("lpm: no %d-level layout fits: %w", levels, ErrTooLarge)
	}
	return minTransactions(width, levels, maxStride, c, best), nil
}

// table2 is a (levels+1) x (width+1) table of costs, MaxUint64 = infeasible.
func table2(levels, width int) [][]uint64 {
	t := make([][]uint64, levels+1)
	for k := range t {
		t[k] = make([]uint64, width+1)
		for b := range t[k] {
			t[k][b] = math.MaxUint64
		}
	}
	t[0][width] = 0
	return t
}

// minMaxLevel returns the smallest achievable size of the widest level.
func minMaxLevel(width, levels, maxStride int, c strideCost) uint64 {
	f := table2(levels, width)
	for k := 1; k <= levels; k++ {
		for b := 0; b < width; b++ {
			for s := 1; s <= min(maxStride, width-b); s++ {
				rest := f[k-1][b+s]
				if rest == math.MaxUint64 {
					continue
				}
				f[k][b] = min(f[k][b], max(c.bytes(b, s), rest))
			}
		}
	}
	return f[levels][0]
}

// minTransactions returns the strides with the fewest transactions among
// those whose every level is at most limit bytes.
func minTransactions(width, levels, maxStride int, c strideCost, limit uint64) []int {
	g := table2(levels, width)
	choice := make([][]int, levels+1)
	for k := 1; k <= levels; k++ {
		choice[k] = make([]int, width+1)
		for b := 0; b < width; b++ {
			for s := min(maxStride, width-b); s >= 1; s-- {
				rest := g[k-1][b+s]
				if rest == math.MaxUint64 || c.bytes(b, s) > limit {
					continue
				}
				if t := rest + c.transactions(b, s); t < g[k][b] {
					g[k][b], choice[k][b] = t, s
				}
			}
		}
	}
	strides := make([]int, 0, levels)
	for k, b := levels, 0; k > 0; k-- {
		s := choice[k][b]
		strides = append(strides, s)
		b += s
	}
	return strides
}
