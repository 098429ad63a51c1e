package pubsub

import (
	"runtime"
	"slices"
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
// cores — the validation of the specs, the slot-order keys
// (slotRefsPar), the radix sort of the slot order (radixSortRefsPar), the
// index pass name by name (indexByName: each name's structures are its
// own; a name's bulk and final sorts on the goroutine that fills it), the
// layout's first pass (firstPassPar, which also fixes each slot's record
// offset and anchor entry in its sequential anchor pass), and the layout's
// records, anchor entries and filter records (writeSlotsPar). The result
// is the sequential build's, word for word (TestParallelBuildIdentical).

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

// chunks splits [0, n) into at most w contiguous chunks and returns their
// bounds: chunk c is [b[c], b[c+1]).
func chunks(n, w int) []int {
	per := max(1, (n+w-1)/max(w, 1))
	b := []int{0}
	for lo := 0; lo < n; lo += per {
		b = append(b, min(lo+per, n))
	}
	return b
}

// eachChunk runs f on every chunk of b at once.
func eachChunk(b []int, f func(c, lo, hi int)) {
	var wg sync.WaitGroup
	for c := 0; c+1 < len(b); c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(c, b[c], b[c+1])
		}()
	}
	wg.Wait()
}

// firstPassPar is firstPassSeq over w goroutines: each numbers the names
// and strings of its chunk of slots as it first sees them; the chunks'
// lists, merged in chunk order, give the first-seen order of one pass (the
// strings' offsets) and the names (numbered in sorted order); each chunk
// then renumbers its constraints and counts their record words; the
// anchors, each filter on the name whose list is shortest so far, are
// chosen in one pass in slot order, as one goroutine does.
func firstPassPar(t *Table, w int) passResult {
	b := chunks(len(t.info), w)
	nc := len(b) - 1
	type local struct {
		cons     int
		names    map[string]uint32
		nameList []string
		strMap   map[string]uint32
		strList  []string
		nameTo   []uint32 // local name -> final index
		strTo    []uint32 // local string -> offset
		words    int
	}
	ls := make([]local, nc)
	eachChunk(b, func(c, lo, hi int) {
		n := 0
		for sl := lo; sl < hi; sl++ {
			if t.info[sl] != 0 {
				n += len(t.meta[sl].filt)
			}
		}
		ls[c].cons = n
	})
	start := make([]int, nc+1)
	for c := range ls {
		start[c+1] = start[c] + ls[c].cons
	}
	ids := make([]uint32, start[nc])
	soffs := make([]uint32, start[nc])
	eachChunk(b, func(c, lo, hi int) {
		l := &ls[c]
		l.names, l.strMap = map[string]uint32{}, map[string]uint32{}
		j := start[c]
		lastName, lastID, have := "", uint32(0), false
		for sl := lo; sl < hi; sl++ {
			if t.info[sl] == 0 {
				continue
			}
			f := t.meta[sl].filt
			for k := range f {
				cn := &f[k]
				id := lastID
				if !have || cn.Name != lastName {
					var ok bool
					if id, ok = l.names[cn.Name]; !ok {
						id = uint32(len(l.nameList))
						l.names[cn.Name] = id
						l.nameList = append(l.nameList, cn.Name)
					}
					lastName, lastID, have = cn.Name, id, true
				}
				ids[j] = id
				if cn.Value.Type == TypeString {
					si, ok := l.strMap[cn.Value.Str]
					if !ok {
						si = uint32(len(l.strList))
						l.strMap[cn.Value.Str] = si
						l.strList = append(l.strList, cn.Value.Str)
					}
					soffs[j] = si
				}
				j++
			}
		}
	})
	// Merge in chunk order.
	seen := map[string]bool{}
	var nameList []string
	strs := map[string]uint32{}
	strBytes := 0
	for c := range ls {
		for _, n := range ls[c].nameList {
			if !seen[n] {
				seen[n] = true
				nameList = append(nameList, n)
			}
		}
		for _, s := range ls[c].strList {
			if _, ok := strs[s]; !ok {
				strs[s] = uint32(strBytes)
				strBytes += len(s)
			}
		}
	}
	sorted := slices.Clone(nameList)
	slices.Sort(sorted)
	names := make(map[string]uint32, len(sorted))
	for i, n := range sorted {
		names[n] = uint32(i)
	}
	for c := range ls {
		l := &ls[c]
		l.nameTo = make([]uint32, len(l.nameList))
		for i, n := range l.nameList {
			l.nameTo[i] = names[n]
		}
		l.strTo = make([]uint32, len(l.strList))
		for i, s := range l.strList {
			l.strTo[i] = strs[s]
		}
	}
	slotCW := make([]uint32, len(t.info))
	eachChunk(b, func(c, lo, hi int) {
		l := &ls[c]
		j := start[c]
		for sl := lo; sl < hi; sl++ {
			if t.info[sl] == 0 {
				continue
			}
			f := t.meta[sl].filt
			sw := uint32(0)
			for k := range f {
				cn := &f[k]
				ids[j] = l.nameTo[ids[j]]
				wd := 2
				switch {
				case cn.Value.Type == TypeString:
					soffs[j] = l.strTo[soffs[j]]
					if soffs[j] >= 1<<24 {
						wd = 3
					}
				case !shortValue(cn.Value):
					wd = 3
				}
				l.words += wd
				sw += uint32(wd)
				j++
			}
			slotCW[sl] = sw
		}
	})
	consWords := 0
	for c := range ls {
		consWords += ls[c].words
	}
	count := make([]uint32, len(sorted))
	anchorOf := make([]uint32, len(t.info))
	slotCoff := make([]uint32, len(t.info))
	slotFirst := make([]uint32, len(t.info))
	slotPos := make([]uint32, len(t.info))
	j, cons := 0, uint32(0)
	for sl, in := range t.info {
		if in == 0 {
			continue
		}
		n := int(slotN(t, sl))
		best := ids[j]
		for _, ni := range ids[j+1 : j+n] {
			if count[ni] < count[best] {
				best = ni
			}
		}
		anchorOf[sl] = best
		slotPos[sl] = count[best]
		count[best]++
		slotFirst[sl] = uint32(j)
		slotCoff[sl] = cons
		cons += slotCW[sl]
		j += n
	}
	return passResult{names: names, nameList: sorted, count: count, ids: ids, soffs: soffs, anchorOf: anchorOf,
		strs: strs, strBytes: strBytes, consWords: consWords,
		slotCW: slotCW, slotCoff: slotCoff, slotFirst: slotFirst, slotPos: slotPos, totalCons: int(cons)}
}

// slotN is the number of constraints of live slot sl.
func slotN(t *Table, sl int) int { return len(t.meta[sl].filt) }

// writeSlotsPar is writeSlots' parallel path with the offsets and anchor
// positions that firstPassPar fixed in its sequential pass (slot order, as
// the sequential writeSlots hands them out): every slot is written on w
// goroutines, each its own range of slots.
func (d *Device) writeSlotsPar(t *Table, fp *passResult, w int) {
	if d.cons != 0 || len(d.freeCons) != 0 || d.cons+fp.totalCons > d.region(RegionConstraints) {
		panic("pubsub: a fresh device layout has no room for its own filters")
	}
	for ni, n := range fp.count {
		if d.lists[ni].n != 0 || n > d.lists[ni].cap {
			panic("pubsub: a fresh device layout has no room for its own filters")
		}
	}
	ids, soffs := fp.ids, fp.soffs
	parallelRanges(len(t.info), w, func(lo, hi int) {
		for sl := lo; sl < hi; sl++ {
			in := t.info[sl]
			if in == 0 {
				continue
			}
			f := t.meta[sl].filt
			ds := &d.slots[sl]
			*ds = dslot{filt: f, pi: in >> 8, anchor: fp.anchorOf[sl], pos: fp.slotPos[sl], coff: fp.slotCoff[sl], cw: fp.slotCW[sl]}
			first := fp.slotFirst[sl]
			d.writeSlot(sl, ds, ids[first:int(first)+len(f)], soffs[first:int(first)+len(f)])
		}
	})
	d.cons = fp.totalCons
	for ni, n := range fp.count {
		d.lists[ni].n = n
		d.direct[RegionNames][2*ni+1] = n
	}
}
