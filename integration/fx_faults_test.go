package integration

import (
	"context"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
)

// crossFlows installs in_port=1 -> 2 and in_port=2 -> 1.
func crossFlows(c *fxController) {
	c.addFlow(ofFlow{priority: 10, inPort: 1, out: 2})
	c.addFlow(ofFlow{priority: 10, inPort: 2, out: 1})
}

// TestFxPortRecreate: a port's interface deleted and re-created under a
// running gswitchd is re-attached by name, as Open vSwitch does: the
// controller gets PORT_STATUS DELETE, then ADD with the same port number
// and the new interface's address, the flows stay, and forwarding resumes.
func TestFxPortRecreate(t *testing.T) {
	tp := fxTopo(t, "r", 2)
	c := fxListen(t, tp.sw, fxPort())
	ctlPath := fxCtlPath(t)
	start := time.Now()
	fxStart(t, tp, ctlPath, "--controller", c.target(), "--fail-mode", "secure")
	if !c.waitConnected(start, 10*time.Second) {
		t.Fatal("gswitchd did not connect to the controller")
	}
	crossFlows(c)
	if !c.barrier(5 * time.Second) {
		t.Fatal("no barrier reply")
	}
	if err := tp.ping(t, 1, "10.0.0.2", 2); err != nil {
		t.Fatalf("before the deletion: %v", err)
	}

	sh(t, "ip", "-n", tp.sw, "link", "del", "swp2")
	isStatus := func(reason uint8) func(ofMsg) bool {
		return func(m ofMsg) bool {
			if m.typ != ofptPortStatus {
				return false
			}
			ps := m.portStatus()
			return ps.reason == reason && ps.no == 2 && ps.name == "swp2"
		}
	}
	t.Logf("%v: swp2 deleted", time.Since(start))
	del, ok := c.waitMsg(10*time.Second, isStatus(ofpprDelete))
	if !ok {
		t.Fatal("no PORT_STATUS DELETE for swp2")
	}
	tp.addHostLink(t, 2)
	t.Logf("%v: swp2 re-created", time.Since(start))
	add, ok := c.waitMsg(10*time.Second, isStatus(ofpprAdd))
	if !ok {
		t.Fatal("no PORT_STATUS ADD for the re-created swp2 (the port was not re-attached)")
	}
	if add.at.Before(del.at) {
		t.Fatalf("PORT_STATUS ADD before DELETE")
	}
	out := sh(t, "ip", "-n", tp.sw, "-o", "link", "show", "swp2")
	if hw := add.portStatus().hw.String(); !strings.Contains(out, hw) {
		t.Errorf("PORT_STATUS ADD carries hw_addr %s; the new swp2 is:\n%s", hw, out)
	}
	if n := fxFlows(t, ctlPath); n != 2 {
		t.Errorf("%d flows after the re-attachment, want the 2 installed", n)
	}
	t.Logf("%v: PORT_STATUS ADD", time.Since(start))
	if !waitFor(10*time.Second, func() bool { return tp.ping(t, 1, "10.0.0.2", 1) == nil }) {
		t.Fatal("forwarding did not resume through the re-created swp2")
	}
	t.Logf("%v: forwarding resumed", time.Since(start))
	cl := ctl.NewClient(ctlPath)
	defer cl.Close()
	ports, err := cl.Ports(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ports {
		if p.Desc.No == 2 && (!p.Up || p.Desc.Name != "swp2") {
			t.Errorf("port 2 after re-attachment: %+v", p)
		}
	}
}

// TestFxControllerLoss: when the controller gswitchd dialled goes away,
// traffic follows the fail mode. secure: the flow tables go on alone (the
// installed flows forward, a miss is dropped, nothing is learned);
// standalone: gswitchd becomes a learning switch, so hosts with no flow
// between them reach each other. When the controller comes back the
// switch reconnects (back-off of at most 16 s).
func TestFxControllerLoss(t *testing.T) {
	for _, mode := range []string{"secure", "standalone"} {
		t.Run(mode, func(t *testing.T) {
			tp := fxTopo(t, "l"+mode[:1], 3)
			c := fxListen(t, tp.sw, fxPort())
			ctlPath := fxCtlPath(t)
			start := time.Now()
			fxStart(t, tp, ctlPath, "--controller", c.target(), "--fail-mode", mode)
			if !c.waitConnected(start, 10*time.Second) {
				t.Fatal("gswitchd did not connect to the controller")
			}
			crossFlows(c) // hosts 1 and 2 by flows; host 3 by nothing
			if !c.barrier(5 * time.Second) {
				t.Fatal("no barrier reply")
			}
			if err := tp.ping(t, 1, "10.0.0.2", 1); err != nil {
				t.Fatalf("with the controller, by flows: %v", err)
			}
			if err := tp.ping(t, 1, "10.0.0.3", 1); err == nil {
				t.Fatal("with the controller, host 3 (no flow) answered")
			}
			c.close()
			lost := time.Now()
			cl := ctl.NewClient(ctlPath)
			defer cl.Close()
			if !waitFor(10*time.Second, func() bool {
				st, err := cl.Stats(context.Background())
				return err == nil && st.Controller == 0
			}) {
				t.Fatal("gswitchd still counts a controller connection after the controller closed")
			}
			if err := tp.ping(t, 1, "10.0.0.2", 1); err != nil {
				t.Errorf("%s, controller lost: the installed flows no longer forward: %v", mode, err)
			}
			err3 := tp.ping(t, 1, "10.0.0.3", 2)
			switch mode {
			case "secure":
				if err3 == nil {
					t.Error("secure, controller lost: host 3 (no flow) answered: the switch did not stay secure")
				}
			case "standalone":
				if err3 != nil {
					t.Errorf("standalone, controller lost: no learning switch: %v", err3)
				}
			}
			st, err := cl.Stats(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if st.Counters.Standalone != (mode == "standalone") {
				t.Errorf("standalone counter %v in %s mode with the controller lost", st.Counters.Standalone, mode)
			}
			c.relisten(tp.sw)
			if !c.waitConnected(lost, 20*time.Second) {
				t.Fatal("gswitchd did not reconnect within 20s of the controller's return")
			}
			if mode == "standalone" {
				if !waitFor(5*time.Second, func() bool {
					st, err := cl.Stats(context.Background())
					return err == nil && !st.Counters.Standalone
				}) {
					t.Error("standalone: still learning after the controller came back")
				}
			}
		})
	}
}

// TestFxReconnectBackoff: a controller that drops every connection before
// the handshake sees gswitchd come back after growing waits (1 s, 2 s,
// 4 s: doubling from the 1 s minimum up to 16 s), never in a tight loop.
func TestFxReconnectBackoff(t *testing.T) {
	tp := fxTopo(t, "b", 1)
	c := fxListen(t, tp.sw, fxPort())
	c.mu.Lock()
	c.closeNext = 3
	c.mu.Unlock()
	fxStart(t, tp, fxCtlPath(t), "--controller", c.target(), "--fail-mode", "secure")
	if !waitFor(20*time.Second, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.handshake) > 0
	}) {
		t.Fatal("no handshake after the dropped connections")
	}
	c.mu.Lock()
	acc := append([]time.Time(nil), c.accepts...)
	c.mu.Unlock()
	if len(acc) < 4 {
		t.Fatalf("%d connections, want 4 (3 dropped, 1 kept)", len(acc))
	}
	var gaps []time.Duration
	for i := 1; i < 4; i++ {
		gaps = append(gaps, acc[i].Sub(acc[i-1]))
	}
	t.Logf("gaps between connection attempts: %v", gaps)
	for i, g := range gaps {
		want := time.Second << i
		if g < want*8/10 || g > want*3 {
			t.Errorf("gap %d: %v, want about %v (back-off doubling from 1s)", i, g, want)
		}
	}
}

// TestFxKillRestart: gswitchd killed with SIGKILL in the middle of a burst
// of FLOW_MODs and started again starts clean: no flow survives (the
// tables live in the process), both ports are attached and up, the
// control socket the killed process left is replaced, and the controller,
// which re-sends its flows on every new connection (resynchronisation),
// gets forwarding back.
func TestFxKillRestart(t *testing.T) {
	tp := fxTopo(t, "k", 2)
	c := fxListen(t, tp.sw, fxPort())
	c.mu.Lock() // the controller's goroutines read it under mu
	c.onConnect = func() {
		crossFlows(c)
		c.barrier(5 * time.Second)
	}
	c.mu.Unlock()
	ctlPath := fxCtlPath(t)
	start := time.Now()
	p := fxStart(t, tp, ctlPath, "--controller", c.target(), "--fail-mode", "secure", "--max-flows", "100000")
	if !c.waitConnected(start, 10*time.Second) {
		t.Fatal("gswitchd did not connect to the controller")
	}
	if !waitFor(10*time.Second, func() bool { return tp.ping(t, 1, "10.0.0.2", 1) == nil }) {
		t.Fatal("no forwarding before the kill")
	}
	// The burst runs until the kill breaks the connection: the process
	// dies with FLOW_MODs in flight (in its socket, half-applied).
	var sentAtKill atomic.Int64
	burstDone := make(chan int)
	go func() {
		n := 0
		for ; n < 1_000_000; n++ {
			mac := net.HardwareAddr{0x0a, 0, byte(n >> 16), byte(n >> 8), byte(n), 1}
			if _, err := c.trySend(ofptFlowMod, flowModBody(ofpfcAdd, ofFlow{priority: 20, ethDst: mac, out: 2})); err != nil {
				break
			}
			sentAtKill.Store(int64(n + 1))
		}
		burstDone <- n
	}()
	time.Sleep(500 * time.Millisecond)
	atKill := sentAtKill.Load()
	p.kill()
	sent := <-burstDone
	t.Logf("%d FLOW_MODs sent when SIGKILL came, %d in all", atKill, sent)
	if atKill == int64(sent) && sent == 1_000_000 {
		t.Fatal("the burst ended before the kill")
	}
	if _, err := os.Lstat(ctlPath); err != nil {
		t.Logf("the killed process left no socket file (%v)", err)
	}
	restart := time.Now()
	fxStart(t, tp, ctlPath, "--controller", c.target(), "--fail-mode", "secure", "--max-flows", "100000")
	if fi, err := os.Lstat(ctlPath); err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("control socket after the restart: %v, %v; want a socket with mode 0600", fi, err)
	}
	cl := ctl.NewClient(ctlPath)
	defer cl.Close()
	ports, err := cl.Ports(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 2 {
		t.Fatalf("%d ports after the restart, want 2", len(ports))
	}
	for _, p := range ports {
		if !p.Up {
			t.Errorf("port %d (%s) not up after the restart", p.Desc.No, p.Desc.Name)
		}
	}
	if !c.waitConnected(restart, 20*time.Second) {
		t.Fatal("the restarted gswitchd did not connect to the controller")
	}
	if !waitFor(10*time.Second, func() bool { return tp.ping(t, 1, "10.0.0.2", 1) == nil }) {
		t.Fatal("no forwarding after the restart and the controller's resynchronisation")
	}
	if n := fxFlows(t, ctlPath); n != 2 {
		t.Errorf("%d flows after the restart and resynchronisation, want the controller's 2 (none of the burst's %d)", n, sent)
	}
}

// TestFxTableFull: a FLOW_MOD that finds the table full is answered with
// OFPET_FLOW_MOD_FAILED / OFPFMFC_TABLE_FULL (its xid), and nothing else
// changes: the table keeps its entries, the connection stays up, traffic
// goes on by the flows installed, and a modification of an existing
// flow still works.
func TestFxTableFull(t *testing.T) {
	tp := fxTopo(t, "t", 2)
	c := fxListen(t, tp.sw, fxPort())
	ctlPath := fxCtlPath(t)
	start := time.Now()
	fxStart(t, tp, ctlPath, "--controller", c.target(), "--fail-mode", "secure", "--max-flows", "8")
	if !c.waitConnected(start, 10*time.Second) {
		t.Fatal("gswitchd did not connect to the controller")
	}
	crossFlows(c)
	for i := range 6 {
		c.addFlow(ofFlow{priority: 5, ethDst: net.HardwareAddr{0x0a, 0, 0, 0, 0, byte(i)}, out: 1})
	}
	if !c.barrier(5 * time.Second) {
		t.Fatal("no barrier reply")
	}
	if errs := c.anyErrors(); len(errs) != 0 {
		t.Fatalf("%d errors while filling the table to its size", len(errs))
	}
	xid := c.addFlow(ofFlow{priority: 5, ethDst: net.HardwareAddr{0x0a, 0, 0, 0, 0, 99}, out: 1})
	if !c.barrier(5 * time.Second) {
		t.Fatal("no barrier reply after the refused FLOW_MOD: the connection broke")
	}
	typ, code, ok := c.errorFor(xid)
	if !ok || typ != ofpetFlowModFailed || code != ofpfmfcTableFull {
		t.Fatalf("FLOW_MOD into a full table: error %v type %d code %d, want FLOW_MOD_FAILED (5) / TABLE_FULL (1)", ok, typ, code)
	}
	if errs := c.anyErrors(); len(errs) != 1 {
		t.Errorf("%d errors, want only the TABLE_FULL", len(errs))
	}
	if n := fxFlows(t, ctlPath); n != 8 {
		t.Errorf("%d flows after the refused add, want 8", n)
	}
	if err := tp.ping(t, 1, "10.0.0.2", 2); err != nil {
		t.Errorf("traffic by the installed flows after TABLE_FULL: %v", err)
	}
	// Replacing an existing entry (same match and priority) needs no room.
	c.addFlow(ofFlow{priority: 5, ethDst: net.HardwareAddr{0x0a, 0, 0, 0, 0, 0}, out: 2})
	if !c.barrier(5 * time.Second) {
		t.Fatal("no barrier reply")
	}
	if errs := c.anyErrors(); len(errs) != 1 {
		t.Errorf("replacing an entry of a full table: %d errors, want none new", len(errs)-1)
	}
	if n := fxFlows(t, ctlPath); n != 8 {
		t.Errorf("%d flows after the replacement, want 8", n)
	}
}
