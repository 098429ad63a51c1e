package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/l3"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/rule"
)

// defaultSocket is gswitchd's default control socket (its --ctl-socket).
const defaultSocket = "/run/gswitchd.sock"

const showUsage = `Usage: gswitchctl show [--socket PATH] [--json] WHAT

Queries a running gswitchd over its control socket. WHAT is one of:
  ports    ports: link, OpenFlow config, receive/transmit counters
  tables   flow tables: entries, lookups, matches, search (lpm or the classifier),
           backend (cpu or device; an LPM-shaped table: its LPM images'), the
           path its lookups take (shared: the shared device batches; direct:
           each receive batch straight to the engine) and why (--backend auto:
           the classes or trie levels and the costs per key its calibration
           measured); then the receive batches by path
  flows    every flow entry, as ovs-ofctl dump-flows writes them
  groups   groups with their buckets and counters
  meters   meters with their bands and counters
  backend  the lookup backend: devices, keys on CPU and device, every engine
           table's backend and calibration
  stats    the switch's own counters and identity
  neighbours  the router's neighbour table (also: gswitchctl neighbours, neigh)
  l3       the router's counters: forwarded, drops by reason, frames it sent
  re       redundancy elimination on the WAN port: bytes in/out of the encoder,
           saved, references, raw sends, decode failures
  pubsub   content-based forwarding: event counters, deliveries per port, subscriptions

Flags (before or after WHAT):
`

var showWhats = []string{"ports", "tables", "flows", "groups", "meters", "backend", "stats", "neighbours", "l3", "re", "pubsub"}

// showArgs splits show's command line: flags may come before or after WHAT.
func showArgs(args []string, stderr io.Writer) (what, socket string, asJSON bool, err error) {
	fs := flag.NewFlagSet("show", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&socket, "socket", defaultSocket, "gswitchd's control socket")
	fs.BoolVar(&asJSON, "json", false, "print the daemon's JSON answer instead of a table")
	fs.Usage = func() {
		fmt.Fprint(stderr, showUsage)
		fs.PrintDefaults()
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return "", "", false, err
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		fs.Usage()
		return "", "", false, fmt.Errorf("%w: show needs exactly one of %s", errUsage, strings.Join(showWhats, ", "))
	}
	if !slices.Contains(showWhats, pos[0]) {
		return "", "", false, fmt.Errorf("%w: show %q: want one of %s", errUsage, pos[0], strings.Join(showWhats, ", "))
	}
	return pos[0], socket, asJSON, nil
}

// runShow queries the daemon and prints the answer.
func runShow(args []string, stdout, stderr io.Writer) error {
	what, socket, asJSON, err := showArgs(args, stderr)
	if err != nil {
		return err
	}
	c := ctl.NewClient(socket)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := query(ctx, c, what)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	if ts, ok := v.([]pipeline.TableInfo); ok {
		// The backend of each table comes from /v1/backend, the batches'
		// paths from /v1/stats.
		b, err := c.Backend(ctx)
		if err != nil {
			return err
		}
		st, err := c.Stats(ctx)
		if err != nil {
			return err
		}
		v = tablesView{ts, b.Tables, st.Batches}
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	printShow(tw, v)
	return tw.Flush()
}

func query(ctx context.Context, c *ctl.Client, what string) (any, error) {
	switch what {
	case "ports":
		return c.Ports(ctx)
	case "tables":
		return c.Tables(ctx)
	case "flows":
		return c.Flows(ctx)
	case "groups":
		return c.Groups(ctx)
	case "meters":
		return c.Meters(ctx)
	case "backend":
		return c.Backend(ctx)
	case "neighbours":
		return c.Neighbours(ctx)
	case "l3":
		return c.L3(ctx)
	case "re":
		return c.RE(ctx)
	case "pubsub":
		return c.PubSub(ctx)
	}
	return c.Stats(ctx)
}

func printShow(w io.Writer, v any) {
	switch v := v.(type) {
	case []pipeline.PortInfo:
		printPorts(w, v)
	case tablesView:
		printTables(w, v)
	case []pipeline.FlowInfo:
		printFlows(w, v)
	case []pipeline.GroupInfo:
		printGroups(w, v)
	case []pipeline.MeterInfo:
		printMeters(w, v)
	case gpu.EngineStats:
		printBackend(w, v)
	case ctl.Stats:
		printStats(w, v)
	case []l3.NeighInfo:
		printNeighbours(w, v)
	case l3.Counters:
		printL3(w, v)
	case ctl.REInfo:
		printRE(w, v)
	case ctl.PubSubInfo:
		printPubSub(w, v)
	}
}

func printPorts(w io.Writer, ps []pipeline.PortInfo) {
	fmt.Fprintln(w, "PORT\tNAME\tLINK\tCONFIG\tMAC\tRX_PKTS\tRX_BYTES\tRX_DROP\tTX_PKTS\tTX_BYTES\tTX_DROP\tRX_QUEUES")
	for _, p := range ps {
		link := "down"
		if p.Up {
			link = "up"
		}
		s := p.Stats
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", portNumber(p.Desc.No), p.Desc.Name, link, portConfig(p.Desc.Config),
			net.HardwareAddr(p.Desc.HWAddr[:]), s.RxPackets, s.RxBytes, s.RxDropped, s.TxPackets, s.TxBytes, s.TxDropped, max(p.RxQueues, 1))
	}
}

// portNumber writes a port number, LOCAL for the LOCAL port (as
// ovs-ofctl does).
func portNumber(no uint32) string {
	if no == rule.PortLocal {
		return "LOCAL"
	}
	return fmt.Sprint(no)
}

// portConfig names OpenFlow port config bits as ovs-ofctl does.
func portConfig(c uint32) string {
	var parts []string
	for _, x := range []struct {
		bit  uint32
		name string
	}{{1 << 0, "PORT_DOWN"}, {1 << 2, "NO_RECV"}, {1 << 5, "NO_FWD"}, {1 << 6, "NO_PACKET_IN"}} {
		if c&x.bit != 0 {
			parts = append(parts, x.name)
		}
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// tablesView is show tables' answer: the flow tables (/v1/tables), the
// backend of each engine table (/v1/backend) and the receive batches by
// path (/v1/stats).
type tablesView struct {
	tables   []pipeline.TableInfo
	backends []gpu.TableBackend
	batches  ctl.BatchPaths
}

func printTables(w io.Writer, v tablesView) {
	// The pipeline's flow table N is the engine's table N (the flow
	// tables' fixed id range, agent/tableids.go); an LPM-shaped table is
	// served by its LPM images (the agent marks them with the table's
	// number).
	byID := map[gpu.TableID]gpu.TableBackend{}
	images := map[uint32][]gpu.TableBackend{}
	for _, b := range v.backends {
		if b.Owner == "lpm-shaped flow tables" {
			images[b.OwnerTable] = append(images[b.OwnerTable], b)
			continue
		}
		byID[b.Table] = b
	}
	fmt.Fprintln(w, "TABLE\tACTIVE\tLOOKUPS\tMATCHED\tSEARCH\tBACKEND\tPATH\tWHY")
	for _, t := range v.tables {
		backend, path, why := "-", "-", "-"
		if imgs := images[uint32(t.ID)]; t.Search == "lpm" && len(imgs) > 0 {
			backend, path, why = lpmBackend(imgs)
		} else if b, ok := byID[gpu.TableID(t.ID)]; ok {
			backend, why = b.Backend, tableWhy(b, t.Search)
			if b.Path != "" {
				path = b.Path
			}
		}
		fmt.Fprintf(w, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", t.ID, t.Active, t.Lookups, t.Matched, tableSearch(&t), backend, path, why)
	}
	if b := v.batches; b.Direct+b.Shared > 0 {
		fmt.Fprintf(w, "receive batches: %d direct (in the port loop, lookups straight to the engine), %d shared (device tables' lookups in the shared device batches)\n", b.Direct, b.Shared)
	}
	if b := v.batches; b.Worker > 0 {
		fmt.Fprintf(w, "receive batches: %d run by datapath workers (--rx-workers: each worker's queues together, lookups straight to the engine)\n", b.Worker)
	}
}

// lpmBackend says what serves an LPM-shaped table: its images' backends
// (one per in_port group and family; "cpu+device" when they differ), the
// path of their lookups and the first image's reason, with its trie
// levels when a calibration counted them.
func lpmBackend(imgs []gpu.TableBackend) (backend, path, why string) {
	var names []string
	for _, b := range imgs {
		if !slices.Contains(names, b.Backend) {
			names = append(names, b.Backend)
		}
	}
	slices.Sort(names)
	b := imgs[0]
	path = b.Path
	if path == "" {
		path = "-"
	}
	why = b.Reason
	if b.Calibrations > 0 {
		unit := "levels"
		if b.Classes == 1 {
			unit = "level"
		}
		why = fmt.Sprintf("%s (%s image, %d trie %s)", why, b.Kind, b.Classes, unit)
	}
	if len(imgs) > 1 {
		why += fmt.Sprintf("; %d images", len(imgs))
	}
	return strings.Join(names, "+"), path, why
}

// tableWhy says why a table is on its backend, with its classes (linear
// search: slots) when a calibration counted them.
func tableWhy(b gpu.TableBackend, search string) string {
	if b.Calibrations == 0 {
		return b.Reason
	}
	unit := "class"
	if search == "linear" {
		unit = "slot"
	}
	if b.Classes != 1 {
		unit = map[string]string{"class": "classes", "slot": "slots"}[unit]
	}
	return fmt.Sprintf("%s (%d %s)", b.Reason, b.Classes, unit)
}

// tableSearch says how a table is searched: "lpm" while it is LPM-shaped,
// else the classifier's algorithm, with why a table holding prefix rules
// is not LPM-shaped.
func tableSearch(t *pipeline.TableInfo) string {
	if t.Search == "lpm" || t.LPM.Rules == 0 {
		return t.Search
	}
	return fmt.Sprintf("%s (not lpm: %d priority conflicts, %d other rules)", t.Search, t.LPM.Conflicts, t.LPM.Foreign)
}

// printFlows writes one line per entry, as ovs-ofctl dump-flows does.
func printFlows(w io.Writer, fs []pipeline.FlowInfo) {
	for _, f := range fs {
		var b strings.Builder
		fmt.Fprintf(&b, " cookie=%#x, duration=%.3fs, table=%d, n_packets=%d, n_bytes=%d, ", f.Cookie, f.Duration.Seconds(), f.Table, f.Packets, f.Bytes)
		if f.IdleTimeout != 0 {
			fmt.Fprintf(&b, "idle_timeout=%d, ", f.IdleTimeout)
		}
		if f.HardTimeout != 0 {
			fmt.Fprintf(&b, "hard_timeout=%d, ", f.HardTimeout)
		}
		fmt.Fprintf(&b, "priority=%d", f.Priority)
		if f.Match != "" && f.Match != "*" && f.Match != "any" {
			b.WriteString("," + f.Match)
		}
		b.WriteString(" actions=" + f.Instructions)
		fmt.Fprintln(w, b.String())
	}
}

func printGroups(w io.Writer, gs []pipeline.GroupInfo) {
	for _, g := range gs {
		fmt.Fprintf(w, " group_id=%d, type=%s, ref_count=%d, packet_count=%d, byte_count=%d, duration=%.3fs\n",
			g.ID, g.Type, g.RefCount, g.Packets, g.Bytes, g.Duration.Seconds())
		for i, b := range g.Buckets {
			fmt.Fprintf(w, "   bucket %d: weight=%d", i, b.Weight)
			if b.WatchPort != 0xffffffff {
				fmt.Fprintf(w, ", watch_port=%d", b.WatchPort)
			}
			if b.WatchGroup != 0xffffffff {
				fmt.Fprintf(w, ", watch_group=%d", b.WatchGroup)
			}
			fmt.Fprintf(w, ", actions=%s, packet_count=%d, byte_count=%d\n", b.Actions, b.Packets, b.Bytes)
		}
	}
}

func printMeters(w io.Writer, ms []pipeline.MeterInfo) {
	for _, m := range ms {
		fmt.Fprintf(w, " meter=%d %s flow_count=%d packet_in_count=%d byte_in_count=%d duration=%.3fs\n",
			m.ID, m.Flags, m.FlowCount, m.PacketsIn, m.BytesIn, m.Duration.Seconds())
		for i, b := range m.Bands {
			fmt.Fprintf(w, "   band %d: type=%s rate=%d burst_size=%d", i, b.Type, b.Rate, b.BurstSize)
			if b.Type == "dscp_remark" {
				fmt.Fprintf(w, " prec_level=%d", b.PrecLevel)
			}
			fmt.Fprintf(w, " packet_count=%d byte_count=%d\n", b.Packets, b.Bytes)
		}
	}
}

func printBackend(w io.Writer, b gpu.EngineStats) {
	fmt.Fprintf(w, "keys on CPU:\t%d\n", b.KeysOnCPU)
	fmt.Fprintf(w, "keys on device:\t%d\n", b.KeysOnDevice)
	fmt.Fprintf(w, "device fallbacks:\t%d\n", b.Fallbacks)
	fmt.Fprintf(w, "min batch for a device:\t%d\n", b.MinBatch)
	if len(b.Devices) == 0 {
		fmt.Fprintln(w, "devices:\tnone (CPU only)")
	} else {
		fmt.Fprintln(w, "\nDEVICE\tNAME\tSTATE\tKEYS\tCPU_ONLY_TABLES\tERROR")
		for _, d := range b.Devices {
			state := "up"
			if !d.Up {
				state = "failed"
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%v\t%s\n", d.Device, d.Name, state, d.Keys, d.CPUOnly, d.Err)
		}
	}
	if len(b.Tables) == 0 {
		return
	}
	fmt.Fprintln(w, "\nENGINE_TABLE\tKIND\tBACKEND\tCLASSES\tCPU_NS/KEY\tDEVICE_NS/KEY\tBATCH\tWHY")
	for _, t := range b.Tables {
		cost := func(x float64) string {
			if x <= 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f", x)
		}
		classes, batch := "-", "-"
		if t.Calibrations > 0 {
			classes, batch = fmt.Sprint(t.Classes), fmt.Sprint(t.Batch)
			switch {
			case t.DeviceFrom > 0 && t.TrafficCPUNsPerKey > 0:
				batch += fmt.Sprintf(" (device from %d; the traffic's CPU %.0f ns/key)", t.DeviceFrom, t.TrafficCPUNsPerKey)
			case t.DeviceFrom > 0:
				batch += fmt.Sprintf(" (device from %d)", t.DeviceFrom)
			}
		}
		fmt.Fprintf(w, "%#x\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", uint32(t.Table), t.Kind, t.Backend, classes, cost(t.CPUNsPerKey), cost(t.DeviceNsPerKey), batch, t.Reason)
	}
}

func printStats(w io.Writer, s ctl.Stats) {
	c := s.Counters
	fmt.Fprintf(w, "datapath id:\t%#016x\n", s.DatapathID)
	fmt.Fprintf(w, "uptime:\t%s\n", s.Uptime.Round(time.Second))
	fmt.Fprintf(w, "backend:\t%s\n", s.Backend)
	fmt.Fprintf(w, "controller connections:\t%d\n", s.Controller)
	fmt.Fprintf(w, "packet-ins rate-limited:\t%d\n", s.PacketInsLimited)
	fmt.Fprintf(w, "connections dropped (peer not reading):\t%d\n", s.OutputDrops)
	fmt.Fprintf(w, "fail mode:\t%s (standalone now: %v)\n", c.FailMode, c.Standalone)
	fmt.Fprintf(w, "learned MACs:\t%d\n", c.Learned)
	fmt.Fprintf(w, "table-miss drops:\t%d\n", c.MissDrops)
	fmt.Fprintf(w, "no-route drops:\t%d\n", c.NoRoute)
	fmt.Fprintf(w, "unsupported actions:\t%d\n", c.Unsupported)
	fmt.Fprintf(w, "group drops (no live bucket):\t%d\n", c.GroupDrops)
	fmt.Fprintf(w, "meter drops:\t%d\n", c.MeterDrops)
	var total uint64
	var by []string
	for _, r := range slices.Sorted(maps.Keys(c.Malformed)) {
		if n := c.Malformed[r]; n > 0 {
			total += n
			by = append(by, fmt.Sprintf("%s: %d", r, n))
		}
	}
	fmt.Fprintf(w, "malformed frames:\t%d", total)
	if len(by) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(by, ", "))
	}
	fmt.Fprintln(w)
}
