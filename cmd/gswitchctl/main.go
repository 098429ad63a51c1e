// Command gswitchctl is gswitch's command-line tool: a small dispatcher.
// The client commands (show, neighbours, routes) query a running gswitchd
// over its control socket; the bench commands run the benchmarks, each the
// Run of its package under bench/ (whose docs say what they measure, how,
// and their JSON); chunk and re markers are off-line tools on files.
//
//	gswitchctl bench lpm --fib FILE [--family 4|6] [--updates-per-sec N] [--backend cpu|gpu] [--check] [--json]
//	gswitchctl bench classify (--classbench FILE | --synthetic N,C[,F,Cm,f]) [--algo linear|tuple|bloom|merge] [--backend cpu] [--check] [--json]
//	gswitchctl bench p4rt [--entries N] [--batches 1,100,10000] [--samples N] [--tables acl,ipv4_lpm] [--backend cpu|gpu] [--json]
//	gswitchctl bench routes --fib FILE [--family 4|6] [--updates-per-sec N] [--backend cpu|gpu] [--via netlink|direct] [--check] [--json]
//	gswitchctl bench pubsub [--sweep none|all|attrs,...] [--scale F] [--batches 1,1024,16384] [--backend cpu] [--json]
//	gswitchctl bench filter [--pcap FILE | --packets N] [--filters 1,100,1000 | --filters-file FILE] [--threads N] [--json]
//	gswitchctl bench forward [--targets gswitchd,ovs,bridge,plain] [--rules 1000,10000] [--rates 250k,...,max] [--flowmods N] [--gswitchd BIN] [--backend cpu|gpu|auto] [--rounds N] [--json]
//	gswitchctl bench re [--measure markers,chunk] [--payloads N] [--bytes N] [--data random,text,zeros] [--backend cpu|gpu] [--rounds N] [--json]
//
//	gswitchctl show ports|tables|flows|groups|meters|backend|stats|neighbours|l3|re [--socket PATH] [--json]
//	gswitchctl routes [--socket PATH] [--json] [--table N] [--limit N]
//	gswitchctl pubsub subscribe|unsubscribe|list|stats|explain|publish|match [flags]
//	gswitchctl filters list|show NAME|add NAME EXPR [--ports N,...] [--capture FILE]|del NAME [--socket PATH] [--json]
//	gswitchctl chunk [flags] FILE...
//	gswitchctl re markers [flags] FILE...
//	gswitchctl --version
//
// Run a command with -h for all of its flags. Exit status: 0, 1 on an
// error (a --check that found wrong answers among them), 2 on a bad
// command line. "gswitchctl bench plain-forwarder" is bench forward's plain
// target, which bench forward starts in its switch namespace.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/bench/classify"
	benchfilter "github.com/gswitch/gswitch/bench/filter"
	"github.com/gswitch/gswitch/bench/forward"
	"github.com/gswitch/gswitch/bench/lpm"
	"github.com/gswitch/gswitch/bench/p4rt"
	benchpubsub "github.com/gswitch/gswitch/bench/pubsub"
	rebench "github.com/gswitch/gswitch/bench/re"
	"github.com/gswitch/gswitch/bench/routes"
	"github.com/gswitch/gswitch/cmd/gswitchctl/filtercmd"
	"github.com/gswitch/gswitch/cmd/gswitchctl/pubsubcmd"
	"github.com/gswitch/gswitch/internal/version"
)

const usage = `gswitchctl — gswitch's command-line tool

Usage:
  gswitchctl bench lpm --fib FILE [flags]        IPv4/IPv6 longest-prefix match (GAMT trie)
  gswitchctl bench classify (--classbench FILE | --synthetic N,C[,F,Cm,f]) [flags]
                                                 OpenFlow wildcard classification
  gswitchctl bench p4rt [flags]                  P4Runtime: entries written per second, write-to-visible latency
  gswitchctl bench routes --fib FILE [flags]     routes through netlink or directly into the engine: routes/s,
                                                 update-to-visible latency, lookups under route updates
  gswitchctl bench filter [--pcap FILE] [--filters 1,100,1000] [flags]
                                                 many tcpdump filters on every packet of a capture (CPU), against tcpdump
  gswitchctl bench forward [--targets gswitchd,ovs,bridge] [--rules 1000,10000] [--rates ...] [flags]
                                                 frames/s forwarded between namespaces through gswitchd, Open
                                                 vSwitch (userspace) and the Linux bridge, loss per offered load;
                                                 FLOW_MODs/s and barrier latency (root)
  gswitchctl bench re [flags]                    Rabin fingerprinting of 1,460-byte payloads (Gbps); chunk against
                                                 restic/chunker on the same data (MB/s, ratio, identical chunks)
  gswitchctl bench pubsub [--sweep ...] [flags]  content-based matching on CCM's scenarios: deploy, change,
                                                 per-event latency, events/s in batches
  gswitchctl show ports|tables|flows|groups|meters|backend|stats|neighbours|l3|pubsub|re [--socket PATH] [--json]
                                                 query a running gswitchd (control socket)
  gswitchctl neighbours [--socket PATH] [--json] the router's neighbour table (show neighbours)
  gswitchctl routes [--socket PATH] [--json] [--table N] [--limit N]
                                                 route tables: routes, next hops, counters
  gswitchctl filter (--filters FILE | -e 'NAME: EXPR'...) [flags] PCAP...
                                                 many tcpdump filters in one pass over captures: counts, pcapng files
  gswitchctl pubsub subscribe|unsubscribe|list|stats|explain [flags]
                                                 content-based forwarding: gswitchd's subscription service (gRPC)
  gswitchctl pubsub publish --to HOST:PORT --events FILE
                                                 send one event packet per JSON line
  gswitchctl pubsub match --subs FILE --events FILE [--backend cpu|gpu] [--batch N]
                                                 match events against subscriptions off-line
  gswitchctl filters list|show NAME|add NAME EXPR [--ports N,...] [--capture FILE]|del NAME [--socket PATH] [--json]
                                                 live filters on a running gswitchd's ports: counters, captures
  gswitchctl chunk [flags] FILE...               content-defined chunks of files (restic/chunker's boundaries)
  gswitchctl re markers [flags] FILE...          redundancy elimination's marker positions of each file
  gswitchctl --version                           the module version, VCS revision and Go release of this build
  gswitchctl help                                this text

Run "gswitchctl bench lpm -h" or "gswitchctl bench classify -h" for the flags.
`

// errUsage marks an error in the command line: exit status 2. It is the
// benchmarks' own, so that their usage errors exit with 2 too.
var errUsage = benchutil.ErrUsage

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage), errors.Is(err, filtercmd.ErrUsage), errors.Is(err, pubsubcmd.ErrUsage):
		fmt.Fprintln(os.Stderr, "gswitchctl:", err)
		os.Exit(2)
	default: // benchutil.ErrMismatch among them
		fmt.Fprintln(os.Stderr, "gswitchctl:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	switch args[0] {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	case "--version", "-version", "version":
		fmt.Fprintln(stdout, "gswitchctl", version.Get())
		return nil
	case "bench":
		return runBench(context.Background(), args[1:], stdout, stderr)
	case "show":
		return runShow(args[1:], stdout, stderr)
	case "neighbours", "neigh":
		return runShow(append([]string{"neighbours"}, args[1:]...), stdout, stderr)
	case "routes":
		return runRoutes(args[1:], stdout, stderr)
	case "filter":
		return filtercmd.Run(args[1:], stdout, stderr)
	case "pubsub":
		return pubsubcmd.Run(args[1:], stdout, stderr)
	case "filters":
		return runFilters(args[1:], stdout, stderr)
	case "chunk":
		return runChunk(args[1:], stdout, stderr)
	case "re":
		return runRE(args[1:], stdout, stderr)
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

// benches are the bench works, by name; each is the Run of its package
// under bench/.
var benches = map[string]func(ctx context.Context, args []string, stdout, stderr io.Writer) error{
	"lpm":      lpm.Run,
	"classify": classify.Run,
	"p4rt":     p4rt.Run,
	"routes":   routes.Run,
	"forward":  forward.Run,
	"re":       rebench.Run,
	"pubsub":   benchpubsub.Run,
	"filter":   benchfilter.Run,
	// bench forward's plain target runs it in its switch namespace
	// (forward.PlainForwarderArgs).
	"plain-forwarder": forward.RunPlainForwarder,
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: bench needs a work: lpm, classify, p4rt, routes, forward, re, pubsub or filter", errUsage)
	}
	if b, ok := benches[args[0]]; ok {
		return b(ctx, args[1:], stdout, stderr)
	}
	return fmt.Errorf("%w: unknown bench %q (want lpm, classify, p4rt, routes, forward, re, pubsub or filter)", errUsage, args[0])
}

// parseFlags parses args into fs, refusing positional arguments.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	return nil
}
