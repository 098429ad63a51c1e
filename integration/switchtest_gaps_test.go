package integration

import (
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Datapath features the Switch Test Tool's patterns do not reach, checked
// with real peers: the LOCAL port (ovs-ofctl, ping) and packet-ins of
// reason INVALID_TTL (an os-ken controller, ping with a small TTL).

// TestLocalPortWithOvsOfctl: a veth end given as --port LOCAL=loc0 is the
// LOCAL port: ovs-ofctl shows it, and flows in_port=1 -> LOCAL and
// in_port=LOCAL -> 1 carry ping between host 1 and the namespace behind
// the LOCAL port.
func TestLocalPortWithOvsOfctl(t *testing.T) {
	tp := newTopo(t, 1)
	lns := fmt.Sprintf("gl%x", rand.IntN(1<<20))
	sh(t, "ip", "netns", "add", lns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", lns).Run() })
	noIPv6(t, lns)
	sh(t, "ip", "-n", tp.sw, "link", "add", "loc0", "type", "veth", "peer", "name", "eth0", "netns", lns)
	sh(t, "ip", "-n", lns, "addr", "add", "10.0.0.100/24", "dev", "eth0")
	sh(t, "ip", "-n", lns, "link", "set", "eth0", "up")
	sh(t, "ip", "-n", tp.sw, "link", "set", "loc0", "up")
	d := startWithListener(t, tp, "--port", "LOCAL=loc0")

	if out := d.mustOfctl(t, "show"); !strings.Contains(out, "LOCAL(loc0)") {
		t.Fatalf("ovs-ofctl show does not list LOCAL(loc0):\n%s", out)
	}
	d.mustOfctl(t, "add-flow", "in_port=1,actions=LOCAL")
	d.mustOfctl(t, "add-flow", "in_port=LOCAL,actions=output:1")
	if err := tp.ping(t, 1, "10.0.0.100", 3); err != nil {
		t.Fatal(err)
	}
	dump := d.mustOfctl(t, "dump-flows")
	if n, ok := nPackets(t, dump, "in_port=LOCAL"); !ok || n < 3 {
		t.Errorf("in_port=LOCAL: n_packets %d (found %v), want at least 3:\n%s", n, ok, dump)
	}
	if out := d.mustOfctl(t, "dump-ports", "LOCAL"); !strings.Contains(out, "port LOCAL") {
		t.Errorf("dump-ports LOCAL:\n%s", out)
	}
}

var packetInRE = regexp.MustCompile(`PACKET_IN reason=(\d+) in_port=(\d+) table_id=\d+ total_len=(\d+) data_len=(\d+) ttl=(-?\d+)`)

// TestInvalidTTLPacketIn: an os-ken controller installs in_port=1,ip ->
// dec_nw_ttl,output:2. A ping with TTL 5 goes through (TTL 4 at host 2);
// one with TTL 1 is dropped, and the controller gets it as a packet-in of
// reason INVALID_TTL (2), unchanged and cut to its miss_send_len of 64,
// only when its SET_ASYNC asked for that reason.
func TestInvalidTTLPacketIn(t *testing.T) {
	needTool(t, "osken-manager", "python3-os-ken")
	needTool(t, "ping", "iputils-ping")
	for _, async := range []bool{true, false} {
		t.Run(fmt.Sprintf("async=%v", async), func(t *testing.T) {
			tp := newTopo(t, 2)
			// Static neighbours: no ARP, which the controller's flows do not carry.
			sh(t, "ip", "-n", tp.hosts[0], "neigh", "add", "10.0.0.2", "lladdr", "02:00:00:00:00:02", "dev", "eth0")
			sh(t, "ip", "-n", tp.hosts[1], "neigh", "add", "10.0.0.1", "lladdr", "02:00:00:00:00:01", "dev", "eth0")
			app, err := filepath.Abs("switchtest/invalid_ttl.py")
			if err != nil {
				t.Fatal(err)
			}
			port := 16000 + rand.IntN(20000)
			env := "GSWITCH_ASYNC_INVALID_TTL=0"
			if async {
				env = "GSWITCH_ASYNC_INVALID_TTL=1"
			}
			ok := startBg(t, "ip", "netns", "exec", tp.sw, "env", env, "osken-manager", "--ofp-tcp-listen-port", fmt.Sprint(port), app)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("osken-manager log:\n%s", ok.out.String())
				}
			})
			startGswitchd(t, tp, "--controller", fmt.Sprintf("tcp:127.0.0.1:%d", port))
			if !waitFor(30*time.Second, func() bool { return strings.Contains(ok.out.String(), "READY dpid=1") }) {
				t.Fatal("the controller's flows were not installed within 30s")
			}
			if err := pingTTL(tp, 1, "10.0.0.2", 5); err != nil {
				t.Fatalf("ping with TTL 5: %v", err)
			}
			if err := pingTTL(tp, 1, "10.0.0.2", 1); err == nil {
				t.Fatal("a ping with TTL 1 went through dec_nw_ttl")
			}
			var got []string
			waitFor(3*time.Second, func() bool {
				got = nil
				for _, m := range packetInRE.FindAllStringSubmatch(ok.out.String(), -1) {
					got = append(got, m[0])
				}
				return len(got) > 0 || !async
			})
			if !async {
				time.Sleep(time.Second) // a late packet-in would show here
				if m := packetInRE.FindAllString(ok.out.String(), -1); len(m) != 0 {
					t.Fatalf("packet-ins without SET_ASYNC asking for INVALID_TTL: %q", m)
				}
				return
			}
			// One ICMP echo of 98 bytes (14 + 20 + 8 + 56), TTL 1 as sent.
			want := "PACKET_IN reason=2 in_port=1 table_id=0 total_len=98 data_len=64 ttl=1"
			if len(got) != 1 || got[0] != want {
				t.Fatalf("packet-ins %q, want exactly %q", got, want)
			}
		})
	}
}

// pingTTL sends one echo request with the given TTL from host i.
func pingTTL(tp *topo, from int, dst string, ttl int) error {
	out, err := exec.Command("ip", "netns", "exec", tp.hosts[from-1], "ping", "-n", "-c", "1", "-W", "1",
		"-t", fmt.Sprint(ttl), dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v\n%s", err, out)
	}
	return nil
}
