//go:build cuda

package gpu

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/kernels"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// CUDAMatcher is content-based matching on the GPU: a pubsub layout's image
// in device memory (regions end to end, each at an even word) and the
// kernel pubsub_match: each event scans the anchor lists of its names for
// filters whose name signature its own covers and evaluates those (blocks
// of 256 threads, several per event in small batches). Batches
// (EventBatch) are queued round robin over its streams from the caller's
// goroutine; Load replaces the layout (waiting for the device), Update
// writes bubbles while batches go on (pubsub_live_cuda.go).
type CUDAMatcher struct {
	c       *CUDA
	mod     cu.Module
	fn      cu.Function
	fnUpd   cu.Function // pubsub_match with a live update's scatter first
	ptx     string
	streams []cu.Stream
	rr      atomic.Uint32
	once    sync.Once

	// The layout (replaced by Load, on the owning goroutine, with every
	// stream idle).
	img       devBuf
	base      [pubsub.NumRegions]int64  // region base words
	state     atomic.Pointer[liveState] // the name table and ports the device's words go with
	slots     int
	portWords int
	host      *bubble.Image // the loaded image (Update applies bubbles to it)

	owned bool // Close closes c too (OpenEventDevice made it)

	updMu sync.Mutex  // serializes Update (pubsub_update_cuda.go, pubsub_live_cuda.go)
	stage hostBuf     // staging of bubble copies (updMu; grown on the owning goroutine)
	live  liveUpdates // the live updates' streams, events and staging (pubsub_live_cuda.go)

	smallMode   SmallMode                 // set before first use (SetSmallMode)
	smallSplits int                       // blocks per event of small batches (0: splits)
	small       atomic.Pointer[smallPath] // the small-batch path (pubsub_small_cuda.go)
	smallErr    atomic.Pointer[error]     // why the small-batch path could not be made
	poolMu      sync.Mutex                // guards pool
	pool        []*EventBatch
}

// pubsubBlock is the kernel's block size.
const pubsubBlock = 256

type eventTwin struct {
	hoff, hattrs, hstr, hout, hpack hostBuf
	doff, dattrs, dstr, dout, dpack devBuf
	ev                              cu.Event
	submitted                       bool
	events                          int
	// Where Submit queued it: the stream, the work's number in it and
	// the scatters it follows (liveUpdates.finished).
	si    int
	q, fl uint64
}

// PubsubMatcher loads the matching kernel and the layout l, with batches
// over streams streams (1..16).
func (c *CUDA) PubsubMatcher(l *pubsub.Layout, streams int) (*CUDAMatcher, error) {
	if streams < 1 || streams > 16 {
		return nil, fmt.Errorf("gpu: cuda: matching over %d streams: want 1..16", streams)
	}
	m, err := c.newPubsubMatcher(streams)
	if err != nil {
		return nil, err
	}
	if err := m.Load(l); err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// newPubsubMatcher loads the kernel and makes the streams; no layout yet.
func (c *CUDA) newPubsubMatcher(streams int) (*CUDAMatcher, error) {
	m := &CUDAMatcher{c: c, smallMode: defaultSmallMode()}
	err := c.do(func() error {
		var err error
		if m.mod, m.ptx, err = c.loadAux("pubsub", kernels.Pubsubsm90, kernels.Pubsubcompute80); err != nil {
			return err
		}
		if m.fn, err = m.mod.Function("pubsub_match"); err != nil {
			return fmt.Errorf("gpu: cuda: kernel pubsub_match: %v", err)
		}
		if m.fnUpd, err = m.mod.Function("pubsub_match_upd"); err != nil {
			return fmt.Errorf("gpu: cuda: kernel pubsub_match_upd: %v", err)
		}
		for i := 0; i < streams; i++ {
			s, err := cu.MakeStream(cu.NonBlocking)
			if err != nil {
				return fmt.Errorf("gpu: cuda: stream: %v", err)
			}
			m.streams = append(m.streams, s)
		}
		return m.live.init(c, streams)
	})
	if err != nil {
		m.Close()
		return nil, err
	}
	return m, nil
}

// EventDeviceBuilt says whether OpenEventDevice can open a device in this
// build.
const EventDeviceBuilt = true

// OpenEventDevice opens device 0 and a matcher of layout l on it (its own
// CUDA context, closed with the matcher): the device gswitchd's event
// forwarding matches on.
func OpenEventDevice(l *pubsub.Layout) (EventDevice, error) {
	c, err := NewCUDA(0)
	if err != nil {
		return nil, err
	}
	m, err := c.PubsubMatcher(l, 4)
	if err != nil {
		c.Close()
		return nil, err
	}
	m.owned = true
	return m, nil
}

// StartEventDevice starts opening device 0 and loading the matching kernel
// (OpenEventDevice's slow part: the CUDA context, the PTX) on a goroutine
// of its own, so that it overlaps the building of the table and its layout;
// the function it returns waits for it and loads the layout, keeping
// l.Image as the matcher's own (no copy: the caller hands it over, for
// example the full image of the layout's first bubble.Mirror.Sync, and
// does not write it afterwards).
func StartEventDevice() func(l *pubsub.Layout) (EventDevice, error) {
	type opened struct {
		m   *CUDAMatcher
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		c, err := NewCUDA(0)
		if err != nil {
			ch <- opened{nil, err}
			return
		}
		m, err := c.newPubsubMatcher(4)
		if err != nil {
			c.Close()
			ch <- opened{nil, err}
			return
		}
		m.owned = true
		ch <- opened{m, nil}
	}()
	return func(l *pubsub.Layout) (EventDevice, error) {
		o := <-ch
		if o.err != nil {
			return nil, o.err
		}
		if err := o.m.c.do(func() error { return o.m.load(l) }); err != nil {
			o.m.Close()
			return nil, err
		}
		return o.m, nil
	}
}

// Update brings the device's layout up to date: a full image is loaded
// anew; bubbles are written into the kept image and copied to the device as
// runs of neighbouring words (a change of one subscription is a few runs of
// a few words). It waits for the queued batches first; it must not run
// concurrently with Match, Submit or Wait.
func (m *CUDAMatcher) Update(u bubble.Update, names map[string]uint32) error {
	m.updMu.Lock()
	defer m.updMu.Unlock()
	if u.Full == nil {
		switch updateMode() {
		case "live", "eager", "ahead":
			return m.updateLive(u, names, updateMode())
		case "staged":
			return m.updateStaged(u, names)
		}
	}
	return m.c.do(func() error {
		if err := m.idle(); err != nil {
			return err
		}
		if u.Full != nil {
			return m.load(&pubsub.Layout{Image: u.Full, Names: names})
		}
		if m.host == nil || m.host.Generation != u.Generation {
			return fmt.Errorf("%w: pubsub bubbles of generation %d for a device layout of another", ErrBadUpdate, u.Generation)
		}
		if err := m.host.Apply(u.Bubbles); err != nil {
			return fmt.Errorf("%w: %v", ErrBadUpdate, err)
		}
		w := m.host.Words
		for _, r := range bubbleRuns(u.Bubbles, 32) {
			if err := upload(m.img.p+cu.DevicePtr(4*(m.base[r.region]+int64(r.lo))), w[r.region][r.lo:r.hi]); err != nil {
				return fmt.Errorf("gpu: cuda: %v", err)
			}
		}
		m.publish(m.nextState(names))
		return nil
	})
}

// dropPool frees the pooled batches (on the owning goroutine: their port
// words may be of the layout being replaced).
func (m *CUDAMatcher) dropPool() {
	m.poolMu.Lock()
	pool := m.pool
	m.pool = nil
	m.poolMu.Unlock()
	for _, b := range pool {
		if t, ok := b.impl.(*eventTwin); ok {
			t.release(m.c)
		}
	}
}

// Load replaces the layout (after every queued batch is done).
func (m *CUDAMatcher) Load(l *pubsub.Layout) error {
	return m.c.do(func() error {
		if err := m.idle(); err != nil {
			return err
		}
		return m.load(&pubsub.Layout{Image: l.Image.Clone(), Names: l.Names})
	})
}

// load runs on the owning goroutine. The matcher keeps l's image (Update
// writes bubbles into it): callers hand over an image they do not write.
func (m *CUDAMatcher) load(l *pubsub.Layout) error {
	w := l.Image.Words
	if len(w) != int(pubsub.NumRegions) || len(w[pubsub.RegionHeader]) < pubsub.HeaderWords ||
		w[pubsub.RegionHeader][pubsub.HdrMagic] != pubsub.LayoutMagic || w[pubsub.RegionHeader][pubsub.HdrVersion] != pubsub.LayoutVersion {
		return fmt.Errorf("gpu: cuda: not a pubsub layout of version %d", pubsub.LayoutVersion)
	}
	total := 0
	for r, ws := range w {
		m.base[r] = int64(total)
		total += (len(ws) + 1) &^ 1 // even: the signatures are read 8 bytes at a time
	}
	m.c.free(&m.img)
	m.host = l.Image
	m.dropPool()
	m.dropSmall()
	var err error
	// 2 words of padding: the kernel may read a string's bytes up to the
	// end of the region.
	if m.img, err = m.c.alloc(4 * int64(total+2)); err != nil {
		return err
	}
	if err := cu.MemsetD32(m.img.p, 0, int64(total+2)); err != nil {
		return fmt.Errorf("gpu: cuda: %v", err)
	}
	for r, ws := range w {
		if err := upload(m.img.p+cu.DevicePtr(4*m.base[r]), ws); err != nil {
			return fmt.Errorf("gpu: cuda: %v", err)
		}
	}
	m.slots = int(w[pubsub.RegionHeader][pubsub.HdrFilters])
	np := int(w[pubsub.RegionHeader][pubsub.HdrPorts])
	// Port words for the region's capacity: ports added later need no new
	// batches.
	m.portWords = max(1, (len(w[pubsub.RegionPorts])+31)/32)
	m.publish(&liveState{names: l.Names, ports: append([]uint32(nil), w[pubsub.RegionPorts][:np]...), namesVer: m.nextNamesVer()})
	return nil
}

// bubbleRun is a run of words of one region to copy.
type bubbleRun struct {
	region bubble.Region
	lo, hi uint32
}

// bubbleRuns sorts the bubbles' positions and merges those at most gap
// words apart into runs.
func bubbleRuns(bs []bubble.Bubble, gap uint32) []bubbleRun {
	pos := make([]uint64, len(bs))
	for i, b := range bs {
		pos[i] = uint64(b.Region)<<32 | uint64(b.Offset)
	}
	slices.Sort(pos)
	var runs []bubbleRun
	for _, p := range pos {
		r, o := bubble.Region(p>>32), uint32(p)
		if n := len(runs); n > 0 && runs[n-1].region == r && o <= runs[n-1].hi+gap {
			runs[n-1].hi = max(runs[n-1].hi, o+1)
			continue
		}
		runs = append(runs, bubbleRun{r, o, o + 1})
	}
	return runs
}

// Name returns "cuda".
func (m *CUDAMatcher) Name() string { return "cuda" }

// Describe says how the kernel runs for the loaded layout.
func (m *CUDAMatcher) Describe() string {
	return fmt.Sprintf("pubsub_match (%s): %d filter slots, anchor lists with name signatures, blocks of %d, %d ports, image %d bytes",
		m.ptx, m.slots, pubsubBlock, len(m.state.Load().ports), m.host.Bytes())
}

// ImageBytes returns the device memory the layout takes.
func (m *CUDAMatcher) ImageBytes() int64 { return m.img.n }

// Ports returns the layout's ports region (port index → port).
func (m *CUDAMatcher) Ports() []uint32 { return m.state.Load().ports }

// Names returns the layout's name table.
func (m *CUDAMatcher) Names() map[string]uint32 { return m.state.Load().names }

// NewEventBatch allocates a batch of at most events events, attrs
// attributes and strBytes bytes of string values.
func (m *CUDAMatcher) NewEventBatch(events, attrs, strBytes int) (*EventBatch, error) {
	if events < 1 || attrs < 0 || strBytes < 0 {
		return nil, fmt.Errorf("gpu: event batch of %d events, %d attributes, %d bytes", events, attrs, strBytes)
	}
	t := &eventTwin{events: events}
	pw := m.portWords
	outWords := int64(pw)*int64(events) + 1 + int64(hitCap(events))
	err := m.c.do(func() error {
		var err error
		for _, a := range []struct {
			h *hostBuf
			d *devBuf
			n int64
		}{{&t.hoff, &t.doff, 4 * int64(events+1)}, {&t.hattrs, &t.dattrs, 4 * AttrWords * int64(attrs)},
			{&t.hstr, &t.dstr, int64(strBytes)}, {&t.hout, &t.dout, 4 * outWords}, {&t.hpack, &t.dpack, packBytes}} {
			if *a.h, err = allocHost(max(a.n, 4)); err != nil {
				return err
			}
			if *a.d, err = m.c.alloc(max(a.n, 4)); err != nil {
				return err
			}
		}
		t.ev, err = cu.MakeEvent(cu.DisableTiming)
		return err
	})
	if err != nil {
		m.c.do(func() error { t.release(m.c); return nil })
		return nil, err
	}
	return &EventBatch{Off: wordsAt(t.hoff.p, events+1), Attrs: wordsAt(t.hattrs.p, AttrWords*attrs),
		Str: t.hstr.bytes(int64(strBytes)), Out: wordsAt(t.hout.p, int(outWords)), PortWords: pw, impl: t}, nil
}

func (t *eventTwin) release(c *CUDA) {
	for _, h := range []*hostBuf{&t.hoff, &t.hattrs, &t.hstr, &t.hout, &t.hpack} {
		h.free()
	}
	for _, d := range []*devBuf{&t.doff, &t.dattrs, &t.dstr, &t.dout, &t.dpack} {
		c.free(d)
	}
	if t.ev != (cu.Event{}) {
		cu.DestroyEvent(&t.ev)
	}
}

// FreeEventBatch frees b's memory.
func (m *CUDAMatcher) FreeEventBatch(b *EventBatch) {
	if t, ok := b.impl.(*eventTwin); ok {
		m.c.do(func() error { t.release(m.c); return nil })
		b.impl = nil
	}
}

func (m *CUDAMatcher) check(b *EventBatch) (*eventTwin, error) {
	t, _ := b.impl.(*eventTwin)
	if t == nil {
		return nil, fmt.Errorf("gpu: cuda: an event batch this matcher did not make")
	}
	return m.checkBatch(b, t.events)
}

// checkBatch checks b against the layout and a capacity of events events.
func (m *CUDAMatcher) checkBatch(b *EventBatch, events int) (*eventTwin, error) {
	t, _ := b.impl.(*eventTwin)
	if b.PortWords != m.portWords {
		return nil, fmt.Errorf("gpu: cuda: event batch of %d port words for a layout of %d (allocate it after Load)", b.PortWords, m.portWords)
	}
	if b.N < 0 || b.N > events || b.N+1 > len(b.Off) || int(b.Off[b.N]) > len(b.Attrs)/AttrWords || b.StrBytes > len(b.Str) || b.StrBytes < 0 {
		return nil, fmt.Errorf("gpu: cuda: event batch of %d events outside its capacity", b.N)
	}
	nn := uint32(len(m.state.Load().names))
	for k := 0; k < b.N; k++ {
		if b.Off[k] > b.Off[k+1] {
			return nil, fmt.Errorf("gpu: cuda: event batch: offsets decrease at event %d", k)
		}
	}
	for a := 0; a < int(b.Off[b.N]); a++ {
		r := b.Attrs[AttrWords*a : AttrWords*(a+1)]
		if r[0] >= nn {
			return nil, fmt.Errorf("gpu: cuda: event batch: attribute %d names index %d of %d", a, r[0], nn)
		}
		if r[1] == uint32(pubsub.TypeString) && (uint64(r[2])+uint64(r[3]) > uint64(b.StrBytes) || r[3] > pubsub.MaxString) {
			return nil, fmt.Errorf("gpu: cuda: event batch: attribute %d's string outside the batch", a)
		}
	}
	return t, nil
}

// splits is the blocks per event for a batch of n events: enough blocks to
// fill the device four times over, at most 64 per event (one event's
// lists in one pass of 16K threads).
func (m *CUDAMatcher) splits(n int) int {
	return max(1, min(64, (4*m.c.sms+n-1)/max(n, 1)))
}

// packBytes is the size of a batch's packed buffer: a small batch's
// offsets, attributes, strings and zeroed answers go to the device in one
// copy (one copy and no memset fewer on a single event's path).
const packBytes = 64 << 10

// pack lays a small batch out in t.hpack (offsets, attributes, strings,
// zeros for the answers, room for the deciding slots) and returns the byte
// offsets of the attributes, strings and answers and the bytes to copy in;
// ok is false when it does not fit.
func (m *CUDAMatcher) pack(h hostBuf, b *EventBatch) (attrs, str, out, in int64, ok bool) {
	na := int64(b.Off[b.N])
	attrs = 4 * int64(b.N+1)
	str = attrs + 4*AttrWords*na
	out = (str + int64(b.StrBytes) + 3) &^ 3
	ow := int64(m.portWords)*int64(b.N) + 1
	in = out + 4*ow
	if b.N > 64 || in+4*int64(hitCap(b.N)) > packBytes {
		return 0, 0, 0, 0, false
	}
	p := h.bytes(packBytes)
	copy(p, unsafe.Slice((*byte)(unsafe.Pointer(&b.Off[0])), 4*(b.N+1)))
	if na > 0 {
		copy(p[attrs:], unsafe.Slice((*byte)(unsafe.Pointer(&b.Attrs[0])), 4*AttrWords*na))
	}
	copy(p[str:], b.Str[:b.StrBytes])
	clear(p[out:in])
	return attrs, str, out, in, true
}

func (m *CUDAMatcher) params(a *cArgs, b *EventBatch, off, attrs, str, out uint64, splits int) []unsafe.Pointer {
	at := func(r bubble.Region) uint64 { return uint64(m.img.p) + uint64(4*m.base[r]) }
	hits := out + 4*uint64(m.portWords)*uint64(b.N)
	return []unsafe.Pointer{a.u64(at(pubsub.RegionNames)), a.u64(at(pubsub.RegionAnchorSig)),
		a.u64(at(pubsub.RegionAnchorSlot)), a.u64(at(pubsub.RegionConstraints)), a.u64(at(pubsub.RegionStrings)),
		a.u64(at(pubsub.RegionFilters)), a.u64(off), a.u64(attrs), a.u64(str),
		a.u32(uint32(b.N)), a.u32(uint32(splits)), a.u32(uint32(m.portWords)), a.u64(out), a.u64(hits),
		a.u32(uint32(hitCap(b.N)))}
}

// Submit queues b's copy-in, the zeroing of its answers, the kernel and
// the copy-out of its port bitmaps and deciding slots in the next stream.
//
// A live update (pubsub_live_cuda.go) is either wholly before or wholly
// after the batch: Submit holds live.mu while it queues the batch, whose
// kernel first writes the pending updates' words, if any
// (pubsub_match_upd), unless they were all made after the batch's call
// began (mayDefer: the batch is then matched against the words as they
// stand).
// A batch encoded by matchRange for a name table that an update has
// replaced since is refused with errStaleNames (matchRange encodes it
// again).
func (m *CUDAMatcher) Submit(b *EventBatch) error {
	// The check holds for later name tables too (names are only added).
	t, err := m.check(b)
	if err != nil {
		b.err = err
		return err
	}
	t.submitted, b.err = false, nil
	if b.N == 0 {
		return nil
	}
	if m.c.closed.Load() {
		return ErrClosed
	}
	a := newCArgs(24)
	defer a.free()
	sp := m.splits(b.N)
	si := int(m.rr.Add(1)) % len(m.streams)
	st := m.streams[si]
	ow := int64(m.portWords) * int64(b.N)
	var params []unsafe.Pointer
	var copies, zero []auxCopy
	var outs []auxOut
	if pa, ps, po, in, ok := m.pack(t.hpack, b); ok {
		d := uint64(t.dpack.p)
		params = m.params(a, b, d, d+uint64(pa), d+uint64(ps), d+uint64(po), sp)
		copies = []auxCopy{{t.dpack.p, t.hpack.p, in}}
		outs = []auxOut{{t.hout.p, t.dpack.p + cu.DevicePtr(po), 4 * (ow + 1 + int64(hitCap(b.N)))}}
	} else {
		params = m.params(a, b, uint64(t.doff.p), uint64(t.dattrs.p), uint64(t.dstr.p), uint64(t.dout.p), sp)
		copies = []auxCopy{{t.doff.p, t.hoff.p, 4 * int64(b.N+1)}, {t.dattrs.p, t.hattrs.p, 4 * AttrWords * int64(b.Off[b.N])},
			{t.dstr.p, t.hstr.p, int64(b.StrBytes)}}
		zero = []auxCopy{{dst: t.dout.p, n: ow + 1}}
		outs = []auxOut{{t.hout.p, t.dout.p, 4 * (ow + 1 + int64(hitCap(b.N)))}}
	}
	m.live.mu.Lock()
	defer m.live.mu.Unlock()
	if b.namesVer != 0 && b.namesVer != m.state.Load().namesVer {
		return errStaleNames
	}
	b.seen = m.live.seq
	fn, evk, epoch := m.fn, cu.Event{}, uint32(0)
	if m.live.pn > 0 && m.live.mayDefer(b) {
		// Updates made after the caller's call began wait for its
		// next call (the words stand at flushedSeq; see mayDefer).
		b.seen = m.live.flushedSeq
		m.live.deferred++
	} else if m.live.pn > 0 && updateMode() == "live" {
		// The pending pairs are scattered by the batch's own kernel:
		// no launch of their own on the caller's path.
		var extra []unsafe.Pointer
		if extra, evk, epoch, err = m.fuseLocked(si, a); err != nil {
			b.err = err
			return err
		}
		params, fn = append(params, extra...), m.fnUpd
	} else if err := m.flushLocked(st, si); err != nil {
		b.err = err
		return err
	}
	if err := m.orderStream(si); err != nil {
		b.err = err
		return err
	}
	if err := m.c.auxQueue(st, copies, zero, fn, b.N*sp, pubsubBlock, 0, params, outs, t.ev, evk); err != nil {
		b.err = fmt.Errorf("gpu: cuda: matching: %v", err)
		return b.err
	}
	if fn == m.fnUpd {
		m.fused(si, epoch)
	}
	t.submitted = true
	t.si, t.q, t.fl = si, m.live.queued[si], m.live.flushes
	return nil
}

// Wait waits for b's answers (Out, and Hits).
func (m *CUDAMatcher) Wait(b *EventBatch) error {
	t, _ := b.impl.(*eventTwin)
	if t == nil {
		return fmt.Errorf("gpu: cuda: an event batch this matcher did not make")
	}
	if b.err != nil || !t.submitted {
		return b.err
	}
	t.submitted = false
	if err := m.c.auxWait(t.ev); err != nil {
		b.err = fmt.Errorf("gpu: cuda: matching: %v", err)
		return b.err
	}
	m.live.mu.Lock()
	m.live.finished(t.si, t.q, t.fl)
	m.live.mu.Unlock()
	return nil
}

// matchBatchEvents is the capacity of Match's batches.
const matchBatchEvents = 16 << 10

func (m *CUDAMatcher) getBatch() (*EventBatch, error) {
	m.poolMu.Lock()
	if n := len(m.pool); n > 0 {
		b := m.pool[n-1]
		m.pool = m.pool[:n-1]
		m.poolMu.Unlock()
		return b, nil
	}
	m.poolMu.Unlock()
	return m.NewEventBatch(matchBatchEvents, 8*matchBatchEvents, 64*matchBatchEvents)
}

func (m *CUDAMatcher) putBatch(b *EventBatch) {
	m.poolMu.Lock()
	if len(m.pool) < 16 && b.PortWords == m.portWords {
		m.pool = append(m.pool, b)
		m.poolMu.Unlock()
		return
	}
	m.poolMu.Unlock()
	m.FreeEventBatch(b)
}

// Match encodes evs into batches of up to 16K events (page-locked batches
// kept for reuse), matches them and decodes the ports. Several goroutines
// may call it at once (each batch goes to the next stream).
func (m *CUDAMatcher) Match(evs []pubsub.Event, out [][]uint32) ([][]uint32, error) {
	out, _, _, err := m.MatchSlots(evs, out, nil)
	return out, err
}

// matchParts is how many goroutines MatchSlots splits a large call over
// (each encodes, submits and decodes its own batches, so that encoding
// overlaps the device's work).
const matchParts = 4

// MatchSlots is Match that also appends to slots the filter slot that
// decided each delivery (per event and port, the filter that set its bit
// first: for the subscriptions' match counters, pubsub.Table.CountSlots).
// complete is false when a batch matched more deliveries than it brings
// back slots for (then slots holds some of them only).
func (m *CUDAMatcher) MatchSlots(evs []pubsub.Event, out [][]uint32, slots []uint32) ([][]uint32, []uint32, bool, error) {
	if len(evs) <= SmallBatchEvents {
		res, s2, complete, done, err := m.matchSmall(evs, out, slots)
		if done || err != nil {
			return res, s2, complete, err
		}
	}
	if cap(out) >= len(evs) {
		out = out[:len(evs)]
	} else {
		out = make([][]uint32, len(evs))
	}
	parts := 1
	if len(evs) >= 4096 {
		parts = min(matchParts, len(evs)/2048)
	}
	// The version this call began at: its batches see every update made
	// before it, and may leave later ones for the next call (Submit).
	m.live.mu.Lock()
	since := m.live.seq
	m.live.mu.Unlock()
	if parts == 1 {
		return m.matchRange(evs, out, slots, since)
	}
	type res struct {
		slots    []uint32
		complete bool
		err      error
	}
	rs := make([]res, parts)
	var wg sync.WaitGroup
	per := (len(evs) + parts - 1) / parts
	for p := 0; p < parts; p++ {
		lo, hi := min(p*per, len(evs)), min((p+1)*per, len(evs))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, rs[p].slots, rs[p].complete, rs[p].err = m.matchRange(evs[lo:hi], out[lo:hi], nil, since)
		}()
	}
	wg.Wait()
	complete := true
	for _, r := range rs {
		if r.err != nil {
			return out, slots, false, r.err
		}
		slots = append(slots, r.slots...)
		complete = complete && r.complete
	}
	return out, slots, complete, nil
}

// matchRange matches evs into out (len(out) == len(evs)) on one batch.
func (m *CUDAMatcher) matchRange(evs []pubsub.Event, out [][]uint32, slots []uint32, since uint64) ([][]uint32, []uint32, bool, error) {
	b, err := m.getBatch()
	if err != nil {
		return out, slots, false, err
	}
	defer m.putBatch(b)
	defer func() { b.namesVer, b.since = 0, 0 }()
	b.since = since
	complete := true
	done := 0
	for done < len(evs) {
		st := m.state.Load()
		k := EncodeEvents(b, st.names, evs[done:])
		if k == 0 {
			return out, slots, false, fmt.Errorf("gpu: cuda: an event does not fit a batch")
		}
		b.namesVer = st.namesVer
		if err := m.Submit(b); err == errStaleNames {
			continue // a live update numbered new names meanwhile
		} else if err != nil {
			return out, slots, false, err
		}
		if err := m.Wait(b); err != nil {
			return out, slots, false, err
		}
		// The ports after the batch's launch: a port an update added
		// before it has its index there (ports are only appended within a
		// layout).
		if err := decodeInto(out[done:done+k], b, m.state.Load().ports); err != nil {
			return out, slots, false, err
		}
		var ok bool
		slots, ok = appendHits(slots, b)
		complete = complete && ok
		done += k
	}
	return out, slots, complete, nil
}

// KernelTime times iters launches of the kernel (and the zeroing of the
// answers) over b, copied to the device first, and returns the
// milliseconds per launch.
func (m *CUDAMatcher) KernelTime(b *EventBatch, iters int) (float64, error) {
	t, err := m.check(b)
	if err != nil || b.N == 0 {
		return 0, err
	}
	a := newCArgs(16)
	defer a.free()
	sp := m.splits(b.N)
	ow := int64(m.portWords)*int64(b.N) + 1
	dout := t.dout.p
	// The arguments once (a holds 16), as Submit lays the batch out.
	var params []unsafe.Pointer
	var copies []auxCopy
	if pa, ps, po, in, ok := m.pack(t.hpack, b); ok {
		d := uint64(t.dpack.p)
		params = m.params(a, b, d, d+uint64(pa), d+uint64(ps), d+uint64(po), sp)
		dout = t.dpack.p + cu.DevicePtr(po)
		copies = []auxCopy{{t.dpack.p, t.hpack.p, in}}
	} else {
		params = m.params(a, b, uint64(t.doff.p), uint64(t.dattrs.p), uint64(t.dstr.p), uint64(t.dout.p), sp)
		copies = []auxCopy{{t.doff.p, t.hoff.p, 4 * int64(b.N+1)}, {t.dattrs.p, t.hattrs.p, 4 * AttrWords * int64(b.Off[b.N])},
			{t.dstr.p, t.hstr.p, int64(b.StrBytes)}}
	}
	if err := m.c.do(func() error {
		for _, c := range copies {
			if c.n > 0 {
				if err := cu.MemcpyHtoD(c.dst, c.src, c.n); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		return 0, err
	}
	var ms float64
	m.live.mu.Lock()
	err = m.flushLocked(m.streams[0], 0)
	if err == nil {
		err = m.orderStream(0)
	}
	m.live.mu.Unlock()
	if err != nil {
		return 0, err
	}
	err = m.c.do(func() error {
		ms, err = timeEvents(m.streams[0], iters, func(st cu.Stream) error {
			if err := cu.MemsetD32Async(dout, 0, ow, st); err != nil {
				return err
			}
			return m.fn.Launch(b.N*sp, 1, 1, pubsubBlock, 1, 1, 0, st, params)
		})
		return err
	})
	return ms, err
}

// Close frees the layout and the streams.
func (m *CUDAMatcher) Close() error {
	m.once.Do(func() {
		m.c.do(func() error {
			m.dropPool()
			m.dropSmall()
			m.stage.free()
			m.live.free(m.c)
			for i := range m.streams {
				m.streams[i].Destroy()
			}
			m.streams = nil
			m.c.free(&m.img)
			if m.mod != (cu.Module{}) {
				m.mod.Unload()
			}
			return nil
		})
		if m.owned {
			m.c.Close()
		}
	})
	return nil
}

var _ EventDevice = (*CUDAMatcher)(nil)
