package integration

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/agent/ctl"
)

// soakDuration is how long TestFxSoak runs: GSWITCH_SOAK (a Go duration,
// `make soak` sets it, default 1h there); with it unset, 3 minutes when
// CI=true (the CI version) and skipped otherwise.
func soakDuration(t *testing.T) time.Duration {
	t.Helper()
	if s := os.Getenv("GSWITCH_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("GSWITCH_SOAK=%q: want a duration such as 1h or 3m", s)
		}
		return d
	}
	if os.Getenv("CI") == "true" {
		return 3 * time.Minute
	}
	t.Skip("soak: set GSWITCH_SOAK=DURATION (make soak SOAK=1h), or CI=true for the 3-minute version")
	return 0
}

// soakSample is one reading of gswitchd's metrics page.
type soakSample struct {
	at         time.Duration // since the start
	rss        float64       // process_resident_memory_bytes
	goroutines float64       // go_goroutines
	start      float64       // process_start_time_seconds
}

// scrapeMetrics reads the named families' values (unlabelled) from a
// Prometheus text page.
func scrapeMetrics(hc *http.Client, url string, names ...string) (map[string]float64, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && want[f[0]] {
			v, err := strconv.ParseFloat(f[1], 64)
			if err == nil {
				out[f[0]] = v
			}
		}
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("metrics page has no %s", n)
		}
	}
	return out, sc.Err()
}

// TestFxSoak runs gswitchd (built from this tree) for soakDuration under
// flow churn (FLOW_MOD add and delete over a real OpenFlow connection),
// route churn (the kernel routing table gswitchd mirrors, in its
// namespace) and steady traffic over veth pairs, and fails if
//
//   - its resident memory or goroutine count grows beyond a tolerance
//     after the warm-up (RSS: 25% or 32 MiB over the warm-up's median,
//     whichever is larger; goroutines: 16 more),
//   - a lookup check disagrees with the reference (what the test
//     installed): a frame to a churned flow's address is dropped while the
//     drop rule is in and forwarded by the base flow while it is out; a
//     datagram to a churned route's prefix arrives while the route is in
//     and does not while it is out; steady traffic keeps arriving,
//   - or the process restarts (exits, a new start time, a second
//     connection to the controller).
//
// Ports 1 and 2 are switch ports (flows: in_port 1 <-> 2, plus the churned
// drop rules on eth_dst 0a:00:00:00:xx:xx), ports 3 and 4 router ports
// (table 100, the kernel FIB mirror of that table, 203.0.113.0/24 a
// steady route and 198.18.k.0/24 the churned ones, both via host 4).
func TestFxSoak(t *testing.T) {
	dur := soakDuration(t)
	tp := fxTopo(t, "s", 4)
	for i := 3; i <= 4; i++ {
		h := tp.hosts[i-1]
		sh(t, "ip", "-n", h, "addr", "flush", "dev", "eth0")
		sh(t, "ip", "-n", h, "addr", "add", fmt.Sprintf("10.0.%d.2/24", i), "dev", "eth0")
		sh(t, "ip", "-n", h, "route", "add", "default", "via", fmt.Sprintf("10.0.%d.1", i))
	}
	sh(t, "ip", "-n", tp.hosts[3], "addr", "add", "203.0.113.1/24", "dev", "lo")
	sh(t, "ip", "-n", tp.hosts[3], "addr", "add", "198.18.0.1/16", "dev", "lo")
	sh(t, "ip", "-n", tp.sw, "route", "add", "203.0.113.0/24", "via", "10.0.4.2", "dev", "swp4", "onlink", "table", "100")

	c := fxListen(t, tp.sw, fxPort())
	ctlPath := fxCtlPath(t)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", fxPort()+5000)
	start := time.Now()
	p := fxStart(t, tp, ctlPath, "--controller", c.target(), "--fail-mode", "secure", "--metrics", metricsAddr,
		"--router-port", "3=10.0.3.1/24,table=100", "--router-port", "4=10.0.4.1/24,table=100", "--kernel-fib-table", "100",
		"--max-flows", "4096")
	if !c.waitConnected(start, 10*time.Second) {
		t.Fatal("gswitchd did not connect to the controller")
	}
	crossFlows(c)
	if !c.barrier(5 * time.Second) {
		t.Fatal("no barrier reply")
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, a string) (net.Conn, error) {
		return nsDialer(tp.sw)(ctx, a)
	}}, Timeout: 5 * time.Second}
	metricsURL := "http://" + metricsAddr + "/metrics"
	cl := ctl.NewClient(ctlPath)
	defer cl.Close()

	// Receivers: host 2's raw socket (switch traffic, by sequence number
	// in a test EtherType) and host 4's UDP socket (routed traffic).
	const soakEthType = 0x88b6
	var (
		seenMu   sync.Mutex
		seenL2   = map[uint64]bool{}
		seenL3   = map[uint64]bool{}
		steadyL2 atomic.Uint64
		steadyL3 atomic.Uint64
	)
	rx2 := rxqSocket(t, tp.hosts[1])
	udp4 := udpIn(t, tp.hosts[3], "0.0.0.0:7777")
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(2)
	go func() {
		defer bg.Done()
		buf := make([]byte, 2048)
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, from, err := unix.Recvfrom(rx2, buf, 0)
			if err != nil || n < 14+9 {
				continue
			}
			if sll, ok := from.(*unix.SockaddrLinklayer); ok && sll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			if binary.BigEndian.Uint16(buf[12:]) != soakEthType {
				continue
			}
			seq := binary.BigEndian.Uint64(buf[15:])
			if buf[14] == 's' {
				steadyL2.Add(1)
				continue
			}
			seenMu.Lock()
			seenL2[seq] = true
			seenMu.Unlock()
		}
	}()
	go func() {
		defer bg.Done()
		buf := make([]byte, 2048)
		for {
			udp4.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			n, _, err := udp4.ReadFromUDP(buf)
			select {
			case <-stop:
				return
			default:
			}
			if err != nil || n < 9 {
				continue
			}
			seq := binary.BigEndian.Uint64(buf[1:])
			if buf[0] == 's' {
				steadyL3.Add(1)
				continue
			}
			seenMu.Lock()
			seenL3[seq] = true
			seenMu.Unlock()
		}
	}()
	defer func() { close(stop); bg.Wait() }()

	// Senders: host 1's raw socket and host 3's UDP socket.
	tx1 := rxqSocket(t, tp.hosts[0])
	udp3 := udpIn(t, tp.hosts[2], "0.0.0.0:0")
	h2MAC := net.HardwareAddr{2, 0, 0, 0, 0, 2}
	h1MAC := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	l2Frame := func(dst net.HardwareAddr, kind byte, seq uint64) []byte {
		f := make([]byte, 64)
		copy(f, dst)
		copy(f[6:], h1MAC)
		binary.BigEndian.PutUint16(f[12:], soakEthType)
		f[14] = kind
		binary.BigEndian.PutUint64(f[15:], seq)
		return f
	}
	l3Payload := func(kind byte, seq uint64) []byte {
		b := make([]byte, 32)
		b[0] = kind
		binary.BigEndian.PutUint64(b[1:], seq)
		return b
	}
	var steadySentL2, steadySentL3 atomic.Uint64
	bg.Add(1)
	go func() { // steady traffic: 200 frames/s each way it goes
		defer bg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		dst := &net.UDPAddr{IP: net.ParseIP("203.0.113.1"), Port: 7777}
		for seq := uint64(0); ; seq++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := unix.Write(tx1, l2Frame(h2MAC, 's', seq)); err == nil {
				steadySentL2.Add(1)
			}
			if _, err := udp3.WriteToUDP(l3Payload('s', seq), dst); err == nil {
				steadySentL3.Add(1)
			}
		}
	}()

	var (
		failures []string
		probeSeq uint64
	)
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf("%v: ", time.Since(start).Round(time.Second)) + fmt.Sprintf(format, args...)
		if len(failures) < 20 {
			t.Log(msg)
		}
		failures = append(failures, msg)
	}
	// probeL2 sends a frame to dst and reports whether host 2 got it.
	probeL2 := func(dst net.HardwareAddr) bool {
		probeSeq++
		seq := probeSeq
		for range 3 { // a lost frame is retried: the check is about the lookup
			unix.Write(tx1, l2Frame(dst, 'p', seq))
			if waitFor(300*time.Millisecond, func() bool { seenMu.Lock(); defer seenMu.Unlock(); return seenL2[seq] }) {
				return true
			}
		}
		return false
	}
	probeL3 := func(ip net.IP) bool {
		probeSeq++
		seq := probeSeq
		for range 3 {
			udp3.WriteToUDP(l3Payload('p', seq), &net.UDPAddr{IP: ip, Port: 7777})
			if waitFor(300*time.Millisecond, func() bool { seenMu.Lock(); defer seenMu.Unlock(); return seenL3[seq] }) {
				return true
			}
		}
		return false
	}
	routesIn := func(prefix string) bool {
		rs, err := cl.Routes(context.Background(), 100, 0)
		if err != nil {
			return false
		}
		for _, r := range rs.Routes {
			if r.Prefix == prefix {
				return true
			}
		}
		return false
	}
	ipBatch := func(cmds []string) {
		cmd := exec.Command("ip", "-n", tp.sw, "-batch", "-")
		cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ip -batch: %v\n%s", err, out)
		}
	}

	const (
		churnFlows  = 1000
		churnRoutes = 200
		churnCookie = 0xc0de
	)
	churnMAC := func(i int) net.HardwareAddr { return net.HardwareAddr{0x0a, 0, 0, 0, byte(i >> 8), byte(i)} }
	var samples []soakSample
	sample := func() {
		m, err := scrapeMetrics(hc, metricsURL, "process_resident_memory_bytes", "go_goroutines", "process_start_time_seconds")
		if err != nil {
			fail("metrics: %v", err)
			return
		}
		samples = append(samples, soakSample{at: time.Since(start), rss: m["process_resident_memory_bytes"],
			goroutines: m["go_goroutines"], start: m["process_start_time_seconds"]})
	}
	sample()
	nextSample := time.Now().Add(5 * time.Second)
	deadline := start.Add(dur)
	cycles := 0
	var flowMods, routeOps int
	for time.Now().Before(deadline) && len(failures) < 50 {
		if !p.running() {
			fail("gswitchd exited: %v", p.err)
			break
		}
		// Flow churn: the drop rules in ...
		for i := range churnFlows {
			c.addFlow(ofFlow{priority: 20, ethDst: churnMAC(i), cookie: churnCookie})
		}
		flowMods += churnFlows
		if !c.barrier(10 * time.Second) {
			fail("cycle %d: no barrier reply after adding flows", cycles)
		}
		k := rand.IntN(churnFlows)
		if probeL2(churnMAC(k)) {
			fail("cycle %d: a frame to %s crossed while its drop rule was in", cycles, churnMAC(k))
		}
		// ... route churn: the routes in ...
		var cmds []string
		for j := range churnRoutes {
			cmds = append(cmds, fmt.Sprintf("route add 198.18.%d.0/24 via 10.0.4.2 dev swp4 onlink table 100", j))
		}
		ipBatch(cmds)
		routeOps += churnRoutes
		j := rand.IntN(churnRoutes)
		prefix := fmt.Sprintf("198.18.%d.0/24", j)
		if !waitFor(10*time.Second, func() bool { return routesIn(prefix) }) {
			fail("cycle %d: route %s not mirrored within 10s", cycles, prefix)
		} else if !probeL3(net.IPv4(198, 18, byte(j), 1)) {
			fail("cycle %d: a datagram to 198.18.%d.1 did not arrive while its route was in", cycles, j)
		}
		// ... the drop rules out (by cookie) ...
		b := flowModBody(ofpfcDelete, ofFlow{cookie: churnCookie})
		binary.BigEndian.PutUint64(b[8:], ^uint64(0)) // cookie_mask: these only
		c.send(ofptFlowMod, b)
		flowMods++
		if !c.barrier(10 * time.Second) {
			fail("cycle %d: no barrier reply after deleting flows", cycles)
		}
		if !probeL2(churnMAC(k)) {
			fail("cycle %d: a frame to %s did not cross once its drop rule was out", cycles, churnMAC(k))
		}
		// ... and the routes out.
		cmds = cmds[:0]
		for j := range churnRoutes {
			cmds = append(cmds, fmt.Sprintf("route del 198.18.%d.0/24 table 100", j))
		}
		ipBatch(cmds)
		routeOps += churnRoutes
		if !waitFor(10*time.Second, func() bool { return !routesIn(prefix) }) {
			fail("cycle %d: route %s still mirrored 10s after its deletion", cycles, prefix)
		} else if probeL3(net.IPv4(198, 18, byte(j), 1)) {
			fail("cycle %d: a datagram to 198.18.%d.1 arrived after its route was deleted", cycles, j)
		}
		if n := fxFlows(t, ctlPath); n != 2 {
			fail("cycle %d: %d flows after the churn, want the 2 base flows", cycles, n)
		}
		cycles++
		if time.Now().After(nextSample) {
			sample()
			nextSample = time.Now().Add(5 * time.Second)
		}
	}
	sample()
	time.Sleep(500 * time.Millisecond)
	t.Logf("soak %v: %d cycles, %d FLOW_MODs, %d route changes; steady traffic: %d/%d frames (switch), %d/%d datagrams (router)",
		dur, cycles, flowMods, routeOps, steadyL2.Load(), steadySentL2.Load(), steadyL3.Load(), steadySentL3.Load())

	var trace []string
	for _, s := range samples {
		trace = append(trace, fmt.Sprintf("%v:%.0fMiB/%.0f", s.at.Round(time.Second), s.rss/(1<<20), s.goroutines))
	}
	t.Logf("samples (time: RSS/goroutines): %s", strings.Join(trace, " "))

	// The process: never restarted.
	if !p.running() {
		fail("gswitchd exited: %v", p.err)
	}
	c.mu.Lock()
	handshakes := len(c.handshake)
	c.mu.Unlock()
	if handshakes != 1 {
		fail("%d controller connections: gswitchd reconnected or restarted", handshakes)
	}
	for _, s := range samples {
		if s.start != samples[0].start {
			fail("process start time changed from %v to %v at %v", samples[0].start, s.start, s.at)
			break
		}
	}
	// Steady traffic: arrived (a few frames may be lost to a full ring on
	// a busy machine, not more).
	if got, sent := steadyL2.Load(), steadySentL2.Load(); got < sent*95/100 {
		fail("steady switch traffic: %d of %d frames arrived", got, sent)
	}
	if got, sent := steadyL3.Load(), steadySentL3.Load(); got < sent*95/100 {
		fail("steady routed traffic: %d of %d datagrams arrived", got, sent)
	}
	// Resources: flat after the warm-up.
	warm := max(dur/5, 30*time.Second)
	var base, after []soakSample
	for _, s := range samples {
		if s.at <= warm+10*time.Second && s.at >= warm-10*time.Second {
			base = append(base, s)
		} else if s.at > warm {
			after = append(after, s)
		}
	}
	if len(base) == 0 || len(after) == 0 {
		fail("too few samples (%d) to judge growth", len(samples))
	} else {
		med := func(ss []soakSample, f func(soakSample) float64) float64 {
			v := make([]float64, len(ss))
			for i, s := range ss {
				v[i] = f(s)
			}
			sort.Float64s(v)
			return v[len(v)/2]
		}
		rss := func(s soakSample) float64 { return s.rss }
		gor := func(s soakSample) float64 { return s.goroutines }
		baseRSS, baseG := med(base, rss), med(base, gor)
		// The end: the median of the last few samples (a GC cycle's peak
		// is not growth).
		tail := after[max(0, len(after)-3):]
		endRSS, endG := med(tail, rss), med(tail, gor)
		t.Logf("after warm-up (%v): RSS %.1f MiB -> %.1f MiB, goroutines %.0f -> %.0f (%d samples)",
			warm, baseRSS/(1<<20), endRSS/(1<<20), baseG, endG, len(samples))
		if endRSS > baseRSS+max(baseRSS/4, 32<<20) {
			fail("resident memory grew from %.1f MiB to %.1f MiB", baseRSS/(1<<20), endRSS/(1<<20))
		}
		if endG > baseG+16 {
			fail("goroutines grew from %.0f to %.0f", baseG, endG)
		}
	}
	if len(failures) > 0 {
		t.Fatalf("soak: %d failures; first: %s", len(failures), failures[0])
	}
}
