package pipeline

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// BenchmarkPerFrame times the switch's own work per forwarded frame on a
// receive queue's synchronous path (RunPort's: a batcher filled with
// copies of the ring's frames, run through the pipeline, the latency
// histogram recorded; the CPU backend, merged tuple search), what gswitchd
// spends above the plain forwarder besides the kernel's receive and send:
//
//   - set=trivial: bench forward's trivial set (9,999 exact ipv4_dst rules
//     the traffic misses, an LPM-shaped table, and in_port=1,actions=output:2);
//   - set=goto: the shape of bench forward's rule sets (ruleset.go): table
//     0 classifies (here 16 udp_src rules of one class, so that the lookup
//     is cheap and the rest shows) with goto_table:1, table 1 maps in_port
//     1 to output:2;
//   - set=wide: the same with 131,072 udp, ipv4_dst rules in table 0 and the
//     frames of each batch to rules drawn at random (a pool of 131,072
//     frames, one per rule, shuffled), as bench forward's rule sets send
//     them: the entries a batch hits are not in the processor's caches;
//
// on two paths: path=direct, the synchronous one (the CPU backend, or
// --backend auto with every table on the CPU); path=shared, the batches
// handed to the queue's runner and their lookups gathered by a
// gpu.Coalescer into shared batches, the device being the CPU backend
// standing in for one (the host's work of the GPU path: the hand-off, the
// in-flight goroutines, Enter/Leave, the columns gathered and the results
// scattered back, without the device's own cost; set=goto only: the
// trivial set's table is LPM-shaped, looked up by lpmshape); path=ahead, a
// datapath worker's run whose first table the device has answered
// (finishOldest's part: the packets parsed, their keys packed into the
// lookup's batch, then the tables run with the first table's results as
// looked up ahead, the sends and the latencies; the results are the CPU
// backend's, computed before the clock starts, so that what is timed is
// the host's own work on the GPU path); in batches of 256 frames (--batch-size's default, a loaded port) and of
// 16 (a batch closed by --max-delay at a few hundred thousand frames per
// second per queue, where the per-batch costs weigh). 64-byte UDP frames
// of 16 flows. Besides ns/frame it reports cpu-ns/frame (the process's
// CPU time, every goroutine's) and, on path=shared, the shared batches'
// mean stage times (gpu.Stage: form-, start-, lookup-, handback-ns/batch).
func BenchmarkPerFrame(b *testing.B) {
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(quietLog()) // lpmshape's line per change of shape
	for _, path := range []string{"direct", "shared", "ahead"} {
		for _, set := range []string{"trivial", "goto", "wide"} {
			if path != "direct" && set == "trivial" {
				continue // an LPM-shaped table is not looked up through the Coalescer, nor ahead
			}
			for _, batch := range []int{16, 256} {
				b.Run(fmt.Sprintf("path=%s/set=%s/batch=%d", path, set, batch), func(b *testing.B) {
					benchPerFrame(b, path, set, batch)
				})
			}
		}
	}
}

// lookerOnly hides every method of the Engine but LookupFlow: a Coalescer
// over it coalesces every table (no placement to ask).
type lookerOnly struct{ e *gpu.Engine }

func (l lookerOnly) LookupFlow(id gpu.TableID, soa []uint32, n int, out []flow.RuleID) error {
	return l.e.LookupFlow(id, soa, n, out)
}

// wideRules is set=wide's rule count (bench forward's 131,072).
const wideRules = 1 << 17

func benchPerFrame(b *testing.B, path, set string, batch int) {
	eng, err := gpu.Open("cpu", nil, 0, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { eng.Close() })
	var co *gpu.Coalescer
	if path == "shared" {
		if co, err = gpu.NewCoalescer(lookerOnly{eng}, gpu.CoalescerConfig{MaxDelay: 50 * time.Microsecond}); err != nil {
			b.Fatal(err)
		}
	}
	sw, err := New(Config{DatapathID: 1, Tables: 4, MaxFlows: 2 * wideRules, Algo: flow.Merge, Classifier: eng, FailMode: FailSecure, Coalescer: co})
	if err != nil {
		b.Fatal(err)
	}
	r := &rig{sw: sw, ctrl: &fakeCtrl{conns: 1}}
	sw.SetController(r.ctrl)
	if err := sw.AddPort(1, &fakeDev{name: "p1"}); err != nil {
		b.Fatal(err)
	}
	var out *countDev
	switch set {
	case "trivial":
		out = installTrivial(b, r, 10000)
	case "goto", "wide":
		out = &countDev{}
		out.link = out.fakeDev.Link()
		if err := sw.AddPort(2, out); err != nil {
			b.Fatal(err)
		}
		rules := 16
		if set == "wide" {
			rules = wideRules
		}
		for i := range rules {
			var m flow.Match
			m.SetEthType(flow.EthTypeIPv4)
			field, v := flow.FieldUDPSrc, uint64(10000+i)
			if set == "wide" {
				field, v = flow.FieldIPv4Dst, uint64(0x0a000000+i)
			}
			if err := m.SetExact(flow.FieldIPProto, 17); err != nil { // (not LPM-shaped: a flow table, coalesced on path=shared)
				b.Fatal(err)
			}
			if err := m.SetExact(field, v); err != nil {
				b.Fatal(err)
			}
			r.flowMod(b, &rule.FlowMod{Command: rule.FlowAdd, Priority: 100, Match: m,
				Instructions: rule.Instructions{Has: rule.HasGotoTable, GotoTable: 1}})
		}
		r.flowMod(b, &rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: 100, Match: matchInPort(1), Instructions: applyOut(2)})
	}
	pool := batch
	if set == "wide" {
		pool = wideRules
	}
	frames := make([]afpacket.Frame, pool)
	rx := time.Now().UnixNano()
	order := rand.New(rand.NewPCG(1, 2)).Perm(pool)
	for i := range frames {
		f := make([]byte, 60)
		copy(f, []byte{2, 0, 0, 0, 0, 0xfe, 2, 0, 0, 0, 0, 1, 8, 0, 0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17})
		copy(f[26:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
		binary.BigEndian.PutUint16(f[34:], uint16(10000+i%16))
		if set == "wide" {
			binary.BigEndian.PutUint32(f[30:], uint32(0x0a000000+order[i]))
		}
		binary.BigEndian.PutUint16(f[36:], 9)
		binary.BigEndian.PutUint16(f[38:], 26)
		frames[i] = afpacket.Frame{Data: f, Len: len(f), Time: time.Unix(0, rx)}
	}
	bt := newBatcher(batch)
	next, stop := func(bt *batcher) *batcher { sw.runBatch(1, bt, false); return bt }, func() {}
	if co != nil {
		q := sw.newQueueRunner(1, co)
		next, stop, bt = q.next, q.stop, <-q.free
	}
	if path == "ahead" {
		next = runAhead(b, sw, eng, frames, batch)
	}
	b.ReportAllocs()
	runtime.GC() // the setup's garbage is not collected on the clock
	cpu0 := processCPU(b)
	b.ResetTimer()
	off := 0
	for range b.N {
		now := time.Now()
		for i := off; i < off+batch; i++ {
			bt.add(&frames[i], now)
		}
		bt = next(bt)
		off = nextBatch(off, batch, len(frames))
	}
	stop()
	b.StopTimer()
	cpu := processCPU(b) - cpu0
	if out.frames != b.N*batch {
		b.Fatalf("port 2 got %d frames of %d", out.frames, b.N*batch)
	}
	if st := sw.LatencyStats(); st.Frames != uint64(b.N*batch) {
		b.Fatalf("latency histogram: %d frames of %d", st.Frames, b.N*batch)
	}
	if st := sw.BatchStats(); path == "ahead" && st.Ahead != uint64(b.N) {
		b.Fatalf("%d runs used the results looked up ahead, of %d", st.Ahead, b.N)
	}
	if co != nil && co.Stats().Keys == 0 {
		b.Fatalf("coalescer stats %+v: no shared batch", co.Stats())
	}
	if co != nil { // the shared batches' stage times (gpu.Stage), mean per batch
		for _, st := range co.Stages() {
			if st.N() > 0 {
				b.ReportMetric(float64(st.Mean().Nanoseconds()), st.Stage.String()+"-ns/batch")
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/frame")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*batch), "cpu-ns/frame")
}

// nextBatch is the offset in a pool of n frames of the batch after the one
// at off: the pool's batches in turn, from its start again when the next
// would not fit.
func nextBatch(off, batch, n int) int {
	if off += batch; off+batch > n {
		return 0
	}
	return off
}

// runAhead returns path=ahead's run of a batch: a worker's run from its
// close (finishOldest after lookAhead), its first table's results taken
// from the pool's, which it computes first (each frame's rule in table 0,
// by the CPU backend, the frames in the order the benchmark sends them).
func runAhead(b *testing.B, sw *Switch, eng *gpu.Engine, frames []afpacket.Frame, batch int) func(*batcher) *batcher {
	tab := sw.tables[0]
	pw := newWorker(sw)
	pre := make([]flow.RuleID, 0, len(frames))
	data := make([][]byte, len(frames))
	for i := range frames {
		data[i] = frames[i].Data
	}
	for off := 0; off < len(frames); off += batch {
		pw.begin()
		pw.admit(1, data[off:min(off+batch, len(frames))])
		pw.allAtFirst()
		soa := pw.packSoA(tab.proj, nil)
		res := make([]flow.RuleID, len(pw.idx))
		if err := eng.LookupFlow(gpu.TableID(tab.id), soa, len(res), res); err != nil {
			b.Fatal(err)
		}
		pre = append(pre, res...)
	}
	keys := make([]uint32, len(tab.proj)*batch)
	off := 0
	return func(bt *batcher) *batcher {
		now := time.Now()
		bt.closed = now.UnixNano()
		pw.begin()
		pw.direct = true
		pw.admit(1, bt.frames)
		pw.allAtFirst()
		pw.packSoAInto(tab.proj, keys, batch)
		pw.pre, pw.preGen = pre[off:off+len(pw.pkts)], sw.wgen.Load()
		pw.decide()
		pw.pre = nil
		pw.flush()
		sw.observeBatch(bt, time.Now())
		bt.reset()
		off = nextBatch(off, batch, len(pre))
		return bt
	}
}
