package re

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	restic "github.com/restic/chunker"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/tables/rabin"
)

// Result is one figure of bench re, one JSON object with --json.
type Result struct {
	Work    string `json:"work"`    // re
	Measure string `json:"measure"` // markers | chunk
	Backend string `json:"backend"` // cpu | gpu
	Data    string `json:"data"`    // random | text | zeros
	Bytes   int64  `json:"bytes"`   // bytes per round
	Rounds  int    `json:"rounds"`
	Pol     string `json:"pol"`

	// markers
	Payloads          int     `json:"payloads,omitempty"`
	PayloadBytes      int     `json:"payload_bytes,omitempty"`
	Window            int     `json:"window,omitempty"`
	Bits              int     `json:"bits,omitempty"`
	Gbps              float64 `json:"gbps,omitempty"`        // payload bits/s: cpu Markers per payload; gpu end to end
	GbpsBitmap        float64 `json:"gbps_bitmap,omitempty"` // cpu: packed buffer, Marker.Bitmap
	GbpsKernel        float64 `json:"gbps_kernel,omitempty"` // gpu: the kernel alone
	GbpsCPU           float64 `json:"gbps_cpu,omitempty"`    // gpu: the CPU's Markers figure of the same run
	GbpsH2D           float64 `json:"gbps_h2d,omitempty"`    // gpu: PCIe copy-in of pinned host memory, same run (the end-to-end ceiling)
	GbpsD2H           float64 `json:"gbps_d2h,omitempty"`    // gpu: PCIe copy-out to pinned host memory, same run
	GPUShape          string  `json:"gpu_shape,omitempty"`   // gpu: fillers, batch, streams, segments per payload
	GPUPath           string  `json:"gpu_path,omitempty"`    // gpu: pack (host copies into pinned batches) | gather (the GPU reads the registered ring)
	GbpsGather        float64 `json:"gbps_gather,omitempty"` // gpu, gather: rabin_gather alone reading the registered ring (CUDA events)
	GbpsCopy          float64 `json:"gbps_copy,omitempty"`   // gpu, copy: the copy engine's runs alone out of the registered ring (CUDA events)
	CopyRuns          int64   `json:"copy_runs,omitempty"`   // gpu, copy: copies (runs of frames) per round
	CopyExtra         float64 `json:"copy_extra,omitempty"`  // gpu, copy: bytes copied past the payloads, a fraction of the payload bytes
	RxFrame           int     `json:"rx_frame,omitempty"`    // gpu: the receive ring's frame bytes
	RxOffset          int     `json:"rx_offset,omitempty"`   // gpu: each payload's offset in its frame
	MarkersPerPayload float64 `json:"markers_per_payload,omitempty"`

	// chunk
	Min        int     `json:"min,omitempty"`
	Max        int     `json:"max,omitempty"`
	AvgBits    int     `json:"avg_bits,omitempty"`
	MBps       float64 `json:"mbps,omitempty"`        // gswitch's chunker, 10^6 bytes/s
	ResticMBps float64 `json:"restic_mbps,omitempty"` // restic/chunker v0.4.0 on the same data
	Ratio      float64 `json:"ratio,omitempty"`       // mbps / restic_mbps
	// Per second of the chunking thread's CPU time (getrusage
	// RUSAGE_THREAD; time spent waiting for a core does not count), and
	// the median of the rounds' paired ratios: the figures that hold on a
	// loaded machine.
	MBpsCPU       float64 `json:"mbps_cpu,omitempty"`
	ResticMBpsCPU float64 `json:"restic_mbps_cpu,omitempty"`
	RatioCPU      float64 `json:"ratio_cpu,omitempty"`
	Chunks        int     `json:"chunks,omitempty"`
	Identical     bool    `json:"identical"` // every chunk (markers: every bitmap) agreed with the reference

	Machine   string `json:"machine"`
	GPU       string `json:"gpu"`
	GoVersion string `json:"go"`
	Time      string `json:"time"`
	Notes     string `json:"notes,omitempty"`
}

// GPUMarkers computes marker bitmaps of payloads on a GPU: the seam
// between this benchmark and package gpu's glue for kernels/rabin.cu.
type GPUMarkers interface {
	// Bitmap is rabin.Marker.Bitmap of the payloads as rabin.Pack lays
	// them out, on the device, end to end: from the payloads in host
	// memory to the bitmap in host memory (packed into page-locked
	// batches by several goroutines, copied in, marked, copied out).
	Bitmap(payloads [][]byte, bitmap []uint32) error
	// RxRing returns n bytes of host memory registered with the device
	// (mapped, page-locked): the receive ring the payloads are received
	// into. One per GPUMarkers; Close frees it.
	RxRing(n int) ([]byte, error)
	// BitmapRing is Bitmap of the payloads at ring[srcs[k]:][:lens[k]]
	// taken by reference: the goroutines write only each batch's index,
	// and the device takes the payloads out of the ring itself, by path
	// "gather" (rabin_gather's reads over PCIe) or "copy" (the copy
	// engine's 2-D copies of runs of frames); nothing is copied on the
	// host.
	BitmapRing(path string, srcs, lens []uint32, bitmap []uint32) error
	// RingSeconds runs the path's own way in alone (the gather kernel, or
	// the copy engine's runs) iters times over all the payloads of the
	// ring and returns the mean seconds of one run.
	RingSeconds(path string, srcs, lens []uint32, iters int) (float64, error)
	// CopyCounts returns the copy path's counters so far: its runs (one
	// copy each), the payload bytes and the bytes copied.
	CopyCounts() (runs, payload, copied int64)
	// KernelSeconds runs the kernel iters times on the packed buffer,
	// already on the device, and returns the mean seconds of one run.
	KernelSeconds(buf []byte, offs, lens []uint32, iters int) (float64, error)
	// CopyGbps measures the PCIe copy bandwidth of page-locked host
	// memory, in and out, in Gbit/s.
	CopyGbps() (h2d, d2h float64, err error)
	// Device names the GPU and the kernel; Shape the pipeline.
	Device() string
	Shape() string
	Close()
}

// GPUOptions shape the GPU's end-to-end pipeline.
type GPUOptions struct {
	Fillers    int  // goroutines packing batches
	BatchBytes int  // packed bytes per batch
	Streams    int  // CUDA streams the batches go over
	Sleep      bool // wait for a batch asleep rather than spinning on a core (CUDA's default)
	FlatStart  bool // no ramp: the fillers' first batches whole too
	RampDown   bool // the last batches at most half of what is left
	// The gather path's own pipeline (its fillers write only indexes, so
	// fewer fillers and larger batches than packing's), the gather
	// kernel's warps per SM (0: the package's default) and its variant.
	GatherFillers    int
	GatherBatchBytes int
	GatherWarps      int
	Gather16         bool
}

// The gather path's default shape: its fillers only write indexes, so four
// keep the GPU fed, and batches of 16 MiB spend little on their launches
// (H200, 2026-11-26: 2 fillers 318 Gbit/s, 8 of 4 MiB 334, 4 of 16 MiB 343,
// 4 of 32 MiB 323, over 200,000 payloads).
const (
	DefaultGatherFillers    = 4
	DefaultGatherBatchBytes = 16 << 20
)

// NewGPUMarkers opens the GPU marker kernel for a polynomial, window and
// mask bits; nil in a build without it (--backend gpu is then a usage
// error).
var NewGPUMarkers func(pol rabin.Pol, window, bits int, opt GPUOptions) (GPUMarkers, error)

type reFlags struct {
	backend      string
	payloads     int
	payloadBytes int
	window, bits int
	pol          string
	bytes        int
	data         string
	min, max     int
	avgBits      int
	rounds       int
	seed         uint64
	json         bool
	measures     string
	gpu          GPUOptions
	gpuPaths     string
	rxFrame      int
	rxOffset     int
}

// Run runs "gswitchctl bench re" with the command-line arguments args (the
// flags after "bench re"), the results to stdout, the usage to stderr. Its
// errors wrap benchutil.ErrUsage for a bad command line and
// benchutil.ErrMismatch for chunks or markers that disagree with the
// reference.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f reFlags
	fs := flag.NewFlagSet("gswitchctl bench re", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.backend, "backend", "cpu", "markers on: cpu, or gpu (a gswitchctl with the GPU marker kernel built in)")
	fs.StringVar(&f.measures, "measure", "markers,chunk", "what to measure: markers, chunk, or both (comma-separated)")
	fs.IntVar(&f.payloads, "payloads", 20000, "markers: payloads per round")
	fs.IntVar(&f.payloadBytes, "payload-bytes", 1460, "markers: bytes per payload")
	fs.IntVar(&f.window, "window", 32, "markers: window in bytes")
	fs.IntVar(&f.bits, "bits", 8, "markers: mask bits")
	fs.StringVar(&f.pol, "pol", rabin.DefaultPol.String(), "irreducible polynomial (hexadecimal with 0x); chunk needs degree <= 53")
	fs.IntVar(&f.bytes, "bytes", 32<<20, "chunk: bytes of each data set")
	fs.StringVar(&f.data, "data", "random,text", "chunk: data sets, comma-separated: random, text (words), zeros")
	fs.IntVar(&f.min, "min", 512<<10, "chunk: smallest chunk")
	fs.IntVar(&f.max, "max", 8<<20, "chunk: largest chunk")
	fs.IntVar(&f.avgBits, "avg-bits", 20, "chunk: average bits")
	fs.IntVar(&f.rounds, "rounds", 5, "timed rounds; rates are the median")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the data")
	fs.BoolVar(&f.json, "json", false, "one JSON object per result")
	fs.IntVar(&f.gpu.Fillers, "gpu-fillers", max(2, min(12, runtime.NumCPU()*3/4)), "gpu: goroutines packing page-locked batches")
	fs.IntVar(&f.gpu.BatchBytes, "gpu-batch-bytes", 2<<20, "gpu: packed bytes per batch")
	fs.IntVar(&f.gpu.Streams, "gpu-streams", 8, "gpu: CUDA streams the batches go over (1..16)")
	fs.BoolVar(&f.gpu.FlatStart, "gpu-flat-start", false, "gpu: the fillers' first batches whole too (else an eighth of a batch, so that the copies start early)")
	fs.BoolVar(&f.gpu.RampDown, "gpu-ramp-down", false, "gpu: the last batches each at most half of what is left, so that the last batch's work after its copy is short (else whole)")
	fs.StringVar(&f.gpuPaths, "gpu-path", "pack,gather,copy", "gpu: end-to-end paths, comma-separated: pack (goroutines copy the payloads out of the receive ring into page-locked batches, the copy engine moves those), gather (the GPU reads the payloads out of the registered ring itself) or copy (the copy engine moves runs of frames out of the registered ring with 2-D copies)")
	fs.IntVar(&f.gpu.GatherFillers, "gpu-gather-fillers", DefaultGatherFillers, "gpu, gather: goroutines writing the batches' indexes")
	fs.IntVar(&f.gpu.GatherBatchBytes, "gpu-gather-batch-bytes", DefaultGatherBatchBytes, "gpu, gather: packed bytes per batch")
	fs.BoolVar(&f.gpu.Gather16, "gpu-gather16", false, "gpu, gather: rabin_gather16 (loads from each payload's own 16-byte word) instead of rabin_gather (whole 128-byte lines)")
	fs.IntVar(&f.gpu.GatherWarps, "gpu-gather-warps", 0, "gpu, gather: warps per SM of the kernel that reads the payloads out of the ring (0: the default, 16)")
	fs.IntVar(&f.rxFrame, "rx-frame", 2048, "gpu: bytes per frame of the receive ring the payloads are in")
	fs.IntVar(&f.rxOffset, "rx-offset", 66, "gpu: each payload's offset in its frame (66: Ethernet, IPv4, TCP with timestamps)")
	fs.BoolVar(&f.gpu.Sleep, "gpu-sleep", false, "gpu: fillers wait for their batches asleep instead of spinning on a core (CUDA's default; 20% faster on an H200 machine, 2026-11-26)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: gswitchctl bench re [flags]\n\nRabin fingerprinting of 1,460-byte payloads (Gbps), and content-defined chunking against\nrestic/chunker v0.4.0 on the same data (MB/s, ratio, identical chunks).\n\n")
		fs.PrintDefaults()
	}
	if err := benchutil.ParseFlags(fs, args); err != nil {
		return err
	}
	pol, err := f.validate()
	if err != nil {
		return err
	}
	var rs []Result
	ms := strings.Split(f.measures, ",")
	if slices.Contains(ms, "markers") {
		r, err := benchMarkers(&f, pol)
		if err != nil {
			return err
		}
		rs = append(rs, r...)
	}
	if slices.Contains(ms, "chunk") {
		for _, d := range strings.Split(f.data, ",") {
			if err := ctx.Err(); err != nil {
				return err
			}
			r, err := benchChunk(&f, pol, d)
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
	}
	if err := printResults(stdout, f.json, rs); err != nil {
		return err
	}
	for _, r := range rs {
		if !r.Identical {
			return fmt.Errorf("%w: %s on %s data disagrees with the reference", benchutil.ErrMismatch, r.Measure, r.Data)
		}
	}
	return nil
}

func (f *reFlags) validate() (rabin.Pol, error) {
	u := benchutil.ErrUsage
	switch {
	case f.backend != "cpu" && f.backend != "gpu":
		return 0, fmt.Errorf("%w: --backend %q: want cpu or gpu", u, f.backend)
	case f.backend == "gpu" && NewGPUMarkers == nil:
		return 0, fmt.Errorf("%w: --backend gpu: the GPU marker kernel is not built into this gswitchctl; use --backend cpu", u)
	case f.payloads < 1 || f.payloadBytes < 1 || f.payloadBytes > 65535:
		return 0, fmt.Errorf("%w: --payloads must be at least 1 and --payload-bytes 1..65535", u)
	case f.gpu.GatherWarps < 0 || f.gpu.GatherWarps > 64 || f.gpu.GatherFillers < 1 || f.gpu.GatherFillers > 64 ||
		f.gpu.GatherBatchBytes < 64<<10 || f.gpu.GatherBatchBytes < f.payloadBytes:
		return 0, fmt.Errorf("%w: --gpu-gather-warps 0..64, --gpu-gather-fillers 1..64, --gpu-gather-batch-bytes at least 64 KiB and a payload", u)
	case f.gpu.Fillers < 1 || f.gpu.Fillers > 64 || f.gpu.BatchBytes < 64<<10 || f.gpu.BatchBytes < f.payloadBytes || f.gpu.Streams < 1 || f.gpu.Streams > 16:
		return 0, fmt.Errorf("%w: --gpu-fillers 1..64, --gpu-batch-bytes at least 64 KiB and a payload, --gpu-streams 1..16", u)
	case f.rxOffset < 0 || f.rxFrame < f.rxOffset+f.payloadBytes || f.rxFrame%16 != 0 || int64(f.rxFrame)*int64(f.payloads) > 1<<32:
		return 0, fmt.Errorf("%w: --rx-frame must be a multiple of 16 holding --rx-offset and a payload, and the ring (frames x payloads) at most 4 GiB", u)
	case f.rounds < 1:
		return 0, fmt.Errorf("%w: --rounds must be at least 1", u)
	case f.bytes < 1:
		return 0, fmt.Errorf("%w: --bytes must be at least 1", u)
	}
	for _, p := range strings.Split(f.gpuPaths, ",") {
		if p != "pack" && p != "gather" && p != "copy" {
			return 0, fmt.Errorf("%w: --gpu-path %q: want pack, gather, copy or several", u, p)
		}
	}
	for _, m := range strings.Split(f.measures, ",") {
		if m != "markers" && m != "chunk" {
			return 0, fmt.Errorf("%w: --measure %q: want markers, chunk or both", u, m)
		}
	}
	for _, d := range strings.Split(f.data, ",") {
		if d != "random" && d != "text" && d != "zeros" {
			return 0, fmt.Errorf("%w: --data %q: want random, text or zeros", u, d)
		}
	}
	pol, err := rabin.ParsePol(f.pol, 9, 63)
	if err != nil {
		return 0, fmt.Errorf("%w: --pol: %v", u, err)
	}
	if strings.Contains(f.measures, "markers") {
		if _, err := rabin.NewMarker(pol, f.window, f.bits); err != nil {
			return 0, fmt.Errorf("%w: %v", u, err)
		}
	}
	if strings.Contains(f.measures, "chunk") {
		if _, err := rabin.NewCutter(rabin.ChunkParams{Pol: pol, Min: f.min, Max: f.max, AvgBits: f.avgBits}); err != nil {
			return 0, fmt.Errorf("%w: %v", u, err)
		}
	}
	return pol, nil
}

func newResult(f *reFlags, measure, data string, pol rabin.Pol) Result {
	return Result{Work: "re", Measure: measure, Backend: "cpu", Data: data, Rounds: f.rounds, Pol: pol.String(),
		Machine: benchutil.Machine(), GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)}
}

// gbps is bits per second in Gbit/s.
func gbps(bytesPerSec float64) float64 { return bytesPerSec * 8 / 1e9 }

// benchMarkers times the marker search over the payloads.
func benchMarkers(f *reFlags, pol rabin.Pol) ([]Result, error) {
	m, err := rabin.NewMarker(pol, f.window, f.bits)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(f.seed, 0x5eed))
	payloads := make([][]byte, f.payloads)
	for i := range payloads {
		p := make([]byte, f.payloadBytes)
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		payloads[i] = p
	}
	total := int64(f.payloads) * int64(f.payloadBytes)
	res := newResult(f, "markers", "random", pol)
	res.Payloads, res.PayloadBytes, res.Window, res.Bits, res.Bytes = f.payloads, f.payloadBytes, f.window, f.bits, total

	var pos []int32
	markers := 0
	for _, p := range payloads { // warm-up, and the count
		pos = m.Markers(pos[:0], p)
		markers += len(pos)
	}
	res.MarkersPerPayload = float64(markers) / float64(f.payloads)
	rates, _ := benchutil.TimeRounds(f.rounds, func() int {
		for _, p := range payloads {
			pos = m.Markers(pos[:0], p)
		}
		return int(total)
	})
	res.Gbps = gbps(benchutil.Median(rates))

	buf, offs, lens := rabin.Pack(nil, nil, nil, payloads...)
	bitmap := make([]uint32, rabin.BitmapWords(len(buf)))
	rates, _ = benchutil.TimeRounds(f.rounds, func() int {
		if err := m.Bitmap(buf, offs, lens, bitmap); err != nil {
			panic(err) // Pack's own layout
		}
		return int(total)
	})
	res.GbpsBitmap = gbps(benchutil.Median(rates))
	// The bitmap holds exactly the markers counted above.
	bits := 0
	for _, w := range bitmap {
		for ; w != 0; w &= w - 1 {
			bits++
		}
	}
	res.Identical = bits == markers
	res.Notes = fmt.Sprintf("cpu, one goroutine: gbps = Marker.Markers on each %d-byte payload in turn (the encoder's per-frame work); gbps_bitmap = the payloads packed %d-byte aligned and marked by Marker.Bitmap (the GPU kernel's CPU twin); identical: the bitmap has the markers counted one by one", f.payloadBytes, rabin.PackAlign)
	out := []Result{res}
	if f.backend == "gpu" {
		g, err := gpuMarkers(f, pol, res, payloads, buf, offs, lens, bitmap)
		if err != nil {
			return nil, err
		}
		out = append(out, g...)
	}
	return out, nil
}

// gpuMarkers times the GPU's marker kernel on the payloads, end to end
// and alone, measures the PCIe ceiling, and compares the device's bitmap
// with the CPU's (want, of buf as rabin.Pack laid the payloads out). The
// payloads are first put where a receiver has them, one per frame of a
// receive ring in host memory registered with the device (--rx-frame,
// --rx-offset; untimed: the NIC's write); each end-to-end path of
// --gpu-path then runs from there to the bitmap in host memory: pack (the
// host copies each payload out of the ring into page-locked batches, the
// copy engine moves the batches), gather (the host writes each batch's
// index only, and the GPU reads the payloads out of the ring) and copy
// (the index only too, and the copy engine moves runs of frames out of the
// ring). One Result per path.
func gpuMarkers(f *reFlags, pol rabin.Pol, cpu Result, payloads [][]byte, buf []byte, offs, lens []uint32, want []uint32) ([]Result, error) {
	g, err := NewGPUMarkers(pol, f.window, f.bits, f.gpu)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	ring, err := g.RxRing(f.rxFrame * len(payloads))
	if err != nil {
		return nil, err
	}
	inRing := make([][]byte, len(payloads))
	srcs := make([]uint32, len(payloads))
	for k, p := range payloads {
		at := k*f.rxFrame + f.rxOffset
		inRing[k] = ring[at : at+len(p)]
		copy(inRing[k], p)
		srcs[k] = uint32(at)
	}
	res := cpu
	res.Backend, res.GPU, res.GbpsCPU, res.GbpsBitmap = "gpu", g.Device(), cpu.Gbps, 0
	res.RxFrame, res.RxOffset = f.rxFrame, f.rxOffset
	sec, err := g.KernelSeconds(buf, offs, lens, 20)
	if err != nil {
		return nil, err
	}
	res.GbpsKernel = gbps(float64(res.Bytes) / sec)
	if res.GbpsH2D, res.GbpsD2H, err = g.CopyGbps(); err != nil {
		return nil, err
	}
	got := make([]uint32, len(want))
	var out []Result
	for _, path := range strings.Split(f.gpuPaths, ",") {
		r := res
		r.GPUPath = path
		bitmap := func() error { return g.Bitmap(inRing, got) }
		if path != "pack" {
			bitmap = func() error { return g.BitmapRing(path, srcs, lens, got) }
			sec, err := g.RingSeconds(path, srcs, lens, 10)
			if err != nil {
				return nil, err
			}
			if path == "gather" {
				r.GbpsGather = gbps(float64(r.Bytes) / sec)
			} else {
				r.GbpsCopy = gbps(float64(r.Bytes) / sec)
			}
		}
		for i := range got {
			got[i] = 0xdeadbeef // poison: every word is written
		}
		if err := bitmap(); err != nil { // warm-up: page-locked batches, module, streams
			return nil, err
		}
		r.Identical = slices.Equal(got, want)
		clear(got)
		var ferr error
		runs0, payload0, copied0 := g.CopyCounts()
		rates, _ := benchutil.TimeRounds(f.rounds, func() int {
			if err := bitmap(); err != nil && ferr == nil {
				ferr = err
			}
			return int(r.Bytes)
		})
		if ferr != nil {
			return nil, ferr
		}
		r.Gbps = gbps(benchutil.Median(rates))
		if runs, payload, copied := g.CopyCounts(); path == "copy" && payload > payload0 {
			r.CopyRuns = (runs - runs0) / int64(len(rates))
			r.CopyExtra = float64(copied-copied0-(payload-payload0)) / float64(payload-payload0)
		}
		r.Identical = r.Identical && slices.Equal(got, want)
		r.GPUShape = g.Shape()
		r.Notes = fmt.Sprintf("gpu, path %s: gbps = end to end, from the payloads in a receive ring in host memory (one per %d-byte frame at offset %d, registered with the device: cuMemHostRegister, mapped) to the bitmap in host memory; ", path, f.rxFrame, f.rxOffset)
		if path == "pack" {
			r.Notes += "gpu_shape's fillers copy each payload out of the ring into page-locked batches (the host copy a receiver that packs at receive does too), the copy engine moves the batches in, the kernel marks them, the bitmaps come back over its streams"
		} else if path == "copy" {
			r.Notes += "gpu_shape's by-reference fillers write only each batch's index (offsets, lengths, ring offsets: 12 bytes a payload); per batch the host cuts the payloads into runs of frames a fixed pitch apart (cut by length: at most 1/8 more than the payloads' packed bytes), the copy engine moves the index and each run (a 2-D copy: source pitch the frame, width the run's longest payload from its 16-byte word on) out of the registered ring into a staging buffer on the device, rabin_gather lays it out as the packed layout in device memory, the kernel marks it, the bitmap comes back; no host copy of a payload; gbps_copy = the copy engine's runs alone over all payloads (CUDA events); copy_runs = copies a round, copy_extra = bytes copied past the payloads over the payload bytes"
		} else {
			r.Notes += "gpu_shape's fillers write only each batch's index (offsets, lengths, ring offsets: 12 bytes a payload) into page-locked memory; per batch the copy engine moves the index in, rabin_gather reads the payloads out of the ring over PCIe into the device's compact buffer, the kernel marks it, the bitmap comes back; no host copy of a payload; gbps_gather = rabin_gather alone over all payloads (CUDA events)"
		}
		r.Notes += "; the median of rounds, each all payloads; gbps_kernel = the markers kernel alone on the whole packed buffer in device memory (CUDA events); gbps_h2d/d2h = pinned copies of 256 MiB, same run; gbps_cpu = Marker.Markers on one CPU core, same run; identical: the device's bitmap equals Marker.Bitmap's, warm-up (poisoned first) and timed rounds"
		out = append(out, r)
	}
	return out, nil
}

// chunkData makes a data set of n bytes.
func chunkData(kind string, n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0xc4c4))
	b := make([]byte, n)
	switch kind {
	case "random":
		for i := range b {
			b[i] = byte(r.Uint32())
		}
	case "text":
		words := strings.Fields("the of and to in a is that for it as was with be by on not he this are or his from at which but have an they you were her she there one all we their been has when who will more no if out so said what up its about into than them can only other new some could time these two may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three")
		for i := 0; i < n; {
			w := words[r.IntN(len(words))]
			i += copy(b[i:], w)
			if i < n {
				b[i] = " \n"[min(r.IntN(12), 1)]
				i++
			}
		}
	}
	return b
}

// benchChunk times both chunkers on one data set and compares their
// chunks.
func benchChunk(f *reFlags, pol rabin.Pol, kind string) (Result, error) {
	data := chunkData(kind, f.bytes, f.seed)
	p := rabin.ChunkParams{Pol: pol, Min: f.min, Max: f.max, AvgBits: f.avgBits}
	res := newResult(f, "chunk", kind, pol)
	res.Bytes, res.Min, res.Max, res.AvgBits = int64(len(data)), f.min, f.max, f.avgBits
	type chunk struct {
		start  int64
		length int
		cut    uint64
	}
	var ours, theirs []chunk
	runOurs := func() error {
		ours = ours[:0]
		ch, err := rabin.NewChunker(bytes.NewReader(data), p)
		if err != nil {
			return err
		}
		for {
			k, err := ch.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			ours = append(ours, chunk{k.Start, k.Length, k.Cut})
		}
	}
	buf := make([]byte, 0, f.max)
	runRestic := func() error {
		theirs = theirs[:0]
		c := restic.NewWithBoundaries(bytes.NewReader(data), restic.Pol(pol), uint(f.min), uint(f.max))
		c.SetAverageBits(f.avgBits)
		for {
			k, err := c.Next(buf)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			theirs = append(theirs, chunk{int64(k.Start), int(k.Length), k.Cut})
		}
	}
	// One locked OS thread runs both, so that its CPU time is theirs.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var oursRates, resticRates, oursCPU, resticCPU, ratios []float64
	haveCPU := true
	for round := range f.rounds + 1 { // round 0 warms up
		fns := []func() error{runOurs, runRestic}
		rates := []*[]float64{&oursRates, &resticRates}
		cpus := []*[]float64{&oursCPU, &resticCPU}
		if round%2 == 1 {
			fns[0], fns[1] = fns[1], fns[0]
			rates[0], rates[1] = rates[1], rates[0]
			cpus[0], cpus[1] = cpus[1], cpus[0]
		}
		for i, fn := range fns {
			t0 := time.Now()
			c0, ok0 := threadCPU()
			if err := fn(); err != nil {
				return Result{}, err
			}
			c1, ok1 := threadCPU()
			haveCPU = haveCPU && ok0 && ok1
			if round > 0 {
				*rates[i] = append(*rates[i], float64(len(data))/time.Since(t0).Seconds())
				*cpus[i] = append(*cpus[i], float64(len(data))/max(c1-c0, time.Microsecond).Seconds())
			}
		}
		if round > 0 {
			ratios = append(ratios, oursCPU[len(oursCPU)-1]/resticCPU[len(resticCPU)-1])
		}
	}
	res.MBps = benchutil.Median(oursRates) / 1e6
	res.ResticMBps = benchutil.Median(resticRates) / 1e6
	res.Ratio = res.MBps / res.ResticMBps
	if haveCPU {
		res.MBpsCPU = benchutil.Median(oursCPU) / 1e6
		res.ResticMBpsCPU = benchutil.Median(resticCPU) / 1e6
		res.RatioCPU = benchutil.Median(ratios)
	}
	res.Chunks = len(ours)
	res.Identical = slices.Equal(ours, theirs)
	res.Notes = "cpu, one goroutine each on one locked OS thread, both reading a bytes.Reader, alternating order per round; mbps, restic_mbps: wall clock, medians; mbps_cpu, restic_mbps_cpu: per second of the thread's CPU time (RUSAGE_THREAD), medians; ratio_cpu: median of the rounds' paired CPU-time ratios; identical: every chunk's start, length and cut fingerprint equal restic/chunker v0.4.0's"
	return res, nil
}

func printResults(w io.Writer, asJSON bool, rs []Result) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, r := range rs {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rs {
		switch r.Measure {
		case "markers":
			fmt.Fprintf(tw, "markers\t%s\t%d payloads of %d B\twindow %d, bits %d\t%.2f Gbps", r.Backend, r.Payloads, r.PayloadBytes, r.Window, r.Bits, r.Gbps)
			if r.Backend == "cpu" {
				fmt.Fprintf(tw, "\tbitmap %.2f Gbps", r.GbpsBitmap)
			} else {
				fmt.Fprintf(tw, "\tpath %s\tkernel %.2f Gbps\tcpu %.2f Gbps\tPCIe in %.0f out %.0f Gbps", r.GPUPath, r.GbpsKernel, r.GbpsCPU, r.GbpsH2D, r.GbpsD2H)
				if r.GbpsGather > 0 {
					fmt.Fprintf(tw, "\tgather alone %.0f Gbps", r.GbpsGather)
				}
				if r.GbpsCopy > 0 {
					fmt.Fprintf(tw, "\tcopies alone %.0f Gbps\t%d copies, %.1f%% extra bytes", r.GbpsCopy, r.CopyRuns, 100*r.CopyExtra)
				}
				fmt.Fprintf(tw, "\t%s\t%s", r.GPU, r.GPUShape)
			}
			fmt.Fprintf(tw, "\t%.2f markers/payload\tidentical %v\n", r.MarkersPerPayload, r.Identical)
		case "chunk":
			fmt.Fprintf(tw, "chunk\t%s\t%d MB\tmin %d max %d avg-bits %d\t%.0f MB/s\trestic %.0f MB/s\tratio %.2f", r.Data, r.Bytes/1e6, r.Min, r.Max, r.AvgBits, r.MBps, r.ResticMBps, r.Ratio)
			if r.RatioCPU > 0 {
				fmt.Fprintf(tw, "\tper CPU-s %.0f / restic %.0f MB/s\tratio %.2f", r.MBpsCPU, r.ResticMBpsCPU, r.RatioCPU)
			}
			fmt.Fprintf(tw, "\t%d chunks\tidentical %v\n", r.Chunks, r.Identical)
		}
	}
	if len(rs) > 0 {
		fmt.Fprintf(tw, "machine\t%s\tmedians of %d rounds\n", rs[0].Machine, rs[0].Rounds)
	}
	return tw.Flush()
}
