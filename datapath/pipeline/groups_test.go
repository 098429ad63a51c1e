package pipeline

import (
	"errors"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// flowFrame builds an Ethernet/IPv4/UDP frame of one flow: source port
// sport, the IP DSCP dscp.
func flowFrame(t *testing.T, sport uint16, dscp uint8) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, TOS: dscp << 2, Protocol: layers.IPProtocolUDP,
		SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	udp := &layers.UDP{SrcPort: layers.UDPPort(sport), DstPort: 5001}
	if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
		t.Fatal(err)
	}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		eth, ip, udp, gopacket.Payload("group and meter test")); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), buf.Bytes()...)
}

func (r *rig) groupMod(t *testing.T, cmd rule.GroupCommand, g rule.Group) {
	t.Helper()
	if err := r.sw.GroupMod(&rule.GroupMod{Command: cmd, Group: g}); err != nil {
		t.Fatal(err)
	}
}

func (r *rig) meterMod(t *testing.T, cmd rule.MeterCommand, mc rule.MeterConfig) {
	t.Helper()
	if err := r.sw.MeterMod(&rule.MeterMod{Command: cmd, MeterConfig: mc}); err != nil {
		t.Fatal(err)
	}
}

func bucket(weight uint16, as ...rule.Action) rule.Bucket {
	return rule.Bucket{Weight: weight, WatchPort: rule.PortAny, WatchGroup: rule.GroupAny, Actions: as}
}

func toGroup(id uint32) rule.Instructions {
	return rule.Instructions{Has: rule.HasApplyActions, Apply: []rule.Action{{Kind: rule.ActGroup, ID: id}}}
}

// counts sends frames in at port 1 and returns how many each port got.
func (r *rig) counts(t *testing.T, frames ...[]byte) []int {
	t.Helper()
	r.sw.Process(1, frames)
	n := make([]int, len(r.devs))
	for i, d := range r.devs {
		n[i] = len(d.take())
	}
	return n
}

func TestGroupAllClonesToEveryBucket(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	mac := []byte{2, 0, 0, 0, 0, 0x33}
	r.groupMod(t, rule.GroupAdd, rule.Group{ID: 1, Type: rule.GroupTypeAll, Buckets: []rule.Bucket{
		bucket(0, output(2)),
		bucket(0, rule.Action{Kind: rule.ActSetField, Field: flow.FieldEthDst, Value: mac}, output(3)),
	}})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: toGroup(1)})
	r.sw.Process(1, [][]byte{flowFrame(t, 1000, 0)})
	p2, p3 := r.devs[1].take(), r.devs[2].take()
	if len(p2) != 1 || len(p3) != 1 {
		t.Fatalf("ports 2 and 3 got %d and %d frames, want 1 each", len(p2), len(p3))
	}
	if net.HardwareAddr(p3[0][:6]).String() != net.HardwareAddr(mac).String() || p2[0][5] != 2 {
		t.Errorf("bucket edits leaked: port 2 eth_dst %x, port 3 eth_dst %x", p2[0][:6], p3[0][:6])
	}
	gs, _ := r.sw.GroupStats(1)
	if len(gs) != 1 || gs[0].Packets != 1 || gs[0].RefCount != 1 || len(gs[0].Buckets) != 2 ||
		gs[0].Buckets[0].Packets != 1 || gs[0].Buckets[1].Packets != 1 {
		t.Errorf("group stats %+v: want 1 packet, 1 ref, 1 packet per bucket", gs)
	}
}

func TestGroupSelectWeightedAndSticky(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	r.groupMod(t, rule.GroupAdd, rule.Group{ID: 2, Type: rule.GroupTypeSelect, Buckets: []rule.Bucket{
		bucket(3, output(2)), bucket(1, output(3)),
	}})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: toGroup(2)})
	var frames [][]byte
	for i := range 2000 {
		frames = append(frames, flowFrame(t, uint16(1024+i), 0))
	}
	n := r.counts(t, frames...)
	if n[1]+n[2] != 2000 || n[0] != 0 {
		t.Fatalf("ports got %v, want 2000 frames over ports 2 and 3", n)
	}
	if share := float64(n[1]) / 2000; share < 0.68 || share > 0.82 {
		t.Errorf("weight 3:1 gave port 2 %.2f of the flows, want about 0.75", share)
	}
	// One flow sticks to one bucket.
	var same [][]byte
	for range 50 {
		same = append(same, flowFrame(t, 4242, 0))
	}
	n = r.counts(t, same...)
	if n[1] != 50 && n[2] != 50 {
		t.Errorf("one flow was split over the buckets: %v", n)
	}
}

func TestGroupIndirectAndChained(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	r.groupMod(t, rule.GroupAdd, rule.Group{ID: 5, Type: rule.GroupTypeIndirect, Buckets: []rule.Bucket{bucket(0, output(3))}})
	r.groupMod(t, rule.GroupAdd, rule.Group{ID: 6, Type: rule.GroupTypeAll, Buckets: []rule.Bucket{
		bucket(0, output(2)), bucket(0, rule.Action{Kind: rule.ActGroup, ID: 5}),
	}})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: toGroup(6)})
	if n := r.counts(t, flowFrame(t, 1, 0)); n[1] != 1 || n[2] != 1 {
		t.Fatalf("ports got %v, want one frame on 2 (group 6) and one on 3 (group 5)", n)
	}
	if gs, _ := r.sw.GroupStats(5); len(gs) != 1 || gs[0].Packets != 1 {
		t.Errorf("indirect group stats %+v", gs)
	}
}

func TestGroupFastFailover(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	ff := func(port uint32) rule.Bucket {
		b := bucket(0, output(port))
		b.WatchPort = port
		return b
	}
	r.groupMod(t, rule.GroupAdd, rule.Group{ID: 7, Type: rule.GroupTypeFastFailover, Buckets: []rule.Bucket{ff(2), ff(3)}})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: toGroup(7)})
	if n := r.counts(t, flowFrame(t, 1, 0)); n[1] != 1 || n[2] != 0 {
		t.Fatalf("both ports live: %v, want port 2", n)
	}
	r.devs[1].down = true // link of port 2 down
	if n := r.counts(t, flowFrame(t, 1, 0)); n[1] != 0 || n[2] != 1 {
		t.Fatalf("port 2 link down: %v, want port 3", n)
	}
	r.devs[1].down = false
	if err := r.sw.PortMod(&rule.PortMod{PortNo: 2, Config: rule.PortConfigDown, Mask: rule.PortConfigDown}); err != nil {
		t.Fatal(err)
	}
	if n := r.counts(t, flowFrame(t, 1, 0)); n[1] != 0 || n[2] != 1 {
		t.Fatalf("port 2 configured down: %v, want port 3", n)
	}
	r.devs[2].down = true
	if n := r.counts(t, flowFrame(t, 1, 0)); n[1]+n[2] != 0 {
		t.Fatalf("no live bucket: %v, want a drop", n)
	}
	if c := r.sw.Counters(); c.GroupDrops != 1 {
		t.Errorf("group drops %d, want 1", c.GroupDrops)
	}
}

func TestGroupReferencesAndDelete(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	err := r.sw.FlowMod(&rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: toGroup(9),
		BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny})
	var oe *rule.Error
	if !errors.As(err, &oe) || oe.Kind != rule.DanglingGroup {
		t.Fatalf("flow to a missing group: %v, want OFPBAC_BAD_OUT_GROUP", err)
	}
	r.groupMod(t, rule.GroupAdd, rule.Group{ID: 9, Type: rule.GroupTypeIndirect, Buckets: []rule.Bucket{bucket(0, output(2))}})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Cookie: 3, Flags: rule.FlagSendFlowRem,
		Match: matchInPort(1), Instructions: toGroup(9)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(2), Instructions: applyOut(1)})
	if gs, _ := r.sw.GroupStats(9); gs[0].RefCount != 1 {
		t.Fatalf("ref count %d, want 1", gs[0].RefCount)
	}
	r.groupMod(t, rule.GroupDelete, rule.Group{ID: 9})
	if n := r.counts(t, flowFrame(t, 1, 0)); n[1] != 0 {
		t.Fatalf("frames still forwarded after the group was deleted: %v", n)
	}
	fs, _ := r.sw.FlowStats(&rule.FlowStatsRequest{TableID: rule.TableAll, OutPort: rule.PortAny, OutGroup: rule.GroupAny})
	m2 := matchInPort(2)
	if len(fs) != 1 || fs[0].Match.String() != m2.String() {
		t.Fatalf("flows left %+v, want only the in_port=2 one", fs)
	}
	if len(r.ctrl.removed) != 1 || r.ctrl.removed[0].Reason != rule.RemovedGroupDelete || r.ctrl.removed[0].Cookie != 3 {
		t.Fatalf("flow removed %+v, want one with reason GROUP_DELETE", r.ctrl.removed)
	}
}

func pktpsMeter(id, rate, burst uint32, band rule.BandType, prec uint8) rule.MeterConfig {
	return rule.MeterConfig{ID: id, Flags: rule.MeterPktps | rule.MeterBurst | rule.MeterStatsFlag,
		Bands: []rule.MeterBand{{Type: band, Rate: rate, BurstSize: burst, PrecLevel: prec}}}
}

func meteredOut(meter, port uint32) rule.Instructions {
	in := applyOut(port)
	in.Has |= rule.HasMeter
	in.Meter = meter
	return in
}

func burst(t *testing.T, n int, dscp uint8) [][]byte {
	var fs [][]byte
	for i := range n {
		fs = append(fs, flowFrame(t, uint16(2000+i), dscp))
	}
	return fs
}

func TestMeterDropPktps(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.meterMod(t, rule.MeterAdd, pktpsMeter(1, 10, 5, rule.BandDrop, 0))
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: meteredOut(1, 2)})
	n := r.counts(t, burst(t, 50, 0)...) // one batch: one instant
	if n[1] != 5 {
		t.Fatalf("%d of 50 frames passed a 10 pkt/s meter with a burst of 5, want 5", n[1])
	}
	ms, _ := r.sw.MeterStats(1)
	if len(ms) != 1 || ms[0].PacketsIn != 50 || ms[0].FlowCount != 1 || ms[0].Bands[0].Packets != 45 {
		t.Errorf("meter stats %+v: want 50 in, 1 flow, 45 in the drop band", ms)
	}
	if c := r.sw.Counters(); c.MeterDrops != 45 {
		t.Errorf("meter drops %d, want 45", c.MeterDrops)
	}
}

func TestMeterDropKbps(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	frame := flowFrame(t, 1, 0)
	// 8 kb/s with a burst of 8 kbit: 1000 bytes pass at once.
	r.meterMod(t, rule.MeterAdd, rule.MeterConfig{ID: 2, Flags: rule.MeterKbps | rule.MeterBurst,
		Bands: []rule.MeterBand{{Type: rule.BandDrop, Rate: 8, BurstSize: 8}}})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: meteredOut(2, 2)})
	n := r.counts(t, burst(t, 100, 0)...)
	if want := 1000 / len(frame); n[1] != want {
		t.Fatalf("%d frames of %d bytes passed a 1000-byte burst, want %d", n[1], len(frame), want)
	}
}

func TestMeterDSCPRemark(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.meterMod(t, rule.MeterAdd, pktpsMeter(3, 1, 1, rule.BandDSCPRemark, 1))
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: meteredOut(3, 2)})
	const af11, af12 = 10, 12
	r.sw.Process(1, burst(t, 3, af11))
	got := r.devs[1].take()
	if len(got) != 3 {
		t.Fatalf("%d frames passed a remark meter, want all 3", len(got))
	}
	for i, f := range got {
		pk := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := pk.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if ip == nil {
			t.Fatalf("frame %d: no IPv4", i)
		}
		want := uint8(af12)
		if i == 0 {
			want = af11 // within the burst
		}
		if ip.TOS>>2 != want {
			t.Errorf("frame %d: DSCP %d, want %d", i, ip.TOS>>2, want)
		}
		sum := ip.Checksum
		if err := ip.SerializeTo(gopacket.NewSerializeBuffer(), gopacket.SerializeOptions{ComputeChecksums: true}); err != nil {
			t.Fatal(err)
		}
		if ip.Checksum != sum {
			t.Errorf("frame %d: IPv4 checksum %#x, want %#x", i, sum, ip.Checksum)
		}
	}
}

func TestMeterReferencesAndDelete(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	err := r.sw.FlowMod(&rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: meteredOut(4, 2),
		BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny})
	var oe *rule.Error
	if !errors.As(err, &oe) || oe.Kind != rule.UnknownMeter {
		t.Fatalf("flow with a missing meter: %v, want OFPMMFC_UNKNOWN_METER", err)
	}
	r.meterMod(t, rule.MeterAdd, pktpsMeter(4, 1000, 100, rule.BandDrop, 0))
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: meteredOut(4, 2)})
	if n := r.counts(t, flowFrame(t, 1, 0)); n[1] != 1 {
		t.Fatalf("metered flow: %v", n)
	}
	r.meterMod(t, rule.MeterDelete, rule.MeterConfig{ID: rule.MeterAll})
	if fs := r.sw.Flows(); len(fs) != 0 {
		t.Fatalf("flows left after the meter was deleted: %+v", fs)
	}
}

func TestPortModHonoured(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: applyOut(2)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(3), Instructions: applyOut(rule.PortController)})
	mod := func(port, config, mask uint32) {
		t.Helper()
		if err := r.sw.PortMod(&rule.PortMod{PortNo: port, Config: config, Mask: mask}); err != nil {
			t.Fatal(err)
		}
	}
	mod(2, rule.PortConfigNoFwd, rule.PortConfigNoFwd)
	if n := r.counts(t, flowFrame(t, 1, 0)); n[1] != 0 {
		t.Fatalf("no_fwd port 2 got %d frames", n[1])
	}
	if len(r.ctrl.status) != 1 || r.ctrl.status[0].Reason != rule.PortModified ||
		r.ctrl.status[0].Port.Config&rule.PortConfigNoFwd == 0 {
		t.Fatalf("port status after PORT_MOD: %+v", r.ctrl.status)
	}
	mod(2, 0, rule.PortConfigNoFwd)
	if n := r.counts(t, flowFrame(t, 1, 0)); n[1] != 1 {
		t.Fatalf("port 2 after no_fwd was cleared got %d frames, want 1", n[1])
	}
	mod(1, rule.PortConfigNoRecv, rule.PortConfigNoRecv)
	if n := r.counts(t, flowFrame(t, 1, 0)); n[1] != 0 {
		t.Fatalf("frames received on a no_recv port were forwarded: %v", n)
	}
	mod(3, rule.PortConfigNoPacketIn, rule.PortConfigNoPacketIn)
	r.sw.Process(3, [][]byte{flowFrame(t, 1, 0)})
	if len(r.ctrl.pins) != 0 {
		t.Fatalf("packet-in from a no_packet_in port")
	}
	mod(3, 0, rule.PortConfigNoPacketIn)
	r.sw.Process(3, [][]byte{flowFrame(t, 1, 0)})
	if len(r.ctrl.pins) != 1 {
		t.Fatalf("%d packet-ins after no_packet_in was cleared, want 1", len(r.ctrl.pins))
	}
	if q, err := r.sw.Queues(rule.PortAny); err != nil || len(q) != 0 {
		t.Errorf("queues: %v, %v; want none", q, err)
	}
	if _, err := r.sw.Queues(42); err == nil {
		t.Error("queues of a missing port: no error")
	}
	if err := r.sw.TableMod(&rule.TableMod{TableID: 0}); err != nil {
		t.Error(err)
	}
}
