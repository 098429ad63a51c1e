//go:build cuda

package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/kernels"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
)

// PTXDirEnv names an environment variable that, when set, makes NewCUDA read
// the PTX from that directory (gamt_sm90.ptx, gamt_compute80.ptx) instead of
// the embedded copy (and flow_sm90.ptx, flow_compute80.ptx likewise): for
// testing freshly compiled kernels.
const PTXDirEnv = "GSWITCH_PTX_DIR"

// PTXForceEnv, set to "compute80", makes NewCUDA load the compute_80 PTX
// (JIT-compiled by the driver) even on a Hopper GPU: for testing that path.
const PTXForceEnv = "GSWITCH_PTX"

const blockSize = 256

// CUDA is the Backend on an NVIDIA GPU through the driver API
// (gorgonia.org/cu). One goroutine, locked to its OS thread, owns the CUDA
// context and does every device call; the methods send it work and wait.
// Lookups are pipelined over streams (SetStreams) through pinned staging; an
// update's scatter runs in the first stream and every other stream waits on
// an event recorded after it, so it runs before any lookup issued after
// Apply (see the package doc).
type CUDA struct {
	work   chan func()
	closed atomic.Bool
	once   sync.Once
	used   atomic.Int64
	device string

	// Owned by the goroutine.
	ctx            cu.CUContext
	mod            cu.Module
	fn4, fn6, scat cu.Function
	fmod           cu.Module   // flow.cu
	ffn            cu.Function // flow_lookup (widths 17 to 27)
	ffn8, ffn16    cu.Function // flow_lookup_w8, flow_lookup_w16 (widths up to 8, 9 to 16)
	fsplit, franks cu.Function // flow_lookup_split, flow_ranks
	maxGrid        int
	sms            int
	smemBudget     int // bytes of shared memory flow_lookup may stage into
	tables         map[TableID]*cudaTable
	occ            map[cu.Function]int // per kernel: the most blocks resident at once
	in, out        devBuf              // kernel timing
	chunk          int
	hstage         [2]hostBuf  // pinned (offset, value) staging, double-buffered, read by the scatter in place
	hstageEv       [2]cu.Event // recorded after the scatters that read hstage[i]
	hbusy          [2]bool     // hstageEv[i] recorded and maybe not yet fired
	hseq           [2]uint64   // the scatter (numbered by sseq) that last read hstage[i]
	hk             int         // the staging buffer the next scatter fills
	sseq           uint64      // scatters queued so far (guarded by mu)
	// doneSeq is the latest scatter known to be done: a batch submitted
	// after scatter s waited for it, so its Wait's return proves s done
	// (and saves a driver call per scatter on the staging buffer's event).
	doneSeq atomic.Uint64
	// dirty lists the tables Apply gave bubbles since the last flush
	// (guarded by pmu; may hold tables dropped since, with nothing pending).
	dirty []*cudaTable

	// Guarded by mu: the streams (rebuilt only by SetStreams) and the round
	// robin over them.
	streams []cu.Stream
	ustream cu.Stream // the update stream: bubble copies and scatters only
	rr      int

	// lmu serialises the slice lookups (LookupLPM4, LookupLPM6,
	// LookupFlow), which run through pools of pipeline batches.
	lmu   sync.Mutex
	pools map[poolKey][]*Batch

	// mu guards the tables map's writes (by the goroutine) and its reads by
	// Submit, which runs on the caller's goroutine, the bubble staging and
	// the streams; shut is set by Close. pmu guards every table's pending
	// writes and dirty, and is held with mu by the tables map's writers, so
	// that Apply reads the map under pmu alone (order: mu, then pmu).
	mu   sync.Mutex
	pmu  sync.Mutex
	shut bool
}

type cudaTable struct {
	kind   Kind
	layout *lpmLayout  // LPM kinds
	flay   *flowLayout // Flow
	img    devBuf      // all regions end to end
	desc   devBuf      // level descriptors, 3 words per level
	nl     int64
	ffn    cu.Function // Flow: the lookup kernel for the image's width
	smem   int         // Flow: the dynamic shared memory of a launch (staged parts)
	grid   int         // Flow: the most blocks resident at once with smem, 0: c.occ
	pend   pending     // bubbles applied but not yet scattered on the device (guarded by CUDA.pmu)
	// queued are chunks waiting for the next scatter ahead of pend, in
	// Apply order: big updates, ordered without the lock, and what pend
	// held when one was queued (guarded by CUDA.pmu).
	queued []chunk
	// big orders a big update into a chunk outside CUDA.pmu (its dirty
	// bits, all clear between two uses, are reused; guarded by bigMu).
	bigMu sync.Mutex
	big   pending
}

type devBuf struct {
	p cu.DevicePtr
	n int64 // bytes
}

// NewCUDA starts a backend on GPU ordinal. It returns an error (and nothing
// runs) when no device is usable; the caller then falls back to the CPU
// backend. Note that gorgonia.org/cu initialises the driver in its package
// init and exits the process if that fails: a cuda build is for hosts with
// the NVIDIA driver.
func NewCUDA(ordinal int) (*CUDA, error) {
	c := &CUDA{work: make(chan func()), tables: make(map[TableID]*cudaTable),
		occ: make(map[cu.Function]int), pools: make(map[poolKey][]*Batch)}
	started := make(chan error)
	go c.loop(ordinal, started)
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

func (c *CUDA) loop(ordinal int, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.start(ordinal); err != nil {
		if c.ctx != (cu.CUContext{}) {
			c.ctx.Destroy()
		}
		started <- err
		return
	}
	started <- nil
	for f := range c.work {
		f()
	}
}

func (c *CUDA) start(ordinal int) error {
	if err := driverInit(); err != nil {
		return err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return fmt.Errorf("gpu: cuda: %v", err)
	}
	if ordinal < 0 || ordinal >= n {
		return fmt.Errorf("gpu: cuda: device %d of %d", ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return fmt.Errorf("gpu: cuda: %v", err)
	}
	name, _ := dev.Name()
	major, err := dev.Attribute(cu.ComputeCapabilityMajor)
	if err != nil {
		return fmt.Errorf("gpu: cuda: %v", err)
	}
	minor, _ := dev.Attribute(cu.ComputeCapabilityMinor)
	sms, _ := dev.Attribute(cu.MultiprocessorCount)
	c.maxGrid = max(sms, 1) * 32
	c.sms = max(sms, 1)
	if c.ctx, err = dev.MakeContext(cu.SchedAuto); err != nil {
		return fmt.Errorf("gpu: cuda: context on %s: %v", name, err)
	}
	ptx, which := kernels.GAMTcompute80, "gamt_compute80.ptx"
	if major == 9 && os.Getenv(PTXForceEnv) != "compute80" {
		ptx, which = kernels.GAMTsm90, "gamt_sm90.ptx"
	}
	src := "embedded"
	if dir := os.Getenv(PTXDirEnv); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, which))
		if err != nil {
			return fmt.Errorf("gpu: cuda: %v", err)
		}
		ptx, src = string(b), filepath.Join(dir, which)
	}
	if c.mod, err = cu.LoadData(ptx); err != nil {
		return fmt.Errorf("gpu: cuda: loading %s (%s) on %s: %v", which, src, name, err)
	}
	fptx, fwhich := kernels.Flowcompute80, "flow_compute80.ptx"
	if major == 9 && os.Getenv(PTXForceEnv) != "compute80" {
		fptx, fwhich = kernels.Flowsm90, "flow_sm90.ptx"
	}
	if dir := os.Getenv(PTXDirEnv); dir != "" {
		b, err := os.ReadFile(filepath.Join(dir, fwhich))
		if err != nil {
			return fmt.Errorf("gpu: cuda: %v", err)
		}
		fptx = string(b)
	}
	if c.fmod, err = cu.LoadData(fptx); err != nil {
		return fmt.Errorf("gpu: cuda: loading %s (%s) on %s: %v", fwhich, src, name, err)
	}
	for _, f := range []struct {
		fn   *cu.Function
		name string
	}{{&c.ffn, "flow_lookup"}, {&c.fsplit, "flow_lookup_split"}, {&c.franks, "flow_ranks"},
		{&c.ffn8, "flow_lookup_w8"}, {&c.ffn16, "flow_lookup_w16"}} {
		if *f.fn, err = c.fmod.Function(f.name); err != nil {
			return fmt.Errorf("gpu: cuda: kernel %s: %v", f.name, err)
		}
	}
	for _, f := range []struct {
		fn   *cu.Function
		name string
	}{{&c.fn4, "gamt_lookup4"}, {&c.fn6, "gamt_lookup6"}, {&c.scat, "bubble_scatter"}} {
		if *f.fn, err = c.mod.Function(f.name); err != nil {
			return fmt.Errorf("gpu: cuda: kernel %s: %v", f.name, err)
		}
	}
	for _, fn := range []cu.Function{c.fn4, c.fn6, c.scat, c.ffn} {
		if per, err := fn.MaxActiveBlocksPerMultiProcessor(blockSize, 0); err == nil && per > 0 {
			c.occ[fn] = per * max(sms, 1)
		}
	}
	if err := c.setSmemBudget(ordinal); err != nil {
		return err
	}
	c.chunk = DefaultChunk
	if err := c.makeStreams(1); err != nil {
		return err
	}
	for i := range c.hstageEv {
		if c.hstageEv[i], err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return fmt.Errorf("gpu: cuda: event: %v", err)
		}
	}
	c.device = fmt.Sprintf("%s (cc %d.%d, %d SMs, device %d, PTX %s, %s %s)", name, major, minor, sms, ordinal, which, fwhich, src)
	return nil
}

// FlowSmemEnv names an environment variable that sets the bytes of shared
// memory flow_lookup may stage table parts into (0: none), for measuring the
// alternatives; by default DefaultFlowSmem, at most what the device allows
// a block.
const FlowSmemEnv = "GSWITCH_FLOW_SMEM"

// DefaultFlowSmem is the default staging budget of flow_lookup: what a
// block gets without opting in, less the kernel's static shared memory.
const DefaultFlowSmem = 48<<10 - 512

func (c *CUDA) setSmemBudget(ordinal int) error {
	c.smemBudget = DefaultFlowSmem
	if v := os.Getenv(FlowSmemEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("gpu: cuda: %s=%q: want a number of bytes", FlowSmemEnv, v)
		}
		c.smemBudget = n
	}
	c.smemBudget = max(0, min(c.smemBudget, smemMax(ordinal)-512))
	if c.smemBudget > 48<<10-512 {
		for _, fn := range []cu.Function{c.ffn, c.ffn8, c.ffn16} {
			if err := smemOptIn(fn, c.smemBudget); err != nil {
				return err
			}
		}
	}
	return nil
}

// flowFn returns the lookup kernel for images p words wide: the narrowest
// that takes p (the fewer registers, the more warps an SM keeps resident;
// the widths are those of the kernels in flow.cu).
func (c *CUDA) flowFn(p int) cu.Function {
	switch {
	case p <= 8:
		return c.ffn8
	case p <= 16:
		return c.ffn16
	}
	return c.ffn
}

// do runs f on the owning goroutine and returns its error.
func (c *CUDA) do(f func() error) (err error) {
	if c.closed.Load() {
		return ErrClosed
	}
	done := make(chan struct{})
	defer func() {
		if recover() != nil { // work closed under us
			err = ErrClosed
		}
	}()
	c.work <- func() { err = f(); close(done) }
	<-done
	return err
}

// Name returns "cuda".
func (c *CUDA) Name() string { return "cuda" }

// Device describes the GPU.
func (c *CUDA) Device() string { return c.device }

// MemoryUsed returns the device bytes held: images, descriptors, buffers.
func (c *CUDA) MemoryUsed() int64 { return c.used.Load() }

func (c *CUDA) alloc(n int64) (devBuf, error) {
	p, err := cu.MemAlloc(max(n, 4))
	if err != nil {
		return devBuf{}, fmt.Errorf("gpu: cuda: allocating %d bytes: %v", n, err)
	}
	c.used.Add(max(n, 4))
	return devBuf{p, max(n, 4)}, nil
}

func (c *CUDA) free(b *devBuf) {
	if b.n != 0 {
		cu.MemFree(b.p)
		c.used.Add(-b.n)
		*b = devBuf{}
	}
}

// grow makes b at least n bytes (its contents are not kept).
func (c *CUDA) grow(b *devBuf, n int64) error {
	if b.n >= n {
		return nil
	}
	c.free(b)
	nb, err := c.alloc(max(n, 2*b.n))
	*b = nb
	return err
}

func upload(dst cu.DevicePtr, words []uint32) error {
	if len(words) == 0 {
		return nil
	}
	return cu.MemcpyHtoD(dst, unsafe.Pointer(&words[0]), int64(4*len(words)))
}

// newDeviceImage uploads a checked image and its level descriptors.
func (c *CUDA) newDeviceImage(kind Kind, l *lpmLayout, im *bubble.Image) (*cudaTable, error) {
	if len(l.strides) > MaxDeviceLevels {
		return nil, fmt.Errorf("%w: %d levels", ErrTooManyLevel, len(l.strides))
	}
	t := &cudaTable{kind: kind, layout: l, nl: int64(len(l.strides))}
	return c.uploadImage(t, &l.regions, l.levelDesc(), im)
}

// newFlowImage uploads a checked flow image and its descriptor, with the
// parts flow_lookup stages into shared memory chosen within c.smemBudget.
func (c *CUDA) newFlowImage(l *flowLayout, im *bubble.Image) (*cudaTable, error) {
	stage, bytes := l.stagePlan(c.smemBudget)
	t := &cudaTable{kind: Flow, flay: l, ffn: c.flowFn(l.p), smem: bytes}
	if per, err := t.ffn.MaxActiveBlocksPerMultiProcessor(blockSize, int64(bytes)); err == nil && per > 0 {
		t.grid = per * c.sms
	}
	return c.uploadImage(t, &l.regions, l.desc(stage), im)
}

// uploadImage gives t an image buffer holding im's regions end to end, as
// laid out by l, and a descriptor buffer holding desc.
func (c *CUDA) uploadImage(t *cudaTable, l *regions, desc []uint32, im *bubble.Image) (*cudaTable, error) {
	var err error
	if t.img, err = c.alloc(4 * int64(l.total)); err != nil {
		return nil, err
	}
	if t.desc, err = c.alloc(4 * int64(len(desc))); err == nil {
		err = upload(t.desc.p, desc)
	}
	for r, w := range im.Words {
		if err != nil {
			break
		}
		err = upload(t.img.p+cu.DevicePtr(4*l.regionBase[r]), w)
	}
	if err != nil {
		c.free(&t.img)
		c.free(&t.desc)
		return nil, fmt.Errorf("gpu: cuda: uploading image: %v", err)
	}
	return t, nil
}

// checkedImage checks im as an image of kind and uploads it.
func (c *CUDA) checkedImage(kind Kind, im *bubble.Image) (func() (*cudaTable, error), error) {
	if kind == Flow {
		l, _, err := newFlowLayout(im)
		if err != nil {
			return nil, err
		}
		return func() (*cudaTable, error) { return c.newFlowImage(l, im) }, nil
	}
	l, _, err := newLPMLayout(kind, im)
	if err != nil {
		return nil, err
	}
	return func() (*cudaTable, error) { return c.newDeviceImage(kind, l, im) }, nil
}

// dropTable frees t's device buffers; its pending bubbles are dropped with
// it (whatever replaces it is a whole image). The caller holds c.mu and
// c.pmu.
func (c *CUDA) dropTable(t *cudaTable) {
	cu.Synchronize() // no kernel may still read it
	t.pend, t.queued = pending{}, nil
	c.free(&t.img)
	c.free(&t.desc)
}

// Load uploads im as table id, replacing any table of that id.
func (c *CUDA) Load(id TableID, kind Kind, im *bubble.Image) error {
	if im == nil {
		return fmt.Errorf("%w: nil image", ErrBadUpdate)
	}
	mk, err := c.checkedImage(kind, im)
	if err != nil {
		return err
	}
	return c.do(func() error {
		t, err := mk()
		if err != nil {
			return err
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.pmu.Lock()
		defer c.pmu.Unlock()
		if old := c.tables[id]; old != nil {
			c.dropTable(old)
		}
		c.tables[id] = t
		return nil
	})
}

// Apply brings table id up to date with u. A whole image goes to a new
// device buffer that replaces the old one once the device is idle (the only
// case that synchronizes). Bubbles are checked on the caller's goroutine and
// queued on the host, with no device call and no hop to the owning
// goroutine; the next device operation that may read a table (a lookup, a
// kernel timing) first scatters every table's queued bubbles: their (offset,
// value) pairs, the last write per word, are copied into one of two pinned
// staging buffers (the host fills one while the scatter of the other may
// still read it) and written by bubble_scatter, which reads them there in
// place, on the update stream, which every lookup stream then waits on. So
// every lookup issued after Apply returns sees the whole update.
//
// Apply takes only pmu, never the lock a Submit holds while it queues a
// batch. The checks, and for an update of at least bigUpdate bubbles its
// ordering into a chunk, run without any lock: a lookup submitted meanwhile
// neither waits for them nor does them (one IPv6 route change can rewrite
// 800K leaves).
func (c *CUDA) Apply(id TableID, u bubble.Update) error {
	if u.Full != nil {
		return c.do(func() error {
			t := c.tables[id]
			if t == nil {
				return fmt.Errorf("%w: %d", ErrNoTable, id)
			}
			mk, err := c.checkedImage(t.kind, u.Full)
			if err != nil {
				return err
			}
			nt, err := mk()
			if err != nil {
				return err
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			c.pmu.Lock()
			defer c.pmu.Unlock()
			c.dropTable(t)
			c.tables[id] = nt
			return nil
		})
	}
	for {
		c.pmu.Lock()
		t, err := c.tableLocked(id)
		c.pmu.Unlock()
		if err != nil {
			return err
		}
		if len(u.Bubbles) == 0 {
			return nil
		}
		// A table's generation, layout and region bases never change: a
		// new image is a new cudaTable.
		gen, base := t.gen()
		if u.Generation != gen {
			return fmt.Errorf("%w: bubbles of generation %d for an image of generation %d", ErrBadUpdate, u.Generation, gen)
		}
		words := uint64(0)
		if t.kind == Flow {
			words = t.flay.total
			err = t.flay.checkBubbles(u.Bubbles)
		} else {
			words = t.layout.total
			err = t.layout.checkBubbles(u.Bubbles)
		}
		if err != nil {
			return err
		}
		var big chunk
		if len(u.Bubbles) >= bigUpdate {
			t.bigMu.Lock()
			t.big.add(u.Bubbles, base, words)
			big = t.big.take(base, t.kind == Flow)
			t.bigMu.Unlock()
		}
		c.pmu.Lock()
		if c.tables[id] != t {
			// Replaced meanwhile (by a Load or a whole image): check again.
			c.pmu.Unlock()
			continue
		}
		if len(t.pend.off) == 0 && len(t.queued) == 0 {
			c.dirty = append(c.dirty, t)
		}
		if big.off == nil {
			t.pend.add(u.Bubbles, base, words)
		} else {
			if len(t.pend.off) > 0 {
				t.queued = append(t.queued, t.pend.take(base, t.kind == Flow))
			}
			t.queued = append(t.queued, big)
		}
		c.pmu.Unlock()
		return nil
	}
}

// flushLocked scatters every table's pending bubbles on the device (see
// Apply): run, with c.mu held, before any device work that reads a table.
// It holds c.pmu, which Apply takes, only to take the pending writes: an
// Apply never waits for a lookup's launches, nor a lookup for an Apply's
// checks.
func (c *CUDA) flushLocked() error {
	c.pmu.Lock()
	if len(c.dirty) == 0 {
		c.pmu.Unlock()
		return nil
	}
	type work struct {
		t      *cudaTable
		chunks []chunk
	}
	var todo []work
	for _, t := range c.dirty {
		if len(t.pend.off) == 0 && len(t.queued) == 0 {
			continue
		}
		chunks := t.queued
		if len(t.pend.off) > 0 {
			_, base := t.gen()
			chunks = append(chunks, t.pend.take(base, t.kind == Flow))
		}
		t.queued = nil
		todo = append(todo, work{t, chunks})
	}
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	c.pmu.Unlock()
	// No table can be dropped meanwhile: that takes c.mu.
	for _, w := range todo {
		if err := c.scatter(w.t, w.chunks); err != nil {
			return err
		}
	}
	return nil
}

// flushTables is flushLocked taking c.mu.
func (c *CUDA) flushTables() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked()
}

// scatter queues chunks of t's writes on the update stream: pinned
// staging, bubble_scatter reading the pairs in place (mapped pinned
// memory), a launch per run of a chunk (see chunk for the order), and the
// event every lookup stream waits on. Nothing here waits for the
// device but for the scatters that read the same pinned buffer two flushes
// ago (long done in practice).
func (c *CUDA) scatter(t *cudaTable, chunks []chunk) error {
	n := 0
	for _, ch := range chunks {
		n += len(ch.off)
	}
	k := c.hk
	if c.hbusy[k] && c.doneSeq.Load() < c.hseq[k] {
		if err := c.hstageEv[k].Synchronize(); err != nil {
			return fmt.Errorf("gpu: cuda: staging bubbles: %v", err)
		}
		c.hbusy[k] = false
	}
	if err := growHost(&c.hstage[k], int64(8*max(n, minStage))); err != nil {
		return err
	}
	// The offsets first, the values n words later.
	h := unsafe.Slice((*uint32)(c.hstage[k].p), 2*n)
	pos := 0
	for _, ch := range chunks {
		copy(h[pos:], ch.off)
		copy(h[n+pos:], ch.val)
		pos += len(ch.off)
	}
	// The scatter reads the pairs straight from the pinned buffer (mapped
	// into the device's address space): no copy that a DMA engine would
	// queue behind a lookup batch's big copy-in, which held every stream's
	// next batch back behind each update.
	st := c.ustream
	dh, err := hostDevPtr(c.hstage[k].p)
	if err != nil {
		return err
	}
	pos = 0
	for _, ch := range chunks {
		lo := 0
		for _, hi := range ch.ends {
			offs, vals := dh+cu.DevicePtr(4*(pos+lo)), dh+cu.DevicePtr(4*(n+pos+lo))
			if err := c.launchIn(st, c.scat, hi-lo, t.img.p, offs, vals); err != nil {
				return err
			}
			lo = hi
		}
		pos += len(ch.off)
	}
	// The buffer is refilled only after the scatters have read it, and
	// every lookup submitted from now on waits for them.
	if err := c.hstageEv[k].Record(st); err != nil {
		return fmt.Errorf("gpu: cuda: record: %v", err)
	}
	c.sseq++
	c.hbusy[k], c.hseq[k], c.hk = true, c.sseq, k^1
	return c.ordered(c.hstageEv[k])
}

// minStage is the bubbles a staging buffer holds at least: growing one
// frees pinned memory, which waits for the whole device.
const minStage = 1 << 17

// tableLocked returns table id; the caller holds c.mu or c.pmu.
func (c *CUDA) tableLocked(id TableID) (*cudaTable, error) {
	if c.shut || c.closed.Load() {
		return nil, ErrClosed
	}
	if t := c.tables[id]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("%w: %d", ErrNoTable, id)
}

// keyWidth is the words per key of the table's lookups.
func (t *cudaTable) keyWidth() int {
	if t.flay != nil {
		return t.flay.p
	}
	return keyWidth(t.kind, 0)
}

// gen returns the table's generation and region bases.
func (t *cudaTable) gen() (uint64, []uint32) {
	if t.flay != nil {
		return t.flay.gen, t.flay.regionBase
	}
	return t.layout.gen, t.layout.regionBase
}

// launchIn runs fn in stream st over n items with the given pointer arguments followed by
// the int n.
func (c *CUDA) launchIn(st cu.Stream, fn cu.Function, n int, args ...any) error {
	return c.launchShared(st, fn, n, 0, 0, args...)
}

// launchShared is launchIn with smem bytes of dynamic shared memory and at
// most grid blocks (0: the occupancy of fn without shared memory).
func (c *CUDA) launchShared(st cu.Stream, fn cu.Function, n, smem, grid int, args ...any) error {
	return c.launchItems(st, fn, n, smem, grid, append(args, int64(n))...)
}

// launchItems launches fn over items threads' worth of work (the grid:
// one thread per item, at most grid blocks, 0: fn's occupancy) with
// exactly the arguments given.
func (c *CUDA) launchItems(st cu.Stream, fn cu.Function, items, smem, grid int, args ...any) error {
	params := make([]unsafe.Pointer, 0, len(args))
	for _, a := range args {
		switch v := a.(type) {
		case cu.DevicePtr:
			params = append(params, unsafe.Pointer(&v))
		case int64:
			params = append(params, unsafe.Pointer(&v))
		default:
			panic("gpu: launch argument of an unexpected type")
		}
	}
	g := c.gridFor(fn, items)
	if grid > 0 {
		g = max(1, min((items+blockSize-1)/blockSize, grid))
	}
	if err := fn.Launch(g, 1, 1, blockSize, 1, 1, smem, st, params); err != nil {
		return fmt.Errorf("gpu: cuda: launch: %v", err)
	}
	return nil
}

func (c *CUDA) lookupTable(id TableID, kind Kind, n, nout int) (*cudaTable, error) {
	t := c.tables[id]
	if t == nil {
		return nil, fmt.Errorf("%w: %d", ErrNoTable, id)
	}
	if t.kind != kind {
		return nil, fmt.Errorf("%w: table %d is %v, lookup is %v", ErrKind, id, t.kind, kind)
	}
	if nout < n {
		return nil, ErrShortOut
	}
	return t, nil
}

// DefaultChunk is the most keys one pipeline batch of the slice lookups
// carries: a lookup call is cut into chunks of at most this many, spread
// over the streams.
const DefaultChunk = 1 << 20

// poolKey names a pool of pipeline batches: the kind and key width.
type poolKey struct {
	kind  Kind
	width int
}

// SetStreams sets how many streams the lookups are spread over (GAMT
// §4.4), round robin batch by batch, and the chunk the slice lookups cut
// their keys into (0: DefaultChunk); those run through two pipeline batches
// per stream, so that the copy-in, kernel and copy-out of consecutive chunks
// overlap each other and the host's copies into and out of pinned memory.
// Call it before submitting batches: it waits for the device.
func (c *CUDA) SetStreams(n, chunk int) error {
	if n < 1 || n > 64 {
		return fmt.Errorf("gpu: cuda: %d streams: want 1..64", n)
	}
	if chunk <= 0 {
		chunk = DefaultChunk
	}
	c.lmu.Lock()
	defer c.lmu.Unlock()
	return c.do(func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.freeStreams()
		c.chunk = chunk
		return c.makeStreams(n)
	})
}

// makeStreams runs on the owning goroutine with c.mu held.
func (c *CUDA) makeStreams(n int) error {
	c.streams = nil
	for i := 0; i < n; i++ {
		// Blocking streams: they also order themselves after the legacy
		// default stream, where the synchronous uploads run.
		s, err := cu.MakeStream(cu.DefaultStream)
		if err != nil {
			return fmt.Errorf("gpu: cuda: stream: %v", err)
		}
		c.streams = append(c.streams, s)
	}
	var err error
	if c.ustream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return fmt.Errorf("gpu: cuda: stream: %v", err)
	}
	return nil
}

// freeStreams runs on the owning goroutine with c.mu and c.lmu held.
func (c *CUDA) freeStreams() {
	if len(c.streams) == 0 {
		return
	}
	cu.Synchronize()
	for k, pool := range c.pools {
		for _, b := range pool {
			b.impl.(*cudaBatch).release()
		}
		delete(c.pools, k)
	}
	for i := range c.streams {
		c.streams[i].Destroy()
	}
	c.ustream.Destroy()
	c.streams = nil
}

// ordered makes every lookup stream wait for ev, just recorded in the
// update stream after an Apply's scatter: the interface's ordering
// promise. The update stream holds no lookups, so a scatter starts at once
// instead of queueing behind a lookup batch, and only batches submitted
// after it wait for it.
func (c *CUDA) ordered(ev cu.Event) error {
	for _, s := range c.streams {
		if err := s.Wait(ev, 0); err != nil {
			return fmt.Errorf("gpu: cuda: stream wait: %v", err)
		}
	}
	return nil
}

// pcopy copies src into dst, big copies split over goroutines: one core's
// memcpy into and out of the pinned staging falls well short of PCIe.
func pcopy(dst, src []byte) {
	const part = 1 << 20
	n := min(len(dst), len(src))
	if n < 2*part {
		copy(dst, src)
		return
	}
	k := min(8, n/part)
	var wg sync.WaitGroup
	for i := 0; i < k; i++ {
		lo, hi := i*n/k, (i+1)*n/k
		wg.Add(1)
		go func() {
			defer wg.Done()
			copy(dst[lo:hi], src[lo:hi])
		}()
	}
	wg.Wait()
}

// pool returns the pipeline batches for keys of kind and width: two per
// stream, of c.chunk keys each, made on first use. The caller holds c.lmu.
func (c *CUDA) pool(kind Kind, width int) ([]*Batch, error) {
	k := poolKey{kind, width}
	if p := c.pools[k]; p != nil {
		return p, nil
	}
	var p []*Batch
	err := c.do(func() error {
		c.mu.Lock()
		n := 2 * len(c.streams)
		c.mu.Unlock()
		for i := 0; i < n; i++ {
			b, err := c.newBatch(kind, width, c.chunk)
			if err != nil {
				for _, b := range p {
					b.impl.(*cudaBatch).release()
				}
				return err
			}
			p = append(p, b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	c.pools[k] = p
	return p, nil
}

// lookupVia runs a slice lookup of n keys through the pipeline batches of
// kind and width: chunk by chunk, fill copies a chunk's keys into a batch,
// the batch is submitted, and drain copies its results out once it is done;
// a batch is refilled only after its previous chunk was drained.
func (c *CUDA) lookupVia(id TableID, kind Kind, width, n int, fill, drain func(b *Batch, lo int)) error {
	c.lmu.Lock()
	defer c.lmu.Unlock()
	pool, err := c.pool(kind, width)
	if err != nil {
		return err
	}
	los := make([]int, len(pool)) // the chunk each batch holds, -1: none
	for i := range los {
		los[i] = -1
	}
	retire := func(i int) error {
		b := pool[i]
		if los[i] < 0 {
			return nil
		}
		lo := los[i]
		los[i] = -1
		if err := b.Wait(); err != nil {
			return err
		}
		drain(b, lo)
		return nil
	}
	k := 0
	for lo := 0; lo < n && err == nil; lo += c.chunk {
		i := k % len(pool)
		k++
		if err = retire(i); err != nil {
			break
		}
		b := pool[i]
		b.N = min(c.chunk, n-lo)
		fill(b, lo)
		if err = c.Submit(id, b); err != nil {
			break
		}
		los[i] = lo
	}
	for j := range pool { // in submission order, also after an error
		i := (k + j) % len(pool)
		if e := retire(i); err == nil {
			err = e
		}
	}
	return err
}

// LookupLPM4 looks up IPv4 addresses in table id on the GPU.
func (c *CUDA) LookupLPM4(id TableID, addrs []uint32, out []uint32) error {
	if len(out) < len(addrs) {
		return ErrShortOut
	}
	return c.lookupVia(id, LPM4, 1, len(addrs),
		func(b *Batch, lo int) { pcopy(wordBytes(b.Keys[:b.N]), wordBytes(addrs[lo:lo+b.N])) },
		func(b *Batch, lo int) { pcopy(wordBytes(out[lo:lo+b.N]), wordBytes(b.Out[:b.N])) })
}

// LookupLPM6 looks up IPv6 addresses in table id on the GPU.
func (c *CUDA) LookupLPM6(id TableID, addrs []lpm.Addr6, out []uint32) error {
	if len(out) < len(addrs) {
		return ErrShortOut
	}
	src := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(addrs))), 4*len(addrs))
	return c.lookupVia(id, LPM6, 4, len(addrs),
		func(b *Batch, lo int) { pcopy(wordBytes(b.Keys[:4*b.N]), wordBytes(src[4*lo:4*(lo+b.N)])) },
		func(b *Batch, lo int) { pcopy(wordBytes(out[lo:lo+b.N]), wordBytes(b.Out[:b.N])) })
}

// KernelTimeLPM4 uploads addrs once, then times iters launches of the IPv4
// kernel over all of them with events (no copies): milliseconds per launch.
func (c *CUDA) KernelTimeLPM4(id TableID, addrs []uint32, iters int) (float64, error) {
	if len(addrs) == 0 {
		return 0, nil
	}
	return c.kernelTime(id, LPM4, c.fn4, unsafe.Pointer(&addrs[0]), 4, len(addrs), iters)
}

// KernelTimeLPM6 is KernelTimeLPM4 for IPv6.
func (c *CUDA) KernelTimeLPM6(id TableID, addrs []lpm.Addr6, iters int) (float64, error) {
	if len(addrs) == 0 {
		return 0, nil
	}
	return c.kernelTime(id, LPM6, c.fn6, unsafe.Pointer(&addrs[0]), 16, len(addrs), iters)
}

func (c *CUDA) kernelTime(id TableID, kind Kind, fn cu.Function, in unsafe.Pointer, width int64, n, iters int) (ms float64, err error) {
	iters = max(iters, 1)
	err = c.do(func() error {
		t, err := c.lookupTable(id, kind, n, n)
		if err != nil {
			return err
		}
		if err := c.flushTables(); err != nil {
			return err
		}
		if err := c.grow(&c.in, width*int64(n)); err != nil {
			return err
		}
		if err := c.grow(&c.out, int64(4*n)); err != nil {
			return err
		}
		if err := cu.MemcpyHtoD(c.in.p, in, width*int64(n)); err != nil {
			return err
		}
		ms, err = c.timeLaunches(iters, func(st cu.Stream) error {
			// (img, desc, nl, keys, out, n, stride = n): launchIn appends the last.
			return c.launchIn(st, fn, n, t.img.p, t.desc.p, t.nl, c.in.p, c.out.p, int64(n))
		})
		return err
	})
	return ms, err
}

// timeLaunches times iters calls of launch on the first stream with CUDA
// events, after one untimed warm-up call, and returns the milliseconds per
// call. It runs on the goroutine that owns the context.
func (c *CUDA) timeLaunches(iters int, launch func(st cu.Stream) error) (float64, error) {
	start, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, err
	}
	defer cu.DestroyEvent(&start)
	stop, err := cu.MakeEvent(cu.DefaultEvent)
	if err != nil {
		return 0, err
	}
	defer cu.DestroyEvent(&stop)
	st := c.streams[0]
	if err := launch(st); err != nil { // warm-up
		return 0, err
	}
	start.Record(st)
	for i := 0; i < iters; i++ {
		if err := launch(st); err != nil {
			return 0, err
		}
	}
	stop.Record(st)
	if err := stop.Synchronize(); err != nil {
		return 0, err
	}
	total, err := start.Elapsed(stop)
	return total / float64(iters), err
}

// Close frees every device buffer and ends the owning goroutine.
func (c *CUDA) Close() error {
	var err error
	c.once.Do(func() {
		// lmu before the hop, as SetStreams takes it: taken on the owning
		// goroutine it could wait for a SetStreams waiting for that goroutine.
		c.lmu.Lock()
		defer c.lmu.Unlock()
		err = c.do(func() error {
			c.mu.Lock()
			c.pmu.Lock()
			for id, t := range c.tables {
				c.dropTable(t)
				delete(c.tables, id)
			}
			c.shut = true
			c.pmu.Unlock()
			c.freeStreams()
			c.mu.Unlock()
			for i := range c.hstage {
				c.hstage[i].free()
				cu.DestroyEvent(&c.hstageEv[i])
			}
			c.free(&c.in)
			c.free(&c.out)
			c.fmod.Unload()
			c.mod.Unload()
			return c.ctx.Destroy()
		})
		c.closed.Store(true)
		close(c.work)
	})
	return err
}

var _ Backend = (*CUDA)(nil)
