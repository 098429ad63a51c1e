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
}

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
	case f.gpu.Fillers < 1 || f.gpu.Fillers > 64 || f.gpu.BatchBytes < 64<<10 || f.gpu.BatchBytes < f.payloadBytes || f.gpu.Streams < 1 || f.gpu.Streams > 16:
		return 0, fmt.Errorf("%w: --gpu-fillers 1..64, --gpu-batch-bytes at least 64 KiB and a payload, --gpu-streams 1..16", u)
	case f.rounds < 1:
		return 0, fmt.Errorf("%w: --rounds must be at least 1", u)
	case f.bytes < 1:
		return 0, fmt.Errorf("%w: --bytes must be at least 1", u)
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
		out = append(out, g)
	}
	return out, nil
}

// gpuMarkers times the GPU's marker kernel on the payloads, end to end
// and alone, measures the PCIe ceiling, and compares the device's bitmap
// with the CPU's (want, of buf as rabin.Pack laid the payloads out).
func gpuMarkers(f *reFlags, pol rabin.Pol, cpu Result, payloads [][]byte, buf []byte, offs, lens []uint32, want []uint32) (Result, error) {
	g, err := NewGPUMarkers(pol, f.window, f.bits, f.gpu)
	if err != nil {
		return Result{}, err
	}
	defer g.Close()
	res := cpu
	res.Backend, res.GPU, res.GbpsCPU, res.GbpsBitmap = "gpu", g.Device(), cpu.Gbps, 0
	got := make([]uint32, len(want))
	if err := g.Bitmap(payloads, got); err != nil { // warm-up: page-locked batches, module, streams
		return Result{}, err
	}
	res.Identical = slices.Equal(got, want)
	clear(got)
	var ferr error
	rates, _ := benchutil.TimeRounds(f.rounds, func() int {
		if err := g.Bitmap(payloads, got); err != nil && ferr == nil {
			ferr = err
		}
		return int(res.Bytes)
	})
	if ferr != nil {
		return Result{}, ferr
	}
	res.Gbps = gbps(benchutil.Median(rates))
	res.Identical = res.Identical && slices.Equal(got, want)
	sec, err := g.KernelSeconds(buf, offs, lens, 20)
	if err != nil {
		return Result{}, err
	}
	res.GbpsKernel = gbps(float64(res.Bytes) / sec)
	if res.GbpsH2D, res.GbpsD2H, err = g.CopyGbps(); err != nil {
		return Result{}, err
	}
	res.GPUShape = g.Shape()
	res.Notes = "gpu: gbps = end to end, from the payloads in host memory to the bitmap in host memory (packed into page-locked batches by gpu_shape's fillers, copied in, marked, copied out over its streams; the median of rounds, each all payloads); gbps_kernel = the kernel alone on the whole packed buffer (CUDA events); gbps_h2d/d2h = pinned copies of 256 MiB, same run; gbps_cpu = Marker.Markers on one CPU core, same run; identical: the device's bitmap equals Marker.Bitmap's, warm-up and timed rounds"
	return res, nil
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
				fmt.Fprintf(tw, "\tkernel %.2f Gbps\tcpu %.2f Gbps\tPCIe in %.0f out %.0f Gbps\t%s\t%s", r.GbpsKernel, r.GbpsCPU, r.GbpsH2D, r.GbpsD2H, r.GPU, r.GPUShape)
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
