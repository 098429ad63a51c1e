package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/filters"
	"github.com/gswitch/gswitch/datapath/pcapfile"
)

// hostDump is tcpdump writing what a host sends on its eth0 (the frames
// gswitchd receives on that host's port).
type hostDump struct {
	cmd  *exec.Cmd
	file string
	log  syncBuffer
	done chan struct{}
}

func startHostDump(t *testing.T, ns, file string) *hostDump {
	t.Helper()
	h := &hostDump{file: file, done: make(chan struct{})}
	h.cmd = exec.Command("ip", "netns", "exec", ns, "tcpdump", "-i", "eth0", "-Q", "out", "-n", "-U", "--immediate-mode", "-s", "0", "-w", file)
	h.cmd.Stdout, h.cmd.Stderr = &h.log, &h.log
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() { h.stop(t) })
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(h.log.String(), "listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("tcpdump in %s did not start: %s", ns, h.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return h
}

func (h *hostDump) stop(t *testing.T) {
	select {
	case <-h.done:
		return
	default:
	}
	h.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-h.done:
	case <-time.After(5 * time.Second):
		h.cmd.Process.Kill()
		<-h.done
		t.Errorf("tcpdump did not stop on SIGINT")
	}
}

// tcpdumpCount is "tcpdump -r FILE --count EXPR".
func tcpdumpCount(t *testing.T, file, expr string) uint64 {
	t.Helper()
	out := sh(t, "tcpdump", "-r", file, "--count", expr)
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && strings.HasPrefix(f[1], "packet") {
			n, err := strconv.ParseUint(f[0], 10, 64)
			if err == nil {
				return n
			}
		}
	}
	t.Fatalf("tcpdump --count %q: %s", expr, out)
	return 0
}

// readFrames reads every packet of a pcap or pcapng file.
func readFrames(t *testing.T, file string) [][]byte {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapfile.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p.Data)
	}
}

// udpBurst sends n UDP datagrams from host ns to dst:port (bash's /dev/udp),
// one every gap.
func udpBurst(t *testing.T, ns, dst string, port, n, size int, gap time.Duration) {
	t.Helper()
	script := fmt.Sprintf("p=$(head -c %d /dev/zero | tr '\\0' x); for i in $(seq %d); do echo \"$p\" > /dev/udp/%s/%d; sleep %g; done",
		size, n, dst, port, gap.Seconds())
	sh(t, "ip", "netns", "exec", ns, "bash", "-c", script)
}

// TestLiveFilters: filters on gswitchd's ports (standalone, two ports)
// count exactly what tcpdump selects from a capture of the same frames
// taken on the host side of each veth; a capturing filter's file holds
// the packets tcpdump selects; a filter added while traffic flows counts
// from then on; a deleted one is gone.
func TestLiveFilters(t *testing.T) {
	needTool(t, "tcpdump", "tcpdump")
	needTool(t, "bash", "bash")
	tp := newTopo(t, 2)
	dir := t.TempDir()
	capFile := filepath.Join(dir, "icmp1.pcapng")
	cfg := filepath.Join(dir, "gswitchd.yaml")
	yaml := fmt.Sprintf(`filters:
  - {name: icmp1, expression: icmp, ports: [1], capture: {file: %s}}
  - {name: udp5000, expression: udp dst port 5000}
  - {name: to-h2, expression: dst host 10.0.0.2 and udp, ports: [1]}
  - {name: from-h2, expression: src host 10.0.0.2, ports: [2]}
  - {name: arp, expression: arp}
  - {name: big, expression: greater 600 and ip}
  - {name: echo-reply, expression: "icmp[icmptype] = icmp-echoreply", ports: [2]}
  - {name: gone, expression: "tcp or udp", ports: [1, 2]}
`, capFile)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	dump1 := startHostDump(t, tp.hosts[0], filepath.Join(dir, "h1.pcap"))
	dump2 := startHostDump(t, tp.hosts[1], filepath.Join(dir, "h2.pcap"))
	d := startGswitchd(t, tp, "--fail-mode", "standalone", "--config", cfg)
	c := ctl.NewClient(d.ctl)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Traffic both ways: ARP, ICMP of two sizes, UDP to two ports.
	if err := tp.ping(t, 1, "10.0.0.2", 5); err != nil {
		t.Fatal(err)
	}
	sh(t, "ip", "netns", "exec", tp.hosts[1], "ping", "-n", "-c", "3", "-i", "0.2", "-s", "1000", "10.0.0.1")
	udpBurst(t, tp.hosts[0], "10.0.0.2", 5000, 50, 100, time.Millisecond)
	udpBurst(t, tp.hosts[1], "10.0.0.1", 5001, 30, 700, time.Millisecond)

	// Add a filter while a stream flows from h2 to h1.
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		udpBurst(t, tp.hosts[1], "10.0.0.1", 6000, 400, 64, 2*time.Millisecond)
	}()
	time.Sleep(300 * time.Millisecond)
	if _, err := c.AddFilter(ctx, ctl.FilterRequest{Name: "late", Expression: "udp dst port 6000", Ports: []uint32{2}}); err != nil {
		t.Fatal(err)
	}
	// A bad one is refused with one line naming it and the position.
	if _, err := c.AddFilter(ctx, ctl.FilterRequest{Name: "oops", Expression: "udp dst port"}); err == nil ||
		!strings.HasPrefix(err.Error(), "filter oops: position") {
		t.Errorf("bad filter: %v", err)
	}
	<-streamDone
	time.Sleep(500 * time.Millisecond) // the last batches
	// "gone" is deleted after the traffic: its last counters come back.
	goneInfo, err := c.DeleteFilter(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	// Deleting the capturing filter flushes and closes its file.
	icmpInfo, err := c.DeleteFilter(ctx, "icmp1")
	if err != nil {
		t.Fatal(err)
	}
	dump1.stop(t)
	dump2.stop(t)

	list, err := c.Filters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]filters.Info{}
	for _, f := range list {
		byName[f.Name] = f
	}
	if _, ok := byName["gone"]; ok {
		t.Error("the deleted filter is still listed")
	}
	byName["gone"] = goneInfo
	list = append(list, icmpInfo)
	files := map[uint32]string{1: dump1.file, 2: dump2.file}
	for _, f := range list {
		if f.Name == "late" {
			continue
		}
		ports := f.Ports
		if len(ports) == 0 {
			ports = []uint32{1, 2}
		}
		var want uint64
		for _, p := range ports {
			want += tcpdumpCount(t, files[p], f.Expression)
		}
		if f.Packets != want || want == 0 {
			t.Errorf("filter %s (%s) on ports %v: %d packets, tcpdump counts %d", f.Name, f.Expression, ports, f.Packets, want)
		} else {
			t.Logf("filter %s: %d packets = tcpdump's", f.Name, f.Packets)
		}
	}
	if g := byName["gone"]; g.Packets != tcpdumpCount(t, dump1.file, g.Expression)+tcpdumpCount(t, dump2.file, g.Expression) {
		t.Errorf("deleted filter: %d packets", g.Packets)
	}
	late := byName["late"]
	all := tcpdumpCount(t, dump2.file, "udp dst port 6000")
	t.Logf("filter added mid-stream: %d of the stream's %d datagrams", late.Packets, all)
	if late.Packets == 0 || late.Packets >= all {
		t.Errorf("filter added mid-stream: %d packets of the stream's %d; want some but not all", late.Packets, all)
	}
	// gswitchctl shows it.
	if out := sh(t, gswitchctlBin.build(t), "filters", "show", "late", "--socket", d.ctl); !strings.Contains(out, "udp dst port 6000") ||
		!strings.Contains(out, fmt.Sprint(late.Packets)) {
		t.Errorf("gswitchctl filters show late:\n%s", out)
	}
	// It keeps counting: 20 more datagrams are 20 more.
	udpBurst(t, tp.hosts[1], "10.0.0.1", 6000, 20, 64, time.Millisecond)
	deadline := time.Now().Add(5 * time.Second)
	for {
		in, err := c.Filter(ctx, "late")
		if err != nil {
			t.Fatal(err)
		}
		if in.Packets == late.Packets+20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("late filter: %d packets after 20 more, want %d", in.Packets, late.Packets+20)
		}
		time.Sleep(50 * time.Millisecond)
	}

	sel := filepath.Join(dir, "icmp1-tcpdump.pcap")
	sh(t, "tcpdump", "-r", dump1.file, "-w", sel, "icmp")
	got, want := readFrames(t, capFile), readFrames(t, sel)
	if len(got) != len(want) || len(got) == 0 {
		t.Fatalf("capture holds %d packets, tcpdump selects %d", len(got), len(want))
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("capture packet %d differs from tcpdump's", i)
		}
	}
	t.Logf("capture: %d packets equal tcpdump's selection (%d written, %d dropped)", len(got), icmpInfo.Captured, icmpInfo.Dropped)
}
