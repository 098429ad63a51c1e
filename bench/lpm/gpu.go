package lpm

// The GPU backend's lookups: pinned batches, the slice API, the kernel
// alone, the dynamic batcher, and their checks.

import (
	"fmt"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/lpm"
)

// gpuLookups loads the table's current image into the GPU backend and times
// the traffic's lookups there in batches of f.batch: end to end through
// pinned batches (the datapath's way: keys written into the backend's
// batches, at most --depth in flight; mlps), end to end through the slice
// API (LookupLPM4/6: the host copies into and out of pinned staging
// included; mlps_staged), and the kernel alone (CUDA events); with --check
// it compares the GPU's answers with the reference. The CPU figure already
// in r moves to mlps_cpu.
func gpuLookups(r *benchutil.Result, f *lpmFlags, fam lpm.Family, tab *lpm.Table, ref *lpm.Reference, tr *lpmTraffic, cpuBatch int) error {
	kind, id := gpu.LPM4, gpu.TableID(4)
	if fam == lpm.IPv6 {
		kind, id = gpu.LPM6, 6
	}
	tab.Mirror().Sync()
	if err := f.eng.Load(id, kind, tab.Mirror().Image()); err != nil {
		return err
	}
	f.gpuTable = id
	n := tr.len()
	batch := min(f.Batch, n)
	if f.pipe != nil {
		f.pipe.Free()
	}
	var err error
	if f.pipe, err = newLPMPipe(f, tr, id, batch); err != nil {
		return err
	}
	look := func(lo, hi int, out []uint32) error { return gpuLook(f, tr, lo, hi, out, batch) }
	r.MLPSCPU, r.BatchCPU = r.MLPS, cpuBatch
	r.Batch, r.Streams, r.Depth, r.GPU = batch, f.Streams, f.pipe.Depth, f.eng.Device()
	r.MLPS, r.NsPerLookup, r.Lookups = 0, 0, 0
	r.Notes = fmt.Sprintf("gpu backend: mlps = end to end with the keys already in pinned batches of %d (the datapath's way), %d stream(s), at most %d batches in flight, copies in and out included; batch_latency_us = Submit to results on the host; mlps_staged = the same through LookupLPM (host copies into and out of pinned staging included); mlps_kernel = the kernel alone on one batch (CUDA events); mlps_cpu = the CPU backend (batch %d, %d thread(s)) on the same traffic; under updates: the pinned pipeline, each Sync's update applied through Backend.Apply before the next Submit", batch, f.Streams, f.pipe.Depth, cpuBatch, f.Threads)
	if !f.kernelOnly {
		rate, lat, err := benchutil.PipeRounds(f.pipe, f.Rounds, max(n, 4*f.pipe.Depth*batch))
		if err != nil {
			return err
		}
		r.MLPS, r.NsPerLookup = rate/1e6, 1e9/rate
		r.BatchLatencyUs, r.BatchLatencyP99Us = benchutil.LatencyStats(lat)
		r.Lookups = int64(max(n, 4*f.pipe.Depth*batch)) * int64(f.Rounds)
		out := make([]uint32, n)
		if err := look(0, n, out); err != nil { // warm-up
			return err
		}
		rates, _ := benchutil.TimeRounds(f.Rounds, func() int {
			if e := look(0, n, out); e != nil && err == nil {
				err = e
			}
			return n
		})
		if err != nil {
			return err
		}
		r.MLPSStaged = benchutil.Median(rates) / 1e6
	}
	if f.maxDelay > 0 {
		if err := batcherRun(r, f, tr, id, batch); err != nil {
			return err
		}
	}
	iters := max(3, min(200, (1<<26)/batch))
	var ms float64
	if tr.v4 != nil {
		ms, err = f.eng.KernelTimeLPM4(id, tr.v4[:batch], iters)
	} else {
		ms, err = f.eng.KernelTimeLPM6(id, tr.v6[:batch], iters)
	}
	if err != nil {
		return err
	}
	r.MLPSKernel = float64(batch) / ms / 1e3
	if f.Check {
		c, m, err := checkLPM(func(out []uint32) error { return look(0, len(out), out) }, ref, tr, f.CheckSample)
		if err != nil {
			return err
		}
		r.Checked, r.Mismatches = r.Checked+c, r.Mismatches+m
		c, m, err = checkPipe(f, ref, tr)
		if err != nil {
			return err
		}
		r.Checked, r.Mismatches = r.Checked+c, r.Mismatches+m
	}
	return nil
}

// newLPMPipe fills pinned batches of batch keys with the traffic, in order,
// wrapping around.
func newLPMPipe(f *lpmFlags, tr *lpmTraffic, id gpu.TableID, batch int) (*benchutil.Pipe, error) {
	return benchutil.NewAddrPipe(f.eng, id, tr.v4, tr.v6, batch, f.PipeDepth())
}

// checkPipe runs the pipe's batches once and compares a sample of their
// answers, up to --check-sample keys, with the reference.
func checkPipe(f *lpmFlags, ref *lpm.Reference, tr *lpmTraffic) (checked, mismatches int, err error) {
	p := f.pipe
	n := tr.len()
	for bi, b := range p.Batches {
		if checked >= f.CheckSample {
			break
		}
		if err := f.eng.Submit(p.ID, b); err != nil {
			return checked, mismatches, err
		}
		if err := b.Wait(); err != nil {
			return checked, mismatches, err
		}
		for k := 0; k < b.N && checked < f.CheckSample; k++ {
			want, _ := ref.Lookup(tr.addrs[(bi*b.Cap+k)%n]) // the key newLPMPipe put there
			if b.Out[k] != want {
				if mismatches < 5 {
					fmt.Fprintf(benchutil.MismatchLog, "gpu pinned batch: key %d: got %d, reference %d\n", k, b.Out[k], want)
				}
				mismatches++
			}
			checked++
		}
	}
	return checked, mismatches, nil
}

// gpuLook looks up the traffic's addresses [lo, hi) on the GPU backend's
// current table in calls of batch addresses, the results into out[:hi-lo].
func gpuLook(f *lpmFlags, tr *lpmTraffic, lo, hi int, out []uint32, batch int) error {
	for i := lo; i < hi; i += batch {
		j := min(i+batch, hi)
		var err error
		if tr.v4 != nil {
			err = f.eng.LookupLPM4(f.gpuTable, tr.v4[i:j], out[i-lo:j-lo])
		} else {
			err = f.eng.LookupLPM6(f.gpuTable, tr.v6[i:j], out[i-lo:j-lo])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// batcherRun feeds the traffic key by key through a gpu.Batcher (the
// datapath's dynamic batching) for --duration and reports its rate and
// batch latency (first key's arrival to results), one producer goroutine.
func batcherRun(r *benchutil.Result, f *lpmFlags, tr *lpmTraffic, id gpu.TableID, batch int) error {
	kind, width := gpu.LPM4, 1
	if tr.v6 != nil {
		kind, width = gpu.LPM6, 4
	}
	q, err := gpu.NewBatcher(f.eng, id, gpu.BatcherConfig{Kind: kind, Width: width, MaxBatch: batch, MaxDelay: f.maxDelay, Depth: f.PipeDepth()}, nil)
	if err != nil {
		return err
	}
	defer q.Close()
	n := tr.len()
	start := time.Now()
	deadline := start.Add(f.duration)
	keys := 0
	for k := 0; ; k++ {
		b, i, err := q.Next()
		if err != nil {
			return err
		}
		if tr.v4 != nil {
			b.Keys[i] = tr.v4[k%n]
		} else {
			b.Addrs6()[i] = tr.v6[k%n]
		}
		if err := q.Commit(); err != nil {
			return err
		}
		keys++
		if k%256 == 255 {
			now := time.Now()
			if err := q.Poll(now); err != nil {
				return err
			}
			if now.After(deadline) {
				break
			}
		}
	}
	if err := q.Flush(); err != nil {
		return err
	}
	st := q.Stats()
	r.MaxDelayUs = float64(f.maxDelay.Nanoseconds()) / 1e3
	r.BatcherMLPS = float64(st.Keys) / time.Since(start).Seconds() / 1e6
	r.BatcherLatencyUs = float64(st.Latency.Nanoseconds()) / 1e3 / float64(max(st.Batches, 1))
	r.BatcherMaxLatencyUs = float64(st.MaxLatency.Nanoseconds()) / 1e3
	r.BatcherByDelay = st.ByDelay
	r.Notes += fmt.Sprintf("; --max-delay: %d keys fed one by one from one goroutine into a gpu.Batcher (batches of %d closed when full or after %v), %d batches, %d closed by the delay; batcher_latency_us = first key's arrival to the batch's results, mean", keys, batch, f.maxDelay, st.Batches, st.ByDelay)
	return nil
}
