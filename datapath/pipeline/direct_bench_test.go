package pipeline

import (
	"encoding/binary"
	"log/slog"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
)

// processCPU is the process's CPU time so far (user and system, every
// thread).
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkQueuePath times a receive queue's batches as RunPort runs them
// (a batcher filled with copies of the frames, then run), on the trivial
// rule set of bench forward (9,999 exact ipv4_dst rules the traffic
// misses and in_port=1,actions=output:2; merged tuple search), 64-byte frames of 16 flows, in
// batches of 256 (--batch-size's default):
//
//   - cpu: the CPU backend, no Coalescer (RunPort's synchronous path);
//   - auto-hand: --backend auto with a device and every table placed on
//     the CPU, each batch handed to the queue's runner (the shared-batch
//     path, lookups passed through the Coalescer: RunPort before it ran
//     such batches itself);
//   - auto-next: the same, through queueRunner.next, as RunPort does now
//     (no table coalesced: the batch runs on the reader, lookups straight
//     to the Engine).
//
// Besides ns/op it reports the process's CPU time per frame (cpu-ns/frame:
// every goroutine's, the runner's included), what the switch-over saves.
// The device is a CPU backend standing in for one (no GPU is needed): the
// Engine's calibration keeps the table on the CPU by an unbeatable host
// cost per key, and the calibrations run before the timing. Alternate the
// three by running them one by one (-bench 'BenchmarkQueuePath/path=cpu$'
// and so on) in a loop: -count runs each N times in a row.
func BenchmarkQueuePath(b *testing.B) {
	const rules, batch = 10000, 256
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(quietLog()) // lpmshape's line per change of shape
	install := func(r *rig) *countDev { return installTrivial(b, r, rules) }
	frames := make([]afpacket.Frame, batch)
	for i := range frames {
		f := make([]byte, 60)
		copy(f, []byte{2, 0, 0, 0, 0, 0xfe, 2, 0, 0, 0, 0, 1, 8, 0, 0x45, 0, 0, 46, 0, 0, 0, 0, 64, 17})
		copy(f[26:], []byte{10, 0, 0, 1, 10, 0, 0, 2})
		binary.BigEndian.PutUint16(f[34:], uint16(10000+i%16))
		binary.BigEndian.PutUint16(f[36:], 9)
		binary.BigEndian.PutUint16(f[38:], 26)
		frames[i] = afpacket.Frame{Data: f, Len: len(f)}
	}
	fillAll := func(bt *batcher) {
		now := time.Now()
		for i := range frames {
			bt.add(&frames[i], now)
		}
	}
	run := func(b *testing.B, out *countDev, next func(*batcher) *batcher, bt *batcher, stop func()) {
		b.ReportAllocs()
		runtime.GC() // the setup's garbage is not collected on the clock
		cpu0 := processCPU(b)
		b.ResetTimer()
		for range b.N {
			fillAll(bt)
			bt = next(bt)
		}
		if stop != nil {
			stop()
		}
		b.StopTimer()
		cpu := processCPU(b) - cpu0
		if out.frames != b.N*batch {
			b.Fatalf("port 2 got %d frames of %d", out.frames, b.N*batch)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/frame")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*batch), "cpu-ns/frame")
	}
	// mk returns a switch of 4 tables (merged tuple search, the CPU's
	// fastest) over eng, with co, and the rule set installed.
	mk := func(eng *gpu.Engine, co *gpu.Coalescer) (*Switch, *countDev) {
		sw, err := New(Config{DatapathID: 1, Tables: 4, Algo: flow.Merge, Classifier: eng, FailMode: FailSecure, Coalescer: co})
		if err != nil {
			b.Fatal(err)
		}
		r := &rig{sw: sw, ctrl: &fakeCtrl{conns: 1}}
		sw.SetController(r.ctrl)
		if err := sw.AddPort(1, &fakeDev{name: "p1"}); err != nil {
			b.Fatal(err)
		}
		return sw, install(r)
	}
	b.Run("path=cpu", func(b *testing.B) {
		eng, err := gpu.Open("cpu", nil, 0, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { eng.Close() })
		sw, out := mk(eng, nil)
		run(b, out, func(bt *batcher) *batcher { sw.runBatch(1, bt, false); return bt }, newBatcher(batch), nil)
	})
	for _, path := range []string{"auto-hand", "auto-next"} {
		b.Run("path="+path, func(b *testing.B) {
			eng := gpu.NewEngine(gpu.EngineConfig{Devices: []gpu.Backend{gpu.NewCPU()}, Mode: gpu.ModeAuto,
				Auto: gpu.AutoConfig{HostNsPerKey: 1e9, Delay: time.Millisecond}, Logger: quietLog()})
			b.Cleanup(func() { eng.Close() })
			co, err := gpu.NewCoalescer(eng, gpu.CoalescerConfig{MinBatch: gpu.DefaultMinBatch})
			if err != nil {
				b.Fatal(err)
			}
			sw, out := mk(eng, co)
			// The calibrations of the tables just filled run before the
			// timing (gswitchd runs them at load and after changes).
			// (Every flow table calibrated, and no calibration for 300 ms.)
			last, quiet := uint64(0), 0
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				calibrated, sum := true, uint64(0)
				for _, tb := range eng.TableBackends() {
					calibrated = calibrated && (tb.Kind != "flow" || tb.Calibrations > 0)
					sum += tb.Calibrations
				}
				if quiet++; sum != last || !calibrated {
					last, quiet = sum, 0
				}
				if quiet >= 30 {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("tables not calibrated: %+v", eng.TableBackends())
				}
			}
			for _, tb := range eng.TableBackends() {
				if tb.Kind == "flow" && tb.Backend != "cpu" { // (the LPM images of an LPM-shaped table are not looked up through the Coalescer)
					b.Fatalf("table %d on %s", tb.Table, tb.Backend)
				}
			}
			qr := sw.newQueueRunner(1, co)
			next := qr.next
			if path == "auto-hand" {
				next = qr.hand
			}
			run(b, out, next, <-qr.free, qr.stop)
			if path == "auto-next" && co.Stats().Direct != 0 {
				b.Fatalf("coalescer stats %+v: lookups went through it", co.Stats())
			}
		})
	}
}
