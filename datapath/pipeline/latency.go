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
	var local [len(latencyBounds) + 1]uint32
	end := done.UnixNano()
	var n, sum uint64
	for _, t := range rxAt {
		d := end - t
		if t == 0 || d < 0 || d > maxLatency {
			continue
		}
		local[latencyBucket(d)]++
		n++
		sum += uint64(d)
	}
	if n == 0 {
		return
	}
	for i, c := range local {
		if c != 0 {
			l.buckets[i].Add(uint64(c))
		}
	}
	l.count.Add(n)
	l.sumNs.Add(sum)
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
func (s *Switch) LatencyStats() LatencyStats {
	l := &s.latency
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
