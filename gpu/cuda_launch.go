//go:build cuda

package gpu

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/tables/lpm"
)

// The CUDA backend's launches (see cuda.go for the owning goroutine and the
// lock order): kernel launches, the stream pool and its pinned batches, the
// LPM lookups and the kernel timings.

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
	for k, free := range c.slots { // lmu held: none is taken
		for _, b := range free {
			b.impl.(*cudaBatch).release()
		}
		delete(c.slots, k)
	}
	for i := range c.sstreams {
		c.sstreams[i].Destroy()
	}
	c.sstreams = nil
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
	for _, s := range slices.Concat(c.streams, c.sstreams) {
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

// slotKeys is the most keys a lookup slot holds (see lookupVia).
const slotKeys = 1 << 15

// How a caller waits for its lookup batch on the device. The default is
// flag; GSWITCH_CUDA_WAIT=yield|spin|block chooses another, for
// comparisons on the same machine.
//
//   - flag: the batch's stream writes a sequence number into a word of
//     pinned host memory once the results are in (cuStreamWriteValue32,
//     after the copy-out), and the caller reads that word, yielding its
//     processor to the other goroutines between reads (runtime.Gosched):
//     no cgo call and no driver call per poll; after yieldFor it sleeps on
//     the batch's event as block does (which also reports a failed batch).
//     A device that refuses stream memory operations (CUDA.memOps, tried
//     once at start) gets yield instead.
//   - yield: the caller polls the batch's event (cuEventQuery, a cgo call
//     and a driver call each, about 2.7 µs of CPU under load on the H200
//     machine: 2.1 s of a 12 s forwarding run's profile, 24 µs a shared
//     batch) and yields between polls; after yieldFor it sleeps as block.
//   - spin: cuEventSynchronize on a plain event; the context is SchedAuto,
//     which spins with one context on a many-core host: the waiting
//     thread holds a core for the lookup's whole time, however many
//     lookups are in flight.
//   - block: the event is blocking-sync (CU_EVENT_BLOCKING_SYNC); the
//     caller sleeps in the driver until the device's interrupt wakes it
//     (35 µs more per lookup than spin on an H200).
//
// On 2026-11-26 (H200 machine, gswitchd on 4 cores, 131,072 rules in 512
// classes, 8 pairs; three rounds each) the lossless rates were 2.0, 2.0
// and 2.0 Mframes/s with spin, 2.75, 1.5 and 2.5 with block, 2.5, 3.0 and
// 2.75 with yield, against the plain forwarder's 3.0 in every round.
type cudaWaitMode int

const (
	waitFlag cudaWaitMode = iota
	waitYield
	waitSpin
	waitBlock
)

// yieldFor is how long the yield mode polls before it sleeps.
const yieldFor = 200 * time.Microsecond

// pollEvery is the least time between two polls of the yield mode:
// GSWITCH_CUDA_POLL_US microseconds (for comparisons), default 0 (every
// time the waiter runs).
var pollEvery = func() time.Duration {
	us, err := strconv.Atoi(os.Getenv("GSWITCH_CUDA_POLL_US"))
	if err != nil || us < 0 || us > 1000 {
		return 0
	}
	return time.Duration(us) * time.Microsecond
}()

var waitMode = func() cudaWaitMode {
	switch os.Getenv("GSWITCH_CUDA_WAIT") {
	case "block":
		return waitBlock
	case "spin":
		return waitSpin
	case "yield":
		return waitYield
	}
	return waitFlag
}()

// zeroCopyMax is the most keys of a flow lookup batch that the kernel
// reads and answers in place, in the batch's page-locked host memory
// mapped into the device, instead of copied in and out: two driver calls
// fewer a batch (gs_submit queues the launch, the flag and the event
// only), which is most of a small lookup's host time. The kernels read
// each key word once and write each result once, so the device crosses
// PCIe for as many bytes either way; a large batch keeps the copies, which
// the copy engines move while other batches' kernels run. On an H200
// (2026-11-26) eight concurrent lookups of 256 keys took 77–92 µs at the
// p50 and 327–454 µs at the p99 in place, against 117–131 and 585–707 µs
// copied. GSWITCH_CUDA_ZEROCOPY=off (never) or on (every batch) for
// comparisons.
var zeroCopyMax = func() int {
	switch os.Getenv("GSWITCH_CUDA_ZEROCOPY") {
	case "off":
		return 0
	case "on":
		return math.MaxInt
	}
	return 4096
}()

// lookupVia runs a slice lookup of n keys: fill copies keys [lo, lo+b.N)
// into a batch, the batch is submitted, and drain copies its results out
// once it is done.
//
// A lookup of at most slotKeys keys (and at most a chunk: every shared
// batch of a Coalescer) runs in one lookup slot, a batch of its own taken
// from a free list, under lmu's read lock: lookups of several callers (a
// Coalescer's batches in flight, one per leader) are on the device at once,
// each slot on a stream of its own, each caller waiting for its own batch's
// event. A slot is made on first need, so there are as many as lookups ran
// at once at most, and kept until SetStreams or Close. (Until 2026-11-26
// the slots took the streams in turn, and gswitchd ran one stream: eight
// concurrent lookups of 256 keys waited 560 µs each, against 75 µs alone,
// on an H200.)
//
// A bigger lookup is cut into chunks through the pipeline batches of kind
// and width (two per stream), under lmu's write lock: chunk by chunk, a
// batch is refilled only after its previous chunk was drained.
//
// (Before 2026-11-26 every lookup took lmu exclusively for its whole
// submit and wait: a Coalescer's batches, however many were in flight,
// reached the device one at a time.)
func (c *CUDA) lookupVia(id TableID, kind Kind, width, n int, fill, drain func(b *Batch, lo int)) error {
	t0 := time.Now()
	c.lmu.RLock()
	if n <= min(c.chunk, slotKeys) {
		defer c.lmu.RUnlock()
		b, err := c.slot(kind, width)
		backendStages.Observe(StageSlot, time.Since(t0))
		if err != nil {
			return err
		}
		defer c.putSlot(kind, width, b)
		b.N = n
		fill(b, 0)
		if err := c.Submit(id, b); err != nil {
			return err
		}
		if err := b.Wait(); err != nil {
			return err
		}
		drain(b, 0)
		return nil
	}
	c.lmu.RUnlock()
	c.lmu.Lock()
	defer c.lmu.Unlock()
	backendStages.Observe(StageSlot, time.Since(t0))
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

// slot takes a lookup slot of kind and width (slotKeys keys) from the free
// list, or makes one. The caller holds lmu (the read lock); smu is taken
// inside it (order: lmu, smu, then mu on the owning goroutine).
func (c *CUDA) slot(kind Kind, width int) (*Batch, error) {
	k := poolKey{kind, width}
	c.smu.Lock()
	if free := c.slots[k]; len(free) > 0 {
		b := free[len(free)-1]
		c.slots[k] = free[:len(free)-1]
		c.smu.Unlock()
		return b, nil
	}
	c.smu.Unlock()
	var b *Batch
	err := c.do(func() error {
		var err error
		if b, err = c.newBatch(kind, width, slotKeys); err != nil {
			return err
		}
		// The slot's own stream, ordered after the scatters already
		// queued (an event never recorded is complete).
		st, err := cu.MakeStream(cu.DefaultStream)
		if err != nil {
			b.impl.(*cudaBatch).release()
			return fmt.Errorf("gpu: cuda: stream: %v", err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, ev := range c.hstageEv {
			if err := st.Wait(ev, 0); err != nil {
				st.Destroy()
				b.impl.(*cudaBatch).release()
				return fmt.Errorf("gpu: cuda: stream wait: %v", err)
			}
		}
		b.impl.(*cudaBatch).st = st
		c.sstreams = append(c.sstreams, st)
		return nil
	})
	return b, err
}

// putSlot gives b back to the free list (lmu's read lock held).
func (c *CUDA) putSlot(kind Kind, width int, b *Batch) {
	k := poolKey{kind, width}
	c.smu.Lock()
	c.slots[k] = append(c.slots[k], b)
	c.smu.Unlock()
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
