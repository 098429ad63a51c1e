package route

import (
	"net/netip"
	"testing"

	"github.com/gswitch/gswitch/internal/shareddata"
	"github.com/gswitch/gswitch/tables/lpm"
)

// RealRoutes turns the prefixes of a FIB file into routes of table id: each
// prefix gets one to three next hops on ports 1..8, derived from
// lpm.SyntheticNextHop so that they are stable for a prefix.
func realRoutes(id uint32, ps []netip.Prefix) []Route {
	rs := make([]Route, 0, len(ps))
	seen := make(map[netip.Prefix]bool, len(ps))
	for _, p := range ps {
		if seen[p] {
			continue
		}
		seen[p] = true
		h := lpm.SyntheticNextHop(p)
		r := Route{Table: id, Prefix: p, Source: SourceKernel}
		for i := range 1 + h%3 {
			nh := NextHop{Port: 1 + (h+i)%8, Weight: 1 + i}
			if p.Addr().Is4() {
				nh.Gateway = netip.AddrFrom4([4]byte{192, 0, 2, byte(h + i)})
			} else {
				nh.Gateway = netip.AddrFrom16([16]byte{0xfe, 0x80, 15: byte(h + i)})
			}
			r.NextHops = append(r.NextHops, nh)
		}
		rs = append(rs, r)
	}
	return rs
}

// TestRealTable loads the full BGP table of ../shared/data/fib (both
// families; a quarter of it under -race) with Replace into one table and
// with Add into another, and
// checks random and in-table lookups on the CPU and on a mirror fed by
// OnChange against the reference; then withdraws a tenth and checks again.
func TestRealTable(t *testing.T) {
	all, err := lpm.OpenPrefixFile(shareddata.Path(t, "fib/bgp-full-table.txt.gz"))
	mustOK(t, err)
	v4, v6 := lpm.SplitFamilies(all)
	if len(v4) < 800000 || len(v6) < 100000 {
		t.Fatalf("the real table looks truncated: %d IPv4 and %d IPv6 prefixes", len(v4), len(v6))
	}
	// Under -race (what CI runs) or -short: a quarter of the table (265K
	// routes) and fewer lookups; the whole table otherwise.
	n, every := 20000, 1
	if testing.Short() || raceEnabled {
		n, every = 5000, 4
	}
	rs := realRoutes(254, all)
	if every > 1 {
		var sample []Route
		for i := 0; i < len(rs); i += every {
			sample = append(sample, rs[i])
		}
		rs = sample
	}
	ref := newReference()
	for _, r := range rs {
		ref.routes[r.Prefix] = r
	}
	var addrs []netip.Addr
	for _, fam := range []struct {
		f  lpm.Family
		ps []netip.Prefix
	}{{lpm.IPv4, v4}, {lpm.IPv6, v6}} {
		addrs = append(addrs, lpm.RandomAddrs(fam.f, n, 1)...)
		addrs = append(addrs, lpm.TableAddrs(fam.ps, n, 2)...)
	}

	var m mirror
	byReplace, err := New(254, Options{OnChange: m.apply(t)})
	mustOK(t, err)
	mustOK(t, byReplace.Replace(rs))
	checkTable(t, byReplace, ref, &m, addrs)

	byAdd, err := New(254, Options{})
	mustOK(t, err)
	for _, r := range rs {
		mustOK(t, byAdd.Add(r))
	}
	checkTable(t, byAdd, ref, nil, addrs)

	// Withdraw every tenth route, through a resync and through Delete.
	var kept []Route
	for i, r := range rs {
		if i%10 == 0 {
			delete(ref.routes, r.Prefix)
			mustOK(t, byAdd.Delete(r.Prefix))
			continue
		}
		kept = append(kept, r)
	}
	mustOK(t, byReplace.Replace(kept))
	if st := byReplace.Stats(); st.Deletes != uint64(len(rs)-len(kept)) || st.Adds != uint64(len(rs)) {
		t.Fatalf("resync to 90%%: %+v, want %d deletes and no more adds", st, len(rs)-len(kept))
	}
	checkTable(t, byReplace, ref, &m, addrs)
	checkTable(t, byAdd, ref, nil, addrs)
	t.Logf("%d routes of %d prefixes (%d IPv4, %d IPv6), %d lookups checked per table and state", len(rs), len(all), len(v4), len(v6), len(addrs))
}
