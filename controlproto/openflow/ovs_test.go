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
	// Open vSwitch's OpenFlow 1.3 extensions: tcp_flags (the ONF
	// experimenter field) and a masked transport port, as ovs-ofctl
	// sends them, and back in the flow stats.
	run("add-flow", "priority=1,tcp,tcp_flags=+syn-ack,tp_dst=0x400/0xfc00,actions=drop")
	if out = run("dump-flows"); !strings.Contains(out, "priority=1,tcp,tp_dst=0x400/0xfc00,tcp_flags=+syn-ack actions=drop") {
		t.Errorf("dump-flows: no tcp_flags or masked tp_dst in\n%s", out)
	}
	run("del-flows", "--strict", "priority=1,tcp,tcp_flags=+syn-ack,tp_dst=0x400/0xfc00")
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

// TestOvsOfctlGroupsMeters drives groups, meters, port and table
// configuration with the real ovs-ofctl, against a switch that implements
// every optional interface with GroupTable and MeterTable.
func TestOvsOfctlGroupsMeters(t *testing.T) {
	if _, err := exec.LookPath("ovs-ofctl"); err != nil {
		t.Fatalf("ovs-ofctl not found (%v): install the Debian package openvswitch-common", err)
	}
	sw := newFullSwitch(3, 16)
	target, a := startListener(t, sw)
	sw.agent = a
	ofctl := func(args ...string) (string, error) {
		t.Helper()
		return ovsOfctl(t, append(args[:1:1], append([]string{target}, args[1:]...)...)...)
	}
	run := func(args ...string) string {
		t.Helper()
		out, err := ofctl(args...)
		if err != nil {
			t.Fatalf("ovs-ofctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	fails := func(want string, args ...string) {
		t.Helper()
		before := sw.state()
		out, err := ofctl(args...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("ovs-ofctl %s: err %v, want failure with %q; output:\n%s", strings.Join(args, " "), err, want, out)
		}
		if after := sw.state(); after != before {
			t.Fatalf("ovs-ofctl %s failed but changed the switch:\n%s\n%s", strings.Join(args, " "), before, after)
		}
	}
	contains := func(what, out string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("%s: missing %q in\n%s", what, w, out)
			}
		}
	}

	// Groups.
	run("add-group", "group_id=1,type=all,bucket=output:1,bucket=output:2")
	run("add-group", "group_id=2,type=select,bucket=weight:30,output:1,bucket=weight:70,output:2")
	run("add-group", "group_id=3,type=indirect,bucket=group:1")
	run("add-group", "group_id=4,type=ff,bucket=watch_port:1,output:1,bucket=watch_port:2,output:2")
	out := run("dump-groups")
	t.Logf("dump-groups:\n%s", out)
	contains("dump-groups", out,
		"group_id=1,type=all,bucket=actions=output:1,bucket=actions=output:2",
		"group_id=2,type=select,bucket=weight:30,actions=output:1,bucket=weight:70,actions=output:2",
		"group_id=3,type=indirect,bucket=actions=group:1",
		"group_id=4,type=ff,bucket=watch_port:1,actions=output:1,bucket=watch_port:2,actions=output:2")
	fails("OFPGMFC_GROUP_EXISTS", "add-group", "group_id=1,type=all,bucket=output:1")
	fails("OFPGMFC_LOOP", "mod-group", "group_id=1,type=all,bucket=group:3")
	fails("OFPGMFC_LOOP", "add-group", "group_id=5,type=all,bucket=group:5")
	fails("OFPBAC_BAD_OUT_GROUP", "add-group", "group_id=5,type=all,bucket=group:99")
	fails("OFPGMFC_UNKNOWN_GROUP", "mod-group", "group_id=9,type=all,bucket=output:1")
	fails("OFPGMFC_CHAINED_GROUP", "del-groups", "group_id=1")
	fails("OFPBAC_BAD_OUT_GROUP", "add-flow", "priority=1,actions=group:42")
	run("mod-group", "group_id=2,type=select,bucket=weight:50,output:2")

	run("add-flow", "priority=7,in_port=1,actions=group:2")
	sw.groups.Count(2, 0, 100)
	out = run("dump-group-stats")
	t.Logf("dump-group-stats:\n%s", out)
	contains("dump-group-stats", out, "group_id=2,duration=", "ref_count=1,packet_count=1,byte_count=100,bucket0:packet_count=1,byte_count=100",
		"group_id=1,duration=", "ref_count=1,packet_count=0") // group 3 forwards to group 1
	out = run("dump-group-features")
	contains("dump-group-features", out, "all group:", "select group:", "indirect group:", "fast failover group:", "max_groups=0x8")

	// Deleting a group deletes the flows that forward to it.
	run("del-groups", "group_id=2")
	if n := sw.rules(); n != 0 {
		t.Errorf("%d rules after deleting their group, want 0", n)
	}
	run("del-groups")
	if out = run("dump-groups"); strings.Contains(out, "group_id") {
		t.Errorf("groups left after del-groups:\n%s", out)
	}

	// Meters.
	run("add-meter", "meter=1,kbps,burst,stats,band=type=drop,rate=1000,burst_size=100")
	run("add-meter", "meter=2,pktps,band=type=dscp_remark,rate=50,prec_level=1")
	out = run("dump-meters")
	t.Logf("dump-meters:\n%s", out)
	contains("dump-meters", out, "meter=1 kbps burst stats bands=\ntype=drop rate=1000 burst_size=100", "meter=2 pktps bands=\ntype=dscp_remark rate=50 prec_level=1")
	fails("OFPMMFC_METER_EXISTS", "add-meter", "meter=1,kbps,band=type=drop,rate=5")
	fails("OFPMMFC_UNKNOWN_METER", "mod-meter", "meter=7,kbps,band=type=drop,rate=5")
	fails("OFPMMFC_OUT_OF_BANDS", "add-meter", "meter=3,kbps,band=type=drop,rate=1 type=drop,rate=2 type=drop,rate=3 type=drop,rate=4 type=drop,rate=5")
	fails("OFPMMFC_UNKNOWN_METER", "add-flow", "priority=1,actions=meter:9,output:1")
	run("add-flow", "priority=8,in_port=2,actions=meter:1,output:1")
	if drop, _ := sw.meters.Get(1).Allow(time.Now(), 64); drop {
		t.Errorf("the first packet exceeded a full bucket")
	}
	out = run("meter-stats")
	t.Logf("meter-stats:\n%s", out)
	contains("meter-stats", out, "meter:1 flow_count:1 packet_in_count:1 byte_in_count:64", "meter:2 flow_count:0 packet_in_count:0")
	out = run("meter-features")
	contains("meter-features", out, "max_meter:8", "band_types: drop dscp_remark", "max_bands:4")
	run("del-meters", "meter=1")
	if n := sw.rules(); n != 0 {
		t.Errorf("%d rules after deleting their meter, want 0", n)
	}
	run("del-meters")
	if out = run("dump-meters"); strings.Contains(out, "meter=") {
		t.Errorf("meters left after del-meters:\n%s", out)
	}

	// Ports.
	run("mod-port", "1", "down")
	if out = run("show"); !strings.Contains(out, "config:     PORT_DOWN") {
		t.Errorf("show after mod-port 1 down:\n%s", out)
	}
	run("mod-port", "1", "up")
	if out = run("show"); strings.Contains(out, "PORT_DOWN") {
		t.Errorf("show after mod-port 1 up:\n%s", out)
	}
	run("mod-port", "2", "no-flood") // OpenFlow 1.3 has no NO_FLOOD: ovs-ofctl sends an empty mask

	out = run("queue-get-config", "1")
	contains("queue-get-config", out, "queue 7:", "min_rate:10.0%")
	out = run("queue-stats")
	contains("queue-stats", out, "port 1 queue 7: bytes=180, pkts=3")
}
