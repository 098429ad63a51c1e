//go:build cuda

package gpu

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gswitch/gswitch/kernels"
	"github.com/gswitch/gswitch/tables/lpm"
)

// newTestCUDA starts the CUDA backend on device 0, or skips the test saying
// why no device is usable.
func newTestCUDA(t *testing.T) *CUDA {
	b, err := NewCUDA(0)
	if err != nil {
		t.Skipf("SKIPPED: no usable CUDA device, the GPU backend is not tested: %v", err)
	}
	t.Logf("device: %s", b.Device())
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return b
}

func TestCUDARandom(t *testing.T) {
	b := newTestCUDA(t)
	testRandomLPM(t, b, lpm.IPv4, 20000, 20000, 100)
	testRandomLPM(t, b, lpm.IPv6, 10000, 10000, 50)
}

func TestCUDAMixedUpdateSizes(t *testing.T) {
	b := newTestCUDA(t)
	testMixedUpdateSizes(t, b, lpm.IPv4)
	testMixedUpdateSizes(t, b, lpm.IPv6)
}

func TestCUDARejects(t *testing.T) {
	testRejects(t, newTestCUDA(t))
}

func TestCUDARealBGP(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the real BGP table is skipped")
	}
	b := newTestCUDA(t)
	v4, v6 := loadBGP(t, bgpPath(t))
	testRealLPM(t, b, lpm.IPv4, v4, 20000, 10, 1<<18)
	testRealLPM(t, b, lpm.IPv6, v6, 5000, 5, 1<<17)
}

func TestCUDAFlowRandom(t *testing.T) {
	testRandomFlowAll(t, newTestCUDA(t), true)
}

func TestCUDAFlowACL1(t *testing.T) {
	testACL1Flow(t, newTestCUDA(t), true)
}

func TestCUDAFlowRejects(t *testing.T) {
	testFlowRejects(t, newTestCUDA(t))
}

// TestCUDAEmbeddedPTX fails if the embedded PTX differs from what nvcc made
// from kernels/*.cu in this run ($GSWITCH_PTX_DIR, written by the same
// command that runs this test on a machine with nvcc).
func TestCUDAEmbeddedPTX(t *testing.T) {
	dir := os.Getenv(PTXDirEnv)
	if dir == "" {
		t.Skipf("SKIPPED: $%s is not set: no freshly compiled PTX to compare the embedded copy with", PTXDirEnv)
	}
	for name, emb := range map[string]string{
		"gamt_sm90.ptx": kernels.GAMTsm90, "gamt_compute80.ptx": kernels.GAMTcompute80,
		"flow_sm90.ptx": kernels.Flowsm90, "flow_compute80.ptx": kernels.Flowcompute80,
		"resident_sm90.ptx": kernels.Residentsm90, "resident_compute80.ptx": kernels.Residentcompute80,
		"rabin_sm90.ptx": kernels.Rabinsm90, "rabin_compute80.ptx": kernels.Rabincompute80,
		"pubsub_sm90.ptx": kernels.Pubsubsm90, "pubsub_compute80.ptx": kernels.Pubsubcompute80,
		"filter_sm90.ptx": kernels.Filtersm90, "filter_compute80.ptx": kernels.Filtercompute80,
	} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != emb {
			t.Errorf("kernels/%s is stale: it differs from nvcc's output for kernels/*.cu (run make kernels and commit)", name)
		}
	}
}

// TestCUDABench4 measures IPv4 lookups of a 16M-address batch on the full
// table: end to end (copy in, kernel, copy out) and kernel only (events),
// and checks the batch's results against the CPU.
func TestCUDABench4(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the benchmark is skipped")
	}
	b := newTestCUDA(t)
	v4, _ := loadBGP(t, bgpPath(t))
	routes := make([]lpm.Route, len(v4))
	for i, p := range v4 {
		routes[i] = lpm.Route{Prefix: p, NextHop: lpm.SyntheticNextHop(p)}
	}
	tab, err := lpm.Build(lpm.IPv4, routes, lpm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const id, n = 1, 1 << 24
	if err := b.Load(id, LPM4, tab.Mirror().Sync().Full); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	addrs := make([]uint32, n)
	for i := range addrs {
		addrs[i] = rng.Uint32()
	}
	for _, a := range lpm.TableAddrs(v4, n/4, 5) { // a quarter from the table's prefixes
		addrs[rng.IntN(n)] = addr4(a)
	}
	got, want := make([]uint32, n), make([]uint32, n)
	t0 := time.Now()
	tab.LookupBatch4(addrs, want)
	cpu := time.Since(t0)
	best := time.Duration(1 << 62)
	for i := 0; i < 5; i++ {
		t0 = time.Now()
		if err := b.LookupLPM4(id, addrs, got); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(t0))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("address %#08x: GPU %d, CPU %d", addrs[i], got[i], want[i])
		}
	}
	ms, err := b.KernelTimeLPM4(id, addrs, 20)
	if err != nil {
		t.Fatal(err)
	}
	// The same, every address drawn from the table's prefixes (more of them
	// walk below the root).
	deep := make([]uint32, n)
	for i, a := range lpm.TableAddrs(v4, n/4, 6) {
		for k := 0; k < 4; k++ {
			deep[k*n/4+i] = addr4(a)
		}
	}
	if err := b.LookupLPM4(id, deep, got); err != nil {
		t.Fatal(err)
	}
	tab.LookupBatch4(deep, want)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("address %#08x: GPU %d, CPU %d", deep[i], got[i], want[i])
		}
	}
	msDeep, err := b.KernelTimeLPM4(id, deep, 20)
	if err != nil {
		t.Fatal(err)
	}
	mlps := func(d float64) float64 { return float64(n) / d / 1e6 }
	t.Logf("IPv4 full table (%d prefixes, strides %v), %d addresses (3/4 uniform, 1/4 from the table), %s:", tab.Len(), tab.Strides(), n, b.Device())
	t.Logf("  CPU backend (one goroutine, LookupBatch4): %.0f MLPS", mlps(cpu.Seconds()))
	t.Logf("  GPU end to end (one LookupLPM4 call: pinned staging, copies in and out): %.0f MLPS (%.2f ms)", mlps(best.Seconds()), best.Seconds()*1e3)
	t.Logf("  GPU kernel only (events, 20 launches): %.0f MLPS (%.3f ms)", mlps(ms/1e3), ms)
	t.Logf("  GPU kernel only, all addresses from the table's prefixes: %.0f MLPS (%.3f ms)", mlps(msDeep/1e3), msDeep)
}
