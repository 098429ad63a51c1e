package integration

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The tests here run gswitchd for real: the binary built from this tree,
// in a network namespace of its own whose veth ends are its ports, with a
// host namespace at the other end of each veth, driven by real peers
// (ovs-ofctl, ping). They need root.

// moduleBinary is a program of this module that the tests run, built once
// per test run into a temporary folder that TestMain removes.
type moduleBinary struct {
	name string // the binary's name, the last element of pkg
	pkg  string // its import path

	once sync.Once
	path string
	err  error
}

var (
	gswitchdBin   = &moduleBinary{name: "gswitchd", pkg: "github.com/gswitch/gswitch/cmd/gswitchd"}
	gswitchctlBin = &moduleBinary{name: "gswitchctl", pkg: "github.com/gswitch/gswitch/cmd/gswitchctl"}
)

// build builds b once and returns its path, failing t where it cannot.
func (b *moduleBinary) build(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", b.name+"-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, b.name)
		out, err := exec.Command("go", "build", "-o", b.path, b.pkg).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", b.name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// remove removes the folder b was built into, if it was.
func (b *moduleBinary) remove() {
	if b.path != "" {
		os.RemoveAll(filepath.Dir(b.path))
	}
}

// gswitchdBinary builds cmd/gswitchd once per test run.
func gswitchdBinary(t *testing.T) string {
	t.Helper()
	return gswitchdBin.build(t)
}

func TestMain(m *testing.M) {
	code := m.Run()
	gswitchdBin.remove()
	gswitchctlBin.remove()
	os.Exit(code)
}

// needRoot fails the test when it cannot build namespaces.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("integration tests need root (network namespaces, veth pairs, AF_PACKET): run them as root, e.g. sudo go test ./integration/")
	}
}

// needTool fails the test when a program is missing, naming its Debian
// package.
func needTool(t *testing.T, name, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Fatalf("%s is not installed: apt-get install %s", name, pkg)
	}
}

// sh runs a command and fails the test if it fails.
func sh(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// topo is a switch namespace and n host namespaces: host i (1-based) has
// eth0 with 10.0.0.i/24, linked to swp<i> in the switch namespace.
type topo struct {
	sw    string
	hosts []string
}

func newTopo(t *testing.T, n int) *topo {
	t.Helper()
	id := rand.IntN(1 << 20)
	return newTopoNamed(t, n, fmt.Sprintf("gsw%x", id), func(i int) string { return fmt.Sprintf("gh%d%x", i, id) })
}

// newTopoNamed is newTopo with the switch namespace named sw and host i's
// named host(i): tests that may run beside others take names of their own.
func newTopoNamed(t *testing.T, n int, sw string, host func(i int) string) *topo {
	t.Helper()
	needRoot(t)
	needTool(t, "ip", "iproute2")
	tp := &topo{sw: sw}
	t.Cleanup(tp.destroy)
	sh(t, "ip", "netns", "add", tp.sw)
	noIPv6(t, tp.sw)
	sh(t, "ip", "-n", tp.sw, "link", "set", "lo", "up")
	for i := 1; i <= n; i++ {
		h := host(i)
		tp.hosts = append(tp.hosts, h)
		sh(t, "ip", "netns", "add", h)
		noIPv6(t, h)
		tp.addHostLink(t, i)
	}
	return tp
}

// addHostLink creates (or re-creates) the veth pair swp<i> / host i's eth0.
func (tp *topo) addHostLink(t *testing.T, i int) {
	t.Helper()
	h, sp := tp.hosts[i-1], fmt.Sprintf("swp%d", i)
	sh(t, "ip", "-n", tp.sw, "link", "add", sp, "type", "veth", "peer", "name", "eth0", "netns", h)
	sh(t, "ip", "-n", h, "link", "set", "eth0", "address", fmt.Sprintf("02:00:00:00:00:%02x", i))
	sh(t, "ip", "-n", h, "addr", "add", fmt.Sprintf("10.0.0.%d/24", i), "dev", "eth0")
	sh(t, "ip", "-n", h, "link", "set", "eth0", "up")
	sh(t, "ip", "-n", h, "link", "set", "lo", "up")
	sh(t, "ip", "-n", tp.sw, "link", "set", sp, "up")
}

// noIPv6 keeps the kernel's own IPv6 traffic (router and neighbour
// solicitations, MLD) off the links.
func noIPv6(t *testing.T, ns string) {
	sh(t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
}

func (tp *topo) destroy() {
	for _, ns := range append([]string{tp.sw}, tp.hosts...) {
		exec.Command("ip", "netns", "del", ns).Run()
	}
}

// ping pings from host i (1-based) and reports whether replies came.
func (tp *topo) ping(t *testing.T, from int, dst string, count int) error {
	t.Helper()
	needTool(t, "ping", "iputils-ping")
	out, err := exec.Command("ip", "netns", "exec", tp.hosts[from-1], "ping", "-n", "-c", fmt.Sprint(count),
		"-i", "0.2", "-W", "1", dst).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ping %s from h%d: %v\n%s", dst, from, err, out)
	}
	return nil
}

// syncBuffer is a bytes.Buffer safe for the writer goroutines of exec.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// daemon is a gswitchd running in the switch namespace.
type daemon struct {
	cmd     *exec.Cmd
	log     syncBuffer
	ctl     string
	ofPort  int
	ofSSL   []string // ovs-ofctl's --private-key, --certificate and --ca-cert for a ptls: listener
	metrics string   // the Prometheus page's URL, where --metrics was given
	tp      *topo
}

// startGswitchd runs gswitchd in tp's switch namespace with one port per
// host and the extra flags.
func startGswitchd(t *testing.T, tp *topo, extra ...string) *daemon {
	t.Helper()
	bin := gswitchdBinary(t)
	d := &daemon{tp: tp, ctl: filepath.Join(t.TempDir(), "gswitchd.sock")}
	args := []string{"netns", "exec", tp.sw, bin, "--ctl-socket", d.ctl, "--log-level", "debug", "--max-delay", "50us"}
	for i := range tp.hosts {
		args = append(args, "--port", fmt.Sprintf("%d=swp%d", i+1, i+1))
	}
	args = append(args, extra...)
	d.cmd = exec.Command("ip", args...)
	d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = d.cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
			if waitErr != nil {
				t.Errorf("gswitchd did not exit cleanly on SIGTERM: %v", waitErr)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("gswitchd did not stop within 5s of SIGTERM")
			d.cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("gswitchd log:\n%s", d.log.String())
		}
	})
	d.waitCtl(t, exited)
	return d
}

// waitCtl waits until the control socket exists (the daemon has started).
func (d *daemon) waitCtl(t *testing.T, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("gswitchd exited at start:\n%s", d.log.String())
		default:
		}
		if _, err := os.Stat(d.ctl); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("gswitchd did not create its control socket within 10s:\n%s", d.log.String())
}

// ofctl runs "ovs-ofctl -O OpenFlow13 CMD tcp:127.0.0.1:PORT ARGS..." in
// the switch namespace (ssl:127.0.0.1:PORT with d.ofSSL's files).
func (d *daemon) ofctl(t *testing.T, cmd string, args ...string) (string, error) {
	t.Helper()
	needTool(t, "ovs-ofctl", "openvswitch-common")
	target := fmt.Sprintf("tcp:127.0.0.1:%d", d.ofPort)
	if d.ofSSL != nil {
		target = fmt.Sprintf("ssl:127.0.0.1:%d", d.ofPort)
	}
	a := append([]string{"netns", "exec", d.tp.sw, "ovs-ofctl", "-O", "OpenFlow13", "-t", "5"}, d.ofSSL...)
	a = append(append(a, cmd, target), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ip", a...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ovs-ofctl %s %s: %v\n%s", cmd, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (d *daemon) mustOfctl(t *testing.T, cmd string, args ...string) string {
	t.Helper()
	out, err := d.ofctl(t, cmd, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// startWithListener starts gswitchd listening for OpenFlow on a free port
// and waits until ovs-ofctl can talk to it.
func startWithListener(t *testing.T, tp *topo, extra ...string) *daemon {
	t.Helper()
	port := 16000 + rand.IntN(20000)
	d := startGswitchd(t, tp, append([]string{"--listen", fmt.Sprintf("ptcp:%d", port)}, extra...)...)
	d.ofPort = port
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := d.ofctl(t, "show")
		if err == nil {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("ovs-ofctl cannot reach gswitchd: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
