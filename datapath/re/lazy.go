package re

// Markers found lazily (the CPU's path): a payload that repeats logged
// bytes has, inside the repeated run, exactly the markers of the logged
// copy — a marker depends on its window's bytes only — so the encoder need
// not fingerprint it there. matchLazy fingerprints the payload a stretch
// of lazyChunk window ends at a time, in lanes (rabin.Marker.MarkersFP:
// four chains side by side, about three times one chain's rate); at each
// marker of the stretch it tries a match, and when one is found it drops
// the stretch's markers past it, takes the markers (and fingerprints) of
// the matched run from the logged payloads' entries and goes on after it.
// After lazyMisses markers without a match the payload looks new, and the
// rest is fingerprinted in lanes and matched as usual. The references, and
// the markers logged with the payload, are those that fingerprinting
// every position gives (tests compare the two): the markers are tried in
// the same order, whichever way they were found.

// lazyMisses is how many markers without a match make matchLazy take the
// rest of a payload in lanes.
const lazyMisses = 2

// lazyChunk is how many window ends matchLazy fingerprints at a time:
// enough for rabin's lanes (its laneMin), about two markers' worth.
const lazyChunk = 512

// matchLazy is match for a payload whose markers are not computed yet: it
// returns the references and the payload's markers and fingerprints
// (appended to pos and fps).
func (e *Encoder) matchLazy(pay []byte, id uint64, pos []int32, fps []uint64) ([]ref, []int32, []uint64) {
	m := e.m
	w, n := e.cfg.Window, len(pay)
	refs := e.refs[:0]
	done, misses := 0, 0
	r := w - 1 // the next window end to fingerprint
	if rs, sp, ok := e.probeStart(pay, id, refs); ok {
		// pay's windows ending in [w−1, pe) are q's ending in [j, qe).
		refs, done = rs, sp.done
		pos, fps = copyMarkers(pos, fps, sp.q, sp.j, sp.qe, w-1-sp.j)
		pos, fps, r = e.afterMatch(pay, pos, fps, sp)
	}
stretch:
	for r < n {
		hi := r + lazyChunk // window ends [r, hi)
		if n-hi < lazyChunk {
			hi = n // a short rest goes with this stretch (lanes need lazyChunk)
		}
		base := len(pos)
		pos, fps = m.MarkersFP(pos, fps, pay[r-w+1:hi])
		for k := base; k < len(pos); k++ {
			pos[k] += int32(r - w + 1)
		}
		e.index.touch(fps[base:])
		for k := base; k < len(pos); k++ {
			i := int(pos[k])
			if i-w+1 < done || len(refs)+3 > maxRefs {
				continue
			}
			var sp span
			var ok bool
			if refs, sp, ok = e.matchAt(pay, id, i, fps[k], done, refs); ok {
				done, misses = sp.done, 0
				// pay's windows ending in (i, pe) are q's ending in (j, qe).
				pos, fps = pos[:k+1], fps[:k+1]
				pos, fps = copyMarkers(pos, fps, sp.q, sp.j+1, sp.qe, i-sp.j)
				pos, fps, r = e.afterMatch(pay, pos, fps, sp)
				continue stretch
			}
			if misses++; misses >= lazyMisses {
				// The rest in lanes, and matched as usual.
				if hi < n {
					at := len(pos)
					pos, fps = m.MarkersFP(pos, fps, pay[hi-w+1:])
					for j := at; j < len(pos); j++ {
						pos[j] += int32(hi - w + 1)
					}
					e.index.touch(fps[at:])
				}
				refs, _ = e.matchList(pay, id, pos[k+1:], fps[k+1:], done, refs)
				return refs, pos, fps
			}
		}
		r = hi
	}
	return refs, pos, fps
}

// afterMatch appends the markers of a match's continuation into the
// payload logged after its own (sp.y), when it has any, and returns the
// window end to go on fingerprinting from.
func (e *Encoder) afterMatch(pay []byte, pos []int32, fps []uint64, sp span) ([]int32, []uint64, int) {
	m, w, mask := e.m, e.cfg.Window, e.m.Mask()
	if sp.yn < w {
		return pos, fps, sp.pe
	}
	// Those ending in [pe, pe+w−1) straddle q's end and y's start:
	// fingerprinted (one chain: four chains, each started on its own
	// window, took 1.6 times as long for these 31 windows); those ending
	// in [pe+w−1, pe+yn) are y's.
	g := m.FingerprintAt(pay, sp.pe)
	for t := sp.pe; ; {
		if g&mask == 0 {
			pos, fps = append(pos, int32(t)), append(fps, g)
		}
		if t++; t >= sp.pe+w-1 {
			break
		}
		g = m.Roll(g, pay[t-w], pay[t])
	}
	pos, fps = copyMarkers(pos, fps, sp.y, w-1, sp.yn, sp.pe)
	return pos, fps, sp.pe + sp.yn
}

// copyMarkers appends x's markers at positions [lo, hi), moved by shift,
// and their fingerprints.
func copyMarkers(pos []int32, fps []uint64, x *entry, lo, hi, shift int) ([]int32, []uint64) {
	for k, p := range x.markers {
		if int(p) >= hi {
			break
		}
		if int(p) >= lo {
			pos, fps = append(pos, int32(int(p)+shift)), append(fps, x.fps[k])
		}
	}
	return pos, fps
}
