package integration

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"github.com/vishvananda/netns"

	"github.com/gswitch/gswitch/controlproto/p4rt"
)

// The TestFp tests (issue 22's P4Runtime items) run gswitchd with
// P4Runtime in namespaces of their own, named fp*, so that they do not
// collide with other tests run beside them.

// newFpTopo is newTopo with namespaces named fpsw<id> and fph<i><id>.
func newFpTopo(t *testing.T, n int) *topo {
	t.Helper()
	id := rand.IntN(1 << 20)
	return newTopoNamed(t, n, fmt.Sprintf("fpsw%x", id), func(i int) string { return fmt.Sprintf("fph%d%x", i, id) })
}

func p4mcast(typ p4v1.Update_Type, id uint32, ports ...uint32) *p4v1.Update {
	g := &p4v1.MulticastGroupEntry{MulticastGroupId: id}
	for _, p := range ports {
		g.Replicas = append(g.Replicas, &p4v1.Replica{PortKind: &p4v1.Replica_EgressPort{EgressPort: p}})
	}
	return &p4v1.Update{Type: typ, Entity: &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{
		PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: g}}}}}
}

// noPacketIn fails when the stream delivers a packet-in within d.
func noPacketIn(t *testing.T, msgs <-chan *p4v1.StreamMessageResponse, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case m, ok := <-msgs:
			if !ok {
				t.Fatal("stream closed")
			}
			if m.GetPacket() != nil {
				t.Fatalf("unexpected packet-in: %x", m.GetPacket().GetPayload())
			}
		case <-deadline:
			return
		}
	}
}

// TestFpP4rtMulticastFloodsARP: an L2 pipeline with no controller in the
// data path. l2_exact forwards known MACs; the ACL sends broadcasts to
// multicast group 1 (ports 1..3), so every host's ARP requests reach the
// others without a packet-out, and pings between all hosts work. No
// packet reaches the controller.
func TestFpP4rtMulticastFloodsARP(t *testing.T) {
	tp := newFpTopo(t, 3)
	_, addr := startP4RT(t, tp)
	cl := p4conn(t, tp.sw, addr)
	_, msgs := p4primary(t, cl)
	if err := tp.ping(t, 1, "10.0.0.2", 1); err == nil {
		t.Fatal("ping went through before any entry")
	}
	p4write(t, cl, l2Entry(1), l2Entry(2), l2Entry(3), p4mcast(p4v1.Update_INSERT, 1, 1, 2, 3),
		aclEntry(p4v1.Update_INSERT, 10, p4act(p4rt.ActionSetMulticastGroup, []byte{1}), p4ternary(3, bcast, bcast)))
	for _, c := range []struct {
		from int
		dst  string
	}{{1, "10.0.0.2"}, {1, "10.0.0.3"}, {3, "10.0.0.2"}} {
		if err := tp.ping(t, c.from, c.dst, 2); err != nil {
			t.Fatal(err)
		}
	}
	noPacketIn(t, msgs, 200*time.Millisecond)
	// Host 3 saw host 1's ARP request for 10.0.0.2: flooded, not punted.
	out := sh(t, "ip", "-n", tp.hosts[2], "neigh", "show", "10.0.0.1")
	if !strings.Contains(out, "02:00:00:00:00:01") {
		t.Errorf("host 3 has no neighbour entry for host 1 (%q)", out)
	}
}

// TestFpP4rtTTLExpiryNotPunted: host 1 pings host 3 across an ipv4_lpm
// route (set_next_hop) with TTL 1; the switch drops the expiring packets
// and the P4Runtime client gets no packet-in for them, while a ping with
// the normal TTL is routed.
func TestFpP4rtTTLExpiryNotPunted(t *testing.T) {
	tp := newFpTopo(t, 3)
	router := "02:aa:00:00:00:fe"
	routerMAC := []byte{2, 0xaa, 0, 0, 0, 0xfe}
	h1, h3 := tp.hosts[0], tp.hosts[2]
	sh(t, "ip", "-n", h3, "addr", "flush", "dev", "eth0")
	sh(t, "ip", "-n", h3, "addr", "add", "10.0.3.3/24", "dev", "eth0")
	sh(t, "ip", "-n", h3, "route", "add", "default", "via", "10.0.3.254")
	sh(t, "ip", "-n", h3, "neigh", "add", "10.0.3.254", "lladdr", router, "dev", "eth0")
	sh(t, "ip", "-n", h1, "route", "add", "10.0.3.0/24", "via", "10.0.0.254")
	sh(t, "ip", "-n", h1, "neigh", "add", "10.0.0.254", "lladdr", router, "dev", "eth0")
	_, addr := startP4RT(t, tp)
	cl := p4conn(t, tp.sw, addr)
	_, msgs := p4primary(t, cl)
	route := func(dst []byte, plen int32, port int) *p4v1.Update {
		return p4upd(p4v1.Update_INSERT, &p4v1.TableEntry{TableId: p4rt.TableIPv4,
			Match:  []*p4v1.FieldMatch{{FieldId: 1, FieldMatchType: &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: dst, PrefixLen: plen}}}},
			Action: p4act(p4rt.ActionSetNextHop, []byte{byte(port)}, routerMAC, hostMAC(port))})
	}
	p4write(t, cl, route([]byte{10, 0, 3, 0}, 24, 3), route([]byte{10, 0, 0, 1}, 32, 1))
	if out, err := exec.Command("ip", "netns", "exec", h1, "ping", "-n", "-c", "5", "-i", "0.2", "-W", "1", "-t", "1", "10.0.3.3").CombinedOutput(); err == nil {
		t.Fatalf("a TTL 1 ping crossed the route:\n%s", out)
	}
	noPacketIn(t, msgs, 500*time.Millisecond)
	if err := tp.ping(t, 1, "10.0.3.3", 2); err != nil {
		t.Fatalf("the route with the normal TTL: %v", err)
	}
}

// listenIn listens on addr inside namespace ns.
func listenIn(t *testing.T, ns, addr string) net.Listener {
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
	l, lerr := net.Listen("tcp", addr)
	if err := netns.Set(orig); err != nil {
		panic(fmt.Sprintf("cannot return to the original namespace: %v", err))
	}
	if lerr != nil {
		t.Fatal(lerr)
	}
	return l
}

// TestFpP4rtExplicitListenInUse: with 127.0.0.1:9559 taken in the switch
// namespace, gswitchd --p4rt-listen 127.0.0.1:9559 (the default address,
// given explicitly) exits with an error naming it; without the flag it
// starts, without P4Runtime.
func TestFpP4rtExplicitListenInUse(t *testing.T) {
	tp := newFpTopo(t, 1)
	l := listenIn(t, tp.sw, "127.0.0.1:9559")
	defer l.Close()
	bin := gswitchdBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", "netns", "exec", tp.sw, bin, "--backend", "cpu", "--ctl-socket", t.TempDir()+"/s.sock",
		"--p4rt-listen", "127.0.0.1:9559", "--port", "1=swp1").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ctx.Err() != nil {
		t.Fatalf("gswitchd with its P4Runtime address in use: %v, want an exit with an error\n%s", err, out)
	}
	if !strings.Contains(string(out), "p4rt listen") || !strings.Contains(string(out), syscall.EADDRINUSE.Error()) {
		t.Errorf("the error does not name p4rt listen and the address in use:\n%s", out)
	}
	d := startGswitchd(t, tp) // the default address, not given: runs without P4Runtime
	if !strings.Contains(d.log.String(), "P4Runtime is off") {
		t.Errorf("gswitchd without --p4rt-listen did not say P4Runtime is off:\n%s", d.log.String())
	}
}
