package filter

import (
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's CPU time (user and system, every thread: the
// garbage collector's too).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds the CPU time per operation since start: on a loaded
// machine the wall time per operation (ns/op) includes waiting for a
// core.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
}

// TestCompilerEqualsCompile: a set assembled from cached units (after
// adds and deletes) is the program a fresh compile gives, word for word
// in its device layout, and answers the same on every packet.
func TestCompilerEqualsCompile(t *testing.T) {
	c := NewCompiler(LinkEthernet, false, nil)
	all := append(benchSpecs(300), Spec{Name: "b1", Expr: "bpf:4,40 0 0 12,21 0 1 2048,6 0 0 262144,6 0 0 0"},
		Spec{Name: "dup1", Expr: "tcp port 1001"}, Spec{Name: "dup2", Expr: "tcp port 1001"})
	pkts := ethernetCorpus()
	check := func(specs []Spec) {
		t.Helper()
		got, err := c.Compile(specs)
		if err != nil {
			t.Fatal(err)
		}
		want, err := Compile(specs, LinkEthernet, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Layout(), want.Layout()) {
			t.Fatalf("%d filters: the assembled layout differs from a fresh compile's", len(specs))
		}
		eg, ew := NewEvaluator(got), NewEvaluator(want)
		a, b := make([]uint64, got.Words()), make([]uint64, want.Words())
		for i, p := range pkts {
			eg.Eval(p.data, p.wire, a)
			ew.Eval(p.data, p.wire, b)
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%d filters, packet %d: assembled %x, fresh %x", len(specs), i, a, b)
			}
		}
	}
	check(all)
	// Delete every third filter, then add new ones and bring some back.
	var fewer []Spec
	for i, s := range all {
		if i%3 != 0 {
			fewer = append(fewer, s)
		}
	}
	check(fewer)
	more := append(append([]Spec(nil), fewer...), Spec{Name: "new1", Expr: "udp port 4242"}, Spec{Name: "new2", Expr: "vlan 7 and tcp"}, all[0], all[3])
	check(more)
	// An error names the filter; the compiler's cache is unharmed.
	if _, err := c.Compile(append(more, Spec{Name: "bad", Expr: "tcp port"})); err == nil {
		t.Fatal("bad expression compiled")
	}
	check(more)
}

// benchAdd measures adding one filter to a set of n (the set's other
// filters compiled before, as a running set's are).
func benchAdd(b *testing.B, n int) {
	specs := benchSpecs(n)
	c := NewCompiler(LinkEthernet, false, nil)
	if _, err := c.Compile(specs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for i := 0; i < b.N; i++ {
		s := append(specs[:n:n], Spec{Name: "added", Expr: fmt.Sprintf("tcp port %d and host 172.16.%d.%d", i%65536, i/256%256, i%256)})
		if _, err := c.Compile(s); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDelete measures deleting one filter from a set of n.
func benchDelete(b *testing.B, n int) {
	specs := benchSpecs(n)
	c := NewCompiler(LinkEthernet, false, nil)
	if _, err := c.Compile(specs); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for i := 0; i < b.N; i++ {
		k := i % n
		s := append(append(make([]Spec, 0, n), specs[:k]...), specs[k+1:]...)
		if _, err := c.Compile(s); err != nil {
			b.Fatal(err)
		}
	}
}

// benchFull measures compiling the set from nothing (what every change
// cost before the compiler kept units).
func benchFull(b *testing.B, n int) {
	specs := benchSpecs(n)
	start := cpuTime()
	defer func() { reportCPU(b, start) }()
	for i := 0; i < b.N; i++ {
		if _, err := Compile(specs, LinkEthernet, false, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAddFilter100(b *testing.B)    { benchAdd(b, 100) }
func BenchmarkAddFilter1000(b *testing.B)   { benchAdd(b, 1000) }
func BenchmarkDeleteFilter100(b *testing.B) { benchDelete(b, 100) }
func BenchmarkDeleteFilter1000(b *testing.B) {
	benchDelete(b, 1000)
}
func BenchmarkCompileFull100(b *testing.B)  { benchFull(b, 100) }
func BenchmarkCompileFull1000(b *testing.B) { benchFull(b, 1000) }
