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
		err = agent.Run(ctx, f, stdout, stderr)
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
