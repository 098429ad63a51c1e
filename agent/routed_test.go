package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/l3"
)

// TestAgentRoutes builds the graph gswitchd builds from a configuration
// with two router ports on veth pairs, each peer in a network namespace of
// its own, and pings through it: from host A (10.0.1.2) to host B
// (10.0.2.2, a connected route) and to 10.9.0.1 (an address on B's
// loopback, a static route via B). It checks that the router's route
// table is served from the engine table ids the allocator handed out.
// Needs root (namespaces, veth pairs, packet sockets).
func TestAgentRoutes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN, CAP_NET_RAW) for network namespaces, veth pairs and packet sockets")
	}
	a := newHost(t, "10.0.1.2/24", "10.0.1.1")
	b := newHost(t, "10.0.2.2/24", "10.0.2.1")
	inNS(t, b.ns, func() {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			t.Fatal(err)
		}
		if err := netlink.AddrAdd(lo, &netlink.Addr{IPNet: mustIPNet("10.9.0.1/32")}); err != nil {
			t.Fatal(err)
		}
	})

	c := testConfig(t.TempDir())
	c.P4RT.Listen, c.Metrics = "off", ""
	c.Ports = []PortConfig{{Number: 1, Interface: a.sw}, {Number: 2, Interface: b.sw}}
	c.Router.Ports = []RouterPortConfig{{Port: 1, Addresses: []string{"10.0.1.1/24"}}, {Port: 2, Addresses: []string{"10.0.2.1/24"}}}
	c.Routes = []StaticRouteConfig{{Prefix: "10.9.0.0/16", NextHops: []NextHopConfig{{Gateway: "10.0.2.2", Port: 2}}}}
	ag, err := New(c, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, ag)

	var router IDRange
	for _, r := range ag.TableIDs() {
		if r.Owner == routerIDsOwner {
			router = r
		}
	}
	if router.First != l3.DefaultTableIDBase || router.N != l3.IDsPerTable {
		t.Fatalf("router's table ids %v, want %d from %#x (one route table)", ag.TableIDs(), l3.IDsPerTable, l3.DefaultTableIDBase)
	}
	if ag.Router() == nil || ag.RouteTable(254) == nil || ag.Port(1) == nil || ag.Port(2) == nil {
		t.Fatal("the agent lacks its router, route table 254 or its ports")
	}
	out := make([]uint32, 1)
	if err := ag.Engine().LookupLPM4(router.First, []uint32{binary.BigEndian.Uint32([]byte{10, 9, 1, 1})}, out); err != nil || out[0] == 0 {
		t.Fatalf("the static route on the engine at %#x: %v, %v", router.First, out, err)
	}

	sock := a.icmpSocket(t)
	for i, dst := range []string{"10.0.1.1", "10.0.2.2", "10.9.0.1"} {
		if err := ping(sock, netip.MustParseAddr(dst), uint16(i+1)); err != nil {
			t.Fatalf("ping %s from host A: %v", dst, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := ctl.NewClient(ag.CtlSocket())
	defer cl.Close()
	l3c, err := cl.L3(ctx)
	if err != nil || l3c.Forwarded < 4 {
		t.Fatalf("router counters %+v, %v: want at least 4 forwarded (2 requests, 2 replies)", l3c, err)
	}
	rs, err := cl.Routes(ctx, 254, 0)
	if err != nil || len(rs.Tables) != 1 || len(rs.Routes) != 3 {
		t.Fatalf("route table 254 over the control socket: %+v, %v; want 2 connected and 1 static route", rs, err)
	}
}

// host is a network namespace behind a veth pair: sw is the switch's end
// (in the test's namespace), the other end is in ns with an address and a
// default route.
type host struct {
	sw string
	ns netns.NsHandle
}

var vethSeq atomic.Int32

func newHost(t *testing.T, addr, gateway string) *host {
	t.Helper()
	id := fmt.Sprintf("%d%d", os.Getpid()%10000, vethSeq.Add(1))
	h := &host{sw: "gsas" + id}
	peer := "gsap" + id
	onThreadBack(t, func() {
		var err error
		if h.ns, err = netns.New(); err != nil { // enters it
			t.Fatalf("creating a network namespace: %v", err)
		}
	})
	t.Cleanup(func() { h.ns.Close() }) // the last reference: the namespace and the peer go
	la := netlink.NewLinkAttrs()
	la.Name = h.sw
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: peer}); err != nil {
		t.Fatalf("creating veth %s/%s: %v", h.sw, peer, err)
	}
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(h.sw); err == nil {
			netlink.LinkDel(l)
		}
	})
	pl, err := netlink.LinkByName(peer)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(pl, int(h.ns)); err != nil {
		t.Fatal(err)
	}
	disableIPv6(t, h.sw)
	sl, err := netlink.LinkByName(h.sw)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(sl); err != nil {
		t.Fatal(err)
	}
	inNS(t, h.ns, func() {
		disableIPv6(t, peer)
		for _, name := range []string{"lo", peer} {
			l, err := netlink.LinkByName(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := netlink.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
			if name == peer {
				if err := netlink.AddrAdd(l, &netlink.Addr{IPNet: mustIPNet(addr)}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := netlink.RouteAdd(&netlink.Route{Gw: net.ParseIP(gateway)}); err != nil {
			t.Fatalf("default route via %s: %v", gateway, err)
		}
	})
	return h
}

// icmpSocket opens a raw ICMP socket in the host's namespace.
func (h *host) icmpSocket(t *testing.T) int {
	t.Helper()
	var fd int
	inNS(t, h.ns, func() {
		var err error
		if fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_ICMP); err != nil {
			t.Fatal(err)
		}
	})
	t.Cleanup(func() { unix.Close(fd) })
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	return fd
}

// ping sends echo requests (identifier 0x6773, sequence seq) to dst once
// every 200 ms until a reply comes, for up to 5 s: the first requests
// wait for neighbour resolution.
func ping(fd int, dst netip.Addr, seq uint16) error {
	req := []byte{8, 0, 0, 0, 0x67, 0x73, byte(seq >> 8), byte(seq), 'g', 's', 'w'}
	binary.BigEndian.PutUint16(req[2:], checksum(req))
	to := &unix.SockaddrInet4{Addr: dst.As4()}
	buf := make([]byte, 1500)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if err := unix.Sendto(fd, req, 0, to); err != nil {
			return err
		}
		for next := time.Now().Add(200 * time.Millisecond); time.Now().Before(next); {
			n, from, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
					continue
				}
				return err
			}
			src, _ := from.(*unix.SockaddrInet4)
			if n < 20 {
				continue
			}
			ihl := int(buf[0]&0xf) * 4
			m := buf[ihl:n]
			if src != nil && src.Addr == dst.As4() && len(m) >= 8 && m[0] == 0 && m[4] == 0x67 && m[5] == 0x73 &&
				binary.BigEndian.Uint16(m[6:]) == seq {
				return nil
			}
		}
	}
	return errors.New("no echo reply in 5s")
}

func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s>>16 != 0 {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func mustIPNet(s string) *net.IPNet {
	p := netip.MustParsePrefix(s)
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// inNS runs fn on a thread inside ns.
func inNS(t *testing.T, ns netns.NsHandle, fn func()) {
	t.Helper()
	onThreadBack(t, func() {
		if err := netns.Set(ns); err != nil {
			t.Fatal(err)
		}
		fn()
	})
}

// onThreadBack runs fn locked to a thread whose network namespace fn may
// change, and puts the thread back into the namespace it started in
// before unlocking it.
func onThreadBack(t *testing.T, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("cannot return to the original namespace: %v", err)) // the thread is unusable
		}
	}()
	fn()
}

// disableIPv6 turns IPv6 off on an interface of the calling thread's
// namespace, so that it sends no router solicitations or DAD probes.
func disableIPv6(t *testing.T, ifname string) {
	t.Helper()
	err := os.WriteFile(filepath.Join("/proc/sys/net/ipv6/conf", ifname, "disable_ipv6"), []byte("1"), 0)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("disabling IPv6 on %s: %v", ifname, err)
	}
}
