package re

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// Bundles (see the package documentation, "Bundles"): a run of consecutive
// frames of one send batch with the same bytes before their EtherType
// (addresses and tag) that fit together in one frame of the link's MTU go
// as one bundle frame:
//
//	addresses [tag] | EtherType | 'G' | 0x14 | count (2) | count × (length (2) | the frame from its EtherType on)

const (
	kindBundle   = 0x14
	bundleHdrLen = 4 // 'G', kind, count
	maxBundleMTU = 1<<16 - 1
)

// l2Len returns the length of f's bytes before its innermost EtherType
// (the addresses and at most one tag), or 0 for a frame too short to have
// one.
func l2Len(f []byte) int {
	if len(f) < 14 {
		return 0
	}
	switch binary.BigEndian.Uint16(f[12:]) {
	case 0x8100, 0x88a8, 0x9100:
		if len(f) < 18 {
			return 0
		}
		return 16
	}
	return 12
}

// isBundle reports whether the RE frame f (shim at off) is a bundle.
func isBundle(f []byte, off int) bool {
	return len(f) >= off+2 && f[off] == magic && f[off+1] == kindBundle
}

// bundlable reports whether f (its l2 bytes before the EtherType) may go
// in a bundle: any frame but an RE frame other than DATA (a control frame
// or a bundle goes on its own).
func bundlable(f []byte, l2 int) bool {
	if l2 == 0 {
		return false
	}
	if binary.BigEndian.Uint16(f[l2:]) != EtherType {
		return true
	}
	return len(f) >= l2+4 && f[l2+2] == magic && f[l2+3] == kindData
}

// bundler packs the frames of one send batch: its buffers are one
// goroutine's at a time (a sendBuf's).
type bundler struct {
	wire   [][]byte // the frames to send: bundles and frames on their own
	counts []int    // how many of the batch's frames each carries
	arena  []byte   // the bundles' bytes
}

// pack fills b.wire with the frames to send for frames, in their order:
// each run of consecutive frames with the same bytes before the EtherType
// that fit in one bundle of at most mtu bytes after its EtherType goes as
// one bundle, a run of one as the frame itself. It returns the number of
// bundles and of the frames in them.
func (b *bundler) pack(frames [][]byte, mtu int) (bundles, bundled int) {
	b.wire, b.counts, b.arena = b.wire[:0], b.counts[:0], b.arena[:0]
	mtu = min(mtu, maxBundleMTU)
	for i := 0; i < len(frames); {
		f := frames[i]
		l2 := l2Len(f)
		used, j := bundleHdrLen, i
		if bundlable(f, l2) {
			for ; j < len(frames); j++ {
				g := frames[j]
				if used+2+len(g)-l2 > mtu || len(g) < l2+2 {
					break
				}
				if j > i && (l2Len(g) != l2 || string(g[:l2]) != string(f[:l2]) || !bundlable(g, l2)) {
					break
				}
				used += 2 + len(g) - l2
			}
		}
		if j-i < 2 {
			b.wire, b.counts = append(b.wire, f), append(b.counts, 1)
			i++
			continue
		}
		b.wire, b.counts = append(b.wire, b.build(frames[i:j], l2, used)), append(b.counts, j-i)
		bundles, bundled = bundles+1, bundled+j-i
		i = j
	}
	return bundles, bundled
}

// build writes the bundle of run (frames with the same l2 bytes before
// their EtherTypes, used bytes after the bundle's EtherType) into the
// arena and returns it.
func (b *bundler) build(run [][]byte, l2, used int) []byte {
	size := l2 + 2 + used
	start := len(b.arena)
	b.arena = slices.Grow(b.arena, size)[:start+size]
	out := b.arena[start : start+size : start+size]
	n := copy(out, run[0][:l2])
	binary.BigEndian.PutUint16(out[n:], EtherType)
	out[n+2], out[n+3] = magic, kindBundle
	binary.BigEndian.PutUint16(out[n+4:], uint16(len(run)))
	n += 2 + bundleHdrLen
	for _, g := range run {
		binary.BigEndian.PutUint16(out[n:], uint16(len(g)-l2))
		n += 2
		n += copy(out[n:], g[l2:])
	}
	if n != size {
		panic(fmt.Sprintf("re: bundle of %d bytes, planned %d", n, size))
	}
	return out
}

// carried returns how many of the batch's frames the first n wire frames
// carry.
func (b *bundler) carried(n int) int {
	c := 0
	for _, k := range b.counts[:min(n, len(b.counts))] {
		c += k
	}
	return c
}

// clear drops the references to the batch's frames.
func (b *bundler) clear() { clear(b.wire) }

// ReceiveBundle opens a bundle (Receive's verdict Bundle): each frame in
// it is restored (an encoded one) or passed (a plain one, its payload
// logged) as Receive does, the frames rebuilt with the bundle's bytes
// before its EtherType, written into arena (appended to; returned grown)
// and appended to res in the bundle's order. A frame that cannot be
// restored is dropped and counted as Receive counts it (a NAK queued for
// missing payloads), and the rest go on; a malformed bundle (a count of
// 0, a length past the end, an RE frame in it other than an encoded one)
// loses the frames from the bad one on, counted once in Malformed. err is
// the first frame's error, nil when none was dropped. Bytes after the
// last frame (Ethernet padding) are ignored.
func (d *Decoder) ReceiveBundle(frame []byte, res [][]byte, arena []byte) ([][]byte, []byte, error) {
	d.Stats.Bundles.Add(1)
	d.Stats.BytesIn.Add(uint64(len(frame)))
	off, isRE := shimAt(frame)
	if !isRE || !isBundle(frame, off) || len(frame) < off+bundleHdrLen {
		d.Stats.Frames.Add(1)
		err := fmt.Errorf("%w: not a bundle", ErrMalformed)
		d.fail(err)
		return res, arena, err
	}
	l2 := frame[:off-2]
	count := int(binary.BigEndian.Uint16(frame[off+2:]))
	body := frame[off+bundleHdrLen:]
	if count == 0 {
		d.Stats.Frames.Add(1)
		err := fmt.Errorf("%w: a bundle of no frame", ErrMalformed)
		d.fail(err)
		return res, arena, err
	}
	var first error
	d.mu.Lock()
	defer d.mu.Unlock()
	for k := range count {
		d.Stats.Frames.Add(1)
		if len(body) < 2 || int(binary.BigEndian.Uint16(body)) < 2 || 2+int(binary.BigEndian.Uint16(body)) > len(body) {
			err := fmt.Errorf("%w: bundle: frame %d of %d runs past its end", ErrMalformed, k+1, count)
			d.fail(err)
			return res, arena, cmpErr(first, err)
		}
		n := int(binary.BigEndian.Uint16(body))
		el := body[2 : 2+n]
		body = body[2+n:]
		if binary.BigEndian.Uint16(el) != EtherType {
			// A plain frame: rebuilt in the arena, its payload logged.
			start := len(arena)
			arena = slices.Grow(arena, len(l2)+n)[:start+len(l2)+n]
			out := arena[start : start+len(l2)+n : start+len(l2)+n]
			copy(out, l2)
			copy(out[len(l2):], el)
			d.plainLocked(out)
			res = append(res, out)
			continue
		}
		sh := el[2:]
		if len(sh) < 2 || sh[0] != magic || sh[1] != kindData {
			err := fmt.Errorf("%w: bundle: frame %d of %d is an RE frame but not an encoded one", ErrMalformed, k+1, count)
			d.fail(err)
			first = cmpErr(first, err)
			continue
		}
		size := len(l2) + 2
		if len(sh) >= shimLen {
			size += int(binary.BigEndian.Uint16(sh[12:]))
		}
		start := len(arena)
		arena = slices.Grow(arena, size)
		r, err := d.restore(l2, sh, arena[start:start:start+size])
		if err != nil {
			d.fail(err)
			first = cmpErr(first, err)
			continue
		}
		if len(r) <= size {
			arena = arena[:start+len(r)]
		}
		d.Stats.Restored.Add(1)
		d.Stats.BytesOut.Add(uint64(len(r)))
		res = append(res, r)
	}
	return res, arena, first
}

// cmpErr returns a if not nil, else b.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
