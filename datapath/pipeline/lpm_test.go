package pipeline

import (
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpmshape"
	"github.com/gswitch/gswitch/tables/lpmshape/shapetest"
	"github.com/gswitch/gswitch/tables/rule"
)

// The pipeline's LPM serving: tables/lpmshape's property tests run on the
// switch (its locking, its images in a gpu.Engine, FlowMod, Expire), and
// the switch-level behaviour (frames, counters, metrics).

// shapeSwitch is a switch on a CPU engine for the shape tests.
func shapeSwitch(tb testing.TB, tables int) *Switch {
	tb.Helper()
	return shapeSwitchOn(tb, tables, cpuEngine(tb))
}

func cpuEngine(tb testing.TB) *gpu.Engine {
	tb.Helper()
	eng, err := gpu.Open("cpu", nil, 0, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { eng.Close() })
	return eng
}

// shapeSwitchOn is a switch on eng for the shape tests.
func shapeSwitchOn(tb testing.TB, tables int, eng *gpu.Engine) *Switch {
	tb.Helper()
	sw, err := New(Config{DatapathID: 1, Tables: tables, MaxFlows: 1 << 21, Classifier: eng, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	return sw
}

func flowMod(tb testing.TB, sw *Switch, fm *rule.FlowMod) {
	tb.Helper()
	fm.BufferID = rule.NoBuffer
	if fm.OutPort == 0 {
		fm.OutPort, fm.OutGroup = rule.PortAny, rule.GroupAny
	}
	if fm.Instructions.Has == 0 && (fm.Command == rule.FlowAdd || fm.Command == rule.FlowModify) {
		fm.Instructions = applyOut(uint32(1 + fm.Priority%3))
	}
	if err := sw.FlowMod(fm); err != nil {
		tb.Fatalf("flow mod %+v: %v", fm, err)
	}
}

// switchTarget is a Switch as a shapetest.Target.
type switchTarget struct{ sw *Switch }

func (s switchTarget) FlowMod(tb testing.TB, fm *rule.FlowMod) { tb.Helper(); flowMod(tb, s.sw, fm) }
func (s switchTarget) Expire(now time.Time)                    { s.sw.Expire(now) }

func (s switchTarget) Inspect(tid uint8, f func(*flow.Table, *lpmshape.Shape)) {
	s.sw.mu.RLock()
	defer s.sw.mu.RUnlock()
	t := s.sw.tables[tid]
	f(t.ft, t.lpm)
}

// TestLPMShapeRandomFlowMods runs tables/lpmshape's random FLOW_MOD
// sequences (shapetest.RunRandom) through the switch on the CPU backend:
// after every step the shape against brute force and, while LPM serves
// the table, every lookup against the flow table's.
func TestLPMShapeRandomFlowMods(t *testing.T) {
	runShapeRandom(t, cpuEngine, 2)
}

// runShapeRandom is TestLPMShapeRandomFlowMods on the engines newEngine
// makes, one per seed.
func runShapeRandom(t *testing.T, newEngine func(testing.TB) *gpu.Engine, seeds uint64) {
	for seed := uint64(1); seed <= seeds; seed++ {
		shapetest.RunRandom(t, switchTarget{shapeSwitchOn(t, 2, newEngine(t))}, seed)
	}
}

// FuzzLPMShape runs tables/lpmshape's fuzzed op streams (shapetest.RunOps)
// through the switch.
func FuzzLPMShape(f *testing.F) {
	for _, s := range shapetest.FuzzSeeds() {
		f.Add(s)
	}
	keys := shapetest.OpKeys()
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 3*200 {
			return
		}
		shapetest.RunOps(t, switchTarget{shapeSwitch(t, 1)}, ops, keys)
	})
}

// TestLPMIDBase checks that the LPM images go to Config.LPMIDBase, and to
// lpmshape.DefaultIDBase without it.
func TestLPMIDBase(t *testing.T) {
	for _, base := range []gpu.TableID{0, 1 << 28} {
		eng := cpuEngine(t)
		sw, err := New(Config{Tables: 2, Classifier: eng, LPMIDBase: base, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", "eth_type=0x0800,ipv4_dst=10.1.0.0/16"} {
			m, err := flow.ParseMatch(p)
			if err != nil {
				t.Fatal(err)
			}
			flowMod(t, sw, &rule.FlowMod{Command: rule.FlowAdd, TableID: 1, Priority: uint16(len(p)), Match: m})
		}
		want := base
		if want == 0 {
			want = gpu.TableID(lpmshape.DefaultIDBase)
		}
		out := make([]uint32, 1)
		if err := eng.LookupLPM4(want|1<<16, []uint32{10<<24 | 1<<16 | 5}, out); err != nil || out[0] == 0 {
			t.Errorf("base %#x: lookup in image %#x: %d, %v", base, want|1<<16, out[0], err)
		}
	}
}

// routerFlow adds an ovs-ofctl style flow: match text, priority, output.
func routerFlow(t *testing.T, r *rig, match string, prio uint16, out uint32, cmd rule.FlowCommand) {
	t.Helper()
	m, err := flow.ParseMatch(match)
	if err != nil {
		t.Fatal(err)
	}
	fm := &rule.FlowMod{Command: cmd, Priority: prio, Match: m}
	if cmd == rule.FlowAdd {
		fm.Instructions = applyOut(out)
	}
	r.flowMod(t, fm)
}

func lpmARPFrame(t *testing.T) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP}
	arp := &layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
		Operation: layers.ARPRequest, SourceHwAddress: eth.SrcMAC, SourceProtAddress: net.IP{10, 1, 2, 1},
		DstHwAddress: make(net.HardwareAddr, 6), DstProtAddress: net.IP{10, 1, 2, 3}}
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true}, eth, arp); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestLPMShapeRouterTable installs a routing table the way ovs-ofctl
// add-flow "priority=24,ip,nw_dst=10.1.2.0/24,actions=output:3" does,
// checks that it is served by LPM and that frames follow the longest
// prefix with the counters of the classifier's path; then a rule that
// breaks the shape hands the table to the classifier, where OpenFlow
// priorities decide, and its removal brings LPM back.
func TestLPMShapeRouterTable(t *testing.T) {
	r := newRig(t, 4, FailSecure)
	routerFlow(t, r, "eth_type=0x0800,ipv4_dst=10.0.0.0/8", 8, 1, rule.FlowAdd)
	routerFlow(t, r, "eth_type=0x0800,ipv4_dst=10.1.0.0/16", 16, 2, rule.FlowAdd)
	routerFlow(t, r, "eth_type=0x0800,ipv4_dst=10.1.2.0/24", 24, 3, rule.FlowAdd)
	routerFlow(t, r, "", 0, rule.PortController, rule.FlowAdd)
	if s := r.sw.TableInfos()[0].Search; s != "lpm" {
		t.Fatalf("router table searched by %q, want lpm (%+v)", s, r.sw.TableInfos()[0].LPM)
	}
	if s := r.sw.TableInfos()[1].Search; s != r.sw.cfg.Algo.String() {
		t.Errorf("empty table 1 searched by %q, want %v", s, r.sw.cfg.Algo)
	}
	send := func(dst string) {
		r.sw.Process(4, [][]byte{udpFrame(t, "10.9.9.9", dst)})
	}
	want := func(dst string, port int) {
		t.Helper()
		send(dst)
		for i, d := range r.devs {
			n := len(d.take())
			if (i+1 == port) != (n == 1) || n > 1 {
				t.Fatalf("%s: port %d got %d frames; want one on port %d", dst, i+1, n, port)
			}
		}
	}
	want("10.1.2.3", 3)
	want("10.1.9.9", 2)
	want("10.200.0.1", 1)
	send("192.168.0.1")                       // table-miss: packet-in
	r.sw.Process(4, [][]byte{lpmARPFrame(t)}) // not IP: table-miss too
	if n := len(r.ctrl.pins); n != 2 || r.ctrl.pins[0].Reason != rule.ReasonNoMatch {
		t.Fatalf("%d packet-ins, want 2 of reason NO_MATCH", n)
	}
	ts := r.sw.TableStats()[0]
	if ts.Lookups != 5 || ts.Matched != 5 {
		t.Errorf("table stats %+v, want 5 lookups, 5 matched", ts)
	}
	for _, f := range r.sw.Flows() {
		if f.Table == 0 && f.Packets != map[uint16]uint64{0: 2, 8: 1, 16: 1, 24: 1}[f.Priority] {
			t.Errorf("flow priority %d: %d packets", f.Priority, f.Packets)
		}
	}

	// A /8 above the /24: no longer LPM-shaped; priority wins.
	routerFlow(t, r, "eth_type=0x0800,ipv4_dst=10.0.0.0/8", 30, 1, rule.FlowAdd)
	if in := r.sw.TableInfos()[0]; in.Search != r.sw.cfg.Algo.String() || in.LPM.Conflicts == 0 {
		t.Fatalf("after the /8 at priority 30: %q %+v, want %v with conflicts", in.Search, in.LPM, r.sw.cfg.Algo)
	}
	want("10.1.2.3", 1)
	routerFlow(t, r, "eth_type=0x0800,ipv4_dst=10.0.0.0/8", 30, 0, rule.FlowDeleteStrict)
	if in := r.sw.TableInfos()[0]; in.Search != "lpm" || in.LPM.Transitions != 3 {
		t.Fatalf("after deleting it: %q %+v, want lpm after 3 transitions", in.Search, in.LPM)
	}
	want("10.1.2.3", 3)
}

func TestLPMShapeMetrics(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	routerFlow(t, r, "eth_type=0x86dd,ipv6_dst=2001:db8::/32", 32, 1, rule.FlowAdd)
	var b strings.Builder
	if err := WriteMetrics(&b, r.sw); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"gswitch_table_lpm{table=\"0\"} 1\n",
		"gswitch_table_lpm{table=\"1\"} 0\n",
		"gswitch_table_lpm_transitions_total{table=\"0\"} 1\n",
		"gswitch_table_lpm_conflicts{table=\"0\"} 0\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, b.String())
		}
	}
}

// TestLPMShapeImagesOnlyWhenNeeded: a table that is not LPM-shaped gets no
// LPM image, nor does a group of /0 rules alone; an image made stays (and
// is kept current) while the shape is broken.
func TestLPMShapeImagesOnlyWhenNeeded(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	for p := uint32(1); p <= 3; p++ {
		routerFlow(t, r, fmt.Sprintf("in_port=%d", p), 10, p%3+1, rule.FlowAdd)
	}
	routerFlow(t, r, "eth_type=0x0800,ip_proto=6", 5, 1, rule.FlowAdd)
	routerFlow(t, r, "eth_type=0x0800,ipv4_dst=10.0.0.0/8", 20, 1, rule.FlowAdd)
	if in := r.sw.TableInfos()[0].LPM; in.Shaped || in.Images != 0 || in.Groups != 7 {
		t.Fatalf("in_port table with a foreign rule: %+v, want 7 groups and no image", in)
	}
	routerFlow(t, r, "eth_type=0x0800,ip_proto=6", 5, 0, rule.FlowDeleteStrict)
	if in := r.sw.TableInfos()[0].LPM; !in.Shaped || in.Images != 1 {
		t.Fatalf("without it: %+v, want LPM with one image (the IPv4 /8's group)", in)
	}
	routerFlow(t, r, "eth_type=0x0800,ip_proto=6", 5, 1, rule.FlowAdd)
	routerFlow(t, r, "eth_type=0x0800,ipv4_dst=10.1.0.0/16", 30, 2, rule.FlowAdd)
	routerFlow(t, r, "eth_type=0x0800,ip_proto=6", 5, 0, rule.FlowDeleteStrict)
	if in := r.sw.TableInfos()[0].LPM; !in.Shaped || in.Images != 1 || in.Prefixes != 8 {
		t.Fatalf("after a route added while not shaped: %+v, want LPM, one image, 8 prefixes (6 /0 of the in_port rules)", in)
	}
	r.sw.Process(1, [][]byte{udpFrame(t, "10.9.9.9", "10.1.2.3")})
	if n := len(r.devs[1].take()); n != 1 {
		t.Fatalf("10.1.2.3: port 2 got %d frames, want 1 (the /16 added while the classifier served)", n)
	}
}
