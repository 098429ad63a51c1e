package kernelfib

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gswitch/gswitch/internal/shareddata"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/route"
)

// fibRoutes makes routes of the FIB file's prefixes (deduplicated) for the
// test table: one to three next hops each on ports 1..4, gateways in the
// ports' subnets, derived from the prefix so they are stable.
func fibRoutes(ps []netip.Prefix, every int) []route.Route {
	seen := make(map[netip.Prefix]bool, len(ps))
	var rs []route.Route
	for i, p := range ps {
		if seen[p] || i%every != 0 {
			continue
		}
		seen[p] = true
		h := lpm.SyntheticNextHop(p)
		r := route.Route{Table: testTable, Prefix: p, Source: route.SourceKernel}
		if !p.Addr().Is4() {
			r.Metric = 1024 // the kernel's default for IPv6
		}
		for k := range 1 + h%3 {
			port := 1 + (h+k)%4
			r.NextHops = append(r.NextHops, route.NextHop{Gateway: gw(int(port), 2+int(h%200), p.Addr().Is4()), Port: port, Weight: 1 + k})
		}
		rs = append(rs, r)
	}
	return rs
}

// TestFullTable loads the BGP table of ../shared/data/fib (IPv4 and IPv6; a
// quarter of it under -race or -short) into a namespace's kernel table
// through netlink while a mirror runs, then checks that the route table holds
// exactly those routes and answers a sample of random and in-table lookups
// like a brute-force reference.
func TestFullTable(t *testing.T) {
	all, err := lpm.OpenPrefixFile(shareddata.Path(t, "fib/bgp-full-table.txt.gz"))
	if err != nil {
		t.Fatal(err)
	}
	every, nAddrs := 1, 20000
	if testing.Short() || raceEnabled {
		every, nAddrs = 4, 5000
	}
	rs := fibRoutes(all, every)
	e := newFibEnv(t, 4)
	m, tb := e.startMirror(t, 64<<20, true, nil)
	ifindexOf := func(port uint32) (int, bool) {
		l, ok := e.links["d"+string(rune('0'+port-1))]
		if !ok {
			return 0, false
		}
		return l.Attrs().Index, true
	}
	t0 := time.Now()
	if err := Install(e.h, rs, ifindexOf); err != nil {
		t.Fatal(err)
	}
	installed := time.Since(t0)
	deadline := time.Now().Add(10 * time.Minute)
	for tb.Len() != len(rs) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 minutes the route table holds %d of %d routes (stats %+v)", tb.Len(), len(rs), m.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	mirrored := time.Since(t0)
	t.Logf("%d routes into the kernel in %v (%.0f routes/s), in the route table after %v; stats %+v",
		len(rs), installed, float64(len(rs))/installed.Seconds(), mirrored, m.Stats())

	want := make(map[netip.Prefix]route.Route, len(rs))
	for _, r := range rs {
		want[r.Prefix] = r
		got, ok := tb.Get(r.Prefix)
		if !ok || !sameRoute(got.Route, r) {
			t.Fatalf("%v: mirrored as %v, want %v", r.Prefix, got, r)
		}
	}
	var v4, v6 []netip.Prefix
	for _, r := range rs {
		if r.Prefix.Addr().Is4() {
			v4 = append(v4, r.Prefix)
		} else {
			v6 = append(v6, r.Prefix)
		}
	}
	addrs := append(lpm.RandomAddrs(lpm.IPv4, nAddrs, 1), lpm.TableAddrs(v4, nAddrs, 2)...)
	addrs = append(addrs, append(lpm.RandomAddrs(lpm.IPv6, nAddrs, 3), lpm.TableAddrs(v6, nAddrs, 4)...)...)
	for _, a := range addrs {
		var wr route.Route
		wok := false
		for l := a.BitLen(); l >= 0 && !wok; l-- {
			p, _ := a.Prefix(l)
			wr, wok = want[p]
		}
		e, ok := tb.Lookup(a)
		if ok != wok || ok && !sameRoute(e.Route, wr) {
			t.Fatalf("Lookup(%v) = %v %v, reference %v %v", a, e, ok, wr, wok)
		}
	}
	t.Logf("%d lookups checked", len(addrs))
}

// sameRoute compares routes with their next hops in any order.
func sameRoute(a, b route.Route) bool {
	c := canonical([]route.Route{a, b})
	return c[0] == c[1]
}
