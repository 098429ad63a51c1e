package filters

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/tables/filter"
)

// frame builds an Ethernet/IPv4/UDP or TCP frame, VLAN-tagged when vid > 0.
func frame(src, dst byte, proto uint8, sport, dport uint16, vid uint16, payload int) []byte {
	var b []byte
	b = append(b, 0x02, 0, 0, 0, 0, dst, 0x02, 0, 0, 0, 0, src)
	if vid > 0 {
		b = binary.BigEndian.AppendUint16(b, 0x8100)
		b = binary.BigEndian.AppendUint16(b, vid)
	}
	b = binary.BigEndian.AppendUint16(b, 0x0800)
	l4 := 8
	if proto == 6 {
		l4 = 20
	}
	ip := make([]byte, 20)
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+l4+payload))
	ip[8], ip[9] = 64, proto
	copy(ip[12:], []byte{10, 0, 0, src})
	copy(ip[16:], []byte{10, 0, 0, dst})
	b = append(b, ip...)
	t := make([]byte, l4+payload)
	binary.BigEndian.PutUint16(t, sport)
	binary.BigEndian.PutUint16(t[2:], dport)
	if proto == 6 {
		t[12] = 5 << 4
		t[13] = 0x02
	}
	return append(b, t...)
}

func randomFrames(r *rand.Rand, n int) [][]byte {
	var out [][]byte
	for range n {
		proto := uint8(17)
		if r.IntN(2) == 0 {
			proto = 6
		}
		var vid uint16
		if r.IntN(4) == 0 {
			vid = uint16(1 + r.IntN(3))
		}
		out = append(out, frame(byte(1+r.IntN(4)), byte(1+r.IntN(4)), proto, uint16(1000+r.IntN(4)),
			uint16(80+r.IntN(3)), vid, r.IntN(64)))
	}
	return out
}

var testFilters = []Config{
	{Name: "h1", Expression: "host 10.0.0.1"},
	{Name: "tcp80", Expression: "tcp dst port 80", Ports: []uint32{1}},
	{Name: "udp", Expression: "udp", Ports: []uint32{2}},
	{Name: "vlan2", Expression: "vlan 2 and ip"},
	{Name: "big", Expression: "greater 80 and not port 81"},
}

// oracle counts one filter alone over frames.
func oracle(t *testing.T, expr string, frames [][]byte) (pk, by uint64) {
	t.Helper()
	p, err := filter.CompileOne(expr, filter.LinkEthernet, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := filter.NewEvaluator(p)
	for _, f := range frames {
		if ev.Match(f, uint32(len(f))) {
			pk++
			by += uint64(len(f))
		}
	}
	return
}

func TestCountsPerPort(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	for _, c := range testFilters {
		if err := s.Add(c); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	byPort := map[uint32][][]byte{}
	for port := uint32(1); port <= 3; port++ {
		fs := randomFrames(r, 500)
		byPort[port] = fs
		for i := 0; i < len(fs); i += 32 {
			batch := fs[i:min(i+32, len(fs))]
			before := append([][]byte(nil), batch...)
			got, _ := s.Rx(port, batch, nil)
			if len(got) != len(before) {
				t.Fatalf("Rx changed the batch: %d frames of %d", len(got), len(before))
			}
			for j := range got {
				if !bytes.Equal(got[j], before[j]) {
					t.Fatal("Rx changed a frame")
				}
			}
		}
	}
	for _, in := range s.Filters() {
		var c Config
		for _, tc := range testFilters {
			if tc.Name == in.Name {
				c = tc
			}
		}
		var wp, wb uint64
		for port, fs := range byPort {
			if len(c.Ports) > 0 && c.Ports[0] != port {
				continue
			}
			p, b := oracle(t, c.Expression, fs)
			wp, wb = wp+p, wb+b
		}
		if in.Packets != wp || in.Bytes != wb {
			t.Errorf("%s: %d packets %d bytes, want %d %d", in.Name, in.Packets, in.Bytes, wp, wb)
		}
		if wp == 0 {
			t.Errorf("%s: the test matches nothing", in.Name)
		}
	}
}

func TestBadExpressionChangesNothing(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	if err := s.Add(Config{Name: "ok", Expression: "udp"}); err != nil {
		t.Fatal(err)
	}
	s.Settle() // the merge of "ok" done: nothing else changes the set
	g := s.gen.Load()
	err := s.Add(Config{Name: "bad", Expression: "tcp port 80 and and"})
	if err == nil || !strings.Contains(err.Error(), "filter bad") || !strings.Contains(err.Error(), "position") ||
		strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v: want one line naming the filter and the position", err)
	}
	if s.gen.Load() != g || len(s.Filters()) != 1 {
		t.Fatal("a failed add changed the set")
	}
	if err := s.Add(Config{Name: "ok", Expression: "tcp"}); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := s.Delete("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete unknown: %v", err)
	}
}

// TestHotSwapLosesNothing: a filter present throughout counts every frame
// exactly once while others are added and deleted concurrently with Rx.
func TestHotSwapLosesNothing(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	if err := s.Add(Config{Name: "all", Expression: "ip or vlan"}); err != nil {
		t.Fatal(err)
	}
	fs := randomFrames(rand.New(rand.NewPCG(3, 4)), 64)
	var sent atomic.Uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for q := range 2 { // two receive queues of one port
		wg.Add(1)
		go func() {
			defer wg.Done()
			batch := make([][]byte, len(fs))
			for !stop.Load() {
				copy(batch, fs)
				s.Rx(uint32(1+q%2), batch, nil)
				sent.Add(uint64(len(fs)))
			}
		}()
	}
	for i := range 200 {
		name := fmt.Sprintf("x%d", i/2)
		if i%2 == 0 {
			if err := s.Add(Config{Name: name, Expression: "udp or tcp", Ports: []uint32{uint32(1 + i%3)}}); err != nil {
				t.Fatal(err)
			}
		} else if err := s.Delete(name); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()
	in, err := s.Info("all")
	if err != nil {
		t.Fatal(err)
	}
	if in.Packets != sent.Load() {
		t.Fatalf("all counted %d of %d frames", in.Packets, sent.Load())
	}
}

// TestAddVisibleNextBatch: a filter added between two batches counts the
// second whole.
func TestAddVisibleNextBatch(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	fs := randomFrames(rand.New(rand.NewPCG(5, 6)), 100)
	s.Rx(1, fs, nil)
	if err := s.Add(Config{Name: "n", Expression: "ip or vlan"}); err != nil {
		t.Fatal(err)
	}
	s.Rx(1, fs, nil)
	if in, _ := s.Info("n"); in.Packets != 100 {
		t.Fatalf("counted %d, want 100", in.Packets)
	}
	if err := s.Delete("n"); err != nil {
		t.Fatal(err)
	}
	s.Rx(1, fs, nil)
	if len(s.Filters()) != 0 {
		t.Fatal("deleted filter listed")
	}
}

func readCapture(t *testing.T, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapfile.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Link != pcapfile.LinkEthernet || int(p.WireLen) != len(p.Data) {
			t.Fatalf("record link %v wire %d len %d", p.Link, p.WireLen, len(p.Data))
		}
		out = append(out, p.Data)
	}
}

func TestCaptureAndRotation(t *testing.T) {
	dir := t.TempDir()
	s := New(Options{})
	file := filepath.Join(dir, "c.pcapng")
	if err := s.Add(Config{Name: "c", Expression: "tcp", Capture: &CaptureConfig{File: file, MaxBytes: 4096, MaxFiles: 3}}); err != nil {
		t.Fatal(err)
	}
	fs := randomFrames(rand.New(rand.NewPCG(7, 8)), 300)
	var want [][]byte
	p, _ := filter.CompileOne("tcp", filter.LinkEthernet, false, nil)
	ev := filter.NewEvaluator(p)
	for _, f := range fs {
		if ev.Match(f, uint32(len(f))) {
			want = append(want, f)
		}
	}
	for i := 0; i < len(fs); i += 16 {
		s.Rx(1, fs[i:min(i+16, len(fs))], nil)
	}
	if err := s.Delete("c"); err != nil { // flushes and closes
		t.Fatal(err)
	}
	var got [][]byte
	for _, name := range []string{file + ".2", file + ".1", file} {
		st, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 4096 {
			t.Errorf("%s: %d bytes, over max_bytes", name, st.Size())
		}
		got = append(got, readCapture(t, name)...)
	}
	if _, err := os.Stat(file + ".3"); err == nil {
		t.Error("more files kept than max_files")
	}
	// The kept files hold the last packets, in order.
	if len(got) == 0 || len(got) >= len(want) {
		t.Fatalf("kept %d of %d packets: rotation did not drop the oldest files", len(got), len(want))
	}
	tail := want[len(want)-len(got):]
	for i := range got {
		if !bytes.Equal(got[i], tail[i]) {
			t.Fatalf("packet %d differs", i)
		}
	}
}

func TestCaptureWhole(t *testing.T) {
	file := filepath.Join(t.TempDir(), "w.pcapng")
	s := New(Options{QueueDepth: 1 << 16})
	if err := s.Add(Config{Name: "w", Expression: "udp and dst port 81", Capture: &CaptureConfig{File: file}}); err != nil {
		t.Fatal(err)
	}
	fs := randomFrames(rand.New(rand.NewPCG(9, 10)), 400)
	s.Rx(2, fs, nil)
	s.Close()
	in, _ := s.Info("w")
	got := readCapture(t, file)
	if uint64(len(got)) != in.Packets || in.Captured != in.Packets || in.Dropped != 0 {
		t.Fatalf("captured %d (file %d) dropped %d of %d", in.Captured, len(got), in.Dropped, in.Packets)
	}
	wp, _ := oracle(t, "udp and dst port 81", fs)
	if wp != in.Packets || wp == 0 {
		t.Fatalf("counted %d, oracle %d", in.Packets, wp)
	}
}

// TestCaptureQueueFullDrops: a capture whose queue is full drops and
// counts, and never blocks Rx.
func TestCaptureQueueFullDrops(t *testing.T) {
	file := filepath.Join(t.TempDir(), "d.pcapng")
	s := New(Options{QueueDepth: 1})
	if err := s.Add(Config{Name: "d", Expression: "ip", Capture: &CaptureConfig{File: file}}); err != nil {
		t.Fatal(err)
	}
	fs := randomFrames(rand.New(rand.NewPCG(11, 12)), 2000)
	s.Rx(1, fs, nil)
	s.Close()
	in, _ := s.Info("d")
	if wp, _ := oracle(t, "ip", fs); in.Captured+in.Dropped != in.Packets || in.Packets != wp {
		t.Fatalf("captured %d + dropped %d != %d", in.Captured, in.Dropped, in.Packets)
	}
	if got := readCapture(t, file); uint64(len(got)) != in.Captured {
		t.Fatalf("file holds %d, captured %d", len(got), in.Captured)
	}
	t.Logf("captured %d dropped %d", in.Captured, in.Dropped)
}

func TestCollector(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	if err := s.Add(Config{Name: "u", Expression: "udp"}); err != nil {
		t.Fatal(err)
	}
	fs := [][]byte{frame(1, 2, 17, 1, 2, 0, 10), frame(1, 2, 6, 1, 2, 0, 10)}
	s.Rx(1, fs, nil)
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.Collector())
	want := `
# HELP gswitch_filter_packets_total Packets a live filter accepted (frames received on its ports).
# TYPE gswitch_filter_packets_total counter
gswitch_filter_packets_total{filter="u"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "gswitch_filter_packets_total"); err != nil {
		t.Fatal(err)
	}
}

// TestSidePathThenMerge: a filter added to a set is counted from the next
// batch by the side path, then by the merged program, exactly; a deleted
// one stops at once, before its merge.
func TestSidePathThenMerge(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	for i := range 50 {
		if err := s.Add(Config{Name: fmt.Sprintf("b%d", i), Expression: fmt.Sprintf("host 10.0.0.%d or port %d", i, 2000+i)}); err != nil {
			t.Fatal(err)
		}
	}
	s.Settle()
	fs := randomFrames(rand.New(rand.NewPCG(21, 22)), 300)
	want, _ := oracle(t, "udp and port 80", fs)
	s.mu.Lock() // hold the merge back: the first batch runs on the side path
	if err := s.addLocked(Config{Name: "n", Expression: "udp and port 80", Ports: []uint32{1}}); err != nil {
		t.Fatal(err)
	}
	g := s.gen.Load()
	s.mu.Unlock()
	if len(g.side) != 1 {
		t.Fatalf("side path holds %d filters, want 1", len(g.side))
	}
	s.Rx(1, fs, nil)
	s.Rx(2, fs, nil) // not its port
	s.Settle()
	if g := s.gen.Load(); len(g.side) != 0 || g.dead != nil {
		t.Fatalf("after the merge: side %d, dead %d", len(g.side), len(g.dead))
	}
	s.Rx(1, fs, nil)
	if in, _ := s.Info("n"); in.Packets != 2*want {
		t.Fatalf("counted %d, want %d", in.Packets, 2*want)
	}
	// Deleted: marked dead in the programs until the merge takes it out.
	s.mu.Lock()
	if err := s.deleteLocked("b1"); err != nil {
		t.Fatal(err)
	}
	g = s.gen.Load()
	s.mu.Unlock()
	if !g.dead[g.all.entries[1]] || g.all.entries[1].cfg.Name != "b1" {
		t.Fatal("b1 not marked dead")
	}
	before, _ := oracle(t, "host 10.0.0.1 or port 2001", fs)
	in0 := g.all.entries[1].info()
	s.Rx(1, fs, nil)
	if in := g.all.entries[1].info(); in.Packets != in0.Packets || before == 0 {
		t.Fatalf("deleted b1 counted on: %d then %d (it matches %d)", in0.Packets, in.Packets, before)
	}
	s.Settle()
	s.Rx(1, fs, nil)
	if _, err := s.Info("b1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("b1: %v", err)
	}
	if in, _ := s.Info("n"); in.Packets != 4*want {
		t.Fatalf("counted %d, want %d", in.Packets, 4*want)
	}
}

// TestHotAddRemoveExact: filters added and deleted while batches flow
// count exactly the batches between their Add and their Delete, whether
// the side path or a merged program counted them, while merges of a set
// of 300 land in between; a filter present throughout counts every frame
// of a second port's receive loop running concurrently.
func TestHotAddRemoveExact(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	for i := range 300 {
		if err := s.Add(Config{Name: fmt.Sprintf("b%d", i), Expression: fmt.Sprintf("host 10.1.%d.%d or tcp port %d", i/250, i%250, 3000+i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Add(Config{Name: "all", Expression: "ip or vlan"}); err != nil {
		t.Fatal(err)
	}
	s.Settle()
	r := rand.New(rand.NewPCG(31, 32))
	fs := randomFrames(r, 64)
	var sent2 atomic.Uint64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // port 2's receive loop
		defer wg.Done()
		batch := make([][]byte, len(fs))
		for !stop.Load() {
			copy(batch, fs)
			s.Rx(2, batch, nil)
			sent2.Add(uint64(len(fs)))
		}
	}()
	exprs := []string{"udp", "tcp port 80", "vlan and udp", "host 10.0.0.2", "port 1001 or port 1002"}
	want := map[string]uint64{} // live filters on port 1: expected counts
	exprOf := map[string]string{}
	per := map[string]uint64{}
	for _, e := range exprs {
		per[e], _ = oracle(t, e, fs)
	}
	var sent1 uint64
	live := []string{}
	for i := range 120 {
		switch {
		case len(live) > 0 && r.IntN(3) == 0:
			k := r.IntN(len(live))
			name := live[k]
			in, _ := s.Info(name)
			if in.Packets != want[name] {
				t.Fatalf("step %d: %s (%s) counted %d, want %d", i, name, exprOf[name], in.Packets, want[name])
			}
			if err := s.Delete(name); err != nil {
				t.Fatal(err)
			}
			live = slices.Delete(live, k, k+1)
			delete(want, name)
		default:
			name := fmt.Sprintf("x%d", i)
			e := exprs[r.IntN(len(exprs))]
			if err := s.Add(Config{Name: name, Expression: e, Ports: []uint32{1}}); err != nil {
				t.Fatal(err)
			}
			live, want[name], exprOf[name] = append(live, name), 0, e
		}
		for range 1 + r.IntN(3) {
			s.Rx(1, fs, nil)
			sent1 += uint64(len(fs))
			for _, n := range live {
				want[n] += per[exprOf[n]]
			}
		}
		if r.IntN(10) == 0 {
			s.Settle()
		}
	}
	stop.Store(true)
	wg.Wait()
	for _, n := range live {
		if in, _ := s.Info(n); in.Packets != want[n] {
			t.Fatalf("%s (%s) counted %d, want %d", n, exprOf[n], in.Packets, want[n])
		}
	}
	if in, _ := s.Info("all"); in.Packets != sent1+sent2.Load() {
		t.Fatalf("all counted %d of %d frames", in.Packets, sent1+sent2.Load())
	}
}

// BenchmarkAddVisible1000 measures adding one filter to a running set of
// 1,000 on every port while a receive loop runs batches of 64 frames: the
// time from the call until a batch sees the filter (Add returns once it
// is published; the test checks the next batch counts it), and the time
// until the merged program replaces the side path.
func BenchmarkAddVisible1000(b *testing.B) {
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer s.Close()
	for i := 0; i < 1000; i++ {
		if err := s.Add(Config{Name: fmt.Sprintf("f%d", i), Expression: fmt.Sprintf("host 10.%d.%d.%d or tcp port %d", i/65536, i/256%256, i%256, 1000+i)}); err != nil {
			b.Fatal(err)
		}
	}
	s.Settle()
	fs := randomFrames(rand.New(rand.NewPCG(41, 42)), 64)
	var stop atomic.Bool
	var batches atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		batch := make([][]byte, len(fs))
		for !stop.Load() {
			copy(batch, fs)
			s.Rx(1, batch, nil)
			batches.Add(1)
		}
	}()
	var visible, merged []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("new%d", i)
		t0 := time.Now()
		// A new expression each time: compiled from its text, not found
		// in the set's compiler.
		if err := s.Add(Config{Name: name, Expression: fmt.Sprintf("udp or tcp port %d or net 172.%d.%d.0/24", 20000+i, 16+i/256%16, i%256)}); err != nil {
			b.Fatal(err)
		}
		visible = append(visible, float64(time.Since(t0).Microseconds())/1e3)
		// The next batch that starts counts it.
		for n := batches.Load(); batches.Load() < n+2; {
			runtime.Gosched()
		}
		if in, _ := s.Info(name); in.Packets == 0 {
			b.Fatalf("%s: no packets after the next batch", name)
		}
		s.Settle()
		merged = append(merged, float64(time.Since(t0).Microseconds())/1e3)
		b.StopTimer()
		if err := s.Delete(name); err != nil {
			b.Fatal(err)
		}
		s.Settle()
		b.StartTimer()
	}
	b.StopTimer()
	stop.Store(true)
	<-done
	slices.Sort(visible)
	slices.Sort(merged)
	b.ReportMetric(visible[len(visible)/2], "visible-ms-p50")
	b.ReportMetric(visible[len(visible)-1], "visible-ms-max")
	b.ReportMetric(merged[len(merged)/2], "merged-ms-p50")
}

// benchSetAdd measures adding one filter to a running set of n on every
// port, and deleting it: ns/op is the time until the next batch sees the
// change (Add and Delete return then), cpu-ms/op the CPU of the change and
// of its merge into the programs.
func benchSetAdd(b *testing.B, n int, del bool) {
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer s.Close()
	for i := 0; i < n; i++ {
		if err := s.Add(Config{Name: fmt.Sprintf("f%d", i), Expression: fmt.Sprintf("host 10.%d.%d.%d or tcp port %d", i/65536, i/256%256, i%256, 1000+i)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	defer func() {
		// CPU time per change (every thread, the GC's too): on a loaded
		// machine ns/op includes waiting for a core.
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
		b.ReportMetric(float64(cpu)/float64(b.N)/1e6, "cpu-ms/op")
	}()
	s.Settle()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("new%d", i)
		if !del {
			if err := s.Add(Config{Name: name, Expression: fmt.Sprintf("udp port %d and net 172.16.%d.0/24", i%65536, i%256)}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			s.Settle()
			b.StartTimer()
			continue
		}
		if err := s.Delete(fmt.Sprintf("f%d", i%n)); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Settle()
		s.Add(Config{Name: fmt.Sprintf("f%d", i%n), Expression: fmt.Sprintf("host 10.0.0.%d", i%250)})
		s.Settle()
		b.StartTimer()
	}
}

func BenchmarkSetAdd100(b *testing.B)     { benchSetAdd(b, 100, false) }
func BenchmarkSetAdd1000(b *testing.B)    { benchSetAdd(b, 1000, false) }
func BenchmarkSetDelete100(b *testing.B)  { benchSetAdd(b, 100, true) }
func BenchmarkSetDelete1000(b *testing.B) { benchSetAdd(b, 1000, true) }

// BenchmarkRx100 is the live filters' cost per frame: Rx with the 100
// filters of bench forward's --filters file (bench/forward/testdata) on
// every port, on batches of 64 frames like bench forward's traffic (UDP
// 10.0.0.1 to 10.0.0.2 port 9, 60 bytes, 16 source ports). cpu-ns/frame
// is the process's CPU time per frame.
func BenchmarkRx100(b *testing.B) {
	b.Run("memo", func(b *testing.B) { benchRx100(b) })
	b.Run("memo-seq", func(b *testing.B) {
		stampSeq = true
		defer func() { stampSeq = false }()
		benchRx100(b)
	})
	// Every frame another source address: nothing repeats, the memo
	// steps aside (against nomemo-distinct: what that costs).
	b.Run("memo-distinct", func(b *testing.B) {
		stampSrc = true
		defer func() { stampSrc = false }()
		benchRx100(b)
	})
	b.Run("nomemo-distinct", func(b *testing.B) {
		defer func(n int) { memoMinFilters = n }(memoMinFilters)
		memoMinFilters = 1 << 30
		stampSrc = true
		defer func() { stampSrc = false }()
		benchRx100(b)
	})
	b.Run("nomemo", func(b *testing.B) {
		defer func(n int) { memoMinFilters = n }(memoMinFilters)
		memoMinFilters = 1 << 30
		benchRx100(b)
	})
}

// stampSeq: benchRx100 writes a sequence number into each frame's payload
// (bytes 50-57, as bench forward stamps its frames) before each batch.
var stampSeq bool

// stampSrc: benchRx100 gives each frame a new IPv4 source address
// (bytes 26-29) before each batch.
var stampSrc bool

func benchRx100(b *testing.B) {
	text, err := os.ReadFile(filepath.Join("..", "..", "bench", "forward", "testdata", "filters100.txt"))
	if err != nil {
		b.Fatal(err)
	}
	s := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer s.Close()
	n := 0
	for _, l := range strings.Split(string(text), "\n") {
		name, expr, ok := strings.Cut(l, ":")
		if !ok || strings.HasPrefix(l, "#") {
			continue
		}
		if err := s.Add(Config{Name: strings.TrimSpace(name), Expression: strings.TrimSpace(expr)}); err != nil {
			b.Fatal(err)
		}
		n++
	}
	s.Settle()
	batch := make([][]byte, 64)
	for i := range batch {
		f := frame(1, 2, 17, uint16(1024+i%16), 9, 0, 18)
		batch[i] = f[:60]
	}
	s.Rx(1, batch, nil) // the scratch made
	runtime.GC()        // the set-up's garbage collected outside the timing
	var ru0, ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	seq := uint64(0)
	for i := 0; i < b.N; i++ {
		if stampSeq {
			for _, f := range batch {
				seq++
				binary.BigEndian.PutUint64(f[50:], seq)
			}
		}
		if stampSrc {
			for _, f := range batch {
				seq++
				binary.BigEndian.PutUint32(f[26:], 0x0b000000+uint32(seq))
			}
		}
		s.Rx(1, batch, nil)
	}
	b.StopTimer()
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/frame")
	b.ReportMetric(float64(cpu)/float64(b.N*len(batch)), "cpu-ns/frame")
	b.ReportMetric(float64(n), "filters")
	if in, _ := s.Info("m1"); in.Packets != uint64((b.N+1)*len(batch)) {
		b.Fatalf("udp counted %d of %d", in.Packets, (b.N+1)*len(batch))
	}
}

// TestMemoCountsExact: with enough filters for the batch memo, counts
// equal each filter's alone over batches full of repeated flows: frames
// repeated, differing only in bytes no filter reads, cut shorter, or with
// another length where a filter reads the length.
func TestMemoCountsExact(t *testing.T) {
	s := New(Options{})
	defer s.Close()
	exprs := []string{"udp", "tcp dst port 80", "host 10.0.0.1", "vlan 2 and ip", "greater 80 and not port 81",
		"less 70", "udp[8:2] = 0", "ip[2:2] > 60", "tcp[tcpflags] & tcp-syn != 0", "port 1001 or port 1002",
		"net 10.0.0.0/30", "ip[8] = 64 and udp dst port 82"}
	for i, e := range exprs {
		if err := s.Add(Config{Name: fmt.Sprintf("m%d", i), Expression: e}); err != nil {
			t.Fatal(err)
		}
	}
	s.Settle()
	if pp := s.gen.Load().all; !pp.memo {
		t.Fatal("the memo is off")
	}
	r := rand.New(rand.NewPCG(51, 52))
	base := randomFrames(r, 12)
	var all [][]byte
	for range 40 {
		batch := make([][]byte, 0, 96)
		for range 96 {
			f := slices.Clone(base[r.IntN(len(base))])
			switch r.IntN(5) {
			case 0: // a payload byte changed
				f[len(f)-1] ^= byte(1 + r.IntN(255))
			case 1: // cut shorter
				f = f[:r.IntN(len(f)+1)]
			case 2: // longer
				f = append(f, make([]byte, r.IntN(40))...)
			}
			batch = append(batch, f)
		}
		s.Rx(1, batch, nil)
		all = append(all, batch...)
	}
	for i, e := range exprs {
		wp, wb := oracle(t, e, all)
		in, _ := s.Info(fmt.Sprintf("m%d", i))
		if in.Packets != wp || in.Bytes != wb {
			t.Errorf("%s: counted %d packets %d bytes, alone %d and %d", e, in.Packets, in.Bytes, wp, wb)
		}
	}
}

// TestMemoCaptureExact: with the memo on (12 filters), a capturing
// filter, added first (on the side path) and after the merge, writes
// exactly the frames it counts, in order, over batches of repeated flows
// with distinct payloads (the memo's hits).
func TestMemoCaptureExact(t *testing.T) {
	file := filepath.Join(t.TempDir(), "m.pcapng")
	s := New(Options{QueueDepth: 1 << 16})
	if err := s.Add(Config{Name: "cap", Expression: "udp and dst port 81", Capture: &CaptureConfig{File: file}}); err != nil {
		t.Fatal(err)
	}
	for i := range 11 {
		if err := s.Add(Config{Name: fmt.Sprintf("o%d", i), Expression: fmt.Sprintf("tcp port %d or host 10.0.0.%d", 80+i, i)}); err != nil {
			t.Fatal(err)
		}
	}
	r := rand.New(rand.NewPCG(13, 14))
	base := randomFrames(r, 8)
	var all [][]byte
	send := func(batches int) {
		for range batches {
			batch := make([][]byte, 48)
			for i := range batch {
				f := slices.Clone(base[r.IntN(len(base))])
				f[len(f)-1] = byte(r.IntN(256)) // a payload byte: the frames differ, the answers repeat
				batch[i] = f
			}
			s.Rx(1, batch, nil)
			all = append(all, batch...)
		}
	}
	send(10) // the capturing filter on the side path
	s.Settle()
	if pp := s.gen.Load().all; !pp.memo || pp.capture == nil {
		t.Fatal("the memo or the capture mask is off")
	}
	send(30)
	s.Close()
	in, _ := s.Info("cap")
	var want [][]byte
	p, _ := filter.CompileOne("udp and dst port 81", filter.LinkEthernet, false, nil)
	ev := filter.NewEvaluator(p)
	for _, f := range all {
		if ev.Match(f, uint32(len(f))) {
			want = append(want, f)
		}
	}
	got := readCapture(t, file)
	if len(want) == 0 || uint64(len(want)) != in.Packets || len(got) != len(want) || in.Dropped != 0 {
		t.Fatalf("oracle %d, counted %d, captured %d (file %d), dropped %d", len(want), in.Packets, in.Captured, len(got), in.Dropped)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("captured packet %d differs", i)
		}
	}
}
