package forward

// The "plain" target of bench forward: the floor under any switch built on
// this datapath. It is the forwarder the reference figure
// describes (a Go program with a TPACKET_V3 receive ring and batched
// sends), made of the same afpacket ports gswitchd uses, but with no
// tables and no parsing: each frame read from port 2k+1 is sent on port
// 2k+2 straight from the ring, but for a frame whose VLAN tag the kernel
// removed on receive (Linux always does): that one is copied with its tag
// put back, as gswitchd does, so that it leaves as it came (--tags as-read
// sends it untagged, as this forwarder did before 2026-11-27: less work
// than forwarding it, 80% of the frames of the 131,072-rule set being
// tagged). Measured in the same run as gswitchd, it says how much of
// gswitchd's figure is the kernel's and the machine's, and how much is the
// switch's own work.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/internal/diag"
	"github.com/gswitch/gswitch/internal/prom"
)

// PlainForwarderArgs are the arguments with which the plain target
// re-executes the running program (os.Executable) in the switch namespace
// to run RunPlainForwarder there: gswitchctl's "bench plain-forwarder". A
// program other than gswitchctl that runs the plain target must hand these
// arguments, and the flags after them, to RunPlainForwarder.
var PlainForwarderArgs = []string{"bench", "plain-forwarder"}

// plainReady is the line the plain forwarder prints once its ports are open.
const plainReady = "plain forwarder: ready"

// RunPlainForwarder runs the plain forwarder in the calling namespace
// until ctx ends, SIGTERM or SIGINT ("gswitchctl bench plain-forwarder"; bench
// forward starts it in its switch namespace). It prints each port's ring
// counters when it stops.
func RunPlainForwarder(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench plain-forwarder", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pairs := fs.Int("pairs", 1, "port pairs: frames from p<2k+1> go out of p<2k+2>, k < `N`")
	batch := fs.Int("batch-size", 256, "frames per send at most (gswitchd's default batch)")
	maxDelay := fs.Duration("max-delay", 50*time.Microsecond, "the ring's block timeout is this, rounded up to 1 ms (as gswitchd's)")
	ringName := fs.String("rx-ring", "block", "receive ring: `block` (TPACKET_V3, a block handed over when full or at its timeout) or frame (TPACKET_V2, each frame as soon as it is written), as gswitchd's --rx-ring")
	tags := fs.String("tags", "restore", "a frame whose VLAN tag the kernel removed on receive (Linux always does) is sent with the tag put back (`restore`, a copy of the frame, as gswitchd does) or as the ring holds it, untagged (as-read: not a correct forwarder of tagged frames; the floor before 2026-11-27)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile (runtime/pprof) of the whole run to `FILE` (as gswitchd's --cpuprofile), complete once the forwarder exits")
	metrics := fs.String("metrics", "", "serve the per-frame latency (kernel receive timestamp to the end of the frame's send) as gswitch_frame_latency_seconds on http://`ADDR`/metrics, as gswitchd's --metrics does; empty: none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ring, err := afpacket.ParseRingMode(*ringName)
	if *pairs < 1 || *batch < 1 || fs.NArg() > 0 || err != nil || *tags != "restore" && *tags != "as-read" {
		return fmt.Errorf("%w: bench plain-forwarder [--pairs N] [--batch-size N] [--max-delay D] [--rx-ring block|frame] [--tags restore|as-read] [--metrics ADDR] [--cpuprofile FILE]", benchutil.ErrUsage)
	}
	stopProfile, err := diag.StartCPUProfile(*cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	restore := *tags == "restore"
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var ports []*afpacket.Port
	defer func() {
		for _, p := range ports {
			p.Close()
		}
	}()
	for i := 1; i <= 2**pairs; i++ {
		p, err := afpacket.Open(fmt.Sprintf("p%d", i), afpacket.Config{Promiscuous: true, Ring: ring,
			BlockTimeout: max(maxDelay.Round(time.Millisecond), time.Millisecond)})
		if err != nil {
			return err
		}
		ports = append(ports, p)
	}
	lat := make([]*pipeline.LatencyHistogram, *pairs)
	for k := range lat {
		lat[k] = new(pipeline.LatencyHistogram)
	}
	if *metrics != "" {
		srv, err := serveLatency(*metrics, lat)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	fmt.Fprintln(stdout, plainReady)
	var wg sync.WaitGroup
	errs := make([]error, *pairs)
	for k := range *pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = plainForward(ports[2*k], ports[2*k+1], *batch, restore, lat[k])
		}()
	}
	<-ctx.Done()
	for i, p := range ports { // before Close: the ring counters are the sockets'
		st, _ := p.Stats()
		fmt.Fprintf(stdout, "plain forwarder: p%d rx %d ring-drops %d tx %d tx-errors %d\n", i+1, st.RxPackets, st.RingDrops, st.TxPackets, st.TxErrors)
	}
	for _, p := range ports {
		p.Close() // wakes the readers
	}
	wg.Wait()
	return errors.Join(errs...)
}

// plainForward sends every frame read from in on out, in sends of at most
// batch frames, until in is closed, and records each frame's latency in
// lat when its send returns. A frame is sent from the ring, or, when the
// kernel removed its VLAN tag and restore is set, from a copy with the tag
// put back (the copies in an arena reused send after send).
func plainForward(in, out *afpacket.Port, batch int, restore bool, lat *pipeline.LatencyHistogram) error {
	var f afpacket.Frame
	frames := make([][]byte, 0, batch)
	rxAt := make([]int64, 0, batch)
	var arena []byte
	send := func() {
		out.Send(frames)
		lat.Observe(rxAt, time.Now())
		frames, rxAt, arena = frames[:0], rxAt[:0], arena[:0]
	}
	for {
		b, err := in.ReadBlock(100 * time.Millisecond)
		if err != nil {
			if errors.Is(err, afpacket.ErrClosed) {
				return nil
			}
			return err
		}
		if b == nil {
			continue
		}
		for b.Next(&f) {
			if restore && f.Tagged {
				// An arena that grows leaves the frames already in it where
				// they are (the old array stays theirs until the send).
				start := len(arena)
				arena = f.AppendWire(arena)
				frames = append(frames, arena[start:len(arena):len(arena)])
			} else {
				frames = append(frames, f.Data)
			}
			var t int64
			if !f.Time.IsZero() {
				t = f.Time.UnixNano()
			}
			rxAt = append(rxAt, t)
			if len(frames) == batch {
				send()
			}
		}
		if len(frames) > 0 {
			send()
		}
		b.Release() // frames' stale slices point into the mapped ring, which the GC does not own
	}
}

// serveLatency serves lat's sum as gswitch_frame_latency_seconds on
// http://addr/metrics (bench forward reads it as it reads gswitchd's).
func serveLatency(addr string, lat []*pipeline.LatencyHistogram) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("plain forwarder: --metrics: %w", err)
	}
	c := pipeline.LatencyCollector(lat...)
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		if err := prom.WriteText(w, c); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	return srv, nil
}

// runPlain measures the plain forwarder: one series, without rules.
func (e *fwdEnv) runPlain() ([]Step, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("plain: finding the running program's binary: %w", err)
	}
	args := append(e.tasksetArgs(), self)
	args = append(args, PlainForwarderArgs...)
	port := 16000 + rand.IntN(20000)
	args = append(args, "--pairs", fmt.Sprint(len(e.pairs)), "--max-delay", e.f.maxDelay,
		"--rx-ring", e.swRing, "--metrics", fmt.Sprintf("127.0.0.1:%d", port))
	if e.f.batchSize > 0 {
		args = append(args, "--batch-size", fmt.Sprint(e.f.batchSize))
	}
	args = append(args, strings.Fields(e.f.plainFlags)...)
	d, err := e.start(e.sw, "plain", args...)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err := d.exited(); err != nil {
			return nil, fmt.Errorf("plain: %w", err)
		}
		if b, _ := os.ReadFile(d.log); strings.Contains(string(b), plainReady) {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("plain: the forwarder did not open its ports in 10 s (log %s)", d.log)
		}
	}
	e.swPid, e.metricsAddr = d.cmd.Process.Pid, fmt.Sprintf("127.0.0.1:%d", port)
	defer func() { e.swPid, e.metricsAddr = 0, "" }()
	steps, err := e.series(e.swTarget, "", 0)
	if err == nil {
		err = d.exited()
	}
	d.stop()
	if b, _ := os.ReadFile(d.log); len(b) > 0 {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if strings.HasPrefix(l, "plain forwarder: p") {
				fmt.Fprintln(e.log, "bench forward:", l)
			}
		}
	}
	return steps, err
}
