package pipeline

import (
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Per-frame latency through the switch: from the kernel's receive
// timestamp of the frame (the TPACKET_V3 header's, afpacket.Frame.Time:
// when the frame was written into the receive ring) to the end of the
// batch's run through the pipeline in RunPort (its frames transmitted or
// dropped). It includes the wait in the ring until its block was retired
// and read, the wait in the open batch (up to Config.MaxDelay), the lookups
// and the actions. RunPort records one value per frame, gathered per batch
// so that the shared counters see one atomic add per bucket used, not one
// per frame.

// latencyBounds are the upper bounds of the latency histogram's buckets in
// nanoseconds: 1 µs times √2^k, k = 0..40 (1 µs to about 1 s); a last
// bucket holds the slower frames.
var latencyBounds = func() (b [41]int64) {
	v := 1000.0
	for i := range b {
		b[i] = int64(v + 0.5)
		v *= 1.4142135623730951
	}
	return b
}()

// latencyFirst[L] is the first bucket whose bound is at least 2^(L-1),
// the least value of bit length L: a value's bucket is at most two
// buckets past its bit length's (the bounds are √2 apart), so
// latencyBucket finds it in a step or three instead of a binary search.
var latencyFirst = func() (f [64]uint8) {
	for l := range f {
		least := int64(0)
		if l > 0 {
			least = 1 << (l - 1)
		}
		i := 0
		for i < len(latencyBounds) && latencyBounds[i] < least {
			i++
		}
		f[l] = uint8(i)
	}
	return f
}()

// latencyBucket is the histogram bucket of a latency of d ns (0 <= d,
// so its bit length is below 64):
// the first whose bound is at least d, or the last bucket.
func latencyBucket(d int64) int {
	i := int(latencyFirst[bits.Len64(uint64(d))])
	for i < len(latencyBounds) && latencyBounds[i] < d {
		i++
	}
	return i
}

// maxLatency: values beyond it (a receive timestamp from another clock, a
// frame without one) are not recorded.
const maxLatency = int64(time.Minute)

// latencyStats is the histogram of per-frame latencies.
type latencyStats struct {
	count   atomic.Uint64
	sumNs   atomic.Uint64
	buckets [len(latencyBounds) + 1]atomic.Uint64
}

// observe records the latencies of frames received at rxAt (Unix
// nanoseconds; 0: unknown, not recorded) and done at 'done'.
func (l *latencyStats) observe(rxAt []int64, done time.Time) {
	end := done.UnixNano()
	var c latencyCounts
	for _, t := range rxAt {
		if t != 0 {
			c.add(end - t)
		}
	}
	l.flush(&c)
}

// latencyCounts gathers one batch's values of a histogram on the stack,
// so that the shared counters see one atomic add per bucket used, not one
// per frame (latencyStats.flush).
type latencyCounts struct {
	buckets    [len(latencyBounds) + 1]uint32
	count, sum uint64
}

// add counts the value d in nanoseconds; a value below 0 or above
// maxLatency is not counted.
func (c *latencyCounts) add(d int64) {
	if d < 0 || d > maxLatency {
		return
	}
	c.buckets[latencyBucket(d)]++
	c.count++
	c.sum += uint64(d)
}

// flush adds c to the histogram.
func (l *latencyStats) flush(c *latencyCounts) {
	if c.count == 0 {
		return
	}
	for i, n := range c.buckets {
		if n != 0 {
			l.buckets[i].Add(uint64(n))
		}
	}
	l.count.Add(c.count)
	l.sumNs.Add(c.sum)
}

// The stages of a frame's latency (LatencyStage): their three values
// add up to the frame's latency.
//   - ring: from the kernel's receive timestamp until the reader took the
//     frame out of the ring (a block ring's wait for its block to be
//     retired, the reader's wake-up, a reader busy elsewhere);
//   - batch: from then until the reader closed the frame's batch (full,
//     or its oldest frame had waited Config.MaxDelay);
//   - run: from the close to the end of the batch's run (the hand-off to
//     the queue's runner, the lookups, shared device batches included, the
//     actions and the transmit, in order after the queue's earlier
//     batches).
type LatencyStage int

const (
	StageRing LatencyStage = iota
	StageBatch
	StageRun
	numStages
)

func (st LatencyStage) String() string {
	switch st {
	case StageRing:
		return "ring"
	case StageBatch:
		return "batch"
	case StageRun:
		return "run"
	}
	return "stage?"
}

// The parts of a datapath worker's run (RunWorker), timed in one run of
// runPartEvery: the frames' parsing (parse), the Classifier's lookups, a
// device's included (lookup), the rest of the tables' work and the
// actions (decide), and the transmit (send). They add up to the run stage of the run's frames, but
// for the receive stages and the latency's own bookkeeping.
type RunPart int

const (
	RunParse RunPart = iota
	RunLookup
	RunDecide
	RunSend
	numRunParts
)

func (rp RunPart) String() string {
	switch rp {
	case RunParse:
		return "parse"
	case RunLookup:
		return "lookup"
	case RunDecide:
		return "decide"
	case RunSend:
		return "send"
	}
	return "part?"
}

// RunPartStats returns the histogram of one part of the datapath workers'
// runs, a value per timed run, one in runPartEvery (see RunPart).
func (s *Switch) RunPartStats(rp RunPart) LatencyStats {
	if rp < 0 || rp >= numRunParts {
		return LatencyStats{}
	}
	return s.runParts[rp].snapshot()
}

// observeBatch records the latencies of b's frames, whose batch ended at
// 'done': the whole (latency) and by stage (stages), in one pass over the
// frames; b.readAt and b.closed give the stages' bounds.
func (s *Switch) observeBatch(b *batcher, done time.Time) {
	if len(b.readAt) != len(b.rxAt) || b.closed == 0 {
		s.latency.observe(b.rxAt, done) // a batch not closed by RunPort (tests): the whole only
		return
	}
	end := done.UnixNano()
	var whole, ring, batch latencyCounts
	for i, rx := range b.rxAt {
		read := b.readAt[i]
		if rx != 0 {
			whole.add(end - rx)
			ring.add(read - rx)
		}
		batch.add(b.closed - read)
	}
	s.latency.flush(&whole)
	s.stages[StageRing].flush(&ring)
	s.stages[StageBatch].flush(&batch)
	s.stages[StageRun].recordN(end-b.closed, len(b.readAt))
}

// recordN records the value d (nanoseconds) n times: one bucket, one add.
func (l *latencyStats) recordN(d int64, n int) {
	if n <= 0 || d < 0 || d > maxLatency {
		return
	}
	l.buckets[latencyBucket(d)].Add(uint64(n))
	l.count.Add(uint64(n))
	l.sumNs.Add(uint64(n) * uint64(d))
}

// LatencyStats is a snapshot of the per-frame latency histogram.
type LatencyStats struct {
	Frames uint64        // frames recorded
	Sum    time.Duration // their latencies added up
	// Bounds and Counts: Counts[i] frames took at most Bounds[i] (and
	// more than Bounds[i-1]); the last count is for slower frames.
	Bounds []time.Duration
	Counts []uint64
}

// LatencyStats returns the per-frame latency histogram.
func (s *Switch) LatencyStats() LatencyStats { return s.latency.snapshot() }

// LatencyStageStats returns the histogram of one stage of the per-frame
// latency (see LatencyStage).
func (s *Switch) LatencyStageStats(st LatencyStage) LatencyStats {
	if st < 0 || st >= numStages {
		return LatencyStats{}
	}
	return s.stages[st].snapshot()
}

func (l *latencyStats) snapshot() LatencyStats {
	st := LatencyStats{Frames: l.count.Load(), Sum: time.Duration(l.sumNs.Load()),
		Bounds: make([]time.Duration, len(latencyBounds)), Counts: make([]uint64, len(l.buckets))}
	for i, b := range latencyBounds {
		st.Bounds[i] = time.Duration(b)
	}
	for i := range l.buckets {
		st.Counts[i] = l.buckets[i].Load()
	}
	return st
}

// LatencyHistogram is a per-frame latency histogram with the switch's
// buckets, for a forwarder other than the switch that is measured the same
// way (bench forward's plain target): Observe takes the frames' kernel
// receive timestamps and the instant they were done with, and
// LatencyCollector exports it as gswitch_frame_latency_seconds. Observe
// may be called from several goroutines; each call makes one atomic add
// per bucket it uses, so a forwarder with many goroutines gives each its
// own and exports their sum.
type LatencyHistogram struct {
	l latencyStats
	_ [64]byte // two histograms allocated side by side share no cache line
}

// Observe records the latencies of frames received at rxAt (Unix
// nanoseconds; 0: unknown, not recorded) and done at 'done'.
func (h *LatencyHistogram) Observe(rxAt []int64, done time.Time) { h.l.observe(rxAt, done) }

// LatencyCollector exports the sum of hs as the histogram
// gswitch_frame_latency_seconds, as the switch's Collector exports its own.
func LatencyCollector(hs ...*LatencyHistogram) prometheus.Collector { return latencyCollector(hs) }

type latencyCollector []*LatencyHistogram

func (c latencyCollector) Describe(ch chan<- *prometheus.Desc) { ch <- mFrameLatency }

func (c latencyCollector) Collect(ch chan<- prometheus.Metric) {
	sum := (&latencyStats{}).snapshot()
	for _, h := range c {
		st := h.l.snapshot()
		sum.Frames += st.Frames
		sum.Sum += st.Sum
		for i, n := range st.Counts {
			sum.Counts[i] += n
		}
	}
	ch <- latencyHistogram(mFrameLatency, sum)
}
