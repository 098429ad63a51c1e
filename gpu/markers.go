package gpu

import (
	"errors"
	"fmt"

	"github.com/gswitch/gswitch/tables/rabin"
)

// Rabin markers (redundancy elimination, content-defined chunking): a
// MarkerBatch holds payloads packed as rabin.Pack lays them out (the
// indexed compact buffer) and receives their marker bitmap
// (rabin.Marker.Bitmap's). Markers computes batches on the CPU (CPUMarkers,
// always built) or on a GPU (the CUDA backend's RabinMarkers, kernel
// rabin_markers of kernels/rabin.cu); both give the same bitmap bit for bit.

// MarkerBatch is a batch of packed payloads and their marker bitmap. Its
// slices are allocated by the Markers that made it (page-locked host memory
// for a GPU) with fixed capacities; Add packs payloads until one does not
// fit. Between Submit and Wait the batch belongs to the Markers.
type MarkerBatch struct {
	Buf    []byte   // packed payloads: Buf[:Bytes] in use
	Offs   []uint32 // payload k at Buf[Offs[k]:], Lens[k] bytes, k < N
	Lens   []uint32
	Bitmap []uint32 // rabin.BitmapWords(Bytes) words: the result after Wait
	N      int
	Bytes  int

	impl any // the Markers' own state (the CUDA one's device twins, event)
	err  error
}

// Reset empties the batch.
func (b *MarkerBatch) Reset() { b.N, b.Bytes = 0, 0 }

// Add packs payload at the next rabin.PackAlign boundary and reports
// whether it fit.
func (b *MarkerBatch) Add(payload []byte) bool {
	o := (b.Bytes + rabin.PackAlign - 1) / rabin.PackAlign * rabin.PackAlign
	if b.N >= len(b.Offs) || o+len(payload) > len(b.Buf) {
		return false
	}
	clear(b.Buf[b.Bytes:o])
	copy(b.Buf[o:], payload)
	b.Offs[b.N], b.Lens[b.N] = uint32(o), uint32(len(payload))
	b.N++
	b.Bytes = o + len(payload)
	return true
}

// check verifies what the kernel relies on: every payload aligned and
// inside Buf[:Bytes], the bitmap long enough.
func (b *MarkerBatch) check() error {
	if b.N < 0 || b.N > len(b.Offs) || b.N > len(b.Lens) || b.Bytes < 0 || b.Bytes > len(b.Buf) ||
		rabin.BitmapWords(b.Bytes) > len(b.Bitmap) {
		return fmt.Errorf("gpu: marker batch of %d payloads, %d bytes: outside its capacity", b.N, b.Bytes)
	}
	for k := 0; k < b.N; k++ {
		o, n := int(b.Offs[k]), int(b.Lens[k])
		if o%rabin.PackAlign != 0 || o+n > b.Bytes {
			return fmt.Errorf("gpu: marker batch: payload %d at %d+%d outside the batch or unaligned", k, o, n)
		}
	}
	return nil
}

// Markers computes the marker bitmaps of batches of payloads for one
// rabin.Marker (polynomial, window, mask).
type Markers interface {
	// Name is "cpu" or "cuda".
	Name() string
	// NewBatch allocates a batch of at most payloads payloads in bytes
	// bytes.
	NewBatch(bytes, payloads int) (*MarkerBatch, error)
	// Submit starts computing b's bitmap; Wait waits for it and returns
	// its error. Batches submitted one after another overlap on a GPU
	// (copy-in, kernel and copy-out of consecutive batches).
	Submit(b *MarkerBatch) error
	Wait(b *MarkerBatch) error
	// FreeBatch releases b's memory.
	FreeBatch(b *MarkerBatch)
	// Close releases the Markers' resources (not its batches').
	Close() error
}

// ErrNoMarkersGPU is returned by OpenMarkers for "gpu" in a build without
// the cuda tag.
var ErrNoMarkersGPU = errors.New("gpu: markers on the GPU need a build with -tags cuda")

// CPUMarkers computes bitmaps with rabin.Marker.Bitmap on the caller's
// goroutine (Submit does the work; Wait returns its error).
type CPUMarkers struct{ M *rabin.Marker }

// Name returns "cpu".
func (c CPUMarkers) Name() string { return "cpu" }

// NewBatch allocates a batch in ordinary memory.
func (c CPUMarkers) NewBatch(bytes, payloads int) (*MarkerBatch, error) {
	if bytes < 0 || payloads < 0 {
		return nil, fmt.Errorf("gpu: marker batch of %d bytes, %d payloads", bytes, payloads)
	}
	return &MarkerBatch{Buf: make([]byte, bytes), Offs: make([]uint32, payloads), Lens: make([]uint32, payloads),
		Bitmap: make([]uint32, rabin.BitmapWords(bytes))}, nil
}

// Submit computes b's bitmap.
func (c CPUMarkers) Submit(b *MarkerBatch) error {
	if b.err = b.check(); b.err != nil {
		return b.err
	}
	b.err = c.M.Bitmap(b.Buf[:b.Bytes], b.Offs[:b.N], b.Lens[:b.N], b.Bitmap)
	return b.err
}

// Wait returns Submit's error.
func (c CPUMarkers) Wait(b *MarkerBatch) error { return b.err }

// FreeBatch does nothing: the garbage collector frees the batch.
func (c CPUMarkers) FreeBatch(*MarkerBatch) {}

// Close does nothing.
func (c CPUMarkers) Close() error { return nil }

// MarkerPositions returns the marker positions of each payload of a batch
// whose bitmap is computed, relative to the payload's start: the
// rabin.Marker.Markers of each payload, appended to dst[k] (dst grown to
// b.N entries).
func MarkerPositions(dst [][]int32, b *MarkerBatch) [][]int32 {
	for len(dst) < b.N {
		dst = append(dst, nil)
	}
	for k := 0; k < b.N; k++ {
		o, n := int(b.Offs[k]), int(b.Lens[k])
		d := dst[k][:0]
		for p := o; p < o+n; {
			word := b.Bitmap[p>>5] >> uint(p&31)
			if word == 0 {
				p = (p | 31) + 1
				continue
			}
			if word&1 != 0 {
				d = append(d, int32(p-o))
			}
			p++
		}
		dst[k] = d
	}
	return dst[:b.N]
}

var _ Markers = CPUMarkers{}

// StreamSegment is the stretch of a stream one payload of StreamMarkers
// covers (plus the window's w−1 bytes before it, hashed again).
const StreamSegment = 64 << 10

// StreamMarkers returns the marker positions of data taken as one payload
// (rabin.Marker.Markers of all of it) computed by mk with window w: the
// stream is cut into payloads of StreamSegment bytes, each starting w−1
// bytes early so that every window ending in it is whole, and these go
// through two batches of mk, one filled while the other is computed.
func StreamMarkers(mk Markers, w int, data []byte, dst []int32) ([]int32, error) {
	if len(data) > 1<<31-1 {
		return dst, fmt.Errorf("gpu: stream of %d bytes: positions are 32-bit", len(data))
	}
	if w < 1 {
		return dst, fmt.Errorf("gpu: window %d", w)
	}
	const perBatch = 256
	seg := StreamSegment + w - 1
	var bs [2]*MarkerBatch
	for i := range bs {
		b, err := mk.NewBatch(perBatch*((seg+rabin.PackAlign-1)/rabin.PackAlign*rabin.PackAlign), perBatch)
		if err != nil {
			for _, b := range bs[:i] {
				mk.FreeBatch(b)
			}
			return dst, err
		}
		bs[i] = b
	}
	defer mk.FreeBatch(bs[0])
	defer mk.FreeBatch(bs[1])
	base := [2][]int{} // each batch's payloads' stream offsets
	var pos [][]int32
	next := 0 // the next segment's start
	drain := func(i int) error {
		if err := mk.Wait(bs[i]); err != nil {
			return err
		}
		pos = MarkerPositions(pos, bs[i])
		for k, ps := range pos[:bs[i].N] {
			for _, p := range ps {
				dst = append(dst, int32(base[i][k]+int(p)))
			}
		}
		return nil
	}
	pending := [2]bool{}
	for i := 0; next < len(data) || pending[0] || pending[1]; i ^= 1 {
		if pending[i] {
			if err := drain(i); err != nil {
				return dst, err
			}
			pending[i] = false
		}
		if next >= len(data) {
			continue
		}
		b := bs[i]
		b.Reset()
		base[i] = base[i][:0]
		for next < len(data) {
			lo := max(0, next-(w-1))
			hi := min(len(data), next+StreamSegment)
			if !b.Add(data[lo:hi]) {
				break
			}
			base[i] = append(base[i], lo)
			next = hi
		}
		if err := mk.Submit(b); err != nil {
			return dst, err
		}
		pending[i] = true
	}
	return dst, nil
}

// DeviceMarkers returns Markers for m on the Engine's first device in
// service that computes markers (the CUDA build's RabinMarkers, on the
// device's own context; closing them leaves the device open), or
// ErrNoMarkersGPU when there is none: the caller computes markers on the
// CPU then (CPUMarkers).
func (e *Engine) DeviceMarkers(m *rabin.Marker) (Markers, error) {
	for _, d := range e.devs {
		if d.failed.Load() {
			continue
		}
		if mk, err := deviceMarkers(d.b, m); err == nil {
			return mk, nil
		} else if !errors.Is(err, ErrNoMarkersGPU) {
			return nil, err
		}
	}
	return nil, ErrNoMarkersGPU
}
