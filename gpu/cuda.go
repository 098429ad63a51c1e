//go:build cuda

package gpu

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/kernels"
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
//
// Its code is in three files: cuda.go (this type, the owning goroutine, its
// start and Close), cuda_tables.go (device memory, image uploads, Load,
// Apply and the update scatter) and cuda_launch.go (kernel launches, the
// stream pool, the LPM lookups, kernel timing). Locks are taken in the
// order lmu, then smu, then mu, then pmu (see the fields).
type CUDA struct {
	rc     ResidentConfig // as NewCUDAConfig was given it
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
	memOps         bool // the lookup batches' completion flags work (waitFlag; probeFlags at start)
	smemBudget     int  // bytes of shared memory flow_lookup may stage into
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
	// res is the resident lookups' kernel and mailbox (resident_cuda.go;
	// nil: off: no ResidentConfig.Slots, GSWITCH_CUDA_RESIDENT unset).
	res *resident
	// rver counts the image loads and scatters (guarded by mu): a resident
	// block stages a table again when a request's version differs.
	rver uint64
	// dirty lists the tables Apply gave bubbles since the last flush
	// (guarded by pmu; may hold tables dropped since, with nothing pending).
	dirty []*cudaTable

	// Guarded by mu: the streams (rebuilt only by SetStreams) and the round
	// robin over them.
	streams []cu.Stream
	ustream cu.Stream // the update stream: bubble copies and scatters only
	rr      int
	// sstreams are the lookup slots' own streams (each slot submits on its
	// stream: concurrent slot lookups never queue behind one another).
	sstreams []cu.Stream

	// lmu orders the slice lookups (LookupLPM4, LookupLPM6, LookupFlow)
	// against SetStreams and Close (write lock): a lookup of up to
	// slotKeys keys holds the read lock and a slot of its own (slots,
	// guarded by smu), a bigger one the write lock and the pools of
	// pipeline batches (see lookupVia).
	lmu   sync.RWMutex
	pools map[poolKey][]*Batch
	smu   sync.Mutex
	slots map[poolKey][]*Batch // free lookup slots

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
func NewCUDA(ordinal int) (*CUDA, error) { return NewCUDAConfig(ordinal, ResidentConfig{}) }

// NewCUDAConfig is NewCUDA with resident lookups as rc says.
func NewCUDAConfig(ordinal int, rc ResidentConfig) (*CUDA, error) {
	c := &CUDA{rc: rc, work: make(chan func()), tables: make(map[TableID]*cudaTable),
		occ: make(map[cu.Function]int), pools: make(map[poolKey][]*Batch), slots: make(map[poolKey][]*Batch)}
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
	c.memOps = waitMode == waitFlag && probeFlags(c.streams[0])
	for i := range c.hstageEv {
		if c.hstageEv[i], err = cu.MakeEvent(cu.DisableTiming); err != nil {
			return fmt.Errorf("gpu: cuda: event: %v", err)
		}
	}
	c.device = fmt.Sprintf("%s (cc %d.%d, %d SMs, device %d, PTX %s, %s %s)", name, major, minor, sms, ordinal, which, fwhich, src)
	if slots, idle := cmp.Or(c.rc.Slots, residentSlots), cmp.Or(c.rc.Idle, residentIdle); slots > 0 {
		switch {
		case !c.memOps:
			c.device += ", resident lookups off: no completion flags"
		case slots > MaxResidentSlots || idle < time.Microsecond:
			c.device += fmt.Sprintf(", resident lookups off: %d slots, idle %v: want 1..%d slots and an idle time of 1µs or more", slots, idle, MaxResidentSlots)
		default:
			if c.res, err = c.newResident(slots, idle, c.smemBudget, smemMax(ordinal)); err != nil {
				c.device += ", resident lookups off: " + err.Error()
			} else {
				c.device += fmt.Sprintf(", resident lookups: %d slots, idle %v, %d bytes staged", slots, idle, c.res.smem)
			}
		}
	}
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

// Close frees every device buffer and ends the owning goroutine.
func (c *CUDA) Close() error {
	var err error
	c.once.Do(func() {
		// lmu before the hop, as SetStreams takes it: taken on the owning
		// goroutine it could wait for a SetStreams waiting for that goroutine.
		c.lmu.Lock()
		defer c.lmu.Unlock()
		err = c.do(func() error {
			c.res.stop()
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
			if c.res != nil {
				c.res.close()
			}
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
