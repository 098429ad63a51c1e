package p4rt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gswitch/gswitch/agent"
	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/controlproto/p4rt"
	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/pipeline"
)

// Result is one figure of bench p4rt, one JSON object with --json.
type Result struct {
	Work    string `json:"work"`    // p4rt
	Measure string `json:"measure"` // write_rate | visible_latency
	Table   string `json:"table"`   // acl | ipv4_lpm
	Backend string `json:"backend"`
	Search  string `json:"search"` // how the pipeline serves the table (tuple, lpm, ...)

	Batch         int     `json:"batch,omitempty"`   // updates per WriteRequest
	Entries       int     `json:"entries,omitempty"` // entries written (and deleted)
	InsertsPerSec float64 `json:"inserts_per_sec,omitempty"`
	DeletesPerSec float64 `json:"deletes_per_sec,omitempty"`
	Samples       int     `json:"samples,omitempty"`
	WriteP50us    float64 `json:"write_p50_us,omitempty"`   // Write RPC of one insert
	VisibleP50us  float64 `json:"visible_p50_us,omitempty"` // Write sent -> the datapath forwards by the entry
	VisibleP99us  float64 `json:"visible_p99_us,omitempty"`
	VisibleMaxus  float64 `json:"visible_max_us,omitempty"`
	Background    int     `json:"background_entries,omitempty"` // entries in the table during the latency samples
	Machine       string  `json:"machine"`
	GPU           string  `json:"gpu"`
	GoVersion     string  `json:"go"`
	Time          string  `json:"time"`
	Notes         string  `json:"notes,omitempty"`
}

// Run runs "gswitchctl bench p4rt" with the command-line arguments args
// (the flags after "bench p4rt"), the results to stdout, the flags' usage
// to stderr; its errors wrap benchutil.ErrUsage for a bad command line.
// It measures the P4Runtime server against a pipeline switch: the
// rate of table entries written over gRPC (127.0.0.1 TCP) in batches, and
// the time from sending a Write to the datapath forwarding a packet by the
// new entry (sw.Process on a fake port, the same code path as frames from
// an AF_PACKET ring).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench p4rt", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c benchutil.CommonFlags
	c.Register(fs, 1)
	entries := fs.Int("entries", 10000, "entries written per batch size (inserted, then deleted)")
	batches := fs.String("batches", "1,100,10000", "updates per WriteRequest: comma-separated sizes")
	samples := fs.Int("samples", 300, "write-to-visible latency samples per table")
	tables := fs.String("tables", "acl,ipv4_lpm", "tables to measure: acl, ipv4_lpm")
	if err := benchutil.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	var sizes []int
	for _, f := range strings.Split(*batches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%w: --batches %q: want comma-separated sizes >= 1", benchutil.ErrUsage, *batches)
		}
		sizes = append(sizes, n)
	}
	if *entries < 1 || *entries > 60000 || *samples < 1 {
		return fmt.Errorf("%w: --entries must be 1..60000 and --samples at least 1", benchutil.ErrUsage)
	}
	var tabs []string
	for _, t := range strings.Split(*tables, ",") {
		if t != "acl" && t != "ipv4_lpm" {
			return fmt.Errorf("%w: --tables %q: want acl and/or ipv4_lpm", benchutil.ErrUsage, *tables)
		}
		tabs = append(tabs, t)
	}
	b, err := newP4Bench(ctx, &c)
	if err != nil {
		return err
	}
	defer b.close()
	var out []Result
	for _, tab := range tabs {
		for _, n := range sizes {
			r, err := b.writeRate(tab, *entries, n)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		r, err := b.visible(tab, *samples)
		if err != nil {
			return err
		}
		out = append(out, r)
	}
	for _, r := range out {
		if c.JSON {
			if err := json.NewEncoder(stdout).Encode(r); err != nil {
				return err
			}
			continue
		}
		if r.Measure == "write_rate" {
			fmt.Fprintf(stdout, "p4rt %-8s %-9s batch %6d: %9.0f inserts/s %9.0f deletes/s (%d entries, %s search)\n",
				r.Backend, r.Table, r.Batch, r.InsertsPerSec, r.DeletesPerSec, r.Entries, r.Search)
		} else {
			fmt.Fprintf(stdout, "p4rt %-8s %-9s write-to-visible: p50 %.0f µs p99 %.0f µs max %.0f µs (Write RPC p50 %.0f µs; %d samples over %d entries, %s search)\n",
				r.Backend, r.Table, r.VisibleP50us, r.VisibleP99us, r.VisibleMaxus, r.WriteP50us, r.Samples, r.Background, r.Search)
		}
	}
	return nil
}

// p4Bench is a pipeline switch with two fake ports, its P4Runtime server
// on 127.0.0.1 and a client that is primary with the pipeline committed.
type p4Bench struct {
	ctx   context.Context // the run's: ends the server and the client's calls
	c     *benchutil.CommonFlags
	agent *agent.Agent
	dir   string // the agent's control socket's folder
	sw    *pipeline.Switch
	out   *countDev
	conn  *grpc.ClientConn
	cl    p4v1.P4RuntimeClient
	stop  func()
	gpu   string
}

// countDev is a port that counts what the switch sends out of it.
type countDev struct {
	mu sync.Mutex
	n  int
}

func (d *countDev) Send(frames [][]byte) (int, error) {
	d.mu.Lock()
	d.n += len(frames)
	d.mu.Unlock()
	return len(frames), nil
}
func (d *countDev) Link() afpacket.LinkInfo {
	return afpacket.LinkInfo{Name: "bench", AdminUp: true, OperUp: true, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}}
}
func (d *countDev) Stats() (afpacket.Stats, error) { return afpacket.Stats{}, nil }
func (d *countDev) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

func newP4Bench(ctx context.Context, c *benchutil.CommonFlags) (*p4Bench, error) {
	b := &p4Bench{c: c, gpu: "none", out: &countDev{}}
	// The same graph as gswitchd (agent.New): engine, pipeline, P4Runtime
	// server and its guard, on two fake ports instead of interfaces.
	cfg := agent.DefaultConfig()
	cfg.Tables = p4rt.NumPipelineTables
	cfg.Backend = "cpu"
	if c.Backend == "gpu" {
		ords, err := c.Ordinals()
		if err != nil {
			return nil, err
		}
		cfg.Backend, cfg.GPUs, cfg.MinBatch = "gpu", ords, c.MinBatch
	}
	dir, err := os.MkdirTemp("", "gswitch-bench-p4rt-")
	if err != nil {
		return nil, err
	}
	b.dir = dir
	cfg.Ports, cfg.Listen, cfg.Controllers, cfg.Metrics = nil, nil, nil, ""
	cfg.CtlSocket = filepath.Join(dir, "ctl.sock")
	cfg.P4RT.Listen = "127.0.0.1:0"
	a, err := agent.NewWithDevices(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)),
		map[uint32]pipeline.Device{1: &countDev{}, 2: b.out})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	b.agent, b.sw = a, a.Switch()
	if c.Backend == "gpu" {
		b.gpu = a.Engine().Device()
		if s, ok := any(a.Engine()).(interface{ SetStreams(n, chunk int) error }); ok {
			if err := s.SetStreams(c.Streams, c.Chunk); err != nil {
				b.close()
				return nil, err
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	b.ctx = ctx
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	b.stop = func() { cancel(); <-done }
	addr := a.P4RTAddr()
	if addr == nil {
		b.close()
		return nil, fmt.Errorf("bench p4rt: the agent's P4Runtime server did not start")
	}
	if b.conn, err = grpc.Dial(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(256<<20), grpc.MaxCallRecvMsgSize(256<<20))); err != nil {
		b.close()
		return nil, err
	}
	b.cl = p4v1.NewP4RuntimeClient(b.conn)
	s, err := b.cl.StreamChannel(ctx)
	if err != nil {
		b.close()
		return nil, err
	}
	if err := s.Send(&p4v1.StreamMessageRequest{Update: &p4v1.StreamMessageRequest_Arbitration{Arbitration: &p4v1.MasterArbitrationUpdate{
		DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}}}}); err != nil {
		b.close()
		return nil, err
	}
	if m, err := s.Recv(); err != nil || m.GetArbitration().GetStatus().GetCode() != 0 {
		b.close()
		return nil, fmt.Errorf("bench p4rt: arbitration: %v %v", m, err)
	}
	if _, err := b.cl.SetForwardingPipelineConfig(ctx, &p4v1.SetForwardingPipelineConfigRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1},
		Action: p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT, Config: &p4v1.ForwardingPipelineConfig{P4Info: p4rt.P4Info()}}); err != nil {
		b.close()
		return nil, err
	}
	return b, nil
}

func (b *p4Bench) close() {
	if b.conn != nil {
		b.conn.Close()
	}
	if b.stop != nil {
		b.stop()
	} else if b.agent != nil {
		b.agent.Close()
	}
	if b.dir != "" {
		os.RemoveAll(b.dir)
	}
}

// entry returns the i-th entry of a table: ACL entries match one UDP
// source address (10.128.0.0 + i) and forward to port 2, one flow entry
// each; LPM entries are /32 routes to 10.64.0.0 + i.
func p4entry(table string, i int, typ p4v1.Update_Type) *p4v1.Update {
	addr := func(base uint32) []byte { return binary.BigEndian.AppendUint32(nil, base+uint32(i)) }
	fwd := &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: p4rt.ActionForward,
		Params: []*p4v1.Action_Param{{ParamId: 1, Value: []byte{2}}}}}}
	var te *p4v1.TableEntry
	if table == "acl" {
		te = &p4v1.TableEntry{TableId: p4rt.TableACL, Priority: 10, Action: fwd, Match: []*p4v1.FieldMatch{
			{FieldId: 5, FieldMatchType: &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: addr(0x0a800000), Mask: []byte{255, 255, 255, 255}}}},
			{FieldId: 7, FieldMatchType: &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: []byte{17}, Mask: []byte{255}}}},
		}}
	} else {
		te = &p4v1.TableEntry{TableId: p4rt.TableIPv4, Action: fwd, Match: []*p4v1.FieldMatch{
			{FieldId: 1, FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: addr(0x0a400000), PrefixLen: 32}}}}}
	}
	return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: te}}}
}

// frame is a UDP packet the i-th entry of table forwards.
func p4frame(table string, i int) []byte {
	f := make([]byte, 14+20+8+18)
	copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0})
	ip := f[14:]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(len(f)-14))
	src, dst := uint32(0x0a000001), uint32(0x0a000002)
	if table == "acl" {
		src = 0x0a800000 + uint32(i)
	} else {
		dst = 0x0a400000 + uint32(i)
	}
	binary.BigEndian.PutUint32(ip[12:], src)
	binary.BigEndian.PutUint32(ip[16:], dst)
	var sum uint32
	for j := 0; j < 20; j += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[j:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	binary.BigEndian.PutUint16(ip[20:], 1000)
	binary.BigEndian.PutUint16(ip[22:], 2000)
	binary.BigEndian.PutUint16(ip[24:], 8+18)
	return f
}

func (b *p4Bench) write(ups []*p4v1.Update) error {
	_, err := b.cl.Write(b.ctx, &p4v1.WriteRequest{DeviceId: 1, ElectionId: &p4v1.Uint128{Low: 1}, Updates: ups})
	return err
}

// writeAll writes n entries of typ in batches of size batch and returns
// the rate.
func (b *p4Bench) writeAll(table string, n, batch int, typ p4v1.Update_Type) (float64, error) {
	ups := make([]*p4v1.Update, n)
	for i := range ups {
		ups[i] = p4entry(table, i, typ)
	}
	start := time.Now()
	for i := 0; i < n; i += batch {
		if err := b.write(ups[i:min(i+batch, n)]); err != nil {
			return 0, fmt.Errorf("bench p4rt: %s %s batch at %d: %w", table, typ, i, err)
		}
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func (b *p4Bench) result(table, measure string) Result {
	search := "?"
	for _, ti := range b.sw.TableInfos() {
		if (table == "acl" && ti.ID == 3) || (table == "ipv4_lpm" && ti.ID == 1) {
			search = ti.Search
		}
	}
	return Result{Work: "p4rt", Measure: measure, Table: table, Backend: b.c.Backend, Search: search,
		Machine: benchutil.Machine(), GPU: b.gpu, GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)}
}

func (b *p4Bench) writeRate(table string, n, batch int) (Result, error) {
	r := b.result(table, "write_rate")
	r.Batch, r.Entries = batch, n
	var err error
	if r.InsertsPerSec, err = b.writeAll(table, n, batch, p4v1.Update_INSERT); err != nil {
		return r, err
	}
	r.Search = b.result(table, "").Search
	if r.DeletesPerSec, err = b.writeAll(table, n, batch, p4v1.Update_DELETE); err != nil {
		return r, err
	}
	return r, nil
}

// visible inserts samples entries one at a time over a table of 1000
// entries and measures, for each, the time from sending the Write to the
// first sw.Process of a matching frame that forwards it to port 2
// (frames are processed back to back from the moment the Write is sent).
func (b *p4Bench) visible(table string, samples int) (Result, error) {
	r := b.result(table, "visible_latency")
	const background = 1000
	bg := make([]*p4v1.Update, background)
	for i := range bg {
		bg[i] = p4entry(table, 100000+i, p4v1.Update_INSERT)
	}
	if err := b.write(bg); err != nil {
		return r, err
	}
	var vis, wr []float64
	for s := range samples {
		f := [][]byte{p4frame(table, s)}
		before := b.out.count()
		done := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			err := b.write([]*p4v1.Update{p4entry(table, s, p4v1.Update_INSERT)})
			if err != nil {
				done <- -1
				return
			}
			done <- time.Since(start)
		}()
		got := false
		for deadline := start.Add(5 * time.Second); time.Now().Before(deadline); {
			b.sw.Process(1, f)
			if b.out.count() > before {
				vis = append(vis, float64(time.Since(start).Nanoseconds())/1e3)
				got = true
				break
			}
		}
		w := <-done
		if !got || w < 0 {
			return r, fmt.Errorf("bench p4rt: %s sample %d: the entry did not become visible within 5 s", table, s)
		}
		wr = append(wr, float64(w.Nanoseconds())/1e3)
	}
	r.Search = b.result(table, "").Search
	slices.Sort(vis)
	slices.Sort(wr)
	pct := func(xs []float64, p float64) float64 { return xs[min(len(xs)-1, int(p*float64(len(xs))))] }
	r.Samples, r.Background = samples, background
	r.VisibleP50us, r.VisibleP99us, r.VisibleMaxus = pct(vis, 0.5), pct(vis, 0.99), vis[len(vis)-1]
	r.WriteP50us = pct(wr, 0.5)
	// Clean up for the next table.
	var del []*p4v1.Update
	for s := range samples {
		del = append(del, p4entry(table, s, p4v1.Update_DELETE))
	}
	for i := range background {
		del = append(del, p4entry(table, 100000+i, p4v1.Update_DELETE))
	}
	return r, b.write(del)
}
