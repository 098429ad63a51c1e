package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"syscall"
	"time"

	"github.com/gswitch/gswitch/agent"
	"github.com/gswitch/gswitch/internal/version"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is gswitchd with its arguments; it returns the exit status: 0, 2
// for a configuration mistake (a one-line error on stderr), 1 for any
// other failure.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("gswitchd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := agent.RegisterFlags(fs)
	showVersion := fs.Bool("version", false, "print the version (module version and VCS revision) and exit")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (runtime/pprof) of the whole run to `FILE`, for go tool pprof; it is complete once gswitchd exits")
	tr := traceFlags{
		file:  fs.String("trace", "", "write an execution trace (runtime/trace) to `FILE`, for go tool trace: the scheduler's view of every goroutine, to see where a frame's time goes"),
		after: fs.Duration("trace-after", 0, "with --trace, start the trace this `DURATION` after gswitchd starts (0: at once)"),
		span:  fs.Duration("trace-for", 0, "with --trace, stop the trace after this `DURATION` (0: when gswitchd exits); a second of a loaded switch is tens of MB"),
	}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		err = fmt.Errorf("%w: %v", agent.ErrConfig, err)
	case *showVersion:
		fmt.Fprintln(stdout, "gswitchd", version.Get())
		return 0
	default:
		var stopProfile, stopTrace func()
		if stopProfile, err = startCPUProfile(*cpuProfile); err == nil {
			if stopTrace, err = tr.start(stderr); err == nil {
				err = agent.Run(ctx, f, stdout, stderr)
				stopTrace()
			}
			stopProfile()
		}
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, agent.ErrConfig):
		fmt.Fprintln(stderr, "gswitchd:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "gswitchd:", err)
		return 1
	}
}

// startCPUProfile starts a CPU profile written to path (nothing for an
// empty path) and returns the function that ends it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	pf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --cpuprofile: %v", agent.ErrConfig, err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		pf.Close()
	}, nil
}

// traceFlags are --trace, --trace-after and --trace-for.
type traceFlags struct {
	file        *string
	after, span *time.Duration
}

// start creates the trace file (nothing without --trace) and starts the
// trace after its delay, on a goroutine of its own; the function it
// returns stops the trace, if it runs, and closes the file.
func (t traceFlags) start(stderr io.Writer) (stop func(), err error) {
	if *t.file == "" {
		return func() {}, nil
	}
	if *t.after < 0 || *t.span < 0 {
		return nil, fmt.Errorf("%w: --trace-after and --trace-for must not be negative", agent.ErrConfig)
	}
	tf, err := os.Create(*t.file)
	if err != nil {
		return nil, fmt.Errorf("%w: --trace: %v", agent.ErrConfig, err)
	}
	var mu sync.Mutex
	running, stopped := false, false
	end := func() {
		mu.Lock()
		defer mu.Unlock()
		if running {
			trace.Stop()
			running = false
		}
	}
	go func() {
		time.Sleep(*t.after)
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		if err := trace.Start(tf); err != nil {
			fmt.Fprintln(stderr, "gswitchd: --trace:", err)
		} else {
			running = true
		}
		mu.Unlock()
		if *t.span > 0 {
			time.Sleep(*t.span)
			end()
		}
	}()
	return func() {
		end()
		mu.Lock()
		stopped = true
		mu.Unlock()
		tf.Close()
	}, nil
}
