package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/cmd/gswitchctl/filtercmd"
	"github.com/gswitch/gswitch/datapath/filters"
	"github.com/gswitch/gswitch/tables/filter"
)

const filtersUsage = `Usage:
  gswitchctl filters list [--socket PATH] [--json]
  gswitchctl filters show NAME [--socket PATH] [--json]
  gswitchctl filters add NAME EXPRESSION [--ports N,N...] [--capture FILE [--max-bytes N] [--max-files N]] [--socket PATH] [--json]
  gswitchctl filters del NAME [--socket PATH] [--json]

The live filters of a running gswitchd: tcpdump expressions evaluated on
every frame its ports receive, each with packet and byte counters and an
optional pcapng capture. add makes a filter count from the next batch on
(on the given ports; none: every port); an expression it cannot compile is
refused with one line naming the filter and the position, and nothing
changes. del removes one and prints its last counters.

Flags:
`

// runFilters is "gswitchctl filters".
func runFilters(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, filtersUsage)
		return fmt.Errorf("%w: filters needs list, show, add or del", errUsage)
	}
	verb := args[0]
	fs := flag.NewFlagSet("filters "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", defaultSocket, "gswitchd's control socket")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	ports := fs.String("ports", "", "add: the ports, `N,N,...` (empty: every port)")
	capture := fs.String("capture", "", "add: write the accepted packets to pcapng `FILE`")
	maxBytes := fs.Int64("max-bytes", 0, "add: rotate the capture when it would grow past `N` bytes (0: never)")
	maxFiles := fs.Int("max-files", 0, "add: capture files kept in all, with rotation (0: 2 with --max-bytes, else 1)")
	fs.Usage = func() {
		fmt.Fprint(stderr, filtersUsage)
		fs.PrintDefaults()
	}
	// Flags may follow the positional arguments (add NAME EXPR --ports 1).
	var pos []string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			if err == flag.ErrHelp {
				return err
			}
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	want := map[string]int{"list": 0, "show": 1, "add": 2, "del": 1}
	n, ok := want[verb]
	if !ok {
		return fmt.Errorf("%w: filters %s: want list, show, add or del", errUsage, verb)
	}
	if len(pos) != n {
		return fmt.Errorf("%w: filters %s takes %d argument(s), got %d (quote the expression)", errUsage, verb, n, len(pos))
	}
	if verb != "add" && (*ports != "" || *capture != "" || *maxBytes != 0 || *maxFiles != 0) {
		return fmt.Errorf("%w: --ports, --capture, --max-bytes and --max-files are add's", errUsage)
	}
	req := ctl.FilterRequest{}
	if verb == "add" {
		req.Name, req.Expression = pos[0], pos[1]
		// bpf:@FILE is read here (relative to the working directory) and
		// sent as the program itself.
		specs := []filter.Spec{{Name: req.Name, Expr: req.Expression}}
		if err := filtercmd.ExpandBPFFiles(specs, "."); err != nil {
			return err
		}
		req.Expression = specs[0].Expr
		var err error
		if req.Ports, err = parsePorts(*ports); err != nil {
			return err
		}
		if *capture != "" {
			req.Capture = &filters.CaptureConfig{File: *capture, MaxBytes: *maxBytes, MaxFiles: *maxFiles}
		} else if *maxBytes != 0 || *maxFiles != 0 {
			return fmt.Errorf("%w: --max-bytes and --max-files need --capture", errUsage)
		}
	}
	c := ctl.NewClient(*socket)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var list []filters.Info
	switch verb {
	case "list":
		l, err := c.Filters(ctx)
		if err != nil {
			return err
		}
		list = l
	default:
		var in filters.Info
		var err error
		switch verb {
		case "show":
			in, err = c.Filter(ctx, pos[0])
		case "add":
			in, err = c.AddFilter(ctx, req)
		case "del":
			in, err = c.DeleteFilter(ctx, pos[0])
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSONTo(stdout, in)
		}
		list = []filters.Info{in}
	}
	if *asJSON {
		return writeJSONTo(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	printFilters(tw, list)
	return tw.Flush()
}

func writeJSONTo(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func parsePorts(s string) ([]uint32, error) {
	if s == "" {
		return nil, nil
	}
	var out []uint32
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 32)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%w: --ports %q: want port numbers N,N,...", errUsage, s)
		}
		out = append(out, uint32(n))
	}
	return out, nil
}

// printFilters writes one line per filter.
func printFilters(w io.Writer, list []filters.Info) {
	fmt.Fprintln(w, "NAME\tPORTS\tPACKETS\tBYTES\tCAPTURE\tEXPRESSION")
	for _, f := range list {
		ports := "all"
		if len(f.Ports) > 0 {
			var ps []string
			for _, p := range f.Ports {
				ps = append(ps, strconv.FormatUint(uint64(p), 10))
			}
			ports = strings.Join(ps, ",")
		}
		capture := "-"
		if f.Capture != "" {
			capture = fmt.Sprintf("%s (%d written, %d dropped)", f.Capture, f.Captured, f.Dropped)
			if f.WriteError != "" {
				capture += " error: " + f.WriteError
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\n", f.Name, ports, f.Packets, f.Bytes, capture, f.Expression)
	}
}
