package pubsub

import (
	"runtime"
	"sync"
)

// radixSortRefsPar is radixSortRefs's passes over w goroutines: per pass,
// each counts the bytes of its contiguous chunk, the chunks' offsets are
// laid out bucket by bucket in chunk order, and each scatters its chunk in
// order — the same stable order as one goroutine.
func radixSortRefsPar(refs []slotRef, pass []int, w int) []slotRef {
	n := len(refs)
	per := (n + w - 1) / w
	w = (n + per - 1) / per
	tmp := make([]slotRef, n)
	src, dst := refs, tmp
	hist := make([][256]int, w)
	run := func(f func(c, lo, hi int)) {
		var wg sync.WaitGroup
		for c := 0; c < w; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				f(c, c*per, min((c+1)*per, n))
			}()
		}
		wg.Wait()
	}
	for _, b := range pass {
		key := func(r *slotRef) byte {
			if b < 8 {
				return byte(r.lo >> (8 * b))
			}
			return byte(r.hi >> (8 * (b - 8)))
		}
		run(func(c, lo, hi int) {
			h := &hist[c]
			*h = [256]int{}
			for i := lo; i < hi; i++ {
				h[key(&src[i])]++
			}
		})
		sum := 0
		for v := 0; v < 256; v++ {
			for c := 0; c < w; c++ {
				sum, hist[c][v] = sum+hist[c][v], sum
			}
		}
		run(func(c, lo, hi int) {
			h := &hist[c]
			for i := lo; i < hi; i++ {
				q := &h[key(&src[i])]
				dst[*q] = src[i]
				*q++
			}
		})
		src, dst = dst, src
	}
	return src
}

// Parallel bulk work: a bulk add (AddSpecs) and a device layout's build
// (NewDevice) split the parts that do not depend on each other over the
// cores — the validation of the specs, the radix sorts of the bulk's
// entries (radixSortRefsPar), the handing of the bulk's runs to
// their names' structures (each name's structures are its own), the names'
// final sorts (nameIdx.fix), and the layout's records, anchor entries and
// filter records (at offsets a sequential pass fixed first). The result is
// the sequential build's, word for word (TestParallelBuildIdentical).

// buildWorkers is the goroutines of the parallel parts: 0 is GOMAXPROCS,
// 1 the sequential build (tests compare the two).
var buildWorkers = 0

// parMin is the least work (items) worth going parallel for.
const parMin = 2048

func workers(items, least int) int {
	w := buildWorkers
	if w <= 0 {
		w = runtime.GOMAXPROCS(0)
	}
	if items < least {
		return 1
	}
	return max(1, min(w, items/max(least/4, 1)))
}

// parallelRanges splits [0, n) into w contiguous ranges and runs f on each,
// on its own goroutine when w > 1.
func parallelRanges(n, w int, f func(lo, hi int)) {
	if w <= 1 || n <= 1 {
		f(0, n)
		return
	}
	w = min(w, n)
	var wg sync.WaitGroup
	per := (n + w - 1) / w
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(lo, hi)
		}()
	}
	wg.Wait()
}

// parallelEach runs f(i) for i in [0, n), items taken in turn by w
// goroutines (for items of uneven size).
func parallelEach(n, w int, f func(i int)) {
	if w <= 1 || n <= 1 {
		for i := 0; i < n; i++ {
			f(i)
		}
		return
	}
	var next sync.Mutex
	i := 0
	var wg sync.WaitGroup
	for range min(w, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				k := i
				i++
				next.Unlock()
				if k >= n {
					return
				}
				f(k)
			}
		}()
	}
	wg.Wait()
}
