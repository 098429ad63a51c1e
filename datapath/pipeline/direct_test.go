package pipeline

import (
	"bytes"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// quietLog discards what an Engine logs (a device failure, calibrations).
func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil)) }

// TestDirectAllOnCPU: with --backend auto placing every table on the CPU
// (an Engine with a device, its host cost per key set so high that no
// table is worth it), the receive queues run their batches themselves:
// the Coalescer sees no lookup at all (no shared batch, no pass-through),
// every batch counts as direct, and the fates and per-queue order are the
// CPU backend's.
func TestDirectAllOnCPU(t *testing.T) {
	eng := gpu.NewEngine(gpu.EngineConfig{Devices: []gpu.Backend{gpu.NewCPU()}, MinBatch: 64, Mode: gpu.ModeAuto,
		Auto: gpu.AutoConfig{HostNsPerKey: 1e9, Delay: time.Millisecond}, Logger: quietLog()})
	t.Cleanup(func() { eng.Close() })
	r := newCoalescedRigFlight(t, 3, eng, eng, 3, 64, 0)
	testAsyncSameFates(t, r, true)
	if s := r.sw.cfg.Coalescer.Stats(); s.Batches != 0 || s.Callers != 0 || s.Direct != 0 {
		t.Errorf("coalescer stats %+v: want no lookup through it", s)
	}
	bs := r.sw.BatchStats()
	if bs.Direct == 0 || bs.Shared != 0 {
		t.Errorf("batches: %d direct, %d shared; want all direct", bs.Direct, bs.Shared)
	}
	for _, tb := range eng.TableBackends() {
		if tb.Backend != "cpu" {
			t.Errorf("table %d on %s, want cpu", tb.Table, tb.Backend)
		}
	}
	var m bytes.Buffer
	if err := WriteMetrics(&m, r.sw); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(m.Bytes(), []byte(`gswitch_batches_path_total{path="shared"} 0`)) ||
		bytes.Contains(m.Bytes(), []byte(`gswitch_batches_path_total{path="direct"} 0`)) {
		t.Errorf("metrics do not say the batches ran direct:\n%s", grepLines(m.Bytes(), "gswitch_batches_path_total"))
	}
}

// grepLines returns b's lines that contain s.
func grepLines(b []byte, s string) []byte {
	var out []byte
	for _, l := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(l, []byte(s)) {
			out = append(append(out, l...), '\n')
		}
	}
	return out
}

// movingLooker is a Coalescer backend whose tables a test moves between
// the CPU and a device (DeviceServes, PlacementGeneration, as the
// Engine's); its device lookups take a while, so that batches are in
// flight when a table moves.
type movingLooker struct {
	be     gpu.FlowLooker
	onDev  atomic.Bool
	gen    atomic.Uint64
	lookup atomic.Uint64 // lookups made through it
}

func (m *movingLooker) DeviceServes(gpu.TableID, int) bool { return m.onDev.Load() }
func (m *movingLooker) PlacementGeneration() uint64        { return m.gen.Load() }

func (m *movingLooker) LookupFlow(id gpu.TableID, soa []uint32, n int, out []flow.RuleID) error {
	m.lookup.Add(1)
	if m.onDev.Load() {
		time.Sleep(150 * time.Microsecond)
	}
	return m.be.LookupFlow(id, soa, n, out)
}

// move puts the tables on the device (or the CPU) and moves the generation.
func (m *movingLooker) move(dev bool) {
	m.onDev.Store(dev)
	m.gen.Add(1)
}

// TestDirectSharedSwitchOver: while the tables move CPU → device → CPU
// several times mid-stream, four receive queues (InFlight 1 and 2) keep
// giving batches to queueRunner.next: both paths run, and every queue's
// frames arrive, none lost, in the order they were received (a direct
// batch waits for the shared batches handed before it to transmit).
//
// With split, port 1 is split (SetRxSplit): the direct batches go to the
// queue runner's split runner (stages on the reader, the rest on its
// goroutine), and the order still holds across the switch-overs.
func TestDirectSharedSwitchOver(t *testing.T) {
	for _, c := range []struct {
		inFlight int
		split    bool
	}{{2, false}, {1, false}, {2, true}, {1, true}} {
		inFlight := c.inFlight
		eng, err := gpu.Open("cpu", nil, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { eng.Close() })
		ml := &movingLooker{be: eng}
		r := newCoalescedRigFlight(t, 3, eng, ml, 3, 64, inFlight)
		r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: applyOut(2)})
		if err := r.sw.SetRxSplit(1, c.split); err != nil {
			t.Fatal(err)
		}

		const queues, perBatch, maxBatches, moves = 4, 5, 800, 6
		var stop atomic.Bool
		sent := make([]int, queues)
		var wg sync.WaitGroup
		for q := range queues {
			wg.Add(1)
			go func() {
				defer wg.Done()
				qr := r.sw.newQueueRunner(1, r.sw.cfg.Coalescer)
				defer qr.stop()
				b := <-qr.free
				for k := 0; k < maxBatches && !stop.Load(); k++ {
					var fs [][]byte
					for range perBatch {
						fs = append(fs, flowFrame(t, uint16(q<<12|sent[q]), 0))
						sent[q]++
					}
					fill(t, b, fs)
					b = qr.next(b)
				}
			}()
		}
		// Move the tables once the current path has run a few batches.
		waitFor := func(count func(BatchStats) uint64) bool {
			from := count(r.sw.BatchStats())
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Microsecond) {
				if count(r.sw.BatchStats()) >= from+8 {
					return true
				}
			}
			return false
		}
		direct := func(s BatchStats) uint64 { return s.Direct }
		shared := func(s BatchStats) uint64 { return s.Shared }
		ok := true
		for i := 0; i < moves && ok; i++ {
			if i%2 == 0 {
				ok = waitFor(direct)
				ml.move(true)
			} else {
				ok = waitFor(shared)
				ml.move(false)
			}
		}
		ok = ok && waitFor(direct)
		stop.Store(true)
		wg.Wait()
		if !ok {
			t.Fatalf("in flight %d: the queues stopped giving batches before the tables had moved %d times (batches %+v)", inFlight, moves, r.sw.BatchStats())
		}
		got := sports(r.devs[1].take())
		total := 0
		for q := range queues {
			total += sent[q]
			of := slices.DeleteFunc(slices.Clone(got), func(v uint16) bool { return int(v>>12) != q })
			for i, v := range of {
				if int(v&0xfff) != i {
					t.Fatalf("in flight %d, split %v, queue %d: frame %d is the queue's frame %d (of %d sent, %d arrived)", inFlight, c.split, q, i, v&0xfff, sent[q], len(of))
				}
			}
			if len(of) != sent[q] {
				t.Fatalf("in flight %d, split %v, queue %d: %d frames arrived, %d sent", inFlight, c.split, q, len(of), sent[q])
			}
		}
		bs := r.sw.BatchStats()
		if bs.Direct+bs.Shared != uint64(total/perBatch) {
			t.Errorf("in flight %d: %d direct + %d shared batches, %d given", inFlight, bs.Direct, bs.Shared, total/perBatch)
		}
		if c.split != (bs.Split == bs.Direct && bs.Split > 0) || !c.split && bs.Split != 0 {
			t.Errorf("in flight %d, split %v: %d batches on the split runner, %d direct", inFlight, c.split, bs.Split, bs.Direct)
		}
		if cs := r.sw.cfg.Coalescer.Stats(); cs.Batches == 0 || cs.InFlight != 0 {
			t.Errorf("in flight %d: coalescer stats %+v", inFlight, cs)
		}
		if n := r.sw.latency.count.Load(); n != uint64(total) {
			t.Errorf("in flight %d: latency of %d frames recorded, want %d", inFlight, n, total)
		}
	}
}

// failingDev is a device (a CPU backend) whose lookups fail once told to.
type failingDev struct {
	*gpu.CPU
	fail atomic.Bool
}

func (d *failingDev) Name() string { return "failing" }

func (d *failingDev) LookupFlow(id gpu.TableID, soa []uint32, n int, out []flow.RuleID) error {
	if d.fail.Load() {
		return errors.New("device lost")
	}
	return d.CPU.LookupFlow(id, soa, n, out)
}

// TestDirectAfterDeviceFailure: with --backend gpu the queues run the
// shared-batch path; once the Engine takes its device out of service (a
// failed lookup: the Engine answers it on the CPU) they switch to the
// synchronous path, and the frames still arrive in order.
func TestDirectAfterDeviceFailure(t *testing.T) {
	dev := &failingDev{CPU: gpu.NewCPU()}
	eng := gpu.NewEngine(gpu.EngineConfig{Devices: []gpu.Backend{dev}, MinBatch: 1, Mode: gpu.ModeGPU, Logger: quietLog()})
	t.Cleanup(func() { eng.Close() })
	r := newCoalescedRigFlight(t, 3, eng, eng, 3, 1, 0)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: applyOut(2)})
	qr := r.sw.newQueueRunner(1, r.sw.cfg.Coalescer)
	b := <-qr.free
	next := 0
	give := func(batches int) {
		for range batches {
			var fs [][]byte
			for range 4 {
				fs = append(fs, flowFrame(t, uint16(next), 0))
				next++
			}
			fill(t, b, fs)
			b = qr.next(b)
		}
	}
	give(5)
	if bs := r.sw.BatchStats(); bs.Shared != 5 || bs.Direct != 0 {
		t.Fatalf("device in service: %d shared, %d direct batches; want 5, 0", bs.Shared, bs.Direct)
	}
	dev.fail.Store(true)
	give(10)
	qr.stop()
	bs := r.sw.BatchStats()
	if bs.Direct == 0 || bs.Shared+bs.Direct != 15 {
		t.Fatalf("after the device failed: %d shared, %d direct batches; want direct ones, 15 in all", bs.Shared, bs.Direct)
	}
	got := sports(r.devs[1].take())
	for i, v := range got {
		if int(v) != i {
			t.Fatalf("frame %d is frame %d", i, v)
		}
	}
	if len(got) != next {
		t.Fatalf("%d frames arrived, %d sent", len(got), next)
	}
}
