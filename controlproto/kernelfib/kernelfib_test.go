package kernelfib

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/gswitch/gswitch/tables/route"
)

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// TestMirrorFollowsKernel starts a mirror on a table that already holds
// routes (the dump), then changes the kernel table with iproute2 and netlink:
// adds, replaces, deletes, metrics, IPv4 and IPv6 multipath (ECMP, appends
// and sibling deletes), on-link routes, routes through a non-port interface
// and non-unicast routes. After each step the route table must equal the
// kernel's as `ip -j route show` prints it.
func TestMirrorFollowsKernel(t *testing.T) {
	e := newFibEnv(t, 3)
	tbl := fmt.Sprint(testTable)
	// Before the mirror starts: loaded by the dump.
	e.ip(t, "route", "add", "10.1.0.0/16", "via", "10.255.1.2", "table", tbl)
	e.ip(t, "-6", "route", "add", "2001:db8:1::/48", "via", "2001:db8:ff:1::2", "table", tbl)
	e.ip(t, "route", "add", "blackhole", "10.9.0.0/16", "table", tbl)
	m, tb := e.startMirror(t, 0, false, nil)
	e.waitEqual(t, tb, "initial dump")
	if tb.Len() != 2 {
		t.Fatalf("after the dump: %d routes, want 2: %v", tb.Len(), tb.Routes())
	}

	steps := []struct {
		name string
		args []string
	}{
		{"add v4", []string{"route", "add", "10.2.0.0/16", "via", "10.255.2.2", "table", tbl}},
		{"add v4 host", []string{"route", "add", "10.3.0.1/32", "via", "10.255.3.7", "table", tbl}},
		{"add v4 on-link", []string{"route", "add", "10.4.0.0/24", "dev", "d1", "table", tbl}},
		{"add v4 default", []string{"route", "add", "default", "via", "10.255.1.9", "table", tbl}},
		{"replace v4", []string{"route", "replace", "10.2.0.0/16", "via", "10.255.3.2", "table", tbl}},
		{"v4 ECMP", []string{"route", "add", "10.5.0.0/16", "table", tbl, "nexthop", "via", "10.255.1.2", "weight", "3", "nexthop", "via", "10.255.2.2", "nexthop", "dev", "d2"}},
		{"replace v4 ECMP", []string{"route", "replace", "10.5.0.0/16", "table", tbl, "nexthop", "via", "10.255.1.2", "nexthop", "via", "10.255.3.2", "weight", "2"}},
		{"higher metric hidden", []string{"route", "add", "10.2.0.0/16", "via", "10.255.1.5", "metric", "50", "table", tbl}},
		{"lowest metric gone, the next in use", []string{"route", "del", "10.2.0.0/16", "metric", "0", "table", tbl}},
		{"lower metric wins", []string{"route", "add", "10.2.0.0/16", "via", "10.255.2.5", "metric", "7", "table", tbl}},
		{"through a non-port", []string{"route", "add", "10.6.0.0/16", "via", "10.255.0.2", "table", tbl}},
		{"ECMP with a non-port path", []string{"route", "add", "10.7.0.0/16", "table", tbl, "nexthop", "via", "10.255.1.2", "nexthop", "via", "10.255.0.2"}},
		{"unreachable", []string{"route", "add", "unreachable", "10.8.0.0/16", "table", tbl}},
		{"del v4", []string{"route", "del", "10.1.0.0/16", "table", tbl}},
		{"v4 alias", []string{"route", "add", "10.30.0.0/16", "via", "10.255.2.2", "table", tbl}},
		{"v4 append: a hidden alias", []string{"route", "append", "10.30.0.0/16", "via", "10.255.1.2", "table", tbl}},
		{"v4 prepend: the new alias in use", []string{"route", "prepend", "10.30.0.0/16", "via", "10.255.3.2", "table", tbl}},
		{"v4 first alias deleted", []string{"route", "del", "10.30.0.0/16", "via", "10.255.3.2", "table", tbl}},
		{"v4 alias in use deleted, the appended one in use", []string{"route", "del", "10.30.0.0/16", "via", "10.255.2.2", "table", tbl}},
		{"v4 appended alias replaced", []string{"route", "replace", "10.30.0.0/16", "via", "10.255.3.9", "table", tbl}},
		{"v6 ECMP", []string{"-6", "route", "add", "2001:db8:2::/48", "table", tbl, "nexthop", "via", "2001:db8:ff:1::2", "nexthop", "via", "2001:db8:ff:2::2"}},
		{"v6 append", []string{"-6", "route", "append", "2001:db8:2::/48", "via", "2001:db8:ff:3::2", "table", tbl}},
		{"v6 sibling delete", []string{"-6", "route", "del", "2001:db8:2::/48", "via", "2001:db8:ff:1::2", "table", tbl}},
		{"v6 replace", []string{"-6", "route", "replace", "2001:db8:2::/48", "via", "2001:db8:ff:2::9", "table", tbl}},
		{"v6 default", []string{"-6", "route", "add", "default", "via", "2001:db8:ff:1::1:1", "table", tbl}},
		{"v6 on-link", []string{"-6", "route", "add", "2001:db8:3::/64", "dev", "d2", "table", tbl}},
		{"v6 del", []string{"-6", "route", "del", "2001:db8:1::/48", "table", tbl}},
		{"onlink", []string{"route", "add", "198.51.100.0/24", "via", "10.255.2.2", "dev", "d1", "onlink", "table", tbl}},
		{"onlink deleted", []string{"route", "del", "198.51.100.0/24", "table", tbl}},
		{"other table ignored", []string{"route", "add", "10.10.0.0/16", "via", "10.255.1.2", "table", "101"}},
	}
	for _, s := range steps {
		e.ip(t, s.args...)
		e.waitEqual(t, tb, s.name)
	}
	// Spot checks beside the comparison with iproute2.
	ecmp, ok := tb.Get(netip.MustParsePrefix("10.5.0.0/16"))
	if !ok || len(ecmp.NextHops) != 2 || ecmp.NextHops[1] != (route.NextHop{Gateway: netip.MustParseAddr("10.255.3.2"), Port: 3, Weight: 2}) {
		t.Errorf("ECMP route: %v", ecmp)
	}
	if _, ok := tb.Get(netip.MustParsePrefix("10.7.0.0/16")); ok {
		t.Error("an ECMP route with a path through a non-port interface was mirrored")
	}

	// The same through netlink calls.
	h := e.h
	d0 := e.links["d0"].Attrs().Index // port 1, 10.255.1.0/24
	d1 := e.links["d1"].Attrs().Index // port 2, 10.255.2.0/24
	nr := &netlink.Route{Table: testTable, Dst: ipnet(netip.MustParsePrefix("10.20.0.0/16")), MultiPath: []*netlink.NexthopInfo{
		{LinkIndex: d0, Gw: net.ParseIP("10.255.1.2"), Hops: 4}, {LinkIndex: d1, Gw: net.ParseIP("10.255.2.2")},
	}}
	if err := h.RouteAdd(nr); err != nil {
		t.Fatal(err)
	}
	e.waitEqual(t, tb, "netlink ECMP add")
	if r, _ := tb.Get(netip.MustParsePrefix("10.20.0.0/16")); r == nil || r.NextHops[0].Weight != 5 {
		t.Errorf("netlink ECMP route: %v (weight 5 = rtnh_hops 4 + 1 expected first)", r)
	}
	if err := h.RouteDel(nr); err != nil {
		t.Fatal(err)
	}
	e.waitEqual(t, tb, "netlink ECMP delete")
	st := m.Stats()
	t.Logf("stats: %+v", st)
	if st.Skipped == 0 || st.Adds == 0 || st.Deletes == 0 || st.Resyncs != 1 || st.Overflows != 0 {
		t.Errorf("counters do not match what was done: %+v", st)
	}
}

// TestOverflowResync forces the subscription socket to overflow: a tiny
// receive buffer and a reader slowed down while thousands of routes are
// added and deleted in a burst. The mirror must count the overflow, resync
// from a fresh dump and end equal to the kernel's table.
func TestOverflowResync(t *testing.T) {
	e := newFibEnv(t, 2)
	slow := make(chan struct{})
	m, tb := e.startMirror(t, 4096, true, func() {
		select {
		case <-slow:
		default:
			time.Sleep(200 * time.Microsecond)
		}
	})
	d0 := e.links["d0"].Attrs().Index
	const n = 5000
	for i := range n {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{20, byte(i >> 8), byte(i), 0}), 24)
		if err := e.h.RouteAdd(&netlink.Route{Table: testTable, Dst: ipnet(p), LinkIndex: d0, Gw: net.ParseIP("10.255.1.2")}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 && i > 0 {
			q := netip.PrefixFrom(netip.AddrFrom4([4]byte{20, byte((i - 1) >> 8), byte(i - 1), 0}), 24)
			if err := e.h.RouteDel(&netlink.Route{Table: testTable, Dst: ipnet(q)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(slow)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := m.WaitResyncs(ctx, 2); err != nil {
		t.Fatalf("no resync after a burst into a 4 KB socket: %v (stats %+v)", err, m.Stats())
	}
	e.waitEqual(t, tb, "after the overflow")
	st := m.Stats()
	t.Logf("stats: %+v, %d routes", st, tb.Len())
	if st.Overflows == 0 {
		t.Errorf("no overflow counted: %+v", st)
	}
	if want := n - (n-1)/3; tb.Len() != want {
		t.Errorf("%d routes, want %d", tb.Len(), want)
	}
}

// TestConfigErrors checks New's validation.
func TestConfigErrors(t *testing.T) {
	tb, _ := route.New(5, route.Options{})
	pf := func(int) (uint32, bool) { return 1, true }
	for _, c := range []Config{
		{Table: 0, PortOf: pf},
		{Table: 6, PortOf: pf},
		{Table: 5},
		{Table: 5, PortOf: pf, ReceiveBuffer: -1},
	} {
		if _, err := New(c, tb); err == nil {
			t.Errorf("New(%+v) accepted", c)
		} else {
			t.Log(err)
		}
	}
}

// TestBurstBatched: route messages that queue up behind one being applied
// reach the route table as a few batches (route.Table.Update), not as a
// publication each, and the table ends equal to the kernel's.
func TestBurstBatched(t *testing.T) {
	e := newFibEnv(t, 2)
	gate := make(chan struct{})
	var once sync.Once
	m, tb := e.startMirror(t, 8<<20, true, func() {
		once.Do(func() { <-gate }) // hold the first message until the burst is queued
	})
	pub0 := tb.Stats().Publications
	d0 := e.links["d0"].Attrs().Index
	const n = 3000
	for i := range n {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{21, byte(i >> 8), byte(i), 0}), 24)
		if err := e.h.RouteAdd(&netlink.Route{Table: testTable, Dst: ipnet(p), LinkIndex: d0, Gw: net.ParseIP("10.255.1.2")}); err != nil {
			t.Fatal(err)
		}
	}
	close(gate)
	e.waitEqual(t, tb, "after the burst")
	pubs := tb.Stats().Publications - pub0
	t.Logf("%d route messages, %d publications; stats %+v", n, pubs, m.Stats())
	if tb.Len() < n {
		t.Fatalf("%d routes, want at least %d", tb.Len(), n)
	}
	if pubs > n/10 {
		t.Errorf("%d publications for a queued burst of %d messages: not batched", pubs, n)
	}
}
