package integration

import (
	"bufio"
	"context"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/agent/ctl"
)

// fxCorpus reads datapath/packet/testdata/malformed.txt: name -> (reason,
// frame). The format is in the file's header.
func fxCorpus(t *testing.T) map[string]struct {
	reason string
	frame  []byte
} {
	t.Helper()
	f, err := os.Open("../datapath/packet/testdata/malformed.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]struct {
		reason string
		frame  []byte
	}{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		parts := strings.Split(line, " | ")
		if len(parts) != 3 {
			t.Fatalf("corpus: bad line %q", line)
		}
		var b []byte
		for _, tok := range strings.Fields(parts[2]) {
			if tok == "-" {
				continue
			}
			h, n := tok, 1
			if i := strings.IndexByte(tok, '*'); i >= 0 {
				if n, err = strconv.Atoi(tok[i+1:]); err != nil {
					t.Fatalf("corpus: %s: bad repeat %q", parts[0], tok)
				}
				h = tok[:i]
			}
			chunk, err := hex.DecodeString(h)
			if err != nil {
				t.Fatalf("corpus: %s: %v", parts[0], err)
			}
			for range n {
				b = append(b, chunk...)
			}
		}
		out[parts[0]] = struct {
			reason string
			frame  []byte
		}{parts[1], b}
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
			if _, err := unix.Write(fd, e.frame); err != nil {
				t.Fatalf("sending %s (%d bytes): %v", name, len(e.frame), err)
			}
		}
		want[e.reason] += copies
	}
	for _, name := range good {
		if _, err := unix.Write(fd, corpus[name].frame); err != nil {
			t.Fatalf("sending %s (%d bytes): %v", name, len(corpus[name].frame), err)
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
			found = found || string(g) == string(corpus[name].frame)
		}
		if !found {
			t.Errorf("%s (%d bytes) did not reach host 2 whole", name, len(corpus[name].frame))
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
