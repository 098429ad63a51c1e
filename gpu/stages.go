package gpu

import (
	"sync/atomic"
	"time"
)

// Stage is one step of a shared batch's way through a Coalescer and its
// backend, timed per batch (not per key) into a StageHist:
//
//   - StageForm: the batch's opening (its first key) to its close;
//   - StageStart: its close to its leader's start of the backend call (the
//     leader's wake-up: a kick, or its MaxDelay timer);
//   - StageSlot: with the CUDA backend, the backend call's wait for a
//     staging slot (the lock that used to serialise every lookup; now only
//     lookups above a chunk wait for each other);
//   - StageLookup: the backend call (columns gathered, copies in, kernel,
//     copies out, results scattered back; on the CUDA backend from
//     submission to the device's completion event);
//   - StageHandBack: the results' publication (the leader's send to each
//     member's waiter) to a member's return from LookupFlow (the wake-up
//     of a caller other than the leader).
type Stage int

// The stages (see Stage).
const (
	StageForm Stage = iota
	StageStart
	StageSlot
	StageLookup
	StageHandBack
	NumStages
)

var stageNames = [NumStages]string{"form", "start", "slot", "lookup", "handback"}

// String is the stage's label value in gswitch_shared_batch_stage_seconds.
func (s Stage) String() string {
	if s < 0 || s >= NumStages {
		return "unknown"
	}
	return stageNames[s]
}

// nStageBounds is the number of the histogram's bounds.
const nStageBounds = 14

// stageBounds are the histogram's upper bounds: 1 µs to 8.192 ms, doubling.
var stageBounds = func() []time.Duration {
	b := make([]time.Duration, nStageBounds)
	for i := range b {
		b[i] = time.Microsecond << i
	}
	return b
}()

// StageHist is a histogram of durations per Stage: atomic counters, no
// lock, a few nanoseconds per observation (one per batch and stage, not
// per key). The zero value is ready; safe for concurrent use.
type StageHist struct {
	counts [NumStages][nStageBounds + 1]atomic.Uint64 // the last: above the last bound
	sum    [NumStages]atomic.Int64                    // nanoseconds
}

// Observe records d for stage s (a negative d counts as 0).
func (h *StageHist) Observe(s Stage, d time.Duration) {
	if h == nil || s < 0 || s >= NumStages {
		return
	}
	d = max(d, 0)
	i := 0
	for i < len(stageBounds) && d > stageBounds[i] {
		i++
	}
	h.counts[s][i].Add(1)
	h.sum[s].Add(int64(d))
}

// StageStats is a StageHist's content for one stage: Counts[i] batches
// took at most Bounds[i] (and more than Bounds[i-1]); the last count is
// above the last bound.
type StageStats struct {
	Stage  Stage
	Bounds []time.Duration
	Counts []uint64
	Sum    time.Duration
}

// N is the number of observations.
func (s StageStats) N() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Quantile returns the upper bound of the bucket holding quantile q (0..1)
// of the observations (the last bound doubled for the +Inf bucket), 0
// without any.
func (s StageStats) Quantile(q float64) time.Duration {
	n := s.N()
	if n == 0 {
		return 0
	}
	want := uint64(q*float64(n) + 0.5)
	want = max(want, 1)
	var cum uint64
	for i, c := range s.Counts {
		cum += c
		if cum >= want {
			if i < len(s.Bounds) {
				return s.Bounds[i]
			}
			break
		}
	}
	return 2 * s.Bounds[len(s.Bounds)-1]
}

// Mean is the observations' mean, 0 without any.
func (s StageStats) Mean() time.Duration {
	if n := s.N(); n > 0 {
		return s.Sum / time.Duration(n)
	}
	return 0
}

// Stats returns every stage's histogram.
func (h *StageHist) Stats() []StageStats {
	out := make([]StageStats, NumStages)
	for s := range out {
		st := StageStats{Stage: Stage(s), Bounds: stageBounds, Counts: make([]uint64, len(stageBounds)+1)}
		for i := range st.Counts {
			st.Counts[i] = h.counts[s][i].Load()
		}
		st.Sum = time.Duration(h.sum[s].Load())
		out[s] = st
	}
	return out
}

// backendStages holds the stages the backends time (StageSlot: the CUDA
// backend's), process-wide; Coalescer.Stages reads it.
var backendStages StageHist
