package filter

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// TestRunJSON runs the bench on a small synthetic capture and checks its
// figures and the first filter's count against tcpdump (--check).
func TestRunJSON(t *testing.T) {
	args := []string{"--packets", "3000", "--filters", "1,50", "--rounds", "1", "--json"}
	if _, err := exec.LookPath("tcpdump"); err != nil {
		args = append(args, "--tcpdump=false", "--check=false")
	}
	var out, errb bytes.Buffer
	if err := Run(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	dec := json.NewDecoder(&out)
	for _, want := range []int{1, 50} {
		var r Result
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		if r.Filters != want || r.Packets != 3000 || r.MPPS <= 0 || r.MPPSFile <= 0 || r.FirstCount == 0 || r.Matches < r.FirstCount {
			t.Errorf("result %+v", r)
		}
	}
}

// TestSpecsCompile: every generated set compiles and its filters are
// distinct.
func TestSpecsCompile(t *testing.T) {
	specs := Specs(300)
	seen := map[string]bool{}
	for _, s := range specs {
		if seen[s.Expr] {
			t.Errorf("duplicate %q", s.Expr)
		}
		seen[s.Expr] = true
	}
	if _, err := filter.Compile(specs, filter.LinkEthernet, false, nil); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkEval is go test -bench's form of the figures: Eval over a
// synthetic capture, 1, 100 and 1,000 filters.
func BenchmarkEval(b *testing.B) {
	path := filepath.Join(b.TempDir(), "s.pcapng")
	if err := WriteSynthetic(path, 100000, 1); err != nil {
		b.Fatal(err)
	}
	pkts, link, big, err := load(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 100, 1000} {
		prog, err := filter.Compile(Specs(n), link, big, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("filters="+strconv.Itoa(n), func(b *testing.B) {
			ev := filter.NewEvaluator(prog)
			out := make([]uint64, prog.Words())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p := &pkts[i%len(pkts)]
				ev.Eval(p.data, p.wire, out)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpps")
		})
	}
}

// cpuFilterGPU stands in for the device in TestRunGPUStandIn: CPUFilter
// behind gpu.FilterGPU.
type cpuFilterGPU struct{}

type cpuFilterDevice struct{ *gpu.CPUFilter }

func (cpuFilterGPU) Filter(p *filter.Program, streams, maxRow int) (gpu.FilterDevice, error) {
	return cpuFilterDevice{gpu.NewCPUFilter(p, maxRow)}, nil
}
func (cpuFilterGPU) Device() string { return "cpu stand-in" }
func (cpuFilterGPU) Close() error   { return nil }

func (cpuFilterDevice) Describe() string { return "cpu" }
func (d cpuFilterDevice) KernelTime(b *gpu.PacketBatch, iters int) (float64, error) {
	t0 := time.Now()
	for range iters {
		if err := d.Submit(b); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(t0).Microseconds()) / 1e3 / float64(iters), nil
}

// TestRunGPUStandIn runs --backend both with the CPU standing in for the
// device: the end-to-end pass over the capture file (mapped, parsed on
// several goroutines) must count what the CPU counts (--check).
func TestRunGPUStandIn(t *testing.T) {
	openGPU = func() (gpu.FilterGPU, error) { return cpuFilterGPU{}, nil }
	defer func() { openGPU = gpu.OpenFilterGPU }()
	args := []string{"--packets", "20000", "--filters", "1,100", "--rounds", "1", "--gpu-rounds", "2", "--batch", "3000",
		"--kernel-packets", "5000", "--backend", "both", "--json"}
	if _, err := exec.LookPath("tcpdump"); err != nil {
		args = append(args, "--tcpdump=false")
	}
	var out, errb bytes.Buffer
	if err := Run(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	dec := json.NewDecoder(&out)
	for _, want := range []int{1, 100} {
		var r Result
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		g := r.GPU
		if g == nil || r.Filters != want || g.E2EMPPS <= 0 || g.KernelGPPS <= 0 || g.Mismatches != 0 || g.KernelPackets != 5000 ||
			g.Batch != 3000 || g.CaptureBytes == 0 || r.Backend != "both" {
			t.Errorf("result %+v gpu %+v", r, g)
		}
		if r.TcpdumpCnt != 0 && (r.XBPFCount != r.FirstCount || r.XBPFMPPS <= 0) {
			t.Errorf("x/net/bpf: %d packets at %.2f Mpps, ours %d", r.XBPFCount, r.XBPFMPPS, r.FirstCount)
		}
	}
}

// TestWriteSyntheticPcap: the parallel writer's capture reads back whole,
// the same for the same seed.
func TestWriteSyntheticPcap(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.pcap"), filepath.Join(dir, "b.pcap")
	if err := WriteSyntheticPcap(a, 10007, 3); err != nil {
		t.Fatal(err)
	}
	if err := WriteSyntheticPcap(b, 10007, 3); err != nil {
		t.Fatal(err)
	}
	pa, link, _, err := load(a)
	if err != nil || len(pa) != 10007 || link != filter.LinkEthernet {
		t.Fatalf("%d packets, link %d: %v", len(pa), link, err)
	}
	x, _ := os.ReadFile(a)
	y, _ := os.ReadFile(b)
	if !bytes.Equal(x, y) {
		t.Fatal("two captures of one seed differ")
	}
	var sum int
	for _, p := range pa {
		sum += len(p.data)
	}
	if m := float64(sum) / float64(len(pa)); m < 64 || m > 100 {
		t.Fatalf("mean packet %.1f bytes, want 64..100", m)
	}
}

// TestWalkTwinOnSynthetic: the GPU walk form's CPU twin (gpu.WalkEvaluator
// with its index: equalities and port ranges) answers Eval's answer on
// every packet of a synthetic capture, for the monitoring sets the bench
// generates.
func TestWalkTwinOnSynthetic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.pcap")
	if err := WriteSyntheticPcap(path, 30000, 5); err != nil {
		t.Fatal(err)
	}
	pkts, link, big, err := load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{100, 2000} {
		prog, err := filter.Compile(Specs(n), link, big, nil)
		if err != nil {
			t.Fatal(err)
		}
		l := prog.Layout()
		ix := gpu.BuildWalkIndex(l)
		we := gpu.NewWalkEvaluator(l, ix)
		ev := filter.NewEvaluator(prog)
		want, got := make([]uint64, prog.Words()), make([]uint64, prog.Words())
		matches := 0
		for k, p := range pkts {
			ev.Eval(p.data, p.wire, want)
			we.Eval(p.data, p.wire, got)
			for w := range want {
				if want[w] != got[w] {
					t.Fatalf("%d filters: packet %d: words %d: walk %x, Eval %x", n, k, w, got[w], want[w])
				}
				for x := want[w]; x != 0; x &= x - 1 {
					matches++
				}
			}
		}
		t.Logf("%d filters: %d unindexed, %d slots, %d entries; %d packets, %d matches, equal", n, len(ix.Unindexed),
			len(ix.Table)/gpu.WalkSlotWords, len(ix.IDs), len(pkts), matches)
	}
}
