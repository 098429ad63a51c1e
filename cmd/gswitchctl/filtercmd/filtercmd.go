// Package filtercmd is "gswitchctl filter": many tcpdump filters over one
// pass of each capture file, with per-filter packet and byte counts and,
// optionally, one pcapng file per filter.
//
//	gswitchctl filter [--backend cpu|gpu] [--threads N] [--json] [--write DIR] [--progress auto|always|never]
//	                  (--filters FILE | -e 'NAME: EXPR'...) PCAP...
//
// Every filter is compiled before any packet is read (for the link type of
// the first capture; a capture of another link type, or a pcapng interface
// of another one, compiles the set again for it, and an error there names
// the filter too). Counts are the packets tcpdump --count would count; the
// bytes are the packets' lengths on the wire. With --write, DIR/NAME.pcapng
// holds exactly the packets the filter accepts, in file order.
//
// Each capture is read once: mapped and cut into chunks that --threads
// goroutines (default: one per CPU) parse at once (datapath/gpfscan;
// files larger than memory are fine: their pages are read as the scan
// reaches them). With --backend cpu (the default) each goroutine
// evaluates its packets where they lie with tables/filter's CPU
// evaluator; with --backend gpu (a build with -tags cuda and a device) it
// reduces them into batches for the filter kernel (gpu.go). The calling
// goroutine adds up the counts and writes the captures in file order, so
// the output is the same, file for file, whatever the backend and the
// number of goroutines (scan.go). A capture that cannot be mapped (a pipe,
// a device) is streamed on the CPU by one goroutine.
package filtercmd

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/tables/filter"
)

// ErrUsage marks an error in the command line (exit status 2).
var ErrUsage = errors.New("usage")

const usage = `Usage: gswitchctl filter [--backend cpu|gpu] [--threads N] [--json] [--write DIR] [--progress auto|always|never]
                         (--filters FILE | -e 'NAME: EXPR'...) PCAP...

Evaluates every filter on every packet of each capture (pcap or pcapng, told
apart by the magic number) in one pass and prints one line per filter with
its packet and byte (wire length) counts. FILE holds one filter per line,
"NAME: EXPRESSION" (NAME of letters, digits, _ . -); blank lines and lines
starting with # are ignored. An EXPRESSION "bpf:PROGRAM" is a classic BPF
program in tcpdump -ddd's form, its lines joined with commas, and
"bpf:@FILE" reads it from FILE (relative to the filters file's folder).
`

type exprFlags []string

func (e *exprFlags) String() string     { return strings.Join(*e, "; ") }
func (e *exprFlags) Set(v string) error { *e = append(*e, v); return nil }

var lineRE = regexp.MustCompile(`^\s*([A-Za-z0-9_.-]+)\s*:\s*(.*?)\s*$`)

// ParseFilterLine parses "NAME: EXPRESSION".
func ParseFilterLine(line string) (filter.Spec, error) {
	m := lineRE.FindStringSubmatch(line)
	if m == nil {
		return filter.Spec{}, fmt.Errorf("%q: want NAME: EXPRESSION (NAME of letters, digits, _ . -)", line)
	}
	return filter.Spec{Name: m[1], Expr: m[2]}, nil
}

// ReadFilters reads a filters file.
func ReadFilters(r io.Reader, name string) ([]filter.Spec, error) {
	var specs []filter.Spec
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s, err := ParseFilterLine(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		specs = append(specs, s)
	}
	return specs, sc.Err()
}

// ExpandBPFFiles reads the program of every filter written
// "bpf:@FILE" (tcpdump -ddd's output) into its expression; a relative
// FILE is from dir. The error names the filter.
func ExpandBPFFiles(specs []filter.Spec, dir string) error {
	for i := range specs {
		e, err := filter.ExpandBPFFile(specs[i].Expr, func(p string) ([]byte, error) {
			if !filepath.IsAbs(p) {
				p = filepath.Join(dir, p)
			}
			return os.ReadFile(p)
		})
		if err != nil {
			return &filter.CompileError{Filter: specs[i].Name, Expr: specs[i].Expr, Err: err}
		}
		specs[i].Expr = e
	}
	return nil
}

// Result is one filter's counts (the --json object).
type Result struct {
	Name       string `json:"name"`
	Expression string `json:"expression"`
	Packets    uint64 `json:"packets"`
	Bytes      uint64 `json:"bytes"`
}

// Summary is the last --json object.
type Summary struct {
	Summary bool    `json:"summary"`
	Packets uint64  `json:"packets"`
	Seconds float64 `json:"seconds"`
	Mpps    float64 `json:"mpps"`
}

type linkKey struct {
	link      pcapfile.LinkType
	bigEndian bool
}

// Runner evaluates a set of filters over captures.
type Runner struct {
	specs    []filter.Spec
	progs    map[linkKey]*filter.Evaluator
	programs map[linkKey]*filter.Program
	gpu      *gpuRunner // nil: the CPU evaluates
	counts   []Result
	out      []uint64
	writers  []*pcapfile.Writer
	files    []*os.File
	packets  uint64
	progress func(done, total int64, packets uint64)
	lastKey  linkKey
	last     *filter.Evaluator
	threads  int        // goroutines a capture is scanned on (0: GOMAXPROCS)
	mu       sync.Mutex // guards progs, programs and out while a scan's workers compile (program)
}

// NewRunner checks names and prepares counters. writeDir, if not empty,
// receives one pcapng per filter.
func NewRunner(specs []filter.Spec, writeDir string) (*Runner, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("%w: no filters (give --filters FILE or -e 'NAME: EXPR')", ErrUsage)
	}
	r := &Runner{specs: specs, progs: map[linkKey]*filter.Evaluator{}, programs: map[linkKey]*filter.Program{}}
	for _, s := range specs {
		r.counts = append(r.counts, Result{Name: s.Name, Expression: s.Expr})
	}
	if writeDir != "" {
		if err := os.MkdirAll(writeDir, 0o755); err != nil {
			return nil, err
		}
		for _, s := range specs {
			f, err := os.Create(filepath.Join(writeDir, s.Name+".pcapng"))
			if err != nil {
				r.Close()
				return nil, err
			}
			r.files = append(r.files, f)
			w, err := pcapfile.NewWriter(f)
			if err != nil {
				r.Close()
				return nil, err
			}
			r.writers = append(r.writers, w)
		}
	}
	return r, nil
}

// Compile compiles the set for a link type (once per link type and byte
// order); the error names the filter and the position.
func (r *Runner) Compile(link pcapfile.LinkType, bigEndian bool) (*filter.Evaluator, error) {
	k := linkKey{link, bigEndian}
	if ev, ok := r.progs[k]; ok {
		return ev, nil
	}
	p, err := filter.Compile(r.specs, uint32(link), bigEndian, nil)
	if err != nil {
		return nil, fmt.Errorf("%w (link type %v)", err, link)
	}
	ev := filter.NewEvaluator(p)
	r.progs[k] = ev
	r.programs[k] = p
	if n := p.Words(); len(r.out) < n {
		r.out = make([]uint64, n)
	}
	return ev, nil
}

// Packet evaluates every filter on one packet.
func (r *Runner) Packet(p pcapfile.Packet) error {
	ev := r.last
	if k := (linkKey{p.Link, p.BigEndian}); ev == nil || k != r.lastKey {
		var err error
		if ev, err = r.Compile(p.Link, p.BigEndian); err != nil {
			return err
		}
		r.last, r.lastKey = ev, k
	}
	r.packets++
	ev.Eval(p.Data, p.WireLen, r.out)
	for w, word := range r.out[:(len(r.specs)+63)/64] {
		for word != 0 {
			bit := word & -word
			i := w*64 + bitIndex(bit)
			word ^= bit
			r.counts[i].Packets++
			r.counts[i].Bytes += uint64(p.WireLen)
			if r.writers != nil {
				if err := r.writers[i].WritePacket(p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func bitIndex(b uint64) int {
	n := 0
	for b > 1 {
		b >>= 1
		n++
	}
	return n
}

const batchPackets = 4096

// File reads one capture through the filters: mapped and scanned on
// several goroutines (scanFile), or streamed (streamFile).
func (r *Runner) File(path string) error {
	return r.scanFile(path)
}

// streamFile reads a capture on the CPU without mapping it all:
// pcapfile.Open maps a regular file where it can and streams another, and
// Batches parses it on a goroutine of its own, in place, into batches
// that evaluation, counting and writing take on the caller's goroutine,
// in file order.
func (r *Runner) streamFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var size int64
	if st, err := f.Stat(); err == nil {
		size = st.Size()
	}
	rd, err := pcapfile.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer rd.Close()
	if rd.Format() == pcapfile.FormatPcap || rd.LinkType() != 0 {
		if _, err := r.Compile(rd.LinkType(), rd.BigEndian()); err != nil {
			return err
		}
	}
	err = rd.Batches(batchPackets, func(pkts []pcapfile.Packet, off int64) error {
		for _, p := range pkts {
			if err := r.Packet(p); err != nil {
				return err
			}
		}
		if r.progress != nil {
			r.progress(off, size, r.packets)
		}
		return nil
	})
	if errors.Is(err, pcapfile.ErrFormat) {
		return fmt.Errorf("%s: %w", path, err)
	}
	return err
}

// Results returns the per-filter counts.
func (r *Runner) Results() []Result { return r.counts }

// Close flushes and closes the per-filter captures and lets the GPU go.
func (r *Runner) Close() error {
	r.closeGPU()
	var first error
	for i, w := range r.writers {
		if err := w.Flush(); err != nil && first == nil {
			first = err
		}
		if err := r.files[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	if len(r.writers) == 0 {
		for _, f := range r.files {
			f.Close()
		}
	}
	r.writers, r.files = nil, nil
	return first
}

// Run is the command: args after "filter".
func Run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("filter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	var exprs exprFlags
	filtersFile := fs.String("filters", "", "file of filters, one `NAME: EXPRESSION` a line")
	fs.Var(&exprs, "e", "a filter `NAME: EXPRESSION` (repeatable)")
	jsonOut := fs.Bool("json", false, "one JSON object per filter, then a summary object")
	writeDir := fs.String("write", "", "write one pcapng per filter into `DIR`")
	backend := fs.String("backend", "cpu", "cpu, or gpu (a build with -tags cuda, and a CUDA device)")
	progress := fs.String("progress", "auto", "progress on stderr: auto (when stderr is a terminal), always, never")
	threads := fs.Int("threads", 0, "goroutines that read, parse and (cpu) evaluate each capture; 0: one per CPU (GOMAXPROCS)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if *backend != "cpu" && *backend != "gpu" {
		return fmt.Errorf("%w: --backend %s: want cpu or gpu", ErrUsage, *backend)
	}
	if *threads < 0 {
		return fmt.Errorf("%w: --threads %d: want 0 (one per CPU) or more", ErrUsage, *threads)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: no capture files", ErrUsage)
	}
	var specs []filter.Spec
	if *filtersFile != "" {
		f, err := os.Open(*filtersFile)
		if err != nil {
			return err
		}
		s, err := ReadFilters(f, *filtersFile)
		f.Close()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUsage, err)
		}
		// bpf:@FILE in a filters file: a relative path is from its folder.
		if err := ExpandBPFFiles(s, filepath.Dir(*filtersFile)); err != nil {
			return err
		}
		specs = append(specs, s...)
	}
	for _, e := range exprs {
		s, err := ParseFilterLine(e)
		if err != nil {
			return fmt.Errorf("%w: -e %v", ErrUsage, err)
		}
		if err := ExpandBPFFiles([]filter.Spec{s}, "."); err != nil {
			return err
		}
		specs = append(specs, s)
	}
	showProgress := false
	switch *progress {
	case "always":
		showProgress = true
	case "never":
	case "auto":
		if f, ok := stderr.(*os.File); ok {
			if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
				showProgress = true
			}
		}
	default:
		return fmt.Errorf("%w: --progress %s: want auto, always or never", ErrUsage, *progress)
	}
	// Compile for the first capture's link type before reading packets.
	r, err := NewRunner(specs, *writeDir)
	if err != nil {
		return err
	}
	defer r.Close()
	r.SetThreads(*threads)
	if *backend == "gpu" {
		if err := r.OpenGPU(); err != nil {
			return fmt.Errorf("--backend gpu: %v", oneLine(err))
		}
	}
	if link, be, err := firstLink(fs.Arg(0)); err == nil && link != 0 {
		if _, err := r.Compile(link, be); err != nil {
			return err
		}
	}
	start := time.Now()
	if showProgress {
		r.progress = func(done, total int64, packets uint64) {
			el := time.Since(start).Seconds()
			rate := float64(packets) / max(el, 1e-9) / 1e6
			eta := ""
			if done > 0 && total > done {
				eta = fmt.Sprintf(" ETA %.0fs", el*float64(total-done)/float64(done))
			}
			pct := 100.0
			if total > 0 {
				pct = 100 * float64(done) / float64(total)
			}
			fmt.Fprintf(stderr, "\r%5.1f%% %d packets %.2f Mpps%s   ", pct, packets, rate, eta)
		}
	}
	for _, path := range fs.Args() {
		if err := r.File(path); err != nil {
			return err
		}
	}
	if showProgress {
		fmt.Fprintln(stderr)
	}
	secs := time.Since(start).Seconds()
	if err := r.Close(); err != nil {
		return err
	}
	sum := Summary{Summary: true, Packets: r.packets, Seconds: secs, Mpps: float64(r.packets) / max(secs, 1e-9) / 1e6}
	if *jsonOut {
		enc := json.NewEncoder(stdout)
		for _, c := range r.Results() {
			if err := enc.Encode(c); err != nil {
				return err
			}
		}
		return enc.Encode(sum)
	}
	width := 4
	for _, c := range r.Results() {
		width = max(width, len(c.Name))
	}
	for _, c := range r.Results() {
		fmt.Fprintf(stdout, "%-*s %12d packets %14d bytes  %s\n", width, c.Name, c.Packets, c.Bytes, c.Expression)
	}
	fmt.Fprintf(stdout, "%d packets in %.3f s (%.2f Mpps)\n", sum.Packets, sum.Seconds, sum.Mpps)
	return nil
}

// firstLink peeks at a capture's link type (of a pcapng file: its first
// packet's), so that every filter is compiled before the pass starts.
func firstLink(path string) (pcapfile.LinkType, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	rd, err := pcapfile.NewReader(f)
	if err != nil {
		return 0, false, err
	}
	if rd.Format() == pcapfile.FormatPcap {
		return rd.LinkType(), rd.BigEndian(), nil
	}
	p, err := rd.Next()
	if err != nil {
		return 0, false, err
	}
	return p.Link, p.BigEndian, nil
}

// oneLine joins an error's lines (errors.Join's) with "; ".
func oneLine(err error) string { return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ") }
