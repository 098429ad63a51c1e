//go:build cuda

package gpu

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/kernels"
	"github.com/gswitch/gswitch/tables/filter"
)

// CUDAFilter is gPF filtering on the GPU: a filter set's layout and walk
// index in device memory (their word arrays end to end) and three kernels:
// gpf_walk (the default: each filter's control-flow form, walked for the
// packets its index entries list it under, a warp's rows staged in shared
// memory where they are at most walkStageMax bytes, the (packet, filter)
// pairs queued per warp and walked 32 at a time), gpf_walk_v1 (its earlier
// form, to compare: rows read in device memory, each field's pairs walked
// at once) and gpf_filter (the three stages, a thread
// per packet keeping its criteria and sub-predicate values in shared
// memory when a block of at least one warp fits, else in a device
// scratch); SetFilterKernel chooses.
// Batches (PacketBatch, reduced packets in page-locked rows) are queued
// round robin over its streams from the caller's goroutine: rows, lengths
// in; the batch's counters zeroed; the kernel; counters (and bitmaps) out.
type CUDAFilter struct {
	c      *CUDA
	mod    cu.Module
	fn     cu.Function
	fnWalk cu.Function
	fnWv1  cu.Function
	wgrid  int // gpf_walk's grid
	wgrid1 int // gpf_walk_v1's
	wstage int // gpf_walk's stage argument: a staged row's words apart (0: rows read in device memory)
	wsmem  int // gpf_walk's dynamic shared memory
	wscnt  int // gpf_walk's scnt argument: filters counted in shared memory (0: none)
	wix    *WalkIndex
	ptx    string
	l      *filter.Layout
	maxRow int
	img    devBuf
	// word offsets in img of Criteria, Exprs, Nodes, Roots, CFGIndex,
	// CFGNodes, the criteria's order, and the walk index's Unindexed,
	// Fields, Table, IDs, DedupOff, Dedup, Present (one per array
	// uploaded)
	base    []int64
	nc, nn  int
	nf      int
	nvals   int
	block   int
	grid    int
	smem    int      // dynamic shared memory (0: gvals)
	gvals   []devBuf // per stream: the values' scratch when smem is 0 (a stream's kernels run one at a time)
	streams []cu.Stream
	rr      atomic.Uint32
	once    sync.Once
}

type packetTwin struct {
	hdata, hcap, hwire, hbits, hcnt, hbytes hostBuf
	ddata, dcap, dwire, dbits, dcnt, dbytes devBuf
	ev                                      cu.Event
	submitted                               bool
}

// PacketFilter loads the filter kernel and p's layout; batches go over
// streams streams (1..16); maxRow is the row size of sets that need whole
// packets (0: 2048).
func (c *CUDA) PacketFilter(p *filter.Program, streams, maxRow int) (*CUDAFilter, error) {
	if streams < 1 || streams > 16 {
		return nil, fmt.Errorf("gpu: cuda: filtering over %d streams: want 1..16", streams)
	}
	if maxRow <= 0 {
		maxRow = 2048
	}
	l := p.Layout()
	f := &CUDAFilter{c: c, l: l, maxRow: maxRow, nc: int(l.Header[filter.HdrCriteria]), nn: int(l.Header[filter.HdrNodes]),
		nf: int(l.Header[filter.HdrFilters])}
	f.nvals = max(1, f.nc+f.nn)
	err := c.do(func() error {
		var err error
		if f.mod, f.ptx, err = c.loadAux("filter", kernels.Filtersm90, kernels.Filtercompute80); err != nil {
			return err
		}
		if f.fn, err = f.mod.Function("gpf_filter"); err != nil {
			return fmt.Errorf("gpu: cuda: kernel gpf_filter: %v", err)
		}
		if f.fnWalk, err = f.mod.Function("gpf_walk"); err != nil {
			return fmt.Errorf("gpu: cuda: kernel gpf_walk: %v", err)
		}
		if f.fnWv1, err = f.mod.Function("gpf_walk_v1"); err != nil {
			return fmt.Errorf("gpu: cuda: kernel gpf_walk_v1: %v", err)
		}
		per, err := f.fnWv1.MaxActiveBlocksPerMultiProcessor(walkBlock, 0)
		if err != nil || per < 1 {
			per = 1
		}
		f.wgrid1 = per * c.sms
		dev, err := cu.CurrentDevice()
		if err != nil {
			return err
		}
		smax := max(smemMax(int(dev)), 48<<10)
		if filterSmemLimit > 0 {
			smax = filterSmemLimit
		}
		f.wix = BuildWalkIndex(l)
		if f.nf >= 1<<27 {
			return fmt.Errorf("gpu: cuda: %d filters: gpf_walk takes fewer than %d", f.nf, 1<<27)
		}
		f.wstage, f.wscnt, f.wsmem = walkShared(l, f.wix, maxRow, smax)
		per, err = f.fnWalk.MaxActiveBlocksPerMultiProcessor(walkBlock, int64(f.wsmem))
		if err != nil || per < 1 {
			per = 1
		}
		f.wgrid = per * c.sms
		// A block of 32..128 threads with its values in shared memory.
		f.block = 128
		for f.block > 32 && f.block*f.nvals > smax {
			f.block /= 2
		}
		if f.block*f.nvals <= smax {
			f.smem = f.block * f.nvals
			if f.smem > 48<<10 {
				if err := smemOptIn(f.fn, f.smem); err != nil {
					return err
				}
			}
			per, err := f.fn.MaxActiveBlocksPerMultiProcessor(f.block, int64(f.smem))
			if err != nil || per < 1 {
				per = 1
			}
			f.grid = per * c.sms
		} else {
			f.block, f.grid = 128, 2*c.sms
			for i := 0; i < streams; i++ {
				g, err := c.alloc(int64(f.nvals) * int64(f.block*f.grid))
				if err != nil {
					return err
				}
				f.gvals = append(f.gvals, g)
			}
		}
		wx := f.wix
		words := [][]uint32{l.Criteria, l.Exprs, l.Nodes, l.Roots, l.CFGIndex, l.CFGNodes, critOrder(l),
			wx.Unindexed, wx.Fields, wx.Table, wx.IDs, wx.DedupOff, wx.Dedup, wx.Present}
		total := 0
		f.base = make([]int64, len(words))
		for i, w := range words {
			f.base[i] = int64(total)
			total += len(w)
		}
		if f.img, err = c.alloc(4 * int64(total)); err != nil {
			return err
		}
		for i, w := range words {
			if err := upload(f.img.p+cu.DevicePtr(4*f.base[i]), w); err != nil {
				return fmt.Errorf("gpu: cuda: %v", err)
			}
		}
		for i := 0; i < streams; i++ {
			s, err := cu.MakeStream(cu.NonBlocking)
			if err != nil {
				return fmt.Errorf("gpu: cuda: stream: %v", err)
			}
			f.streams = append(f.streams, s)
		}
		return nil
	})
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// filterSmemLimit, when set (by tests), caps the shared memory the values
// may take, to exercise the device scratch.
var filterSmemLimit int

// critOrder returns the criteria's indices sorted so that plain loads of
// the same field (base, IPv4 header offset, offset, size, mask) are
// adjacent; the others keep their place at the front. The kernel reuses
// a field's value across a run.
func critOrder(l *filter.Layout) []uint32 {
	nc := int(l.Header[filter.HdrCriteria])
	order := make([]uint32, nc)
	for i := range order {
		order[i] = uint32(i)
	}
	key := func(i uint32) [5]uint32 {
		w := l.Criteria[int(i)*filter.CritWords:]
		if w[0]&0xf != filter.CritLoad {
			return [5]uint32{0, 0, 0, 0, i}
		}
		return [5]uint32{1, w[0] & 0xffff0f00, w[1], w[2], w[3]}
	}
	sort.SliceStable(order, func(a, b int) bool {
		ka, kb := key(order[a]), key(order[b])
		for i := range ka {
			if ka[i] != kb[i] {
				return ka[i] < kb[i]
			}
		}
		return false
	})
	if nc == 0 {
		order = []uint32{0}
	}
	return order
}

// Name returns "cuda".
func (f *CUDAFilter) Name() string { return "cuda" }

// Describe says how the kernel runs.
func (f *CUDAFilter) Describe() string {
	where := fmt.Sprintf("shared memory (%d bytes a block)", f.smem)
	if f.smem == 0 {
		where = "device memory"
	}
	if filterKernel == "walk" || filterKernel == "walk-v1" {
		wx := f.wix
		name, grid, rows := "gpf_walk", f.wgrid, "rows in device memory"
		if filterKernel == "walk-v1" {
			name, grid = "gpf_walk_v1", f.wgrid1
		} else if f.wstage > 0 {
			rows = fmt.Sprintf("rows staged in shared memory (%d bytes a block)", f.wsmem)
		}
		if filterKernel == "walk" && f.wscnt > 0 {
			rows += ", counts in shared memory"
		}
		return fmt.Sprintf("%s (%s): %d filters, %d criteria, %d walked always, %d indexed fields (%d slots, %d entries), %s, blocks of %d, %d blocks",
			name, f.ptx, f.nf, f.nc, len(wx.Unindexed), len(wx.Fields)/WalkFieldWords, len(wx.Table)/WalkSlotWords, len(wx.IDs), rows, walkBlock, grid)
	}
	return fmt.Sprintf("gpf_filter (%s, %s): %d filters, %d criteria, %d sub-predicates, values in %s, blocks of %d, %d blocks",
		f.ptx, filterKernel, f.nf, f.nc, f.nn, where, f.block, f.grid)
}

// NewBatch allocates a batch of capacity packets in page-locked memory
// and its device twin.
func (f *CUDAFilter) NewBatch(capacity int, bits bool) (*PacketBatch, error) {
	b, err := newPacketBatch(f.l, f.maxRow, capacity, bits)
	if err != nil {
		return nil, err
	}
	t := &packetTwin{}
	err = f.c.do(func() error {
		var err error
		for _, a := range []struct {
			h *hostBuf
			d *devBuf
			n int64
		}{{&t.hdata, &t.ddata, int64(capacity) * int64(b.Snap)}, {&t.hcap, &t.dcap, 4 * int64(capacity)},
			{&t.hwire, &t.dwire, 4 * int64(capacity)}, {&t.hbits, &t.dbits, 4 * int64(len(b.Bits))},
			{&t.hcnt, &t.dcnt, 4 * int64(f.nf)}, {&t.hbytes, &t.dbytes, 8 * int64(f.nf)}} {
			if *a.h, err = allocHost(max(a.n, 4)); err != nil {
				return err
			}
			if *a.d, err = f.c.alloc(a.n); err != nil {
				return err
			}
		}
		t.ev, err = cu.MakeEvent(cu.DisableTiming)
		return err
	})
	if err != nil {
		f.c.do(func() error { t.release(f.c); return nil })
		return nil, err
	}
	b.Data = t.hdata.bytes(int64(capacity) * int64(b.Snap))
	b.Caplen, b.Wire = wordsAt(t.hcap.p, capacity), wordsAt(t.hwire.p, capacity)
	if bits {
		b.Bits = wordsAt(t.hbits.p, len(b.Bits))
	}
	b.Counts = wordsAt(t.hcnt.p, f.nf)
	b.Bytes = unsafe.Slice((*uint64)(t.hbytes.p), f.nf)
	b.impl = t
	return b, nil
}

func (t *packetTwin) release(c *CUDA) {
	for _, h := range []*hostBuf{&t.hdata, &t.hcap, &t.hwire, &t.hbits, &t.hcnt, &t.hbytes} {
		h.free()
	}
	for _, d := range []*devBuf{&t.ddata, &t.dcap, &t.dwire, &t.dbits, &t.dcnt, &t.dbytes} {
		c.free(d)
	}
	if t.ev != (cu.Event{}) {
		cu.DestroyEvent(&t.ev)
	}
}

// FreeBatch frees b's memory.
func (f *CUDAFilter) FreeBatch(b *PacketBatch) {
	if t, ok := b.impl.(*packetTwin); ok {
		f.c.do(func() error { t.release(f.c); return nil })
		b.impl = nil
	}
}

func (f *CUDAFilter) twin(b *PacketBatch) (*packetTwin, error) {
	t, _ := b.impl.(*packetTwin)
	if t == nil {
		return nil, fmt.Errorf("gpu: cuda: a packet batch this filter did not make")
	}
	if b.N < 0 || b.N > len(b.Caplen) || b.Filters != f.nf || len(b.Data) < b.N*b.Snap || b.Snap > f.maxRow {
		return nil, fmt.Errorf("gpu: cuda: packet batch of %d packets outside its capacity", b.N)
	}
	return t, nil
}

func (f *CUDAFilter) params(a *cArgs, t *packetTwin, b *PacketBatch, stream int) []unsafe.Pointer {
	gvals := uint64(0)
	if f.smem == 0 {
		gvals = uint64(f.gvals[stream].p)
	}
	at := func(i int) uint64 { return uint64(f.img.p) + uint64(4*f.base[i]) }
	smemVals := uint32(0)
	if f.smem > 0 {
		smemVals = 1
	}
	if filterKernel == "walk" || filterKernel == "walk-v1" {
		wx := f.wix
		ps := []unsafe.Pointer{a.u64(at(0)), a.u64(at(1)), a.u64(at(4)), a.u64(at(5)), a.u32(uint32(f.nf)),
			a.u64(at(7)), a.u32(uint32(len(wx.Unindexed))), a.u64(at(8)), a.u32(uint32(len(wx.Fields) / WalkFieldWords)),
			a.u64(at(9)), a.u64(at(10)), a.u64(at(13)), a.u64(at(11)), a.u64(at(12)),
			a.u64(uint64(t.ddata.p)), a.u32(uint32(b.Snap)), a.u64(uint64(t.dcap.p)), a.u64(uint64(t.dwire.p)), a.u32(uint32(b.N)),
			a.u64(uint64(t.dbits.p)), a.u32(uint32(b.BitWords)), a.u64(uint64(t.dcnt.p)), a.u64(uint64(t.dbytes.p))}
		if filterKernel == "walk" {
			stage := f.wstage
			if b.Snap%4 != 0 || 4*stage < b.Snap {
				stage = 0 // not the rows walkShared planned for
			}
			ps = append(ps, a.u32(uint32(stage)), a.u32(uint32(f.wscnt)))
		}
		return ps
	}
	order := uint64(0)
	if filterKernel != "stages-noreuse" {
		order = at(6)
	}
	return []unsafe.Pointer{a.u64(at(0)), a.u64(at(1)), a.u64(at(2)), a.u64(at(3)), a.u64(at(4)), a.u64(at(5)), a.u64(order),
		a.u32(uint32(f.nc)), a.u32(uint32(f.nn)), a.u32(uint32(f.nf)), a.u64(uint64(t.ddata.p)), a.u32(uint32(b.Snap)),
		a.u64(uint64(t.dcap.p)), a.u64(uint64(t.dwire.p)), a.u32(uint32(b.N)), a.u64(gvals), a.u32(smemVals),
		a.u64(uint64(t.dbits.p)), a.u32(uint32(b.BitWords)), a.u64(uint64(t.dcnt.p)), a.u64(uint64(t.dbytes.p))}
}

// walkBlock is gpf_walk's block (WALK_BLOCK).
const walkBlock = 128

// walkQueue is the words of a warp's queue of (packet, filter) pairs in
// gpf_walk (WALK_Q).
const walkQueue = 64

// walkStageMax is the largest row gpf_walk stages in shared memory.
const walkStageMax = 256

// walkSharedCounts is the most filters gpf_walk counts in shared memory
// (WALK_SCOUNTS): a block's counts go to device memory once, at its end.
const walkSharedCounts = 512

// walkShared returns gpf_walk's stage and scnt arguments and its dynamic
// shared memory for layout l, its index ix and rows of at most maxRow
// bytes: the counters of a set of at most walkSharedCounts filters, the
// fields' presence bitmaps and the warps' queues, and, where the rows are
// bounded (FilterSnap), a multiple of 4 bytes, at most walkStageMax and
// the whole fits smax, the warps' rows, an odd number of words apart.
func walkShared(l *filter.Layout, ix *WalkIndex, maxRow, smax int) (stage, scnt, smem int) {
	nk := len(ix.Fields) / WalkFieldWords
	if nf := int(l.Header[filter.HdrFilters]); nf <= walkSharedCounts {
		scnt = nf
	}
	smem = 12*scnt + 4*(nk*128+walkBlock/32*walkQueue)
	snap, bounded := FilterSnap(l, maxRow)
	if !bounded || snap%4 != 0 || snap > walkStageMax {
		return 0, scnt, smem
	}
	stage = snap/4 | 1
	if sm := smem + 4*walkBlock*stage; sm <= smax {
		return stage, scnt, sm
	}
	return 0, scnt, smem
}

// launch returns the kernel of the current choice and its grid for n
// packets, block and dynamic shared memory.
func (f *CUDAFilter) launch(n int) (cu.Function, int, int, int) {
	switch filterKernel {
	case "walk":
		return f.fnWalk, max(1, min((n+walkBlock-1)/walkBlock, f.wgrid)), walkBlock, f.wsmem
	case "walk-v1":
		return f.fnWv1, max(1, min((n+walkBlock-1)/walkBlock, f.wgrid1)), walkBlock, 0
	}
	return f.fn, max(1, min((n+f.block-1)/f.block, f.grid)), f.block, f.smem
}

// Submit queues b: rows and lengths in, counters zeroed, the kernel,
// counters and bitmaps out, in the next stream.
func (f *CUDAFilter) Submit(b *PacketBatch) error {
	t, err := f.twin(b)
	if err != nil {
		b.err = err
		return err
	}
	t.submitted, b.err = false, nil
	if f.c.closed.Load() {
		return ErrClosed
	}
	a := newCArgs(28)
	defer a.free()
	si := int(f.rr.Add(1)) % len(f.streams)
	params := f.params(a, t, b, si)
	st := f.streams[si]
	in := []auxCopy{{t.ddata.p, t.hdata.p, int64(b.N) * int64(b.Snap)}, {t.dcap.p, t.hcap.p, 4 * int64(b.N)},
		{t.dwire.p, t.hwire.p, 4 * int64(b.N)}}
	zero := []auxCopy{{t.dcnt.p, nil, int64(f.nf)}, {t.dbytes.p, nil, 2 * int64(f.nf)}}
	outs := []auxOut{{t.hcnt.p, t.dcnt.p, 4 * int64(f.nf)}, {t.hbytes.p, t.dbytes.p, 8 * int64(f.nf)},
		{t.hbits.p, t.dbits.p, 4 * int64(b.N) * int64(b.BitWords)}}
	fn, grid, block, smem := f.launch(b.N)
	if b.N == 0 {
		grid = 0
	}
	if err := f.c.auxQueue(st, in, zero, fn, grid, block, smem, params, outs, t.ev, cu.Event{}); err != nil {
		b.err = fmt.Errorf("gpu: cuda: filtering: %v", err)
		return b.err
	}
	t.submitted = true
	return nil
}

// Wait waits for b's answers.
func (f *CUDAFilter) Wait(b *PacketBatch) error {
	t, _ := b.impl.(*packetTwin)
	if t == nil {
		return fmt.Errorf("gpu: cuda: a packet batch this filter did not make")
	}
	if b.err != nil || !t.submitted {
		return b.err
	}
	t.submitted = false
	if err := f.c.auxWait(t.ev); err != nil {
		b.err = fmt.Errorf("gpu: cuda: filtering: %v", err)
	}
	return b.err
}

// KernelTime times iters launches of the kernel alone over b (submitted
// and waited for once) and returns the milliseconds per launch.
func (f *CUDAFilter) KernelTime(b *PacketBatch, iters int) (float64, error) {
	t, err := f.twin(b)
	if err != nil || b.N == 0 {
		return 0, err
	}
	a := newCArgs(28)
	defer a.free()
	params := f.params(a, t, b, 0)
	fn, grid, block, smem := f.launch(b.N)
	var ms float64
	err = f.c.do(func() error {
		ms, err = timeEvents(f.streams[0], iters, func(st cu.Stream) error {
			return fn.Launch(grid, 1, 1, block, 1, 1, smem, st, params)
		})
		return err
	})
	return ms, err
}

// Close frees the layout, scratch and streams.
func (f *CUDAFilter) Close() error {
	f.once.Do(func() {
		f.c.do(func() error {
			for i := range f.streams {
				f.streams[i].Destroy()
			}
			f.streams = nil
			f.c.free(&f.img)
			for i := range f.gvals {
				f.c.free(&f.gvals[i])
			}
			if f.mod != (cu.Module{}) {
				f.mod.Unload()
			}
			return nil
		})
	})
	return nil
}

var _ PacketFilter = (*CUDAFilter)(nil)
