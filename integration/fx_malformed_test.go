package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/packet/packettest"
)

// fxCorpus is the malformed-frame corpus by name.
func fxCorpus(t *testing.T) map[string]packettest.Frame {
	t.Helper()
	out := map[string]packettest.Frame{}
	for _, f := range packettest.Malformed(t) {
		out[f.Name] = f
	}
	return out
}

// TestFxMalformedFrames sends frames of the malformed corpus from a host
// through a real veth into gswitchd (a flow forwards everything from
// port 1 to port 2): each is counted under its reason, none leaves on
// port 2, gswitchd keeps running; a 9000-byte jumbo frame (MTU 9000 on
// the links) and a 1000-header IPv6 extension chain are forwarded whole.
func TestFxMalformedFrames(t *testing.T) {
	tp := fxTopo(t, "m", 2)
	for i, h := range tp.hosts {
		sh(t, "ip", "-n", h, "link", "set", "eth0", "mtu", "9000")
		sh(t, "ip", "-n", tp.sw, "link", "set", "swp"+strconv.Itoa(i+1), "mtu", "9000")
	}
	c := fxListen(t, tp.sw, fxPort())
	ctlPath := fxCtlPath(t)
	start := time.Now()
	p := fxStart(t, tp, ctlPath, "--controller", c.target(), "--fail-mode", "secure")
	if !c.waitConnected(start, 10*time.Second) {
		t.Fatal("gswitchd did not connect to the controller")
	}
	c.addFlow(ofFlow{priority: 1, inPort: 1, out: 2})
	if !c.barrier(5 * time.Second) {
		t.Fatal("no barrier reply")
	}
	corpus := fxCorpus(t)
	bad := []string{"ipv4-header-cut", "ipv4-ihl-0", "ipv4-ihl-4", "ipv4-ihl-15-beyond-frame", "ipv4-total-length-below-header",
		"ipv4-udp-cut", "ipv4-tcp-cut", "ipv6-header-cut", "ipv6-version-4", "ipv6-hop-by-hop-cut", "ipv6-ext-length-beyond-frame",
		"ipv6-ext-chain-1000-cut", "icmpv6-ns-option-length-0", "arp-cut", "mpls-cut", "pbb-cut"}
	good := []string{"jumbo-9000-ipv4-udp", "ipv6-ext-chain-1000-udp"}
	fd := rxqSocket(t, tp.hosts[0])
	rx := rxqSocket(t, tp.hosts[1])
	cl := ctl.NewClient(ctlPath)
	defer cl.Close()
	stats := func() ctl.Stats {
		st, err := cl.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	before := stats().Counters.Malformed
	want := map[string]uint64{}
	const copies = 3
	for _, name := range bad {
		e, ok := corpus[name]
		if !ok {
			t.Fatalf("corpus has no %s", name)
		}
		for range copies {
			if _, err := unix.Write(fd, e.Frame); err != nil {
				t.Fatalf("sending %s (%d bytes): %v", name, len(e.Frame), err)
			}
		}
		want[e.Reason] += copies
	}
	for _, name := range good {
		if _, err := unix.Write(fd, corpus[name].Frame); err != nil {
			t.Fatalf("sending %s (%d bytes): %v", name, len(corpus[name].Frame), err)
		}
	}
	if !waitFor(10*time.Second, func() bool {
		m := stats().Counters.Malformed
		for r, n := range want {
			if m[r]-before[r] < n {
				return false
			}
		}
		return true
	}) {
		t.Errorf("malformed counters %v (before %v), want at least %v more", stats().Counters.Malformed, before, want)
	}
	m := stats().Counters.Malformed
	for r, n := range want {
		if m[r]-before[r] != n {
			t.Errorf("malformed{%q}: +%d, want +%d", r, m[r]-before[r], n)
		}
	}
	// What host 2 received: the two well-formed frames, whole, and none of
	// the malformed ones.
	buf := make([]byte, 1<<16)
	var got [][]byte
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && len(got) < len(good)+1; {
		n, from, err := unix.Recvfrom(rx, buf, 0)
		if err != nil {
			continue
		}
		if sll, ok := from.(*unix.SockaddrLinklayer); ok && sll.Pkttype == unix.PACKET_OUTGOING {
			continue
		}
		got = append(got, append([]byte(nil), buf[:n]...))
	}
	for _, name := range good {
		found := false
		for _, g := range got {
			found = found || string(g) == string(corpus[name].Frame)
		}
		if !found {
			t.Errorf("%s (%d bytes) did not reach host 2 whole", name, len(corpus[name].Frame))
		}
	}
	if len(got) != len(good) {
		t.Errorf("host 2 received %d frames, want the %d well-formed ones", len(got), len(good))
	}
	if !p.running() {
		t.Fatal("gswitchd exited")
	}
	c.addFlow(ofFlow{priority: 1, inPort: 2, out: 1})
	c.barrier(5 * time.Second)
	if err := tp.ping(t, 1, "10.0.0.2", 2); err != nil {
		t.Errorf("after the malformed frames: %v", err)
	}
}
