//go:build cuda

package gpu

import (
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/gswitch/gswitch/tables/flow"
)

// growHost makes h at least n bytes of pinned memory (its contents are not
// kept).
func growHost(h *hostBuf, n int64) error {
	if h.n >= n {
		return nil
	}
	size := max(n, 2*h.n, 4)
	h.free()
	nh, err := allocHost(size)
	if err != nil {
		return err
	}
	*h = nh
	return nil
}

func wordBytes(w []uint32) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), 4*len(w))
}

// LookupFlow classifies n packets (projected keys in soa, SoA order: see
// Backend) in table id on the GPU, through the pipeline batches: chunk by
// chunk, each key column's part is copied into a pinned batch, and the
// batches' copies and kernels overlap over the streams.
func (c *CUDA) LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	c.mu.Lock()
	t := c.tables[id]
	var l *flowLayout
	if t != nil {
		l = t.flay
	}
	c.mu.Unlock()
	if t == nil {
		return fmt.Errorf("%w: %d", ErrNoTable, id)
	}
	if l == nil {
		return fmt.Errorf("%w: table %d is %v, lookup is %v", ErrKind, id, t.kind, Flow)
	}
	if err := checkFlowBatch(l, soa, n, out); err != nil || n == 0 {
		return err
	}
	p := l.p
	return c.lookupVia(id, Flow, p, n,
		func(b *Batch, lo int) {
			for j := 0; j < p; j++ {
				pcopy(wordBytes(b.Keys[j*b.Cap:j*b.Cap+b.N]), wordBytes(soa[j*n+lo:j*n+lo+b.N]))
			}
		},
		func(b *Batch, lo int) {
			dst := out[lo : lo+b.N]
			pcopy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*len(dst)), wordBytes(b.Out[:b.N]))
		})
}

// KernelTimeFlow uploads the n packets of soa once, then times iters launches
// of the flow lookup kernel over all of them with events (no copies):
// milliseconds per launch.
func (c *CUDA) KernelTimeFlow(id TableID, soa []uint32, n, iters int) (ms float64, err error) {
	ms, _, err = c.KernelTimeFlowMode(id, soa, n, FlowRefill, iters)
	return ms, err
}

// Flow lookup kernel modes (the kernels' mode argument; kernels/flow.cu).
const (
	// FlowRefill: a lane per packet, a finished lane takes the next
	// packet of its warp's chunk at once (classify_refill; the mode in use).
	FlowRefill = 0
	// FlowThreadPerPacket: one thread walks one packet's classes to the
	// end, over a grid-stride loop (the comparison).
	FlowThreadPerPacket = 1
	// FlowWarpPerPacket: a warp per packet, its lanes walking the
	// packet's classes 32 at a time (classify_warp; tuple, Bloom and
	// merged images, launched with 32 threads a packet): the mode of
	// small batches (flowWarpMax).
	FlowWarpPerPacket = 2
)

// flowWarpMax is the largest flow lookup batch run with a warp per
// packet (FlowWarpPerPacket); larger batches, and linear images, use
// refilled lanes (FlowRefill). A lane per packet walks its classes one
// after another, so a small batch's kernel lasts as long as one packet's
// walk, however few packets; a warp walks 32 classes at once, but does
// more work a packet. On an H200 (2026-11-26, 131,072 rules in 512
// classes, merged; BenchmarkCUDASmallBatchLatency) a kernel of 64 to
// 1,024 keys took 6.6-7.4 µs with a warp per packet against 34-39 µs,
// 4,096 keys 12 against 40 µs, 16,384 keys 28 against 41 µs, and a whole
// lookup of 64 to 1,024 keys from one caller 18-25 µs against 48-58 µs at
// the p50; on a million keys
// (BenchmarkCUDAFlowKernel) refilled lanes classify 1,306 Mpackets/s, a
// warp per packet 746. GSWITCH_FLOW_WARP=N sets the bound (0: never), for
// comparisons.
var flowWarpMax = func() int {
	if v, err := strconv.Atoi(os.Getenv("GSWITCH_FLOW_WARP")); err == nil && v >= 0 {
		return v
	}
	return 16384
}()

// flowMode returns the kernel mode of a lookup of n keys in image l.
func flowMode(l *flowLayout, n int) int {
	if l.algo != flow.Linear && n <= flowWarpMax {
		return FlowWarpPerPacket
	}
	return FlowRefill
}

// flowThreads returns the threads a lookup of n keys in mode wants: one
// per key, 32 with a warp per packet.
func flowThreads(mode, n int) int {
	if mode == FlowWarpPerPacket {
		return 32 * n
	}
	return n
}

// KernelTimeFlowMode is KernelTimeFlow for the kernel mode given (FlowRefill,
// FlowThreadPerPacket or FlowWarpPerPacket), and also returns the answers of the last launch.
// n == 0 takes no time and answers nothing.
func (c *CUDA) KernelTimeFlowMode(id TableID, soa []uint32, n, mode, iters int) (ms float64, out []flow.RuleID, err error) {
	iters = max(iters, 1)
	if n == 0 {
		return 0, nil, nil
	}
	if mode != FlowRefill && mode != FlowThreadPerPacket && mode != FlowWarpPerPacket {
		return 0, nil, fmt.Errorf("gpu: cuda: flow kernel mode %d", mode)
	}
	err = c.do(func() error {
		t, _, err := c.flowKeysIn(id, soa, n, 0)
		if err != nil {
			return err
		}
		ms, err = c.timeLaunches(iters, func(st cu.Stream) error {
			// (img, desc, mode, keys, out, n, stride = n)
			return c.launchItems(st, t.ffn, flowThreads(mode, n), t.smem, t.grid, t.img.p, t.desc.p, int64(mode), c.in.p, c.out.p, int64(n), int64(n))
		})
		if err != nil {
			return err
		}
		out, err = c.flowAnswers(n)
		return err
	})
	return ms, out, err
}

// FlowSplitTime times the alternative flow kernel, flow_lookup_split (groups
// threads per packet, each walking every groups-th class, merged with a
// 64-bit atomicMax) followed by flow_ranks, over the n packets of soa: the
// milliseconds per launch pair, and the answers of the last one (for the
// comparison with flow_lookup). Tuple and Bloom tables only.
func (c *CUDA) FlowSplitTime(id TableID, soa []uint32, n, groups, iters int) (ms float64, out []flow.RuleID, err error) {
	if n == 0 || groups < 1 {
		return 0, nil, fmt.Errorf("gpu: cuda: split kernel over %d packets, %d groups", n, groups)
	}
	err = c.do(func() error {
		t, inB, err := c.flowKeysIn(id, soa, n, 8*int64(n)) // keys, then the ranks
		if err != nil {
			return err
		}
		if t.flay.algo == flow.Linear {
			return fmt.Errorf("%w: the split kernel searches tuple and Bloom images", ErrKind)
		}
		rank := c.in.p + cu.DevicePtr((inB+7)&^7)
		ms, err = c.timeLaunches(iters, func(st cu.Stream) error {
			if err := cu.MemsetD32Async(rank, 0, int64(2*n), st); err != nil {
				return err
			}
			if err := c.launchItems(st, c.fsplit, n*groups, t.smem, t.grid, t.img.p, t.desc.p, int64(groups), c.in.p, rank, int64(n), int64(n)); err != nil {
				return err
			}
			return c.launchShared(st, c.franks, n, 0, 0, rank, c.out.p)
		})
		if err != nil {
			return err
		}
		out, err = c.flowAnswers(n)
		return err
	})
	return ms, out, err
}

// flowKeysIn prepares the kernel timings of flow table id (inside c.do):
// the table's pending bubbles applied, the n packets of soa uploaded to
// c.in with extra bytes after them (inB: the keys' bytes), and c.out room
// for n answers.
func (c *CUDA) flowKeysIn(id TableID, soa []uint32, n int, extra int64) (t *cudaTable, inB int64, err error) {
	if t, err = c.lookupTable(id, Flow, 0, 0); err != nil {
		return nil, 0, err
	}
	if int64(len(soa)) < int64(n)*int64(t.flay.p) {
		return nil, 0, fmt.Errorf("%w: %d words for %d packets of %d words", ErrShortKeys, len(soa), n, t.flay.p)
	}
	if err := c.flushTables(); err != nil {
		return nil, 0, err
	}
	inB = 4 * int64(t.flay.p) * int64(n)
	if err := c.grow(&c.in, inB+extra); err != nil {
		return nil, 0, err
	}
	if err := c.grow(&c.out, int64(4*n)); err != nil {
		return nil, 0, err
	}
	if inB > 0 {
		if err := upload(c.in.p, soa[:int64(t.flay.p)*int64(n)]); err != nil {
			return nil, 0, err
		}
	}
	return t, inB, nil
}

// flowAnswers copies the n answers in c.out back (inside c.do).
func (c *CUDA) flowAnswers(n int) ([]flow.RuleID, error) {
	out := make([]flow.RuleID, n)
	return out, cu.MemcpyDtoH(unsafe.Pointer(&out[0]), c.out.p, int64(4*n))
}
