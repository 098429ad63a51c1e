package flow

// Batched tuple and Bloom search: a chunk of packets goes through the
// classes together, class by class (as GPU threads do), in phases whose
// memory loads do not depend on branches — the Bloom words of every packet,
// then the three candidate ids of every packet that passed — so that their
// cache misses overlap. It computes exactly what View.Lookup computes.

// chunk is the number of packets searched together.
const chunk = 32

// batchState holds a chunk's working set (on the stack of its caller).
type batchState struct {
	best [chunk]uint64
	live [chunk]uint8 // packets that classes from here on may still change
	act  [chunk]uint8 // packets searching this class
	key  [chunk][KeyWords]uint32
	pos  [CuckooWays][chunk]int
	ids  [CuckooWays][chunk]uint32
	bw   [2][chunk]uint32 // Bloom words
	bb   [2][chunk]uint64 // Bloom bit indices
}

// lookupChunk looks up n <= chunk projected keys into out.
func (v *View) lookupChunk(pk *[chunk][KeyWords]uint32, n int, out []RuleID) {
	if v.algo == Linear || v.algo == Merge {
		for i := 0; i < n; i++ {
			out[i], _ = v.Lookup(pk[i][:v.p])
		}
		return
	}
	var s batchState
	v.tupleChunk(pk, n, &s)
	for i := 0; i < n; i++ {
		out[i] = NoMatch
		if s.best[i] != 0 {
			out[i] = RankID(s.best[i])
		}
	}
}

func (v *View) tupleChunk(pk *[chunk][KeyWords]uint32, n int, s *batchState) {
	nc := min(int(v.hdr[HdrCount]), len(v.order))
	p, dw := v.p, v.dw
	n = min(n, chunk)
	nl := n
	for i := 0; i < n; i++ {
		s.live[i] = uint8(i)
	}
	for c := 0; c < nc && nl > 0; c++ {
		slot := int(v.order[c])
		if slot >= v.nslot {
			continue
		}
		desc := v.desc[slot*dw : slot*dw+dw]
		d := desc[p:]
		// Max priorities only fall along the order: a packet whose best
		// beats this class beats every later one.
		maxp := uint64(d[DescMaxPrio])
		k := 0
		for _, i := range s.live[:nl] {
			if s.best[i]>>32 <= maxp {
				s.live[k] = i
				k++
			}
		}
		nl = k
		na := 0
		for _, i := range s.live[:nl] {
			if preHas(d, PreBucket(d[DescSel], pk[i][:p])) {
				s.act[na] = i
				na++
			}
		}
		fam := int(d[DescFamily])
		if fam >= v.k {
			continue
		}
		fn := v.coef[fam*HashFuncs : fam*HashFuncs+HashFuncs]
		mask := desc[:p]
		for j := 0; j < na; j++ {
			i := s.act[j]
			key, src := s.key[i][:len(mask)], pk[i][:len(mask)]
			for w, m := range mask {
				key[w] = src[w] & m
			}
		}
		if v.algo == Bloom {
			if na = v.bloomPhase(d, fn, na, s); na == 0 {
				continue
			}
		}
		tbl, ok := v.table(d)
		if !ok {
			continue
		}
		v.probePhase(tbl, uint(d[DescLogB]), fn, na, s)
	}
}

// bloomPhase keeps the active packets whose two Bloom bits are set.
func (v *View) bloomPhase(d []uint32, fn []coefs, na int, s *batchState) int {
	f, ok := v.filter(d)
	if !ok {
		return 0
	}
	sh := 64 - uint(d[DescLogBits])
	for j := 0; j < na; j++ {
		i := s.act[j]
		b1, b2 := hash2(&fn[bloomFunc0], &fn[bloomFunc0+1], s.key[i][:v.p])
		b1, b2 = b1>>sh, b2>>sh
		s.bb[0][j], s.bb[1][j] = b1, b2
		s.bw[0][j], s.bw[1][j] = f[b1>>5], f[b2>>5]
	}
	k := 0
	for j := 0; j < na; j++ {
		if s.bw[0][j]&(1<<(s.bb[0][j]&31)) != 0 && s.bw[1][j]&(1<<(s.bb[1][j]&31)) != 0 {
			s.act[k] = s.act[j]
			k++
		}
	}
	return k
}

// probePhase loads the three candidate entries of every active packet, then
// compares them.
func (v *View) probePhase(tbl []uint32, logB uint, fn []coefs, na int, s *batchState) {
	p, ew := v.p, v.ew
	sh := 64 - logB
	sz := 1 << logB
	for j := 0; j < na; j++ {
		i := s.act[j]
		h0, h1, h2 := hash3(&fn[0], &fn[1], &fn[2], s.key[i][:p])
		p0 := int(h0>>sh) * ew
		p1 := (sz + int(h1>>sh)) * ew
		p2 := (2*sz + int(h2>>sh)) * ew
		s.pos[0][j], s.pos[1][j], s.pos[2][j] = p0, p1, p2
		s.ids[0][j], s.ids[1][j], s.ids[2][j] = tbl[p0+p+EntID], tbl[p1+p+EntID], tbl[p2+p+EntID]
	}
	for j := 0; j < na; j++ {
		i := s.act[j]
		key := s.key[i][:p]
		for w := 0; w < CuckooWays; w++ {
			e := s.pos[w][j]
			if s.ids[w][j] == EmptyID || !keyEq(tbl[e:e+p], key) {
				continue
			}
			id := s.ids[w][j]
			if r := uint64(tbl[e+p+EntPrio])<<32 | uint64(^id); r > s.best[i] {
				s.best[i] = r
			}
			break
		}
	}
}
