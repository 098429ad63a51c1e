package integration

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/pipeline"
)

// table0 returns table 0's row of gswitchctl show tables and its TableInfo
// from the control socket.
func table0(t *testing.T, d *daemon) (string, pipeline.TableInfo) {
	t.Helper()
	out, err := exec.Command(gswitchctlBinary(t), "show", "--socket", d.ctl, "tables").CombinedOutput()
	if err != nil {
		t.Fatalf("gswitchctl show tables: %v\n%s", err, out)
	}
	row := ""
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == "0" {
			row = line
		}
	}
	c := ctl.NewClient(d.ctl)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ts, err := c.Tables(ctx)
	if err != nil || len(ts) == 0 {
		t.Fatalf("tables over the control socket: %v (%d tables)", err, len(ts))
	}
	return row, ts[0]
}

// TestLPMShapedTableWithOvsOfctl installs a routing table with ovs-ofctl
// (ip,nw_dst prefixes at priority = prefix length, a table-miss that
// floods ARP): gswitchctl reports it served by LPM and pings follow the
// longest prefix (10.9.1.3 of host 3 by its /24, 10.9.2.2 of host 2 by
// the covering /16). A /16 at a priority above the /24 breaks the shape:
// the classifier serves the table and OpenFlow priorities decide (host 3
// gets both, host 2 is cut off); deleting it brings LPM back.
func TestLPMShapedTableWithOvsOfctl(t *testing.T) {
	tp := newTopo(t, 3)
	sh(t, "ip", "-n", tp.hosts[0], "route", "add", "10.9.0.0/16", "dev", "eth0")
	sh(t, "ip", "-n", tp.hosts[1], "addr", "add", "10.9.2.2/32", "dev", "eth0")
	sh(t, "ip", "-n", tp.hosts[2], "addr", "add", "10.9.1.3/32", "dev", "eth0")
	d := startWithListener(t, tp)
	for _, f := range []string{
		"priority=0,actions=FLOOD",
		"priority=16,ip,nw_dst=10.9.0.0/16,actions=output:2",
		"priority=24,ip,nw_dst=10.9.1.0/24,actions=output:3",
		"priority=32,ip,nw_dst=10.0.0.1/32,actions=output:1",
		"priority=24,ip,nw_dst=10.0.0.0/24,actions=FLOOD",
	} {
		d.mustOfctl(t, "add-flow", f)
	}
	row, ti := table0(t, d)
	if f := strings.Fields(row); ti.Search != "lpm" || len(f) < 5 || f[4] != "lpm" { // TABLE ACTIVE LOOKUPS MATCHED SEARCH ...
		t.Fatalf("routing table not served by LPM: show tables row %q, %+v", row, ti.LPM)
	}
	if ti.LPM.Rules != 4 || ti.LPM.Groups != 2 || ti.LPM.Images != 1 {
		t.Errorf("LPM info %+v: want 4 prefix rules in 2 groups (IPv4; IPv6 for the table-miss), one LPM image", ti.LPM)
	}
	if err := tp.ping(t, 1, "10.9.1.3", 3); err != nil {
		t.Fatalf("10.9.1.3 by its /24: %v", err)
	}
	if err := tp.ping(t, 1, "10.9.2.2", 3); err != nil {
		t.Fatalf("10.9.2.2 by the /16: %v", err)
	}
	dump := d.mustOfctl(t, "dump-flows")
	for _, c := range []struct {
		sub string
		min int
	}{{"nw_dst=10.9.1.0/24", 3}, {"nw_dst=10.9.0.0/16", 3}, {"nw_dst=10.0.0.1", 6}} {
		if n, ok := nPackets(t, dump, c.sub); !ok || n < c.min {
			t.Errorf("%s: n_packets %d, want at least %d:\n%s", c.sub, n, c.min, dump)
		}
	}

	// A /16 above the /24: no longer LPM-shaped.
	d.mustOfctl(t, "add-flow", "cookie=0x99,priority=40,ip,nw_dst=10.9.0.0/16,actions=output:3")
	row, ti = table0(t, d)
	if ti.Search == "lpm" || ti.LPM.Conflicts == 0 || !strings.Contains(row, "not lpm") {
		t.Fatalf("after a /16 above the /24: show tables row %q, %+v; want the classifier, with a conflict", row, ti.LPM)
	}
	if err := tp.ping(t, 1, "10.9.1.3", 2); err != nil {
		t.Fatalf("10.9.1.3 by the priority-40 /16 (port 3): %v", err)
	}
	if err := tp.ping(t, 1, "10.9.2.2", 2); err == nil {
		t.Fatal("10.9.2.2 reached host 2 although the priority-40 /16 sends it to port 3")
	}
	d.mustOfctl(t, "del-flows", "cookie=0x99/-1")
	if _, ti = table0(t, d); ti.Search != "lpm" || ti.LPM.Transitions != 3 {
		t.Fatalf("after deleting it: search %q, %+v; want lpm after 3 transitions", ti.Search, ti.LPM)
	}
	if err := tp.ping(t, 1, "10.9.2.2", 2); err != nil {
		t.Fatalf("10.9.2.2 by the /16 again: %v", err)
	}
}
