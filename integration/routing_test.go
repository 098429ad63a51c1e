package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/l3"
)

// The routing tests run gswitchd as a router between host namespaces on
// different subnets: host i's eth0 has 10.0.i.2/24 and 2001:db8:i::2/64,
// with default routes via 10.0.i.1 and 2001:db8:i::1, the addresses of
// gswitchd's router port i (the veth end swp<i> in the switch namespace).

// newRoutedTopo builds the switch namespace and n routed hosts (IPv6 on in
// the hosts, without duplicate address detection; off in the switch
// namespace, whose interfaces carry no addresses: gswitchd owns them).
func newRoutedTopo(t *testing.T, n int) *topo {
	t.Helper()
	needRoot(t)
	needTool(t, "ip", "iproute2")
	id := rand.IntN(1 << 20)
	tp := &topo{sw: fmt.Sprintf("grt%x", id)}
	t.Cleanup(tp.destroy)
	sh(t, "ip", "netns", "add", tp.sw)
	noIPv6(t, tp.sw)
	sh(t, "ip", "-n", tp.sw, "link", "set", "lo", "up")
	for i := 1; i <= n; i++ {
		h := fmt.Sprintf("grh%d%x", i, id)
		tp.hosts = append(tp.hosts, h)
		sh(t, "ip", "netns", "add", h)
		sh(t, "ip", "netns", "exec", h, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")
		sp := fmt.Sprintf("swp%d", i)
		sh(t, "ip", "-n", tp.sw, "link", "add", sp, "type", "veth", "peer", "name", "eth0", "netns", h)
		sh(t, "ip", "-n", h, "link", "set", "eth0", "address", fmt.Sprintf("02:00:00:00:%02x:02", i))
		sh(t, "ip", "-n", h, "addr", "add", fmt.Sprintf("10.0.%d.2/24", i), "dev", "eth0")
		sh(t, "ip", "-n", h, "addr", "add", fmt.Sprintf("2001:db8:%d::2/64", i), "dev", "eth0", "nodad")
		sh(t, "ip", "-n", h, "link", "set", "eth0", "up")
		sh(t, "ip", "-n", h, "link", "set", "lo", "up")
		sh(t, "ip", "-n", h, "route", "add", "default", "via", fmt.Sprintf("10.0.%d.1", i))
		sh(t, "ip", "-n", h, "-6", "route", "add", "default", "via", fmt.Sprintf("2001:db8:%d::1", i))
		sh(t, "ip", "-n", tp.sw, "link", "set", sp, "up")
	}
	return tp
}

// routerPorts returns gswitchd's flags making ports 1..n router ports
// with the addresses newRoutedTopo's hosts use as gateways.
func routerPorts(n int) []string {
	var a []string
	for i := 1; i <= n; i++ {
		a = append(a, "--router-port", fmt.Sprintf("%d=10.0.%d.1/24,2001:db8:%d::1/64", i, i, i))
	}
	return a
}

// hostCmd runs a command in host i (1-based).
func (tp *topo) hostCmd(ctx context.Context, i int, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", tp.hosts[i-1]}, args...)...)
}

// pingOut pings from host i and returns ping's output and error.
func (tp *topo) pingOut(t *testing.T, i int, args ...string) (string, error) {
	t.Helper()
	needTool(t, "ping", "iputils-ping")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := tp.hostCmd(ctx, i, append([]string{"ping", "-n"}, args...)...).CombinedOutput()
	return string(out), err
}

// udpIn opens a UDP socket bound to addr inside namespace ns: the socket
// stays in that namespace, and the test uses it from any goroutine.
func udpIn(t *testing.T, ns, addr string) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	var lerr error
	inNamedNS(t, ns, func() {
		c, lerr = net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	})
	if lerr != nil {
		t.Fatal(lerr)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// inNamedNS runs fn on this goroutine's OS thread inside the named network
// namespace, then returns the thread to its own; sockets fn opens stay in
// ns.
func inNamedNS(t *testing.T, ns string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		t.Fatal(err)
	}
	fn()
	if err := netns.Set(orig); err != nil {
		panic(fmt.Sprintf("cannot return to the original namespace: %v", err))
	}
}

// routerState queries the daemon's neighbour table and router counters.
func (d *daemon) routerState(t *testing.T) ([]l3.NeighInfo, l3.Counters) {
	t.Helper()
	c := ctl.NewClient(d.ctl)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ns, err := c.Neighbours(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := c.L3(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ns, cs
}

// TestRoutedPing: two hosts on different subnets reach each other through
// gswitchd over IPv4 and IPv6, both ways, and ping their gateways; the
// router learned both hosts and forwarded the packets.
func TestRoutedPing(t *testing.T) {
	tp := newRoutedTopo(t, 2)
	d := startGswitchd(t, tp, routerPorts(2)...)
	for _, c := range []struct {
		from int
		dst  string
	}{{1, "10.0.1.1"}, {1, "2001:db8:1::1"}, {1, "10.0.2.2"}, {2, "10.0.1.2"}, {1, "2001:db8:2::2"}, {2, "2001:db8:1::2"}, {2, "10.0.1.1"}} {
		if out, err := tp.pingOut(t, c.from, "-c", "3", "-i", "0.2", "-W", "2", c.dst); err != nil {
			t.Fatalf("ping %s from h%d: %v\n%s", c.dst, c.from, err, out)
		}
	}
	ns, cs := d.routerState(t)
	want := map[string]bool{"10.0.1.2": false, "10.0.2.2": false, "2001:db8:1::2": false, "2001:db8:2::2": false}
	for _, n := range ns {
		if _, ok := want[n.Addr]; ok && (n.State == "reachable" || n.State == "stale") && n.MAC != "" {
			want[n.Addr] = true
		}
	}
	for a, ok := range want {
		if !ok {
			t.Errorf("neighbour %s not resolved: %+v", a, ns)
		}
	}
	if cs.Forwarded < 16 || cs.EchoReplies < 9 {
		t.Errorf("router counters: %+v, want at least 16 forwarded (4 pings of 3 there and back) and 9 echo replies", cs)
	}
	t.Logf("router: %d forwarded, %d echo replies, %d solicitations, drops %v", cs.Forwarded, cs.EchoReplies, cs.Solicitations, nonZero(cs.Drops))
}

func nonZero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// TestRoutedTTLExpiry: a packet whose TTL / hop limit runs out at gswitchd
// gets an ICMP time exceeded from the router port's address.
func TestRoutedTTLExpiry(t *testing.T) {
	tp := newRoutedTopo(t, 2)
	d := startGswitchd(t, tp, routerPorts(2)...)
	if out, err := tp.pingOut(t, 1, "-c", "1", "-W", "2", "10.0.2.2"); err != nil { // resolve first
		t.Fatalf("%v\n%s", err, out)
	}
	out, _ := tp.pingOut(t, 1, "-c", "1", "-W", "2", "-t", "1", "10.0.2.2")
	if !strings.Contains(out, "From 10.0.1.1") || !strings.Contains(strings.ToLower(out), "time to live exceeded") {
		t.Fatalf("ping -t 1: want a time exceeded from 10.0.1.1:\n%s", out)
	}
	out, _ = tp.pingOut(t, 1, "-6", "-c", "1", "-W", "2", "-t", "1", "2001:db8:2::2")
	if !strings.Contains(out, "From 2001:db8:1::1") || !strings.Contains(strings.ToLower(out), "time exceeded") {
		t.Fatalf("ping -6 -t 1: want a time exceeded from 2001:db8:1::1:\n%s", out)
	}
	// No route: unreachable from the router.
	out, _ = tp.pingOut(t, 1, "-c", "1", "-W", "2", "192.0.2.1")
	if !strings.Contains(out, "From 10.0.1.1") || !strings.Contains(strings.ToLower(out), "unreachable") {
		t.Fatalf("ping without a route: want a destination unreachable from 10.0.1.1:\n%s", out)
	}
	_, cs := d.routerState(t)
	if cs.Drops["ttl_expired"] < 2 || cs.Drops["no_route"] < 1 || cs.ICMPErrors < 3 {
		t.Fatalf("counters: %+v", cs)
	}
}

// iperf3JSON is the part of iperf3 --json's answer the tests read.
type iperf3JSON struct {
	End struct {
		SumReceived struct {
			BitsPerSecond float64 `json:"bits_per_second"`
		} `json:"sum_received"`
		Sum struct {
			Seconds     float64 `json:"seconds"`
			Packets     int64   `json:"packets"`
			LostPackets int64   `json:"lost_packets"`
		} `json:"sum"`
	} `json:"end"`
	Error string `json:"error"`
}

// iperf3 runs an iperf3 server in host srv and a client in host cli
// towards dst with the extra client flags; it returns the client's answer.
func iperf3(t *testing.T, tp *topo, srv, cli int, dst string, extra ...string) iperf3JSON {
	t.Helper()
	needTool(t, "iperf3", "iperf3")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	port := fmt.Sprint(20000 + rand.IntN(20000))
	server := tp.hostCmd(ctx, srv, "iperf3", "-s", "-1", "-p", port)
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { server.Process.Kill(); server.Wait() }()
	var last []byte
	for attempt := 0; attempt < 20; attempt++ { // the server needs a moment to listen
		out, err := tp.hostCmd(ctx, cli, append([]string{"iperf3", "-c", dst, "-p", port, "--json"}, extra...)...).Output()
		var r iperf3JSON
		if jerr := json.Unmarshal(out, &r); jerr == nil && err == nil && r.Error == "" {
			return r
		}
		last = out
		if !strings.Contains(string(out), "connect") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("iperf3 -c %s %v failed:\n%s", dst, extra, last)
	return iperf3JSON{}
}

// newKernelRouterTopo is newRoutedTopo's twin with the Linux kernel as the
// router: the switch namespace carries the gateway addresses and forwards
// (ip_forward=1).
func newKernelRouterTopo(t *testing.T, n int) *topo {
	t.Helper()
	tp := newRoutedTopo(t, n)
	sh(t, "ip", "netns", "exec", tp.sw, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	for i := 1; i <= n; i++ {
		sh(t, "ip", "-n", tp.sw, "addr", "add", fmt.Sprintf("10.0.%d.1/24", i), "dev", fmt.Sprintf("swp%d", i))
	}
	return tp
}

// TestRoutedThroughput measures routed forwarding through gswitchd with
// iperf3 (TCP, IPv4 and IPv6, and a UDP packet rate of 64-byte
// datagrams), and the same through the Linux kernel as the router of the
// same topology, in the same run; the figures are logged.
func TestRoutedThroughput(t *testing.T) {
	type fig struct{ tcp4, tcp6, udpPPS float64 }
	measure := func(tp *topo, v6 bool) fig {
		var f fig
		r := iperf3(t, tp, 2, 1, "10.0.2.2", "-t", "3")
		f.tcp4 = r.End.SumReceived.BitsPerSecond / 1e9
		if v6 {
			r = iperf3(t, tp, 2, 1, "2001:db8:2::2", "-t", "3")
			f.tcp6 = r.End.SumReceived.BitsPerSecond / 1e9
		}
		r = iperf3(t, tp, 2, 1, "10.0.2.2", "-u", "-b", "0", "-l", "64", "-t", "3")
		if r.End.Sum.Seconds > 0 {
			f.udpPPS = float64(r.End.Sum.Packets-r.End.Sum.LostPackets) / r.End.Sum.Seconds
		}
		return f
	}
	tp := newRoutedTopo(t, 2)
	d := startGswitchd(t, tp, routerPorts(2)...)
	if out, err := tp.pingOut(t, 1, "-c", "2", "-i", "0.2", "-W", "2", "10.0.2.2"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := tp.pingOut(t, 1, "-c", "2", "-i", "0.2", "-W", "2", "2001:db8:2::2"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	g := measure(tp, true)
	_, cs := d.routerState(t)
	c := ctl.NewClient(d.ctl)
	st, err := c.Stats(context.Background())
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	ktp := newKernelRouterTopo(t, 2)
	k := measure(ktp, false)
	t.Logf("RESULT routed forwarding, gswitchd (backend %s): TCP IPv4 %.2f Gbit/s, TCP IPv6 %.2f Gbit/s, UDP 64 B %.0f packets/s received",
		st.Backend, g.tcp4, g.tcp6, g.udpPPS)
	t.Logf("RESULT routed forwarding, Linux kernel (ip_forward=1): TCP IPv4 %.2f Gbit/s, UDP 64 B %.0f packets/s received", k.tcp4, k.udpPPS)
	t.Logf("router drops %v", nonZero(cs.Drops))
	if g.tcp4 <= 0 || g.tcp6 <= 0 || g.udpPPS <= 0 {
		t.Fatalf("no traffic through gswitchd: %+v", g)
	}
}

// TestRoutedKernelNeighbours: in neighbour mode kernel the switch
// namespace's kernel owns the router addresses and resolves next hops;
// gswitchd mirrors its neighbour table over netlink and routes with it.
func TestRoutedKernelNeighbours(t *testing.T) {
	tp := newRoutedTopo(t, 2)
	for i := 1; i <= 2; i++ {
		sp := fmt.Sprintf("swp%d", i)
		sh(t, "ip", "netns", "exec", tp.sw, "sysctl", "-qw", "net.ipv6.conf."+sp+".disable_ipv6=0", "net.ipv6.conf."+sp+".accept_dad=0")
		sh(t, "ip", "-n", tp.sw, "addr", "add", fmt.Sprintf("10.0.%d.1/24", i), "dev", sp)
		sh(t, "ip", "-n", tp.sw, "addr", "add", fmt.Sprintf("2001:db8:%d::1/64", i), "dev", sp, "nodad")
	}
	d := startGswitchd(t, tp, append(routerPorts(2), "--neighbours", "kernel")...)
	for _, c := range []struct {
		from int
		dst  string
	}{{1, "10.0.2.2"}, {2, "10.0.1.2"}, {1, "2001:db8:2::2"}} {
		// The first packets wait for the kernel to resolve: -c 6, a reply is enough.
		if out, err := tp.pingOut(t, c.from, "-c", "6", "-i", "0.3", "-W", "2", c.dst); err != nil {
			t.Fatalf("ping %s from h%d: %v\n%s", c.dst, c.from, err, out)
		}
	}
	ns, cs := d.routerState(t)
	kernel := 0
	for _, n := range ns {
		if n.State == "kernel" {
			kernel++
		}
	}
	if kernel < 3 || cs.Solicitations != 0 || cs.Forwarded == 0 {
		t.Fatalf("neighbours %+v, counters %+v: want kernel entries, no solicitations of gswitchd's own, packets forwarded", ns, cs)
	}
	t.Logf("kernel mode: %d kernel neighbours mirrored, %d forwarded, drops %v", kernel, cs.Forwarded, nonZero(cs.Drops))
}

// ecmpTopo is newRoutedTopo with three hosts where hosts 2 and 3 are
// gateways to 198.51.100.0/24: each has 198.51.100.1/32 on its loopback
// (an anycast service), so a flow is answered by whichever gateway the
// router picks.
func ecmpTopo(t *testing.T) *topo {
	tp := newRoutedTopo(t, 3)
	for i := 2; i <= 3; i++ {
		sh(t, "ip", "-n", tp.hosts[i-1], "addr", "add", "198.51.100.1/32", "dev", "lo")
	}
	return tp
}

// udpFlows sends count datagrams on each of flows UDP flows (distinct
// source ports) from host 1 to dst:9999 and returns, per gateway host (2
// and 3), which flows it received and how many datagrams.
func udpFlows(t *testing.T, tp *topo, dst string, flows, count int) (perHost map[int]map[int]int) {
	t.Helper()
	rx := map[int]*net.UDPConn{2: udpIn(t, tp.hosts[1], "0.0.0.0:9999"), 3: udpIn(t, tp.hosts[2], "0.0.0.0:9999")}
	var socks []*net.UDPConn
	for f := range flows {
		socks = append(socks, udpIn(t, tp.hosts[0], fmt.Sprintf("10.0.1.2:%d", 30000+f)))
	}
	to := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(dst + ":9999"))
	for range count {
		for f, s := range socks {
			if _, err := s.WriteToUDP([]byte(fmt.Sprintf("flow %d", f)), to); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	perHost = map[int]map[int]int{2: {}, 3: {}}
	buf := make([]byte, 64)
	for h, c := range rx {
		for {
			c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			n, err := c.Read(buf)
			if err != nil {
				break
			}
			var f int
			if _, err := fmt.Sscanf(string(buf[:n]), "flow %d", &f); err == nil {
				perHost[h][f]++
			}
		}
	}
	return perHost
}

// checkECMP wants flows spread over both gateways, each flow on one only,
// and (almost) every datagram delivered.
func checkECMP(t *testing.T, per map[int]map[int]int, flows, count int) {
	t.Helper()
	total := 0
	for f := range flows {
		if per[2][f] > 0 && per[3][f] > 0 {
			t.Errorf("flow %d went both ways: %d and %d datagrams", f, per[2][f], per[3][f])
		}
		total += per[2][f] + per[3][f]
	}
	if len(per[2]) < flows/5 || len(per[3]) < flows/5 {
		t.Errorf("flows per gateway: %d and %d of %d: not spread", len(per[2]), len(per[3]), flows)
	}
	if total < flows*count*9/10 {
		t.Errorf("%d of %d datagrams delivered", total, flows*count)
	}
	t.Logf("ECMP: %d flows via host 2, %d via host 3, %d of %d datagrams delivered", len(per[2]), len(per[3]), total, flows*count)
}

// probe sends numbered UDP datagrams from host 1 to dst:9999 every
// interval and receives them on a socket of host rx; it records when each
// sequence number was sent and when each arrived.
type probe struct {
	sent, got map[int]time.Time
	mu        sync.Mutex
	stop      chan struct{}
	done      sync.WaitGroup
}

func startProbe(t *testing.T, tp *topo, rx int, dst string, interval time.Duration) *probe {
	t.Helper()
	in := udpIn(t, tp.hosts[rx-1], "0.0.0.0:9999")
	out := udpIn(t, tp.hosts[0], "10.0.1.2:0")
	to := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(dst + ":9999"))
	p := &probe{sent: map[int]time.Time{}, got: map[int]time.Time{}, stop: make(chan struct{})}
	p.done.Add(2)
	go func() {
		defer p.done.Done()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for seq := 0; ; seq++ {
			p.mu.Lock()
			p.sent[seq] = time.Now()
			p.mu.Unlock()
			out.WriteToUDP([]byte(fmt.Sprint(seq)), to)
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	}()
	go func() {
		defer p.done.Done()
		buf := make([]byte, 64)
		for {
			in.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			n, err := in.Read(buf)
			select {
			case <-p.stop:
				return
			default:
			}
			if err != nil {
				continue
			}
			var seq int
			if _, err := fmt.Sscan(string(buf[:n]), &seq); err == nil {
				p.mu.Lock()
				p.got[seq] = time.Now()
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(p.close)
	return p
}

func (p *probe) close() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
		p.done.Wait()
	}
}

// firstSentAfter returns how long after t0 the first datagram sent after
// t0 that arrived was sent (the route took effect for packets sent from
// then on); ok false if none arrived.
func (p *probe) firstSentAfter(t0 time.Time) (time.Duration, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	best := time.Duration(-1)
	for seq := range p.got {
		if s := p.sent[seq]; s.After(t0) && (best < 0 || s.Sub(t0) < best) {
			best = s.Sub(t0)
		}
	}
	return best, best >= 0
}

// lastSentAfter returns how long after t0 the last datagram that arrived
// was sent (a removed route stopped taking packets from then on).
func (p *probe) lastSentAfter(t0 time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	last := time.Duration(0)
	for seq := range p.got {
		if d := p.sent[seq].Sub(t0); d > last {
			last = d
		}
	}
	return last
}

// TestRoutedKernelRouteChange: a route added with ip route to the kernel
// table gswitchd mirrors takes effect in the datapath, and its removal
// too; the test measures how long each takes with a UDP probe every
// millisecond (the time from before "ip route" runs to the first / after
// the last datagram through the route, so it includes starting ip).
func TestRoutedKernelRouteChange(t *testing.T) {
	tp := newRoutedTopo(t, 2)
	sh(t, "ip", "-n", tp.hosts[1], "addr", "add", "198.51.100.1/32", "dev", "lo")
	var ports []string
	for i := 1; i <= 2; i++ {
		ports = append(ports, "--router-port", fmt.Sprintf("%d=10.0.%d.1/24,2001:db8:%d::1/64,table=100", i, i, i))
	}
	d := startGswitchd(t, tp, append(ports, "--kernel-fib-table", "100")...)
	if out, err := tp.pingOut(t, 1, "-c", "2", "-i", "0.2", "-W", "2", "10.0.2.2"); err != nil { // resolve h2
		t.Fatalf("%v\n%s", err, out)
	}
	p := startProbe(t, tp, 2, "198.51.100.1", time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if _, ok := p.firstSentAfter(time.Time{}); ok {
		t.Fatal("datagrams arrived before the route was added")
	}
	t0 := time.Now()
	sh(t, "ip", "-n", tp.sw, "route", "add", "198.51.100.0/24", "via", "10.0.2.2", "dev", "swp2", "onlink", "table", "100")
	ipDone := time.Since(t0)
	if !waitFor(5*time.Second, func() bool { _, ok := p.firstSentAfter(t0); return ok }) {
		t.Fatalf("the added kernel route did not take effect within 5 s\n%s", d.log.String())
	}
	added, _ := p.firstSentAfter(t0)
	time.Sleep(200 * time.Millisecond)
	t1 := time.Now()
	sh(t, "ip", "-n", tp.sw, "route", "del", "198.51.100.0/24", "table", "100")
	time.Sleep(300 * time.Millisecond)
	removed := p.lastSentAfter(t1)
	p.close()
	if removed > time.Second {
		t.Fatalf("datagrams sent %v after the route's removal still arrived", removed)
	}
	t.Logf("RESULT kernel route to datapath: added, first packet through it sent %v after ip route started (ip itself took %v); deleted, the last one through it sent %v after", added, ipDone, removed)
}

// TestRoutedECMP: a route over two gateways (hosts 2 and 3, each
// answering for 198.51.100.1) spreads UDP flows over both and keeps each
// flow on one, counted per next hop; once from a static route in
// gswitchd's YAML (weights 1 and 1), once from a kernel multipath route
// (ip route ... nexthop ... nexthop ...) in the mirrored table.
func TestRoutedECMP(t *testing.T) {
	const flows, count = 64, 5
	for _, source := range []string{"static", "kernel"} {
		t.Run(source, func(t *testing.T) {
			tp := ecmpTopo(t)
			var args []string
			for i := 1; i <= 3; i++ {
				args = append(args, "--router-port", fmt.Sprintf("%d=10.0.%d.1/24,2001:db8:%d::1/64,table=100", i, i, i))
			}
			if source == "static" {
				cfg := filepath.Join(t.TempDir(), "gswitchd.yaml")
				yaml := "routes:\n  - {table: 100, prefix: 198.51.100.0/24, next_hops: [{gateway: 10.0.2.2, port: 2}, {gateway: 10.0.3.2, port: 3}]}\n"
				if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", cfg)
			} else {
				args = append(args, "--kernel-fib-table", "100")
			}
			d := startGswitchd(t, tp, args...)
			if source == "kernel" {
				sh(t, "ip", "-n", tp.sw, "route", "add", "198.51.100.0/24", "table", "100",
					"nexthop", "via", "10.0.2.2", "dev", "swp2", "onlink", "nexthop", "via", "10.0.3.2", "dev", "swp3", "onlink")
				if !waitFor(5*time.Second, func() bool { _, ok := findRoute(d.ctlRoutes(t, 100), "198.51.100.0/24"); return ok }) {
					t.Fatalf("the multipath route did not appear\n%s", d.log.String())
				}
			}
			for _, gw := range []string{"10.0.2.2", "10.0.3.2"} { // resolve both gateways first
				if out, err := tp.pingOut(t, 1, "-c", "1", "-W", "2", gw); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
			}
			per := udpFlows(t, tp, "198.51.100.1", flows, count)
			checkECMP(t, per, flows, count)
			r, ok := findRoute(d.ctlRoutes(t, 100), "198.51.100.0/24")
			if !ok || len(r.NextHops) != 2 {
				t.Fatalf("route: %+v", r)
			}
			got := map[string]int{}
			for h, fs := range per {
				for _, n := range fs {
					got[fmt.Sprintf("10.0.%d.2", h)] += n
				}
			}
			for _, nh := range r.NextHops {
				if int(nh.Packets) < got[nh.Gateway] || nh.Packets == 0 {
					t.Errorf("next hop %s counted %d packets, %d arrived through it", nh.Gateway, nh.Packets, got[nh.Gateway])
				}
			}
			t.Logf("next-hop counters: %s %d, %s %d packets", r.NextHops[0].Gateway, r.NextHops[0].Packets, r.NextHops[1].Gateway, r.NextHops[1].Packets)
		})
	}
}
