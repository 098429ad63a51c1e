package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
)

const routesUsage = `Usage: gswitchctl routes [--socket PATH] [--json] [--table N] [--limit N]

Lists the route tables of a running gswitchd: per table its change counters
and those of its sources (the kernel FIB mirror), and every route with its
next hops, each with packet and byte counters.

Flags:
`

// runRoutes queries /v1/routes and prints it.
func runRoutes(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("routes", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", defaultSocket, "gswitchd's control socket")
	asJSON := fs.Bool("json", false, "print the daemon's JSON answer instead of tables")
	table := fs.Uint("table", 0, "only route table `N` (0: all)")
	limit := fs.Int("limit", 0, "list at most `N` routes (0: all; the tables' counters are complete either way)")
	fs.Usage = func() {
		fmt.Fprint(stderr, routesUsage)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *table > 1<<32-1 {
		return fmt.Errorf("%w: --table %d: want a table id 1..2^32-1", errUsage, *table)
	}
	if *limit < 0 {
		return fmt.Errorf("%w: --limit %d: want a number of routes (0: all)", errUsage, *limit)
	}
	c := ctl.NewClient(*socket)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := c.Routes(ctx, uint32(*table), *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	printRoutes(tw, rs)
	if rs.Truncated {
		fmt.Fprintf(tw, "(the first %d routes; --limit 0 for all)\n", len(rs.Routes))
	}
	return tw.Flush()
}

// printRoutes writes the tables' counters, then one line per next hop:
// a route's first line carries the prefix and the route's counters, the
// lines of its further next hops leave them blank.
func printRoutes(w io.Writer, rs ctl.Routes) {
	fmt.Fprintln(w, "TABLE\tROUTES\tADDS\tCHANGES\tDELETES\tRESYNCS\tREJECTED\tSOURCES")
	for _, t := range rs.Tables {
		var src []string
		for _, name := range slices.Sorted(maps.Keys(t.Sources)) {
			c := t.Sources[name]
			var kv []string
			for _, k := range slices.Sorted(maps.Keys(c)) {
				kv = append(kv, fmt.Sprintf("%s=%d", k, c[k]))
			}
			src = append(src, name+": "+strings.Join(kv, " "))
		}
		if len(src) == 0 {
			src = []string{"-"}
		}
		s := t.Stats
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", t.ID, s.Routes, s.Adds, s.Changes, s.Deletes, s.Resyncs, s.Rejected, strings.Join(src, "; "))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "TABLE\tPREFIX\tSOURCE\tMETRIC\tPACKETS\tBYTES\tNEXT HOP\tPORT\tWEIGHT\tNH_PACKETS\tNH_BYTES")
	for _, r := range rs.Routes {
		for i, h := range r.NextHops {
			gw := h.Gateway
			if gw == "" {
				gw = "on-link"
			}
			if i == 0 {
				fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%d\t%d\t", r.Table, r.Prefix, r.Source, r.Metric, r.Packets, r.Bytes)
			} else {
				fmt.Fprint(w, "\t\t\t\t\t\t")
			}
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\n", gw, h.Port, h.Weight, h.Packets, h.Bytes)
		}
	}
}
