//go:build cuda

package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
// the embedded copy: for testing freshly compiled kernels.
const PTXDirEnv = "GSWITCH_PTX_DIR"

// PTXForceEnv, set to "compute80", makes NewCUDA load the compute_80 PTX
// (JIT-compiled by the driver) even on a Hopper GPU: for testing that path.
const PTXForceEnv = "GSWITCH_PTX"

const blockSize = 256

// CUDA is the Backend on an NVIDIA GPU through the driver API
// (gorgonia.org/cu). One goroutine, locked to its OS thread, owns the CUDA
// context and does every device call; the methods send it work and wait.
// All device work goes to one stream (the context's default stream), so an
// update's scatter kernel runs before any lookup issued after Apply.
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
	maxGrid        int
	tables         map[TableID]*cudaTable
	in, out, stage devBuf
}

type cudaTable struct {
	kind   Kind
	layout *lpmLayout
	img    devBuf // all regions end to end
	desc   devBuf // level descriptors, 3 words per level
	nl     int64
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
	c := &CUDA{work: make(chan func()), tables: make(map[TableID]*cudaTable)}
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
	for _, f := range []struct {
		fn   *cu.Function
		name string
	}{{&c.fn4, "gamt_lookup4"}, {&c.fn6, "gamt_lookup6"}, {&c.scat, "bubble_scatter"}} {
		if *f.fn, err = c.mod.Function(f.name); err != nil {
			return fmt.Errorf("gpu: cuda: kernel %s: %v", f.name, err)
		}
	}
	c.device = fmt.Sprintf("%s (cc %d.%d, %d SMs, device %d, PTX %s %s)", name, major, minor, sms, ordinal, which, src)
	return nil
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
	var err error
	if t.img, err = c.alloc(4 * int64(l.total)); err != nil {
		return nil, err
	}
	if t.desc, err = c.alloc(4 * 3 * t.nl); err == nil {
		err = upload(t.desc.p, l.levelDesc())
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

func (c *CUDA) dropTable(t *cudaTable) {
	cu.Synchronize() // no kernel may still read it
	c.free(&t.img)
	c.free(&t.desc)
}

// Load uploads im as table id, replacing any table of that id.
func (c *CUDA) Load(id TableID, kind Kind, im *bubble.Image) error {
	if im == nil {
		return fmt.Errorf("%w: nil image", ErrBadUpdate)
	}
	l, _, err := newLPMLayout(kind, im)
	if err != nil {
		return err
	}
	return c.do(func() error {
		t, err := c.newDeviceImage(kind, l, im)
		if err != nil {
			return err
		}
		if old := c.tables[id]; old != nil {
			c.dropTable(old)
		}
		c.tables[id] = t
		return nil
	})
}

// Apply brings table id up to date with u: a whole image goes to a new
// device buffer that replaces the old one; bubbles are checked on the host,
// copied to a staging buffer and written by bubble_scatter in the stream
// every later lookup runs in.
func (c *CUDA) Apply(id TableID, u bubble.Update) error {
	return c.do(func() error {
		t := c.tables[id]
		if t == nil {
			return fmt.Errorf("%w: %d", ErrNoTable, id)
		}
		if u.Full != nil {
			l, _, err := newLPMLayout(t.kind, u.Full)
			if err != nil {
				return err
			}
			nt, err := c.newDeviceImage(t.kind, l, u.Full)
			if err != nil {
				return err
			}
			c.dropTable(t)
			c.tables[id] = nt
			return nil
		}
		if len(u.Bubbles) == 0 {
			return nil
		}
		if u.Generation != t.layout.gen {
			return fmt.Errorf("%w: bubbles of generation %d for an image of generation %d", ErrBadUpdate, u.Generation, t.layout.gen)
		}
		if err := t.layout.checkBubbles(u.Bubbles); err != nil {
			return err
		}
		n := len(u.Bubbles)
		host := make([]uint32, 2*n)
		for i, b := range u.Bubbles {
			host[i] = t.layout.regionBase[b.Region] + b.Offset
			host[n+i] = b.Value
		}
		if err := c.grow(&c.stage, int64(8*n)); err != nil {
			return err
		}
		if err := upload(c.stage.p, host); err != nil {
			return fmt.Errorf("gpu: cuda: staging bubbles: %v", err)
		}
		return c.launch(c.scat, n, t.img.p, c.stage.p, c.stage.p+cu.DevicePtr(4*n))
	})
}

// launch runs fn over n items with the given pointer arguments followed by
// the int n.
func (c *CUDA) launch(fn cu.Function, n int, args ...any) error {
	params := make([]unsafe.Pointer, 0, len(args)+1)
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
	nn := int64(n)
	params = append(params, unsafe.Pointer(&nn))
	grid := min((n+blockSize-1)/blockSize, c.maxGrid)
	if err := fn.Launch(grid, 1, 1, blockSize, 1, 1, 0, cu.Stream{}, params); err != nil {
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

// lookup copies inBytes from in to the device, runs fn and copies n results
// back into out.
func (c *CUDA) lookup(fn cu.Function, t *cudaTable, in unsafe.Pointer, inBytes int64, out []uint32, n int) error {
	if err := c.grow(&c.in, inBytes); err != nil {
		return err
	}
	if err := c.grow(&c.out, int64(4*n)); err != nil {
		return err
	}
	if err := cu.MemcpyHtoD(c.in.p, in, inBytes); err != nil {
		return fmt.Errorf("gpu: cuda: copy in: %v", err)
	}
	if err := c.launch(fn, n, t.img.p, t.desc.p, t.nl, c.in.p, c.out.p); err != nil {
		return err
	}
	if err := cu.MemcpyDtoH(unsafe.Pointer(&out[0]), c.out.p, int64(4*n)); err != nil {
		return fmt.Errorf("gpu: cuda: copy out: %v", err)
	}
	return nil
}

// LookupLPM4 looks up IPv4 addresses in table id on the GPU.
func (c *CUDA) LookupLPM4(id TableID, addrs []uint32, out []uint32) error {
	return c.do(func() error {
		t, err := c.lookupTable(id, LPM4, len(addrs), len(out))
		if err != nil || len(addrs) == 0 {
			return err
		}
		return c.lookup(c.fn4, t, unsafe.Pointer(&addrs[0]), int64(4*len(addrs)), out, len(addrs))
	})
}

// LookupLPM6 looks up IPv6 addresses in table id on the GPU.
func (c *CUDA) LookupLPM6(id TableID, addrs []lpm.Addr6, out []uint32) error {
	return c.do(func() error {
		t, err := c.lookupTable(id, LPM6, len(addrs), len(out))
		if err != nil || len(addrs) == 0 {
			return err
		}
		return c.lookup(c.fn6, t, unsafe.Pointer(&addrs[0]), int64(16*len(addrs)), out, len(addrs))
	})
}

// kernelTime4 uploads addrs once, then times iters launches of the IPv4
// kernel alone with events; it returns milliseconds per launch. For
// benchmarks and tests.
func (c *CUDA) kernelTime4(id TableID, addrs []uint32, iters int) (ms float64, err error) {
	err = c.do(func() error {
		t, err := c.lookupTable(id, LPM4, len(addrs), len(addrs))
		if err != nil || len(addrs) == 0 {
			return err
		}
		n := len(addrs)
		if err := c.grow(&c.in, int64(4*n)); err != nil {
			return err
		}
		if err := c.grow(&c.out, int64(4*n)); err != nil {
			return err
		}
		if err := cu.MemcpyHtoD(c.in.p, unsafe.Pointer(&addrs[0]), int64(4*n)); err != nil {
			return err
		}
		start, err := cu.MakeEvent(cu.DefaultEvent)
		if err != nil {
			return err
		}
		defer cu.DestroyEvent(&start)
		stop, err := cu.MakeEvent(cu.DefaultEvent)
		if err != nil {
			return err
		}
		defer cu.DestroyEvent(&stop)
		if err := c.launch(c.fn4, n, t.img.p, t.desc.p, t.nl, c.in.p, c.out.p); err != nil { // warm-up
			return err
		}
		start.Record(cu.Stream{})
		for i := 0; i < iters; i++ {
			if err := c.launch(c.fn4, n, t.img.p, t.desc.p, t.nl, c.in.p, c.out.p); err != nil {
				return err
			}
		}
		stop.Record(cu.Stream{})
		if err := stop.Synchronize(); err != nil {
			return err
		}
		total, err := start.Elapsed(stop)
		ms = total / float64(iters)
		return err
	})
	return ms, err
}

// Close frees every device buffer and ends the owning goroutine.
func (c *CUDA) Close() error {
	var err error
	c.once.Do(func() {
		err = c.do(func() error {
			for id, t := range c.tables {
				c.dropTable(t)
				delete(c.tables, id)
			}
			c.free(&c.in)
			c.free(&c.out)
			c.free(&c.stage)
			c.mod.Unload()
			return c.ctx.Destroy()
		})
		c.closed.Store(true)
		close(c.work)
	})
	return err
}

var _ Backend = (*CUDA)(nil)
