package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Mininet (Debian package mininet) builds the topologies of
// integration/mininet/topo_test.py with gswitchd as every switch
// (integration/mininet/gswitch.py, GSwitch): its hosts are network
// namespaces, its links veth pairs, and its switches gswitchd processes
// in the root namespace, each in standalone fail mode (learning) or
// connected to a RemoteController.

const systemPython = "/usr/bin/python3"

// needMininet fails the test when Mininet is missing, naming its package.
func needMininet(t *testing.T) {
	t.Helper()
	needRoot(t)
	needTool(t, "mn", "mininet")
	needTool(t, "iperf3", "iperf3")
	if out, err := exec.Command(systemPython, "-c", "import mininet.net").CombinedOutput(); err != nil {
		t.Fatalf("%s cannot import mininet: apt-get install mininet (%v)\n%s", systemPython, err, out)
	}
}

// mnClean runs "mn -c", which removes what a Mininet run left behind.
// Besides its own links and processes it deletes every bridge of the
// system's Open vSwitch, as any Mininet run's cleanup does.
func mnClean(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "mn", "-c").CombinedOutput(); err != nil {
		t.Errorf("mn -c: %v\n%s", err, out)
	}
}

// mininetLock serializes Mininet runs across processes: "mn -c" kills
// every Mininet's host shells (pkill -f mininet:) and deletes every
// *-ethN link, so a second go test of this package running at the same
// time (another checkout's, or another session's) would break this one.
const mininetLock = "/run/lock/gswitch-mininet.lock"

// lockMininet takes mininetLock, waiting up to 3 minutes, until the test
// (and its cleanups registered later, which run first) ends.
func lockMininet(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(mininetLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if !waitFor(3*time.Minute, func() bool { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil }) {
		f.Close()
		t.Fatalf("another Mininet run holds %s for more than 3 minutes", mininetLock)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// mnResult is the RESULT line of topo_test.py, as key=value pairs.
type mnResult map[string]string

func (r mnResult) float(t *testing.T, key string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(r[key], 64)
	if err != nil {
		t.Fatalf("RESULT %s=%q: %v", key, r[key], err)
	}
	return v
}

// runMininet runs topo_test.py for topo (with controller, a tcp:IP:PORT,
// unless empty) and checks that every ping answered, iperf3 moved data
// and every gswitchd stopped cleanly.
func runMininet(t *testing.T, topo, controller string) mnResult {
	t.Helper()
	bin := gswitchdBinary(t)
	script, err := filepath.Abs("mininet/topo_test.py")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	lockMininet(t)
	mnClean(t)
	t.Cleanup(func() {
		killLeftGswitchd(t, dir, bin)
		mnClean(t)
	})
	args := []string{script, "--topo", topo}
	if controller != "" {
		args = append(args, "--controller", controller)
	}
	var (
		out   []byte
		start time.Time
	)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, systemPython, args...)
		cmd.Env = append(os.Environ(), "GSWITCHD="+bin, "GSWITCH_MN_DIR="+dir)
		start = time.Now()
		out, err = cmd.CombinedOutput()
		cancel()
		// Mininet decodes its nodes' pseudo-terminal output as UTF-8, and
		// once in a CI-style run a node's shell sent a byte that is not
		// (0xfd) while the network was being built, before any switch
		// existed: that is Mininet's flake, not gswitchd's, so the build
		// is tried once more on a clean slate.
		if attempt == 1 && strings.Contains(string(out), "error=build") && strings.Contains(string(out), "codec can't decode") {
			t.Logf("topo_test.py --topo %s: Mininet could not decode a node's output while building; once more:\n%s", topo, out)
			killLeftGswitchd(t, dir, bin)
			mnClean(t)
			continue
		}
		break
	}
	var res mnResult
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, "RESULT "); ok {
			res = mnResult{}
			for _, f := range strings.Fields(rest) {
				if k, v, ok := strings.Cut(f, "="); ok {
					res[k] = v
				}
			}
		}
	}
	if err != nil || res == nil {
		t.Fatalf("topo_test.py --topo %s: %v after %v\n%s", topo, err, time.Since(start).Round(time.Millisecond), out)
	}
	if res["ping_lost"] != "0" || res["ping_loss"] != "0" {
		t.Errorf("%s: %s of %s pings lost:\n%s", topo, res["ping_lost"], res["pings"], out)
	}
	if mbps := res.float(t, "iperf_mbps"); mbps <= 0 || res["iperf_bytes"] == "0" {
		t.Errorf("%s: iperf3 measured no traffic:\n%s", topo, out)
	}
	if res["clean_stop"] != "1" {
		t.Errorf("%s: a gswitchd did not exit cleanly on SIGTERM:\n%s", topo, out)
	}
	t.Logf("%s (controller %s): %s switches, %s hosts, %s of %s pings lost, iperf3 first -> last host %s Mbit/s (%s bytes in 2 s); %v",
		topo, res["controller"], res["switches"], res["hosts"], res["ping_lost"], res["pings"],
		res["iperf_mbps"], res["iperf_bytes"], time.Since(start).Round(time.Millisecond))
	return res
}

// killLeftGswitchd kills the gswitchd processes a killed topo_test.py
// left running: those whose pid files GSwitch wrote in dir and whose
// executable is still bin.
func killLeftGswitchd(t *testing.T, dir, bin string) {
	pids, _ := filepath.Glob(filepath.Join(dir, "*", "*.pid"))
	for _, f := range pids {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == bin {
			t.Errorf("gswitchd pid %d (%s) outlived its Mininet run: killed", pid, f)
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// freePort returns a TCP port nothing listens on just now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestMininet: gswitchd as the switches of Mininet topologies, in
// standalone fail mode (its L2 learning): one switch with 3 hosts, and 3
// switches in a line with 2 hosts each; every pair of hosts pings and
// iperf3 runs from the first host to the last.
func TestMininet(t *testing.T) {
	needMininet(t)
	for _, topo := range []string{"single3", "linear3"} {
		t.Run(topo, func(t *testing.T) { runMininet(t, topo, "") })
	}
}

// TestMininetOsken: the single-switch topology with os-ken's learning
// switch (integration/osken) as Mininet's RemoteController; gswitchd is in
// secure fail mode, so every frame crosses it by the flows os-ken learned.
func TestMininetOsken(t *testing.T) {
	needMininet(t)
	needTool(t, "osken-manager", "python3-os-ken")
	app, err := filepath.Abs("osken/learning_switch.py")
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	ok := startBg(t, "osken-manager", "--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", fmt.Sprint(port), app)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("osken-manager log:\n%s", ok.out.String())
		}
	})
	if !waitFor(15*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}) {
		t.Fatalf("osken-manager does not listen on 127.0.0.1:%d within 15s:\n%s", port, ok.out.String())
	}
	runMininet(t, "single3", fmt.Sprintf("tcp:127.0.0.1:%d", port))
	log := ok.out.String()
	if !strings.Contains(log, "SWITCH_CONNECTED dpid=1") {
		t.Errorf("os-ken saw no SWITCH_CONNECTED dpid=1:\n%s", log)
	}
	// 3 hosts pinging every pair: one learned flow per direction at least.
	if n := strings.Count(log, "FLOW_ADDED dpid=1 "); n < 6 {
		t.Errorf("os-ken added %d flows, want at least 6 (every pair, both ways):\n%s", n, log)
	}
}
