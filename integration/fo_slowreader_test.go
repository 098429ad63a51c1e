package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// foTopo is newTopo with names of its own ("fo" prefix, for issue 22's
// OpenFlow tests) plus a veth from the root namespace into the switch
// namespace, over which gswitchd reaches the test's controller:
// 10.250.X.1 in the root namespace, 10.250.X.2 in the switch's.
func foTopo(t *testing.T, n int) (tp *topo, ctlAddr string) {
	t.Helper()
	id := rand.IntN(1 << 16)
	tp = newTopoNamed(t, n, fmt.Sprintf("fosw%x", id), func(i int) string { return fmt.Sprintf("foh%d%x", i, id) })
	root := fmt.Sprintf("foc%x", id)
	t.Cleanup(func() { exec.Command("ip", "link", "del", root).Run() })
	x := 1 + id%250
	sh(t, "ip", "link", "add", root, "type", "veth", "peer", "name", "foctl", "netns", tp.sw)
	sh(t, "ip", "addr", "add", fmt.Sprintf("10.250.%d.1/30", x), "dev", root)
	sh(t, "ip", "link", "set", root, "up")
	sh(t, "ip", "-n", tp.sw, "addr", "add", fmt.Sprintf("10.250.%d.2/30", x), "dev", "foctl")
	sh(t, "ip", "-n", tp.sw, "link", "set", "foctl", "up")
	return tp, fmt.Sprintf("10.250.%d.1", x)
}

// rssKiB returns a process's resident set size.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// foFlowStatsRequest is an OFPMP_FLOW request for every table and entry.
func foFlowStatsRequest(xid uint32) []byte {
	b := make([]byte, 56)
	b[0], b[1] = openflow.Version, 18 // OFPT_MULTIPART_REQUEST
	binary.BigEndian.PutUint16(b[2:], 56)
	binary.BigEndian.PutUint32(b[4:], xid)
	binary.BigEndian.PutUint16(b[8:], 1) // OFPMP_FLOW
	b[16] = rule.TableAll
	binary.BigEndian.PutUint32(b[20:], rule.PortAny)
	binary.BigEndian.PutUint32(b[24:], rule.GroupAny)
	copy(b[48:], []byte{0, 1, 0, 4, 0, 0, 0, 0}) // an empty OXM match
	return b
}

// TestFoSlowControllerDropped: gswitchd dials a controller that installs
// 20,000 flow entries, then sends flow-stats requests and never reads the
// replies. gswitchd drops the connection within its write timeout,
// counts it, its resident memory does not grow with the flood, and with
// no controller left its standalone fail mode takes over: the hosts,
// which could not reach each other while the controller's table-miss
// packet-ins went unread, ping.
func TestFoSlowControllerDropped(t *testing.T) {
	tp, ctlIP := foTopo(t, 2)
	l, err := net.Listen("tcp", ctlIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d := startGswitchd(t, tp, "--controller", "tcp:"+l.Addr().String(), "--fail-mode", "standalone",
		"--of-write-timeout", "1s", "--of-max-output-bytes", "262144", "--of-echo-interval", "30s", "--of-echo-timeout", "30s")
	l.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	conn, err := l.Accept()
	if err != nil {
		t.Fatalf("gswitchd did not connect to the controller: %v", err)
	}
	l.Close() // no second connection: after the drop, the switch stays without a controller
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	read := func() []byte {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		m, err := openflow.ReadMessage(conn)
		if err != nil {
			t.Fatalf("controller: %v", err)
		}
		return m
	}
	read() // HELLO
	conn.Write(openflow.EncodeHello(1))
	var batch []byte
	for i := range 20000 {
		var m flow.Match
		m.SetInPort(uint32(1000 + i))
		batch = append(batch, openflow.EncodeFlowMod(uint32(10+i), &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: m,
			BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny})...)
	}
	barrier := []byte{openflow.Version, 20, 0, 8, 0, 0, 0, 9}
	conn.Write(append(batch, barrier...))
	for {
		if m := read(); m[1] == 21 {
			break
		} else if m[1] == 1 {
			t.Fatalf("error while installing flows: %x", m)
		}
	}
	c := ctl.NewClient(d.ctl)
	defer c.Close()
	stats := func() ctl.Stats {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s, err := c.Stats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := stats(); s.Controller != 1 || s.Counters.Standalone {
		t.Fatalf("with the controller: %d connections, standalone %v", s.Controller, s.Counters.Standalone)
	}
	pid := d.cmd.Process.Pid
	base := rssKiB(t, pid)
	start := time.Now()
	stop := make(chan struct{})
	flooded := make(chan int)
	go func() { // requests, never a read
		req, n := foFlowStatsRequest(3), 0
		defer func() { flooded <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
			if _, err := conn.Write(req); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					continue
				}
				return
			}
			n++
		}
	}()
	peak := base
	for stats().Controller != 0 {
		peak = max(peak, rssKiB(t, pid))
		if time.Since(start) > 20*time.Second {
			close(stop)
			t.Fatalf("gswitchd still holds the connection of a controller that stopped reading after 20 s (RSS %d KiB, was %d)", rssKiB(t, pid), base)
		}
		time.Sleep(50 * time.Millisecond)
	}
	took := time.Since(start)
	close(stop)
	n := <-flooded
	peak = max(peak, rssKiB(t, pid))
	t.Logf("dropped after %v and %d requests; RSS %d KiB before, peak %d KiB", took, n, base, peak)
	if peak > base+64<<10 {
		t.Errorf("RSS grew from %d to %d KiB", base, peak)
	}
	s := stats()
	if s.OutputDrops != 1 {
		t.Errorf("output drops %d, want 1", s.OutputDrops)
	}
	// Standalone takes over: the hosts reach each other.
	deadline := time.Now().Add(10 * time.Second)
	for !stats().Counters.Standalone {
		if time.Now().After(deadline) {
			t.Fatal("not standalone after the controller was dropped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := tp.ping(t, 1, "10.0.0.2", 3); err != nil {
		t.Fatal(err)
	}
	// The dropped connection ends: what was queued, then EOF (or a reset:
	// gswitchd closed it with the flood's requests unread).
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the dropped connection did not end: %v", err)
	}
}
