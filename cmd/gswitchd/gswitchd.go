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
	"syscall"

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
		var stopProfile func()
		if stopProfile, err = startCPUProfile(*cpuProfile); err == nil {
			err = agent.Run(ctx, f, stdout, stderr)
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
