package forward

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// The topology: named network namespaces made with the netlink library (no
// ip command): fbsw-PID (the switch under test, ports p1, p2, ...) and, for
// each pair k of --pairs, fbgenK-PID (a generator, eth0) and fbsinkK-PID (a
// sink, eth0), with veth pairs p<2k+1>–genK:eth0 and p<2k+2>–sinkK:eth0.
// Each target in turn takes p1, p2, ... as its OpenFlow ports 1, 2, ...
// (gswitchd, Open vSwitch) or its bridge ports (Linux bridge; one pair
// only). Everything is removed on return, on error and on SIGINT/SIGTERM.

// fwdEnv is the topology, the generator and sink ports, and the run's state.
type fwdEnv struct {
	ctx   context.Context
	f     *fwdFlags
	log   io.Writer
	dir   string // temporary: logs, databases, sockets, the rule file
	pid   int
	step  uint32
	round int // 1..--rounds: the FLOW_MOD runs are in round 1 only

	sw      netns.NsHandle
	nsNames []string
	hsw     *netlink.Handle
	pairs   []*fwdPair
	dstMAC  net.HardwareAddr // the test frames' destination: see benchDstMAC

	// The traffic: each pair's frames (with what the rules do with them)
	// and the rule set of a --ruleset other than trivial (nil: trivial).
	frames   []*frameSet
	rs       *ruleSet
	events   *eventSet // --ruleset events[:F]: the subscriptions
	subsFile string    // and their file, gswitchd's subscriptions_file

	gswitchdBin string
	ctlSocket   string       // the running gswitchd's control socket; empty when none runs
	metricsAddr string       // the running gswitchd's metrics listener (switch namespace); empty when none runs
	swPid       int          // the running gswitchd's process id
	swSet       *unix.CPUSet // --switch-cpus' cores (nil: any), whose time steps record
	swRing      string       // the running gswitchd's --rx-ring (block or frame)
	swWorkers   int          // the running gswitchd's --rx-workers (0: not given)
	swFlight    int          // the running gswitchd's --worker-in-flight (0: not given)
	swShared    int          // the running gswitchd's --worker-shared (0: not given)
	swEager     bool         // the running gswitchd's --worker-close is eager
	swTarget    string       // the gswitchd target being measured (names its log with --log-dir)
	cleanups    []func()     // run in reverse by close
}

// inNS runs fn on an OS thread inside namespace h. The thread is never
// unlocked, so it ends with the goroutine: no other goroutine ever runs in
// the namespace by accident. Sockets opened and processes started in fn
// stay in the namespace.
func inNS(h netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(h); err != nil {
			errc <- fmt.Errorf("setns: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// newNamedNS creates the named namespace /run/netns/NAME.
func newNamedNS(name string) (netns.NsHandle, error) {
	type res struct {
		h   netns.NsHandle
		err error
	}
	c := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // the thread ends in the new namespace: never unlocked
		h, err := netns.NewNamed(name)
		c <- res{h, err}
	}()
	r := <-c
	if r.err != nil {
		return 0, fmt.Errorf("creating network namespace %s: %w", name, r.err)
	}
	return r.h, nil
}

// fwdPair is one generator and one sink, each in a namespace of its own,
// on switch ports 2k+1 (p<2k+1>) and 2k+2 for the pair's index k.
type fwdPair struct {
	gen, snk        netns.NsHandle
	genPort         *afpacket.Port
	sink            *sink
	genMAC, sinkMAC net.HardwareAddr
}

func newFwdEnv(ctx context.Context, f *fwdFlags, log io.Writer) (_ *fwdEnv, err error) {
	e := &fwdEnv{ctx: ctx, f: f, log: log, pid: os.Getpid()}
	if f.switchCPUs != "" {
		if set, err := parseCPUList(f.switchCPUs); err == nil { // checked with the flags
			e.swSet = &set
		}
	}
	if e.dir, err = os.MkdirTemp("", "gswitch-bench-forward-"); err != nil {
		return nil, err
	}
	e.cleanups = append(e.cleanups, func() { os.RemoveAll(e.dir) })
	defer func() {
		if err != nil {
			e.close()
		}
	}()
	if slices.ContainsFunc(f.targets, isGswitchd) {
		if e.gswitchdBin, err = e.buildGswitchd(); err != nil {
			return nil, err
		}
	}
	ns := func(h *netns.NsHandle, name string) error {
		name = fmt.Sprintf("%s-%d", name, e.pid)
		var err error
		if *h, err = newNamedNS(name); err != nil {
			return err
		}
		e.nsNames = append(e.nsNames, name)
		disableIPv6(*h)
		return nil
	}
	if err := ns(&e.sw, "fbsw"); err != nil {
		return nil, err
	}
	if e.hsw, err = netlink.NewHandleAt(e.sw); err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", e.nsNames[0], err)
	}
	if err := e.linkUp(e.hsw, "lo"); err != nil {
		return nil, err
	}
	e.dstMAC, _ = net.ParseMAC(benchDstMAC)
	var rps string // the sinks' RPS mask; empty: none
	if f.sinkRPS != "" {
		if rps, err = rpsMask(f.sinkRPS); err != nil {
			return nil, fmt.Errorf("--sink-rps: %w", err)
		}
	}
	for k := range f.pairs {
		pr := &fwdPair{}
		e.pairs = append(e.pairs, pr)
		if err := ns(&pr.gen, fmt.Sprintf("fbgen%d", k)); err != nil {
			return nil, err
		}
		if err := ns(&pr.snk, fmt.Sprintf("fbsink%d", k)); err != nil {
			return nil, err
		}
		if rps != "" { // before the sink's veth end exists: the kernel gives it the namespace's mask
			if err := setRPSDefault(pr.snk, rps); err != nil {
				return nil, fmt.Errorf("--sink-rps %s: %w (--sink-rps off to leave it)", f.sinkRPS, err)
			}
		}
		if pr.genMAC, err = e.veth(fmt.Sprintf("p%d", 2*k+1), pr.gen, fmt.Sprintf("02:00:00:00:%02x:01", k)); err != nil {
			return nil, err
		}
		if pr.sinkMAC, err = e.veth(fmt.Sprintf("p%d", 2*k+2), pr.snk, fmt.Sprintf("02:00:00:00:%02x:02", k)); err != nil {
			return nil, err
		}
		if rps != "" {
			got, err := rxRPS(pr.snk, "eth0")
			if err != nil {
				return nil, fmt.Errorf("--sink-rps %s: reading sink %d's RPS cores: %w", f.sinkRPS, k, err)
			}
			if !sameMask(got, rps) {
				return nil, fmt.Errorf("--sink-rps %s: sink %d's eth0 steers to %q, not %s: this kernel does not give a namespace's rps_default_mask to its new devices", f.sinkRPS, k, got, rps)
			}
		}
		err = inNS(pr.gen, func() (err error) {
			pr.genPort, err = afpacket.Open("eth0", afpacket.Config{BlockSize: 64 << 10, NumBlocks: 4})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("generator port %d: %w", k, err)
		}
		if f.sink == "ring" {
			var pt *afpacket.Port
			err = inNS(pr.snk, func() (err error) {
				pt, err = afpacket.Open("eth0", afpacket.Config{BlockSize: 1 << 20, NumBlocks: 64})
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("sink port %d: %w", k, err)
			}
			pr.sink = startRingSink(pt)
		} else {
			h, err := netlink.NewHandleAt(pr.snk)
			if err != nil {
				return nil, fmt.Errorf("netlink in sink %d: %w", k, err)
			}
			pr.sink = startCounterSink(h)
			if _, err := pr.sink.rxPackets(); err != nil {
				return nil, err
			}
		}
	}
	if err := e.makeTraffic(); err != nil {
		return nil, err
	}
	return e, nil
}

// makeTraffic loads the rule set and builds each pair's frames.
func (e *fwdEnv) makeTraffic() error {
	if e.f.trivial() {
		for _, pr := range e.pairs {
			e.frames = append(e.frames, trivialFrames(e.dstMAC, pr.genMAC, e.f.srcPorts))
		}
		return nil
	}
	t0 := time.Now()
	if isEvents(e.f.ruleset) {
		return e.makeEventTraffic(t0)
	}
	rs, err := loadRuleset(e.f.ruleset, len(e.pairs), e.log)
	if err != nil {
		return fmt.Errorf("--ruleset: %w", err)
	}
	if e.frames, err = ruleSetFrames(rs, len(e.pairs), e.f.flows); err != nil {
		return fmt.Errorf("--ruleset %s: %w", e.f.ruleset, err)
	}
	e.rs = rs
	fmt.Fprintf(e.log, "bench forward: --ruleset %s: %d rules; %d frames per pair, %.1f%% of them forwarded by their rule (%v)\n",
		e.f.ruleset, len(rs.rules), e.f.flows, forwardedPct(e.frames), time.Since(t0).Round(time.Millisecond))
	return nil
}

// ruleCounts is the series each rule-installing target runs: --rules, or
// the rule set once.
func (e *fwdEnv) ruleCounts() []int {
	if e.rs != nil {
		return []int{len(e.rs.rules)}
	}
	if e.events != nil {
		return []int{len(e.pairs)} // the in_port rules; event packets bypass the flow tables
	}
	return e.f.rules
}

// disableIPv6 keeps the kernel's own IPv6 traffic (router solicitations,
// MLD) off the links (best effort: /proc/sys/net is the opener's namespace's).
func disableIPv6(h netns.NsHandle) {
	inNS(h, func() error {
		for _, k := range []string{"all", "default"} {
			os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0)
		}
		return nil
	})
}

func (e *fwdEnv) linkUp(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err == nil {
		err = h.LinkSetUp(l)
	}
	if err != nil {
		return fmt.Errorf("setting %s up: %w", name, err)
	}
	return nil
}

// veth creates swName in the switch namespace with its peer eth0 in 'peer'
// (MAC 'mac'), sets both up, waits until the pair is operational and
// returns the peer's MAC.
func (e *fwdEnv) veth(swName string, peer netns.NsHandle, mac string) (net.HardwareAddr, error) {
	hw, _ := net.ParseMAC(mac)
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: swName}, PeerName: "eth0",
		PeerHardwareAddr: hw, PeerNamespace: netlink.NsFd(int(peer))}
	if err := e.hsw.LinkAdd(v); err != nil {
		return nil, fmt.Errorf("creating veth %s: %w", swName, err)
	}
	hp, err := netlink.NewHandleAt(peer)
	if err != nil {
		return nil, err
	}
	defer hp.Close()
	if err := e.linkUp(e.hsw, swName); err != nil {
		return nil, err
	}
	if err := e.linkUp(hp, "eth0"); err != nil {
		return nil, err
	}
	if err := e.linkUp(hp, "lo"); err != nil {
		return nil, err
	}
	for range 100 {
		l, err := hp.LinkByName("eth0")
		if err == nil && l.Attrs().OperState == netlink.OperUp {
			return l.Attrs().HardwareAddr, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("veth %s: its peer did not come up within 2s", swName)
}

// close removes everything: the ports, the daemons, the namespaces, the
// temporary folder.
func (e *fwdEnv) close() {
	for _, pr := range e.pairs {
		if pr.genPort != nil {
			pr.genPort.Close()
		}
		if pr.sink != nil {
			pr.sink.close()
		}
	}
	if e.hsw != nil {
		e.hsw.Close()
	}
	for i := len(e.cleanups) - 1; i >= 1; i-- { // [0] removes the folder: last
		e.cleanups[i]()
	}
	hs := []netns.NsHandle{e.sw}
	for _, pr := range e.pairs {
		hs = append(hs, pr.gen, pr.snk)
	}
	for _, h := range hs {
		if h != 0 {
			h.Close()
		}
	}
	for _, n := range e.nsNames {
		if err := netns.DeleteNamed(n); err != nil {
			fmt.Fprintf(e.log, "bench forward: removing namespace %s: %v\n", n, err)
		}
	}
	if len(e.cleanups) > 0 {
		e.cleanups[0]()
	}
}

// buildGswitchd returns --gswitchd, or builds cmd/gswitchd of this tree.
func (e *fwdEnv) buildGswitchd() (string, error) {
	if e.f.gswitchd != "" {
		if _, err := os.Stat(e.f.gswitchd); err != nil {
			return "", fmt.Errorf("--gswitchd: %w", err)
		}
		return e.f.gswitchd, nil
	}
	bin := filepath.Join(e.dir, "gswitchd")
	fmt.Fprintln(e.log, "bench forward: building gswitchd (go build ./cmd/gswitchd; --gswitchd BIN to skip)")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/gswitch/gswitch/cmd/gswitchd").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building gswitchd (run inside the gswitch module or pass --gswitchd BIN): %v\n%s", err, out)
	}
	return bin, nil
}

// daemonProc is a process the bench started.
type daemonProc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

// start starts a daemon in namespace h (0: this one), its output to a
// log file in the temporary folder; it is stopped by close at the latest.
func (e *fwdEnv) start(h netns.NsHandle, name string, args ...string) (*daemonProc, error) {
	d := &daemonProc{name: name, done: make(chan struct{}), log: filepath.Join(e.dir, name+".log")}
	if e.f.logDir != "" && isGswitchd(name) {
		if err := os.MkdirAll(e.f.logDir, 0o755); err != nil {
			return nil, err
		}
		d.log = filepath.Join(e.f.logDir, name+".log")
	}
	lf, err := os.OpenFile(d.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	d.cmd = exec.Command(args[0], args[1:]...)
	d.cmd.Stdout, d.cmd.Stderr = lf, lf
	d.cmd.Env = append(os.Environ(), e.ovsEnv()...)
	startFn := func() error { return d.cmd.Start() }
	if h != 0 {
		err = inNS(h, startFn)
	} else {
		err = startFn()
	}
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { d.err = d.cmd.Wait(); close(d.done) }()
	e.cleanups = append(e.cleanups, func() { d.stop() })
	return d, nil
}

// stop sends SIGTERM and waits up to 5 s before SIGKILL (idempotent).
func (d *daemonProc) stop() {
	select {
	case <-d.done:
		return
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(5 * time.Second):
		d.cmd.Process.Kill()
		<-d.done
	}
}

// exited returns an error with the log's tail if the daemon has exited.
func (d *daemonProc) exited() error {
	select {
	case <-d.done:
		return fmt.Errorf("%s exited (%v):\n%s", d.name, d.err, d.logTail())
	default:
		return nil
	}
}

// logTail returns the last 2,000 bytes of the daemon's log.
func (d *daemonProc) logTail() []byte {
	b, _ := os.ReadFile(d.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return b
}

// dialWait is how long dialOF waits for a starting daemon's listener: a
// gswitchd with a GPU opens the device first, and the first process to
// open it after the machine starts waits for the driver to bring it up
// (33 s on an H200 machine, 2026-11-27, where the next ones took 0.3 s).
const dialWait = 90 * time.Second

// dialOF connects to an OpenFlow listener on 127.0.0.1:port in the switch
// namespace, retrying for up to dialWait while the daemon starts.
func (e *fwdEnv) dialOF(port int, d *daemonProc) (*ofClient, error) {
	deadline := time.Now().Add(dialWait)
	for {
		var conn net.Conn
		err := inNS(e.sw, func() (err error) {
			conn, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
			return err
		})
		if err == nil {
			c, err := newOFClient(conn)
			if err == nil {
				return c, nil
			}
			conn.Close()
		}
		if d != nil {
			if xerr := d.exited(); xerr != nil {
				return nil, xerr
			}
		}
		if time.Now().After(deadline) || e.ctx.Err() != nil {
			if d != nil {
				return nil, fmt.Errorf("no OpenFlow listener on 127.0.0.1:%d in the switch namespace after %v: %v; %s's log:\n%s", port, dialWait, err, d.name, d.logTail())
			}
			return nil, fmt.Errorf("no OpenFlow listener on 127.0.0.1:%d in the switch namespace: %v", port, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runTarget measures one target: a forwarding series per rule count
// (the bridge: one, without rules), then the FLOW_MOD run (gswitchd, ovs).
func (e *fwdEnv) runTarget(target string) ([]Step, []FlowMods, error) {
	base, opts := splitRing(target)
	o, err := targetOpts(opts)
	if err != nil {
		return nil, nil, err
	}
	e.swRing, e.swWorkers, e.swFlight, e.swShared, e.swTarget = cmp.Or(o.ring, "block"), o.workers, o.flight, o.shared, target // block: gswitchd's default
	e.swEager = o.eager
	switch base {
	case "gswitchd":
		return e.runGswitchd(target, e.f.backend)
	case "gswitchd-cpu":
		return e.runGswitchd(target, "cpu")
	case "gswitchd-gpu":
		return e.runGswitchd(target, "gpu")
	case "gswitchd-filters":
		return e.runGswitchd(target, e.f.backend)
	case "gswitchd-auto":
		return e.runGswitchd(target, "auto")
	case "ovs":
		return e.runOVS()
	case "bridge":
		s, err := e.runBridge()
		return s, nil, err
	case "plain":
		s, err := e.runPlain()
		return s, nil, err
	}
	return nil, nil, fmt.Errorf("unknown target %q", target)
}

// startGswitchd runs gswitchd in the switch namespace with p1, p2, ... as
// ports 1, 2, ... and an OpenFlow listener, and connects to it.
func (e *fwdEnv) startGswitchd(maxFlows int, backend string, filters bool) (*daemonProc, *ofClient, error) {
	port := 16000 + rand.IntN(20000)
	args := append(e.tasksetArgs(), e.gswitchdBin)
	if cfg, err := e.gswitchdConfig(filters); err != nil {
		return nil, nil, err
	} else if cfg != "" {
		args = append(args, "--config", cfg)
	}
	for i := 1; i <= 2*len(e.pairs); i++ {
		args = append(args, "--port", fmt.Sprintf("%d=p%d", i, i))
	}
	if e.f.batchSize > 0 {
		args = append(args, "--batch-size", fmt.Sprint(e.f.batchSize))
	}
	if e.f.minBatch > 0 {
		args = append(args, "--min-batch", fmt.Sprint(e.f.minBatch))
	}
	if e.f.sharedDelay != "" {
		args = append(args, "--shared-delay", e.f.sharedDelay)
	}
	if e.swWorkers > 0 {
		args = append(args, "--rx-workers", fmt.Sprint(e.swWorkers))
	}
	if e.swFlight > 0 {
		args = append(args, "--worker-in-flight", fmt.Sprint(e.swFlight))
	}
	if e.swShared > 0 {
		args = append(args, "--worker-shared", fmt.Sprint(e.swShared))
	}
	if e.swEager {
		args = append(args, "--worker-close", "eager")
	}
	args = append(args, strings.Fields(e.f.swFlags)...)
	name, level := "gswitchd", "warn"
	if e.f.logDir != "" {
		name, level = strings.NewReplacer("@", "-", "+", "-").Replace(e.swTarget), "info"
	}
	d, err := e.start(e.sw, name, append(args,
		"--listen", fmt.Sprintf("ptcp:%d:127.0.0.1", port), "--fail-mode", "secure", "--datapath-id", "1",
		"--backend", backend, "--classifier", e.f.classifier, "--max-delay", e.f.maxDelay, "--rx-queues", fmt.Sprint(e.f.rxQueues), "--max-flows", fmt.Sprint(maxFlows+16),
		"--rx-ring", e.swRing, "--ctl-socket", filepath.Join(e.dir, "gswitchd.sock"), "--log-level", level,
		"--metrics", fmt.Sprintf("127.0.0.1:%d", port+1))...)
	if err != nil {
		return nil, nil, err
	}
	c, err := e.dialOF(port, d)
	if err != nil {
		d.stop()
		return nil, nil, fmt.Errorf("gswitchd: %w", err)
	}
	e.ctlSocket = filepath.Join(e.dir, "gswitchd.sock")
	e.metricsAddr = fmt.Sprintf("127.0.0.1:%d", port+1)
	e.swPid = d.cmd.Process.Pid
	return d, c, nil
}

// tasksetArgs is the command prefix that holds the switch under test to
// --switch-cpus (none without it).
func (e *fwdEnv) tasksetArgs() []string {
	if e.f.switchCPUs == "" {
		return nil
	}
	return []string{"taskset", "-c", e.f.switchCPUs}
}

// flowModsFor is the FLOW_MODs of a series with n rules: --rules' trivial
// set, or the rule set.
func (e *fwdEnv) flowModsFor(n int) [][]byte {
	if e.rs != nil {
		return e.rs.flowMods(len(e.pairs), 100)
	}
	return ruleFlowMods(n, len(e.pairs), 100)
}

func (e *fwdEnv) runGswitchd(target, backend string) ([]Step, []FlowMods, error) {
	var steps []Step
	for _, n := range e.ruleCounts() {
		withFilters := strings.HasPrefix(target, "gswitchd-filters")
		d, c, err := e.startGswitchd(n, backend, withFilters)
		if err != nil {
			return steps, nil, err
		}
		if _, _, err := c.installFlowMods(e.flowModsFor(n), 1000); err != nil {
			d.stop()
			return steps, nil, fmt.Errorf("installing %d rules: %w", n, err)
		}
		s, err := e.series(target, backend, n)
		if withFilters {
			nf, matches, ok := e.scrapeFilters()
			if !ok || nf != len(e.f.filterSpecs) {
				err = errors.Join(err, fmt.Errorf("%s: gswitchd reports %d live filters (metrics answered: %v), want %d", target, nf, ok, len(e.f.filterSpecs)))
			}
			fmt.Fprintf(e.log, "bench forward: %s: %d live filters counted %d matches\n", target, nf, matches)
			for i := range s {
				s[i].Filters, s[i].FilterMatches = nf, matches
			}
		}
		if e.events != nil {
			err = errors.Join(err, e.eventCounters(target, s))
		}
		steps = append(steps, s...)
		if err == nil {
			err = d.exited()
		}
		c.conn.Close()
		d.stop()
		e.ctlSocket, e.metricsAddr, e.swPid = "", "", 0
		if err != nil {
			return steps, nil, err
		}
	}
	if e.f.flowmods == 0 || e.round > 1 {
		return steps, nil, nil
	}
	d, c, err := e.startGswitchd(e.f.flowmods, backend, strings.HasPrefix(target, "gswitchd-filters"))
	if err != nil {
		return steps, nil, err
	}
	defer func() { d.stop(); e.ctlSocket, e.metricsAddr, e.swPid = "", "", 0 }()
	defer c.conn.Close()
	fm, err := e.flowModRun(c, target, backend)
	if err != nil {
		return steps, nil, err
	}
	return steps, []FlowMods{fm}, nil
}

// flowModRun sends --flowmods FLOW_MODs in batches with barriers.
func (e *fwdEnv) flowModRun(c *ofClient, target, backend string) (FlowMods, error) {
	msgs := make([][]byte, e.f.flowmods)
	for i := range msgs {
		msgs[i] = missFlowMod(uint32(1000+i), i)
	}
	rate, lat, err := c.installFlowMods(msgs, e.f.flowmodBatch)
	if err != nil {
		return FlowMods{}, fmt.Errorf("%s: %d FLOW_MODs: %w", target, e.f.flowmods, err)
	}
	fmt.Fprintf(e.log, "bench forward: %s: %d FLOW_MODs at %.0f/s\n", target, e.f.flowmods, rate)
	return FlowMods{
		Bench: "flowmods", Target: target, Backend: backend, FlowMods: e.f.flowmods, Batch: e.f.flowmodBatch,
		FlowModsPerSec: rate, BarrierP50us: durPercentile(lat, 50), BarrierP99us: durPercentile(lat, 99),
		BarrierMaxus: durPercentile(lat, 100), Machine: benchutil.Machine(), Time: time.Now().UTC().Format(time.RFC3339),
	}, nil
}

// generateAll starts counting a new step (e.step) on every sink and runs
// every pair's generator at once, each at rate/pairs frames/s (0: as fast
// as each can), for dur. It returns the frames each pair sent and the
// longest generator's time.
func (e *fwdEnv) generateAll(fsets []*frameSet, rate int64, dur time.Duration) ([]uint64, time.Duration, error) {
	for _, pr := range e.pairs {
		if err := pr.sink.begin(e.step); err != nil {
			return nil, 0, err
		}
	}
	type res struct {
		k    int
		sent uint64
		d    time.Duration
		err  error
	}
	out := make(chan res, len(e.pairs))
	per := rate / int64(len(e.pairs))
	if rate > 0 {
		per = max(per, 1)
	}
	for k, pr := range e.pairs {
		go func() {
			sent, d, err := generate(pr.genPort, fsets[k], e.f.batch, e.step, per, dur)
			out <- res{k, sent, d, err}
		}()
	}
	sent := make([]uint64, len(e.pairs))
	var longest time.Duration
	var first error
	for range e.pairs {
		r := <-out
		sent[r.k] = r.sent
		longest = max(longest, r.d)
		if first == nil {
			first = r.err
		}
	}
	return sent, longest, first
}

// sinkRingDrops sums the sinks' ring drops.
func (e *fwdEnv) sinkRingDrops() uint64 {
	var n uint64
	for _, pr := range e.pairs {
		n += pr.sink.ringDrops()
	}
	return n
}

// runBridge measures a Linux bridge over p1 and p2 (no rules).
func (e *fwdEnv) runBridge() ([]Step, error) {
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "fbbr0"}}
	if err := e.hsw.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("creating bridge: %w", err)
	}
	defer e.hsw.LinkDel(br)
	for _, p := range []string{"p1", "p2"} {
		l, err := e.hsw.LinkByName(p)
		if err == nil {
			err = e.hsw.LinkSetMaster(l, br)
		}
		if err == nil {
			err = e.hsw.LinkSetUp(l) // a target before may have left it down
		}
		if err != nil {
			return nil, fmt.Errorf("adding %s to the bridge: %w", p, err)
		}
	}
	if err := e.hsw.LinkSetUp(br); err != nil {
		return nil, err
	}
	return e.series("bridge", "", 0)
}

// backlogDrops sums the "dropped" column of /proc/net/softnet_stat: frames
// the kernel dropped because a CPU's input backlog (netdev_max_backlog)
// was full, as veth delivers to the peer through it.
func backlogDrops() uint64 {
	b, _ := os.ReadFile("/proc/net/softnet_stat")
	var sum uint64
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			v, _ := strconv.ParseUint(f[1], 16, 64)
			sum += v
		}
	}
	return sum
}

// switchCounters reads gswitchd's port counters through its control
// socket: the generators' ports' (1, 3, ...) received and dropped frames
// (dropped by the agent, or by the kernel because a receive ring was full),
// the sinks' ports' (2, 4, ...) sent frames, each summed; its backend's
// keys looked up on the CPU and on GPUs; nil
// when no gswitchd runs or it does not answer.
func (e *fwdEnv) switchCounters() []uint64 {
	if e.ctlSocket == "" {
		return nil
	}
	c := ctl.NewClient(e.ctlSocket)
	defer c.Close()
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	ports, err := c.Ports(ctx)
	if err != nil {
		return nil
	}
	out := make([]uint64, 5)
	if st, err := c.Backend(ctx); err == nil {
		out[3], out[4] = st.KeysOnCPU, st.KeysOnDevice
	}
	for _, p := range ports {
		switch n := p.Stats.PortNo; {
		case n%2 == 1: // a generator's port
			out[0] += p.Stats.RxPackets
			out[1] += p.Stats.RxDropped + p.Stats.RxOverErr // RxOverErr: its ring was full
		case n%2 == 0 && n <= uint32(2*len(e.pairs)):
			out[2] += p.Stats.TxPackets
		}
	}
	return out
}

// cpuSample is the machine's busy and total CPU time (/proc/stat, in
// clock ticks) and a process's user+system time, at one moment; with a
// set of cores, also theirs (the switch's --switch-cpus).
type cpuSample struct {
	at                 time.Time
	busy, steal, total uint64
	proc               uint64 // the process's ticks; 0 when there is none
	procSys            uint64 // of those, its system time's
	set                cpuTicks
}

// cpuTicks sums the times of a set of cores (the "cpuN" lines of
// /proc/stat): busy (what is not idle, iowait or steal), soft (irq and
// softirq, the kernel's interrupt and receive work, within busy), total,
// and how many of the set's cores the file listed.
type cpuTicks struct {
	busy, soft, total uint64
	cores             int
}

// userHZ is the unit of /proc's CPU times (USER_HZ, 100 on every Linux
// architecture the agent runs on).
const userHZ = 100

// readCPU samples the machine's CPU time, that of the cores in set (nil:
// none) and pid's (pid 0: none).
func readCPU(pid int, set *unix.CPUSet) cpuSample {
	s := cpuSample{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		s.busy, s.steal, s.total, s.set = parseProcStat(string(b), set)
	}
	if pid > 0 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			// After the command name's closing parenthesis: state is field
			// 3, utime and stime are fields 14 and 15.
			if i := strings.LastIndexByte(string(b), ')'); i > 0 {
				f := strings.Fields(string(b)[i+1:])
				if len(f) > 12 {
					u, _ := strconv.ParseUint(f[11], 10, 64)
					st, _ := strconv.ParseUint(f[12], 10, 64)
					s.proc, s.procSys = u+st, st
				}
			}
		}
	}
	return s
}

// parseProcStat reads /proc/stat's text: the whole machine's busy, steal
// and total ticks (its first line, "cpu"), and the sums of the "cpuN"
// lines of the cores in set. Fields: user nice system idle iowait irq
// softirq steal; guest time is in user already. Steal (the hypervisor
// running someone else) counts in the total, not as busy. A line it cannot
// read counts nothing.
func parseProcStat(text string, set *unix.CPUSet) (busy, steal, total uint64, ts cpuTicks) {
	first := true
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			break // the per-core lines come first, after the machine's
		}
		var b, st, tot, soft uint64
		for i := 1; i < len(f) && i <= 8; i++ {
			v, _ := strconv.ParseUint(f[i], 10, 64)
			tot += v
			switch i {
			case 4, 5: // idle, iowait
			case 8:
				st += v
			case 6, 7: // irq, softirq
				soft += v
				b += v
			default:
				b += v
			}
		}
		if first {
			first = false
			if f[0] == "cpu" {
				busy, steal, total = b, st, tot
			}
			continue
		}
		n, err := strconv.Atoi(f[0][len("cpu"):])
		if err != nil || set == nil || n < 0 || n >= 1024 || !set.IsSet(n) {
			continue
		}
		ts.busy += b
		ts.soft += soft
		ts.total += tot
		ts.cores++
	}
	return busy, steal, total, ts
}

// setSince returns the cores of the set kept busy between s0 and s, and
// of those the cores' irq and softirq work (0, 0 without a set).
func (s cpuSample) setSince(s0 cpuSample) (busy, soft float64) {
	if s.set.cores == 0 || s.set.cores != s0.set.cores || s.set.total <= s0.set.total {
		return 0, 0
	}
	d := float64(s.set.total - s0.set.total)
	n := float64(s.set.cores)
	return float64(s.set.busy-s0.set.busy) / d * n, float64(s.set.soft-s0.set.soft) / d * n
}

// cpuPerFrameUs is a process's CPU in µs per frame: cores busy over
// elapsed, per frames (0 when there were none or no time passed).
func cpuPerFrameUs(cores float64, elapsed time.Duration, frames uint64) float64 {
	if frames == 0 || elapsed <= 0 {
		return 0
	}
	return cores * elapsed.Seconds() / float64(frames) * 1e6
}

// since returns the cores the machine kept busy between s0 and s (busy
// ticks over total ticks, times the cores), the cores the hypervisor gave
// to someone else (steal), and the cores the process used.
func (s cpuSample) since(s0 cpuSample) (busy, steal, proc float64) {
	if s.total > s0.total {
		busy = float64(s.busy-s0.busy) / float64(s.total-s0.total) * float64(runtime.NumCPU())
		steal = float64(s.steal-s0.steal) / float64(s.total-s0.total) * float64(runtime.NumCPU())
	}
	return busy, steal, s.procCores(s0, s.proc, s0.proc)
}

// sysSince is the cores the process's system time kept busy since s0
// (the kernel working in its system calls).
func (s cpuSample) sysSince(s0 cpuSample) float64 {
	return s.procCores(s0, s.procSys, s0.procSys)
}

// procCores is the cores a tick count of the process, v at s and v0 at
// s0, kept busy between them; 0 without a sample of the process at s0 or
// with a clock or a count that did not move forward.
func (s cpuSample) procCores(s0 cpuSample, v, v0 uint64) float64 {
	if d := s.at.Sub(s0.at).Seconds(); d > 0 && v >= v0 && s0.proc > 0 {
		return float64(v-v0) / userHZ / d
	}
	return 0
}
