package pipeline

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/packet"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// fakeDev is a Device that records what is sent through it.
type fakeDev struct {
	name string
	mu   sync.Mutex
	sent [][]byte
	down bool
}

func (d *fakeDev) Send(frames [][]byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, f := range frames {
		d.sent = append(d.sent, append([]byte(nil), f...))
	}
	return len(frames), nil
}

func (d *fakeDev) Link() afpacket.LinkInfo {
	return afpacket.LinkInfo{Name: d.name, AdminUp: !d.down, OperUp: !d.down, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}}
}

func (d *fakeDev) Stats() (afpacket.Stats, error) { return afpacket.Stats{}, nil }

func (d *fakeDev) take() [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.sent
	d.sent = nil
	return s
}

// fakeCtrl records the asynchronous messages.
type fakeCtrl struct {
	mu      sync.Mutex
	conns   int
	pins    []*rule.PacketIn
	removed []*rule.FlowRemoved
	status  []*rule.PortStatus
}

func (c *fakeCtrl) PacketIn(pi *rule.PacketIn) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pins = append(c.pins, pi)
	return 1
}

func (c *fakeCtrl) FlowRemoved(fr *rule.FlowRemoved) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removed = append(c.removed, fr)
	return 1
}

func (c *fakeCtrl) PortStatus(ps *rule.PortStatus) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.status = append(c.status, ps)
	return 1
}
func (c *fakeCtrl) Connections() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.conns
}
func (c *fakeCtrl) Controllers() int { return c.Connections() }

type rig struct {
	sw   *Switch
	devs []*fakeDev
	ctrl *fakeCtrl
}

// newRig builds a switch on a CPU engine with n fake ports (numbered 1..n)
// and a fake controller with one connection.
func newRig(t testing.TB, n int, mode FailMode) *rig {
	t.Helper()
	eng, err := gpu.Open("cpu", nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return newRigOn(t, n, mode, eng)
}

// newRigOn is newRig with the switch's lookups on eng.
func newRigOn(t testing.TB, n int, mode FailMode, eng *gpu.Engine) *rig {
	t.Helper()
	sw, err := New(Config{DatapathID: 1, Tables: 3, Classifier: eng, FailMode: mode})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{sw: sw, ctrl: &fakeCtrl{conns: 1}}
	sw.SetController(r.ctrl)
	for i := 1; i <= n; i++ {
		d := &fakeDev{name: "p" + string(rune('0'+i))}
		r.devs = append(r.devs, d)
		if err := sw.AddPort(uint32(i), d); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func (r *rig) flowMod(t testing.TB, fm *rule.FlowMod) {
	t.Helper()
	if fm.BufferID == 0 {
		fm.BufferID = rule.NoBuffer
	}
	if fm.OutPort == 0 {
		fm.OutPort, fm.OutGroup = rule.PortAny, rule.GroupAny
	}
	if err := r.sw.FlowMod(fm); err != nil {
		t.Fatal(err)
	}
}

func output(port uint32) rule.Action {
	return rule.Action{Kind: rule.ActOutput, Port: port, MaxLen: rule.MaxLenNoBuffer}
}

func applyOut(port uint32) rule.Instructions {
	return rule.Instructions{Has: rule.HasApplyActions, Apply: []rule.Action{output(port)}}
}

func matchInPort(p uint32) flow.Match {
	var m flow.Match
	m.SetInPort(p)
	return m
}

// udpFrame builds an Ethernet/IPv4/UDP frame with valid checksums.
func udpFrame(t *testing.T, src, dst string) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
	udp := &layers.UDP{SrcPort: 1000, DstPort: 2000}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, udp, gopacket.Payload("hello gswitch")); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func TestForwardAndCounters(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: applyOut(2)})
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2"), udpFrame(t, "10.0.0.1", "10.0.0.3")})
	r.sw.Process(2, [][]byte{udpFrame(t, "10.0.0.2", "10.0.0.1")}) // no rule: dropped
	if got := len(r.devs[1].take()); got != 2 {
		t.Fatalf("port 2 got %d frames, want 2", got)
	}
	if got := len(r.devs[0].take()) + len(r.devs[2].take()); got != 0 {
		t.Fatalf("ports 1 and 3 got %d frames, want 0", got)
	}
	ts := r.sw.TableStats()
	if ts[0].Lookups != 3 || ts[0].Matched != 2 || ts[0].Active != 1 {
		t.Errorf("table 0 stats %+v, want 3 lookups, 2 matched, 1 active", ts[0])
	}
	fs, err := r.sw.FlowStats(&rule.FlowStatsRequest{TableID: rule.TableAll, OutPort: rule.PortAny, OutGroup: rule.GroupAny})
	if err != nil || len(fs) != 1 || fs[0].Packets != 2 || fs[0].Bytes == 0 {
		t.Fatalf("flow stats %+v, %v: want one entry with 2 packets", fs, err)
	}
	ps, _ := r.sw.PortStats(2)
	if ps[0].RxDropped != 1 {
		t.Errorf("port 2 rx_dropped %d, want 1 (table miss)", ps[0].RxDropped)
	}
	if _, err := r.sw.PortStats(9); err == nil {
		t.Error("port stats of a missing port: no error")
	}
}

func TestDeleteStopsForwardingAndSendsFlowRemoved(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Cookie: 7, Flags: rule.FlagSendFlowRem,
		Match: matchInPort(1), Instructions: applyOut(2)})
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowDelete, TableID: rule.TableAll})
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	if got := len(r.devs[1].take()); got != 1 {
		t.Fatalf("port 2 got %d frames, want 1 (before the delete only)", got)
	}
	if len(r.ctrl.removed) != 1 || r.ctrl.removed[0].Reason != rule.RemovedDelete || r.ctrl.removed[0].Cookie != 7 || r.ctrl.removed[0].Packets != 1 {
		t.Fatalf("flow removed %+v", r.ctrl.removed)
	}
}

func TestDeleteByOutPort(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: applyOut(2)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(2), Instructions: applyOut(3)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowDelete, TableID: 0, OutPort: 3, OutGroup: rule.GroupAny})
	if ts := r.sw.TableStats(); ts[0].Active != 1 {
		t.Fatalf("%d entries left, want 1", ts[0].Active)
	}
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	if got := len(r.devs[1].take()); got != 1 {
		t.Fatalf("the rule without output:3 was deleted")
	}
}

func TestTimeouts(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, HardTimeout: 5, Flags: rule.FlagSendFlowRem,
		Match: matchInPort(1), Instructions: applyOut(2)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, IdleTimeout: 2, Flags: rule.FlagSendFlowRem,
		Match: matchInPort(2), Instructions: applyOut(1)})
	now := time.Now()
	if n := r.sw.Expire(now.Add(time.Second)); n != 0 {
		t.Fatalf("expired %d entries after 1s, want 0", n)
	}
	if n := r.sw.Expire(now.Add(3 * time.Second)); n != 1 {
		t.Fatalf("expired %d entries after 3s, want 1 (idle)", n)
	}
	if n := r.sw.Expire(now.Add(6 * time.Second)); n != 1 {
		t.Fatalf("expired %d entries after 6s, want 1 (hard)", n)
	}
	if len(r.ctrl.removed) != 2 || r.ctrl.removed[0].Reason != rule.RemovedIdleTimeout || r.ctrl.removed[1].Reason != rule.RemovedHardTimeout {
		t.Fatalf("flow removed: %+v", r.ctrl.removed)
	}
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	if len(r.devs[1].take()) != 0 {
		t.Fatal("an expired entry still forwards")
	}
}

// TestIdleTimeoutHitRefreshes: a frame that hits an entry with an idle
// timeout moves its last-used time, so the entry outlives an expiry that
// counts from its installation; an entry without one is not written by
// its hits.
func TestIdleTimeoutHitRefreshes(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, IdleTimeout: 2, Match: matchInPort(1), Instructions: applyOut(2)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(2), Instructions: applyOut(1)})
	var idle, plain *entry // the in_port 1 and 2 entries
	for _, e := range r.sw.tables[0].entries {
		switch {
		case e == nil:
		case e.fm.IdleTimeout != 0:
			idle = e
		default:
			plain = e
		}
	}
	if idle == nil || plain == nil {
		t.Fatal("the two entries are not in table 0")
	}
	installed, plainUsed := idle.used.Load(), plain.used.Load()
	time.Sleep(20 * time.Millisecond)
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	r.sw.Process(2, [][]byte{udpFrame(t, "10.0.0.2", "10.0.0.1")})
	if len(r.devs[1].take()) != 1 || len(r.devs[0].take()) != 1 {
		t.Fatal("the frames were not forwarded")
	}
	if u := idle.used.Load(); u < installed+int64(20*time.Millisecond) {
		t.Fatalf("a hit left the idle entry's last use at %d, installed at %d", u, installed)
	}
	if u := plain.used.Load(); u != plainUsed {
		t.Errorf("a hit wrote the last use of an entry without an idle timeout (%d, was %d)", u, plainUsed)
	}
	// 2 s and 10 ms after the installation, 1.99 s after the hit.
	if n := r.sw.Expire(time.Unix(0, installed).Add(2*time.Second + 10*time.Millisecond)); n != 0 {
		t.Fatalf("expired %d entries 1.99 s after a hit, want 0", n)
	}
}

// TestExpireLooksOnlyAtTimedEntries: Expire keeps the entries with a
// timeout in table.timed (through modify, delete and expiry), and while
// none is due it takes only the read lock, which batches share: it
// returns while another holder of the read lock (a batch in flight) is
// still running, where a write lock would wait for it, and the write-lock
// histogram (WriteLockStats) counts no expiry span then, one once an
// entry was removed.
func TestExpireLooksOnlyAtTimedEntries(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	for p := uint32(1); p <= 3; p++ {
		r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(p), Instructions: applyOut(p%3 + 1)})
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 20, IdleTimeout: 2, Match: matchInPort(1), Instructions: applyOut(3)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 20, HardTimeout: 4, Match: matchInPort(2), Instructions: applyOut(3)})
	tb := r.sw.tables[0]
	if len(tb.timed) != 2 {
		t.Fatalf("%d timed entries, want 2", len(tb.timed))
	}
	// A modify keeps the entry's timeouts, and so its place in timed.
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowModifyStrict, Priority: 20, Match: matchInPort(2), Instructions: applyOut(1)})
	if len(tb.timed) != 2 {
		t.Fatalf("after a modify: %d timed entries, want 2", len(tb.timed))
	}

	now := time.Now()
	r.sw.mu.RLock()
	done := make(chan int)
	go func() { done <- r.sw.Expire(now.Add(time.Second)) }()
	select {
	case n := <-done:
		if n != 0 {
			t.Errorf("expired %d entries after 1s, want 0", n)
		}
	case <-time.After(10 * time.Second):
		t.Error("Expire with nothing due waited for a batch's read lock: it took the write lock")
		r.sw.mu.RUnlock()
		<-done
		return
	}
	r.sw.mu.RUnlock()
	if n := r.sw.WriteLockStats(WriteExpire).Frames; n != 0 {
		t.Fatalf("Expire with nothing due held the write lock %d times, want 0", n)
	}
	if n := r.sw.WriteLockStats(WriteFlowMod).Frames; n != 6 {
		t.Fatalf("%d FLOW_MOD spans under the write lock, want 6", n)
	}

	if n := r.sw.Expire(now.Add(3 * time.Second)); n != 1 {
		t.Fatalf("expired %d entries after 3s, want 1 (idle)", n)
	}
	if n := r.sw.WriteLockStats(WriteExpire).Frames; n != 1 {
		t.Fatalf("Expire that removed an entry held the write lock %d times, want 1", n)
	}
	if len(tb.timed) != 1 {
		t.Fatalf("after the idle timeout: %d timed entries, want 1", len(tb.timed))
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowDeleteStrict, TableID: 0, Priority: 20, Match: matchInPort(2),
		OutPort: rule.PortAny, OutGroup: rule.GroupAny})
	if len(tb.timed) != 0 {
		t.Fatalf("after a delete: %d timed entries, want 0", len(tb.timed))
	}
	if n := r.sw.Expire(now.Add(time.Hour)); n != 0 {
		t.Fatalf("expired %d entries without timeouts, want 0", n)
	}
	if ts := r.sw.TableStats(); ts[0].Active != 3 {
		t.Fatalf("%d entries left, want 3", ts[0].Active)
	}
}

func TestModifyKeepsOrResetsCounters(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: applyOut(2)})
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowModify, Match: matchInPort(1), Instructions: applyOut(3)})
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	if len(r.devs[2].take()) != 1 {
		t.Fatal("modified entry does not output to port 3")
	}
	req := &rule.FlowStatsRequest{TableID: 0, OutPort: rule.PortAny, OutGroup: rule.GroupAny}
	if fs, _ := r.sw.FlowStats(req); fs[0].Packets != 2 {
		t.Fatalf("after modify: %d packets, want 2", fs[0].Packets)
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowModifyStrict, Priority: 10, Flags: rule.FlagResetCounts, Match: matchInPort(1), Instructions: applyOut(3)})
	if fs, _ := r.sw.FlowStats(req); fs[0].Packets != 0 {
		t.Fatalf("after modify with reset_counts: %d packets, want 0", fs[0].Packets)
	}
}

func TestCheckOverlapAndBackwardGoto(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: applyOut(2)})
	err := r.sw.FlowMod(&rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Flags: rule.FlagCheckOverlap,
		Match: flow.Match{}, Instructions: applyOut(2)})
	if !errors.Is(err, flow.ErrOverlap) {
		t.Fatalf("overlapping add: %v, want ErrOverlap", err)
	}
	err = r.sw.FlowMod(&rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: 1,
		Instructions: rule.Instructions{Has: rule.HasGotoTable, GotoTable: 1}})
	var oe *rule.Error
	if !errors.As(err, &oe) || oe.Kind != rule.BadGoto {
		t.Fatalf("goto_table 1 from table 1: %v, want rule.BadGoto", err)
	}
}

func TestPacketInReasons(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	// A table-miss entry sending to the controller: reason NO_MATCH.
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 0, Cookie: 3, Instructions: rule.Instructions{
		Has: rule.HasApplyActions, Apply: []rule.Action{{Kind: rule.ActOutput, Port: rule.PortController, MaxLen: 20}}}})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 5, Match: matchInPort(2), Instructions: applyOut(rule.PortController)})
	f := udpFrame(t, "10.0.0.1", "10.0.0.2")
	r.sw.Process(1, [][]byte{append([]byte(nil), f...)})
	r.sw.Process(2, [][]byte{append([]byte(nil), f...)})
	if len(r.ctrl.pins) != 2 {
		t.Fatalf("%d packet-ins, want 2", len(r.ctrl.pins))
	}
	miss, act := r.ctrl.pins[0], r.ctrl.pins[1]
	if miss.Reason != rule.ReasonNoMatch || miss.MaxLen != 20 || miss.Cookie != 3 {
		t.Errorf("table-miss packet-in %+v", miss)
	}
	if v, _ := miss.Match.GetUint(flow.FieldInPort); v != 1 {
		t.Errorf("packet-in in_port %d, want 1", v)
	}
	if act.Reason != rule.ReasonAction || string(act.Data) != string(f) {
		t.Errorf("action packet-in reason %d, data equal %v", act.Reason, string(act.Data) == string(f))
	}
}

// TestMultiTable: table 0 writes metadata, an action set entry and goes to
// table 1, which matches the metadata and rewrites the IPv4 destination;
// the frame leaves by the action set's output with correct checksums.
func TestMultiTableSetFieldChecksums(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: rule.Instructions{
		Has:   rule.HasWriteActions | rule.HasWriteMetadata | rule.HasGotoTable,
		Write: []rule.Action{output(2)}, Metadata: 0xab, MetadataMask: 0xff, GotoTable: 1}})
	var m flow.Match
	if err := m.SetFieldUint(flow.FieldMetadata, 0xab, 0xff); err != nil {
		t.Fatal(err)
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: 1, Match: m, Instructions: rule.Instructions{
		Has: rule.HasApplyActions | rule.HasWriteActions,
		Apply: []rule.Action{{Kind: rule.ActSetField, Field: flow.FieldIPv4Dst, Value: []byte{192, 168, 7, 9}},
			{Kind: rule.ActDecNwTTL}},
		Write: []rule.Action{output(3)}}}) // replaces output:2 in the action set
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	out := r.devs[2].take()
	if len(out) != 1 || len(r.devs[1].take()) != 0 {
		t.Fatalf("port 3 got %d frames (want 1), port 2 must get none", len(out))
	}
	pk := gopacket.NewPacket(out[0], layers.LayerTypeEthernet, gopacket.Default)
	ip := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	if ip.DstIP.String() != "192.168.7.9" || ip.TTL != 63 {
		t.Fatalf("ip dst %s ttl %d, want 192.168.7.9 and 63", ip.DstIP, ip.TTL)
	}
	want := udpFrame(t, "10.0.0.1", "192.168.7.9")
	want[14+8] = 63 // TTL
	wpk := gopacket.NewPacket(want, layers.LayerTypeEthernet, gopacket.Default)
	wip := wpk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	wip.Checksum = 0
	buf := gopacket.NewSerializeBuffer()
	udp := wpk.Layer(layers.LayerTypeUDP).(*layers.UDP)
	_ = udp.SetNetworkLayerForChecksum(wip)
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true, FixLengths: true},
		wpk.Layer(layers.LayerTypeEthernet).(*layers.Ethernet), wip, udp, gopacket.Payload(udp.Payload)); err != nil {
		t.Fatal(err)
	}
	if string(buf.Bytes()) != string(out[0]) {
		t.Fatalf("rewritten frame differs from one built with fresh checksums:\n got %x\nwant %x", out[0], buf.Bytes())
	}
}

func TestVLANPushPop(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: rule.Instructions{
		Has: rule.HasApplyActions, Apply: []rule.Action{{Kind: rule.ActPushVLAN, EthType: 0x8100},
			{Kind: rule.ActSetField, Field: flow.FieldVlanVID, Value: []byte{0x10, 0x2a}}, output(2)}}})
	var m flow.Match
	if err := m.SetVlanVID(0x1000|42, 0x1fff); err != nil {
		t.Fatal(err)
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: m, Instructions: rule.Instructions{
		Has: rule.HasApplyActions, Apply: []rule.Action{{Kind: rule.ActPopVLAN}, output(3)}}})
	plain := udpFrame(t, "10.0.0.1", "10.0.0.2")
	r.sw.Process(1, [][]byte{append([]byte(nil), plain...)})
	tagged := r.devs[1].take()
	if len(tagged) != 1 || len(tagged[0]) != len(plain)+4 || be16(tagged[0][12:]) != 0x8100 || be16(tagged[0][14:])&0xfff != 42 {
		t.Fatalf("pushed frame %x", tagged)
	}
	r.sw.Process(2, tagged) // matches vlan_vid=42: popped, out of port 3
	untagged := r.devs[2].take()
	if len(untagged) != 1 || string(untagged[0]) != string(plain) {
		t.Fatalf("popped frame %x, want %x", untagged, plain)
	}
}

func TestPacketOutToTableAndPort(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: applyOut(3)})
	f := udpFrame(t, "10.0.0.1", "10.0.0.2")
	if err := r.sw.PacketOut(&rule.PacketOut{BufferID: rule.NoBuffer, InPort: 1, Data: f,
		Actions: []rule.Action{output(rule.PortTable), output(2)}}); err != nil {
		t.Fatal(err)
	}
	if len(r.devs[2].take()) != 1 || len(r.devs[1].take()) != 1 {
		t.Fatal("packet-out: want one frame out of port 3 (through the table) and one out of port 2")
	}
	if err := r.sw.PacketOut(&rule.PacketOut{BufferID: rule.NoBuffer, InPort: rule.PortController, Data: f,
		Actions: []rule.Action{output(rule.PortAll)}}); err != nil {
		t.Fatal(err)
	}
	if n := len(r.devs[0].take()) + len(r.devs[1].take()) + len(r.devs[2].take()); n != 3 {
		t.Fatalf("packet-out to ALL from the controller reached %d ports, want 3", n)
	}
}

func TestMalformedFramesCounted(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 0, Instructions: applyOut(rule.PortFlood)})
	bad := udpFrame(t, "10.0.0.1", "10.0.0.2")[:20] // IPv4 header cut short
	r.sw.Process(1, [][]byte{bad, {1, 2, 3}})
	c := r.sw.Counters()
	if c.Malformed[packet.TruncatedIPv4.String()] != 1 || c.Malformed[packet.TruncatedEthernet.String()] != 1 || sum(c.Malformed) != 2 {
		t.Fatalf("malformed counters %v, want 2 frames", c.Malformed)
	}
	if len(r.devs[1].take()) != 0 {
		t.Fatal("a malformed frame was forwarded")
	}
}

func sum(m map[string]uint64) uint64 {
	var s uint64
	for _, v := range m {
		s += v
	}
	return s
}

func TestStandaloneLearns(t *testing.T) {
	r := newRig(t, 3, FailStandalone)
	r.ctrl.conns = 0
	a2b := udpFrame(t, "10.0.0.1", "10.0.0.2") // 02:..:01 -> 02:..:02
	b2a := append([]byte(nil), a2b...)
	copy(b2a[0:6], a2b[6:12])
	copy(b2a[6:12], a2b[0:6])
	r.sw.Process(1, [][]byte{append([]byte(nil), a2b...)}) // unknown: flooded
	if len(r.devs[1].take()) != 1 || len(r.devs[2].take()) != 1 || len(r.devs[0].take()) != 0 {
		t.Fatal("unknown destination not flooded to ports 2 and 3 only")
	}
	r.sw.Process(2, [][]byte{b2a}) // 01 was learned on port 1
	if len(r.devs[0].take()) != 1 || len(r.devs[2].take()) != 0 {
		t.Fatal("learned destination not sent to port 1 alone")
	}
	r.ctrl.mu.Lock()
	r.ctrl.conns = 1
	r.ctrl.mu.Unlock()
	r.sw.Process(1, [][]byte{a2b}) // a controller is connected: tables (empty) drop it
	if len(r.devs[1].take())+len(r.devs[2].take()) != 0 {
		t.Fatal("standalone learning still active with a controller connected")
	}
}

// TestDefaultInFlight: 4 batches in flight and a depth of 8 with 8 or more
// Go processors, 2 and 3 below; a depth that is set is kept, and never
// below the batches in flight.
func TestDefaultInFlight(t *testing.T) {
	for _, c := range []struct{ procs, depth, wantIn, wantDepth int }{
		{16, 0, 4, 8}, {8, 0, 4, 8}, {8, 5, 4, 5}, {4, 0, 2, 3}, {1, 0, 2, 3}, {4, 6, 2, 6},
	} {
		cfg := Config{Depth: c.depth}
		cfg.flightDefaults(c.procs)
		if cfg.InFlight != c.wantIn || cfg.Depth != c.wantDepth {
			t.Errorf("%d processors, depth %d: in flight %d, depth %d; want %d, %d", c.procs, c.depth, cfg.InFlight, cfg.Depth, c.wantIn, c.wantDepth)
		}
	}
	cfg := Config{InFlight: 6, Classifier: cpuEngine(t)}
	if err := cfg.normalize(); err != nil || cfg.Depth != 6 {
		t.Errorf("in flight 6 set, depth not: depth %d (%v), want 6", cfg.Depth, err)
	}
}
