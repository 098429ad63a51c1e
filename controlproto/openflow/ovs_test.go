package openflow

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ovsOfctl runs ovs-ofctl -O OpenFlow13 against target.
func ovsOfctl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	defer func() { t.Logf("ovs-ofctl %s: %v", args[0], time.Since(start)) }()
	out, err := exec.CommandContext(ctx, "ovs-ofctl", append([]string{"-O", "OpenFlow13", "--timeout=10"}, args...)...).CombinedOutput()
	return string(out), err
}

// startListener serves sw on a passive listener on 127.0.0.1 and returns
// the ovs-ofctl target.
func startListener(t *testing.T, sw Switch) (string, *Agent) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := NewAgent(sw, Options{Logf: t.Logf})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.ServeListener(ctx, l)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return "tcp:" + l.Addr().String(), a
}

// TestOvsOfctl drives the agent with the real ovs-ofctl (Debian package
// openvswitch-common).
func TestOvsOfctl(t *testing.T) {
	if _, err := exec.LookPath("ovs-ofctl"); err != nil {
		t.Fatalf("ovs-ofctl not found (%v): install the Debian package openvswitch-common (apt-get install -y openvswitch-common)", err)
	}
	sw := newTableSwitch(3, 4)
	target, _ := startListener(t, sw)
	run := func(args ...string) string {
		t.Helper()
		out, err := ovsOfctl(t, append(args[:1:1], append([]string{target}, args[1:]...)...)...)
		if err != nil {
			t.Fatalf("ovs-ofctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	fails := func(want string, args ...string) {
		t.Helper()
		out, err := ovsOfctl(t, append(args[:1:1], append([]string{target}, args[1:]...)...)...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("ovs-ofctl %s: err %v, want failure with %q; output:\n%s", strings.Join(args, " "), err, want, out)
		}
	}

	out := run("show")
	for _, want := range []string{"OFPT_FEATURES_REPLY (OF1.3)", "dpid:0000000000000001", "n_tables:3", "1(p1): addr:02:00:00:00:00:01", "2(p2): addr:02:00:00:00:00:02"} {
		if !strings.Contains(out, want) {
			t.Errorf("show: missing %q in\n%s", want, out)
		}
	}

	run("add-flow", "priority=10,ip,nw_dst=10.0.0.0/8,actions=output:2")
	run("add-flow", "table=1,cookie=0x1234,priority=20,idle_timeout=30,hard_timeout=60,tcp,tp_dst=80,actions=set_field:10.1.2.3->ip_dst,output:1")
	run("add-flow", "priority=5,in_port=1,actions=goto_table:2")
	if n := sw.rules(); n != 3 {
		t.Fatalf("%d rules after three add-flow, want 3", n)
	}
	out = run("dump-flows")
	t.Logf("dump-flows:\n%s", out)
	for _, want := range []string{
		"priority=10,ip,nw_dst=10.0.0.0/8 actions=output:2",
		"cookie=0x1234", "table=1", "idle_timeout=30", "hard_timeout=60",
		"priority=20,tcp,tp_dst=80 actions=set_field:10.1.2.3->ip_dst,output:1",
		"priority=5,in_port=1 actions=goto_table:2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dump-flows: missing %q in\n%s", want, out)
		}
	}
	if out = run("dump-flows", "table=1"); strings.Count(out, "priority=") != 1 {
		t.Errorf("dump-flows table=1: want one flow, got\n%s", out)
	}
	if out = run("dump-aggregate"); !strings.Contains(out, "flow_count=3") {
		t.Errorf("dump-aggregate: want flow_count=3 in\n%s", out)
	}
	if out = run("dump-tables"); !strings.Contains(out, "active=1") {
		t.Errorf("dump-tables: want active=1 in\n%s", out)
	}
	if out = run("dump-ports"); !strings.Contains(out, "port  1") || !strings.Contains(out, "port  2") {
		t.Errorf("dump-ports: want ports 1 and 2 in\n%s", out)
	}

	// Errors the controller cannot catch itself.
	fails("OFPFMFC_BAD_TABLE_ID", "add-flow", "table=7,priority=1,actions=drop")
	fails("OFPBIC_BAD_TABLE_ID", "add-flow", "table=0,priority=1,actions=goto_table:9")
	fails("OFPBMC_BAD_FIELD", "add-flow", "priority=1,tcp,tcp_flags=+syn,actions=drop")
	run("add-flow", "priority=30,check_overlap,ip,nw_src=10.0.0.0/8,actions=drop")
	fails("OFPFMFC_OVERLAP", "add-flow", "priority=30,check_overlap,ip,nw_dst=10.0.0.1,actions=drop")
	run("add-flow", "priority=31,ip,nw_src=10.0.0.1,actions=drop") // the table's fourth rule
	fails("OFPFMFC_TABLE_FULL", "add-flow", "priority=32,ip,nw_src=10.0.0.2,actions=drop")
	if n := sw.rules(); n != 5 {
		t.Fatalf("%d rules after the rejected flows, want 5", n)
	}

	run("del-flows", "ip,nw_dst=10.0.0.0/8")
	out = run("dump-flows")
	if strings.Contains(out, "nw_dst=10.0.0.0/8") || !strings.Contains(out, "in_port=1") {
		t.Errorf("after del-flows ip,nw_dst=10.0.0.0/8:\n%s", out)
	}
	run("del-flows")
	if n := sw.rules(); n != 0 {
		t.Fatalf("%d rules after del-flows, want 0", n)
	}
}
