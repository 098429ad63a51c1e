package pipeline

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/tables/rule"
)

// TestProcessConcurrentOnePort runs batches of one input port on several
// goroutines at once, as RunPort does for a port with several receive
// queues: every frame is forwarded once and every counter adds up (run
// with -race, the test also checks that Process shares nothing unguarded
// between batches of one port).
func TestProcessConcurrentOnePort(t *testing.T) {
	const queues, rounds, batch = 4, 50, 32
	r := newRig(t, 3, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: applyOut(2)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(3), Instructions: rule.Instructions{}}) // drop
	base := make([][][]byte, queues)                                                                                           // each goroutine's flows
	for q := range base {
		for i := range batch {
			base[q] = append(base[q], flowFrame(t, uint16(1000+q*batch+i), 0))
		}
		base[q][0] = base[q][0][:10] // malformed: counted as rx_dropped of port 1
	}
	var wg sync.WaitGroup
	for q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				frames := make([][]byte, batch)
				for i, f := range base[q] {
					frames[i] = append([]byte(nil), f...) // Process may edit them
				}
				r.sw.Process(1, frames)
			}
		}()
	}
	wg.Wait()
	want := queues * rounds * (batch - 1)
	if got := len(r.devs[1].take()); got != want {
		t.Fatalf("port 2 got %d frames, want %d", got, want)
	}
	fs, err := r.sw.FlowStats(&rule.FlowStatsRequest{TableID: rule.TableAll, OutPort: 2, OutGroup: rule.GroupAny})
	if err != nil || len(fs) != 1 || fs[0].Packets != uint64(want) {
		t.Fatalf("flow stats %+v, %v: want %d packets", fs, err, want)
	}
	ps, _ := r.sw.PortStats(1)
	if ps[0].RxDropped != queues*rounds {
		t.Errorf("port 1 rx_dropped %d, want %d", ps[0].RxDropped, queues*rounds)
	}
	if b := r.sw.BatchStats(); b.Batches != queues*rounds || b.Frames != queues*rounds*batch {
		t.Errorf("batch stats %+v", b)
	}
}

// TestStandaloneConcurrentOnePort learns addresses from batches of one
// port run at once: every source is learned, and frames to a learned
// address go to its port only.
func TestStandaloneConcurrentOnePort(t *testing.T) {
	const queues, hosts = 4, 64
	r := newRig(t, 3, FailStandalone)
	r.ctrl.conns = 0
	frame := func(dst, src byte) []byte {
		f := make([]byte, 60)
		copy(f, []byte{2, 0, 0, 0, 1, dst})
		copy(f[6:], []byte{2, 0, 0, 0, 2, src})
		f[12], f[13] = 0x88, 0xb5
		return f
	}
	var wg sync.WaitGroup
	for q := range queues {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var frames [][]byte
			for h := q; h < hosts; h += queues {
				frames = append(frames, frame(0xff, byte(h))) // to an unknown host: flooded
			}
			r.sw.Process(1, frames)
		}()
	}
	wg.Wait()
	if n := r.sw.Counters().Learned; n != hosts {
		t.Fatalf("learned %d addresses, want %d", n, hosts)
	}
	for _, d := range r.devs {
		d.take()
	}
	// Port 2 answers each host: unicast back to port 1 alone.
	var back [][]byte
	for h := range hosts {
		f := frame(0, 0)
		copy(f, []byte{2, 0, 0, 0, 2, byte(h)})
		copy(f[6:], []byte{2, 0, 0, 0, 1, 0x77})
		back = append(back, f)
	}
	r.sw.Process(2, back)
	if got, other := len(r.devs[0].take()), len(r.devs[2].take()); got != hosts || other != 0 {
		t.Fatalf("answers: port 1 got %d (want %d), port 3 got %d (want 0)", got, hosts, other)
	}
}

// queuedDev is a fakeDev read through several receive queues.
type queuedDev struct {
	fakeDev
	queues int
}

func (d *queuedDev) Queues() int { return d.queues }

func (d *queuedDev) QueueStats(i int) (afpacket.Stats, error) {
	return afpacket.Stats{RxPackets: uint64(10 * i)}, nil
}

// TestPortInfoRxQueues: PortInfos reports a device's receive queues and
// their frames, and 1 queue for a device without queues.
func TestPortInfoRxQueues(t *testing.T) {
	r := newRig(t, 1, FailSecure)
	if err := r.sw.AddPort(2, &queuedDev{fakeDev: fakeDev{name: "q"}, queues: 4}); err != nil {
		t.Fatal(err)
	}
	ps := r.sw.PortInfos()
	if len(ps) != 2 || ps[0].RxQueues != 1 || ps[0].RxQueuePackets != nil || ps[1].RxQueues != 4 ||
		fmt.Sprint(ps[1].RxQueuePackets) != "[0 10 20 30]" {
		t.Fatalf("PortInfos: %+v", ps)
	}
}
