package rabin

import "fmt"

// PackAlign is the alignment of payloads in a packed buffer: a multiple of
// 32 bytes, so that no two payloads share a 32-bit word of the marker bitmap
// (and 16-byte loads stay aligned).
const PackAlign = 32

// Pack lays payloads end to end in one buffer, each at a multiple of
// PackAlign (the gap zero), as the GPU kernel reads them: the indexed
// compact buffer of Sun et al. It appends to buf and returns it with each
// payload's offset and length.
func Pack(buf []byte, offs, lens []uint32, payloads ...[]byte) ([]byte, []uint32, []uint32) {
	for _, p := range payloads {
		if pad := (PackAlign - len(buf)%PackAlign) % PackAlign; pad > 0 {
			buf = append(buf, make([]byte, pad)...)
		}
		offs = append(offs, uint32(len(buf)))
		lens = append(lens, uint32(len(p)))
		buf = append(buf, p...)
	}
	return buf, offs, lens
}

// BitmapWords returns the words of a marker bitmap for a buffer of n bytes.
func BitmapWords(n int) int { return (n + 31) / 32 }

// Bitmap sets the marker bitmap of packed payloads (Pack): bit p&31 of word
// p>>5 is set when byte p of buf ends a window of its payload whose
// fingerprint has the low Bits zero. Every word that covers a payload's
// bytes is written whole; others are left alone. It is the CPU twin of the
// kernel rabin_markers (kernels/rabin.cu).
func (m *Marker) Bitmap(buf []byte, offs, lens []uint32, bitmap []uint32) error {
	if len(offs) != len(lens) {
		return fmt.Errorf("rabin: %d offsets for %d lengths", len(offs), len(lens))
	}
	var pos []int32
	for k, o := range offs {
		n := int(lens[k])
		if int(o)%PackAlign != 0 || int(o)+n > len(buf) || BitmapWords(int(o)+n) > len(bitmap) {
			return fmt.Errorf("rabin: payload %d at %d+%d outside the buffer or unaligned", k, o, n)
		}
		if n == 0 {
			continue
		}
		first, last := int(o)/32, (int(o)+n-1)/32
		clear(bitmap[first : last+1])
		pos = m.Markers(pos[:0], buf[o:int(o)+n])
		for _, p := range pos {
			at := int(o) + int(p)
			bitmap[at>>5] |= 1 << uint(at&31)
		}
	}
	return nil
}

// TableWords returns the tables as the kernel takes them: out[256] then
// mod[256], and the shift (degree − 8).
func (t *Tables) TableWords() (tabs []uint64, shift int) {
	tabs = make([]uint64, 512)
	copy(tabs, t.out[:])
	copy(tabs[256:], t.mod[:])
	return tabs, int(t.shift)
}

// Mask returns the marker mask.
func (m *Marker) Mask() uint64 { return m.mask }
