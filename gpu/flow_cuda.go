//go:build cuda

package gpu

import (
	"fmt"
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
// Backend) in table id on the GPU: the keys go through pinned staging, then
// copy-in, flow_lookup and copy-out run in the first stream (after any
// update's scatter) and the call waits for them.
func (c *CUDA) LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	return c.do(func() error {
		t, err := c.lookupTable(id, Flow, 0, 0)
		if err != nil {
			return err
		}
		if err := checkFlowBatch(t.flay, soa, n, out); err != nil || n == 0 {
			return err
		}
		if err := c.flush(); err != nil {
			return err
		}
		if n >= 1<<31 {
			return fmt.Errorf("gpu: cuda: batch of %d packets: at most 2^31-1", n)
		}
		inB, outB := 4*int64(t.flay.p)*int64(n), 4*int64(n)
		if err := growHost(&c.fhin, inB); err != nil {
			return err
		}
		if err := growHost(&c.fhout, outB); err != nil {
			return err
		}
		if err := c.grow(&c.fdin, inB); err != nil {
			return err
		}
		if err := c.grow(&c.fdout, outB); err != nil {
			return err
		}
		st := c.streams[0]
		if inB > 0 {
			pcopy(c.fhin.bytes(inB), wordBytes(soa[:int64(t.flay.p)*int64(n)]))
			if err := cu.MemcpyHtoDAsync(c.fdin.p, c.fhin.p, inB, st); err != nil {
				return fmt.Errorf("gpu: cuda: copy in: %v", err)
			}
		}
		if err := c.launchIn(st, c.ffn, n, t.img.p, t.desc.p, c.fdin.p, c.fdout.p); err != nil {
			return err
		}
		if err := cu.MemcpyDtoHAsync(c.fhout.p, c.fdout.p, outB, st); err != nil {
			return fmt.Errorf("gpu: cuda: copy out: %v", err)
		}
		if err := st.Synchronize(); err != nil {
			return fmt.Errorf("gpu: cuda: flow lookup: %v", err)
		}
		pcopy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), outB), c.fhout.bytes(outB))
		return nil
	})
}

// KernelTimeFlow uploads the n packets of soa once, then times iters launches
// of flow_lookup over all of them with events (no copies): milliseconds per
// launch.
func (c *CUDA) KernelTimeFlow(id TableID, soa []uint32, n, iters int) (ms float64, err error) {
	iters = max(iters, 1)
	if n == 0 {
		return 0, nil
	}
	err = c.do(func() error {
		t, err := c.lookupTable(id, Flow, 0, 0)
		if err != nil {
			return err
		}
		if int64(len(soa)) < int64(n)*int64(t.flay.p) {
			return fmt.Errorf("%w: %d words for %d packets of %d words", ErrShortKeys, len(soa), n, t.flay.p)
		}
		if err := c.flush(); err != nil {
			return err
		}
		inB := 4 * int64(t.flay.p) * int64(n)
		if err := c.grow(&c.in, inB); err != nil {
			return err
		}
		if err := c.grow(&c.out, int64(4*n)); err != nil {
			return err
		}
		if inB > 0 {
			if err := upload(c.in.p, soa[:int64(t.flay.p)*int64(n)]); err != nil {
				return err
			}
		}
		ms, err = c.timeLaunches(iters, func(st cu.Stream) error {
			return c.launchIn(st, c.ffn, n, t.img.p, t.desc.p, c.in.p, c.out.p)
		})
		return err
	})
	return ms, err
}
