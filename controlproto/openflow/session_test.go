package openflow

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// ctl is a test controller on one end of a connection.
type ctl struct {
	t *testing.T
	c net.Conn
}

func (c *ctl) send(m []byte) {
	c.t.Helper()
	c.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.c.Write(m); err != nil {
		c.t.Fatalf("send: %v", err)
	}
}

func (c *ctl) recv() []byte {
	c.t.Helper()
	c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	m, err := ReadMessage(c.c)
	if err != nil {
		c.t.Fatalf("recv: %v", err)
	}
	return m
}

// expect receives a message of type typ with xid.
func (c *ctl) expect(typ of.Type, xid uint32) []byte {
	c.t.Helper()
	m := c.recv()
	h, _ := ParseHeader(m)
	if h.Type != typ || h.Xid != xid || int(h.Length) != len(m) {
		c.t.Fatalf("got type %s xid %d (%x), want %s xid %d", h.Type, h.Xid, m, typ, xid)
	}
	return m
}

// expectError receives an OFPT_ERROR of type/code for req.
func (c *ctl) expectError(req []byte, typ ofp.ErrType, code ofp.ErrCode) {
	c.t.Helper()
	m := c.recv()
	gt, gc, _, ok := ParseError(m)
	if !ok || gt != typ || gc != code {
		c.t.Fatalf("got %x, want error %s", m, ofp.Error{Type: typ, Code: code})
	}
	checkErrorReply(c.t, req, m)
}

// startSession serves sw on one end of a pipe and returns the other end
// after the handshake.
func startSession(t *testing.T, a *Agent) *ctl {
	t.Helper()
	sc, cc := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, sc) }()
	t.Cleanup(func() {
		cancel()
		cc.Close()
		<-done
	})
	c := &ctl{t: t, c: cc}
	if h, _ := ParseHeader(c.recv()); h.Type != of.TypeHello {
		t.Fatalf("first message is %s, want a hello", h.Type)
	}
	c.send(EncodeHello(100))
	return c
}

func newTestAgent(sw Switch) *Agent {
	return NewAgent(sw, Options{Logf: func(string, ...any) {}})
}

func msg(t of.Type, xid uint32, body string) []byte {
	e := newMsg(t, xid)
	e.raw(unhex(nil, body))
	return e.finish()
}

func TestHelloNegotiation(t *testing.T) {
	cases := []struct {
		name  string
		hello string
		ok    bool
	}{
		{"1.3 bitmap", "04 00 00 10 00 00 00 01 00 01 00 08 00 00 00 10", true},
		{"1.0-1.5 bitmap", "06 00 00 10 00 00 00 01 00 01 00 08 00 00 00 7e", true},
		{"1.5 without bitmap", "06 00 00 08 00 00 00 01", true},
		{"1.0 without bitmap", "01 00 00 08 00 00 00 01", false},
		{"bitmap without 1.3", "05 00 00 10 00 00 00 01 00 01 00 08 00 00 00 62", false},
		{"not a hello", "04 05 00 08 00 00 00 01", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc, cc := net.Pipe()
			defer cc.Close()
			a := newTestAgent(newTableSwitch(1, 8))
			done := make(chan error, 1)
			go func() { done <- a.Serve(context.Background(), sc) }()
			k := &ctl{t: t, c: cc}
			k.recv()
			k.send(unhex(t, c.hello))
			if c.ok {
				req := newMsg(of.TypeFeaturesRequest, 5).finish()
				k.send(req)
				r := k.expect(of.TypeFeaturesReply, 5)
				if be64(r[8:]) != 1 || r[20] != 1 {
					t.Fatalf("features reply %x", r)
				}
				cc.Close()
				<-done
				return
			}
			m := k.recv()
			typ, code, data, ok := ParseError(m)
			if !ok || typ != ofp.ErrTypeHelloFailed || code != ofp.ErrCodeHelloFailedIncompatible || len(data) == 0 {
				t.Fatalf("got %x, want HELLO_FAILED/INCOMPATIBLE with text", m)
			}
			if err := <-done; err == nil {
				t.Fatal("Serve returned nil after a failed handshake")
			}
		})
	}
}

func TestSessionBasics(t *testing.T) {
	sw := newTableSwitch(3, 8)
	c := startSession(t, newTestAgent(sw))

	c.send(msg(of.TypeEchoRequest, 7, "de ad be ef"))
	if r := c.expect(of.TypeEchoReply, 7); !bytes.Equal(r[8:], []byte{0xde, 0xad, 0xbe, 0xef}) {
		t.Errorf("echo reply %x", r)
	}
	c.send(msg(of.TypeGetConfigRequest, 8, ""))
	if r := c.expect(of.TypeGetConfigReply, 8); be16(r[10:]) != 128 {
		t.Errorf("config reply %x", r)
	}
	c.send(msg(of.TypeSetConfig, 9, "00 00 ff e5"))
	c.send(msg(of.TypeGetConfigRequest, 10, ""))
	if r := c.expect(of.TypeGetConfigReply, 10); be16(r[10:]) != 0xffe5 {
		t.Errorf("config after set %x", r)
	}
	bad := msg(of.TypeSetConfig, 11, "00 03 ff e5")
	c.send(bad)
	c.expectError(bad, ofp.ErrTypeSwitchConfigFailed, ofp.ErrCodeSwitchConfigFailedBadFlags)

	for _, m := range [][]byte{
		msg(of.TypeGroupMod, 12, "00 00 00 00 00 00 00 01"),
		msg(of.TypePacketIn, 13, ""),
		msg(of.Type(40), 14, ""),
	} {
		c.send(m)
		c.expectError(m, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadType)
	}
	exp := msg(of.TypeExperiment, 15, "00 00 23 20 00 00 00 00")
	c.send(exp)
	c.expectError(exp, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadExperimenter)
	v := msg(of.TypeFeaturesRequest, 16, "")
	v[0] = 1
	c.send(v)
	c.expectError(v, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadVersion)
	long := msg(of.TypeBarrierRequest, 17, "00")
	c.send(long)
	c.expectError(long, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen)
}

// TestFlowModAndStats installs flows over a session and checks that flow
// stats echo them byte for byte, that errors come back with the xid and
// change nothing, and that the barrier reply follows the switch's barrier.
func TestFlowModAndStats(t *testing.T) {
	sw := newTableSwitch(3, 8)
	c := startSession(t, newTestAgent(sw))
	fm1 := unhex(t, flowModHex)
	fm2 := flowModWith(t, "01 00", ethIP+"80 00 18 04 0a 00 00 01", "00 04 00 20 00 00 00 00 00 19 00 10 80 00 18 04 0a 00 00 02 00 00 00 00 00 16 00 08 00 00 00 01")
	c.send(fm1)
	c.send(fm2)
	bad := flowModWith(t, "05 00", "", noInstr)
	c.send(bad)
	c.expectError(bad, ofp.ErrTypeFlowModFailed, ofp.ErrCodeFlowModFailedBadTableID)
	goto9 := flowModWith(t, add0, "", "00 01 00 08 09 00 00 00")
	c.send(goto9)
	c.expectError(goto9, ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionTableID)
	buf := flowModWith(t, add0, "", noInstr)
	buf[32] = 0
	c.send(buf)
	c.expectError(buf, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBufferUnknown)
	c.send(msg(of.TypeBarrierRequest, 77, ""))
	c.expect(of.TypeBarrierReply, 77)
	if n := sw.rules(); n != 2 || sw.barriers != 1 {
		t.Fatalf("%d rules, %d barriers; want 2, 1", n, sw.barriers)
	}

	// Flow stats for every table: the entries carry the match and the
	// instructions exactly as sent.
	c.send(msg(of.TypeMultipartRequest, 20, "00 01 00 00 00 00 00 00 ff 00 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 04 00 00 00 00"))
	r := c.expect(of.TypeMultipartReply, 20)
	body := r[mpHeaderLen:]
	for _, fm := range [][]byte{fm1, fm2} {
		n := int(be16(body))
		ent := body[:n]
		body = body[n:]
		if ent[2] != fm[24] || be16(ent[12:]) != be16(fm[30:]) {
			t.Errorf("table/priority of %x", ent)
		}
		if be16(ent[14:]) != be16(fm[26:]) || be16(ent[16:]) != be16(fm[28:]) || be16(ent[18:]) != be16(fm[44:]) || be64(ent[24:]) != be64(fm[8:]) {
			t.Errorf("timeouts/flags/cookie of %x", ent)
		}
		if !bytes.Equal(ent[48:], fm[48:]) {
			t.Errorf("match and instructions\n%x\nwant\n%x", ent[48:], fm[48:])
		}
	}
	if len(body) != 0 {
		t.Errorf("%d bytes left in the reply", len(body))
	}

	// Aggregate over table 1, out_port 1 does not select the group action.
	c.send(msg(of.TypeMultipartRequest, 21, "00 02 00 00 00 00 00 00 01 00 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 04 00 00 00 00"))
	if r := c.expect(of.TypeMultipartReply, 21); be32(r[32:]) != 1 {
		t.Errorf("aggregate %x: want flow_count 1", r)
	}
	badTable := msg(of.TypeMultipartRequest, 22, "00 01 00 00 00 00 00 00 09 00 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 04 00 00 00 00")
	c.send(badTable)
	c.expectError(badTable, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadTableID)

	// Delete everything from every table.
	c.send(flowModWith(t, "ff 03", "", noInstr))
	c.send(msg(of.TypeBarrierRequest, 78, ""))
	c.expect(of.TypeBarrierReply, 78)
	if n := sw.rules(); n != 0 {
		t.Fatalf("%d rules after delete all", n)
	}
}

func TestMultipart(t *testing.T) {
	sw := newTableSwitch(3, 8)
	c := startSession(t, newTestAgent(sw))
	c.send(msg(of.TypeMultipartRequest, 1, "00 00 00 00 00 00 00 00"))
	if r := c.expect(of.TypeMultipartReply, 1); len(r) != mpHeaderLen+1056 || !bytes.HasPrefix(r[16:], []byte("gswitch\x00")) {
		t.Errorf("desc reply of %d bytes", len(r))
	}
	c.send(msg(of.TypeMultipartRequest, 2, "00 03 00 00 00 00 00 00"))
	if r := c.expect(of.TypeMultipartReply, 2); len(r) != mpHeaderLen+3*24 {
		t.Errorf("table stats of %d bytes", len(r))
	}
	c.send(msg(of.TypeMultipartRequest, 3, "00 04 00 00 00 00 00 00 ff ff ff ff 00 00 00 00"))
	if r := c.expect(of.TypeMultipartReply, 3); len(r) != mpHeaderLen+2*112 {
		t.Errorf("port stats of %d bytes", len(r))
	}
	c.send(msg(of.TypeMultipartRequest, 4, "00 0d 00 00 00 00 00 00"))
	if r := c.expect(of.TypeMultipartReply, 4); len(r) != mpHeaderLen+2*64 || string(r[16+16:16+18]) != "p1" {
		t.Errorf("port desc %x", r)
	}
	// A request in two parts (REQ_MORE): the bodies are joined.
	c.send(msg(of.TypeMultipartRequest, 5, "00 04 00 01 00 00 00 00 00 00 00 02"))
	c.send(msg(of.TypeMultipartRequest, 5, "00 04 00 00 00 00 00 00 00 00 00 00"))
	if r := c.expect(of.TypeMultipartReply, 5); len(r) != mpHeaderLen+112 || be32(r[16:]) != 2 {
		t.Errorf("port stats in two parts: %x", r)
	}
	// A part of the same xid but another type: BAD_MULTIPART.
	c.send(msg(of.TypeMultipartRequest, 6, "00 04 00 01 00 00 00 00 00 00 00 02"))
	other := msg(of.TypeMultipartRequest, 6, "00 03 00 00 00 00 00 00")
	c.send(other)
	c.expectError(other, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadMultipart)
	for _, m := range [][]byte{
		msg(of.TypeMultipartRequest, 8, "00 07 00 00 00 00 00 00"),
		msg(of.TypeMultipartRequest, 9, "00 03 00 00 00 00 00 00 00"),
		msg(of.TypeMultipartRequest, 10, "00 04 00 00 00 00 00 00 00 00 00 00 00 00 00 00"),
	} {
		c.send(m)
		code := ofp.ErrCodeBadRequestBadMultipart
		if be32(m[4:]) == 9 {
			code = ofp.ErrCodeBadRequestLen
		}
		if be32(m[4:]) == 10 {
			code = ofp.ErrCodeBadRequestBadPort
		}
		c.expectError(m, ofp.ErrTypeBadRequest, code)
	}
}

// TestMultipartInterleaved: requests of other xids, whole or in parts,
// while a REQ_MORE request is open are answered, and so is the open one
// (as Open vSwitch does).
func TestMultipartInterleaved(t *testing.T) {
	c := startSession(t, newTestAgent(newTableSwitch(3, 8)))
	c.send(msg(of.TypeMultipartRequest, 1, "00 04 00 01 00 00 00 00 00 00 00 02")) // port stats, part 1
	c.send(msg(of.TypeMultipartRequest, 2, "00 03 00 00 00 00 00 00"))             // table stats, whole
	if r := c.expect(of.TypeMultipartReply, 2); len(r) != mpHeaderLen+3*24 {
		t.Errorf("table stats of %d bytes", len(r))
	}
	c.send(msg(of.TypeMultipartRequest, 3, "00 04 00 01 00 00 00 00 00 00 00 01")) // port stats, part 1
	c.send(msg(of.TypeMultipartRequest, 1, "00 04 00 00 00 00 00 00 00 00 00 00")) // xid 1, last part
	if r := c.expect(of.TypeMultipartReply, 1); len(r) != mpHeaderLen+112 || be32(r[16:]) != 2 {
		t.Errorf("port stats of xid 1: %x", r)
	}
	c.send(msg(of.TypeMultipartRequest, 3, "00 04 00 00 00 00 00 00 00 00 00 00")) // xid 3, last part
	if r := c.expect(of.TypeMultipartReply, 3); len(r) != mpHeaderLen+112 || be32(r[16:]) != 1 {
		t.Errorf("port stats of xid 3: %x", r)
	}
	// At most MaxMultipartOpen open at once.
	a := NewAgent(newTableSwitch(1, 8), Options{MaxMultipartOpen: 2, Logf: func(string, ...any) {}})
	c = startSession(t, a)
	c.send(msg(of.TypeMultipartRequest, 10, "00 04 00 01 00 00 00 00 00 00 00 02"))
	c.send(msg(of.TypeMultipartRequest, 11, "00 04 00 01 00 00 00 00 00 00 00 02"))
	third := msg(of.TypeMultipartRequest, 12, "00 04 00 01 00 00 00 00 00 00 00 02")
	c.send(third)
	c.expectError(third, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestMultipartBufferOverflow)
	c.send(msg(of.TypeMultipartRequest, 11, "00 04 00 00 00 00 00 00 00 00 00 00"))
	c.expect(of.TypeMultipartReply, 11)
}

func TestMultipartReplySplit(t *testing.T) {
	ents := make([][]byte, 3000)
	for i := range ents {
		ents[i] = make([]byte, 64)
	}
	ms := encodeMultipartReply(3, ofp.MultipartTypePortDescription, ents)
	total := 0
	for i, m := range ms {
		h, _ := ParseHeader(m)
		more := be16(m[10:])&mpMore != 0
		if int(h.Length) != len(m) || h.Xid != 3 || more != (i < len(ms)-1) {
			t.Fatalf("part %d: length %d of %d, xid %d, more %v", i, h.Length, len(m), h.Xid, more)
		}
		total += len(m) - mpHeaderLen
	}
	if len(ms) < 3 || total != 3000*64 {
		t.Fatalf("%d parts, %d bytes", len(ms), total)
	}
}

// TestRoles checks §6.3.5: generation ids, one master, slaves refused.
func TestRoles(t *testing.T) {
	sw := newTableSwitch(1, 8)
	a := newTestAgent(sw)
	c1, c2 := startSession(t, a), startSession(t, a)
	role := func(c *ctl, xid uint32, r Role, gen uint64) []byte {
		e := newMsg(of.TypeRoleRequest, xid)
		e.u32(uint32(r))
		e.pad(4)
		e.u64(gen)
		m := e.finish()
		c.send(m)
		return m
	}
	role(c1, 1, RoleMaster, 10)
	if r := c1.expect(of.TypeRoleReply, 1); be32(r[8:]) != uint32(RoleMaster) || be64(r[16:]) != 10 {
		t.Fatalf("role reply %x", r)
	}
	stale := role(c2, 2, RoleMaster, 9)
	c2.expectError(stale, ofp.ErrTypeRoleRequestFailed, ofp.ErrCodeRoleRequestFailedStale)
	role(c2, 3, RoleMaster, 11)
	c2.expect(of.TypeRoleReply, 3)
	role(c1, 4, RoleNoChange, 0)
	if r := c1.expect(of.TypeRoleReply, 4); be32(r[8:]) != uint32(RoleSlave) {
		t.Fatalf("old master is %d, want slave", be32(r[8:]))
	}
	fm := unhex(t, flowModHex)
	c1.send(fm)
	c1.expectError(fm, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestIsSlave)
	badRole := role(c1, 5, Role(7), 0)
	c1.expectError(badRole, ofp.ErrTypeRoleRequestFailed, ofp.ErrCodeRoleRequestFailedBadRole)
	// Wrapping comparison: 2^64-1 is older than 11.
	wrap := role(c1, 6, RoleSlave, ^uint64(0))
	c1.expectError(wrap, ofp.ErrTypeRoleRequestFailed, ofp.ErrCodeRoleRequestFailedStale)

	// Async messages: the master gets the packet-in, the slave only port status.
	var m flow.Match
	m.SetInPort(1)
	if n := a.PacketIn(&rule.PacketIn{Reason: rule.ReasonAction, Match: m, MaxLen: rule.MaxLenNoBuffer, Data: []byte{1, 2, 3}}); n != 1 {
		t.Fatalf("packet-in sent to %d connections, want 1", n)
	}
	r := c2.expect(of.TypePacketIn, 0)
	if be16(r[12:]) != 3 || r[14] != rule.ReasonAction || !bytes.HasSuffix(r, []byte{0, 0, 1, 2, 3}) {
		t.Fatalf("packet-in %x", r)
	}
	if n := a.PortStatus(&rule.PortStatus{Reason: rule.PortModified, Port: rule.Port{No: 1, Name: "p1"}}); n != 2 {
		t.Fatalf("port status sent to %d connections, want 2", n)
	}
	for _, c := range []*ctl{c1, c2} {
		if r := c.expect(of.TypePortStatus, 0); len(r) != 80 || r[8] != rule.PortModified {
			t.Fatalf("port status %x", r)
		}
	}
	// SET_ASYNC: the master turns flow-removed messages off.
	c2.send(msg(of.TypeSetAsync, 30, "00 00 00 03 00 00 00 00 00 00 00 07 00 00 00 07 00 00 00 00 00 00 00 00"))
	c2.send(msg(of.TypeGetAsyncRequest, 31, ""))
	if r := c2.expect(of.TypeGetAsyncReply, 31); be32(r[24:]) != 0 {
		t.Fatalf("get async %x", r)
	}
	if n := a.FlowRemoved(&rule.FlowRemoved{Reason: rule.RemovedDelete}); n != 0 {
		t.Fatalf("flow removed sent to %d connections, want 0", n)
	}
}

// TestKeepalive checks that an idle connection gets echo requests and is
// dropped when it does not answer.
func TestKeepalive(t *testing.T) {
	a := NewAgent(newTableSwitch(1, 8), Options{EchoInterval: 50 * time.Millisecond, EchoTimeout: 100 * time.Millisecond, Logf: func(string, ...any) {}})
	sc, cc := net.Pipe()
	defer cc.Close()
	done := make(chan error, 1)
	go func() { done <- a.Serve(context.Background(), sc) }()
	c := &ctl{t: t, c: cc}
	c.recv()
	c.send(EncodeHello(1))
	// Answer the first echo: the connection stays.
	r := c.recv()
	if h, _ := ParseHeader(r); h.Type != of.TypeEchoRequest {
		t.Fatalf("got %x, want an echo request", r)
	}
	r[1] = byte(of.TypeEchoReply)
	c.send(r)
	// Ignore the next one: the agent drops the connection.
	c.expect(of.TypeEchoRequest, be32(r[4:])+1)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not dropped")
	}
	if a.Connections() != 0 {
		t.Fatalf("%d connections registered", a.Connections())
	}
}

func TestParseTarget(t *testing.T) {
	cases := []struct {
		in   string
		want Target
		ok   bool
	}{
		{"tcp:127.0.0.1:6633", Target{Addr: "127.0.0.1:6633"}, true},
		{"tcp:ctl.example", Target{Addr: "ctl.example:6653"}, true},
		{"tcp:[::1]:6653", Target{Addr: "[::1]:6653"}, true},
		{"tcp:[::1]", Target{Addr: "[::1]:6653"}, true},
		{"ptcp:6653", Target{Passive: true, Addr: ":6653"}, true},
		{"ptcp:", Target{Passive: true, Addr: ":6653"}, true},
		{"ptcp:6653:127.0.0.1", Target{Passive: true, Addr: "127.0.0.1:6653"}, true},
		{"tcp:", Target{}, false},
		{"tcp:host:0", Target{}, false},
		{"ptcp:99999", Target{}, false},
		{"ptcp:6653:nothost", Target{}, false},
		{"unix:/x", Target{}, false},
		{"ssl:10.0.0.1", Target{TLS: true, Addr: "10.0.0.1:6653"}, true},
		{"tls:ctl.example:6633", Target{TLS: true, Addr: "ctl.example:6633"}, true},
		{"pssl:6653:127.0.0.1", Target{Passive: true, TLS: true, Addr: "127.0.0.1:6653"}, true},
		{"ptls:", Target{Passive: true, TLS: true, Addr: ":6653"}, true},
		{"ssl:", Target{}, false},
		{"pssl:x", Target{}, false},
		{"tcps:host", Target{}, false},
	}
	for _, c := range cases {
		got, err := ParseTarget(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseTarget(%q) = %+v, %v", c.in, got, err)
		}
	}
}

// TestActiveReconnect runs an active connection to a test controller that
// drops the first connection: the agent reconnects after the back-off.
func TestActiveReconnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := NewAgent(newTableSwitch(1, 8), Options{MinBackoff: 20 * time.Millisecond, MaxBackoff: 40 * time.Millisecond, Logf: func(string, ...any) {}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, "tcp:"+l.Addr().String()) }()
	accept := func() *ctl {
		l.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
		cn, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		return &ctl{t: t, c: cn}
	}
	first := accept()
	first.recv()
	first.c.Close()
	start := time.Now()
	second := accept()
	if d := time.Since(start); d < 15*time.Millisecond {
		t.Errorf("reconnected after %v, before the back-off", d)
	}
	second.recv()
	second.send(EncodeHello(1))
	second.send(msg(of.TypeFeaturesRequest, 2, ""))
	second.expect(of.TypeFeaturesReply, 2)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	second.c.Close()
}

// TestControllersCountsDialledSessions: a session a listener accepted
// (Serve: ovs-ofctl) counts in Connections but not in Controllers; one the
// agent dialled counts in both.
func TestControllersCountsDialledSessions(t *testing.T) {
	a := newTestAgent(newTableSwitch(1, 4))
	c := startSession(t, a)
	c.send(msg(of.TypeEchoRequest, 7, ""))
	c.expect(of.TypeEchoReply, 7)
	if a.Connections() != 1 || a.Controllers() != 0 {
		t.Fatalf("a passive session: Connections %d, Controllers %d; want 1 and 0", a.Connections(), a.Controllers())
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Connect(ctx, l.Addr().String()); close(done) }()
	defer func() { cancel(); <-done }()
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ac := &ctl{t: t, c: conn}
	if h, _ := ParseHeader(ac.recv()); h.Type != of.TypeHello {
		t.Fatalf("first message is %s, want a hello", h.Type)
	}
	ac.send(EncodeHello(1))
	ac.send(msg(of.TypeEchoRequest, 8, ""))
	ac.expect(of.TypeEchoReply, 8)
	if a.Connections() != 2 || a.Controllers() != 1 {
		t.Fatalf("a dialled and a passive session: Connections %d, Controllers %d; want 2 and 1", a.Connections(), a.Controllers())
	}
}

// TestInvalidTTLPacketIn checks packet-ins of reason INVALID_TTL: none by
// default (DefaultAsync, as Open vSwitch); after SET_ASYNC asks for them
// the connection receives them, cut to its miss_send_len (SET_CONFIG).
// OpenFlow 1.3 has no OFPC_INVALID_TTL_TO_CONTROLLER: SET_CONFIG with that
// bit (1.1/1.2's) gets OFPSCFC_BAD_FLAGS and changes nothing.
func TestInvalidTTLPacketIn(t *testing.T) {
	sw := newTableSwitch(1, 8)
	a := newTestAgent(sw)
	c1, c2 := startSession(t, a), startSession(t, a)
	var m flow.Match
	m.SetInPort(1)
	data := make([]byte, 100)
	for i := range data {
		data[i] = byte(i)
	}
	pi := &rule.PacketIn{Reason: rule.ReasonInvalidTTL, TableID: 3, Match: m, MaxLen: rule.MaxLenNoBuffer, Data: data}
	if n := a.PacketIn(pi); n != 0 {
		t.Fatalf("invalid-TTL packet-in sent to %d connections by default, want 0", n)
	}
	bad := msg(of.TypeSetConfig, 1, "00 04 00 40") // 1.2's OFPC_INVALID_TTL_TO_CONTROLLER
	c1.send(bad)
	c1.expectError(bad, ofp.ErrTypeSwitchConfigFailed, ofp.ErrCodeSwitchConfigFailedBadFlags)
	c1.send(msg(of.TypeGetConfigRequest, 2, ""))
	if r := c1.expect(of.TypeGetConfigReply, 2); be16(r[8:]) != 0 || be16(r[10:]) != 128 {
		t.Fatalf("get config after a refused SET_CONFIG %x", r)
	}
	// miss_send_len 64; packet-in reasons no-match, action and invalid TTL.
	c1.send(msg(of.TypeSetConfig, 3, "00 00 00 40"))
	c1.send(msg(of.TypeSetAsync, 4, "00 00 00 07 00 00 00 00 00 00 00 07 00 00 00 07 00 00 00 0f 00 00 00 00"))
	c1.send(msg(of.TypeGetAsyncRequest, 5, ""))
	c1.expect(of.TypeGetAsyncReply, 5)
	if n := a.PacketIn(pi); n != 1 {
		t.Fatalf("invalid-TTL packet-in sent to %d connections, want 1", n)
	}
	r := c1.expect(of.TypePacketIn, 0)
	if be16(r[12:]) != 100 || r[14] != rule.ReasonInvalidTTL || r[15] != 3 || !bytes.HasSuffix(r, data[:64]) || len(r) > 8+16+16+2+64 {
		t.Fatalf("packet-in %x", r)
	}
	// An action packet-in is not cut to miss_send_len.
	if n := a.PacketIn(&rule.PacketIn{Reason: rule.ReasonAction, Match: m, MaxLen: rule.MaxLenNoBuffer, Data: data}); n != 2 {
		t.Fatalf("action packet-in sent to %d connections, want 2", n)
	}
	for _, c := range []*ctl{c1, c2} {
		if r := c.expect(of.TypePacketIn, 0); !bytes.HasSuffix(r, data) {
			t.Fatalf("action packet-in %x", r)
		}
	}
}
