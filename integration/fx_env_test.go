package integration

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
)

// The TestFx* tests (faults, re-attachment, malformed frames, soak) share
// these helpers: a topology whose namespaces are named fx..., a gswitchd
// that a test may kill and restart, and a minimal OpenFlow 1.3 controller
// written from the specification's byte layouts (independent of the
// switch's own codec) that gswitchd dials.

// fxTopo is newTopo's layout (a switch namespace, hosts 10.0.0.i/24 with
// MAC 02:00:00:00:00:0i on eth0, linked to swp<i>) under fx... names.
func fxTopo(t *testing.T, tag string, n int) *topo {
	t.Helper()
	id := rand.IntN(1 << 16)
	return newTopoNamed(t, n, fmt.Sprintf("fx%ss%x", tag, id), func(i int) string { return fmt.Sprintf("fx%sh%d%x", tag, i, id) })
}

// fxProc is a gswitchd in tp's switch namespace that a test may kill.
type fxProc struct {
	cmd    *exec.Cmd
	log    *syncBuffer
	exited chan struct{}
	err    error
}

// fxStart starts gswitchd with one port per host, the control socket at
// ctlPath and the extra flags, and waits for the control socket to answer.
func fxStart(t *testing.T, tp *topo, ctlPath string, extra ...string) *fxProc {
	t.Helper()
	bin := gswitchdBinary(t)
	args := []string{"netns", "exec", tp.sw, bin, "--ctl-socket", ctlPath, "--log-level", "debug", "--max-delay", "50us", "--p4rt-listen", "off"}
	for i := range tp.hosts {
		args = append(args, "--port", fmt.Sprintf("%d=swp%d", i+1, i+1))
	}
	p := &fxProc{cmd: exec.Command("ip", append(args, extra...)...), log: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			t.Errorf("gswitchd did not stop within 5s of SIGTERM")
			p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("gswitchd log:\n%s", p.log.String())
		}
	})
	c := ctl.NewClient(ctlPath)
	defer c.Close()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.exited:
			t.Fatalf("gswitchd exited at start (%v):\n%s", p.err, p.log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Stats(ctx)
		cancel()
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("gswitchd's control socket does not answer within 15s: %v\n%s", err, p.log.String())
		}
	}
}

// kill sends SIGKILL and waits for the process.
func (p *fxProc) kill() {
	p.cmd.Process.Kill()
	<-p.exited
}

// running reports whether the process is still alive.
func (p *fxProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// OpenFlow 1.3 constants the controller uses (openflow.h, 1.3.5).
const (
	ofVersion       = 4
	ofptHello       = 0
	ofptError       = 1
	ofptEchoRequest = 2
	ofptEchoReply   = 3
	ofptFeaturesReq = 5
	ofptFeaturesRep = 6
	ofptPortStatus  = 12
	ofptFlowMod     = 14
	ofptBarrierReq  = 20
	ofptBarrierRep  = 21

	ofpfcAdd    = 0
	ofpfcDelete = 3

	ofppAny = 0xffffffff
	ofpgAny = 0xffffffff

	ofpprAdd    = 0
	ofpprDelete = 1
	ofpprModify = 2

	ofpetFlowModFailed = 5
	ofpfmfcTableFull   = 1
)

// ofMsg is one message the controller received.
type ofMsg struct {
	typ  uint8
	xid  uint32
	body []byte // after the 8-byte header
	at   time.Time
}

// ofPortStatus is a decoded PORT_STATUS.
type ofPortStatus struct {
	reason uint8
	no     uint32
	name   string
	hw     net.HardwareAddr
	state  uint32
}

func (m ofMsg) portStatus() ofPortStatus {
	b := m.body // reason(1) pad(7) ofp_port(64)
	if len(b) < 8+64 {
		return ofPortStatus{reason: 0xff}
	}
	p := b[8:]
	return ofPortStatus{reason: b[0], no: binary.BigEndian.Uint32(p), hw: net.HardwareAddr(append([]byte(nil), p[8:14]...)),
		name: strings.TrimRight(string(p[16:32]), "\x00"), state: binary.BigEndian.Uint32(p[36:])}
}

// fxController is an OpenFlow controller listening in a namespace: each
// connection gswitchd makes is answered (HELLO, FEATURES_REQUEST, echo
// replies) and every message is recorded. onConnect, if set, runs after
// each handshake (a controller's resynchronisation).
type fxController struct {
	t    *testing.T
	l    net.Listener
	port int

	mu        sync.Mutex
	conn      net.Conn // the latest connection past the handshake
	conns     int      // connections accepted
	handshake []time.Time
	accepts   []time.Time
	msgs      []ofMsg
	xid       uint32
	closeNext int // close this many new connections at once (no handshake)
	onConnect func()
	wake      chan struct{}
}

// fxListen starts a controller on 127.0.0.1:port in namespace ns.
func fxListen(t *testing.T, ns string, port int) *fxController {
	t.Helper()
	c := &fxController{t: t, port: port, xid: 1000, wake: make(chan struct{}, 1)}
	var err error
	inNamedNS(t, ns, func() { c.l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)) })
	if err != nil {
		t.Fatalf("controller listen: %v", err)
	}
	go c.accept(c.l)
	t.Cleanup(c.close)
	return c
}

// target is gswitchd's --controller value.
func (c *fxController) target() string { return fmt.Sprintf("tcp:127.0.0.1:%d", c.port) }

func (c *fxController) accept(l net.Listener) {
	for {
		cn, err := l.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		c.conns++
		c.accepts = append(c.accepts, time.Now())
		drop := c.closeNext > 0
		if drop {
			c.closeNext--
		}
		c.mu.Unlock()
		if drop {
			cn.Close()
			continue
		}
		go c.serve(cn)
	}
}

// close stops listening and drops the connection (a controller lost).
func (c *fxController) close() {
	c.l.Close()
	c.mu.Lock()
	if c.conn != nil {
		c.conn.Close()
		c.conn = nil
	}
	c.mu.Unlock()
}

// relisten listens again on the same port (the controller is back).
func (c *fxController) relisten(ns string) {
	var err error
	inNamedNS(c.t, ns, func() { c.l, err = net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.port)) })
	if err != nil {
		c.t.Fatalf("controller listen again: %v", err)
	}
	go c.accept(c.l)
}

func ofHeader(typ uint8, length int, xid uint32) []byte {
	b := make([]byte, 8, length)
	b[0], b[1] = ofVersion, typ
	binary.BigEndian.PutUint16(b[2:], uint16(length))
	binary.BigEndian.PutUint32(b[4:], xid)
	return b
}

func (c *fxController) serve(cn net.Conn) {
	defer cn.Close()
	var wmu sync.Mutex
	write := func(b []byte) {
		wmu.Lock()
		defer wmu.Unlock()
		cn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		cn.Write(b)
	}
	write(ofHeader(ofptHello, 8, 1))
	r := bufio.NewReader(cn)
	for {
		h := make([]byte, 8)
		if _, err := io.ReadFull(r, h); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(h[2:]))
		if n < 8 {
			return
		}
		body := make([]byte, n-8)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		m := ofMsg{typ: h[1], xid: binary.BigEndian.Uint32(h[4:]), body: body, at: time.Now()}
		switch m.typ {
		case ofptHello:
			write(ofHeader(ofptFeaturesReq, 8, 2))
		case ofptEchoRequest:
			write(append(ofHeader(ofptEchoReply, 8+len(body), m.xid), body...))
		case ofptFeaturesRep:
			c.mu.Lock()
			c.conn = cn
			c.handshake = append(c.handshake, time.Now())
			on := c.onConnect
			c.mu.Unlock()
			if on != nil {
				go on()
			}
		}
		c.mu.Lock()
		c.msgs = append(c.msgs, m)
		c.mu.Unlock()
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// waitConnected waits for a handshake after 'since'.
func (c *fxController) waitConnected(since time.Time, d time.Duration) bool {
	return waitFor(d, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.handshake) > 0 && c.handshake[len(c.handshake)-1].After(since)
	})
}

// send writes one message on the current connection and returns its xid;
// it fails the test on an error (call it from the test's goroutine).
func (c *fxController) send(typ uint8, body []byte) uint32 {
	xid, err := c.trySend(typ, body)
	if err != nil {
		c.t.Fatalf("controller: send: %v", err)
	}
	return xid
}

// trySend is send for other goroutines: it returns the error.
func (c *fxController) trySend(typ uint8, body []byte) (uint32, error) {
	c.mu.Lock()
	cn := c.conn
	c.xid++
	xid := c.xid
	c.mu.Unlock()
	if cn == nil {
		return 0, fmt.Errorf("no connection to send on")
	}
	b := append(ofHeader(typ, 8+len(body), xid), body...)
	cn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, err := cn.Write(b)
	return xid, err
}

// find returns the first message ok accepts.
func (c *fxController) find(ok func(ofMsg) bool) (ofMsg, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range c.msgs {
		if ok(m) {
			return m, true
		}
	}
	return ofMsg{}, false
}

// waitMsg waits up to d for a message ok accepts.
func (c *fxController) waitMsg(d time.Duration, ok func(ofMsg) bool) (ofMsg, bool) {
	deadline := time.Now().Add(d)
	for {
		if m, found := c.find(ok); found {
			return m, true
		}
		left := time.Until(deadline)
		if left <= 0 {
			return ofMsg{}, false
		}
		select {
		case <-c.wake:
		case <-time.After(min(left, 100*time.Millisecond)):
		}
	}
}

// barrier sends a BARRIER_REQUEST and waits for its reply.
func (c *fxController) barrier(d time.Duration) bool {
	xid := c.send(ofptBarrierReq, nil)
	_, ok := c.waitMsg(d, func(m ofMsg) bool { return m.typ == ofptBarrierRep && m.xid == xid })
	return ok
}

// errorFor returns the type and code of the OFPT_ERROR answering xid.
func (c *fxController) errorFor(xid uint32) (uint16, uint16, bool) {
	m, ok := c.find(func(m ofMsg) bool { return m.typ == ofptError && m.xid == xid })
	if !ok || len(m.body) < 4 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(m.body), binary.BigEndian.Uint16(m.body[2:]), true
}

// anyErrors returns the OFPT_ERRORs received.
func (c *fxController) anyErrors() []ofMsg {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []ofMsg
	for _, m := range c.msgs {
		if m.typ == ofptError {
			out = append(out, m)
		}
	}
	return out
}

// ofFlow is a FLOW_MOD's content: a match on in_port and/or eth_dst (nil:
// not matched), and an output port (0: no actions, a drop).
type ofFlow struct {
	priority uint16
	inPort   uint32
	ethDst   net.HardwareAddr
	out      uint32
	cookie   uint64
}

// flowMod encodes an OFPT_FLOW_MOD body for table 0 (command ADD or
// DELETE; DELETE with no fields set deletes every flow of every table).
func flowModBody(cmd uint8, f ofFlow) []byte {
	b := make([]byte, 40, 128)
	binary.BigEndian.PutUint64(b[0:], f.cookie)
	if cmd == ofpfcDelete {
		b[16] = 0xff // OFPTT_ALL
	}
	b[17] = cmd
	binary.BigEndian.PutUint16(b[22:], f.priority)
	binary.BigEndian.PutUint32(b[24:], 0xffffffff) // OFP_NO_BUFFER
	binary.BigEndian.PutUint32(b[28:], ofppAny)
	binary.BigEndian.PutUint32(b[32:], ofpgAny)
	// flags (b[36:38]) 0: no flow-removed messages, no overlap check
	var oxm []byte
	if f.inPort != 0 {
		oxm = binary.BigEndian.AppendUint32(oxm, 0x80000004) // OXM_OF_IN_PORT
		oxm = binary.BigEndian.AppendUint32(oxm, f.inPort)
	}
	if f.ethDst != nil {
		oxm = binary.BigEndian.AppendUint32(oxm, 0x80000606) // OXM_OF_ETH_DST
		oxm = append(oxm, f.ethDst...)
	}
	mlen := 4 + len(oxm)
	b = binary.BigEndian.AppendUint16(b, 1) // OFPMT_OXM
	b = binary.BigEndian.AppendUint16(b, uint16(mlen))
	b = append(b, oxm...)
	b = append(b, make([]byte, (8-mlen%8)%8)...)
	if cmd == ofpfcAdd && f.out != 0 {
		b = binary.BigEndian.AppendUint16(b, 4) // OFPIT_APPLY_ACTIONS
		b = binary.BigEndian.AppendUint16(b, 24)
		b = append(b, 0, 0, 0, 0)
		b = binary.BigEndian.AppendUint16(b, 0) // OFPAT_OUTPUT
		b = binary.BigEndian.AppendUint16(b, 16)
		b = binary.BigEndian.AppendUint32(b, f.out)
		b = binary.BigEndian.AppendUint16(b, 0xffff) // OFPCML_NO_BUFFER
		b = append(b, 0, 0, 0, 0, 0, 0)
	}
	return b
}

func (c *fxController) addFlow(f ofFlow) uint32 { return c.send(ofptFlowMod, flowModBody(ofpfcAdd, f)) }

// fxFlows returns the flow entries gswitchd reports on its control socket.
func fxFlows(t *testing.T, ctlPath string) int {
	t.Helper()
	c := ctl.NewClient(ctlPath)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fl, err := c.Flows(ctx)
	if err != nil {
		t.Fatalf("ctl flows: %v", err)
	}
	return len(fl)
}

// fxCtlPath is a control socket path in a fresh temporary folder.
func fxCtlPath(t *testing.T) string {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "gswitchd.sock")
}

// fxPort returns a TCP port for the test's controller (in the test's own
// namespace, so only other fx tests could collide).
func fxPort() int { return 41000 + rand.IntN(4000) }
