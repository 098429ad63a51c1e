package pipeline

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestLatencyObserve(t *testing.T) {
	var l latencyStats
	done := time.Unix(1000, 0)
	at := func(d time.Duration) int64 { return done.Add(-d).UnixNano() }
	l.observe([]int64{at(500 * time.Nanosecond), at(time.Microsecond), at(1001 * time.Nanosecond), at(30 * time.Microsecond),
		at(2 * time.Second), 0, done.Add(time.Second).UnixNano(), at(2 * time.Minute)}, done)
	s := &Switch{}
	s.latency.observe(nil, done) // nothing recorded: no frames
	if st := s.LatencyStats(); st.Frames != 0 || st.Sum != 0 {
		t.Errorf("empty: %+v", st)
	}
	s.latency = latencyStats{}
	st := func() LatencyStats {
		s2 := &Switch{}
		for i := range l.buckets {
			s2.latency.buckets[i].Store(l.buckets[i].Load())
		}
		s2.latency.count.Store(l.count.Load())
		s2.latency.sumNs.Store(l.sumNs.Load())
		return s2.LatencyStats()
	}()
	// 0, a time after done and one beyond maxLatency are not recorded.
	if st.Frames != 5 || st.Sum != 500*time.Nanosecond+time.Microsecond+1001*time.Nanosecond+30*time.Microsecond+2*time.Second {
		t.Fatalf("frames %d sum %v", st.Frames, st.Sum)
	}
	if st.Bounds[0] != time.Microsecond || st.Counts[0] != 2 || st.Counts[1] != 1 {
		t.Errorf("first buckets: bounds %v counts %v", st.Bounds[:3], st.Counts[:3])
	}
	// 30 µs lies in the bucket whose bound is the first >= 30 µs.
	for i, b := range st.Bounds {
		if b >= 30*time.Microsecond {
			if st.Counts[i] != 1 || st.Bounds[i-1] >= 30*time.Microsecond {
				t.Errorf("30µs: bucket %d (≤%v) has %d", i, b, st.Counts[i])
			}
			break
		}
	}
	if st.Counts[len(st.Counts)-1] != 1 || st.Bounds[len(st.Bounds)-1] < time.Second {
		t.Errorf("2 s is in the last bucket past %v: %v", st.Bounds[len(st.Bounds)-1], st.Counts[len(st.Counts)-1])
	}
	for i := 1; i < len(st.Bounds); i++ {
		if st.Bounds[i] <= st.Bounds[i-1] {
			t.Fatalf("bounds not ascending at %d: %v", i, st.Bounds)
		}
	}
}

func TestLatencyObserveAllocs(t *testing.T) {
	var l latencyStats
	rx := make([]int64, 256)
	now := time.Now()
	for i := range rx {
		rx[i] = now.Add(-time.Duration(i) * time.Microsecond).UnixNano()
	}
	if n := testing.AllocsPerRun(100, func() { l.observe(rx, now) }); n != 0 {
		t.Errorf("%v allocations per batch", n)
	}
}

// TestLatencyStages checks that a batch's frames are recorded by stage
// (ring, batch, run) and that the stages add up to the whole, without an
// allocation per batch.
func TestLatencyStages(t *testing.T) {
	s := &Switch{}
	b := newBatcher(4)
	done := time.Unix(1000, 0)
	at := func(d time.Duration) int64 { return done.Add(-d).UnixNano() }
	b.rxAt = []int64{at(900 * time.Microsecond), at(500 * time.Microsecond), 0}
	b.readAt = []int64{at(800 * time.Microsecond), at(300 * time.Microsecond), at(200 * time.Microsecond)}
	b.closed = at(100 * time.Microsecond)
	s.observeBatch(b, done)
	whole := s.LatencyStats()
	if whole.Frames != 2 || whole.Sum != 1400*time.Microsecond {
		t.Fatalf("whole: %d frames, sum %v", whole.Frames, whole.Sum)
	}
	want := map[LatencyStage]struct {
		frames uint64
		sum    time.Duration
	}{
		StageRing:  {2, 100*time.Microsecond + 200*time.Microsecond}, // the frame without a receive time has no ring stage
		StageBatch: {3, 700*time.Microsecond + 200*time.Microsecond + 100*time.Microsecond},
		StageRun:   {3, 3 * 100 * time.Microsecond},
	}
	for st, w := range want {
		got := s.LatencyStageStats(st)
		if got.Frames != w.frames || got.Sum != w.sum {
			t.Errorf("%v: %d frames, sum %v; want %d, %v", st, got.Frames, got.Sum, w.frames, w.sum)
		}
	}
	if st := s.LatencyStageStats(numStages); st.Frames != 0 || st.Counts != nil {
		t.Errorf("no such stage: %+v", st)
	}
	// A batch RunPort did not close (no close time) records the whole only.
	b.closed = 0
	s.observeBatch(b, done)
	if got := s.LatencyStageStats(StageRun).Frames; got != 3 {
		t.Errorf("run stage after an unclosed batch: %d frames", got)
	}
	b.closed = at(100 * time.Microsecond)
	if n := testing.AllocsPerRun(100, func() { s.observeBatch(b, done) }); n != 0 {
		t.Errorf("%v allocations per batch", n)
	}
}

// TestLatencyBucket checks the shortcut against a binary search of the
// bounds, at every bound, next to it and at random values.
func TestLatencyBucket(t *testing.T) {
	want := func(d int64) int { // the first bound >= d, else the last bucket
		i, _ := slices.BinarySearch(latencyBounds[:], d)
		return i
	}
	check := func(d int64) {
		if got, w := latencyBucket(d), want(d); got != w {
			t.Fatalf("latencyBucket(%d) = %d, want %d", d, got, w)
		}
	}
	for _, d := range []int64{0, 1, 999, 1000, 1001, maxLatency, 1<<63 - 1} {
		check(d)
	}
	for _, b := range latencyBounds {
		check(b - 1)
		check(b)
		check(b + 1)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		check(r.Int64N(int64(1) << r.IntN(63)))
	}
}
