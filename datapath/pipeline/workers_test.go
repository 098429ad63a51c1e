package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
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

// quietDev is a Device that counts the frames sent through it and
// allocates nothing.
type quietDev struct {
	sent atomic.Int64
	info afpacket.LinkInfo
}

func (d *quietDev) Send(frames [][]byte) (int, error) {
	d.sent.Add(int64(len(frames)))
	return len(frames), nil
}
func (d *quietDev) Link() afpacket.LinkInfo        { return d.info }
func (d *quietDev) Stats() (afpacket.Stats, error) { return afpacket.Stats{}, nil }

// quietRig is a switch of 4 ports that are quietDevs, with installFates'
// rules (write_metadata and goto_table for a quarter of the frames), and
// 64 frames of in_port 1's rules.
func quietRig(t *testing.T) (*rig, *[4]quietDev, [][]byte) {
	r := newRig(t, 0, FailSecure)
	var devs [4]quietDev
	for i := range devs {
		devs[i].info = afpacket.LinkInfo{Name: fmt.Sprint("q", i+1), AdminUp: true, OperUp: true}
		if err := r.sw.AddPort(uint32(i+1), &devs[i]); err != nil {
			t.Fatal(err)
		}
	}
	installFates(t, r)
	var frames [][]byte
	for i := range 64 {
		frames = append(frames, flowFrame(t, uint16(i), 0))
	}
	return r, &devs, frames
}

// TestProcessPartsAllocatesNothing: once warm, a datapath worker's run
// through write_metadata, goto_table and output allocates nothing, so that
// forwarding brings no garbage collection (whose marking of a switch with
// 131,072 rules took 90 ms of one of its processors on an H200 host).
func TestProcessPartsAllocatesNothing(t *testing.T) {
	r, devs, frames := quietRig(t)
	sw := r.sw
	parts := []rxPart{{no: 1, frames: frames}, {no: 1, frames: frames}}
	sw.processParts(parts, true)
	switch n := testing.AllocsPerRun(100, func() { sw.processParts(parts, false) }); {
	case n != 0 && raceEnabled:
		t.Logf("a worker's run allocated %v times under the race detector", n)
	case n != 0:
		t.Errorf("a worker's run allocated %v times", n)
	}
	if devs[1].sent.Load() == 0 || devs[2].sent.Load() == 0 {
		t.Errorf("sent %d and %d frames on ports 2 and 3: the rules did not forward", devs[1].sent.Load(), devs[2].sent.Load())
	}
}
