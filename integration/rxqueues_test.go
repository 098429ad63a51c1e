package integration

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/pipeline"
)

// rxqMarker tags the test's UDP frames.
var rxqMarker = []byte("gswitch-rxq")

// TestRxQueuesManyFlows runs gswitchd with --rx-queues 4 between two
// hosts (standalone: its learning switch) and sends a burst of UDP frames
// of 64 flows (source ports) from h1's raw socket: h2 receives every frame
// once, each flow in order; port 1 reports 4 receive queues, more than one
// of which took frames, whose counts add up to the port's rx_packets;
// port 2 sent them all, and the Prometheus page agrees.
func TestRxQueuesManyFlows(t *testing.T) { testRxQueuesManyFlows(t) }

// TestRxWorkersManyFlows is TestRxQueuesManyFlows with the queues served
// by datapath workers (--rx-workers 3: the 8 queues of the two ports dealt
// unevenly) on frame rings: every frame arrives once, each flow in order,
// and the batches ran on the workers' path (metric
// gswitch_batches_path_total{path="worker"}).
func TestRxWorkersManyFlows(t *testing.T) {
	page, _ := testRxQueuesManyFlows(t, "--rx-workers", "3", "--rx-ring", "frame")
	if v, ok := rxqMetric(page, `gswitch_batches_path_total{path="worker"}`); !ok || v == 0 {
		t.Errorf("metrics: batches run by workers %d (found %v)", v, ok)
	}
}

// TestRxWorkersEager is TestRxWorkersManyFlows with the workers' eager
// close (--worker-close eager) and a --max-delay of 1s: a worker closes
// its batch as soon as its rings are empty, so the burst (about 30 ms of
// sending) is through in well under the deadline, where batches closed
// at it would hold the burst's last frames a second.
func TestRxWorkersEager(t *testing.T) {
	page, took := testRxQueuesManyFlows(t, "--rx-workers", "3", "--rx-ring", "frame", "--worker-close", "eager", "--max-delay", "1s")
	if took >= 500*time.Millisecond {
		t.Errorf("the burst took %v from its first frame sent to its last received, want well under the 1s deadline", took)
	}
	if v, ok := rxqMetric(page, `gswitch_batches_path_total{path="worker"}`); !ok || v == 0 {
		t.Errorf("metrics: batches run by workers %d (found %v)", v, ok)
	}
}

// testRxQueuesManyFlows is TestRxQueuesManyFlows with gswitchd's extra
// flags; it returns the metrics page read at the end and the time from
// the burst's first frame sent to its last received.
func testRxQueuesManyFlows(t *testing.T, flags ...string) (string, time.Duration) {
	tp := newTopo(t, 2)
	const metrics = "127.0.0.1:9100" // in the switch's own namespace
	d := startGswitchd(t, tp, append([]string{"--rx-queues", "4", "--fail-mode", "standalone", "--metrics", metrics}, flags...)...)
	if err := tp.ping(t, 1, "10.0.0.2", 2); err != nil { // h1 and h2 learned
		t.Fatal(err)
	}
	before := rxqPorts(t, d)
	if len(before) != 2 || before[0].RxQueues != 4 || len(before[0].RxQueuePackets) != 4 {
		t.Fatalf("ports: %+v; want 2 ports with 4 receive queues", before)
	}

	src := rxqSocket(t, tp.hosts[0])
	sink := rxqSocket(t, tp.hosts[1])
	const flows, per = 64, 50
	const n = flows * per
	got := map[uint32]int{}
	var outOfOrder []string
	var mu sync.Mutex
	var lastAt time.Time // guarded by mu
	done := make(chan struct{})
	go func() { // the sink: every test frame, each flow's sequence rising
		defer close(done)
		last := map[uint16]uint32{}
		buf := make([]byte, 2048)
		idle := time.Now()
		for time.Since(idle) < time.Second {
			m, from, err := unix.Recvfrom(sink, buf, 0)
			if err != nil {
				continue // the receive timeout
			}
			if sll, ok := from.(*unix.SockaddrLinklayer); !ok || sll.Pkttype == unix.PACKET_OUTGOING {
				continue
			}
			flow, seq, ok := rxqParse(buf[:m])
			if !ok {
				continue
			}
			idle = time.Now()
			mu.Lock()
			lastAt = idle
			got[seq]++
			if prev, seen := last[flow]; seen && seq <= prev {
				outOfOrder = append(outOfOrder, fmt.Sprintf("flow %d: %d after %d", flow, seq, prev))
			}
			last[flow] = seq
			full := len(got) == n
			mu.Unlock()
			if full {
				return
			}
		}
	}()
	h1, h2 := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	start := time.Now()
	for i := range n { // 250 frames per ~2 ms, well under what a veth and gswitchd take
		if _, err := unix.Write(src, rxqFrame(h2, h1, uint16(20000+i%flows), uint32(i))); err != nil {
			t.Fatalf("h1 send: %v", err)
		}
		if i%250 == 249 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	<-done
	mu.Lock()
	took := lastAt.Sub(start)
	missing, dup := 0, 0
	for i := range n {
		switch c := got[uint32(i)]; {
		case c == 0:
			missing++
		case c > 1:
			dup++
		}
	}
	mu.Unlock()
	if missing != 0 || dup != 0 || len(outOfOrder) != 0 {
		t.Fatalf("h2: %d of %d frames missing, %d duplicated, out of order: %v", missing, n, dup, outOfOrder)
	}

	// h2 has every frame, but a worker adds its batch's counts after the
	// batch's send: wait (briefly) for the counters to catch up.
	after := rxqPorts(t, d)
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); after = rxqPorts(t, d) {
		if after[0].Stats.RxPackets-before[0].Stats.RxPackets >= n && after[1].Stats.TxPackets-before[1].Stats.TxPackets >= n {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	p1, p2 := after[0], after[1]
	var sum uint64
	busy := 0
	for i, c := range p1.RxQueuePackets {
		sum += c
		if c-before[0].RxQueuePackets[i] >= flows*per/16 {
			busy++
		}
	}
	t.Logf("port 1: rx %d, per queue %v (before %v); port 2: tx %d", p1.Stats.RxPackets, p1.RxQueuePackets, before[0].RxQueuePackets, p2.Stats.TxPackets)
	if sum != p1.Stats.RxPackets {
		t.Errorf("port 1: queues received %v, sum %d, port rx_packets %d", p1.RxQueuePackets, sum, p1.Stats.RxPackets)
	}
	if busy < 2 {
		t.Errorf("port 1: fewer than 2 queues carried the %d flows: %v (before %v)", flows, p1.RxQueuePackets, before[0].RxQueuePackets)
	}
	if rx := p1.Stats.RxPackets - before[0].Stats.RxPackets; rx < n || rx > n+50 {
		t.Errorf("port 1 received %d frames during the burst, sent %d", rx, n)
	}
	if tx := p2.Stats.TxPackets - before[1].Stats.TxPackets; tx < n || tx > n+50 {
		t.Errorf("port 2 sent %d frames during the burst, want %d", tx, n)
	}
	if p1.Stats.RxOverErr != 0 {
		t.Errorf("port 1 ring drops: %d", p1.Stats.RxOverErr)
	}
	// The Prometheus page: port 1's rx_packets is the queues' sum too (it
	// can only have grown since).
	page := rxqMetrics(t, tp.sw, metrics)
	v, ok := rxqMetric(page, `gswitch_port_rx_packets_total{port="1",name="swp1"}`)
	if !ok || v < p1.Stats.RxPackets || v > p1.Stats.RxPackets+50 {
		t.Errorf("metrics: port 1 rx_packets %d (found %v), control socket said %d", v, ok, p1.Stats.RxPackets)
	}
	return page, took
}

// rxqFrame builds a 64-byte IPv4/UDP frame 10.0.0.1:sport -> 10.0.0.99:9
// (an address no host has, so h2's stack drops it quietly) carrying the
// marker and seq.
func rxqFrame(dst, src net.HardwareAddr, sport uint16, seq uint32) []byte {
	f := make([]byte, 64)
	copy(f, dst)
	copy(f[6:], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], 50)
	copy(ip[12:], []byte{10, 0, 0, 1, 10, 0, 0, 99})
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	sum = sum&0xffff + sum>>16
	sum += sum >> 16
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	udp := f[34:]
	binary.BigEndian.PutUint16(udp[0:], sport)
	binary.BigEndian.PutUint16(udp[2:], 9)
	binary.BigEndian.PutUint16(udp[4:], 30)
	copy(udp[8:], rxqMarker)
	binary.BigEndian.PutUint32(udp[8+len(rxqMarker):], seq)
	return f
}

// rxqParse returns a test frame's source port and sequence number.
func rxqParse(f []byte) (uint16, uint32, bool) {
	n := 42 + len(rxqMarker)
	if len(f) < n+4 || binary.BigEndian.Uint16(f[12:]) != 0x0800 || f[23] != 17 || string(f[42:n]) != string(rxqMarker) {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(f[34:]), binary.BigEndian.Uint32(f[n:]), true
}

// rxqSocket opens an AF_PACKET socket on eth0 of namespace ns (it stays
// there; the test uses it from any goroutine), with a 8 MiB receive buffer
// and a 100 ms receive timeout.
func rxqSocket(t *testing.T, ns string) int {
	t.Helper()
	var fd int
	var err error
	inNamedNS(t, ns, func() { fd, err = openRawEth0() })
	if err != nil {
		t.Fatalf("packet socket in %s: %v", ns, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// openRawEth0 opens an AF_PACKET socket for every protocol on eth0 of the
// calling thread's namespace, with a 100 ms receive timeout and an 8 MiB
// receive buffer.
func openRawEth0() (int, error) {
	ifi, err := net.InterfaceByName("eth0")
	if err != nil {
		return -1, err
	}
	const ethPAll = 0x0300 // htons(ETH_P_ALL)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, ethPAll)
	if err != nil {
		return -1, err
	}
	tv := unix.NsecToTimeval((100 * time.Millisecond).Nanoseconds())
	if err = unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: ethPAll, Ifindex: ifi.Index}); err == nil {
		if err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err == nil {
			err = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		}
	}
	if err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// rxqPorts reads the ports through the control socket.
func rxqPorts(t *testing.T, d *daemon) []pipeline.PortInfo {
	t.Helper()
	c := ctl.NewClient(d.ctl)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ps, err := c.Ports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// rxqMetrics reads gswitchd's Prometheus page from namespace ns.
func rxqMetrics(t *testing.T, ns, addr string) string {
	t.Helper()
	dial := nsDialer(ns)
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, a string) (net.Conn, error) { return dial(ctx, a) },
	}}
	resp, err := cl.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// rxqMetric finds a sample's value on a Prometheus page; name is the
// sample's name and labels, in any order of the labels.
func rxqMetric(page, name string) (uint64, bool) {
	want := sortedLabels(name)
	for _, l := range strings.Split(page, "\n") {
		i := strings.LastIndexByte(l, ' ')
		if i < 0 || strings.HasPrefix(l, "#") || sortedLabels(l[:i]) != want {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(l[i+1:]), 64)
		return uint64(f), err == nil
	}
	return 0, false
}

// sortedLabels writes a sample name with its labels sorted (label values
// without commas, as the ports' here).
func sortedLabels(s string) string {
	name, labels, ok := strings.Cut(s, "{")
	if !ok {
		return s
	}
	parts := strings.Split(strings.TrimSuffix(labels, "}"), ",")
	slices.Sort(parts)
	return name + "{" + strings.Join(parts, ",") + "}"
}
