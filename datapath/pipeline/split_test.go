package pipeline

import (
	"encoding/binary"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/rule"
)

// gatedDev is a fakeDev whose Send waits until the gate is open.
type gatedDev struct {
	fakeDev
	gate    chan struct{} // closed: open
	waiting atomic.Int32  // Sends waiting at the gate
}

func (d *gatedDev) Send(frames [][]byte) (int, error) {
	d.waiting.Add(1)
	<-d.gate
	d.waiting.Add(-1)
	return d.fakeDev.Send(frames)
}

// countStage counts the frames it sees and passes them.
type countStage struct{ n atomic.Int64 }

func (c *countStage) Rx(port uint32, frames [][]byte, scratch []byte) ([][]byte, []byte) {
	c.n.Add(int64(len(frames)))
	return frames, scratch
}

// splitRig is a switch whose port 1 outputs everything to port 2, a gated
// device, with a counting stage on port 1, split.
func splitRig(t *testing.T) (*rig, *gatedDev, *countStage) {
	r := newRig(t, 1, FailSecure)
	out := &gatedDev{fakeDev: fakeDev{name: "p2"}, gate: make(chan struct{})}
	if err := r.sw.AddPort(2, out); err != nil {
		t.Fatal(err)
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: applyOut(2)})
	st := &countStage{}
	if err := r.sw.SetRxStages(1, st); err != nil {
		t.Fatal(err)
	}
	if err := r.sw.SetRxSplit(1, true); err != nil {
		t.Fatal(err)
	}
	if err := r.sw.SetRxSplit(9, true); err == nil {
		t.Error("SetRxSplit on a missing port: no error")
	}
	return r, out, st
}

// seqBatch fills b with n frames numbered from seq on (the number in the
// frame's last two bytes).
func seqBatch(t *testing.T, b *batcher, seq, n int) {
	frames := make([][]byte, n)
	for i := range frames {
		f := udpFrame(t, "10.0.0.1", "10.0.0.2")
		frames[i] = binary.BigEndian.AppendUint16(f, uint16(seq+i))
	}
	fill(t, b, frames)
}

// checkSeq checks that out holds frames 0..n-1 in order.
func checkSeq(t *testing.T, out [][]byte, n int) {
	t.Helper()
	if len(out) != n {
		t.Fatalf("%d frames out, want %d", len(out), n)
	}
	for i, f := range out {
		if got := int(binary.BigEndian.Uint16(f[len(f)-2:])); got != i {
			t.Fatalf("frame %d out is number %d: out of order", i, got)
		}
	}
}

// TestSplitOrderAndBackPressure: a split port runs its stages on the
// reader (hand) and the switch's work on its process goroutine; with the
// output blocked, the reader hands splitDepth+1 batches and then waits
// (back-pressure) until the output moves; every frame leaves in order.
func TestSplitOrderAndBackPressure(t *testing.T) {
	r, out, st := splitRig(t)
	sr := r.sw.newSplitRunner(1, false)
	const per = 5
	handed := make(chan int, 16)
	go func() {
		b := <-sr.free
		for k := 0; k < splitDepth+2; k++ {
			seqBatch(t, b, k*per, per)
			b = sr.hand(b)
			handed <- k
		}
		close(handed)
	}()
	// The first batch blocks in Send; splitDepth more queue; the reader
	// then waits for a free batcher inside the hand of the last of them.
	// Wait for that (a loaded machine takes its time), then give the
	// reader 50 ms more to show it does not hand more.
	deadline := time.Now().Add(5 * time.Second)
	for (out.waiting.Load() == 0 || len(handed) < splitDepth || st.n.Load() < int64((splitDepth+1)*per)) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(handed); n != splitDepth {
		t.Errorf("%d hands returned with the output blocked, want %d (back-pressure)", n, splitDepth)
	}
	if n := st.n.Load(); n != int64((splitDepth+1)*per) {
		t.Errorf("the stage saw %d frames, want %d: it runs on the reader, before the hand-off", n, (splitDepth+1)*per)
	}
	close(out.gate)
	for range handed {
	}
	sr.stop()
	checkSeq(t, out.take(), (splitDepth+2)*per)
	if got := r.sw.BatchStats().Split; got != splitDepth+2 {
		t.Errorf("BatchStats.Split %d, want %d", got, splitDepth+2)
	}
}

// TestSplitStopDrains: stop with batches in flight (the output blocked)
// returns only once they are all processed, in order.
func TestSplitStopDrains(t *testing.T) {
	r, out, _ := splitRig(t)
	sr := r.sw.newSplitRunner(1, false)
	b := <-sr.free
	const per = 3
	for k := 0; k < splitDepth; k++ {
		seqBatch(t, b, k*per, per)
		b = sr.hand(b)
	}
	var stopped atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); sr.stop(); stopped.Store(true) }()
	time.Sleep(30 * time.Millisecond)
	if stopped.Load() {
		t.Error("stop returned with batches unprocessed")
	}
	close(out.gate)
	wg.Wait()
	checkSeq(t, out.take(), splitDepth*per)
}

// TestSplitStageTakesAll: a batch whose stages take every frame is not
// handed; the reader keeps its batcher.
func TestSplitStageTakesAll(t *testing.T) {
	r, out, _ := splitRig(t)
	close(out.gate)
	if err := r.sw.SetRxStages(1, &markStage{}); err != nil {
		t.Fatal(err)
	}
	sr := r.sw.newSplitRunner(1, false)
	defer sr.stop()
	b := <-sr.free
	f := append(udpFrame(t, "10.0.0.1", "10.0.0.2"), 0xdd) // markStage drops it
	fill(t, b, [][]byte{f})
	if got := sr.hand(b); got != b || len(got.frames) != 0 {
		t.Error("a batch the stages emptied was handed, or not reset")
	}
}
