package kernelfib

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/gswitch/gswitch/tables/route"
)

const testTable = 100

// fibEnv is a fresh named network namespace with veth interfaces d0..dN-1
// (ports 1..N) and x0 (no port), each with an IPv4 /24 and an IPv6 /64.
type fibEnv struct {
	name  string
	ns    netns.NsHandle
	h     *netlink.Handle
	ports map[int]uint32 // ifindex -> port
	links map[string]netlink.Link
}

var nsSeq atomic.Int32

func newFibEnv(t *testing.T, nports int) *fibEnv {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("kernelfib tests need root (network namespaces, netlink route changes): run them as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("kernelfib tests need ip (Debian package iproute2) to drive and read the kernel's routes")
	}
	e := &fibEnv{name: fmt.Sprintf("gsw-kfib-%d-%d", os.Getpid(), nsSeq.Add(1)), ports: map[int]uint32{}, links: map[string]netlink.Link{}}
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, err := netns.Get()
		if err != nil {
			t.Fatal(err)
		}
		defer orig.Close()
		e.ns, err = netns.NewNamed(e.name) // enters it
		if serr := netns.Set(orig); serr != nil {
			panic(fmt.Sprintf("cannot return to the original namespace: %v", serr))
		}
		if err != nil {
			t.Fatalf("creating namespace %s: %v", e.name, err)
		}
	}()
	t.Cleanup(func() {
		e.ns.Close()
		netns.DeleteNamed(e.name)
	})
	var err error
	if e.h, err = netlink.NewHandleAt(e.ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.h.Close)
	names := []string{"x0"}
	for i := range nports {
		names = append(names, fmt.Sprintf("d%d", i))
	}
	for i, name := range names {
		v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "p" + name}
		if err := e.h.LinkAdd(v); err != nil {
			t.Fatalf("veth %s: %v", name, err)
		}
		for _, n := range []string{name, "p" + name} {
			l, err := e.h.LinkByName(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.h.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
		}
		l, _ := e.h.LinkByName(name)
		e.links[name] = l
		for _, a := range []string{fmt.Sprintf("10.255.%d.1/24", i), fmt.Sprintf("2001:db8:ff:%d::1/64", i)} {
			addr, _ := netlink.ParseAddr(a)
			addr.Flags = 0x02 // IFA_F_NODAD: usable at once
			if err := e.h.AddrAdd(l, addr); err != nil {
				t.Fatalf("address %s on %s: %v", a, name, err)
			}
		}
		if name != "x0" {
			e.ports[l.Attrs().Index] = uint32(i) // d0 -> port 1, ...
		}
	}
	return e
}

func (e *fibEnv) portOf(ifindex int) (uint32, bool) {
	p, ok := e.ports[ifindex]
	return p, ok
}

// gw returns the address host of interface i's subnets (i = 0 is x0, 1.. the
// ports), of IPv4 or IPv6.
func gw(i, host int, v4 bool) netip.Addr {
	if v4 {
		return netip.AddrFrom4([4]byte{10, 255, byte(i), byte(host)})
	}
	return netip.MustParseAddr(fmt.Sprintf("2001:db8:ff:%d::%x", i, host))
}

// ip runs iproute2 in the namespace.
func (e *fibEnv) ip(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", e.name}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// startMirror runs a mirror of testTable into a fresh route table and waits
// for its first dump.
func (e *fibEnv) startMirror(t *testing.T, rcvbuf int, force bool, hook func()) (*Mirror, *route.Table) {
	t.Helper()
	tb, err := route.New(testTable, route.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(Config{Table: testTable, Namespace: &e.ns, PortOf: e.portOf, ReceiveBuffer: rcvbuf, ForceReceiveBuffer: force}, tb)
	if err != nil {
		t.Fatal(err)
	}
	m.testHook = hook
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-m.Synced():
	case err := <-done:
		t.Fatalf("Run ended before the first dump: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("no first dump after 60s")
	}
	return m, tb
}

// ipRoute is one route of `ip -j route show`.
type ipRoute struct {
	Type     string `json:"type"`
	Dst      string `json:"dst"`
	Gateway  string `json:"gateway"`
	Dev      string `json:"dev"`
	Metric   uint32 `json:"metric"`
	Nexthops []struct {
		Gateway string `json:"gateway"`
		Dev     string `json:"dev"`
		Weight  uint32 `json:"weight"`
	} `json:"nexthops"`
}

// kernelRoutes is the reference: the table as iproute2 prints it, reduced
// independently of the package to the routes it must mirror (unicast, the
// lowest metric of each prefix, every next hop on a port).
func (e *fibEnv) kernelRoutes(t *testing.T) []route.Route {
	t.Helper()
	best := map[netip.Prefix]ipRoute{}
	for _, fam := range []string{"-4", "-6"} {
		out, err := exec.Command("ip", "-n", e.name, "-j", fam, "route", "show", "table", fmt.Sprint(testTable)).Output()
		if err != nil {
			if ee, ok := err.(*exec.ExitError); ok && strings.Contains(string(ee.Stderr), "does not exist") {
				continue // the kernel has no such table (yet)
			}
			t.Fatalf("ip -j %s route show: %v", fam, err)
		}
		var rs []ipRoute
		if err := json.Unmarshal(out, &rs); err != nil {
			t.Fatalf("ip -j %s route show: %v: %s", fam, err, out)
		}
		for _, r := range rs {
			if r.Type != "" && r.Type != "unicast" {
				continue
			}
			p := parseDst(t, r.Dst, fam == "-4")
			if b, ok := best[p]; !ok || r.Metric < b.Metric {
				best[p] = r
			}
		}
	}
	var out []route.Route
	for p, r := range best {
		rt := route.Route{Table: testTable, Prefix: p, Source: route.SourceKernel, Metric: r.Metric}
		add := func(g, dev string, w uint32) bool {
			l, ok := e.links[dev]
			if !ok || e.ports[l.Attrs().Index] == 0 {
				return false
			}
			h := route.NextHop{Port: e.ports[l.Attrs().Index], Weight: max(w, 1)}
			if g != "" {
				h.Gateway = netip.MustParseAddr(g)
			}
			rt.NextHops = append(rt.NextHops, h)
			return true
		}
		ok := true
		if len(r.Nexthops) == 0 {
			ok = add(r.Gateway, r.Dev, 1)
		}
		for _, h := range r.Nexthops {
			ok = ok && add(h.Gateway, h.Dev, h.Weight)
		}
		if ok {
			out = append(out, rt)
		}
	}
	return out
}

func parseDst(t *testing.T, dst string, v4 bool) netip.Prefix {
	t.Helper()
	if dst == "default" {
		if v4 {
			return netip.MustParsePrefix("0.0.0.0/0")
		}
		return netip.MustParsePrefix("::/0")
	}
	if !strings.Contains(dst, "/") {
		a := netip.MustParseAddr(dst)
		return netip.PrefixFrom(a, a.BitLen())
	}
	return netip.MustParsePrefix(dst)
}

// canonical orders routes by prefix and each route's next hops, for
// comparing sets.
func canonical(rs []route.Route) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		hs := make([]string, len(r.NextHops))
		for j, h := range r.NextHops {
			hs[j] = h.String()
		}
		slices.Sort(hs)
		out[i] = fmt.Sprintf("%v metric %d: %s", r.Prefix, r.Metric, strings.Join(hs, ", "))
	}
	slices.Sort(out)
	return out
}

// waitEqual waits until the route table equals the kernel's table.
func (e *fibEnv) waitEqual(t *testing.T, tb *route.Table, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		want := canonical(e.kernelRoutes(t))
		got := canonical(tb.Routes())
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the route table does not follow the kernel's:\n got  %q\n want %q", what, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
