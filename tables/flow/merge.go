package flow

import (
	"math/bits"
	"slices"
	"sync"
)

// Merged classes (Algo Merge), after TupleMerge (Daly et al., "TupleMerge:
// Fast Software Packet Processing for Online Packet Classification",
// IEEE/ACM ToN 2019): a class hashes on a mask coarser than its rules' own
// masks, and each entry carries its rule's mask and value, so that rules of
// many masks share one cuckoo table. A lookup costs one class per merged
// mask instead of one per distinct mask: acl1's 217 masks and the synthetic
// sets' 512 become a few dozen classes (see docs/benchmarks.md, "Merged classes").
//
// Placement. A rule may go into any class whose mask is within its own
// (every class-mask bit is a rule-mask bit), as long as fewer than
// mergeDupLimit of the class's rules share its class key (the rule's value
// under the class mask): rules with one class key have the same three
// cuckoo buckets, so at most CuckooWays fit, and a table of colliding keys
// is what makes a merged class slow. Among the classes that can take it, the
// one with the most mask bits wins (fewest collisions), then the larger.
// When none can, a class is opened with the coarsest of the rule's relaxed
// masks (mergeLevels) that no class has yet; the last level is the rule's
// own mask, where no two distinct matches collide.

// mergeDupLimit is the most rules of one class that share a class key.
const mergeDupLimit = CuckooWays

// mergeOrder lists fields in the order merged masks take them: those whose
// values spread rules widest first (addresses, ports, labels), then the
// rest in field order (eth_type, ip_proto, flags and the like, which only
// split what the others leave together).
// It is filled from fieldTab on first use (fieldTab is filled by an init).
var mergeOrder = sync.OnceValue(func() []*FieldInfo {
	first := []Field{
		FieldIPv4Dst, FieldIPv6Dst, FieldIPv4Src, FieldIPv6Src,
		FieldEthDst, FieldEthSrc,
		FieldTCPDst, FieldUDPDst, FieldSCTPDst, FieldTCPSrc, FieldUDPSrc, FieldSCTPSrc,
		FieldMetadata, FieldTunnelID, FieldMPLSLabel, FieldPBBISID, FieldIPv6FLabel,
		FieldIPv6NDTarget, FieldIPv6NDSLL, FieldIPv6NDTLL, FieldARPSHA, FieldARPTHA,
		FieldVlanVID, FieldInPort, FieldInPhyPort,
	}
	var out []*FieldInfo
	seen := map[Field]bool{}
	for _, f := range first {
		if fi := fieldTab[f]; fi != nil {
			out = append(out, fi)
			seen[f] = true
		}
	}
	for _, fi := range fieldTab {
		if fi != nil && !seen[fi.Field] {
			out = append(out, fi)
		}
	}
	return out
})

// relaxField returns the part of a field mask a merged mask keeps: all of
// it when it is the whole field, a prefix rounded down to a multiple of 8
// bits when it is a prefix (addresses, expanded port ranges), and nothing
// for any other partial mask.
func relaxField(fi *FieldInfo, fm u128) u128 {
	full := ones(fi.Bits)
	if fm == full {
		return fm
	}
	n := bits.OnesCount64(fm.hi) + bits.OnesCount64(fm.lo)
	if fm != prefixOnes(fi.Bits, n) {
		return u128{}
	}
	return prefixOnes(fi.Bits, n&^7)
}

// mergeLevels appends to dst the relaxed masks of mask, coarsest first:
// the first level keeps the first field of mergeOrder that mask matches
// (relaxed), each next level adds the next, and the last is mask itself.
// Every level is within mask.
func mergeLevels(mask *Key, dst []Key) []Key {
	var acc Key
	for _, fi := range mergeOrder() {
		r := relaxField(fi, fi.get(mask))
		if r.isZero() {
			continue
		}
		var part Key
		fi.put(&part, r)
		grew := false
		for w := range acc {
			if part[w]&^acc[w] != 0 {
				acc[w] |= part[w]
				grew = true
			}
		}
		if grew && acc != *mask {
			dst = append(dst, acc)
		}
	}
	return append(dst, *mask)
}

// within reports whether every bit of a is a bit of b.
func within(a, b *Key) bool {
	for w := range a {
		if a[w]&^b[w] != 0 {
			return false
		}
	}
	return true
}

// maskBits counts a mask's bits.
func maskBits(m *Key) int {
	n := 0
	for _, x := range m {
		n += bits.OnesCount32(x)
	}
	return n
}

// dupKey hashes d's class key in c: its value under c's mask.
func dupKey(c *class, d *dmatch) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for w := range c.mask {
		x := uint64(d.m.Value[w] & c.mask[w])
		h = bits.RotateLeft64((h^x)*0xff51afd7ed558ccd, 29) * 0xc4ceb9fe1a85ec53
	}
	return h
}

// insertMerge places d in the best class that can take it, else opens one.
func (tc *tuple) insertMerge(d *dmatch) error {
	cands := tc.cands[:0]
	for _, c := range tc.order {
		if c.closed || len(c.members) >= tc.cfg.ClassCapacity || !within(&c.mask, &d.m.Mask) {
			continue
		}
		if c.dups[dupKey(c, d)] >= mergeDupLimit {
			continue
		}
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b *class) int {
		if a.nbits != b.nbits {
			return b.nbits - a.nbits
		}
		return len(b.members) - len(a.members)
	})
	tc.cands = cands[:0]
	for _, c := range cands {
		ok, err := tc.place(c, d)
		if err != nil || ok {
			return err
		}
	}
	tc.levels = mergeLevels(&d.m.Mask, tc.levels[:0])
	mask := d.m.Mask
	for _, l := range tc.levels {
		if len(tc.byMask[l]) == 0 {
			mask = l
			break
		}
	}
	if len(tc.byMask[mask]) > 0 {
		tc.splits++
	}
	return tc.newClass(d, mask)
}
