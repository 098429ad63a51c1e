package benchutil

import (
	"slices"
	"time"
)

// TimeRounds runs fn rounds times and returns the per-round rates in
// operations per second, fn returning how many operations it did.
func TimeRounds(rounds int, fn func() int) (rates []float64, total int64) {
	for range rounds {
		t0 := time.Now()
		n := fn()
		d := time.Since(t0).Seconds()
		rates = append(rates, float64(n)/d)
		total += int64(n)
	}
	return rates, total
}

// Parallel runs fn on threads goroutines and returns the sum of their counts.
func Parallel(threads int, fn func(thread int) int) int {
	if threads == 1 {
		return fn(0)
	}
	counts := make(chan int, threads)
	for t := range threads {
		go func() { counts <- fn(t) }()
	}
	n := 0
	for range threads {
		n += <-counts
	}
	return n
}

// Median returns the median of xs, 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Percentile returns the p-th percentile (0..100) of xs by nearest rank.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(p/100*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// LatencyStats returns the mean and the 99th percentile of lat.
func LatencyStats(lat []float64) (mean, p99 float64) {
	if len(lat) == 0 {
		return 0, 0
	}
	s := 0.0
	for _, x := range lat {
		s += x
	}
	lat = slices.Clone(lat)
	return s / float64(len(lat)), Percentile(lat, 99)
}
