package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
)

// ctlRoutes runs gswitchctl routes --json against the daemon.
func (d *daemon) ctlRoutes(t *testing.T, table int) ctl.Routes {
	t.Helper()
	out, err := exec.Command(gswitchctlBinary(t), "routes", "--socket", d.ctl, "--json", "--table", fmt.Sprint(table)).CombinedOutput()
	if err != nil {
		t.Fatalf("gswitchctl routes: %v\n%s", err, out)
	}
	var rs ctl.Routes
	if err := json.Unmarshal(out, &rs); err != nil {
		t.Fatalf("gswitchctl routes --json: %v\n%s", err, out)
	}
	return rs
}

func findRoute(rs ctl.Routes, prefix string) (ctl.RouteInfo, bool) {
	for _, r := range rs.Routes {
		if r.Prefix == prefix {
			return r, true
		}
	}
	return ctl.RouteInfo{}, false
}

// TestRoutesSources: gswitchd with a static route from its YAML file and
// the kernel FIB mirror of table 100 in its namespace; gswitchctl routes
// shows both with their sources, a route added with ip route appears and
// carries traffic (pings counted on the route and its next hop), and once
// deleted it is gone from the table and from the datapath.
func TestRoutesSources(t *testing.T) {
	tp := newRoutedTopo(t, 2)
	for _, a := range []string{"198.51.100.1/32", "203.0.113.1/32"} {
		sh(t, "ip", "-n", tp.hosts[1], "addr", "add", a, "dev", "lo")
	}
	cfg := filepath.Join(t.TempDir(), "gswitchd.yaml")
	yaml := "routes:\n  - {table: 100, prefix: 203.0.113.0/24, next_hops: [{gateway: 10.0.2.2, port: 2}]}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	var args []string
	for i := 1; i <= 2; i++ {
		args = append(args, "--router-port", fmt.Sprintf("%d=10.0.%d.1/24,2001:db8:%d::1/64,table=100", i, i, i))
	}
	d := startGswitchd(t, tp, append(args, "--config", cfg, "--kernel-fib-table", "100")...)

	rs := d.ctlRoutes(t, 100)
	st, ok := findRoute(rs, "203.0.113.0/24")
	if !ok || st.Source != "static" || len(st.NextHops) != 1 || st.NextHops[0].Gateway != "10.0.2.2" || st.NextHops[0].Port != 2 {
		t.Fatalf("static route: %+v (%v) in %+v", st, ok, rs)
	}
	if len(rs.Tables) != 1 || rs.Tables[0].Sources["kernel"]["resyncs"] != 1 {
		t.Fatalf("table 100: %+v, want the kernel mirror's counters after its first dump", rs.Tables)
	}

	sh(t, "ip", "-n", tp.sw, "route", "add", "198.51.100.0/24", "via", "10.0.2.2", "dev", "swp2", "onlink", "table", "100")
	if !waitFor(5*time.Second, func() bool { _, ok := findRoute(d.ctlRoutes(t, 100), "198.51.100.0/24"); return ok }) {
		t.Fatalf("the kernel route did not appear in gswitchctl routes\n%s", d.log.String())
	}
	if out, err := tp.pingOut(t, 1, "-c", "2", "-i", "0.2", "-W", "2", "10.0.2.2"); err != nil { // resolve h2
		t.Fatalf("%v\n%s", err, out)
	}
	for _, dst := range []string{"198.51.100.1", "203.0.113.1"} {
		if out, err := tp.pingOut(t, 1, "-c", "5", "-i", "0.1", "-W", "2", dst); err != nil {
			t.Fatalf("ping %s through the route: %v\n%s", dst, err, out)
		}
	}
	rs = d.ctlRoutes(t, 100)
	for _, c := range []struct{ prefix, source string }{{"198.51.100.0/24", "kernel"}, {"203.0.113.0/24", "static"}} {
		r, _ := findRoute(rs, c.prefix)
		if r.Source != c.source || r.Packets < 5 || r.Bytes < 5*84 || len(r.NextHops) != 1 || r.NextHops[0].Packets != r.Packets {
			t.Errorf("%s after 5 pings: %+v, want source %s, >= 5 packets counted on the route and its next hop", c.prefix, r, c.source)
		}
	}
	out, err := exec.Command(gswitchctlBinary(t), "routes", "--socket", d.ctl).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "198.51.100.0/24") || !strings.Contains(string(out), "kernel: ") {
		t.Errorf("gswitchctl routes (table): %v\n%s", err, out)
	}
	t.Logf("gswitchctl routes:\n%s", out)

	sh(t, "ip", "-n", tp.sw, "route", "del", "198.51.100.0/24", "table", "100")
	if !waitFor(5*time.Second, func() bool { _, ok := findRoute(d.ctlRoutes(t, 100), "198.51.100.0/24"); return !ok }) {
		t.Fatalf("the deleted kernel route is still in gswitchctl routes")
	}
	if out, err := tp.pingOut(t, 1, "-c", "3", "-i", "0.2", "-W", "1", "198.51.100.1"); err == nil {
		t.Fatalf("ping through a deleted route got replies:\n%s", out)
	}
}
