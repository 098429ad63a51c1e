//go:build cuda

package gpu

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/kernels"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// CUDAMatcher is content-based matching on the GPU: a pubsub layout's image
// in device memory (regions end to end) and the kernel pubsub_match, a
// block per event, the filters' counters in the block's shared memory when
// they fit (4 bits each where no filter has more than 15 constraints), else
// in a slice of device memory per block. Batches (EventBatch) are queued
// round robin over its streams from the caller's goroutine; Load replaces
// the layout (waiting for the device).
type CUDAMatcher struct {
	c       *CUDA
	mod     cu.Module
	fn      cu.Function
	ptx     string
	streams []cu.Stream
	rr      atomic.Uint32
	once    sync.Once
	smemMax int

	// The layout (replaced by Load, on the owning goroutine, with every
	// stream idle).
	img       devBuf
	gcnt      devBuf
	base      [6]int64 // region base words
	names     map[string]uint32
	ports     []uint32
	slots     int
	cntBits   int
	cntWords  int
	smemCnt   int // counter words in shared memory (0: gcnt)
	touched   int
	block     int
	grid      int
	portWords int
	host      *bubble.Image // the loaded image (Update applies bubbles to it)

	owned  bool       // Close closes c too (OpenEventDevice made it)
	poolMu sync.Mutex // guards pool
	pool   []*EventBatch
}

type eventTwin struct {
	hoff, hattrs, hstr, hout hostBuf
	doff, dattrs, dstr, dout devBuf
	ev                       cu.Event
	submitted                bool
}

// PubsubMatcher loads the matching kernel and the layout l, with batches
// over streams streams (1..16).
func (c *CUDA) PubsubMatcher(l *pubsub.Layout, streams int) (*CUDAMatcher, error) {
	if streams < 1 || streams > 16 {
		return nil, fmt.Errorf("gpu: cuda: matching over %d streams: want 1..16", streams)
	}
	m := &CUDAMatcher{c: c}
	err := c.do(func() error {
		var err error
		if m.mod, m.ptx, err = c.loadAux("pubsub", kernels.Pubsubsm90, kernels.Pubsubcompute80); err != nil {
			return err
		}
		if m.fn, err = m.mod.Function("pubsub_match"); err != nil {
			return fmt.Errorf("gpu: cuda: kernel pubsub_match: %v", err)
		}
		dev, err := cu.CurrentDevice()
		if err != nil {
			return err
		}
		m.smemMax = smemMax(int(dev))
		if m.smemMax > 48<<10 {
			if err := smemOptIn(m.fn, m.smemMax); err != nil {
				return err
			}
		} else {
			m.smemMax = 48 << 10
		}
		for i := 0; i < streams; i++ {
			s, err := cu.MakeStream(cu.NonBlocking)
			if err != nil {
				return fmt.Errorf("gpu: cuda: stream: %v", err)
			}
			m.streams = append(m.streams, s)
		}
		return m.load(&pubsub.Layout{Image: l.Image.Clone(), Names: l.Names})
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

// Update brings the device's layout up to date: a full image is loaded
// anew; bubbles are written into the kept image and each region's span of
// changed words is copied to the device (a change of the counters' width,
// a filter past 15 constraints, reloads it all). It waits for the queued
// batches first; it must not run concurrently with Match, Submit or Wait.
func (m *CUDAMatcher) Update(u bubble.Update, names map[string]uint32) error {
	return m.c.do(func() error {
		for _, s := range m.streams {
			if err := s.Synchronize(); err != nil {
				return err
			}
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
		m.names = names
		w := m.host.Words
		maxNeed := uint32(0)
		for _, f := range w[pubsub.RegionFilters] {
			maxNeed = max(maxNeed, f&0xff)
		}
		if (maxNeed <= 15) != (m.cntBits == 4) {
			return m.load(&pubsub.Layout{Image: m.host, Names: names})
		}
		lo, hi := make([]int, len(w)), make([]int, len(w))
		for r := range w {
			lo[r], hi[r] = len(w[r]), -1
		}
		for _, b := range u.Bubbles {
			r, o := int(b.Region), int(b.Offset)
			lo[r], hi[r] = min(lo[r], o), max(hi[r], o)
		}
		for r := range w {
			if hi[r] < lo[r] {
				continue
			}
			if err := upload(m.img.p+cu.DevicePtr(4*(m.base[r]+int64(lo[r]))), w[r][lo[r]:hi[r]+1]); err != nil {
				return fmt.Errorf("gpu: cuda: %v", err)
			}
		}
		m.ports = append(m.ports[:0], w[pubsub.RegionPorts]...)
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
		for _, s := range m.streams {
			if err := s.Synchronize(); err != nil {
				return err
			}
		}
		return m.load(&pubsub.Layout{Image: l.Image.Clone(), Names: l.Names})
	})
}

// load runs on the owning goroutine. The matcher keeps l's image (Update
// writes bubbles into it): callers hand over an image they do not write.
func (m *CUDAMatcher) load(l *pubsub.Layout) error {
	w := l.Image.Words
	if len(w) != 6 || len(w[pubsub.RegionHeader]) < pubsub.HeaderWords || w[pubsub.RegionHeader][pubsub.HdrMagic] != pubsub.LayoutMagic {
		return fmt.Errorf("gpu: cuda: not a pubsub layout")
	}
	total := 0
	for r, ws := range w {
		m.base[r] = int64(total)
		total += len(ws)
	}
	m.c.free(&m.img)
	m.c.free(&m.gcnt)
	m.host = l.Image
	m.dropPool()
	var err error
	// 2 words of padding: the kernel reads a short constraint string as the
	// 3 words that hold it, which may reach past the strings region.
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
	m.slots = len(w[pubsub.RegionFilters])
	maxNeed := uint32(0)
	for _, f := range w[pubsub.RegionFilters] {
		maxNeed = max(maxNeed, f&0xff)
	}
	m.cntBits = 8
	if maxNeed <= 15 {
		m.cntBits = 4
	}
	m.cntWords = (m.slots*m.cntBits + 31) / 32
	m.ports = append([]uint32(nil), w[pubsub.RegionPorts]...)
	m.portWords = max(1, (len(m.ports)+31)/32)
	m.names = l.Names
	fixed := 4*(m.portWords+2) + 256
	limit := m.smemMax
	if pubsubSmemLimit > 0 {
		limit = min(limit, pubsubSmemLimit)
	}
	if cb := 4 * m.cntWords; cb+fixed+4*4096 <= limit {
		m.smemCnt = m.cntWords
		m.touched = min(16384, (m.smemMax-cb-fixed)/4)
		m.block = 1024
		m.grid = m.c.sms
	} else {
		m.smemCnt = 0
		m.touched = 8192
		m.block = 512
		m.grid = 2 * m.c.sms
		if m.gcnt, err = m.c.alloc(4 * int64(m.cntWords) * int64(m.grid)); err != nil {
			return err
		}
		if err := cu.MemsetD32(m.gcnt.p, 0, int64(m.cntWords)*int64(m.grid)); err != nil {
			return fmt.Errorf("gpu: cuda: %v", err)
		}
	}
	if pubsubTouchedCap > 0 {
		m.touched = min(m.touched, pubsubTouchedCap)
	}
	return nil
}

// pubsubSmemLimit and pubsubTouchedCap, when set (by tests), cap the
// shared memory the counters may take and the slots remembered per event,
// to exercise the device-memory counters and the full scan.
var pubsubSmemLimit, pubsubTouchedCap int

func (m *CUDAMatcher) smem() int { return 4*(m.smemCnt+m.touched+m.portWords+2) + 256 }

// Name returns "cuda".
func (m *CUDAMatcher) Name() string { return "cuda" }

// Describe says how the kernel runs for the loaded layout.
func (m *CUDAMatcher) Describe() string {
	where := "shared memory"
	if m.smemCnt == 0 {
		where = "device memory"
	}
	return fmt.Sprintf("pubsub_match (%s): %d filter slots, %d-bit counters in %s, blocks of %d, %d blocks, %d ports",
		m.ptx, m.slots, m.cntBits, where, m.block, m.grid, len(m.ports))
}

// Ports returns the layout's ports region (port index → port).
func (m *CUDAMatcher) Ports() []uint32 { return m.ports }

// Names returns the layout's name table.
func (m *CUDAMatcher) Names() map[string]uint32 { return m.names }

// NewEventBatch allocates a batch of at most events events, attrs
// attributes and strBytes bytes of string values.
func (m *CUDAMatcher) NewEventBatch(events, attrs, strBytes int) (*EventBatch, error) {
	if events < 1 || attrs < 0 || strBytes < 0 {
		return nil, fmt.Errorf("gpu: event batch of %d events, %d attributes, %d bytes", events, attrs, strBytes)
	}
	t := &eventTwin{}
	pw := m.portWords
	err := m.c.do(func() error {
		var err error
		for _, a := range []struct {
			h *hostBuf
			d *devBuf
			n int64
		}{{&t.hoff, &t.doff, 4 * int64(events+1)}, {&t.hattrs, &t.dattrs, 4 * AttrWords * int64(attrs)},
			{&t.hstr, &t.dstr, int64(strBytes)}, {&t.hout, &t.dout, 4 * int64(pw) * int64(events)}} {
			if *a.h, err = allocHost(max(a.n, 4)); err != nil {
				return err
			}
			if *a.d, err = m.c.alloc(a.n); err != nil {
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
		Str: t.hstr.bytes(int64(strBytes)), Out: wordsAt(t.hout.p, pw*events), PortWords: pw, impl: t}, nil
}

func (t *eventTwin) release(c *CUDA) {
	for _, h := range []*hostBuf{&t.hoff, &t.hattrs, &t.hstr, &t.hout} {
		h.free()
	}
	for _, d := range []*devBuf{&t.doff, &t.dattrs, &t.dstr, &t.dout} {
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
	if b.PortWords != m.portWords {
		return nil, fmt.Errorf("gpu: cuda: event batch of %d port words for a layout of %d (allocate it after Load)", b.PortWords, m.portWords)
	}
	if b.N < 0 || b.N+1 > len(b.Off) || int(b.Off[b.N]) > len(b.Attrs)/AttrWords || b.StrBytes > len(b.Str) || b.StrBytes < 0 {
		return nil, fmt.Errorf("gpu: cuda: event batch of %d events outside its capacity", b.N)
	}
	nn := uint32(len(m.names))
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

func (m *CUDAMatcher) params(a *cArgs, t *eventTwin, b *EventBatch) []unsafe.Pointer {
	at := func(r int) uint64 { return uint64(m.img.p) + uint64(4*m.base[r]) }
	return []unsafe.Pointer{a.u64(at(int(pubsub.RegionNames))), a.u64(at(int(pubsub.RegionConstraints))),
		a.u64(at(int(pubsub.RegionStrings))), a.u64(at(int(pubsub.RegionFilters))),
		a.u64(uint64(t.doff.p)), a.u64(uint64(t.dattrs.p)), a.u64(uint64(t.dstr.p)), a.u32(uint32(b.N)),
		a.u32(uint32(m.cntBits)), a.u64(uint64(m.gcnt.p)), a.u32(uint32(m.cntWords)), a.u32(uint32(m.smemCnt)),
		a.u32(uint32(m.touched)), a.u32(uint32(m.portWords)), a.u64(uint64(t.dout.p))}
}

// Submit queues b's copy-in, the kernel and the copy-out of its port
// bitmaps in the next stream.
func (m *CUDAMatcher) Submit(b *EventBatch) error {
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
	a := newCArgs(16)
	defer a.free()
	params := m.params(a, t, b)
	st := m.streams[int(m.rr.Add(1))%len(m.streams)]
	copies := []auxCopy{{t.doff.p, t.hoff.p, 4 * int64(b.N+1)}, {t.dattrs.p, t.hattrs.p, 4 * AttrWords * int64(b.Off[b.N])},
		{t.dstr.p, t.hstr.p, int64(b.StrBytes)}}
	grid := min(b.N, m.grid)
	outs := []auxOut{{t.hout.p, t.dout.p, 4 * int64(m.portWords) * int64(b.N)}}
	if err := m.c.auxQueue(st, copies, nil, m.fn, grid, m.block, m.smem(), params, outs, t.ev); err != nil {
		b.err = fmt.Errorf("gpu: cuda: matching: %v", err)
		return b.err
	}
	t.submitted = true
	return nil
}

// Wait waits for b's answers (Out).
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
	}
	return b.err
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
	out = out[:0]
	b, err := m.getBatch()
	if err != nil {
		return out, err
	}
	defer m.putBatch(b)
	for len(evs) > 0 {
		k := EncodeEvents(b, m.names, evs)
		if k == 0 {
			return out, fmt.Errorf("gpu: cuda: an event does not fit a batch")
		}
		if err := m.Submit(b); err != nil {
			return out, err
		}
		if err := m.Wait(b); err != nil {
			return out, err
		}
		if out, err = DecodePorts(out, b, m.ports); err != nil {
			return out, err
		}
		evs = evs[k:]
	}
	return out, nil
}

// KernelTime times iters launches of the kernel alone over b (submitted and
// waited for once) and returns the milliseconds per launch.
func (m *CUDAMatcher) KernelTime(b *EventBatch, iters int) (float64, error) {
	t, err := m.check(b)
	if err != nil || b.N == 0 {
		return 0, err
	}
	a := newCArgs(16)
	defer a.free()
	params := m.params(a, t, b)
	grid := min(b.N, m.grid)
	var ms float64
	err = m.c.do(func() error {
		ms, err = timeEvents(m.streams[0], iters, func(st cu.Stream) error {
			return m.fn.Launch(grid, 1, 1, m.block, 1, 1, m.smem(), st, params)
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
			for i := range m.streams {
				m.streams[i].Destroy()
			}
			m.streams = nil
			m.c.free(&m.img)
			m.c.free(&m.gcnt)
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
