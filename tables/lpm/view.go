package lpm

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/gswitch/gswitch/tables/bubble"
)

// Layout of the meta region (region 0) of an image.
const (
	metaMagic   = 0x47414d54 // "GAMT"
	metaFamily  = 1          // word index: 4 or 6
	metaLevels  = 2          // word index: level count L
	metaStrides = 3          // word index of s_0; s_1..s_{L-1} follow
)

// An entry of a level is inf<<JumpBits | jump: jump == 0 is a leaf whose inf
// is the next hop (0: none), otherwise inf is a node of level jump. The
// device kernels (kernels/gamt.cu) read entries through kernels/layout.h,
// generated from these constants.
const (
	JumpBits = 8
	JumpMask = 1<<JumpBits - 1
)

// Limits of the encoding.
const (
	maxStride = 24      // widest stride a level may have
	maxLevels = 128     // at most one level per address bit
	maxNodes  = 1 << 24 // the entry's inf field indexes nodes
)

// maxLevelWords bounds a level region: 2^28 words, 1 GiB (a variable only so
// that tests can reach the limit cheaply).
var maxLevelWords = 1 << 28

// Addr6 is an IPv6 address as two big-endian 64-bit halves.
type Addr6 struct{ Hi, Lo uint64 }

// vlevel is what a lookup needs of one level: its words and how to cut its
// chunk out of an address, precomputed so the loop has no branches but its
// own.
type vlevel struct {
	w []uint32
	s uint32 // stride: node n starts at word n<<s

	// IPv4: chunk = (a << off4) >> sh4.
	off4, sh4 uint32

	// IPv6: the 64-bit window at off is (x << sh6) | (y >> 1 >> (63-sh6))
	// with (x, y) = (hi, lo), or (lo, 0) when sel is all ones; the chunk is
	// its top s bits: window >> sr6.
	sel, sh6, sr6 uint64
}

// View answers lookups from a device image: the table's own or a mirror of it.
// It reads the image's word arrays in place, so it stays valid, and sees each
// change, while bubbles of the image's generation are applied to it; an image
// of a new generation needs a new View. A View is read-only and safe for
// concurrent lookups while nothing writes the image.
type View struct {
	fam    Family
	gen    uint64
	levels int
	lv     [256]vlevel // indexed by an entry's 8-bit jump field (lv[0] is the root)

	// The root as each lookup function reads it: the View's family's root
	// level, or, for the other family, a two-word level of "no route", so a
	// lookup of the wrong family needs no test of its own.
	root4    []uint32
	root6    []uint32
	sh4, sh6 uint64 // root chunk = a >> sh4, hi >> sh6
}

// noRoute is the root of the other family's lookups: any top bit, no route.
var noRoute = []uint32{0, 0}

// NewView returns a View of im after checking that it is a well-formed GAMT
// image: the meta region, the region sizes, and every pointer entry (its jump
// goes to a deeper level, its node exists there). A corrupt image gives an
// error, never a panic, and a View over a checked image cannot index out of
// range; the check reads every word once.
func NewView(im *bubble.Image) (*View, error) {
	if im == nil {
		return nil, fmt.Errorf("lpm: view of a nil image")
	}
	strides, fam, err := checkMeta(im)
	if err != nil {
		return nil, err
	}
	if err := checkEntries(im, strides); err != nil {
		return nil, err
	}
	return newView(im, fam, strides), nil
}

// checkMeta validates the meta region and the region sizes and returns the
// strides and the family.
func checkMeta(im *bubble.Image) ([]int, Family, error) {
	if len(im.Words) < 2 || len(im.Words[0]) < metaStrides {
		return nil, 0, fmt.Errorf("lpm: image has no meta region")
	}
	meta := im.Words[0]
	if meta[0] != metaMagic {
		return nil, 0, fmt.Errorf("lpm: bad meta magic %#x", meta[0])
	}
	fam := Family(meta[metaFamily])
	if meta[metaFamily] > 255 || fam.Width() == 0 {
		return nil, 0, fmt.Errorf("lpm: bad family %d in meta", meta[metaFamily])
	}
	nl := meta[metaLevels]
	if nl < 1 || nl > maxLevels || len(meta) != metaStrides+int(nl) || len(im.Words) != 1+int(nl) {
		return nil, 0, fmt.Errorf("lpm: meta says %d levels for %d meta words and %d regions", nl, len(meta), len(im.Words))
	}
	strides := make([]int, nl)
	sum := 0
	for i := range strides {
		s := meta[metaStrides+i]
		if s < 1 || s > maxStride {
			return nil, 0, fmt.Errorf("lpm: level %d has stride %d", i, s)
		}
		strides[i] = int(s)
		sum += int(s)
	}
	if sum != fam.Width() {
		return nil, 0, fmt.Errorf("lpm: strides sum to %d, not %d", sum, fam.Width())
	}
	if err := checkRegionSizes(im, strides); err != nil {
		return nil, 0, err
	}
	return strides, fam, nil
}

// checkRegionSizes checks that level 0 is one node and every level a whole
// number of nodes within the encoding's limits.
func checkRegionSizes(im *bubble.Image, strides []int) error {
	if len(im.Words[1]) != 1<<strides[0] {
		return fmt.Errorf("lpm: level 0 has %d words, want one node of %d", len(im.Words[1]), 1<<strides[0])
	}
	for i, s := range strides {
		n := len(im.Words[1+i])
		if n%(1<<s) != 0 || n > maxLevelWords || n>>s > maxNodes {
			return fmt.Errorf("lpm: level %d has %d words: not a whole number of %d-word nodes within limits", i, n, 1<<s)
		}
	}
	return nil
}

// checkEntries checks that every pointer entry jumps to a deeper level and to
// a node that level has.
func checkEntries(im *bubble.Image, strides []int) error {
	nl := uint32(len(strides))
	for i := range strides {
		for off, e := range im.Words[1+i] {
			j := e & 0xff
			if j == 0 {
				continue
			}
			if j <= uint32(i) || j >= nl || int(e>>8) >= len(im.Words[1+j])>>strides[j] {
				return fmt.Errorf("lpm: level %d word %d: entry %#x points outside the image", i, off, e)
			}
		}
	}
	return nil
}

// newView builds a View of an image known to be well formed.
func newView(im *bubble.Image, fam Family, strides []int) *View {
	v := &View{fam: fam, gen: im.Generation, levels: len(strides)}
	off := 0
	for i, s := range strides {
		v.lv[i] = makeVLevel(im.Words[1+i], off, s)
		off += s
	}
	v.root4, v.sh4 = noRoute, 31
	v.root6, v.sh6 = noRoute, 63
	if fam == IPv4 {
		v.root4, v.sh4 = v.lv[0].w, uint64(32-strides[0])
	} else {
		v.root6, v.sh6 = v.lv[0].w, uint64(64-strides[0])
	}
	return v
}

func makeVLevel(w []uint32, off, s int) vlevel {
	l := vlevel{w: w, s: uint32(s), sr6: uint64(64 - s)}
	if off < 32 {
		l.off4, l.sh4 = uint32(off), uint32(32-s)
	}
	l.sh6 = uint64(off % 64)
	if off >= 64 {
		l.sel = ^uint64(0)
	}
	return l
}

// Family returns the family of the image.
func (v *View) Family() Family { return v.fam }

// Generation returns the generation of the image the View reads.
func (v *View) Generation() uint64 { return v.gen }

// Levels returns the number of levels.
func (v *View) Levels() int { return v.levels }

// Lookup4 returns the next-hop index of the longest prefix matching the IPv4
// address a (big-endian bits in a uint32), or 0 if none matches or the View is
// not IPv4.
func (v *View) Lookup4(a uint32) uint32 {
	e := v.root4[a>>(v.sh4&31)]
	if e&0xff != 0 {
		e = v.walk4(e, a)
	}
	return e >> 8
}

// walk4 follows the pointer e down to a leaf: the rest of Lookup4, kept out
// of line because most lookups of random traffic end at the root.
//
//go:noinline
func (v *View) walk4(e, a uint32) uint32 {
	for e&0xff != 0 {
		l := &v.lv[uint8(e)]
		e = l.w[(e>>8)<<(l.s&31)|(a<<(l.off4&31))>>(l.sh4&31)]
	}
	return e
}

// LookupAddr returns the next-hop index of the longest prefix matching a, or
// 0 if none matches, a is invalid or of the other family.
func (v *View) LookupAddr(a netip.Addr) uint32 {
	s := a.AsSlice() // see addrBits
	var e uint32
	switch len(s) {
	case 4:
		x := binary.BigEndian.Uint32(s)
		if e = v.root4[x>>(v.sh4&31)]; e&0xff != 0 {
			e = v.walk4(e, x)
		}
	case 16:
		hi, lo := binary.BigEndian.Uint64(s[:8]), binary.BigEndian.Uint64(s[8:])
		if e = v.root6[hi>>(v.sh6&63)]; e&0xff != 0 {
			e = v.walk6(e, hi, lo)
		}
	}
	return e >> 8
}

// chunk6 returns level l's chunk of the IPv6 address (hi, lo).
func (l *vlevel) chunk6(hi, lo uint64) uint32 {
	x := hi&^l.sel | lo&l.sel
	y := lo &^ l.sel
	w := x<<(l.sh6&63) | y>>1>>((63-l.sh6)&63)
	return uint32(w >> (l.sr6 & 63))
}

// Lookup6 returns the next-hop index of the longest prefix matching the IPv6
// address (hi, lo), or 0 if none matches or the View is not IPv6.
func (v *View) Lookup6(hi, lo uint64) uint32 {
	e := v.root6[hi>>(v.sh6&63)]
	if e&0xff != 0 {
		e = v.walk6(e, hi, lo)
	}
	return e >> 8
}

// walk6 is walk4 for IPv6.
//
//go:noinline
func (v *View) walk6(e uint32, hi, lo uint64) uint32 {
	for e&0xff != 0 {
		l := &v.lv[uint8(e)]
		e = l.w[(e>>8)<<(l.s&31)|l.chunk6(hi, lo)]
	}
	return e
}

// batchBlock is how many lookups of a batch are in flight together.
const batchBlock = 64

// isPtr is 1 for a pointer entry and 0 for a leaf, without a branch.
func isPtr(e uint32) int { return int((e&0xff + 0xff) >> 8) }

// LookupBatch4 looks up addrs[i] into out[i] for every i below both lengths.
// It walks a block of addresses level by level, so the loads of the whole
// block are in flight together instead of one lookup's chain at a time.
func (v *View) LookupBatch4(addrs []uint32, out []uint32) {
	n := min(len(addrs), len(out))
	if v.fam != IPv4 {
		clear(out[:n])
		return
	}
	for base := 0; base < n; base += batchBlock {
		end := min(base+batchBlock, n)
		v.block4(addrs[base:end], out[base:end])
	}
}

func (v *View) block4(addrs, out []uint32) {
	var pend [batchBlock]uint8
	out = out[:len(addrs)]
	np := 0
	for i, a := range addrs {
		e := v.root4[a>>(v.sh4&31)]
		out[i] = e
		pend[np&(batchBlock-1)] = uint8(i)
		np += isPtr(e)
	}
	for np > 0 {
		m := 0
		for _, i := range pend[:np] {
			e, a := out[i], addrs[i]
			l := &v.lv[uint8(e)]
			e = l.w[(e>>8)<<(l.s&31)|(a<<(l.off4&31))>>(l.sh4&31)]
			out[i] = e
			pend[m] = i
			m += isPtr(e)
		}
		np = m
	}
	for i := range out {
		out[i] >>= 8
	}
}

// LookupBatch6 looks up addrs[i] into out[i] for every i below both lengths,
// a block at a time like LookupBatch4.
func (v *View) LookupBatch6(addrs []Addr6, out []uint32) {
	n := min(len(addrs), len(out))
	if v.fam != IPv6 {
		clear(out[:n])
		return
	}
	for base := 0; base < n; base += batchBlock {
		end := min(base+batchBlock, n)
		v.block6(addrs[base:end], out[base:end])
	}
}

func (v *View) block6(addrs []Addr6, out []uint32) {
	var pend [batchBlock]uint8
	out = out[:len(addrs)]
	np := 0
	for i, a := range addrs {
		e := v.root6[a.Hi>>(v.sh6&63)]
		out[i] = e
		pend[np&(batchBlock-1)] = uint8(i)
		np += isPtr(e)
	}
	for np > 0 {
		m := 0
		for _, i := range pend[:np] {
			e, a := out[i], &addrs[i]
			l := &v.lv[uint8(e)]
			e = l.w[(e>>8)<<(l.s&31)|l.chunk6(a.Hi, a.Lo)]
			out[i] = e
			pend[m] = i
			m += isPtr(e)
		}
		np = m
	}
	for i := range out {
		out[i] >>= 8
	}
}
