package gpu

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

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
//
// A batch with a Region holds its payloads by reference instead (AddRef):
// payload k is Region.Mem[Srcs[k]:][:Lens[k]], host memory registered with
// the Markers (RegionMarkers), and Offs[k] is still its place in the packed
// layout, which the device builds itself (the CUDA one reads the region
// over PCIe, the CPU one copies into Buf): the host never copies the
// payloads.
type MarkerBatch struct {
	Buf    []byte   // packed payloads: Buf[:Bytes] in use
	Offs   []uint32 // payload k at Buf[Offs[k]:], Lens[k] bytes, k < N
	Lens   []uint32
	Srcs   []uint32 // with Region: payload k at Region.Mem[Srcs[k]:]
	Bitmap []uint32 // rabin.BitmapWords(Bytes) words: the result after Wait
	N      int
	Bytes  int
	// Region, when set, is where AddRef's payloads are (set it between
	// Reset and the first AddRef; a batch holds payloads of one kind).
	Region *HostRegion

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

// AddRef adds the payload of n bytes at Region.Mem[src:] by reference
// (nothing is copied: the Markers reads it from the region) at the next
// rabin.PackAlign boundary of the packed layout, and reports whether it
// fit. The batch must have a Region; Submit checks that the payload lies
// inside it.
func (b *MarkerBatch) AddRef(src uint32, n int) bool {
	o := (b.Bytes + rabin.PackAlign - 1) / rabin.PackAlign * rabin.PackAlign
	if b.Region == nil || n < 0 || b.N >= len(b.Offs) || b.N >= len(b.Srcs) || o+n > len(b.Buf) {
		return false
	}
	b.Offs[b.N], b.Lens[b.N], b.Srcs[b.N] = uint32(o), uint32(n), src
	b.N++
	b.Bytes = o + n
	return true
}

// check verifies what the kernel relies on: every payload aligned and
// inside Buf[:Bytes] (and, by reference, inside its Region), the bitmap
// long enough.
func (b *MarkerBatch) check() error {
	if b.N < 0 || b.N > len(b.Offs) || b.N > len(b.Lens) || b.Bytes < 0 || b.Bytes > len(b.Buf) ||
		rabin.BitmapWords(b.Bytes) > len(b.Bitmap) || (b.Region != nil && b.N > len(b.Srcs)) {
		return fmt.Errorf("gpu: marker batch of %d payloads, %d bytes: outside its capacity", b.N, b.Bytes)
	}
	for k := 0; k < b.N; k++ {
		o, n := int(b.Offs[k]), int(b.Lens[k])
		if o%rabin.PackAlign != 0 || o+n > b.Bytes {
			return fmt.Errorf("gpu: marker batch: payload %d at %d+%d outside the batch or unaligned", k, o, n)
		}
		if b.Region != nil && int64(b.Srcs[k])+int64(n) > int64(len(b.Region.Mem)) {
			return fmt.Errorf("gpu: marker batch: payload %d at %d+%d outside its region of %d bytes", k, b.Srcs[k], n, len(b.Region.Mem))
		}
	}
	return nil
}

// HostRegion is host memory registered with a RegionMarkers, out of which
// batches take payloads by reference (MarkerBatch.AddRef): a receive ring
// the payloads were received into, registered once, so that the payloads
// are not copied on the host on their way to the device.
type HostRegion struct {
	Mem  []byte
	impl any // the Markers' registration
}

// MaxRegionBytes is the largest HostRegion: payload offsets are 32-bit.
const MaxRegionBytes = 1 << 32

// RegionMarkers are Markers that read payloads by reference out of
// registered host memory.
type RegionMarkers interface {
	Markers
	// RegisterHost registers mem (16-byte aligned, a multiple of 16 bytes
	// long, at most MaxRegionBytes;
	// for a GPU, memory outside the Go heap, such as a mapped receive
	// ring, that stays mapped until UnregisterHost) for batches' AddRef.
	RegisterHost(mem []byte) (*HostRegion, error)
	// UnregisterHost undoes RegisterHost; no batch in flight may use it.
	UnregisterHost(h *HostRegion) error
}

// checkRegion is RegisterHost's check of mem.
func checkRegion(mem []byte) error {
	if len(mem) == 0 || len(mem) > MaxRegionBytes {
		return fmt.Errorf("gpu: host region of %d bytes: want 1..%d", len(mem), MaxRegionBytes)
	}
	if uintptr(unsafe.Pointer(&mem[0]))%16 != 0 || len(mem)%16 != 0 {
		return fmt.Errorf("gpu: host region of %d bytes at %p: want 16-byte alignment and length", len(mem), &mem[0])
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
		Srcs: make([]uint32, payloads), Bitmap: make([]uint32, rabin.BitmapWords(bytes))}, nil
}

// RegisterHost checks mem and wraps it: the CPU reads any memory.
func (c CPUMarkers) RegisterHost(mem []byte) (*HostRegion, error) {
	if err := checkRegion(mem); err != nil {
		return nil, err
	}
	return &HostRegion{Mem: mem}, nil
}

// UnregisterHost does nothing.
func (c CPUMarkers) UnregisterHost(*HostRegion) error { return nil }

// Submit computes b's bitmap (a batch by reference packed into Buf first,
// the gaps zero, as the kernel rabin_gather lays it out on the device).
func (c CPUMarkers) Submit(b *MarkerBatch) error {
	if b.err = b.check(); b.err != nil {
		return b.err
	}
	if b.Region != nil {
		end := 0
		for k := 0; k < b.N; k++ {
			o, n := int(b.Offs[k]), int(b.Lens[k])
			clear(b.Buf[end:o])
			copy(b.Buf[o:o+n], b.Region.Mem[b.Srcs[k]:])
			end = o + n
		}
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

var _ RegionMarkers = CPUMarkers{}

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

// MarkerPipeline computes the marker bitmap of many payloads, laid out as
// rabin.Pack lays them out, through a Markers in batches: the payloads are
// cut into runs that fill one batch each (the first Fillers runs an eighth
// of a batch, so that the first copies start early instead of after every
// filler packed a whole batch at once; with RampDown, near the end each
// run at most half of what is left, down to an eighth of a batch, so that
// the last batch's work after its copy, which nothing overlaps, is
// short), and Fillers goroutines each take
// the next run, pack it into one of their two batches (page-locked host
// memory for a GPU), submit it, and while it is computed wait for their
// other batch and copy its bitmap into place. Packing, the copy in, the
// kernel and the copy out of different batches thus overlap, and the
// packing, the one step on the host that touches every byte, runs on
// several cores. A run's bitmap words are the whole-packed bitmap's words
// from its first payload's offset on (offsets are multiples of 32, so a
// run's local offsets are the global ones less its start), so each batch's
// bitmap is copied into place as it is; runs write disjoint words.
//
// Goroutines: Bitmap starts the fillers and returns when they are done;
// each filler owns its two batches for the call. One Bitmap runs at a time
// (a second call waits).
type MarkerPipeline struct {
	mk      Markers
	cfg     PipelineConfig
	mu      sync.Mutex        // one Bitmap at a time
	batches [][2]*MarkerBatch // each filler's two
}

// PipelineConfig shapes a MarkerPipeline.
type PipelineConfig struct {
	Fillers       int  // goroutines packing batches (1..64)
	BatchBytes    int  // a batch's packed bytes (at least 64 KiB)
	BatchPayloads int  // a batch's payloads (at least 1)
	FlatStart     bool // the first runs a whole batch too (the ramp measured against none)
	RampDown      bool // near the end, each run at most half of what is left (measured neutral on an H200, 2026-11-26)
}

// NewMarkerPipeline allocates 2·Fillers batches of mk.
func NewMarkerPipeline(mk Markers, cfg PipelineConfig) (*MarkerPipeline, error) {
	if cfg.Fillers < 1 || cfg.Fillers > 64 || cfg.BatchBytes < 64<<10 || cfg.BatchPayloads < 1 {
		return nil, fmt.Errorf("gpu: marker pipeline of %d fillers, batches of %d bytes and %d payloads: want 1..64 fillers, batches of at least 64 KiB and 1 payload",
			cfg.Fillers, cfg.BatchBytes, cfg.BatchPayloads)
	}
	p := &MarkerPipeline{mk: mk, cfg: cfg}
	for i := 0; i < cfg.Fillers; i++ {
		var two [2]*MarkerBatch
		for j := range two {
			b, err := mk.NewBatch(cfg.BatchBytes, cfg.BatchPayloads)
			if err != nil {
				p.Close()
				for _, b := range two[:j] {
					mk.FreeBatch(b)
				}
				return nil, err
			}
			two[j] = b
		}
		p.batches = append(p.batches, two)
	}
	return p, nil
}

// Close frees the batches (not the Markers).
func (p *MarkerPipeline) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, two := range p.batches {
		for _, b := range two {
			p.mk.FreeBatch(b)
		}
	}
	p.batches = nil
}

// markerRun is a run of payloads, lo..hi-1, packed into one batch; word is
// the whole-packed bitmap's word of its first payload.
type markerRun struct{ lo, hi, word int }

// plan cuts n payloads, payload k lenOf(k) bytes, into runs that fit a
// batch and hands each to emit as soon as it is cut (the fillers start on
// the first runs while the rest are planned; a false from emit stops it).
// words is the bitmap's length: a run past it is an error, as is a payload
// larger than a batch or a packed length past 32-bit offsets.
func (p *MarkerPipeline) plan(n int, lenOf func(k int) int, words int, emit func(markerRun) bool) error {
	global, local := 0, 0 // the packed end, of all and of the current run
	cur := markerRun{word: 0}
	cut := 0                                // runs emitted
	ramp := max(p.cfg.BatchBytes/8, 64<<10) // the first runs' bytes
	send := func(r markerRun, end int) error {
		if end > 1<<31-1 {
			return fmt.Errorf("gpu: marker pipeline: %d packed bytes: offsets are 32-bit", end)
		}
		if rabin.BitmapWords(end) > words {
			return fmt.Errorf("gpu: marker pipeline: a bitmap of %d words for at least %d packed bytes (%d words)", words, end, rabin.BitmapWords(end))
		}
		if !emit(r) {
			return errPlanStopped
		}
		cut++
		return nil
	}
	limit := p.cfg.BatchBytes
	if !p.cfg.FlatStart {
		limit = ramp
	}
	for k := 0; k < n; k++ {
		pl := lenOf(k)
		if pl > p.cfg.BatchBytes {
			return fmt.Errorf("gpu: marker pipeline: payload %d of %d bytes is larger than a batch (%d bytes)", k, pl, p.cfg.BatchBytes)
		}
		g := (global + rabin.PackAlign - 1) &^ (rabin.PackAlign - 1)
		l := (local + rabin.PackAlign - 1) &^ (rabin.PackAlign - 1)
		if k > cur.lo && (l+pl > limit || k-cur.lo >= p.cfg.BatchPayloads) {
			cur.hi = k
			if err := send(cur, global); err != nil {
				return err
			}
			if cut >= p.cfg.Fillers {
				limit = p.cfg.BatchBytes
			}
			if p.cfg.RampDown {
				// Ramp down: a run takes at most half of what is left
				// (estimated from the payloads so far), so that the
				// last batches, whose kernel, bitmap copy and
				// bitmap's copy into place follow their copy in with
				// nothing left to overlap, are small.
				left := int64(n-k) * int64(g) / int64(k)
				limit = int(min(int64(limit), max(int64(ramp), left/2)))
			}
			cur = markerRun{lo: k, word: g / 32}
			l = 0
		}
		global, local = g+pl, l+pl
	}
	if n > 0 {
		cur.hi = n
		return send(cur, global)
	}
	return nil
}

// errPlanStopped is plan's error when the fillers stopped taking runs.
var errPlanStopped = errors.New("gpu: marker pipeline: stopped")

// Bitmap sets bitmap to the marker bitmap of payloads as rabin.Pack lays
// them out (rabin.Marker.Bitmap of Pack's buffer: every word that covers a
// payload's bytes written whole, the others left alone). bitmap must hold
// rabin.BitmapWords of the packed length (else an error, after the words
// of the runs planned before the shortage showed may have been written).
func (p *MarkerPipeline) Bitmap(payloads [][]byte, bitmap []uint32) error {
	return p.run(len(payloads), func(k int) int { return len(payloads[k]) }, nil, func(b *MarkerBatch, r markerRun) bool {
		for _, pl := range payloads[r.lo:r.hi] {
			if !b.Add(pl) {
				return false
			}
		}
		return true
	}, bitmap)
}

// BitmapRegion is Bitmap of the payloads at h.Mem[srcs[k]:][:lens[k]],
// taken by reference (MarkerBatch.AddRef): the fillers write only each
// batch's index, and the Markers (a RegionMarkers that registered h) reads
// the payloads out of h itself. The bitmap is the one of the payloads as
// rabin.Pack lays them out, as Bitmap's.
func (p *MarkerPipeline) BitmapRegion(h *HostRegion, srcs, lens []uint32, bitmap []uint32) error {
	if h == nil || len(srcs) != len(lens) {
		return fmt.Errorf("gpu: marker pipeline: %d sources for %d lengths (or no region)", len(srcs), len(lens))
	}
	return p.run(len(lens), func(k int) int { return int(lens[k]) }, h, func(b *MarkerBatch, r markerRun) bool {
		for k := r.lo; k < r.hi; k++ {
			if !b.AddRef(srcs[k], int(lens[k])) {
				return false
			}
		}
		return true
	}, bitmap)
}

// run is Bitmap and BitmapRegion: n payloads of lenOf(k) bytes, add
// putting a run's into a batch (whose Region is h). A planning goroutine
// cuts the runs and hands them to the fillers over a channel, so that the
// first batches go out while the later runs are cut (cutting 200,000
// payloads took 1.5 ms on a 2-core VM, a quarter of a round at 400 Gbit/s).
func (p *MarkerPipeline) run(n int, lenOf func(int) int, h *HostRegion, add func(*MarkerBatch, markerRun) bool, bitmap []uint32) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.batches == nil {
		return fmt.Errorf("gpu: marker pipeline closed")
	}
	runs := make(chan markerRun, 4*len(p.batches))
	stop := make(chan struct{})
	var stopOnce sync.Once
	halt := func() { stopOnce.Do(func() { close(stop) }) }
	planned := make(chan error, 1)
	go func() {
		defer close(runs)
		planned <- p.plan(n, lenOf, len(bitmap), func(r markerRun) bool {
			select {
			case runs <- r:
				return true
			case <-stop:
				return false
			}
		})
	}()
	var failed atomic.Bool
	errs := make([]error, len(p.batches))
	var wg sync.WaitGroup
	for f := range p.batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[f] = p.fill(runs, h, add, bitmap, p.batches[f], &failed)
			if errs[f] != nil {
				failed.Store(true)
				halt()
			}
		}()
	}
	wg.Wait()
	halt()
	if err := <-planned; err != nil && !errors.Is(err, errPlanStopped) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// fill is one filler: it packs and submits the next run into one batch
// while the other is computed, and copies each computed bitmap into place.
func (p *MarkerPipeline) fill(runs <-chan markerRun, h *HostRegion, add func(*MarkerBatch, markerRun) bool, bitmap []uint32,
	two [2]*MarkerBatch, failed *atomic.Bool) error {
	var pending [2]bool // whether each batch is submitted
	var held [2]markerRun
	drain := func(i int) error {
		if !pending[i] {
			return nil
		}
		b, r := two[i], held[i]
		pending[i] = false
		if err := p.mk.Wait(b); err != nil {
			return err
		}
		copy(bitmap[r.word:], b.Bitmap[:rabin.BitmapWords(b.Bytes)])
		return nil
	}
	for i := 0; ; i ^= 1 {
		if err := drain(i); err != nil {
			drain(i ^ 1)
			return err
		}
		r, ok := <-runs
		if !ok || failed.Load() {
			return drain(i ^ 1)
		}
		b := two[i]
		b.Reset()
		b.Region = h
		if !add(b, r) {
			drain(i ^ 1)
			return fmt.Errorf("gpu: marker pipeline: the run of payloads %d..%d does not fit its batch", r.lo, r.hi-1)
		}
		if err := p.mk.Submit(b); err != nil {
			drain(i ^ 1)
			return err
		}
		pending[i], held[i] = true, r
	}
}

// addrOf is the address of b's first byte (0 for an empty b).
func addrOf(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}
