package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gswitch/gswitch/agent"
	"github.com/gswitch/gswitch/internal/diag"
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
	traceFile := fs.String("trace", "", "write an execution trace (runtime/trace) to `FILE`, for go tool trace: the scheduler's view of every goroutine, to see where a frame's time goes")
	traceAfter := fs.Duration("trace-after", 0, "with --trace, start the trace this `DURATION` after gswitchd starts (0: at once)")
	traceFor := fs.Duration("trace-for", 0, "with --trace, stop the trace after this `DURATION` (0: when gswitchd exits); a second of a loaded switch is tens of MB")
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
		if stopProfile, err = diag.StartCPUProfile(*cpuProfile); err == nil {
			if stopTrace, err = diag.StartTrace(*traceFile, *traceAfter, *traceFor, stderr); err == nil {
				err = agent.Run(ctx, f, stdout, stderr)
				stopTrace()
			}
			stopProfile()
		}
		if errors.Is(err, diag.ErrFile) {
			err = fmt.Errorf("%w: %v", agent.ErrConfig, err)
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
