package pipeline

import (
	"encoding/binary"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// gatedLooker stands in for a device: it hides the Engine's DeviceServes
// (so that the Coalescer batches every lookup) and holds each lookup
// until its gate is open.
type gatedLooker struct {
	be   gpu.FlowLooker
	mu   sync.Mutex
	gate chan struct{} // nil or closed: open
}

func (g *gatedLooker) LookupFlow(id gpu.TableID, soa []uint32, n int, out []flow.RuleID) error {
	g.mu.Lock()
	c := g.gate
	g.mu.Unlock()
	if c != nil {
		<-c
	}
	return g.be.LookupFlow(id, soa, n, out)
}

// newCoalescedRig is newRig with a Coalescer over the rig's CPU engine
// behind gl (the asynchronous datapath).
func newCoalescedRig(t *testing.T, n int, gl *gatedLooker, depth int) *rig {
	t.Helper()
	eng, err := gpu.Open("cpu", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	gl.be = eng
	return newCoalescedRigOn(t, n, eng, gl, depth, 64)
}

// newCoalescedRigOn builds a rig whose tables are in eng and whose
// lookups go through a Coalescer over looker.
func newCoalescedRigOn(t *testing.T, n int, eng *gpu.Engine, looker gpu.FlowLooker, depth, minBatch int) *rig {
	t.Helper()
	return newCoalescedRigFlight(t, n, eng, looker, depth, minBatch, 0)
}

// newCoalescedRigFlight is newCoalescedRigOn with Config.InFlight set
// (0: the default).
func newCoalescedRigFlight(t *testing.T, n int, eng *gpu.Engine, looker gpu.FlowLooker, depth, minBatch, inFlight int) *rig {
	t.Helper()
	co, err := gpu.NewCoalescer(looker, gpu.CoalescerConfig{MaxBatch: 4096, MinBatch: minBatch, MaxDelay: 200 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := New(Config{DatapathID: 1, Tables: 3, Classifier: eng, FailMode: FailSecure, Coalescer: co, Depth: depth, InFlight: inFlight})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{sw: sw, ctrl: &fakeCtrl{conns: 1}}
	sw.SetController(r.ctrl)
	for i := 1; i <= n; i++ {
		d := &fakeDev{name: "p" + string(rune('0'+i))}
		r.devs = append(r.devs, d)
		if err := sw.AddPort(uint32(i), d); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// installFates installs a two-table rule set whose fate of a frame depends
// on its UDP source port: &3 == 0 out port 2; 1: metadata, table 1, which
// sends &4 == 0 out port 2 and misses (drops) the rest; 2: dropped by an
// empty instruction set; 3: out port 3 by the in_port rule.
func installFates(t *testing.T, r *rig) {
	udp := func(v, mask uint64) flow.Match {
		m := matchInPort(1)
		for _, f := range []struct {
			f    flow.Field
			v, m uint64
		}{{flow.FieldEthType, 0x800, 0xffff}, {flow.FieldIPProto, 17, 0xff}, {flow.FieldUDPSrc, v, mask}} {
			if err := m.SetFieldUint(f.f, f.v, f.m); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: udp(0, 3), Instructions: applyOut(2)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: udp(1, 3), Instructions: rule.Instructions{
		Has: rule.HasWriteMetadata | rule.HasGotoTable, Metadata: 5, MetadataMask: 0xff, GotoTable: 1}})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: udp(2, 3)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: applyOut(3)})
	m := udp(0, 4)
	if err := m.SetFieldUint(flow.FieldMetadata, 5, 0xff); err != nil {
		t.Fatal(err)
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: 1, Match: m, Instructions: applyOut(2)})
}

// sports lists the UDP source ports of frames, in order.
func sports(frames [][]byte) []uint16 {
	var s []uint16
	for _, f := range frames {
		s = append(s, binary.BigEndian.Uint16(f[14+20:]))
	}
	return s
}

// fill puts frames into a batcher as RunPort does.
func fill(t *testing.T, b *batcher, frames [][]byte) {
	now := time.Now()
	for _, f := range frames {
		if !b.add(&afpacket.Frame{Data: f, Len: len(f), Time: now}, now) {
			t.Fatal("frame refused")
		}
	}
}

// TestAsyncSameFatesInOrder runs the same frames from several receive
// queues through the synchronous path and through queue runners over a
// Coalescer (several queues at once, shared batches): every frame meets
// the same fate, each output port gets each queue's frames in the order
// they arrived, the counters agree, and every frame's latency is recorded.
func TestAsyncSameFatesInOrder(t *testing.T) {
	async := newCoalescedRig(t, 3, &gatedLooker{}, 3)
	testAsyncSameFates(t, async, false)
	if s := async.sw.cfg.Coalescer.Stats(); s.Batches == 0 || s.Callers == 0 || s.InFlight != 0 {
		t.Errorf("coalescer stats %+v", s)
	}
}

// testAsyncSameFates is TestAsyncSameFatesInOrder on the asynchronous rig
// async (its tables empty): the queues hand their batches to their runners
// (queueRunner.hand), or with viaNext give them to queueRunner.next as
// RunPort does (which may run them itself).
func testAsyncSameFates(t *testing.T, async *rig, viaNext bool) {
	const queues, batches = 4, 12
	sync0 := newRig(t, 3, FailSecure)
	installFates(t, sync0)
	installFates(t, async)
	in := make([][][][]byte, queues) // queue, batch, frames
	total := 0
	for q := range queues {
		for k := range batches {
			var fs [][]byte
			for i := range 1 + (q*7+k*13)%60 {
				fs = append(fs, flowFrame(t, uint16(q<<12|k<<6|i), 0))
			}
			total += len(fs)
			in[q] = append(in[q], fs)
		}
	}
	copyOf := func(fs [][]byte) [][]byte {
		var c [][]byte
		for _, f := range fs {
			c = append(c, append([]byte(nil), f...))
		}
		return c
	}
	for q := range queues {
		for _, fs := range in[q] {
			sync0.sw.Process(1, copyOf(fs))
		}
	}
	var wg sync.WaitGroup
	for q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			qr := async.sw.newQueueRunner(1, async.sw.cfg.Coalescer)
			b := <-qr.free
			for _, fs := range in[q] {
				fill(t, b, fs)
				if viaNext {
					b = qr.next(b)
				} else {
					b = qr.hand(b)
				}
			}
			qr.stop()
		}()
	}
	wg.Wait()
	for p := 1; p <= 2; p++ {
		want, got := sports(sync0.devs[p].take()), sports(async.devs[p].take())
		if len(want) == 0 {
			t.Fatalf("port %d: the rule set sends nothing there", p+1)
		}
		for q := range uint16(queues) {
			of := func(s []uint16) []uint16 {
				return slices.DeleteFunc(slices.Clone(s), func(v uint16) bool { return v>>12 != q })
			}
			if w, g := of(want), of(got); !slices.Equal(w, g) {
				t.Fatalf("port %d, queue %d: got source ports %v, want %v", p+1, q, g, w)
			}
		}
		if len(want) != len(got) {
			t.Fatalf("port %d: %d frames, want %d", p+1, len(got), len(want))
		}
	}
	if a, b := sync0.sw.Counters().MissDrops, async.sw.Counters().MissDrops; a != b || a == 0 {
		t.Errorf("table-miss drops: async %d, sync %d (want equal, not 0)", b, a)
	}
	if n := async.sw.latency.count.Load(); n != uint64(total) {
		t.Errorf("latency recorded for %d frames, want %d", n, total)
	}
}

// TestAsyncReaderRunsAhead: while a batch's lookup is held (a slow
// device), the queue's reader still hands over batches without waiting
// until Depth are unfinished (the held one included), and only the next
// one waits; once the lookup returns, all of
// them are forwarded in order.
func TestAsyncReaderRunsAhead(t *testing.T) {
	const depth = 3
	gl := &gatedLooker{gate: make(chan struct{})}
	r := newCoalescedRig(t, 3, gl, depth)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: applyOut(2)})
	qr := r.sw.newQueueRunner(1, r.sw.cfg.Coalescer)
	b := <-qr.free
	next := uint16(0)
	hand := func(b *batcher) *batcher {
		var fs [][]byte
		for range 5 {
			fs = append(fs, flowFrame(t, next, 0))
			next++
		}
		fill(t, b, fs)
		return qr.hand(b)
	}
	for i := range depth { // the one in flight, then depth-1 queued
		done := make(chan *batcher)
		go func() { done <- hand(b) }()
		select {
		case b = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("hand %d waited while a lookup was held", i)
		}
	}
	blocked := make(chan *batcher)
	go func() { blocked <- hand(b) }()
	select {
	case <-blocked:
		t.Fatal("the reader ran more than Depth batches ahead")
	case <-time.After(50 * time.Millisecond):
	}
	if n := len(r.devs[1].take()); n != 0 {
		t.Fatalf("%d frames forwarded while the lookup was held", n)
	}
	close(gl.gate)
	select {
	case <-blocked:
	case <-time.After(5 * time.Second):
		t.Fatal("the reader did not go on once the lookup returned")
	}
	qr.stop()
	got := sports(r.devs[1].take())
	want := make([]uint16, 5*(depth+1))
	for i := range want {
		want[i] = uint16(i)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("forwarded %v, want %v", got, want)
	}
}

// heldLooker holds every lookup until the test releases it by its arrival
// index, so that lookups can be answered out of order.
type heldLooker struct {
	be      gpu.FlowLooker
	mu      sync.Mutex
	gates   []chan struct{}
	arrived chan int
}

func (h *heldLooker) LookupFlow(id gpu.TableID, soa []uint32, n int, out []flow.RuleID) error {
	g := make(chan struct{})
	h.mu.Lock()
	h.gates = append(h.gates, g)
	i := len(h.gates) - 1
	h.mu.Unlock()
	h.arrived <- i
	<-g
	return h.be.LookupFlow(id, soa, n, out)
}

func (h *heldLooker) release(i int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.gates[i])
}

// heldQueue is a three-port rig whose Coalescer's lookups wait for
// heldLooker's release (Config.Depth depth, InFlight inFlight), with
// in_port 1 sent out of port 2, and a runner for port 1's queue.
func heldQueue(t *testing.T, depth, inFlight int) (*rig, *heldLooker, *queueRunner) {
	t.Helper()
	eng, err := gpu.Open("cpu", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	hl := &heldLooker{be: eng, arrived: make(chan int, 16)}
	r := newCoalescedRigFlight(t, 3, eng, hl, depth, 64, inFlight)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: applyOut(2)})
	return r, hl, r.sw.newQueueRunner(1, r.sw.cfg.Coalescer)
}

// fiveFrames is batch k's frames: UDP source ports 5k to 5k+4.
func fiveFrames(t *testing.T, k int) [][]byte {
	var fs [][]byte
	for i := range 5 {
		fs = append(fs, flowFrame(t, uint16(k*5+i), 0))
	}
	return fs
}

// TestReaderStallsCounted: with every lookup held, a queue's reader hands
// its closed batches over without waiting while its runner has room
// (Config.Depth batches) and an empty batcher to give back; the hand-off
// after that waits until the lookups are answered, and that wait is what
// BatchStats' Stalls and StallTime count, for each number of batches in
// flight.
func TestReaderStallsCounted(t *testing.T) {
	for _, inFlight := range []int{1, 2} {
		r, hl, qr := heldQueue(t, 1, inFlight)
		b := <-qr.free
		var held []int
		blocked := false
		for k := 0; k <= r.sw.cfg.Depth+1 && !blocked; k++ {
			fill(t, b, fiveFrames(t, k))
			handed := make(chan *batcher, 1)
			go func() { handed <- qr.hand(b) }()
			select {
			case b = <-handed:
				// The first hand-off finds its runner empty: it cannot
				// wait (later ones may, briefly, until the runner's
				// goroutines take what they were handed).
				if st := r.sw.BatchStats(); k == 0 && st.Stalls != 0 {
					t.Fatalf("in flight %d: %d stalls for the first hand-off", inFlight, st.Stalls)
				}
				continue
			case <-time.After(50 * time.Millisecond):
			}
			blocked = true
			for done := false; !done; { // answer every lookup until the hand-off returns
				select {
				case b = <-handed:
					done = true
				case j := <-hl.arrived:
					held = append(held, j)
				case <-time.After(5 * time.Millisecond):
					for _, j := range held {
						hl.release(j)
					}
					held = held[:0]
				}
			}
		}
		if !blocked {
			t.Fatalf("in flight %d: no hand-off waited in %d batches with every lookup held (depth %d)", inFlight, r.sw.cfg.Depth+2, r.sw.cfg.Depth)
		}
		st := r.sw.BatchStats()
		if st.Stalls == 0 || st.StallTime < 40*time.Millisecond {
			t.Errorf("in flight %d: %d stalls, %v, want the wait of about 50 ms counted", inFlight, st.Stalls, st.StallTime)
		}
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case j := <-hl.arrived:
					hl.release(j)
				case <-stop:
					return
				}
			}
		}()
		for _, j := range held {
			hl.release(j)
		}
		qr.stop()
		close(stop)
		if got := r.devs[1].take(); len(got) == 0 {
			t.Errorf("in flight %d: nothing forwarded", inFlight)
		}
	}
}

// TestHandoversCounted: two batches of one queue in flight, their lookups
// held and answered in either order. Answered second first, the second
// batch waits for its turn and is woken by the first's transmit (a
// hand-over counted as wake); answered in order 30 ms apart, the queue's
// transmit stands idle those 30 ms for the second batch's lookup (counted
// as lookup).
func TestHandoversCounted(t *testing.T) {
	for _, secondFirst := range []bool{true, false} {
		r, hl, qr := heldQueue(t, 3, 2)
		b := <-qr.free
		for k := range 2 {
			fill(t, b, fiveFrames(t, k))
			b = qr.hand(b)
			select {
			case j := <-hl.arrived:
				if j != k {
					t.Fatalf("lookup %d arrived for batch %d", j, k)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("batch %d made no lookup", k)
			}
		}
		first, second := 0, 1
		if secondFirst {
			first, second = 1, 0
		}
		hl.release(first)
		var out [][]byte
		if !secondFirst { // the first batch has transmitted (its token is out) before the 30 ms begin
			for deadline := time.Now().Add(5 * time.Second); len(out) < 5 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				out = append(out, r.devs[1].take()...)
			}
		}
		time.Sleep(30 * time.Millisecond)
		hl.release(second)
		qr.stop()
		out = append(out, r.devs[1].take()...)
		if got := sports(out); len(got) != 10 || got[0] != 0 || got[9] != 9 {
			t.Fatalf("second answered first %v: forwarded %v, want the 10 frames in order", secondFirst, got)
		}
		st := r.sw.BatchStats()
		if st.Handovers != 1 {
			t.Fatalf("second answered first %v: %d hand-overs, want 1", secondFirst, st.Handovers)
		}
		if secondFirst && (st.HandoverLookup != 0 || st.HandoverWake >= 30*time.Millisecond) {
			t.Errorf("second batch waiting: idle %v for a wake-up, %v for a lookup; want a wake-up under 30 ms and no lookup", st.HandoverWake, st.HandoverLookup)
		}
		if !secondFirst && (st.HandoverWake != 0 || st.HandoverLookup < 30*time.Millisecond) {
			t.Errorf("second lookup answered 30 ms late: idle %v for a wake-up, %v for a lookup; want none and about 30 ms", st.HandoverWake, st.HandoverLookup)
		}
	}
}

// TestAsyncInFlightInOrder: with InFlight 2 one receive queue has two
// lookups on the device at once (the second batch's is made while the
// first's is held); answered in reverse, the second batch still waits for
// the first to transmit, and the frames leave in the order they arrived.
// With InFlight 1 the second lookup is not made until the first returns.
func TestAsyncInFlightInOrder(t *testing.T) {
	for _, inFlight := range []int{2, 1} {
		r, hl, qr := heldQueue(t, 3, inFlight)
		b := <-qr.free
		hand := func(k int) {
			fill(t, b, fiveFrames(t, k))
			b = qr.hand(b)
		}
		wait := func(d time.Duration) (int, bool) {
			select {
			case i := <-hl.arrived:
				return i, true
			case <-time.After(d):
				return 0, false
			}
		}
		// The second batch comes once the first's lookup is on the
		// device (before, the Coalescer would put both in one batch).
		hand(0)
		if _, ok := wait(5 * time.Second); !ok {
			t.Fatalf("in flight %d: the first batch's lookup never came", inFlight)
		}
		hand(1)
		second, ok := wait(300 * time.Millisecond)
		if inFlight == 1 {
			if ok {
				t.Fatal("in flight 1: a second lookup while the first was held")
			}
			hl.release(0)
			if second, ok = wait(5 * time.Second); !ok {
				t.Fatal("in flight 1: the second lookup never came")
			}
			hl.release(second)
		} else {
			if !ok {
				t.Fatal("in flight 2: the second batch's lookup was not made while the first's was held")
			}
			hl.release(second) // answered first
			time.Sleep(50 * time.Millisecond)
			if n := len(r.devs[1].take()); n != 0 {
				t.Fatalf("in flight 2: %d frames of the second batch left before the first batch's", n)
			}
			hl.release(1 - second)
		}
		qr.stop()
		got := sports(r.devs[1].take())
		want := []uint16{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
		if !slices.Equal(got, want) {
			t.Fatalf("in flight %d: forwarded %v, want %v", inFlight, got, want)
		}
		if n := r.sw.latency.count.Load(); n != 10 {
			t.Errorf("in flight %d: latency of %d frames recorded, want 10", inFlight, n)
		}
	}
}
