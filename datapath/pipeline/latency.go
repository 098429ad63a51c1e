package pipeline

import (
	"math/bits"
	"sync/atomic"
	"time"
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
	l.record(len(rxAt), func(i int) int64 {
		if rxAt[i] == 0 {
			return -1
		}
		return end - rxAt[i]
	})
}

// record records the values d(0) .. d(n-1) in nanoseconds; a value below 0
// or above maxLatency is not recorded.
func (l *latencyStats) record(n int, d func(int) int64) {
	var local [len(latencyBounds) + 1]uint32
	var count, sum uint64
	for i := range n {
		v := d(i)
		if v < 0 || v > maxLatency {
			continue
		}
		local[latencyBucket(v)]++
		count++
		sum += uint64(v)
	}
	if count == 0 {
		return
	}
	for i, c := range local {
		if c != 0 {
			l.buckets[i].Add(uint64(c))
		}
	}
	l.count.Add(count)
	l.sumNs.Add(sum)
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

// observeBatch records the latencies of b's frames, whose batch ended at
// 'done': the whole (latency) and by stage (stages); b.readAt and
// b.closed give the stages' bounds.
func (s *Switch) observeBatch(b *batcher, done time.Time) {
	s.latency.observe(b.rxAt, done)
	if len(b.readAt) != len(b.rxAt) || b.closed == 0 {
		return // a batch not closed by RunPort (tests)
	}
	end := done.UnixNano()
	s.stages[StageRing].record(len(b.rxAt), func(i int) int64 {
		if b.rxAt[i] == 0 {
			return -1
		}
		return b.readAt[i] - b.rxAt[i]
	})
	s.stages[StageBatch].record(len(b.readAt), func(i int) int64 { return b.closed - b.readAt[i] })
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
