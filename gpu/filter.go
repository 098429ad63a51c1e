package gpu

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gswitch/gswitch/tables/filter"
)

// gPF filtering: a PacketFilter evaluates every filter of a compiled set
// (filter.Program, through its device layout filter.Layout) on batches of
// packets and answers per-filter match counts and byte sums (wire
// lengths) and, optionally, a match bitmap per packet — what filter.Evaluator.EvalStages answers packet by
// packet (CPUFilter). The CUDA one (CUDA.PacketFilter, kernels/filter.cu)
// runs gpf_walk by default: each filter's control-flow form for the
// packets the walk index lists it under (filter_walk.go, whose
// WalkEvaluator is the kernel's CPU twin); gpf_filter, the three stages
// fused in one kernel, a thread per packet, is the other choice
// (SetFilterKernel). Both answer what Eval and EvalStages answer.
//
// Packets are reduced on the host: a batch row holds a packet's first Snap
// bytes, enough for every byte a criterion can read (FilterSnap); only
// where a criterion's offset depends on packet data (beyond an IPv4 header
// length) are whole packets sent, up to the row size, and a longer packet
// is refused (ErrPacketTooLong): its caller evaluates it on the CPU.

// ErrPacketTooLong is returned by PacketBatch.Add for a packet longer than
// the rows of a filter set that needs whole packets.
var ErrPacketTooLong = errors.New("gpu: packet longer than the filter batch's rows")

// FilterSnap returns the bytes of a packet the layout's criteria can read
// (at most maxRow) and whether that bound holds for every packet; false
// when some expression loads at an offset computed from packet data: then
// rows of maxRow bytes hold whole packets.
func FilterSnap(l *filter.Layout, maxRow int) (int, bool) {
	need := uint64(0)
	bound := func(base, netoff, off, size uint32) {
		end := uint64(off) + uint64(size)
		if base == uint32(filter.BaseIPv4) {
			end += uint64(netoff) + 60 // the IPv4 header is at most 60 bytes
			need = max(need, uint64(netoff)+1)
		}
		need = max(need, end)
	}
	bounded := true
	nc := int(l.Header[filter.HdrCriteria])
	for i := 0; i < nc; i++ {
		w := l.Criteria[i*filter.CritWords : (i+1)*filter.CritWords]
		switch w[0] & 0xf {
		case filter.CritLoad:
			bound(w[0]>>8&0xff, w[1], w[2], w[0]>>16&0xff)
		case filter.CritExpr:
			for pc := w[4]; pc < w[4]+w[5]; pc++ {
				in := l.Exprs[pc*filter.ExprWords : (pc+1)*filter.ExprWords]
				if in[0]&0xff != filter.ExprLoad {
					continue
				}
				prev := l.Exprs[(pc-1)*filter.ExprWords:] // a load's index is pushed before it
				if pc == w[4] || prev[0]&0xff != filter.ExprConst {
					bounded = false
					continue
				}
				bound(in[0]>>8&0xff, in[2], in[1]+prev[1], in[0]>>16&0xff)
				if in[1]+prev[1] < in[1] { // wraps
					bounded = false
				}
			}
		}
	}
	if !bounded || need > uint64(maxRow) {
		return maxRow, false
	}
	return max(int(need+3)/4*4, 4), true
}

// filterKernel is the CUDA filter's kernel (SetFilterKernel).
var filterKernel = "walk"

// FilterKernels are the CUDA filter's kernels: "walk" (gpf_walk: each
// filter's control-flow form, an index over equality tests; the default),
// "walk-v1" (gpf_walk_v1, its earlier form: rows read in device memory,
// each field's pairs walked as they are looked up), "stages" (gpf_filter:
// every criterion, sub-predicate and filter, fused) and "stages-noreuse"
// (gpf_filter without the reuse of a field loaded for the previous
// criterion).
var FilterKernels = []string{"walk", "walk-v1", "stages", "stages-noreuse"}

// SetFilterKernel chooses the CUDA filter's kernel from the next launch
// on; not for use while batches are being submitted. The benchmark and
// the tests compare them.
func SetFilterKernel(k string) error {
	for _, x := range FilterKernels {
		if x == k {
			filterKernel = k
			return nil
		}
	}
	return fmt.Errorf("gpu: filter kernel %q: want one of %v", k, FilterKernels)
}

// PacketBatch is a batch of reduced packets and its answers. Its slices are
// allocated by the PacketFilter that made it (page-locked for a GPU).
type PacketBatch struct {
	Data     []byte   // row k: packet k's first Snap bytes (Data[k*Snap:])
	Snap     int      // the row size
	Whole    bool     // rows hold whole packets (FilterSnap's bound does not hold)
	Caplen   []uint32 // captured length of each packet
	Wire     []uint32 // length on the wire
	N        int
	BitWords int      // words per packet of Bits (0: no bitmaps)
	Bits     []uint32 // bit f of packet k's words: filter f matched
	Counts   []uint32 // per filter: the batch's packets it matched
	Bytes    []uint64 // per filter: the wire lengths of the batch's packets it matched
	Filters  int

	impl any
	err  error
}

// Reset empties the batch.
func (b *PacketBatch) Reset() { b.N = 0 }

// Add appends a packet (its captured bytes and wire length) and reports
// whether the batch had room; ErrPacketTooLong where the rows must hold
// whole packets and this one is longer.
func (b *PacketBatch) Add(data []byte, wire uint32) (bool, error) {
	if b.N >= len(b.Caplen) {
		return false, nil
	}
	if b.Whole && len(data) > b.Snap {
		return false, ErrPacketTooLong
	}
	// The bytes of the row past the captured length are left as they
	// were: every load is checked against Caplen first (the kernels',
	// EvalStages' on data[:min(Caplen, Snap)]), so none is read.
	copy(b.Data[b.N*b.Snap:(b.N+1)*b.Snap], data)
	b.Caplen[b.N], b.Wire[b.N] = uint32(len(data)), wire
	b.N++
	return true, nil
}

// PacketFilter evaluates a filter set on batches of packets.
type PacketFilter interface {
	Name() string
	// NewBatch allocates a batch of capacity packets, with per-packet
	// bitmaps if bits.
	NewBatch(capacity int, bits bool) (*PacketBatch, error)
	Submit(b *PacketBatch) error
	Wait(b *PacketBatch) error
	FreeBatch(b *PacketBatch)
	Close() error
}

// newPacketBatch allocates a batch in ordinary memory.
func newPacketBatch(l *filter.Layout, maxRow, capacity int, bits bool) (*PacketBatch, error) {
	if capacity < 1 || maxRow < 4 {
		return nil, fmt.Errorf("gpu: packet batch of %d packets, rows up to %d bytes", capacity, maxRow)
	}
	snap, bounded := FilterSnap(l, maxRow)
	nf := int(l.Header[filter.HdrFilters])
	b := &PacketBatch{Snap: snap, Whole: !bounded, Filters: nf, Data: make([]byte, capacity*snap),
		Caplen: make([]uint32, capacity), Wire: make([]uint32, capacity), Counts: make([]uint32, nf), Bytes: make([]uint64, nf)}
	if bits {
		b.BitWords = (nf + 31) / 32
		b.Bits = make([]uint32, capacity*b.BitWords)
	}
	return b, nil
}

// CPUFilter is filter.Evaluator.EvalStages over a batch's rows, on the
// caller's goroutine (Submit does the work). Submit may be called from
// several goroutines at once (each takes an Evaluator of its own from a
// pool), on different batches.
type CPUFilter struct {
	P      *filter.Program
	MaxRow int // the rows of sets that need whole packets (0: 2048)
	l      *filter.Layout
	evs    sync.Pool // *cpuEval
}

type cpuEval struct {
	ev  *filter.Evaluator
	out []uint64
}

// NewCPUFilter returns the CPU PacketFilter of p.
func NewCPUFilter(p *filter.Program, maxRow int) *CPUFilter {
	if maxRow <= 0 {
		maxRow = 2048
	}
	c := &CPUFilter{P: p, MaxRow: maxRow, l: p.Layout()}
	c.evs.New = func() any { return &cpuEval{ev: filter.NewEvaluator(p), out: make([]uint64, p.Words())} }
	return c
}

// Name returns "cpu".
func (c *CPUFilter) Name() string { return "cpu" }

// NewBatch allocates a batch.
func (c *CPUFilter) NewBatch(capacity int, bits bool) (*PacketBatch, error) {
	return newPacketBatch(c.l, c.MaxRow, capacity, bits)
}

// Submit evaluates the batch.
func (c *CPUFilter) Submit(b *PacketBatch) error {
	if b.N < 0 || b.N > len(b.Caplen) || b.N > len(b.Wire) || len(b.Data) < b.N*b.Snap || b.Filters != len(c.P.Roots) ||
		len(b.Counts) < b.Filters || len(b.Bytes) < b.Filters || len(b.Bits) < b.N*b.BitWords {
		b.err = fmt.Errorf("gpu: packet batch of %d packets, %d filters, for a set of %d", b.N, b.Filters, len(c.P.Roots))
		return b.err
	}
	ce := c.evs.Get().(*cpuEval)
	defer c.evs.Put(ce)
	clear(b.Counts)
	clear(b.Bytes)
	for k := 0; k < b.N; k++ {
		n := min(int(b.Caplen[k]), b.Snap)
		ce.ev.EvalStages(b.Data[k*b.Snap:k*b.Snap+n], b.Wire[k], ce.out)
		for f := 0; f < b.Filters; f++ {
			m := uint32(ce.out[f/64] >> (f % 64) & 1)
			b.Counts[f] += m
			b.Bytes[f] += uint64(m) * uint64(b.Wire[k])
			if b.BitWords > 0 {
				w := &b.Bits[k*b.BitWords+f/32]
				if f%32 == 0 {
					*w = 0
				}
				*w |= m << (f % 32)
			}
		}
	}
	b.err = nil
	return nil
}

// Wait returns Submit's error.
func (c *CPUFilter) Wait(b *PacketBatch) error { return b.err }

// FreeBatch does nothing.
func (c *CPUFilter) FreeBatch(*PacketBatch) {}

// Close does nothing.
func (c *CPUFilter) Close() error { return nil }

var _ PacketFilter = (*CPUFilter)(nil)

// FilterGPU is a device that filters (OpenFilterGPU): it opens a
// FilterDevice per compiled set.
type FilterGPU interface {
	// Filter loads p's layout; batches go over streams streams (1..16);
	// maxRow is the row size of sets that need whole packets (0: 2048).
	Filter(p *filter.Program, streams, maxRow int) (FilterDevice, error)
	Device() string // the device's name
	Close() error
}

// FilterDevice is a PacketFilter on a device.
type FilterDevice interface {
	PacketFilter
	Describe() string // how the kernel runs
	// KernelTime times iters launches of the kernel alone over b
	// (submitted and waited for once) and returns the milliseconds per
	// launch.
	KernelTime(b *PacketBatch, iters int) (float64, error)
}
