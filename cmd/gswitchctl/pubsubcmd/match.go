package pubsubcmd

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// DefaultMatchBatch is match's --batch default: the events of one matcher
// call, what the CUDA matcher takes in one batch (16K events).
const DefaultMatchBatch = 16384

// gpuBackend returns the function that opens the GPU matcher on a table's
// layout (match_cuda.go: gpu.OpenEventDevice), or, in a build without
// CUDA (match_nocuda.go), the error saying how to get one. It is a seam:
// the CPU build's test of the GPU path's host side puts gpu.LayoutDevice,
// the kernel's computation in Go, in the device's place.
var gpuBackend = gpuOpener

// runMatch is "gswitchctl pubsub match". Both backends match the same
// batches of --batch events in input order and print the same lines: the
// CPU one with pubsub.Table.MatchBatch, the GPU one on the table's device
// layout (pubsub.NewDevice) loaded into the CUDA matcher (one device
// context for the command, closed at its end), whose Match answers each
// event's sorted ports as the CPU does.
func runMatch(args []string, stdout, stderr io.Writer) error {
	fs := newFS("match", stderr)
	subs := fs.String("subs", "", "subscriptions, PORT: PREDICATE per line: `FILE`")
	events := fs.String("events", "", "events, one JSON object per line: `FILE` (- for stdin)")
	backend := fs.String("backend", "cpu", "matcher: `cpu` or gpu (a build with -tags cuda and a CUDA device)")
	batch := fs.Int("batch", DefaultMatchBatch, "events per matcher call: `N`")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return firstErr(err, fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos))
	}
	switch {
	case *subs == "" || *events == "":
		return fmt.Errorf("%w: match needs --subs FILE and --events FILE", ErrUsage)
	case *batch < 1:
		return fmt.Errorf("%w: --batch %d: want at least 1", ErrUsage, *batch)
	case *backend != "cpu" && *backend != "gpu":
		return fmt.Errorf("%w: --backend %q: want cpu or gpu", ErrUsage, *backend)
	}
	var open func(*pubsub.Layout) (gpu.EventDevice, error)
	if *backend == "gpu" {
		// Before reading anything: a build without CUDA says so at once.
		var err error
		if open, err = gpuBackend(); err != nil {
			return err
		}
	}
	text, err := os.ReadFile(*subs)
	if err != nil {
		return err
	}
	specs, err := pubsub.Parse(string(text))
	if err != nil {
		return fmt.Errorf("%s: %w", *subs, err)
	}
	tab := pubsub.New()
	if _, err := tab.AddSpecs(specs); err != nil {
		return fmt.Errorf("%s: %w", *subs, err)
	}
	evs, err := readEvents(*events)
	if err != nil {
		return err
	}
	match := func(evs []pubsub.Event, out [][]uint32) ([][]uint32, error) { return tab.MatchBatch(evs, out), nil }
	if open != nil {
		dev, err := open(pubsub.NewDevice(tab).Layout())
		if err != nil {
			return fmt.Errorf("--backend gpu: %w", err)
		}
		defer dev.Close()
		match = dev.Match
	}
	return writeMatches(stdout, evs, *batch, match)
}

// writeMatches matches evs in batches of batch events (never an empty
// one) and writes one line per event, in input order.
func writeMatches(stdout io.Writer, evs []pubsub.Event, batch int, match func([]pubsub.Event, [][]uint32) ([][]uint32, error)) error {
	w := bufio.NewWriter(stdout)
	var out [][]uint32
	var line []byte
	for lo := 0; lo < len(evs); lo += batch {
		hi := min(lo+batch, len(evs))
		var err error
		if out, err = match(evs[lo:hi], out); err != nil {
			w.Flush()
			return fmt.Errorf("events %d..%d: %w", lo, hi-1, err)
		}
		if len(out) != hi-lo {
			w.Flush()
			return fmt.Errorf("events %d..%d: the matcher answered %d events", lo, hi-1, len(out))
		}
		for i, ports := range out {
			line = AppendMatchLine(line[:0], lo+i, ports)
			w.Write(line)
		}
	}
	return w.Flush()
}
