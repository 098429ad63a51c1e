package agent

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/internal/shareddata"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/route"
)

// TestStaticRoutesRealTable writes a sample of the BGP table of
// ../shared/data/fib (IPv4 and IPv6; every 10th prefix, every 40th under
// -short, all with GSWITCH_ROUTES_FULL=1) as a routes: list, loads it through gswitchd's configuration
// (file, defaults, checks), installs it into a route table and checks
// random and in-table lookups against a brute-force reference.
func TestStaticRoutesRealTable(t *testing.T) {
	all, err := lpm.OpenPrefixFile(shareddata.Path(t, "fib/bgp-full-table.txt.gz"))
	if err != nil {
		t.Fatal(err)
	}
	every := 10
	if testing.Short() {
		every = 40
	}
	if os.Getenv("GSWITCH_ROUTES_FULL") == "1" {
		every = 1 // the whole table (about 1.06M routes; a minute and some GB without -race)
	}
	var b strings.Builder
	b.WriteString("ports:\n  - {number: 1, interface: lo}\n")
	b.WriteString("router:\n  ports:\n    - {port: 1, addresses: [10.0.1.1/24, 2001:db8:1::1/64]}\n")
	b.WriteString("routes:\n")
	want := map[netip.Prefix]string{}
	for i := 0; i < len(all); i += every {
		p := all[i]
		if _, dup := want[p]; dup {
			continue
		}
		gw := fmt.Sprintf("10.0.1.%d", 2+i%200)
		if !p.Addr().Is4() {
			gw = fmt.Sprintf("2001:db8:1::%x", 2+i%200)
		}
		want[p] = gw
		fmt.Fprintf(&b, "  - {prefix: %v, next_hops: [{gateway: %s, port: 1}]}\n", p, gw)
	}
	file := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := loadArgs(t, "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := staticRoutes(&st.Config)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(want) {
		t.Fatalf("%d routes from the file, want %d", len(rs), len(want))
	}
	tb, err := route.New(defaultRouteTable, route.Options{PortOK: func(p uint32) bool { return p == 1 }})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if err := tb.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	var ps4, ps6 []netip.Prefix
	for p := range want {
		if p.Addr().Is4() {
			ps4 = append(ps4, p)
		} else {
			ps6 = append(ps6, p)
		}
	}
	addrs := append(lpm.RandomAddrs(lpm.IPv4, 20000, 1), lpm.TableAddrs(ps4, 20000, 2)...)
	addrs = append(addrs, append(lpm.RandomAddrs(lpm.IPv6, 20000, 3), lpm.TableAddrs(ps6, 20000, 4)...)...)
	for _, a := range addrs {
		var wp netip.Prefix
		for l := a.BitLen(); l >= 0; l-- {
			p, _ := a.Prefix(l)
			if _, ok := want[p]; ok {
				wp = p
				break
			}
		}
		e, ok := tb.Lookup(a)
		switch {
		case ok != wp.IsValid():
			t.Fatalf("Lookup(%v) = %v, reference %v", a, e, wp)
		case ok && (e.Prefix != wp || e.NextHops[0].Gateway.String() != want[wp] || e.Source != route.SourceStatic):
			t.Fatalf("Lookup(%v) = %v, reference %v via %s", a, e.Route, wp, want[wp])
		}
	}
	t.Logf("%d static routes (%d IPv4, %d IPv6) from YAML, %d lookups checked", len(rs), len(ps4), len(ps6), len(addrs))
}
