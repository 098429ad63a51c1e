package pipeline

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/rule"
)

// TestProcessPartsSameFates: a datapath worker's run of several ports'
// batches as one (processParts) gives every frame the fate that Process
// gives it port by port: the same frames leave by the same ports in the
// same order, the same table misses are counted, a port that does not
// receive (NO_RECV) drops its part, and the in_port of each frame is its
// own part's.
func TestProcessPartsSameFates(t *testing.T) {
	testProcessPartsSameFates(t, func() *rig { return newRig(t, 4, FailSecure) })
}

// testProcessPartsSameFates is TestProcessPartsSameFates with the parts
// run on the switch newAll makes (4 ports), Process on the CPU's.
func testProcessPartsSameFates(t *testing.T, newAll func() *rig) {
	setup := func(r *rig) *rig {
		installFates(t, r)                                                                                                // in_port 1: by UDP source port
		r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(3), Instructions: applyOut(4)}) // in_port 3: out port 4
		if err := r.sw.PortMod(&rule.PortMod{PortNo: 4, Config: rule.PortConfigNoRecv, Mask: rule.PortConfigNoRecv}); err != nil {
			t.Fatal(err)
		}
		return r
	}
	one, all := setup(newRig(t, 4, FailSecure)), setup(newAll())
	frames := func(port uint32) [][]byte {
		var fs [][]byte
		for i := range 37 {
			fs = append(fs, flowFrame(t, uint16(port)<<12|uint16(i), 0))
		}
		return fs
	}
	ports := []uint32{1, 3, 2, 4} // 2: no rule (misses); 4: NO_RECV
	var parts []rxPart
	for _, p := range ports {
		one.sw.Process(p, frames(p))
		parts = append(parts, rxPart{no: p, frames: frames(p)})
	}
	all.sw.processParts(parts, true)
	for i := range 4 {
		want, got := sports(one.devs[i].take()), sports(all.devs[i].take())
		if !slices.Equal(want, got) {
			t.Errorf("port %d: sent source ports %v, want %v", i+1, got, want)
		}
		if i == 3 && len(want) != 37 {
			t.Errorf("port 4: in_port 3's frames: %d sent, want 37", len(want))
		}
	}
	a, b := one.sw.Counters(), all.sw.Counters()
	if a.MissDrops != b.MissDrops || a.MissDrops < 37 {
		t.Errorf("table-miss drops: parts %d, port by port %d (want equal, 37 or more)", b.MissDrops, a.MissDrops)
	}
	pa, pb := one.sw.PortInfos(), all.sw.PortInfos()
	for i := range pa {
		if pa[i].Stats.RxDropped != pb[i].Stats.RxDropped {
			t.Errorf("port %d rx_dropped: parts %d, port by port %d", pa[i].Desc.No, pb[i].Stats.RxDropped, pa[i].Stats.RxDropped)
		}
	}
	if bs := all.sw.BatchStats(); bs.Batches != 4 || bs.Frames != 4*37 {
		t.Errorf("batch stats: %d batches of %d frames, want 4 of 148", bs.Batches, bs.Frames)
	}
	// The run's parts: one value each for the one run, the lookups' time
	// counted; Process is not a worker's run.
	for rp := range numRunParts {
		if st := all.sw.RunPartStats(rp); st.Frames != 1 || rp == RunLookup && st.Sum <= 0 {
			t.Errorf("run part %v: %d runs, %v in all; want 1 run (and the lookups' time)", rp, st.Frames, st.Sum)
		}
		if st := one.sw.RunPartStats(rp); st.Frames != 0 {
			t.Errorf("Process recorded %d runs of part %v", st.Frames, rp)
		}
	}
}

// TestRunWorkerNoQueues: a worker without queues, or whose context is
// done, returns at once and without error.
func TestRunWorkerNoQueues(t *testing.T) {
	r := newRig(t, 1, FailSecure)
	done := make(chan error, 1)
	go func() { done <- r.sw.RunWorker(context.Background(), nil) }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RunWorker without queues: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunWorker without queues did not return")
	}
}

// TestRunOverlappedHolds: a datapath worker's run that holds its frames
// (runOverlapped with hold) sends nothing; the next run sends them during
// its first lookup (its meanwhile, run once), before any of its own, and
// the frames of both runs leave as Process sends them, in order.
func TestRunOverlappedHolds(t *testing.T) {
	testRunOverlappedHolds(t, func() *rig { return newRig(t, 4, FailSecure) })
}

// testRunOverlappedHolds is TestRunOverlappedHolds on the switch newAll
// makes (4 ports), Process on the CPU's.
func testRunOverlappedHolds(t *testing.T, newAll func() *rig) {
	one, all := newRig(t, 4, FailSecure), newAll()
	for _, r := range []*rig{one, all} {
		installFates(t, r)
	}
	frames := func(base int) [][]byte {
		var fs [][]byte
		for i := range 40 {
			fs = append(fs, flowFrame(t, uint16(base+i), 0))
		}
		return fs
	}
	one.sw.Process(1, frames(0))
	one.sw.Process(1, frames(1000))
	first := all.sw.runOverlapped([]rxPart{{no: 1, frames: frames(0)}}, true, nil, true)
	if first == nil {
		t.Fatal("runOverlapped with hold returned no worker")
	}
	for i, d := range all.devs {
		if got := d.take(); len(got) != 0 {
			t.Fatalf("port %d: %d frames sent by a run that holds them", i+1, len(got))
		}
	}
	calls := 0
	meanwhile := func() {
		calls++
		first.flush()
		all.sw.workers.Put(first)
	}
	second := all.sw.runOverlapped([]rxPart{{no: 1, frames: frames(1000)}}, false, meanwhile, true)
	if calls != 1 || second == nil {
		t.Fatalf("the second run called meanwhile %d times (want 1), held worker %v", calls, second)
	}
	second.flush()
	all.sw.workers.Put(second)
	sent := 0
	for i := range 4 {
		want, got := sports(one.devs[i].take()), sports(all.devs[i].take())
		if !slices.Equal(want, got) {
			t.Errorf("port %d: sent source ports %v, want %v", i+1, got, want)
		}
		sent += len(want)
	}
	if sent == 0 {
		t.Error("no frame was forwarded: the fates' rules did not apply")
	}
	if st := all.sw.RunPartStats(RunSend); st.Frames != 1 {
		t.Errorf("run part send: %d timed runs, want 1", st.Frames)
	}
}
