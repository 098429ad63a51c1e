package pubsub

import "hash/maphash"

// Bulk insertion into the hashed structures (= on integers and strings, ^=,
// $=, *=). Adding many constraints one by one to those maps costs a hash
// lookup and an append to a list somewhere in memory per constraint; a
// writer that adds many instead collects (structure, key, slot) entries,
// sorts them by structure and key (a stable radix sort, so that a key's
// slots stay in the order they were added, as one by one), and hands each
// run of one key to its structure at once: one map operation and one copy
// per distinct key.

// bulkMin is the smallest add that goes through a bulk (below it, the
// constraints are inserted one by one).
const bulkMin = 256

// The hashed structures of a name, as bulk targets.
const (
	bkEqInt = iota
	bkEqStr
	bkPrefix
	bkSuffix
	bkContains
	numBulkKinds
)

type bulkTarget struct {
	ni   *nameIdx
	kind int
}

// bulk collects one writer's entries: integer keys in ints (hi: target,
// lo: the key, idx: the slot), string keys in strs (hi: target<<9 | the
// string's length, lo: 32 bits of its hash, idx: the entry in sslots and
// svals). Two strings of one length and hash are told apart when the runs
// are handed out.
type bulk struct {
	seed    maphash.Seed
	targets []bulkTarget
	ints    []slotRef
	strs    []slotRef
	sslots  []uint32
	svals   []string
	seq     bool // sort and hand out on the calling goroutine
}

// newBulk returns a bulk with room for ints integer and strs string
// entries.
func newBulk(ints, strs int) *bulk {
	return &bulk{seed: maphash.MakeSeed(), ints: make([]slotRef, 0, ints), strs: make([]slotRef, 0, strs),
		sslots: make([]uint32, 0, strs), svals: make([]string, 0, strs)}
}

// bulkKind returns the hashed structure constraint c goes to, or -1.
func bulkKind(c *Constraint) int {
	switch c.Value.Type {
	case TypeInt:
		if c.Op == OpEq {
			return bkEqInt
		}
	case TypeString:
		switch c.Op {
		case OpEq:
			return bkEqStr
		case OpPrefix:
			return bkPrefix
		case OpSuffix:
			return bkSuffix
		case OpContains:
			return bkContains
		}
	}
	return -1
}

// insertBulk is ni.insert, with the hashed structures' entries collected
// in b.
func (ni *nameIdx) insertBulk(c *Constraint, s uint32, b *bulk) {
	k := bulkKind(c)
	if k < 0 {
		ni.insert(c, s)
		return
	}
	ni.n++
	if k == bkEqInt {
		ni.ints[rop(OpEq)].add(intEnt{c.Value.Int, s}) // = on integers is also in the sorted array
	}
	t := ni.bulkTarget[k]
	if t == 0 {
		b.targets = append(b.targets, bulkTarget{ni, k})
		t = int32(len(b.targets))
		ni.bulkTarget[k] = t
	}
	if k == bkEqInt {
		b.ints = append(b.ints, slotRef{hi: uint64(t), lo: uint64(c.Value.Int), idx: s})
		return
	}
	v := c.Value.Str
	b.strs = append(b.strs, slotRef{hi: uint64(t)<<9 | uint64(len(v)), lo: uint64(uint32(bulkHash(b.seed, v))), idx: uint32(len(b.sslots))})
	b.sslots = append(b.sslots, s)
	b.svals = append(b.svals, v)
}

// bulkHash hashes a string key (a variable: a test makes every string
// collide).
var bulkHash = maphash.String

// flush hands every run of one key to its structure.
func (b *bulk) flush() {
	if len(b.ints) > 0 {
		refs := b.ints
		if len(refs) > 1 {
			refs = radixSortRefsW(refs, b.seq)
		}
		all := make([]uint32, len(refs)) // the runs' slots, back to back
		for i, r := range refs {
			all[i] = r.idx
		}
		eachTarget(refs, 0, b.seq, func(lo, hi int) {
			for i := lo; i < hi; {
				j := i + 1
				for j < hi && refs[j].hi == refs[i].hi && refs[j].lo == refs[i].lo {
					j++
				}
				b.targets[refs[i].hi-1].ni.eqInt.addRun(int64(refs[i].lo), all[i:j:j])
				i = j
			}
		})
	}
	if len(b.strs) > 0 {
		refs := b.strs
		if len(refs) > 1 {
			refs = radixSortRefsW(refs, b.seq)
		}
		all := make([]uint32, len(refs))
		for i, r := range refs {
			all[i] = b.sslots[r.idx]
		}
		eachTarget(refs, 9, b.seq, func(lo, hi int) {
			for i := lo; i < hi; {
				j := i + 1
				for j < hi && refs[j].hi == refs[i].hi && refs[j].lo == refs[i].lo {
					j++
				}
				tg := b.targets[refs[i].hi>>9-1]
				run := all[i:j:j]
				key := b.svals[refs[i].idx]
				same := true
				for _, r := range refs[i+1 : j] {
					if b.svals[r.idx] != key {
						same = false
						break
					}
				}
				if same {
					tg.ni.addStrRun(tg.kind, key, run)
				} else { // strings of one hash: one by one
					for k, r := range refs[i:j] {
						tg.ni.addStrRun(tg.kind, b.svals[r.idx], run[k:k+1:k+1])
					}
				}
				i = j
			}
		})
	}
	for _, tg := range b.targets {
		tg.ni.bulkTarget[tg.kind] = 0
	}
	*b = bulk{seed: b.seed, seq: b.seq}
}

// eachTarget calls f on the ranges of sorted refs of one target each
// (hi>>shift), several targets at once: a target's structures are its own
// name's, so that the runs of different targets go in in parallel, and a
// target's own in their sorted order as one by one.
func eachTarget(refs []slotRef, shift uint, seq bool, f func(lo, hi int)) {
	w := workers(len(refs), parMin)
	if w == 1 || seq {
		f(0, len(refs))
		return
	}
	var bounds []int
	for i := range refs {
		if i == 0 || refs[i].hi>>shift != refs[i-1].hi>>shift {
			bounds = append(bounds, i)
		}
	}
	bounds = append(bounds, len(refs))
	parallelEach(len(bounds)-1, w, func(k int) { f(bounds[k], bounds[k+1]) })
}

func (ni *nameIdx) addStrRun(kind int, key string, run []uint32) {
	switch kind {
	case bkEqStr:
		ni.eqStr.addRun(key, run)
	case bkPrefix:
		ni.prefix.addRun(key, run)
	case bkSuffix:
		ni.suffix.addRun(key, run)
	case bkContains:
		ni.contains.addRun(key, run)
	}
}

// addRun appends a run of slots to key's list (the run becomes the list of
// a new key, capped so that a later append copies it).
func (k *keyed[K]) addRun(key K, run []uint32) bool {
	if k.m == nil {
		k.m = make(map[K]uint32)
	}
	i, ok := k.m[key]
	if ok {
		k.lists[i] = append(k.lists[i], run...)
		return false
	}
	if n := len(k.free); n > 0 {
		i, k.free = k.free[n-1], k.free[:n-1]
		k.lists[i] = run
	} else {
		i = uint32(len(k.lists))
		k.lists = append(k.lists, run)
	}
	k.m[key] = i
	return true
}

func (a *affix) addRun(v string, run []uint32) {
	if a.keyed.addRun(v, run) {
		a.stale = true
	}
	if a.count[len(v)] == 0 {
		a.stale = true
	}
	a.count[len(v)] += int32(len(run))
}
