package pubsub

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// The default scenario is built once per test binary: about 1M constraints.
var (
	defaultOnce  sync.Once
	defaultSpecs []Spec
	defaultTable *Table
	defaultEvs   []Event
)

func defaultScenario(b *testing.B) (*Table, []Event) {
	defaultOnce.Do(func() {
		sc := DefaultScenario()
		defaultSpecs = sc.Subscriptions()
		defaultTable = New()
		if _, err := defaultTable.AddSpecs(defaultSpecs); err != nil {
			panic(err)
		}
		defaultEvs = sc.Events(4096)
	})
	return defaultTable, defaultEvs
}

// BenchmarkMatchDefault is CCM's default scenario, one event at a time on
// one goroutine: ns/op is the mean wall time per event; p50-ns and p99-ns
// are percentiles of the wall time, cpu-p50-ns and cpu-mean-ns of the
// thread's CPU time per event (which leaves out the time the thread waited
// for a core on a shared machine).
func BenchmarkMatchDefault(b *testing.B) {
	tb, evs := defaultScenario(b)
	st := tb.Stats()
	b.ReportMetric(float64(st.Constraints), "constraints")
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var dst []uint32
	lat := make([]time.Duration, 0, 1<<16)
	cpu := make([]time.Duration, 0, 1<<16)
	matched := 0
	var cpuSum time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		e := &evs[i%len(evs)]
		c0 := threadCPU()
		t0 := time.Now()
		dst = tb.AppendMatch(dst[:0], e)
		t1 := time.Now()
		c1 := threadCPU()
		if len(lat) < cap(lat) {
			lat = append(lat, t1.Sub(t0))
			cpu = append(cpu, c1-c0)
		}
		cpuSum += c1 - c0
		matched += len(dst)
	}
	b.StopTimer()
	slices.Sort(lat)
	slices.Sort(cpu)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(cpu[len(cpu)/2].Nanoseconds()), "cpu-p50-ns")
	b.ReportMetric(float64(cpuSum.Nanoseconds())/float64(b.N), "cpu-mean-ns")
	b.ReportMetric(float64(matched)/float64(b.N), "ports/event")
}

// BenchmarkMatchBatchDefault matches batches of 1024 events under one lock.
func BenchmarkMatchBatchDefault(b *testing.B) {
	tb, evs := defaultScenario(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out [][]uint32
	b.ResetTimer()
	c0 := threadCPU()
	for i := 0; i < b.N; i++ {
		k := i * 1024 % len(evs)
		out = tb.MatchBatch(evs[k:k+1024], out)
	}
	b.ReportMetric(float64((threadCPU()-c0).Nanoseconds())/float64(b.N*1024), "cpu-ns/event")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1024), "ns/event")
}

// BenchmarkDeploy1M adds the default scenario's subscriptions (about 1M
// constraints) to an empty table in one call.
func BenchmarkDeploy1M(b *testing.B) {
	defaultScenario(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	c0 := threadCPU()
	for i := 0; i < b.N; i++ {
		tb := New()
		if _, err := tb.AddSpecs(defaultSpecs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((threadCPU()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkDeployDevice1M is BenchmarkDeploy1M with the device image:
// separately (AddSpecs, then NewDevice) or built alongside the indexes
// (AddSpecsDevice), alternately in one run.
func BenchmarkDeployDevice1M(b *testing.B) {
	defaultScenario(b)
	for _, mode := range []string{"separate", "together"} {
		b.Run(mode, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				tb := New()
				if mode == "separate" {
					if _, err := tb.AddSpecs(defaultSpecs); err != nil {
						b.Fatal(err)
					}
					NewDevice(tb)
				} else if _, _, err := tb.AddSpecsDevice(defaultSpecs, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkChange measures one subscription added and removed on the
// default scenario's table (the cost a change puts on the write lock),
// the filters of the scenario's subscriptions in turn; cpu-ns/op is the
// thread's CPU time (a shared machine's lost time left out).
func BenchmarkChange(b *testing.B) {
	tb, _ := defaultScenario(b)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	c0 := threadCPU()
	for i := 0; i < b.N; i++ {
		f := defaultSpecs[i*7919%len(defaultSpecs)].Filters
		id, err := tb.Add(99, f)
		if err != nil {
			b.Fatal(err)
		}
		if err := tb.Remove(id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((threadCPU()-c0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// BenchmarkLayoutDefault builds the default scenario's device layout.
func BenchmarkLayoutDefault(b *testing.B) {
	tb, _ := defaultScenario(b)
	var l *Layout
	for i := 0; i < b.N; i++ {
		l = tb.Layout()
	}
	b.ReportMetric(float64(l.Image.Bytes()), "image-bytes")
	b.ReportMetric(float64(NewDevice(tb).Layout().Image.Bytes()), "device-bytes")
}

// BenchmarkDeviceChange measures one subscription added and removed on the
// default scenario's table with its device image brought up to date after
// each (Device.Update: the bubbles a device needs).
func BenchmarkDeviceChange(b *testing.B) {
	tb, _ := defaultScenario(b)
	dev := NewDevice(tb)
	dev.Mirror().Sync()
	f := defaultSpecs[12345].Filters
	words := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id, err := tb.Add(99, f)
		if err != nil {
			b.Fatal(err)
		}
		words += len(dev.Update(tb).Bubbles)
		if err := tb.Remove(id); err != nil {
			b.Fatal(err)
		}
		words += len(dev.Update(tb).Bubbles)
	}
	b.ReportMetric(float64(words)/float64(2*b.N), "words/change")
}
