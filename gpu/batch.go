package gpu

import (
	"fmt"
	"unsafe"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
)

// Batch is one lookup batch whose keys and results live in memory the
// backend allocated: page-locked host memory on CUDA, so that the copies to
// and from the device run asynchronously and the producer (the datapath's
// key extractor, a benchmark's traffic) writes keys straight into it with no
// staging copy. A Batch belongs to the backend that made it.
//
// The producer fills Keys, sets N and calls the backend's Submit; the
// lookups then run while the caller does other work, and Wait returns once
// Out[0:N] holds the results. A Batch must not be touched between Submit and
// Wait, and must be waited for before it is submitted again or freed.
//
// Key layout by kind (Width words per key):
//   - LPM4: Width 1, key i is Keys[i] (the address as a uint32).
//   - LPM6: Width 4, key i is Keys[4i:4i+4], the memory of an lpm.Addr6
//     (Hi then Lo, each a native uint64); Addrs6 views them as such.
//   - Flow: Width P (the table's projection, flow.View.Words), structure of
//     arrays with stride Cap: word j of packet i is Keys[j*Cap+i]. Out[i]
//     is a flow.RuleID (flow.NoMatch when no rule matches).
type Batch struct {
	Kind  Kind
	Width int
	Cap   int
	Keys  []uint32 // Width*Cap words
	Out   []uint32 // Cap results
	N     int      // keys to look up, 0..Cap
	Tag   any      // the producer's own use (a Batcher keeps the first key's arrival time)

	impl batchImpl
	sub  bool // submitted to impl's backend and not yet waited for

	// Looked up at Submit on the CPU (CPU.Submit takes any backend's
	// batch): Wait returns cpuErr.
	cpuDone bool
	cpuErr  error

	// Engine routing: the Engine that made the batch, the device it came
	// from (-1: the CPU), and, set when the Engine submitted it to that
	// device, the table whose lookup the CPU answers if the device fails
	// at Wait (Engine.deviceFailed; fields, not a closure, so that a
	// submission allocates nothing).
	eng      *Engine
	dev      int
	onDevice bool
	table    TableID
}

// batchImpl is what a backend keeps of a Batch.
type batchImpl interface {
	wait(b *Batch) error
	ready(b *Batch) bool
	free(b *Batch)
}

// Ready reports, without waiting, whether Wait would return at once: the
// submitted batch's lookups are done (or failed), or it is not submitted.
// A producer that keeps several batches in flight polls it between its
// other work and calls Wait once it is true (the datapath's workers,
// --worker-in-flight). It is one load of a word the device writes on
// CUDA with its completion flag, an event query without.
func (b *Batch) Ready() bool {
	if b.cpuDone || !b.sub {
		return true
	}
	return b.impl.ready(b)
}

// Wait blocks until the lookups of the submitted batch are done and returns
// their error; it returns nil at once for a batch not submitted.
func (b *Batch) Wait() error {
	if b.cpuDone {
		b.cpuDone = false
		return b.cpuErr
	}
	if !b.sub {
		return nil
	}
	b.sub = false
	err := b.impl.wait(b)
	if err != nil && b.onDevice {
		err = b.eng.deviceFailed(b, err)
	}
	b.onDevice = false
	return err
}

// Free waits for b and releases its memory; b must not be used afterwards.
func (b *Batch) Free() {
	if b == nil || b.impl == nil {
		return
	}
	b.Wait()
	b.impl.free(b)
	b.impl, b.Keys, b.Out = nil, nil, nil
}

// Addrs6 views an LPM6 batch's keys as addresses.
func (b *Batch) Addrs6() []lpm.Addr6 {
	if b.Width != 4 || len(b.Keys) == 0 {
		return nil
	}
	return unsafe.Slice((*lpm.Addr6)(unsafe.Pointer(&b.Keys[0])), b.Cap)
}

// Rules views a Flow batch's results as rule ids.
func (b *Batch) Rules() []flow.RuleID {
	if len(b.Out) == 0 {
		return nil
	}
	return unsafe.Slice((*flow.RuleID)(unsafe.Pointer(&b.Out[0])), b.Cap)
}

// MaxBatch is the most keys one Batch holds (the kernels index with int32).
const MaxBatch = 1<<31 - 1

// checkNewBatch checks NewBatch's arguments.
func checkNewBatch(kind Kind, width, capacity int) error {
	switch {
	case capacity < 1 || capacity > MaxBatch:
		return fmt.Errorf("gpu: batch of %d keys: want 1..%d", capacity, MaxBatch)
	case kind == LPM4 && width != 1, kind == LPM6 && width != 4:
		return fmt.Errorf("gpu: %v batch of %d words per key: want %d", kind, width, map[Kind]int{LPM4: 1, LPM6: 4}[kind])
	case kind == Flow && (width < 0 || width > flow.KeyWords):
		return fmt.Errorf("gpu: flow batch of %d words per key: want 0..%d", width, flow.KeyWords)
	case kind != LPM4 && kind != LPM6 && kind != Flow:
		return fmt.Errorf("%w: %v", ErrKind, kind)
	}
	return nil
}

// checkSubmit checks a batch against the table it is submitted to: its kind,
// its key width (a flow table's projection P) and its fill.
func checkSubmit(b *Batch, kind Kind, width int) error {
	switch {
	case b == nil || b.impl == nil:
		return fmt.Errorf("gpu: submit of a freed or foreign batch")
	case b.sub || b.cpuDone:
		return fmt.Errorf("gpu: batch submitted again before Wait")
	case b.Kind != kind:
		return fmt.Errorf("%w: %v batch for a %v table", ErrKind, b.Kind, kind)
	case b.Width != width:
		return fmt.Errorf("%w: batch of %d words per key for a table of %d", ErrShortKeys, b.Width, width)
	case b.N < 0 || b.N > b.Cap:
		return fmt.Errorf("gpu: batch holds %d keys of %d", b.N, b.Cap)
	}
	return nil
}

// keyWidth is the key width a table of kind with flow projection p takes.
func keyWidth(kind Kind, p int) int {
	switch kind {
	case LPM4:
		return 1
	case LPM6:
		return 4
	}
	return p
}

// hostBatch is a Batch in ordinary Go memory (the CPU backend's), looked up
// synchronously by Submit.
type hostBatch struct{}

func (h *hostBatch) wait(*Batch) error { return nil }
func (h *hostBatch) ready(*Batch) bool { return true }
func (h *hostBatch) free(*Batch)       {}

func newHostBatch(kind Kind, width, capacity int) (*Batch, error) {
	if err := checkNewBatch(kind, width, capacity); err != nil {
		return nil, err
	}
	// uint64 backing keeps LPM6 keys 8-byte aligned for Addrs6.
	words := make([]uint64, (width*capacity+1)/2)
	keys := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(words))), width*capacity)
	if width*capacity == 0 {
		keys = nil
	}
	return &Batch{Kind: kind, Width: width, Cap: capacity, Keys: keys, Out: make([]uint32, capacity), impl: &hostBatch{}}, nil
}
