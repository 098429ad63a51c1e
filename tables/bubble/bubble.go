// Package bubble keeps a table's device image and the write bubbles that bring
// a mirror of it up to date (GAMT §3.2).
//
// # What
//
// Every GPU-mirrored table in gswitch (the flow classifiers, the LPM tries)
// lays its lookup structure out as a few flat arrays of 32-bit words, its
// regions. The authoritative copy of that image lives on the CPU; a backend
// (the GPU, or the CPU backend's own copy) keeps a mirror and answers lookups
// from it.
//
// A table never writes a word of its image directly: it calls Mirror.Set,
// which stores the word and, if the value changed, records the position
// (region, offset) in the write-bubble table. A position is recorded once
// however often it is written, so a burst of updates that rewrite the same
// trie node yields one bubble per word, not one per write. Gathering the
// bubbles reads each recorded position's latest value (GAMT Algorithm 2):
// applying them to a mirror of the old image — in any order, since the
// positions are unique — gives exactly the new image.
//
// # Generations
//
// Region sizes are fixed within a generation: a table reserves head-room and
// writes into it. When a table outgrows its head-room (or decides to compact)
// it builds a fresh image off-line and installs it with Mirror.Replace, which
// starts a new generation; the next Sync then carries the whole image instead
// of bubbles, and a mirror swaps to it at once.
//
// # Consistency
//
// Sync hands out everything written since the previous Sync as one Update. A
// consumer applies an Update between two lookup batches, so a batch sees
// either all of the operations that preceded the Sync or none of them, never a
// half-written bucket or node.
//
// Mirror is not safe for concurrent use; its owner (a table) serialises the
// writers. Updates are plain values that can be sent to another goroutine.
package bubble

import (
	"fmt"
	"math/bits"
)

// Region identifies one word array of a table's device image.
type Region uint8

// Bubble is one word of a device image to be written: region, word offset and
// the word's latest value.
type Bubble struct {
	Region Region
	Offset uint32
	Value  uint32
}

// Image is a table's device image: one word array per region.
type Image struct {
	// Generation changes whenever the region sizes or the layout change.
	Generation uint64
	// Names holds one name per region, for statistics and debugging.
	Names []string
	// Words holds the word arrays, indexed by Region.
	Words [][]uint32
}

// NewImage returns an image of generation 0 with one zeroed region per name,
// sized by sizes.
func NewImage(names []string, sizes []int) *Image {
	if len(names) != len(sizes) {
		panic("bubble: names and sizes differ in length")
	}
	im := &Image{Names: append([]string(nil), names...), Words: make([][]uint32, len(sizes))}
	for i, n := range sizes {
		im.Words[i] = make([]uint32, n)
	}
	return im
}

// Clone returns a deep copy of the image.
func (im *Image) Clone() *Image {
	c := &Image{Generation: im.Generation, Names: append([]string(nil), im.Names...), Words: make([][]uint32, len(im.Words))}
	for i, w := range im.Words {
		c.Words[i] = append([]uint32(nil), w...)
	}
	return c
}

// Bytes returns the size of the image in bytes.
func (im *Image) Bytes() int {
	n := 0
	for _, w := range im.Words {
		n += 4 * len(w)
	}
	return n
}

// Equal reports whether two images have the same generation, regions and words.
func (im *Image) Equal(o *Image) bool {
	if im.Generation != o.Generation || len(im.Words) != len(o.Words) {
		return false
	}
	for r := range im.Words {
		a, b := im.Words[r], o.Words[r]
		if len(a) != len(b) {
			return false
		}
		for i := range a {
			if a[i] != b[i] {
				return false
			}
		}
	}
	return true
}

// Diff describes the first difference between two images, or returns "".
func (im *Image) Diff(o *Image) string {
	if im.Generation != o.Generation {
		return fmt.Sprintf("generation %d != %d", im.Generation, o.Generation)
	}
	if len(im.Words) != len(o.Words) {
		return fmt.Sprintf("%d regions != %d", len(im.Words), len(o.Words))
	}
	for r := range im.Words {
		a, b := im.Words[r], o.Words[r]
		if len(a) != len(b) {
			return fmt.Sprintf("region %d: %d words != %d", r, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				return fmt.Sprintf("region %d word %d: %#x != %#x", r, i, a[i], b[i])
			}
		}
	}
	return ""
}

// Apply writes the bubbles into the image: the scatter step, as the CPU
// backend runs it. It checks every position before writing any, so a bad
// bubble list changes nothing.
func (im *Image) Apply(bs []Bubble) error {
	for _, b := range bs {
		if int(b.Region) >= len(im.Words) || int(b.Offset) >= len(im.Words[b.Region]) {
			return fmt.Errorf("bubble: position (%d, %d) outside the image", b.Region, b.Offset)
		}
	}
	for _, b := range bs {
		im.Words[b.Region][b.Offset] = b.Value
	}
	return nil
}

// Update is what a mirror needs to catch up with a table: either a whole new
// image (Full, after a rebuild or at the first Sync) or the bubbles written
// since the previous Sync.
type Update struct {
	Generation uint64
	Full       *Image
	Bubbles    []Bubble
}

// ApplyTo brings the mirror *dst up to date. A full image replaces *dst; bubbles
// must be of dst's generation.
func (u *Update) ApplyTo(dst **Image) error {
	if u.Full != nil {
		*dst = u.Full
		return nil
	}
	if *dst == nil || (*dst).Generation != u.Generation {
		return fmt.Errorf("bubble: update of generation %d for a mirror that has no image of it", u.Generation)
	}
	return (*dst).Apply(u.Bubbles)
}

// Mirror owns a table's authoritative device image and its write-bubble table.
type Mirror struct {
	img    *Image
	dirty  [][]uint64 // one bit per word, per region
	pos    []uint64   // region<<32 | offset, in first-write order
	reload bool       // the next Sync carries the whole image

	// Counters, for statistics.
	Writes     uint64 // Set calls that changed a word
	Replaced   uint64 // generations installed by Replace
	BubblesOut uint64 // bubbles handed out by Sync
}

// NewMirror returns a mirror of im (which it takes over); the first Sync
// carries the whole image.
func NewMirror(im *Image) *Mirror {
	m := &Mirror{}
	m.install(im)
	return m
}

func (m *Mirror) install(im *Image) {
	m.img = im
	m.dirty = make([][]uint64, len(im.Words))
	for r, w := range im.Words {
		m.dirty[r] = make([]uint64, (len(w)+63)/64)
	}
	m.pos = m.pos[:0]
	m.reload = true
}

// Image returns the current image. Callers must not write to it.
func (m *Mirror) Image() *Image { return m.img }

// Words returns region r of the current image for reading.
func (m *Mirror) Words(r Region) []uint32 { return m.img.Words[r] }

// Get returns one word.
func (m *Mirror) Get(r Region, off uint32) uint32 { return m.img.Words[r][off] }

// Set writes one word and records a bubble if its value changed.
func (m *Mirror) Set(r Region, off uint32, v uint32) {
	w := m.img.Words[r]
	if w[off] == v {
		return
	}
	w[off] = v
	m.Writes++
	d := &m.dirty[r][off/64]
	bit := uint64(1) << (off % 64)
	if *d&bit == 0 {
		*d |= bit
		m.pos = append(m.pos, uint64(r)<<32|uint64(off))
	}
}

// Replace installs a new image built off-line, starting a new generation. The
// next Sync carries it whole.
func (m *Mirror) Replace(im *Image) {
	im.Generation = m.img.Generation + 1
	m.Replaced++
	m.install(im)
}

// Pending returns the number of bubbles waiting for the next Sync.
func (m *Mirror) Pending() int { return len(m.pos) }

// Sync gathers what was written since the previous Sync: the bubbles with
// their latest values (GAMT Algorithm 2), or the whole image after a Replace.
func (m *Mirror) Sync() Update {
	u := Update{Generation: m.img.Generation}
	if m.reload {
		u.Full = m.img.Clone()
		m.reload = false
		m.clearDirty()
		return u
	}
	if len(m.pos) == 0 {
		return u
	}
	u.Bubbles = make([]Bubble, len(m.pos))
	for i, p := range m.pos {
		r, off := Region(p>>32), uint32(p)
		u.Bubbles[i] = Bubble{Region: r, Offset: off, Value: m.img.Words[r][off]}
	}
	m.BubblesOut += uint64(len(m.pos))
	m.clearDirty()
	return u
}

func (m *Mirror) clearDirty() {
	if len(m.pos) < 1<<16 {
		for _, p := range m.pos {
			m.dirty[p>>32][uint32(p)/64] = 0
		}
	} else {
		for _, d := range m.dirty {
			clear(d)
		}
	}
	m.pos = m.pos[:0]
}

// DirtyWords returns how many words of region r are waiting for the next Sync.
func (m *Mirror) DirtyWords(r Region) int {
	n := 0
	for _, d := range m.dirty[r] {
		n += bits.OnesCount64(d)
	}
	return n
}
