package openflow

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// packetOut builds a PACKET_OUT with in_port and one output action.
func packetOut(xid, inPort uint32) []byte {
	e := newMsg(of.TypePacketOut, xid)
	acts := EncodeActions([]rule.Action{{Kind: rule.ActOutput, Port: 1, MaxLen: rule.MaxLenNoBuffer}})
	e.u32(rule.NoBuffer)
	e.u32(inPort)
	e.u16(uint16(len(acts)))
	e.pad(6)
	e.raw(acts)
	e.raw(make([]byte, 60))
	return e.finish()
}

// TestErrorModelDeviations pins the codes OpenFlow 1.3.5 gives for the
// deviations a crafted-message corpus found.
func TestErrorModelDeviations(t *testing.T) {
	sw := newFullSwitch(2, 16)
	c := startSession(t, newTestAgent(sw))

	// §7.3.7: in_port must be a standard port or CONTROLLER.
	po := packetOut(1, rule.PortAny)
	c.send(po)
	c.expectError(po, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadPort)

	// §7.3.4.2: weight is defined only for select groups.
	gm := EncodeGroupMod(2, &rule.GroupMod{Command: rule.GroupAdd, Group: rule.Group{ID: 1, Type: rule.GroupTypeAll,
		Buckets: []rule.Bucket{{Weight: 2, WatchPort: rule.PortAny, WatchGroup: rule.GroupAny,
			Actions: []rule.Action{{Kind: rule.ActOutput, Port: 1}}}}}})
	c.send(gm)
	c.expectError(gm, ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedInvalidGroup)

	// §7.4.4.1: shorter than ofp_experimenter_header is BAD_LEN.
	ex := msg(of.TypeExperiment, 3, "00 00 23")
	c.send(ex)
	c.expectError(ex, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen)
	ex = msg(of.TypeExperiment, 4, "00 00 23 20 00 00 00 01")
	c.send(ex)
	c.expectError(ex, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadExperimenter)

	// A FLOW_MOD whose flow stats entry would not fit a multipart reply
	// (its actions make it long): OFPBAC_TOO_MANY, not FLOW_MOD_FAILED/UNKNOWN.
	as := make([]rule.Action, 4091)
	for i := range as {
		as[i] = rule.Action{Kind: rule.ActOutput, Port: 1, MaxLen: rule.MaxLenNoBuffer}
	}
	big := EncodeFlowMod(6, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, BufferID: rule.NoBuffer,
		OutPort: rule.PortAny, OutGroup: rule.GroupAny, Instructions: rule.Instructions{Has: rule.HasApplyActions, Apply: as}})
	if len(big) <= maxFlowMod || len(big) > 0xffff {
		t.Fatalf("test FLOW_MOD of %d bytes", len(big))
	}
	c.send(big)
	c.expectError(big, ofp.ErrTypeBadAction, ofp.ErrCodeBadActionTooMany)
	ok := EncodeFlowMod(7, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, BufferID: rule.NoBuffer,
		OutPort: rule.PortAny, OutGroup: rule.GroupAny, Instructions: rule.Instructions{Has: rule.HasApplyActions, Apply: as[:4000]}})
	c.send(ok)
	fs := flowStatsRequest(8)
	c.send(fs)
	if r := c.expect(of.TypeMultipartReply, 8); len(r) != mpHeaderLen+len(ok) {
		t.Errorf("flow stats of %d bytes for a FLOW_MOD of %d", len(r), len(ok))
	}
	c.send(EncodeFlowMod(9, &rule.FlowMod{Command: rule.FlowDelete, TableID: rule.TableAll, BufferID: rule.NoBuffer,
		OutPort: rule.PortAny, OutGroup: rule.GroupAny}))

	// None of them changed anything: a barrier, and the group is absent.
	c.send(msg(of.TypeBarrierRequest, 5, ""))
	c.expect(of.TypeBarrierReply, 5)
	if sw.GroupExists(1) {
		t.Error("the refused group exists")
	}
}

// TestSlaveCannotChangeState: every state-changing message of a slave gets
// OFPBRC_IS_SLAVE (§6.3.5), and nothing changes.
func TestSlaveCannotChangeState(t *testing.T) {
	sw := newFullSwitch(2, 16)
	c := startSession(t, newTestAgent(sw))
	e := newMsg(of.TypeRoleRequest, 1)
	e.u32(uint32(RoleSlave))
	e.pad(4)
	e.u64(1)
	c.send(e.finish())
	c.expect(of.TypeRoleReply, 1)
	before := sw.state()
	var m flow.Match
	m.SetInPort(1)
	for _, req := range [][]byte{
		EncodeFlowMod(10, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: m, BufferID: rule.NoBuffer,
			OutPort: rule.PortAny, OutGroup: rule.GroupAny, Instructions: rule.Instructions{Has: rule.HasApplyActions,
				Apply: []rule.Action{{Kind: rule.ActOutput, Port: 2}}}}),
		EncodeGroupMod(11, &rule.GroupMod{Command: rule.GroupAdd, Group: rule.Group{ID: 1, Type: rule.GroupTypeAll}}),
		EncodeMeterMod(12, &rule.MeterMod{Command: rule.MeterAdd, MeterConfig: rule.MeterConfig{ID: 1, Flags: rule.MeterKbps,
			Bands: []rule.MeterBand{{Type: rule.BandDrop, Rate: 1000}}}}),
		EncodePortMod(13, &rule.PortMod{PortNo: 1, HWAddr: sw.Ports()[0].HWAddr, Config: rule.PortConfigNoFwd, Mask: rule.PortConfigNoFwd}),
		packetOut(14, rule.PortController),
		msg(of.TypeTableMod, 15, "00 00 00 00 00 00 00 00"),
	} {
		c.send(req)
		c.expectError(req, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestIsSlave)
	}
	if after := sw.state(); after != before {
		t.Errorf("state changed:\n%s\nwant\n%s", after, before)
	}
}

// flowStatsRequest is an OFPMP_FLOW request for every table and entry.
func flowStatsRequest(xid uint32) []byte {
	e := newMsg(of.TypeMultipartRequest, xid)
	e.u16(uint16(ofp.MultipartTypeFlow))
	e.u16(0)
	e.pad(4)
	e.u8(rule.TableAll)
	e.pad(3)
	e.u32(rule.PortAny)
	e.u32(rule.GroupAny)
	e.pad(4)
	e.u64(0)
	e.u64(0)
	e.raw(EncodeMatch(&flow.Match{}))
	return e.finish()
}

// heapNow returns the live heap after a collection.
func heapNow() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestPeerThatStopsReadingIsDropped: a controller that sends flow-stats
// requests for a large table and never reads is disconnected within the
// limits (WriteTimeout, MaxOutputBytes), the agent's memory does not grow
// with it, and the connection is gone (for a controller the switch dialled,
// Controllers, which its fail mode consults, drops with it).
func TestPeerThatStopsReadingIsDropped(t *testing.T) {
	sw := newTableSwitch(1, 2000)
	for i := range 2000 {
		var m flow.Match
		m.SetInPort(uint32(i + 1))
		if err := sw.FlowMod(&rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: m, BufferID: rule.NoBuffer,
			OutPort: rule.PortAny, OutGroup: rule.GroupAny, Instructions: rule.Instructions{Has: rule.HasApplyActions,
				Apply: []rule.Action{{Kind: rule.ActOutput, Port: 2}}}}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a := NewAgent(sw, Options{WriteTimeout: 300 * time.Millisecond, MaxOutputBytes: 256 << 10,
		EchoInterval: time.Second, EchoTimeout: time.Second, Logf: t.Logf})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	// The agent's end of the connection, with small kernel buffers on both
	// sides, so that what the kernel absorbs does not hide the peer's
	// silence for long (gswitchd's own sockets are tested end to end by
	// integration's TestFoSlowControllerDropped).
	swConn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	swConn.(*net.TCPConn).SetWriteBuffer(4096)
	wg.Add(1)
	go func() { defer wg.Done(); a.Serve(ctx, swConn) }()
	conn, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	c := &ctl{t: t, c: conn}
	c.recv()
	c.send(EncodeHello(1))
	c.send(msg(of.TypeBarrierRequest, 2, ""))
	c.expect(of.TypeBarrierReply, 2)
	if a.Connections() != 1 {
		t.Fatalf("%d connections after the handshake", a.Connections())
	}
	base := heapNow()
	start := time.Now()
	stop := make(chan struct{})
	wg.Add(1)
	go func() { // the flood: requests, never a read
		defer wg.Done()
		req := flowStatsRequest(3)
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
		}
	}()
	var peak uint64
	for a.Connections() != 0 {
		if time.Since(start) > 10*time.Second {
			close(stop)
			t.Fatal("the connection of a peer that stopped reading was not dropped in 10 s")
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapAlloc)
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	took := time.Since(start)
	t.Logf("dropped after %v; heap %d KiB before, peak %d KiB", took, base>>10, peak>>10)
	if peak > base+64<<20 {
		t.Errorf("heap grew from %d to %d bytes", base, peak)
	}
	if a.OutputDrops() == 0 {
		t.Error("OutputDrops not counted")
	}
	// The socket is closed: the peer reads what was queued, then EOF (or
	// a reset: the agent closed with the flood's requests unread).
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, conn); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("draining the dropped connection: %v", err)
	}
}

// TestEchoTimeoutWithFullQueue: the echo timeout runs even when the echo
// request cannot be queued (the queue is full of packet-ins a peer that
// stopped reading never took).
func TestEchoTimeoutWithFullQueue(t *testing.T) {
	// The echo is due well after the queue is full (300 ms).
	a := NewAgent(newTableSwitch(1, 8), Options{EchoInterval: 300 * time.Millisecond, EchoTimeout: 100 * time.Millisecond,
		WriteTimeout: time.Hour, PacketInRate: -1, Logf: func(string, ...any) {}})
	sc, cc := net.Pipe() // unbuffered: nothing is written while the peer does not read
	defer cc.Close()
	done := make(chan error, 1)
	go func() { done <- a.Serve(context.Background(), sc) }()
	c := &ctl{t: t, c: cc}
	c.recv()
	c.send(EncodeHello(1))
	c.send(msg(of.TypeBarrierRequest, 2, ""))
	c.expect(of.TypeBarrierReply, 2)
	for a.PacketIn(&rule.PacketIn{Reason: rule.ReasonAction, MaxLen: rule.MaxLenNoBuffer, Data: make([]byte, 64)}) == 1 {
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not dropped: the echo timeout did not run")
	}
}

// TestIdleConnectionsDoNotStarveController: 300 connections that send
// nothing or half a header do not stop a controller from being served, and
// the handshake timeout drops them.
func TestIdleConnectionsDoNotStarveController(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sw := newTableSwitch(1, 8)
	a := NewAgent(sw, Options{HelloTimeout: 2 * time.Second, Logf: func(string, ...any) {}})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); a.ServeListener(ctx, l) }()
	defer func() { cancel(); <-served }()
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for i := range 300 {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		if i%2 == 1 {
			c.Write([]byte{Version, byte(of.TypeHello)}) // half a header, then silence
		}
		idle = append(idle, c)
	}
	start := time.Now()
	conn, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := &ctl{t: t, c: conn}
	c.recv()
	c.send(EncodeHello(1))
	var m flow.Match
	m.SetInPort(1)
	c.send(EncodeFlowMod(2, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: m, BufferID: rule.NoBuffer,
		OutPort: rule.PortAny, OutGroup: rule.GroupAny}))
	c.send(msg(of.TypeBarrierRequest, 3, ""))
	c.expect(of.TypeBarrierReply, 3)
	if d := time.Since(start); d > time.Second {
		t.Errorf("controller served after %v, want under 1 s", d)
	}
	if sw.rules() != 1 {
		t.Errorf("%d rules after the FLOW_MOD", sw.rules())
	}
	// The handshake timeout closes the idle ones (each got its HELLO, then EOF).
	for i, ic := range idle {
		ic.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, ic); err != nil {
			t.Fatalf("idle connection %d not closed by the handshake timeout: %v", i, err)
		}
	}
}

// TestPacketInRateLimit: packet-ins over a connection's rate are dropped
// and counted; the rest go through.
func TestPacketInRateLimit(t *testing.T) {
	a := NewAgent(newTableSwitch(1, 8), Options{PacketInRate: 10, PacketInBurst: 5, Logf: func(string, ...any) {}})
	c := startSession(t, a)
	c.send(msg(of.TypeBarrierRequest, 1, ""))
	c.expect(of.TypeBarrierReply, 1)
	sent := 0
	for range 100 {
		sent += a.PacketIn(&rule.PacketIn{Reason: rule.ReasonAction, MaxLen: rule.MaxLenNoBuffer, Data: []byte{1}})
	}
	if sent < 5 || sent > 7 {
		t.Errorf("%d of 100 packet-ins sent at once, want the burst of 5", sent)
	}
	if got := a.PacketInsLimited(); got != uint64(100-sent) {
		t.Errorf("PacketInsLimited %d, want %d", got, 100-sent)
	}
	for range sent {
		c.expect(of.TypePacketIn, 0)
	}
	time.Sleep(300 * time.Millisecond) // 3 tokens
	if n := a.PacketIn(&rule.PacketIn{Reason: rule.ReasonAction, MaxLen: rule.MaxLenNoBuffer, Data: []byte{1}}); n != 1 {
		t.Error("no packet-in after the bucket refilled")
	}
	c.expect(of.TypePacketIn, 0)
}

func TestTokenBucket(t *testing.T) {
	b := tokenBucket{rate: 100, burst: 10}
	now := time.Unix(0, 0)
	n := 0
	for range 50 {
		if b.allow(now) {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("burst %d, want 10", n)
	}
	now = now.Add(time.Second) // 100 tokens, capped at 10
	n = 0
	for range 50 {
		if b.allow(now) {
			n++
		}
	}
	if n != 10 {
		t.Fatalf("after a second %d, want 10", n)
	}
	var off tokenBucket
	for range 1000 {
		if !off.allow(now) {
			t.Fatal("a zero bucket refused")
		}
	}
}
