package pipeline

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rule"
)

// asyncRig is a rig of 4 ports with installFates' rules for in_port 1 and
// in_port 3's frames sent to port 4.
func asyncRig(t *testing.T) *rig { return withAsyncRules(t, newRig(t, 4, FailSecure)) }

// withAsyncRules installs asyncRig's rules in r (4 ports) and returns it.
func withAsyncRules(t *testing.T, r *rig) *rig {
	installFates(t, r)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(3), Instructions: applyOut(4)})
	return r
}

// testWorker is a datapath worker of r's switch over receive queues of
// ports nos, without sources (the tests fill its batchers), its runs in
// flight up to inFlight (0: synchronous runs).
func testWorker(t *testing.T, r *rig, inFlight int, nos ...uint32) *rxWorker {
	w := &rxWorker{s: r.sw}
	for _, no := range nos {
		w.qs = append(w.qs, rxWorkerQueue{no: no, b: newBatcher(r.sw.cfg.BatchSize)})
	}
	if inFlight > 0 {
		bc, ok := r.sw.cfg.Classifier.(gpu.BatchBackend)
		if !ok {
			t.Fatal("the rig's classifier has no batches")
		}
		w.async = &asyncRuns{bc: bc, max: inFlight}
	}
	return w
}

// closeRun fills each of w's queues' batchers with the frames of frames
// (copies) and closes them into a run, as RunWorker does at a deadline.
func closeRun(t *testing.T, w *rxWorker, frames [][][]byte) {
	for i, fs := range frames {
		var c [][]byte
		for _, f := range fs {
			c = append(c, bytes.Clone(f))
		}
		fill(t, w.qs[i].b, c)
	}
	w.oldest = time.Now()
	w.run(&w.s.batches.delay)
}

// sameSends checks that each of the 4 ports of got sent the frames the
// same port of want sent, in the same order (and ports 2-4 some).
func sameSends(t *testing.T, want, got *rig) {
	t.Helper()
	for p := range 4 {
		w, g := want.devs[p].take(), got.devs[p].take()
		if p > 0 && len(w) == 0 {
			t.Fatalf("port %d: the rules send nothing there", p+1)
		}
		if len(g) != len(w) {
			t.Fatalf("port %d: %d frames sent, want %d", p+1, len(g), len(w))
		}
		for i := range w {
			if !bytes.Equal(g[i], w[i]) {
				t.Fatalf("port %d: frame %d is source port %#x, want %#x", p+1, i, sports(g[i : i+1])[0], sports(w[i : i+1])[0])
			}
		}
	}
}

// TestWorkerRunsInFlightSameFates: a datapath worker whose runs' first
// lookups are in flight (Config.WorkerInFlight) sends every frame where a
// synchronous worker sends it, in the same order on every port, whether
// its runs finish as their lookups come in (reap), when too many are in
// flight, or at the end (drainRuns); it counts the same table misses,
// records every frame's latency, and uses every lookup it made ahead.
func TestWorkerRunsInFlightSameFates(t *testing.T) { testWorkerRunsInFlight(t, asyncRig(t)) }

// testWorkerRunsInFlight is TestWorkerRunsInFlightSameFates with the runs
// in flight on asyncR (asyncRig's ports and rules), the synchronous ones
// on the CPU.
func testWorkerRunsInFlight(t *testing.T, asyncR *rig) {
	syncR := asyncRig(t)
	nos := []uint32{1, 1, 3, 1}
	ws, wa := testWorker(t, syncR, 0, nos...), testWorker(t, asyncR, 3, nos...)
	const runs = 11
	total := 0
	for k := range runs {
		frames := make([][][]byte, len(nos))
		for q := range nos {
			for i := range (q*5 + k*11) % 40 {
				frames[q] = append(frames[q], flowFrame(t, uint16(q<<12|k<<6|i), 0))
			}
			total += len(frames[q])
		}
		closeRun(t, ws, frames)
		closeRun(t, wa, frames)
		if k%4 == 1 {
			wa.reap()
		}
	}
	if n := len(wa.async.flight); n == 0 || n > 3 {
		t.Errorf("%d runs in flight before the drain, want 1 to 3", n)
	}
	wa.drainRuns()
	sameSends(t, syncR, asyncR)
	if a, b := syncR.sw.Counters().MissDrops, asyncR.sw.Counters().MissDrops; a != b || a == 0 {
		t.Errorf("table-miss drops: in flight %d, synchronous %d (want equal, not 0)", b, a)
	}
	if n := asyncR.sw.latency.count.Load(); n != uint64(total) {
		t.Errorf("latency recorded for %d frames, want %d", n, total)
	}
	if bs := asyncR.sw.BatchStats(); bs.Ahead != runs || bs.Relooked != 0 {
		t.Errorf("runs with their lookup ahead used %d, looked up again %d; want %d and 0", bs.Ahead, bs.Relooked, runs)
	}
}

// TestWorkerRunInFlightSeesChange: a FLOW_MOD that comes while a run's
// first lookup is in flight decides that run's frames, as it would a
// synchronous run's that had not yet decided: the run looks the table up
// again (Relooked) instead of using the answer made before the change.
func TestWorkerRunInFlightSeesChange(t *testing.T) { testWorkerRunSeesChange(t, asyncRig(t)) }

// testWorkerRunSeesChange is TestWorkerRunInFlightSeesChange on r
// (asyncRig's ports and rules).
func testWorkerRunSeesChange(t *testing.T, r *rig) {
	w := testWorker(t, r, 2, 1)
	var frames [][]byte
	for i := range 24 {
		frames = append(frames, flowFrame(t, uint16(i), 0))
	}
	closeRun(t, w, [][][]byte{frames})
	if len(w.async.flight) != 1 || !w.async.flight[0].looked {
		t.Fatal("the run's lookup was not made ahead")
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 20, Match: matchInPort(1), Instructions: applyOut(4)})
	w.drainRuns()
	if got := len(r.devs[3].take()); got != len(frames) {
		t.Errorf("port 4 got %d frames after the change, want all %d", got, len(frames))
	}
	for p := range 3 {
		if got := r.devs[p].take(); len(got) != 0 {
			t.Errorf("port %d got %d frames decided by the tables before the change", p+1, len(got))
		}
	}
	if bs := r.sw.BatchStats(); bs.Ahead != 0 || bs.Relooked != 1 {
		t.Errorf("ahead %d, relooked %d; want 0 and 1", bs.Ahead, bs.Relooked)
	}
}

// TestWorkerRunsInFlightAllocateNothing: once warm, a worker's runs in
// flight (their batchers, packets, lookup batches and send queues kept
// from run to run) allocate nothing from their close to their transmit.
func TestWorkerRunsInFlightAllocateNothing(t *testing.T) {
	t.Run("own batches", func(t *testing.T) { testRunsInFlightAllocs(t, false) })
	t.Run("shared batches", func(t *testing.T) { testRunsInFlightAllocs(t, true) })
}

func testRunsInFlightAllocs(t *testing.T, shared bool) {
	r, devs, frames := quietRig(t)
	if shared {
		gatherOn(t, r)
	}
	w := testWorker(t, r, 2, 1, 1)
	now := time.Now()
	var f afpacket.Frame
	cycle := func() {
		for i := range w.qs {
			for _, d := range frames {
				f = afpacket.Frame{Data: d, Len: len(d), Time: now}
				w.qs[i].b.add(&f, now)
			}
		}
		w.oldest = now
		w.run(&w.s.batches.delay)
		w.reap()
	}
	for range 4 {
		cycle()
	}
	switch n := testing.AllocsPerRun(100, cycle); {
	case n != 0 && raceEnabled:
		t.Logf("a worker's run in flight allocated %v times under the race detector", n)
	case n != 0:
		t.Errorf("a worker's run in flight allocated %v times", n)
	}
	w.drainRuns()
	if devs[1].sent.Load() == 0 || devs[2].sent.Load() == 0 {
		t.Errorf("sent %d and %d frames on ports 2 and 3: the rules did not forward", devs[1].sent.Load(), devs[2].sent.Load())
	}
}

// gatherOn gives r's switch a Gatherer over its classifier (depth 1) and
// returns it.
func gatherOn(t *testing.T, r *rig) *gpu.Gatherer {
	ga, err := gpu.NewGatherer(r.sw.cfg.Classifier.(gpu.BatchBackend), gpu.GatherConfig{Depth: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.sw.cfg.Gatherer = ga
	return ga
}

// TestWorkerRunsInFlightShared is TestWorkerRunsInFlightSameFates and
// TestWorkerRunInFlightSeesChange with the runs' lookups ahead in a
// Gatherer's shared batches: the same fates, every run a share of a
// submitted batch, a change in flight seen.
func TestWorkerRunsInFlightShared(t *testing.T) {
	r := asyncRig(t)
	ga := gatherOn(t, r)
	testWorkerRunsInFlight(t, r)
	if st := ga.Stats(); st.Shares != 11 || st.InFlight != 0 {
		t.Errorf("gatherer stats %+v: want 11 shares, none in flight", st)
	}
	r2 := asyncRig(t)
	gatherOn(t, r2)
	testWorkerRunSeesChange(t, r2)
}

// TestWorkersShareBatches: two workers (ports 1 and 3) with their
// lookups ahead in one Gatherer, their runs closed in turn on one
// goroutine (so that a run's keys join another's open batch while the slot
// is busy) or on a goroutine each, and the same with a waiting run
// retiring the batch in flight (GatherConfig.WaitForSlot); each port gets
// what a synchronous worker sends it, in order, and in turn the runs
// shared batches.
func TestWorkersShareBatches(t *testing.T) {
	for _, slot := range []bool{false, true} {
		name := map[bool]string{false: "", true: ", waiting for a slot"}[slot]
		t.Run("in turn"+name, func(t *testing.T) {
			if st := testWorkersShare(t, false, slot); st.Batches >= st.Shares {
				t.Errorf("gatherer stats %+v: the runs shared no batch", st)
			}
		})
		t.Run("at once"+name, func(t *testing.T) { testWorkersShare(t, true, slot) })
	}
}

func testWorkersShare(t *testing.T, concurrent, waitSlot bool) gpu.GatherStats {
	syncR, r := asyncRig(t), asyncRig(t)
	ga := gatherOn(t, r)
	if waitSlot {
		var err error
		if ga, err = gpu.NewGatherer(r.sw.cfg.Classifier.(gpu.BatchBackend), gpu.GatherConfig{Depth: 1, WaitForSlot: true}); err != nil {
			t.Fatal(err)
		}
		r.sw.cfg.Gatherer = ga
	}
	const runs = 40
	frames := func(no uint32, k int) [][]byte {
		var fs [][]byte
		for i := range 1 + (k*7)%23 {
			fs = append(fs, flowFrame(t, uint16(no)<<12|uint16(k)<<5|uint16(i), 0))
		}
		return fs
	}
	nos := []uint32{1, 3}
	var ws []*rxWorker
	for _, no := range nos {
		sw := testWorker(t, syncR, 0, no)
		for k := range runs {
			closeRun(t, sw, [][][]byte{frames(no, k)})
		}
		ws = append(ws, testWorker(t, r, 2, no))
	}
	if concurrent {
		var wg sync.WaitGroup
		for i, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range runs {
					closeRun(t, w, [][][]byte{frames(nos[i], k)})
					w.reap()
				}
				w.drainRuns()
			}()
		}
		wg.Wait()
	} else {
		for k := range runs {
			for i, w := range ws {
				closeRun(t, w, [][][]byte{frames(nos[i], k)})
			}
			if k%3 == 2 {
				ws[k%2].reap()
			}
		}
		for _, w := range ws {
			w.drainRuns()
		}
	}
	sameSends(t, syncR, r)
	st := ga.Stats()
	if st.Shares != 2*runs || st.InFlight != 0 || st.Batches == 0 || st.Batches > st.Shares {
		t.Errorf("gatherer stats %+v: want %d shares in at most as many batches, none in flight", st, 2*runs)
	}
	t.Logf("gatherer: %d shares in %d batches (%d closed by a wait, %d full)", st.Shares, st.Batches, st.ByWait, st.ByFull)
	return st
}
