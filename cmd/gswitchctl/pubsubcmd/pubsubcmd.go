// Package pubsubcmd is "gswitchctl pubsub": content-based forwarding's
// tools. The client commands talk to gswitchd's gRPC subscription service
// (controlproto/pubsubapi; gswitchd's pubsub: api_listen), publish sends
// event packets, and match is the matcher off-line:
//
//	gswitchctl pubsub subscribe [--api ADDR] --port N [--replace] PREDICATE
//	gswitchctl pubsub unsubscribe [--api ADDR] (--id N[,N...] | --port N)
//	gswitchctl pubsub list [--api ADDR] [--port N] [--json]
//	gswitchctl pubsub stats [--api ADDR] [--json]
//	gswitchctl pubsub explain [--api ADDR] [--id N] EVENT-JSON
//	gswitchctl pubsub publish --to HOST:PORT --events FILE [--rate N]
//	gswitchctl pubsub match --subs FILE --events FILE [--backend cpu|gpu] [--batch N]
//
// match reads the subscriptions (tables/pubsub's language, PORT: PREDICATE
// per line) and the events (JSON lines), matches them in batches of N
// (default 16,384) and prints one line per event, in input order:
// {"event": INDEX, "ports": [sorted port numbers]} (INDEX from 0, blank
// lines are not events; [] when no port matches). --backend cpu matches
// with the table's CPU matcher (pubsub.Table.MatchBatch); --backend gpu
// builds the table's device layout (pubsub.NewDevice), opens device 0 with
// the CUDA matcher loaded with it (gpu.OpenEventDevice, what gswitchd's
// event forwarding uses) and matches each batch there; the output is the
// CPU backend's, byte for byte. The GPU backend is in a gswitchctl built
// with -tags cuda (match_cuda.go); without it (match_nocuda.go) --backend
// gpu is a one-line error saying so, before any file is read. publish
// sends one UDP datagram per event line (the binary encoding of
// tables/pubsub's doc).
package pubsubcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gswitch/gswitch/controlproto/pubsubapi"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// ErrUsage marks an error in the command line (exit status 2).
var ErrUsage = errors.New("usage")

// DefaultAPI is the address the client commands dial without --api.
const DefaultAPI = "127.0.0.1:9560"

const usage = `Usage: gswitchctl pubsub COMMAND [flags]

Content-based forwarding. Commands:
  subscribe [--api ADDR] --port N [--replace] PREDICATE
                         add a subscription (--replace: the port's whole predicate)
  unsubscribe [--api ADDR] (--id N[,N...] | --port N)
                         remove subscriptions by id, or all of a port
  list [--api ADDR] [--port N] [--json]
                         the subscriptions with their match counters
  stats [--api ADDR] [--json]
                         table sizes, per-subscription matches, event counters
  explain [--api ADDR] [--id N] EVENT-JSON
                         which constraints of which filter an event satisfies
  publish --to HOST:PORT --events FILE [--rate N]
                         send one event packet (UDP datagram) per JSON line
  match --subs FILE --events FILE [--backend cpu|gpu] [--batch N]
                         match events against subscriptions off-line, N events
                         per matcher call (default 16384): one
                         {"event": INDEX, "ports": [...]} line per event;
                         gpu: the CUDA matcher (a build with -tags cuda)

The client commands talk to gswitchd's gRPC subscription service (pubsub:
api_listen in its configuration; default address ` + DefaultAPI + `).
`

// Run runs "gswitchctl pubsub" with args (after "pubsub").
func Run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: pubsub needs a command", ErrUsage)
	}
	cmds := map[string]func([]string, io.Writer, io.Writer) error{
		"subscribe": runSubscribe, "unsubscribe": runUnsubscribe, "list": runList, "stats": runStats,
		"explain": runExplain, "publish": runPublish, "match": runMatch,
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	f, ok := cmds[args[0]]
	if !ok {
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("%w: unknown pubsub command %q", ErrUsage, args[0])
	}
	return f(args[1:], stdout, stderr)
}

// parse parses fs's flags, allowing them before and after the positional
// arguments, and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func newFS(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gswitchctl pubsub "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// client dials the service.
func client(addr string) (pubsubapi.PubSubClient, func(), error) {
	cc, err := grpc.Dial(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return pubsubapi.NewPubSubClient(cc), func() { cc.Close() }, nil
}

// call runs one RPC with a timeout, turning a gRPC status into a plain
// message.
func call[T any](addr string, f func(context.Context, pubsubapi.PubSubClient) (T, error)) (T, error) {
	var zero T
	c, done, err := client(addr)
	if err != nil {
		return zero, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := f(ctx, c)
	if err != nil {
		if s, ok := status.FromError(err); ok {
			return zero, fmt.Errorf("%s: %s (%s)", addr, s.Message(), s.Code())
		}
		return zero, err
	}
	return v, nil
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runSubscribe(args []string, stdout, stderr io.Writer) error {
	fs := newFS("subscribe", stderr)
	api := fs.String("api", DefaultAPI, "the subscription service's `ADDR`")
	port := fs.Uint("port", 0, "the subscribing port `N`")
	replace := fs.Bool("replace", false, "replace all of the port's subscriptions")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if *port == 0 || len(pos) == 0 {
		return fmt.Errorf("%w: subscribe needs --port N and a PREDICATE", ErrUsage)
	}
	pred := strings.Join(pos, " ")
	if _, err := pubsub.ParsePredicate(pred); err != nil {
		return fmt.Errorf("%w: %v", ErrUsage, err)
	}
	r, err := call(*api, func(ctx context.Context, c pubsubapi.PubSubClient) (*pubsubapi.SubscribeResponse, error) {
		return c.Subscribe(ctx, &pubsubapi.SubscribeRequest{Port: uint32(*port), Predicate: pred, Replace: *replace})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "subscription %d\n", r.Id)
	if len(r.Removed) > 0 {
		fmt.Fprintf(stdout, "replaced %v\n", r.Removed)
	}
	return nil
}

func runUnsubscribe(args []string, stdout, stderr io.Writer) error {
	fs := newFS("unsubscribe", stderr)
	api := fs.String("api", DefaultAPI, "the subscription service's `ADDR`")
	ids := fs.String("id", "", "subscription ids, comma separated: `N[,N...]`")
	port := fs.Uint("port", 0, "remove every subscription of port `N`")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 || (*ids == "") == (*port == 0) {
		return fmt.Errorf("%w: unsubscribe needs --id N[,N...] or --port N", ErrUsage)
	}
	req := &pubsubapi.UnsubscribeRequest{Port: uint32(*port)}
	if *ids != "" {
		for _, s := range strings.Split(*ids, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return fmt.Errorf("%w: --id %q: want numbers", ErrUsage, *ids)
			}
			req.Ids = append(req.Ids, n)
		}
	}
	r, err := call(*api, func(ctx context.Context, c pubsubapi.PubSubClient) (*pubsubapi.UnsubscribeResponse, error) {
		return c.Unsubscribe(ctx, req)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed %v\n", r.Removed)
	return nil
}

func runList(args []string, stdout, stderr io.Writer) error {
	fs := newFS("list", stderr)
	api := fs.String("api", DefaultAPI, "the subscription service's `ADDR`")
	port := fs.Uint("port", 0, "only port `N`'s subscriptions")
	asJSON := fs.Bool("json", false, "print JSON")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return firstErr(err, fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos))
	}
	r, err := call(*api, func(ctx context.Context, c pubsubapi.PubSubClient) (*pubsubapi.ListResponse, error) {
		return c.List(ctx, &pubsubapi.ListRequest{Port: uint32(*port)})
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, r.Subscriptions)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPORT\tMATCHES\tPREDICATE")
	for _, s := range r.Subscriptions {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\n", s.Id, s.Port, s.Matches, s.Predicate)
	}
	return tw.Flush()
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func runStats(args []string, stdout, stderr io.Writer) error {
	fs := newFS("stats", stderr)
	api := fs.String("api", DefaultAPI, "the subscription service's `ADDR`")
	asJSON := fs.Bool("json", false, "print JSON")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return firstErr(err, fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos))
	}
	r, err := call(*api, func(ctx context.Context, c pubsubapi.PubSubClient) (*pubsubapi.StatsResponse, error) {
		return c.Stats(ctx, &pubsubapi.StatsRequest{})
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, r)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "table\t%d subscriptions\t%d filters\t%d constraints\t%d names\t%d ports\n", r.Subscriptions, r.Filters, r.Constraints, r.Names, r.Ports)
	fmt.Fprintf(tw, "events (udp %d)\treceived %d\tmalformed %d\tmatched %d\tdelivered %d\n", r.UdpPort, r.EventsReceived, r.EventsMalformed, r.EventsMatched, r.EventsDelivered)
	for _, p := range r.PortDeliveries {
		fmt.Fprintf(tw, "port %d\tdelivered %d\n", p.Port, p.Events)
	}
	for _, s := range r.SubscriptionMatches {
		fmt.Fprintf(tw, "subscription %d\tport %d\tmatches %d\n", s.Id, s.Port, s.Matches)
	}
	return tw.Flush()
}

func runExplain(args []string, stdout, stderr io.Writer) error {
	fs := newFS("explain", stderr)
	api := fs.String("api", DefaultAPI, "the subscription service's `ADDR`")
	id := fs.Uint64("id", 0, "explain subscription `N` only (0: every one with a satisfied constraint)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: explain needs one EVENT-JSON argument, e.g. '{\"price\": 12}'", ErrUsage)
	}
	if _, err := pubsub.DecodeJSON([]byte(pos[0])); err != nil {
		return fmt.Errorf("%w: event: %v", ErrUsage, err)
	}
	r, err := call(*api, func(ctx context.Context, c pubsubapi.PubSubClient) (*pubsubapi.ExplainResponse, error) {
		return c.Explain(ctx, &pubsubapi.ExplainRequest{EventJson: pos[0], Id: *id})
	})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, r)
	}
	fmt.Fprintf(stdout, "delivered to ports %v\n", r.Ports)
	for _, x := range r.Explanations {
		verdict := "no match"
		if x.Matched {
			verdict = "MATCH"
		}
		fmt.Fprintf(stdout, "subscription %d port %d filter %d: %s\n", x.Id, x.Port, x.Filter, verdict)
		for i, c := range x.Constraints {
			mark := "  no "
			if i < len(x.Satisfied) && x.Satisfied[i] {
				mark = "  yes"
			}
			fmt.Fprintf(stdout, "%s  %s\n", mark, c)
		}
	}
	return nil
}

func runPublish(args []string, stdout, stderr io.Writer) error {
	fs := newFS("publish", stderr)
	to := fs.String("to", "", "where to send: `HOST:PORT` (gswitchd's pubsub udp_port behind the switch)")
	events := fs.String("events", "", "events, one JSON object per line: `FILE` (- for stdin)")
	rate := fs.Float64("rate", 0, "events per second at most: `N` (0: as fast as the socket takes them)")
	if pos, err := parse(fs, args); err != nil || len(pos) > 0 {
		return firstErr(err, fmt.Errorf("%w: unexpected argument %q", ErrUsage, pos))
	}
	if *to == "" || *events == "" {
		return fmt.Errorf("%w: publish needs --to HOST:PORT and --events FILE", ErrUsage)
	}
	evs, err := readEvents(*events)
	if err != nil {
		return err
	}
	p, err := pubsubapi.Dial(*to)
	if err != nil {
		return err
	}
	defer p.Close()
	start := time.Now()
	for i := range evs {
		if *rate > 0 {
			// Sleep only when 2ms ahead: short sleeps overshoot on a busy
			// machine and would hold the rate below the one asked for.
			if d := time.Until(start.Add(time.Duration(float64(i) / *rate * float64(time.Second)))); d > 2*time.Millisecond {
				time.Sleep(d)
			}
		}
		if err := p.Publish(&evs[i]); err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
	}
	fmt.Fprintf(stdout, "published %d events to %s\n", len(evs), *to)
	return nil
}

func readEvents(name string) ([]pubsub.Event, error) {
	var r io.Reader = os.Stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	evs, err := pubsub.ReadJSONEvents(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return evs, nil
}

// AppendMatchLine appends match's output line for event index i:
// {"event": i, "ports": [p, q]}.
func AppendMatchLine(dst []byte, i int, ports []uint32) []byte {
	dst = append(dst, `{"event": `...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	dst = append(dst, `, "ports": [`...)
	for k, p := range ports {
		if k > 0 {
			dst = append(dst, ", "...)
		}
		dst = strconv.AppendUint(dst, uint64(p), 10)
	}
	return append(dst, "]}\n"...)
}
