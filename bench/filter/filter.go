package filter

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/datapath/gpfscan"
	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// Result is one filter set's figures.
type Result struct {
	Work        string  `json:"work"` // "filter"
	Backend     string  `json:"backend"`
	Data        string  `json:"data"`
	Filters     int     `json:"filters"`
	Criteria    int     `json:"criteria"`
	Nodes       int     `json:"nodes"`
	Packets     int     `json:"packets"`
	MeanBytes   float64 `json:"mean_bytes"`
	Rounds      int     `json:"rounds"`
	Threads     int     `json:"threads"`
	MPPS        float64 `json:"mpps"`          // median pass, packets in memory
	MPPSCPU     float64 `json:"mpps_cpu"`      // median, per CPU-second of the process
	MPPSFile    float64 `json:"mpps_file"`     // reading the capture and evaluating (mapped, scanned on Threads goroutines)
	MPPSFileCPU float64 `json:"mpps_file_cpu"` // likewise, per CPU-second
	TcpdumpMPPS float64 `json:"tcpdump_mpps,omitempty"`
	TcpdumpCPU  float64 `json:"tcpdump_mpps_cpu,omitempty"` // per CPU-second of tcpdump (its rusage)
	Matches     uint64  `json:"matches"`                    // (packet, filter) matches of one pass
	FirstCount  uint64  `json:"first_count"`
	TcpdumpCnt  uint64  `json:"tcpdump_count,omitempty"`
	CompileMS   float64 `json:"compile_ms"`
	// The CPU's timed passes use the capture's first CPUPackets packets
	// (all of a small capture); the counts and the check use them all.
	CPUPackets int `json:"cpu_packets"`
	// x/net/bpf running the tcpdump -ddd program of the set's first
	// filter over the same packets (one thread; needs tcpdump).
	XBPFMPPS  float64    `json:"xbpf_mpps,omitempty"`
	XBPFCount uint64     `json:"xbpf_count,omitempty"`
	GPU       *GPUResult `json:"gpu,omitempty"`
	Machine   string     `json:"machine"`
	GoVersion string     `json:"go"`
	Time      string     `json:"time"`
}

const usage = `Usage: gswitchctl bench filter [--pcap FILE | --packets N] [--filters 1,100,1000 | --filters-file FILE] [--backend cpu|gpu|both] [flags]

Many tcpdump filters at once on every packet of a capture, on the CPU and
(--backend gpu or both, a build with -tags cuda) the GPU, against tcpdump
--count and x/net/bpf on the same file.

Flags:
`

// Run is "gswitchctl bench filter".
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench filter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pcap := fs.String("pcap", "", "the capture `FILE` (pcap or pcapng); none: a synthetic one")
	npk := fs.Int("packets", 500000, "synthetic capture: `N` packets")
	counts := fs.String("filters", "1,100,1000", "filter set sizes `N,N,...` (generated sets)")
	file := fs.String("filters-file", "", "the filters, one `NAME: EXPRESSION` a line (instead of generated sets)")
	rounds := fs.Int("rounds", 5, "timed passes per set (the median is reported)")
	threads := fs.Int("threads", 1, "goroutines evaluating (in memory, and scanning the file)")
	useTcpdump := fs.Bool("tcpdump", true, "time tcpdump --count on the set's first filter (needs tcpdump)")
	check := fs.Bool("check", true, "the first filter's count must equal tcpdump's")
	asJSON := fs.Bool("json", false, "one JSON object per set")
	backend := fs.String("backend", "cpu", "cpu, gpu (the CPU's counts and figures too) or both")
	cpuPackets := fs.Int("cpu-packets", 1000000, "the CPU's timed passes use the capture's first `N` packets")
	var g gpuFlags
	fs.IntVar(&g.streams, "streams", 4, "GPU: CUDA streams")
	fs.IntVar(&g.batch, "batch", 65536, "GPU: packets per batch")
	fs.IntVar(&g.workers, "workers", 0, "GPU: parsing goroutines (0: GOMAXPROCS)")
	fs.IntVar(&g.kernelPackets, "kernel-packets", 4<<20, "GPU: packets on the device for the kernel-only rate")
	fs.IntVar(&g.rounds, "gpu-rounds", 5, "GPU: end-to-end passes (the median is reported)")
	fs.BoolVar(&g.variants, "kernel-variants", false, "GPU: also time the other kernels (stages, stages-noreuse), kernel only")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := benchutil.ParseFlags(fs, args); err != nil {
		return err
	}
	if *rounds < 1 || *threads < 1 || *npk < 1 || *cpuPackets < 1 {
		return fmt.Errorf("%w: --rounds, --threads, --packets and --cpu-packets must be positive", benchutil.ErrUsage)
	}
	switch *backend {
	case "cpu":
	case "gpu", "both":
		dev, err := openGPU()
		if err != nil {
			return fmt.Errorf("bench filter: --backend %s: %v", *backend, err)
		}
		defer dev.Close()
		g.dev = dev
	default:
		return fmt.Errorf("%w: --backend %q: want cpu, gpu or both", benchutil.ErrUsage, *backend)
	}
	var sets [][]filter.Spec
	if *file != "" {
		specs, err := readSpecs(*file)
		if err != nil {
			return err
		}
		sets = append(sets, specs)
	} else {
		for _, s := range strings.Split(*counts, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || n < 1 {
				return fmt.Errorf("%w: --filters %q: want counts N,N,...", benchutil.ErrUsage, *counts)
			}
			sets = append(sets, Specs(n))
		}
	}
	data := *pcap
	if data == "" {
		dir, err := os.MkdirTemp("", "bench-filter-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		data = filepath.Join(dir, "synthetic.pcap")
		t0 := time.Now()
		if err := WriteSyntheticPcap(data, *npk, 1); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench filter: wrote a synthetic capture of %d packets in %.1f s\n", *npk, time.Since(t0).Seconds())
	}
	pkts, link, bigEndian, err := load(data)
	if err != nil {
		return err
	}
	if *useTcpdump {
		if _, err := exec.LookPath("tcpdump"); err != nil {
			fmt.Fprintln(stderr, "bench filter: tcpdump not found: its figures are left out (apt-get install tcpdump)")
			*useTcpdump, *check = false, false
		}
	}
	desc := data
	if *pcap == "" {
		desc = fmt.Sprintf("synthetic capture of %d packets (IPv4 TCP/UDP/ICMP, IPv6 UDP, ARP, VLAN)", *npk)
	}
	var results []Result
	for _, specs := range sets {
		if err := ctx.Err(); err != nil {
			return err
		}
		r, counts, err := benchSet(specs, pkts, link, bigEndian, data, *rounds, *threads, *cpuPackets, *useTcpdump)
		if err != nil {
			return err
		}
		r.Data = desc
		r.Backend = *backend
		if g.dev != nil {
			gr, err := benchGPU(&g, specs, pkts, link, bigEndian, data, counts, stderr)
			if err != nil {
				return err
			}
			r.GPU = gr
		}
		results = append(results, r)
		if *check && *useTcpdump && r.TcpdumpCnt != r.FirstCount {
			return fmt.Errorf("%w: filter %q: %d packets, tcpdump %d", benchutil.ErrMismatch, specs[0].Expr, r.FirstCount, r.TcpdumpCnt)
		}
		if *check && r.XBPFCount != 0 && r.XBPFCount != r.FirstCount {
			return fmt.Errorf("%w: filter %q: %d packets, x/net/bpf %d", benchutil.ErrMismatch, specs[0].Expr, r.FirstCount, r.XBPFCount)
		}
		if *check && r.GPU != nil && r.GPU.Mismatches != 0 {
			return fmt.Errorf("%w: %d filters: the GPU's counts differ from the CPU's for %d filters (first: %s)", benchutil.ErrMismatch,
				len(specs), r.GPU.Mismatches, r.GPU.FirstMismatch)
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	}
	for i, r := range results {
		if i == 0 {
			fmt.Fprintf(stdout, "# %s, %s, %s\n# data: %s, %d packets, mean %.0f bytes\n", r.Machine, r.GoVersion, r.Time, r.Data, r.Packets, r.MeanBytes)
		}
		fmt.Fprintf(stdout, "filter cpu filters=%d criteria=%d nodes=%d: %.2f Mpps (median of %d, %d thread(s)), %.2f Mpps per CPU-second; reading the file too: %.2f Mpps, %.2f per CPU-second",
			r.Filters, r.Criteria, r.Nodes, r.MPPS, r.Rounds, r.Threads, r.MPPSCPU, r.MPPSFile, r.MPPSFileCPU)
		if r.TcpdumpMPPS > 0 {
			fmt.Fprintf(stdout, "; tcpdump, one filter: %.2f Mpps, %.2f per CPU-second (%d packets; ours %d)", r.TcpdumpMPPS, r.TcpdumpCPU, r.TcpdumpCnt, r.FirstCount)
		}
		if r.XBPFMPPS > 0 {
			fmt.Fprintf(stdout, "; x/net/bpf, one filter: %.2f Mpps", r.XBPFMPPS)
		}
		fmt.Fprintf(stdout, ", compile %.0f ms\n", r.CompileMS)
		if gr := r.GPU; gr != nil {
			fmt.Fprintf(stdout, "filter gpu filters=%d on %s: end to end %.1f Mpps (median of %d, capture of %d bytes mapped and parsed by %d goroutines, %d-byte rows, batches of %d over %d streams); kernel only %.2f G packets/s (%d packets, %.3f ms)",
				r.Filters, gr.Device, gr.E2EMPPS, gr.Rounds, gr.CaptureBytes, gr.Workers, gr.Snap, gr.Batch, gr.Streams, gr.KernelGPPS, gr.KernelPackets, gr.KernelMS)
			for _, k := range gpu.FilterKernels[1:] {
				if x, ok := gr.KernelVariants[k]; ok {
					fmt.Fprintf(stdout, "; kernel %s %.3f G/s", k, x)
				}
			}
			fmt.Fprintf(stdout, "; counts equal the CPU's: %v\n", gr.Mismatches == 0)
		}
	}
	return nil
}

type packet struct {
	data []byte
	wire uint32
}

func load(path string) ([]packet, uint32, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, false, err
	}
	defer f.Close()
	r, err := pcapfile.NewReader(f)
	if err != nil {
		return nil, 0, false, err
	}
	var out []packet
	link, big := uint32(0), false
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, 0, false, err
		}
		if len(out) == 0 {
			link, big = uint32(p.Link), p.BigEndian
		} else if uint32(p.Link) != link {
			return nil, 0, false, fmt.Errorf("%s: several link types: bench one at a time", path)
		}
		out = append(out, packet{data: append([]byte(nil), p.Data...), wire: p.WireLen})
	}
	if len(out) == 0 {
		return nil, 0, false, fmt.Errorf("%s: no packets", path)
	}
	return out, link, big, nil
}

// setCounts are the CPU's per-filter answers over the whole capture.
type setCounts struct{ packets, bytes []uint64 }

func benchSet(specs []filter.Spec, all []packet, link uint32, big bool, data string, rounds, threads, cpuPackets int, tcpdump bool) (Result, setCounts, error) {
	t0 := time.Now()
	prog, err := filter.Compile(specs, link, big, nil)
	if err != nil {
		return Result{}, setCounts{}, err
	}
	pkts := all[:min(len(all), cpuPackets)]
	r := Result{Work: "filter", Backend: "cpu", Filters: len(specs), Criteria: len(prog.Criteria), Nodes: len(prog.Nodes),
		Packets: len(all), CPUPackets: len(pkts), Rounds: rounds, Threads: threads, CompileMS: float64(time.Since(t0).Microseconds()) / 1e3,
		Machine: benchutil.Machine(), GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)}
	var bytes int
	for _, p := range all {
		bytes += len(p.data)
	}
	r.MeanBytes = float64(bytes) / float64(len(all))
	// One untimed pass over every packet, on every CPU: the counts, and a
	// warm cache.
	counts := cpuCounts(prog, all)
	r.FirstCount = counts.packets[0]
	for _, c := range counts.packets {
		r.Matches += c
	}
	var wall, cpu []float64
	for range rounds {
		c0 := cpuTime()
		w0 := time.Now()
		benchutil.Parallel(threads, func(t int) int {
			ev := filter.NewEvaluator(prog)
			out := make([]uint64, prog.Words())
			lo, hi := t*len(pkts)/threads, (t+1)*len(pkts)/threads
			for _, p := range pkts[lo:hi] {
				ev.Eval(p.data, p.wire, out)
			}
			return hi - lo
		})
		wall = append(wall, float64(len(pkts))/time.Since(w0).Seconds()/1e6)
		cpu = append(cpu, float64(len(pkts))/(cpuTime()-c0).Seconds()/1e6)
	}
	r.MPPS, r.MPPSCPU = benchutil.Median(wall), benchutil.Median(cpu)
	var file, fileCPU []float64
	for range rounds {
		c0 := cpuTime()
		rate, n, got, err := fromFile(prog, data, len(pkts), threads, link, big)
		if err != nil {
			return r, counts, err
		}
		if n == len(all) { // the whole capture: the in-memory pass's counts
			for f := range got.packets {
				if got.packets[f] != counts.packets[f] || got.bytes[f] != counts.bytes[f] {
					return r, counts, fmt.Errorf("%w: filter %q: the file pass counts %d packets %d bytes, in memory %d, %d", benchutil.ErrMismatch,
						specs[f].Expr, got.packets[f], got.bytes[f], counts.packets[f], counts.bytes[f])
				}
			}
		}
		file = append(file, rate)
		fileCPU = append(fileCPU, float64(n)/(cpuTime()-c0).Seconds()/1e6)
	}
	r.MPPSFile, r.MPPSFileCPU = benchutil.Median(file), benchutil.Median(fileCPU)
	if tcpdump {
		var rates, cpus []float64
		for range rounds {
			t0 := time.Now()
			n, used, err := tcpdumpCount(data, specs[0].Expr)
			if err != nil {
				return r, counts, err
			}
			rates = append(rates, float64(len(all))/time.Since(t0).Seconds()/1e6)
			cpus = append(cpus, float64(len(all))/used.Seconds()/1e6)
			r.TcpdumpCnt = n
		}
		r.TcpdumpMPPS, r.TcpdumpCPU = benchutil.Median(rates), benchutil.Median(cpus)
		if err := xbpf(&r, specs[0].Expr, data, all, rounds); err != nil {
			return r, counts, err
		}
	}
	return r, counts, nil
}

// cpuCounts evaluates every packet (Eval) on every CPU.
func cpuCounts(prog *filter.Program, pkts []packet) setCounts {
	nf := len(prog.Roots)
	workers := runtime.GOMAXPROCS(0)
	parts := make([]setCounts, workers)
	benchutil.Parallel(workers, func(t int) int {
		c := setCounts{make([]uint64, nf), make([]uint64, nf)}
		ev := filter.NewEvaluator(prog)
		out := make([]uint64, prog.Words())
		lo, hi := t*len(pkts)/workers, (t+1)*len(pkts)/workers
		for _, p := range pkts[lo:hi] {
			ev.Eval(p.data, p.wire, out)
			for j, w := range out {
				for w != 0 {
					bit := w & -w
					w ^= bit
					f := j*64 + bits.TrailingZeros64(bit)
					c.packets[f]++
					c.bytes[f] += uint64(p.wire)
				}
			}
		}
		parts[t] = c
		return hi - lo
	})
	sum := setCounts{make([]uint64, nf), make([]uint64, nf)}
	for _, c := range parts {
		for f := range sum.packets {
			sum.packets[f] += c.packets[f]
			sum.bytes[f] += c.bytes[f]
		}
	}
	return sum
}

// errEnough stops a file pass at its packet limit.
var errEnough = errors.New("enough packets")

// fromFile reads the capture and evaluates each packet up to limit
// packets (the pieces of the chunk that reaches it): the file mapped
// (gpfscan.MapCapture) and scanned on threads goroutines, each packet
// evaluated where it lies (gpfscan.ScanCapture without a Filter: the CPU
// backend of gswitchctl filter). It returns the rate and the packets.
func fromFile(prog *filter.Program, path string, limit, threads int, link uint32, big bool) (float64, int, setCounts, error) {
	nf := len(prog.Roots)
	got := setCounts{make([]uint64, nf), make([]uint64, nf)}
	t0 := time.Now()
	data, unmap, err := gpfscan.MapCapture(path, threads)
	if err != nil {
		return 0, 0, got, err
	}
	defer unmap()
	n := 0
	err = gpfscan.ScanCapture(data, gpfscan.ScanConfig{Link: pcapfile.LinkType(link), BigEndian: big, Program: prog, Workers: threads},
		func(p *gpfscan.ScanPiece) error {
			for f := 0; f < nf; f++ {
				got.packets[f] += p.Counts[f]
				got.bytes[f] += p.Bytes[f]
			}
			if n += p.N; n >= limit {
				return errEnough
			}
			return nil
		})
	if err != nil && err != errEnough {
		return 0, 0, got, err
	}
	return float64(n) / time.Since(t0).Seconds() / 1e6, n, got, nil
}

// tcpdumpCount runs tcpdump --count and returns its count and the CPU
// time it used.
func tcpdumpCount(path, expr string) (uint64, time.Duration, error) {
	cmd := exec.Command("tcpdump", "-r", path, "--count", expr)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("tcpdump --count %q: %v: %s", expr, err, out)
	}
	used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && strings.HasPrefix(f[1], "packet") {
			if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
				return n, used, nil
			}
		}
	}
	return 0, 0, fmt.Errorf("tcpdump --count %q: no count in %q", expr, out)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// readSpecs reads NAME: EXPRESSION lines (blank lines and # comments
// skipped).
func readSpecs(path string) ([]filter.Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var specs []filter.Spec
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		name, expr, ok := strings.Cut(l, ":")
		if !ok {
			return nil, fmt.Errorf("%s:%d: want NAME: EXPRESSION", path, i+1)
		}
		specs = append(specs, filter.Spec{Name: strings.TrimSpace(name), Expr: strings.TrimSpace(expr)})
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("%s: no filters", path)
	}
	return specs, nil
}

// Specs returns n typical monitoring filters: hosts, ports, nets with a
// protocol, a source host with a port, TCP flags, VLANs, IPv6 port
// ranges, ICMP or ARP of a host. The first is "tcp".
func Specs(n int) []filter.Spec {
	specs := []filter.Spec{{Name: "f0", Expr: "tcp"}}
	for i := 1; len(specs) < n; i++ {
		var e string
		switch i % 8 {
		case 0:
			e = fmt.Sprintf("host 10.0.%d.%d", i/250%256, i%250)
		case 1:
			e = fmt.Sprintf("tcp port %d", 1000+i)
		case 2:
			e = fmt.Sprintf("net 192.%d.%d.0/24 and udp", 168+i/8/256, i/8%256)
		case 3:
			e = fmt.Sprintf("src host 10.0.0.%d and dst port %d", i%250, 80+i)
		case 4:
			e = fmt.Sprintf("tcp[tcpflags] & (tcp-syn|tcp-fin) != 0 and dst port %d", 1000+i)
		case 5:
			e = fmt.Sprintf("vlan %d and ip", i%4000)
		case 6:
			e = fmt.Sprintf("ip6 and udp portrange %d-%d", 1000+i, 1000+i+100)
		case 7:
			e = fmt.Sprintf("icmp[icmptype] = icmp-echo and host 10.0.0.%d or arp host 10.0.0.%d", i%250, i%250)
		}
		specs = append(specs, filter.Spec{Name: fmt.Sprintf("f%d", i), Expr: e})
	}
	return specs
}

// WriteSynthetic writes a pcapng of n Ethernet frames (seeded).
func WriteSynthetic(path string, n int, seed uint64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w, err := pcapfile.NewWriter(f)
	if err != nil {
		f.Close()
		return err
	}
	r := rand.New(rand.NewPCG(seed, 7))
	for i := range n {
		fr := synthFrame(r)
		if err := w.WritePacket(pcapfile.Packet{Link: pcapfile.LinkEthernet, Timestamp: int64(i) * 1000, WireLen: uint32(len(fr)), Data: fr}); err != nil {
			f.Close()
			return err
		}
	}
	return errors.Join(w.Flush(), f.Close())
}

func synthFrame(r *rand.Rand) []byte {
	be := binary.BigEndian
	b := []byte{0x02, 0, 0, 0, byte(r.IntN(256)), byte(r.IntN(256)), 0x02, 0, 0, 0, byte(r.IntN(256)), byte(r.IntN(256))}
	kind := r.IntN(20)
	if kind == 0 { // ARP request
		b = be.AppendUint16(b, 0x0806)
		a := []byte{0, 1, 8, 0, 6, 4, 0, 1, 2, 0, 0, 0, 0, 1, 10, 0, 0, byte(r.IntN(256)), 0, 0, 0, 0, 0, 0, 10, 0, 0, byte(r.IntN(256))}
		return append(append(b, a...), make([]byte, 18)...)
	}
	if kind == 1 { // VLAN-tagged IPv4 follows
		b = be.AppendUint16(b, 0x8100)
		b = be.AppendUint16(b, uint16(r.IntN(4000)))
	}
	payload := r.IntN(60)
	sport, dport := uint16(1000+r.IntN(2000)), uint16(80+r.IntN(1200))
	if r.IntN(2) == 0 {
		sport, dport = dport, sport
	}
	if kind == 2 || kind == 3 { // IPv6 UDP
		b = be.AppendUint16(b, 0x86dd)
		ip := make([]byte, 40)
		ip[0] = 0x60
		be.PutUint16(ip[4:], uint16(8+payload))
		ip[6], ip[7] = 17, 64
		ip[8], ip[9], ip[23] = 0xfd, 0, byte(r.IntN(256))
		ip[24], ip[25], ip[39] = 0xfd, 0, byte(r.IntN(256))
		b = append(b, ip...)
		u := make([]byte, 8+payload)
		be.PutUint16(u, sport)
		be.PutUint16(u[2:], dport)
		be.PutUint16(u[4:], uint16(8+payload))
		return append(b, u...)
	}
	b = be.AppendUint16(b, 0x0800)
	proto, l4 := uint8(6), 20
	switch k := r.IntN(10); {
	case k < 3:
		proto, l4 = 17, 8
	case k == 3:
		proto, l4 = 1, 8
	}
	ip := make([]byte, 20)
	ip[0] = 0x45
	be.PutUint16(ip[2:], uint16(20+l4+payload))
	ip[8], ip[9] = 64, proto
	src := []byte{10, 0, byte(r.IntN(4)), byte(r.IntN(250))}
	if r.IntN(8) == 0 {
		src = []byte{192, 168, byte(r.IntN(256)), byte(r.IntN(256))}
	}
	copy(ip[12:], src)
	copy(ip[16:], []byte{10, 0, byte(r.IntN(4)), byte(r.IntN(250))})
	b = append(b, ip...)
	t := make([]byte, l4+payload)
	switch proto {
	case 1:
		t[0] = []byte{0, 8, 3, 11}[r.IntN(4)]
	default:
		be.PutUint16(t, sport)
		be.PutUint16(t[2:], dport)
		if proto == 6 {
			t[12] = 5 << 4
			t[13] = []byte{0x02, 0x10, 0x12, 0x18, 0x11}[r.IntN(5)]
		}
	}
	b = append(b, t...)
	for len(b) < 60 {
		b = append(b, 0)
	}
	return b
}
