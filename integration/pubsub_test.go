package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/controlproto/pubsubapi"
	"github.com/gswitch/gswitch/datapath/eventfwd"
	ps "github.com/gswitch/gswitch/tables/pubsub"
)

// Content-based forwarding end to end: a publisher host (psh0, port 1)
// and three subscriber hosts (psh1..psh3, ports 2..4) on gswitchd's ports
// in namespaces of their own (psh-sw is the switch's). The publisher sends
// event packets with gswitchctl pubsub publish (IPv4 and IPv6 UDP to a
// neighbour whose MAC is fixed, so no resolution is needed); each
// subscriber's link is read with an AF_PACKET socket, and every subscriber
// must have received exactly the events the brute-force evaluator says its
// port's predicate matches, under subscription churn through the gRPC API.

const (
	pshSwitch  = "psh-sw"
	pshUDPPort = 7400
)

var pshHosts = []string{"psh0", "psh1", "psh2", "psh3"}

// pshTopo builds the namespaces: psh<i> has eth0 with 10.77.0.<i+1>/24 and
// fd77::<i+1>/64, linked to swp<i+1> in psh-sw. The publisher has
// permanent neighbours 10.77.0.200 and fd77::c8 (an address nobody holds)
// so that its datagrams leave without resolution.
func pshTopo(t *testing.T) *topo {
	t.Helper()
	needRoot(t)
	needTool(t, "ip", "iproute2")
	tp := &topo{sw: pshSwitch}
	tp.destroyNames(append([]string{pshSwitch}, pshHosts...)) // leftovers of an interrupted run
	t.Cleanup(tp.destroy)
	sh(t, "ip", "netns", "add", tp.sw)
	noIPv6(t, tp.sw)
	sh(t, "ip", "-n", tp.sw, "link", "set", "lo", "up")
	for i, h := range pshHosts {
		tp.hosts = append(tp.hosts, h)
		sh(t, "ip", "netns", "add", h)
		sh(t, "ip", "netns", "exec", h, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
			"net.ipv6.conf.default.router_solicitations=0", "net.ipv6.conf.all.router_solicitations=0")
		sp := fmt.Sprintf("swp%d", i+1)
		sh(t, "ip", "-n", tp.sw, "link", "add", sp, "type", "veth", "peer", "name", "eth0", "netns", h)
		sh(t, "ip", "-n", h, "link", "set", "eth0", "address", fmt.Sprintf("02:77:00:00:00:%02x", i+1))
		sh(t, "ip", "-n", h, "addr", "add", fmt.Sprintf("10.77.0.%d/24", i+1), "dev", "eth0")
		sh(t, "ip", "-n", h, "addr", "add", fmt.Sprintf("fd77::%d/64", i+1), "dev", "eth0", "nodad")
		sh(t, "ip", "-n", h, "link", "set", "eth0", "up")
		sh(t, "ip", "-n", h, "link", "set", "lo", "up")
		sh(t, "ip", "-n", tp.sw, "link", "set", sp, "up")
	}
	sh(t, "ip", "-n", pshHosts[0], "neigh", "add", "10.77.0.200", "lladdr", "02:77:00:00:00:c8", "dev", "eth0", "nud", "permanent")
	sh(t, "ip", "-n", pshHosts[0], "-6", "neigh", "add", "fd77::c8", "lladdr", "02:77:00:00:00:c8", "dev", "eth0", "nud", "permanent")
	return tp
}

// destroyNames deletes namespaces by name, ignoring the missing.
func (tp *topo) destroyNames(names []string) {
	for _, ns := range names {
		exec.Command("ip", "netns", "del", ns).Run()
	}
}

// tap is an AF_PACKET socket on eth0 of a host namespace that collects
// the event packets (by their seq attribute) the host receives.
type tap struct {
	fd   int
	mu   sync.Mutex
	seqs map[int64]int // seq -> copies received
	done chan struct{}
}

func openTap(t *testing.T, ns string) *tap {
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
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("cannot return to the original namespace: %v", err))
		}
	}()
	ifi, err := net.InterfaceByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 100000})
	tp := &tap{fd: fd, seqs: map[int64]int{}, done: make(chan struct{})}
	go tp.read()
	t.Cleanup(tp.close)
	return tp
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (tp *tap) read() {
	buf := make([]byte, 65536)
	for {
		select {
		case <-tp.done:
			return
		default:
		}
		n, from, err := unix.Recvfrom(tp.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			return
		}
		if ll, ok := from.(*unix.SockaddrLinklayer); ok && ll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		pl, ok := eventfwd.UDPPayload(buf[:n], pshUDPPort)
		if !ok {
			continue
		}
		ev, err := ps.DecodeWire(pl)
		if err != nil {
			continue
		}
		if v, ok := ev.Get("seq"); ok {
			tp.mu.Lock()
			tp.seqs[v.Int]++
			tp.mu.Unlock()
		}
	}
}

func (tp *tap) close() {
	select {
	case <-tp.done:
	default:
		close(tp.done)
		unix.Close(tp.fd)
	}
}

// got returns the seqs in [lo, hi) received, with their copies.
func (tp *tap) got(lo, hi int64) map[int64]int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	out := map[int64]int{}
	for s, n := range tp.seqs {
		if s >= lo && s < hi {
			out[s] = n
		}
	}
	return out
}

// pshEventGen makes the events: CCM-style attributes on a small domain
// (names a0..a5) plus a unique seq.
type pshEventGen struct {
	sc   ps.Scenario
	next int64
}

func (g *pshEventGen) batch(n int) []ps.Event {
	sc := g.sc
	sc.Seed += g.next
	evs := sc.Events(n)
	for i := range evs {
		evs[i].Attrs = append(evs[i].Attrs, ps.Attr{Name: "seq", Value: ps.Int(g.next)})
		g.next++
	}
	return evs
}

// publish writes the events to a file and sends them from the publisher
// with gswitchctl, to the IPv4 or the IPv6 neighbour.
func publish(t *testing.T, evs []ps.Event, v6 bool) {
	t.Helper()
	var b []byte
	for i := range evs {
		b = append(evs[i].AppendJSON(b), '\n')
	}
	f := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	to := fmt.Sprintf("10.77.0.200:%d", pshUDPPort)
	if v6 {
		to = fmt.Sprintf("[fd77::c8]:%d", pshUDPPort)
	}
	sh(t, "ip", "netns", "exec", pshHosts[0], gswitchctlBin.build(t), "pubsub", "publish", "--to", to, "--events", f, "--rate", "5000")
}

// expect checks that every subscriber received exactly the events of
// [lo, lo+len(evs)) that specs match on its port, once each; it waits up
// to 5s for the last ones.
func expect(t *testing.T, taps []*tap, specs []ps.Spec, evs []ps.Event, lo int64, skip map[uint32]bool) {
	t.Helper()
	want := make([]map[int64]int, len(taps))
	for i := range want {
		want[i] = map[int64]int{}
	}
	for k := range evs {
		for _, p := range ps.BruteMatch(specs, &evs[k]) {
			if p >= 2 && int(p-2) < len(taps) {
				want[p-2][lo+int64(k)] = 1
			}
		}
	}
	hi := lo + int64(len(evs))
	deadline := time.Now().Add(5 * time.Second)
	for i, tp := range taps {
		port := uint32(i + 2)
		if skip[port] {
			continue
		}
		for {
			got := tp.got(lo, hi)
			if len(got) >= len(want[i]) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	time.Sleep(100 * time.Millisecond) // copies beyond the wanted would show now
	for i, tp := range taps {
		port := uint32(i + 2)
		if skip[port] {
			continue
		}
		got := tp.got(lo, hi)
		var missing, extra []int64
		for s := range want[i] {
			if got[s] != 1 {
				missing = append(missing, s)
			}
		}
		for s, n := range got {
			if want[i][s] == 0 || n != 1 {
				extra = append(extra, s)
			}
		}
		if len(missing)+len(extra) > 0 {
			slices.Sort(missing)
			slices.Sort(extra)
			t.Errorf("port %d: %d events wanted, %d received; missing (or duplicated) %v; unwanted %v", port, len(want[i]), len(got), head(missing), head(extra))
		}
	}
}

func head(s []int64) []int64 { return s[:min(len(s), 10)] }

// TestPubSubEndToEnd: the configured subscriptions, then rounds of churn
// through the gRPC API (each change acknowledged before the next events),
// IPv4 and IPv6 events, malformed event packets counted and dropped, other
// UDP traffic left to the flow tables, and a round with churn on one port
// while events flow.
func TestPubSubEndToEnd(t *testing.T) {
	tp := pshTopo(t)
	apiPort := 17000 + rand.IntN(20000)
	cfg := filepath.Join(t.TempDir(), "gswitchd.yaml")
	yaml := fmt.Sprintf(`pubsub:
  udp_port: %d
  ports: [1, 2, 3, 4]
  api_listen: 127.0.0.1:%d
  subscriptions:
    - "2: a0 > 4"
    - "3: a4 ^= \"b\" || a2 = 3"
    - "4: a3 != \"zz\" && a0 < 6"
p4rt:
  listen: "off"
`, pshUDPPort, apiPort)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startGswitchd(t, tp, "--config", cfg, "--backend", "cpu")
	taps := []*tap{openTap(t, pshHosts[1]), openTap(t, pshHosts[2]), openTap(t, pshHosts[3])}
	pubTap := openTap(t, pshHosts[0])

	conn, err := grpc.Dial(fmt.Sprintf("127.0.0.1:%d", apiPort), grpc.WithContextDialer(nsDialer(tp.sw)),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	api := pubsubapi.NewPubSubClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var l *pubsubapi.ListResponse
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if l, err = api.List(ctx, &pubsubapi.ListRequest{}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(l.Subscriptions) != 3 {
		t.Fatalf("List: %v, %v", l, err)
	}
	// specs mirrors the daemon's table: its own List, parsed back.
	current := func() []ps.Spec {
		l, err := api.List(ctx, &pubsubapi.ListRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var specs []ps.Spec
		for _, s := range l.Subscriptions {
			fs, err := ps.ParsePredicate(s.Predicate)
			if err != nil {
				t.Fatalf("List's predicate %q does not parse: %v", s.Predicate, err)
			}
			specs = append(specs, ps.Spec{Port: s.Port, Filters: fs})
		}
		return specs
	}
	gen := &pshEventGen{sc: ps.Scenario{Interfaces: 3, FiltersMin: 1, FiltersMax: 1, ConstraintsMin: 1, ConstraintsMax: 2,
		Names: 6, AttrsMin: 2, AttrsMax: 5, NumericShare: 0.5, Values: 8, Words: 6, Seed: 11}}

	// Round 0: the configured subscriptions, IPv4 and IPv6.
	evs := gen.batch(300)
	publish(t, evs[:200], false)
	publish(t, evs[200:], true)
	expect(t, taps, current(), evs, 0, nil)
	for i, tp := range taps {
		if n := len(tp.got(0, gen.next)); n == 0 {
			t.Errorf("port %d received none of the first %d events", i+2, gen.next)
		} else {
			t.Logf("port %d: %d of the first %d events", i+2, n, gen.next)
		}
	}
	if got := pubTap.got(0, gen.next); len(got) != 0 {
		t.Errorf("the publisher received %d of its own events back", len(got))
	}

	// Churn rounds: a change through the API (the CLI for the first),
	// acknowledged, then events.
	out := sh(t, "ip", "netns", "exec", tp.sw, gswitchctlBin.build(t), "pubsub", "subscribe", "--api", fmt.Sprintf("127.0.0.1:%d", apiPort),
		"--port", "2", `a4 *= "a" && a5 >= 2`)
	if !strings.HasPrefix(out, "subscription ") {
		t.Fatalf("gswitchctl pubsub subscribe: %q", out)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	sc := ps.Scenario{Interfaces: 3, FiltersMin: 1, FiltersMax: 2, ConstraintsMin: 1, ConstraintsMax: 3,
		Names: 6, AttrsMin: 1, AttrsMax: 1, NumericShare: 0.5, Values: 8, Words: 6}
	for round := range 12 {
		switch rng.IntN(3) {
		case 0, 1: // add one
			sc.Seed = int64(100 + round)
			spec := sc.Subscriptions()[rng.IntN(3)]
			if _, err := api.Subscribe(ctx, &pubsubapi.SubscribeRequest{Port: spec.Port + 1, Predicate: ps.FormatPredicate(spec.Filters), Replace: round%5 == 4}); err != nil {
				t.Fatal(err)
			}
		case 2: // remove one
			l, err := api.List(ctx, &pubsubapi.ListRequest{})
			if err != nil || len(l.Subscriptions) == 0 {
				continue
			}
			id := l.Subscriptions[rng.IntN(len(l.Subscriptions))].Id
			if _, err := api.Unsubscribe(ctx, &pubsubapi.UnsubscribeRequest{Ids: []uint64{id}}); err != nil {
				t.Fatal(err)
			}
		}
		lo := gen.next
		evs := gen.batch(60)
		publish(t, evs, round%2 == 1)
		expect(t, taps, current(), evs, lo, nil)
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}

	// Malformed event packets and other UDP traffic: counted, dropped, not
	// delivered; the other traffic goes to the flow tables (secure mode, no
	// flows: dropped there).
	cl := ctl.NewClient(d.ctl)
	defer cl.Close()
	before, err := cl.PubSub(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tabsBefore, err := cl.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sendRaw(t, pshHosts[0], fmt.Sprintf("10.77.0.200:%d", pshUDPPort), []byte("GSEV\x01\x00\x00\x09trunc"))
	sendRaw(t, pshHosts[0], fmt.Sprintf("10.77.0.200:%d", pshUDPPort), []byte("not an event"))
	sendRaw(t, pshHosts[0], fmt.Sprintf("10.77.0.200:%d", pshUDPPort+1), []byte("other traffic"))
	time.Sleep(300 * time.Millisecond)
	after, err := cl.PubSub(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after.Counters.Malformed-before.Counters.Malformed != 2 || after.Counters.Delivered != before.Counters.Delivered {
		t.Errorf("malformed: %+v then %+v; want 2 more malformed, none delivered", before.Counters, after.Counters)
	}
	tabsAfter, err := cl.Tables(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tabsAfter[0].Lookups <= tabsBefore[0].Lookups {
		t.Errorf("table 0 lookups %d then %d: the other datagram did not reach the flow tables", tabsBefore[0].Lookups, tabsAfter[0].Lookups)
	}

	// Concurrent churn: port 4 flips between two predicates while events
	// flow; ports 2 and 3 must still be exact, and port 4 must have every
	// event both predicates match and none that neither matches.
	specs := current()
	pA, pB := "a0 < 4", "a0 > 2"
	if _, err := api.Subscribe(ctx, &pubsubapi.SubscribeRequest{Port: 4, Predicate: pA, Replace: true}); err != nil {
		t.Fatal(err)
	}
	specs = slices.DeleteFunc(specs, func(s ps.Spec) bool { return s.Port == 4 })
	lo := gen.next
	evs = gen.batch(400)
	stop := make(chan struct{})
	flips := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				flips <- n
				return
			default:
			}
			p := pA
			if n%2 == 0 {
				p = pB
			}
			if _, err := api.Subscribe(ctx, &pubsubapi.SubscribeRequest{Port: 4, Predicate: p, Replace: true}); err != nil {
				t.Error(err)
			}
			n++
			time.Sleep(2 * time.Millisecond)
		}
	}()
	publish(t, evs, false)
	close(stop)
	if n := <-flips; n < 10 {
		t.Logf("only %d flips during the publishing", n)
	}
	expect(t, taps, specs, evs, lo, map[uint32]bool{4: true})
	fa, _ := ps.ParsePredicate(pA)
	fb, _ := ps.ParsePredicate(pB)
	got4 := taps[2].got(lo, gen.next)
	for k := range evs {
		s := lo + int64(k)
		a := len(ps.BruteMatch([]ps.Spec{{Port: 4, Filters: fa}}, &evs[k])) > 0
		b := len(ps.BruteMatch([]ps.Spec{{Port: 4, Filters: fb}}, &evs[k])) > 0
		switch {
		case a && b && got4[s] != 1:
			t.Errorf("port 4: event %d matches both predicates, received %d times", s, got4[s])
		case !a && !b && got4[s] != 0:
			t.Errorf("port 4: event %d matches neither predicate but was received", s)
		case got4[s] > 1:
			t.Errorf("port 4: event %d received %d times", s, got4[s])
		}
	}

	// The counters agree with what the subscribers saw.
	info, err := cl.PubSub(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seen uint64
	for _, tp := range taps {
		for _, n := range tp.got(0, gen.next) {
			seen += uint64(n)
		}
	}
	if info.Counters.Received != uint64(gen.next) || info.Counters.Delivered != seen {
		t.Errorf("counters %+v: want %d received, %d delivered (what the subscribers saw)", info.Counters, gen.next, seen)
	}
	t.Logf("counters at the end: %+v", info.Counters)
	out = sh(t, gswitchctlBin.build(t), "show", "pubsub", "--socket", d.ctl)
	if !strings.Contains(out, fmt.Sprintf("received %d", gen.next)) {
		t.Errorf("gswitchctl show pubsub:\n%s", out)
	}
}

// sendRaw sends one UDP datagram from namespace ns.
func sendRaw(t *testing.T, ns, to string, payload []byte) {
	t.Helper()
	host, port, _ := net.SplitHostPort(to)
	addr := net.ParseIP(host).To4()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, _ := netns.Get()
	defer orig.Close()
	h, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := netns.Set(h); err != nil {
		t.Fatal(err)
	}
	var p int
	fmt.Sscan(port, &p)
	c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: addr, Port: p})
	if err := netns.Set(orig); err != nil {
		panic(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
}

// TestPubSubThroughput measures events/s delivered through gswitchd (CPU
// matcher): the publisher sends batches of events at rising rates to one
// subscriber that takes all of them; it logs, per offered rate, the events
// delivered and lost. It fails only when less than half arrive at the
// lowest rate (a broken path, not a slow machine).
func TestPubSubThroughput(t *testing.T) {
	tp := pshTopo(t)
	cfg := filepath.Join(t.TempDir(), "gswitchd.yaml")
	yaml := fmt.Sprintf("pubsub:\n  udp_port: %d\n  subscriptions: [\"2: seq >= 0\", \"3: seq < 0\", \"4: a0 > 3\"]\np4rt:\n  listen: \"off\"\n", pshUDPPort)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	startGswitchd(t, tp, "--config", cfg, "--backend", "cpu", "--log-level", "info")
	sub := openTap(t, pshHosts[1])
	gen := &pshEventGen{sc: ps.Scenario{Interfaces: 1, FiltersMin: 1, FiltersMax: 1, ConstraintsMin: 1, ConstraintsMax: 1,
		Names: 6, AttrsMin: 3, AttrsMax: 5, NumericShare: 0.5, Values: 8, Words: 6, Seed: 3}}
	const n = 20000
	ctlBin := gswitchctlBin.build(t)
	for i, rate := range []int{10000, 50000, 0} {
		evs := gen.batch(n)
		lo := gen.next - n
		var b []byte
		for k := range evs {
			b = append(evs[k].AppendJSON(b), '\n')
		}
		f := filepath.Join(t.TempDir(), "events.jsonl")
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t0 := time.Now()
		sh(t, "ip", "netns", "exec", pshHosts[0], ctlBin, "pubsub", "publish", "--to",
			fmt.Sprintf("10.77.0.200:%d", pshUDPPort), "--events", f, "--rate", fmt.Sprint(rate))
		d := time.Since(t0)
		time.Sleep(500 * time.Millisecond)
		got := len(sub.got(lo, gen.next))
		offered := "max"
		if rate > 0 {
			offered = fmt.Sprint(rate)
		}
		t.Logf("offered %s events/s: sent %d in %v (%.0f events/s, the CLI's start included), delivered %d, lost %d (%.2f%%)",
			offered, n, d.Round(time.Millisecond), float64(n)/d.Seconds(), got, n-got, 100*float64(n-got)/n)
		if i == 0 && got < n/2 {
			t.Errorf("only %d of %d events delivered at %d events/s", got, n, rate)
		}
	}
}
