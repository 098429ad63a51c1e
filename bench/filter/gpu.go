package filter

import (
	"fmt"
	"io"
	"runtime"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/datapath/gpfscan"
	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// GPUResult is a set's figures on the GPU (--backend gpu or both).
type GPUResult struct {
	Device  string `json:"device"`
	Kernel  string `json:"kernel"` // how the kernel runs (CUDAFilter.Describe)
	Streams int    `json:"streams"`
	Batch   int    `json:"batch"`   // packets per batch
	Workers int    `json:"workers"` // parsing goroutines
	Snap    int    `json:"snap"`    // bytes of a reduced packet's row
	// End to end: the capture (in the page cache) mapped, parsed and
	// reduced into page-locked batches on Workers goroutines, Streams
	// streams of batches in flight, the counters back and added up; the
	// median of Rounds passes over the whole capture.
	E2EMPPS      float64 `json:"e2e_mpps"`
	E2EMPPSBest  float64 `json:"e2e_mpps_best"`
	E2EMPPSCPU   float64 `json:"e2e_mpps_cpu"` // per CPU-second of the process (all its goroutines)
	MapMS        float64 `json:"map_ms"`       // median: mapping the file and faulting its pages in (part of the pass)
	SetupMS      float64 `json:"setup_ms"`     // the pool of page-locked batches, made once before the passes
	Rounds       int     `json:"rounds"`
	CaptureBytes int64   `json:"capture_bytes"`
	// Kernel only: KernelPackets reduced packets already on the device,
	// the kernel timed with CUDA events (the mean of 10 launches).
	KernelPackets int     `json:"kernel_packets"`
	KernelMS      float64 `json:"kernel_ms"`
	KernelGPPS    float64 `json:"kernel_gpps"` // G packets/s
	// --kernel-variants: the other kernels' kernel-only rates (G packets/s)
	// on the same packets: "stages" (gpf_filter, every criterion,
	// sub-predicate and filter) and "stages-noreuse".
	KernelVariants map[string]float64 `json:"kernel_variants,omitempty"`
	// The check: every filter's packet and byte counts against the CPU's
	// (Evaluator.Eval over every packet).
	Mismatches    int    `json:"mismatches"`
	FirstMismatch string `json:"first_mismatch,omitempty"`
}

type gpuFlags struct {
	dev                                            gpu.FilterGPU
	streams, batch, workers, kernelPackets, rounds int
	variants                                       bool
}

// openGPU opens device 0 (a seam for tests).
var openGPU = gpu.OpenFilterGPU

// benchGPU measures one set on the GPU: kernel only over the first
// kernelPackets packets, then end-to-end passes over the capture file,
// whose counts are checked against the CPU's.
func benchGPU(g *gpuFlags, specs []filter.Spec, pkts []packet, link uint32, big bool, path string, want setCounts, stderr io.Writer) (*GPUResult, error) {
	prog, err := filter.Compile(specs, link, big, nil)
	if err != nil {
		return nil, err
	}
	dev, err := g.dev.Filter(prog, g.streams, 0)
	if err != nil {
		return nil, err
	}
	defer dev.Close()
	workers := g.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	r := &GPUResult{Device: g.dev.Device(), Kernel: dev.Describe(), Streams: g.streams, Workers: workers, Rounds: max(g.rounds, 1)}
	// Kernel only.
	kn := min(g.kernelPackets, len(pkts))
	kb, err := dev.NewBatch(max(kn, 1), false)
	if err != nil {
		return nil, err
	}
	defer dev.FreeBatch(kb)
	r.Snap = kb.Snap
	r.Batch = max(1024, min(g.batch, (64<<20)/kb.Snap))
	for _, p := range pkts[:kn] {
		if ok, err := kb.Add(p.data, p.wire); !ok || err != nil {
			return nil, fmt.Errorf("bench filter: gpu: a packet of %d bytes does not fit a row of %d: %v", len(p.data), kb.Snap, err)
		}
	}
	if err := dev.Submit(kb); err != nil {
		return nil, err
	}
	if err := dev.Wait(kb); err != nil {
		return nil, err
	}
	ms, err := dev.KernelTime(kb, 10)
	if err != nil {
		return nil, err
	}
	r.KernelPackets, r.KernelMS = kn, ms
	r.KernelGPPS = float64(kn) / ms / 1e6
	if g.variants {
		r.KernelVariants = map[string]float64{}
		for _, k := range gpu.FilterKernels[1:] {
			if err := gpu.SetFilterKernel(k); err != nil {
				return nil, err
			}
			ms2, err := dev.KernelTime(kb, 3)
			gpu.SetFilterKernel(gpu.FilterKernels[0])
			if err != nil {
				return nil, err
			}
			r.KernelVariants[k] = float64(kn) / ms2 / 1e6
		}
	}
	// End to end. The pool of page-locked batches is made once, like the
	// device's context and the set's layout (SetupMS).
	t0 := time.Now()
	pool := make([]*gpu.PacketBatch, 2*workers+2)
	for i := range pool {
		if pool[i], err = dev.NewBatch(r.Batch, false); err != nil {
			return nil, err
		}
		defer dev.FreeBatch(pool[i])
	}
	r.SetupMS = float64(time.Since(t0).Microseconds()) / 1e3
	nf := len(specs)
	var rates, cpus, maps []float64
	for round := 0; round < r.Rounds; round++ {
		got := setCounts{make([]uint64, nf), make([]uint64, nf)}
		c0 := cpuTime()
		t0 := time.Now()
		data, unmap, err := gpfscan.MapCapture(path, workers)
		if err != nil {
			return nil, err
		}
		mapped := time.Since(t0)
		r.CaptureBytes = int64(len(data))
		n := 0
		err = gpfscan.ScanCapture(data, gpfscan.ScanConfig{Filter: dev, Link: pcapfile.LinkType(link), BigEndian: big, Program: prog,
			Workers: workers, Batch: r.Batch, Pool: pool,
			Compile: func(l pcapfile.LinkType, b bool) (*filter.Program, error) {
				return filter.Compile(specs, uint32(l), b, nil)
			}},
			func(p *gpfscan.ScanPiece) error {
				for f := 0; f < nf; f++ {
					got.packets[f] += p.Counts[f]
					got.bytes[f] += p.Bytes[f]
				}
				n += p.N
				return nil
			})
		el := time.Since(t0)
		cpuUsed := cpuTime() - c0
		unmap()
		if err != nil {
			return nil, err
		}
		if n != len(pkts) {
			return nil, fmt.Errorf("bench filter: gpu: %d packets scanned, the capture has %d", n, len(pkts))
		}
		rates = append(rates, float64(n)/el.Seconds()/1e6)
		cpus = append(cpus, float64(n)/cpuUsed.Seconds()/1e6)
		maps = append(maps, float64(mapped.Microseconds())/1e3)
		if round == 0 {
			for f := 0; f < nf; f++ {
				if got.packets[f] != want.packets[f] || got.bytes[f] != want.bytes[f] {
					if r.Mismatches == 0 {
						r.FirstMismatch = fmt.Sprintf("%s (%s): gpu %d packets %d bytes, cpu %d, %d", specs[f].Name, specs[f].Expr,
							got.packets[f], got.bytes[f], want.packets[f], want.bytes[f])
					}
					r.Mismatches++
				}
			}
		}
	}
	r.E2EMPPS, r.E2EMPPSCPU, r.MapMS = benchutil.Median(rates), benchutil.Median(cpus), benchutil.Median(maps)
	for _, x := range rates {
		r.E2EMPPSBest = max(r.E2EMPPSBest, x)
	}
	fmt.Fprintf(stderr, "bench filter: gpu: %d filters: e2e %.1f Mpps, kernel %.2f G/s, %d mismatches\n", nf, r.E2EMPPS, r.KernelGPPS, r.Mismatches)
	return r, nil
}
