//go:build cuda

package gpu

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/tables/bubble"
)

// The CUDA backend's device memory and tables (see cuda.go for the owning
// goroutine and the lock order): buffers, image uploads, Load, Apply and
// the update scatter that writes bubbles on the device.

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
		c.res.stop() // a free waits for the whole device: not for a resident kernel to go idle
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
	c.res.stop()     // else the synchronisation waits for it to go idle
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
		c.rver++
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
			c.rver++
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
	c.rver++
	c.hbusy[k], c.hseq[k], c.hk = true, c.sseq, k^1
	if c.res != nil {
		if err := c.res.noteScatter(cStream(st), c.sseq); err != nil {
			return err
		}
	}
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
