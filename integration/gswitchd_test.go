package integration

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
)

// nPackets sums the n_packets of the dump-flows lines that contain sub.
func nPackets(t *testing.T, dump, sub string) (int, bool) {
	t.Helper()
	re := regexp.MustCompile(`n_packets=(\d+)`)
	total, found := 0, false
	for _, line := range strings.Split(dump, "\n") {
		if !strings.Contains(line, sub) {
			continue
		}
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		total += n
		found = true
	}
	return total, found
}

// TestPortForwardingWithOvsOfctl: with no flows a secure switch drops
// everything; in_port rules installed by ovs-ofctl carry ping both ways
// and are counted; deleting them stops the traffic again.
func TestPortForwardingWithOvsOfctl(t *testing.T) {
	tp := newTopo(t, 2)
	d := startWithListener(t, tp)

	if err := tp.ping(t, 1, "10.0.0.2", 2); err == nil {
		t.Fatal("ping went through a secure switch with no flows")
	}
	d.mustOfctl(t, "add-flow", "in_port=1,actions=output:2")
	d.mustOfctl(t, "add-flow", "in_port=2,actions=output:1")
	if err := tp.ping(t, 1, "10.0.0.2", 3); err != nil {
		t.Fatal(err)
	}
	dump := d.mustOfctl(t, "dump-flows")
	for _, m := range []string{"in_port=1", "in_port=2"} {
		n, ok := nPackets(t, dump, m)
		if !ok || n < 3 {
			t.Errorf("flow %s: n_packets %d (found %v), want at least 3 (3 echo requests or replies):\n%s", m, n, ok, dump)
		}
	}
	d.mustOfctl(t, "del-flows")
	if out := d.mustOfctl(t, "dump-flows"); strings.Contains(out, "n_packets") {
		t.Fatalf("flows left after del-flows:\n%s", out)
	}
	if err := tp.ping(t, 1, "10.0.0.2", 2); err == nil {
		t.Fatal("ping still went through after del-flows")
	}
}

// TestIPRulesWithOvsOfctl: IPv4 destination rules at a higher priority,
// ARP flooded; a host without a rule for its address is unreachable.
func TestIPRulesWithOvsOfctl(t *testing.T) {
	tp := newTopo(t, 3)
	d := startWithListener(t, tp)
	d.mustOfctl(t, "add-flow", "priority=10,arp,actions=FLOOD")
	d.mustOfctl(t, "add-flow", "priority=100,ip,nw_dst=10.0.0.1,actions=output:1")
	d.mustOfctl(t, "add-flow", "priority=100,ip,nw_dst=10.0.0.2,actions=output:2")
	if err := tp.ping(t, 1, "10.0.0.2", 3); err != nil {
		t.Fatal(err)
	}
	if err := tp.ping(t, 2, "10.0.0.1", 2); err != nil {
		t.Fatal(err)
	}
	if err := tp.ping(t, 1, "10.0.0.3", 2); err == nil {
		t.Fatal("ping to 10.0.0.3 went through without a rule for it")
	}
	dump := d.mustOfctl(t, "dump-flows")
	if n, ok := nPackets(t, dump, "nw_dst=10.0.0.2"); !ok || n < 5 {
		t.Errorf("nw_dst=10.0.0.2: n_packets %d, want at least 5:\n%s", n, dump)
	}
	if n, ok := nPackets(t, dump, "arp"); !ok || n < 1 {
		t.Errorf("arp flow: n_packets %d, want at least 1:\n%s", n, dump)
	}
	// A packet-out through ovs-ofctl reaches host 2: an ARP request for
	// 10.0.0.2 makes it reply, and its reply (to host 1) is counted by
	// the arp flow.
	before, _ := nPackets(t, dump, "arp")
	arp := "ffffffffffff" + "020000000001" + "0806" + "0001080006040001" + "020000000001" + "0a000001" + "000000000000" + "0a000002"
	d.mustOfctl(t, "packet-out", "CONTROLLER", "output:2", arp)
	deadline := time.Now().Add(3 * time.Second)
	for {
		n, _ := nPackets(t, d.mustOfctl(t, "dump-flows"), "arp")
		if n > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ARP reply to a packet-out's request: arp flow still at %d packets", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStandaloneLearning: in standalone fail mode with no controller the
// switch learns MAC addresses and forwards; the control socket reports it.
func TestStandaloneLearning(t *testing.T) {
	tp := newTopo(t, 3)
	d := startGswitchd(t, tp, "--fail-mode", "standalone")
	if err := tp.ping(t, 1, "10.0.0.2", 3); err != nil {
		t.Fatal(err)
	}
	if err := tp.ping(t, 3, "10.0.0.1", 2); err != nil {
		t.Fatal(err)
	}
	c := ctl.NewClient(d.ctl)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Counters.Standalone || st.Counters.Learned < 3 {
		t.Errorf("stats: standalone %v, learned %d; want true and 3 hosts", st.Counters.Standalone, st.Counters.Learned)
	}
	ports, err := c.Ports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 || ports[0].Desc.Name != "swp1" || ports[0].Stats.RxPackets == 0 {
		t.Errorf("ports: %+v", ports)
	}
}
