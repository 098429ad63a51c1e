package benchutil

import (
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// ErrUsage marks an error in the command line: gswitchctl exits with
// status 2.
var ErrUsage = errors.New("usage")

// ErrMismatch marks a --check that found wrong answers: gswitchctl exits
// with status 1.
var ErrMismatch = errors.New("mismatches found")

// CommonFlags are the flags every bench work takes.
type CommonFlags struct {
	Backend     string
	Check       bool
	CheckSample int
	JSON        bool
	Lookups     int
	Rounds      int
	Batch       int
	Threads     int
	Seed        uint64
	GPUs        string
	MinBatch    int
	Streams     int
	Depth       int
	Chunk       int
}

// Register defines the common flags on fs, --lookups defaulting to
// defLookups.
func (c *CommonFlags) Register(fs *flag.FlagSet, defLookups int) {
	fs.StringVar(&c.Backend, "backend", "cpu", "lookup backend: cpu, or gpu (CUDA; needs a gswitchctl built with -tags cuda)")
	fs.BoolVar(&c.Check, "check", false, "compare a sample of lookups with a brute-force reference; exit 1 on any mismatch")
	fs.IntVar(&c.CheckSample, "check-sample", 0, "lookups to check with --check (0: a size the reference scans in a few seconds)")
	fs.BoolVar(&c.JSON, "json", false, "print one JSON object per run instead of a table")
	fs.IntVar(&c.Lookups, "lookups", defLookups, "traffic size: lookups per timed round")
	fs.IntVar(&c.Rounds, "rounds", 5, "timed rounds; rates are the median")
	fs.IntVar(&c.Batch, "batch", 256, "lookups per batch call (bench lpm and bench routes with --backend gpu: 1M and 64K unless given)")
	fs.IntVar(&c.Threads, "threads", 1, "lookup goroutines (idle lookups)")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed of the traffic and update generators")
	fs.StringVar(&c.GPUs, "gpus", "0", "gpu backend: the CUDA devices (comma-separated ordinals); tables are replicated, batches spread over them")
	fs.IntVar(&c.MinBatch, "min-batch", 1, "gpu backend: smaller batches are answered by the CPU backend (the agent's default is 2048)")
	fs.IntVar(&c.Streams, "streams", 4, "gpu backend: CUDA streams the batches are spread over")
	fs.IntVar(&c.Depth, "depth", 0, "gpu backend: most pinned batches in flight (0: two per stream)")
	fs.IntVar(&c.Chunk, "chunk", 0, "gpu backend: most keys per pipeline chunk of the slice lookups (0: the backend's default, 1<<20)")
}

// PipeDepth is --depth, or two batches per stream.
func (c *CommonFlags) PipeDepth() int {
	if c.Depth > 0 {
		return c.Depth
	}
	return 2 * c.Streams
}

// Ordinals parses --gpus.
func (c *CommonFlags) Ordinals() ([]int, error) {
	var os []int
	for _, f := range strings.Split(c.GPUs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: --gpus %q: want comma-separated device ordinals", ErrUsage, c.GPUs)
		}
		os = append(os, n)
	}
	return os, nil
}

// OpenGPU opens the GPU engine the flags ask for.
func (c *CommonFlags) OpenGPU() (GPUEngine, error) {
	ords, err := c.Ordinals()
	if err != nil {
		return nil, err
	}
	eng, err := NewGPUEngine(ords, c.MinBatch)
	if err != nil {
		return nil, err
	}
	if err := eng.SetStreams(c.Streams, c.Chunk); err != nil {
		eng.Close()
		return nil, err
	}
	return eng, nil
}

// Validate checks the common flags; its errors wrap ErrUsage.
func (c *CommonFlags) Validate() error {
	switch c.Backend {
	case "cpu":
	case "gpu":
		if NewGPUEngine == nil {
			return fmt.Errorf("%w: --backend gpu: this gswitchctl was built without the cuda tag (go build -tags cuda); use --backend cpu", ErrUsage)
		}
	default:
		return fmt.Errorf("%w: --backend %q: want cpu or gpu", ErrUsage, c.Backend)
	}
	switch {
	case c.Lookups < 1:
		return fmt.Errorf("%w: --lookups must be at least 1", ErrUsage)
	case c.Rounds < 1:
		return fmt.Errorf("%w: --rounds must be at least 1", ErrUsage)
	case c.Batch < 1:
		return fmt.Errorf("%w: --batch must be at least 1", ErrUsage)
	case c.Threads < 1 || c.Threads > 1024:
		return fmt.Errorf("%w: --threads must be in 1..1024", ErrUsage)
	case c.CheckSample < 0:
		return fmt.Errorf("%w: --check-sample must not be negative", ErrUsage)
	}
	return nil
}

// ParseFlags parses args into fs, refusing positional arguments.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", ErrUsage, fs.Arg(0))
	}
	return nil
}
