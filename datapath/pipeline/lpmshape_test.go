package pipeline

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/internal/shareddata"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/rule"
)

// The real BGP table, loaded once per test process.
var fib struct {
	once   sync.Once
	v4, v6 []netip.Prefix
	err    error
}

func fibPrefixes(tb testing.TB) (v4, v6 []netip.Prefix) {
	tb.Helper()
	path := shareddata.Path(tb, "fib/bgp-full-table.txt.gz")
	fib.once.Do(func() {
		var all []netip.Prefix
		all, fib.err = lpm.OpenPrefixFile(path)
		fib.v4, fib.v6 = lpm.SplitFamilies(all)
	})
	if fib.err != nil {
		tb.Fatalf("reading %s: %v", path, fib.err)
	}
	return fib.v4, fib.v6
}

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

// refForm is what the generator knows of a rule it made.
type refForm struct {
	foreign bool
	anyFam  bool
	port    uint64 // wildPort: none
	pfx     netip.Prefix
}

// routeMatch builds the match of an LPM-form rule.
func routeMatch(tb testing.TB, f refForm) flow.Match {
	var m flow.Match
	if f.port != wildPort {
		m.SetInPort(uint32(f.port))
	}
	if f.anyFam {
		return m
	}
	a := f.pfx.Addr()
	if a.Is4() {
		m.SetEthType(flow.EthTypeIPv4)
		if err := m.SetIPv4Dst(binary.BigEndian.Uint32(a.AsSlice()), f.pfx.Bits()); err != nil {
			tb.Fatal(err)
		}
		return m
	}
	m.SetEthType(flow.EthTypeIPv6)
	hi, lo := prefixMask(f.pfx.Bits())
	var mk [16]byte
	binary.BigEndian.PutUint64(mk[:8], hi)
	binary.BigEndian.PutUint64(mk[8:], lo)
	if err := m.SetField(flow.FieldIPv6Dst, a.AsSlice(), mk[:]); err != nil {
		tb.Fatal(err)
	}
	return m
}

// refShaped decides the shape by brute force over every pair of rules.
func refShaped(sw *Switch, tid int, forms map[flow.Match]refForm) bool {
	type rr struct {
		f    refForm
		prio uint16
	}
	var rs []rr
	fam := 0
	ok := true
	sw.tables[tid].ft.Rules(func(_ flow.RuleID, r *flow.Rule) bool {
		f, known := forms[r.Match]
		if !known || f.foreign {
			ok = false
			return false
		}
		if !f.anyFam {
			fam++
		}
		rs = append(rs, rr{f, r.Priority})
		return true
	})
	if !ok || fam == 0 {
		return false
	}
	for i := range rs {
		for j := range rs {
			a, b := &rs[i], &rs[j]
			if a.f.port != b.f.port && a.f.port != wildPort && b.f.port != wildPort {
				continue
			}
			// b strictly more specific than a, on packets of b's family.
			if b.f.anyFam {
				continue
			}
			pa := a.f.pfx
			if a.f.anyFam {
				pa = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
				if b.f.pfx.Addr().Is4() {
					pa = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
				}
			}
			if pa.Addr().Is4() != b.f.pfx.Addr().Is4() || pa.Bits() >= b.f.pfx.Bits() || !pa.Contains(b.f.pfx.Addr()) {
				continue
			}
			if b.prio <= a.prio {
				return false
			}
		}
	}
	return true
}

// shapeGen makes LPM-form rules on clustered samples of the real table.
type shapeGen struct {
	rng    *rand.Rand
	v4, v6 []netip.Prefix
	forms  map[flow.Match]refForm
}

func newShapeGen(tb testing.TB, seed uint64, runs4, runs6, runLen int) *shapeGen {
	all4, all6 := fibPrefixes(tb)
	g := &shapeGen{rng: rand.New(rand.NewPCG(seed, 7)), forms: map[flow.Match]refForm{}}
	pick := func(all []netip.Prefix, runs int) []netip.Prefix {
		var out []netip.Prefix
		for range runs {
			i := g.rng.IntN(len(all) - runLen)
			run := all[i : i+runLen]
			out = append(out, run...)
			// Covering prefixes of the run, so that nesting is common.
			for _, l := range []int{8, 12, 16} {
				if l < run[0].Bits() {
					out = append(out, netip.PrefixFrom(run[0].Addr(), l).Masked())
				}
			}
		}
		return out
	}
	g.v4, g.v6 = pick(all4, runs4), pick(all6, runs6)
	return g
}

// prio gives a priority consistent with longest-prefix order: bands of 4
// per prefix length.
func (g *shapeGen) prio(plen int) uint16 { return uint16(10 + 4*plen + g.rng.IntN(4)) }

func (g *shapeGen) port() uint64 {
	if g.rng.IntN(4) == 0 {
		return uint64(1 + g.rng.IntN(3))
	}
	return wildPort
}

// rule returns a random LPM-form rule and its priority.
func (g *shapeGen) rule(tb testing.TB) (flow.Match, uint16) {
	f := refForm{port: g.port()}
	var prio uint16
	switch x := g.rng.IntN(20); {
	case x == 0: // table-miss
		f.anyFam, f.port = true, wildPort
	case x == 1: // in_port only
		f.anyFam = true
		prio = g.prio(0)
	case x == 2: // eth_type only
		f.pfx = zeroPrefix[g.rng.IntN(2)]
		prio = g.prio(0)
	case x < 15:
		f.pfx = g.v4[g.rng.IntN(len(g.v4))]
		prio = g.prio(f.pfx.Bits())
	default:
		f.pfx = g.v6[g.rng.IntN(len(g.v6))]
		prio = g.prio(f.pfx.Bits())
	}
	m := routeMatch(tb, f)
	g.forms[m] = f
	return m, prio
}

// breaker returns a rule that breaks the shape (or may): another field, or
// a specific prefix below the priorities of its covers.
func (g *shapeGen) breaker(tb testing.TB) (flow.Match, uint16) {
	if g.rng.IntN(2) == 0 {
		var m flow.Match
		m.SetEthType(flow.EthTypeIPv4)
		m.SetIPProto(6)
		_ = m.SetL4Dst(uint16(g.rng.IntN(1024)), 0xffff)
		g.forms[m] = refForm{foreign: true}
		return m, uint16(g.rng.IntN(300))
	}
	f := refForm{port: g.port(), pfx: g.v4[g.rng.IntN(len(g.v4))]}
	m := routeMatch(tb, f)
	g.forms[m] = f
	return m, uint16(g.rng.IntN(10))
}

// keys returns lookup keys: in-table and random addresses of both
// families, non-IP frames, on ports 1..4.
func (g *shapeGen) keys(tb testing.TB, n int) []flow.Key {
	out := make([]flow.Key, n)
	for i := range out {
		k := &out[i]
		_ = k.SetUint(flow.FieldInPort, uint64(1+g.rng.IntN(4)))
		_ = k.SetUint(flow.FieldEthSrc, g.rng.Uint64()&(1<<48-1))
		switch x := g.rng.IntN(10); {
		case x == 0: // ARP: its target address lives in ipv4_dst's word
			_ = k.SetUint(flow.FieldEthType, flow.EthTypeARP)
			_ = k.SetUint(flow.FieldARPTPA, uint64(g.rng.Uint32()))
		case x < 6:
			_ = k.SetUint(flow.FieldEthType, flow.EthTypeIPv4)
			_ = k.SetUint(flow.FieldIPProto, 17)
			a := g.rng.Uint32()
			if x < 4 {
				p := g.v4[g.rng.IntN(len(g.v4))]
				base := binary.BigEndian.Uint32(p.Addr().AsSlice())
				a = base | a&^uint32(^uint64(0)<<(32-p.Bits()))
			}
			_ = k.SetUint(flow.FieldIPv4Dst, uint64(a))
		default:
			_ = k.SetUint(flow.FieldEthType, flow.EthTypeIPv6)
			var b [16]byte
			binary.BigEndian.PutUint64(b[:8], g.rng.Uint64())
			binary.BigEndian.PutUint64(b[8:], g.rng.Uint64())
			if x < 9 {
				p := g.v6[g.rng.IntN(len(g.v6))]
				pb := p.Addr().As16()
				mhi, mlo := prefixMask(p.Bits())
				hi := binary.BigEndian.Uint64(pb[:8]) | binary.BigEndian.Uint64(b[:8])&^mhi
				lo := binary.BigEndian.Uint64(pb[8:]) | binary.BigEndian.Uint64(b[8:])&^mlo
				binary.BigEndian.PutUint64(b[:8], hi)
				binary.BigEndian.PutUint64(b[8:], lo)
			}
			if err := k.Set(flow.FieldIPv6Dst, b[:]); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return out
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

// checkShape compares the tracker's verdict with the brute-force one and,
// when the table is served by LPM, the rule the LPM path chooses with the
// flow table's own lookup for every key.
func checkShape(tb testing.TB, sw *Switch, tid int, forms map[flow.Match]refForm, keys []flow.Key, step int) bool {
	tb.Helper()
	sw.mu.RLock()
	defer sw.mu.RUnlock()
	t := sw.tables[tid]
	want := refShaped(sw, tid, forms)
	got := t.lpm != nil && t.lpm.serves()
	if got != want {
		info := LPMInfo{}
		if t.lpm != nil {
			info = t.lpm.info()
		}
		tb.Fatalf("step %d: table %d served by LPM = %v, brute force says LPM-shaped = %v (%+v, %d rules)", step, tid, got, want, info, t.ft.Len())
	}
	if !got {
		return false
	}
	res := make([]flow.RuleID, len(keys))
	if err := t.lpm.lookup(keys, res); err != nil {
		tb.Fatalf("step %d: LPM lookup: %v", step, err)
	}
	for i := range keys {
		w, _ := t.ft.Lookup(&keys[i])
		if res[i] != w {
			tb.Fatalf("step %d: key %v: LPM chose rule %d, the classifier %d", step, keys[i].String(), res[i], w)
		}
	}
	return true
}

// TestLPMShapeRandomFlowMods runs random FLOW_MOD sequences (adds,
// replacing adds, strict and non-strict deletes, modifies, hard timeouts,
// rules that break the shape and their removal) on tables of real BGP
// prefixes with in_port groups and table-miss rules, and checks after
// every step the shape against brute force and, while LPM serves the
// table, every lookup against the flow table's.
func TestLPMShapeRandomFlowMods(t *testing.T) {
	runShapeRandom(t, cpuEngine, 2)
}

// runShapeRandom is TestLPMShapeRandomFlowMods on the engines newEngine
// makes, one per seed.
func runShapeRandom(t *testing.T, newEngine func(testing.TB) *gpu.Engine, seeds uint64) {
	for seed := uint64(1); seed <= seeds; seed++ {
		g := newShapeGen(t, seed, 12, 6, 12)
		sw := shapeSwitchOn(t, 2, newEngine(t))
		tid := uint8(seed % 2)
		var breakers []rule.FlowMod
		served, broken := 0, 0
		for step := range 500 {
			switch x := g.rng.IntN(100); {
			case x < 50 || step < 100:
				m, prio := g.rule(t)
				flowMod(t, sw, &rule.FlowMod{Command: rule.FlowAdd, TableID: tid, Priority: prio, Cookie: uint64(step), Match: m})
			case x < 55:
				m, prio := g.breaker(t)
				fm := rule.FlowMod{Command: rule.FlowAdd, TableID: tid, Priority: prio, Match: m}
				flowMod(t, sw, &fm)
				breakers = append(breakers, fm)
			case x < 70 && len(breakers) > 0:
				i := g.rng.IntN(len(breakers))
				fm := breakers[i]
				breakers = append(breakers[:i], breakers[i+1:]...)
				fm.Command, fm.Instructions = rule.FlowDeleteStrict, rule.Instructions{}
				flowMod(t, sw, &fm)
			case x < 85:
				// Strict delete of a random rule.
				var victim *flow.Rule
				n := 0
				sw.tables[tid].ft.Rules(func(_ flow.RuleID, r *flow.Rule) bool {
					if n++; g.rng.IntN(n) == 0 {
						rc := *r
						victim = &rc
					}
					return true
				})
				if victim != nil {
					flowMod(t, sw, &rule.FlowMod{Command: rule.FlowDeleteStrict, TableID: tid, Priority: victim.Priority, Match: victim.Match})
				}
			case x < 88:
				// Non-strict delete of everything under a /12 of a prefix.
				p := g.v4[g.rng.IntN(len(g.v4))]
				f := refForm{port: wildPort, pfx: netip.PrefixFrom(p.Addr(), min(12, p.Bits())).Masked()}
				flowMod(t, sw, &rule.FlowMod{Command: rule.FlowDelete, TableID: tid, Match: routeMatch(t, f)})
			case x < 92:
				m, _ := g.rule(t)
				flowMod(t, sw, &rule.FlowMod{Command: rule.FlowModify, TableID: tid, Match: m,
					Instructions: applyOut(3)})
			case x < 96:
				// Rules with a hard timeout, expired at once.
				for range 1 + g.rng.IntN(5) {
					m, prio := g.rule(t)
					flowMod(t, sw, &rule.FlowMod{Command: rule.FlowAdd, TableID: tid, Priority: prio, HardTimeout: 1, Match: m})
				}
				if ok := checkShape(t, sw, int(tid), g.forms, g.keys(t, 50), step); ok {
					served++
				}
				sw.Expire(time.Now().Add(2 * time.Second))
			default:
				// Delete by cookie: rules of one earlier step.
				flowMod(t, sw, &rule.FlowMod{Command: rule.FlowDelete, TableID: rule.TableAll, Cookie: uint64(g.rng.IntN(step + 1)), CookieMask: ^uint64(0)})
			}
			if checkShape(t, sw, int(tid), g.forms, g.keys(t, 100), step) {
				served++
			} else {
				broken++
			}
		}
		// Remove every breaker: the shape must come back.
		for _, fm := range breakers {
			fm.Command, fm.Instructions = rule.FlowDeleteStrict, rule.Instructions{}
			flowMod(t, sw, &fm)
		}
		checkShape(t, sw, int(tid), g.forms, g.keys(t, 1000), -1)
		info := sw.tables[tid].lpm.info()
		t.Logf("seed %d: %d steps served by LPM, %d by the classifier; end: %+v", seed, served, broken, info)
		if served < 100 || broken < 10 || info.Transitions < 2 {
			t.Errorf("seed %d: the sequence did not exercise both states (%d served, %d not, %d transitions)", seed, served, broken, info.Transitions)
		}
	}
}

// TestLPMFormOf checks the form reader against matches built from forms,
// and rejects the matches that are not LPM-shaped.
func TestLPMFormOf(t *testing.T) {
	good := []refForm{
		{anyFam: true, port: wildPort},
		{anyFam: true, port: 7},
		{port: wildPort, pfx: netip.MustParsePrefix("0.0.0.0/0")},
		{port: wildPort, pfx: netip.MustParsePrefix("10.1.0.0/16")},
		{port: 3, pfx: netip.MustParsePrefix("10.1.2.3/32")},
		{port: wildPort, pfx: netip.MustParsePrefix("::/0")},
		{port: wildPort, pfx: netip.MustParsePrefix("2001:db8::/32")},
		{port: 9, pfx: netip.MustParsePrefix("2001:db8:0:1::/64")},
		{port: wildPort, pfx: netip.MustParsePrefix("2001:db8::1/128")},
		{port: wildPort, pfx: netip.MustParsePrefix("2001:db8::/65")},
	}
	for _, want := range good {
		m := routeMatch(t, want)
		f, ok := lpmFormOf(&m)
		if !ok || f.anyFam != want.anyFam || f.port != want.port || !want.anyFam && f.pfx != want.pfx {
			t.Errorf("%s: form %+v, %v; want %+v", m.String(), f, ok, want)
		}
	}
	bad := []string{
		"eth_type=0x0800,ipv4_dst=10.0.0.0/255.0.255.0",
		"eth_type=0x0800,ipv4_src=10.0.0.0/8",
		"eth_type=0x0800,ip_proto=6",
		"eth_type=0x0806",
		"eth_type=0x0806,arp_tpa=10.0.0.1",
		"eth_dst=00:00:00:00:00:01",
		"in_port=1,in_phy_port=1",
		"metadata=0x1",
		"in_port=1/0xff",
		"eth_type=0x86dd,ipv6_dst=2001::/ffff::ffff",
		"eth_type=0x86dd,ipv6_flabel=1",
		"vlan_vid=0x1001,eth_type=0x0800,ipv4_dst=10.0.0.0/8",
	}
	for _, s := range bad {
		m, err := flow.ParseMatch(s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if f, ok := lpmFormOf(&m); ok {
			t.Errorf("%s: read as LPM form %+v", s, f)
		}
	}
}

// TestLPMShapeCases checks the verdict on small tables, one per way that
// rules of two in_port groups, families and the table-miss interact.
func TestLPMShapeCases(t *testing.T) {
	type route struct {
		match string
		prio  uint16
	}
	cases := []struct {
		name   string
		rules  []route
		shaped bool
	}{
		{"empty", nil, false},
		{"table-miss only", []route{{"", 0}}, false},
		{"router", []route{{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", 8}, {"eth_type=0x0800,ipv4_dst=10.1.0.0/16", 16}, {"", 0}}, true},
		{"inverted", []route{{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", 16}, {"eth_type=0x0800,ipv4_dst=10.1.0.0/16", 8}}, false},
		{"equal priorities nested", []route{{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", 8}, {"eth_type=0x0800,ipv4_dst=10.1.0.0/16", 8}}, false},
		{"equal prefixes any priorities", []route{{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", 8}, {"in_port=1,eth_type=0x0800,ipv4_dst=10.0.0.0/8", 3}}, true},
		{"disjoint inverted", []route{{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", 16}, {"eth_type=0x0800,ipv4_dst=11.1.0.0/16", 8}}, true},
		{"table-miss above a route", []route{{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", 8}, {"", 9}}, false},
		{"eth_type /0 above a route", []route{{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", 8}, {"eth_type=0x0800", 9}}, false},
		{"other family's /0 above", []route{{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", 8}, {"eth_type=0x86dd", 9}}, true},
		{"port rule covers wildcard inverted", []route{{"in_port=1,eth_type=0x0800,ipv4_dst=10.0.0.0/8", 20}, {"eth_type=0x0800,ipv4_dst=10.1.0.0/16", 16}}, false},
		{"wildcard covers port rule inverted", []route{{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", 20}, {"in_port=2,eth_type=0x0800,ipv4_dst=10.1.0.0/16", 16}}, false},
		{"two ports inverted", []route{{"in_port=1,eth_type=0x0800,ipv4_dst=10.0.0.0/8", 20}, {"in_port=2,eth_type=0x0800,ipv4_dst=10.1.0.0/16", 16}}, true},
		{"in_port-only above its port's route", []route{{"in_port=1,eth_type=0x0800,ipv4_dst=10.0.0.0/8", 8}, {"in_port=1", 9}}, false},
		{"in_port-only above another port's route", []route{{"in_port=2,eth_type=0x0800,ipv4_dst=10.0.0.0/8", 8}, {"in_port=1", 9}}, true},
		{"in_port-only above a wildcard v6 route", []route{{"eth_type=0x86dd,ipv6_dst=2001:db8::/32", 8}, {"in_port=1", 9}}, false},
		{"foreign", []route{{"eth_type=0x0800,ipv4_dst=10.0.0.0/8", 8}, {"eth_type=0x0800,ip_proto=6", 1}}, false},
		{"v6 router", []route{{"eth_type=0x86dd,ipv6_dst=2001:db8::/32", 32}, {"eth_type=0x86dd,ipv6_dst=2001:db8:1::/48", 48}, {"eth_type=0x86dd,ipv6_dst=2001:db8:1::1/128", 128}}, true},
		{"v6 inverted /128", []route{{"eth_type=0x86dd,ipv6_dst=2001:db8::/32", 32}, {"eth_type=0x86dd,ipv6_dst=2001:db8:1::1/128", 31}}, false},
	}
	for _, c := range cases {
		sw := shapeSwitch(t, 1)
		for _, r := range c.rules {
			m, err := flow.ParseMatch(r.match)
			if err != nil {
				t.Fatal(err)
			}
			flowMod(t, sw, &rule.FlowMod{Command: rule.FlowAdd, Priority: r.prio, Match: m})
		}
		if got := sw.TableInfos()[0].Search == "lpm"; got != c.shaped {
			t.Errorf("%s: served by LPM = %v, want %v (%+v)", c.name, got, c.shaped, sw.TableInfos()[0].LPM)
		}
		// Deleting every rule leaves no state behind.
		flowMod(t, sw, &rule.FlowMod{Command: rule.FlowDelete, TableID: rule.TableAll})
		if in := sw.TableInfos()[0].LPM; in != (LPMInfo{Transitions: in.Transitions}) {
			t.Errorf("%s: after deleting every rule: %+v", c.name, in)
		}
	}
}

// FuzzLPMShape runs FLOW_MOD sequences over a small prefix space (so that
// nesting, in_port groups and priority conflicts are frequent) and checks
// after each the shape against brute force and the LPM path's rule against
// the flow table's for keys covering that space. Each op is 3 bytes:
// command and form, prefix, priority.
func FuzzLPMShape(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 5))
	for range 24 {
		b := make([]byte, 3*(8+rng.IntN(40)))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		f.Add(b)
	}
	lens := [8]int{0, 1, 2, 3, 8, 16, 24, 32}
	var keys []flow.Key
	for port := uint64(1); port <= 4; port++ {
		for a := range uint32(64) {
			var k4, k6, k0 flow.Key
			for _, k := range []*flow.Key{&k4, &k6, &k0} {
				_ = k.SetUint(flow.FieldInPort, port)
			}
			_ = k4.SetUint(flow.FieldEthType, flow.EthTypeIPv4)
			_ = k4.SetUint(flow.FieldIPv4Dst, uint64(a<<26|a))
			_ = k6.SetUint(flow.FieldEthType, flow.EthTypeIPv6)
			var b [16]byte
			b[0], b[15] = byte(a<<2), byte(a)
			_ = k6.Set(flow.FieldIPv6Dst, b[:])
			_ = k0.SetUint(flow.FieldEthType, flow.EthTypeARP)
			keys = append(keys, k4, k6, k0)
		}
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 3*200 {
			return
		}
		sw := shapeSwitch(t, 1)
		forms := map[flow.Match]refForm{}
		for i := 0; i+3 <= len(ops); i += 3 {
			b0, b1, b2 := ops[i], ops[i+1], ops[i+2]
			fm := refForm{port: wildPort}
			if p := b0 >> 2 & 3; p != 0 {
				fm.port = uint64(p)
			}
			l := lens[b1&7]
			var m flow.Match
			switch b0 >> 4 & 3 {
			case 0:
				fm.anyFam = true
			case 3:
				var mk flow.Match
				mk.SetEthType(flow.EthTypeIPv4)
				_ = mk.SetL4Dst(80, 0xffff)
				mk.SetIPProto(6)
				m, fm = mk, refForm{foreign: true}
			case 1:
				fm.pfx = netip.PrefixFrom(netip.AddrFrom4([4]byte{b1 &^ 7}), l).Masked()
			case 2:
				var a [16]byte
				a[0] = b1 &^ 7
				fm.pfx = netip.PrefixFrom(netip.AddrFrom16(a), l*4).Masked()
			}
			if !fm.foreign {
				m = routeMatch(t, fm)
			}
			forms[m] = fm
			prio := uint16(b2 & 0x3f)
			if b2&0x80 != 0 && !fm.anyFam && !fm.foreign {
				prio = uint16(10 + 4*fm.pfx.Bits() + int(b2&3))
			}
			cmd := rule.FlowAdd
			if b0&3 == 3 {
				cmd = rule.FlowDeleteStrict
			}
			mod := &rule.FlowMod{Command: cmd, Priority: prio, Match: m}
			flowMod(t, sw, mod)
			checkShape(t, sw, 0, forms, keys, i/3)
		}
	})
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

// FuzzLPMFormOf builds matches from in_port, eth_type, ip_dst and another
// field with arbitrary values and masks, and checks the form reader: a
// valid match is read as an LPM form exactly when it is one (in_port exact
// or absent, eth_type IPv4/IPv6 or absent, a prefix mask on the family's
// ip_dst, nothing else), and then the form's own match is the match.
func FuzzLPMFormOf(f *testing.F) {
	f.Add(uint8(1), uint32(3), uint8(1), uint8(0), []byte{10, 1, 0, 0, 255, 255, 0, 0}, false)
	f.Add(uint8(0), uint32(0), uint8(2), uint8(0), make([]byte, 32), false)
	f.Add(uint8(2), uint32(3), uint8(1), uint8(0), []byte{10, 1, 0, 0, 255, 0, 255, 0}, false)
	f.Add(uint8(0), uint32(0), uint8(0), uint8(0), []byte{}, true)
	f.Add(uint8(1), uint32(7), uint8(3), uint8(1), []byte{10, 0, 0, 1, 255, 255, 255, 255}, false)
	f.Fuzz(func(t *testing.T, portMode uint8, port uint32, et uint8, etMask uint8, addr []byte, other bool) {
		var m flow.Match
		want := true
		switch portMode % 3 {
		case 1:
			m.SetInPort(port)
		case 2:
			if err := m.SetFieldUint(flow.FieldInPort, uint64(port&0xff00), 0xff00); err != nil {
				return
			}
			want = false
		}
		ethTypes := []uint64{0, flow.EthTypeIPv4, flow.EthTypeIPv6, flow.EthTypeARP}
		typ := ethTypes[et%4]
		if typ != 0 {
			mask := uint64(0xffff)
			if etMask%8 == 7 {
				mask = 0xff00 // a partial eth_type
				want = false
			}
			if err := m.SetFieldUint(flow.FieldEthType, typ&mask, mask); err != nil {
				return
			}
		}
		switch {
		case typ == flow.EthTypeIPv4 && len(addr) >= 8:
			v, mk := binary.BigEndian.Uint32(addr), binary.BigEndian.Uint32(addr[4:])
			if mk != 0 {
				if err := m.SetFieldUint(flow.FieldIPv4Dst, uint64(v&mk), uint64(mk)); err != nil {
					return
				}
				l := bitsOnes32(mk)
				want = want && mk == ^uint32(0)<<(32-l)
			}
		case typ == flow.EthTypeIPv6 && len(addr) >= 32:
			v, mk := addr[:16], addr[16:32]
			var vm [16]byte
			for i := range vm {
				vm[i] = v[i] & mk[i]
			}
			if err := m.SetField(flow.FieldIPv6Dst, vm[:], mk); err != nil {
				return
			}
			hi, lo := binary.BigEndian.Uint64(mk[:8]), binary.BigEndian.Uint64(mk[8:])
			l := 0
			for l < 128 && bitAt(hi, lo, l) == 1 {
				l++
			}
			ph, pl := prefixMask(l)
			want = want && ph == hi && pl == lo
		case typ == flow.EthTypeARP:
			want = false
		}
		if other && typ != 0 && typ != flow.EthTypeARP {
			m.SetIPProto(6)
			want = false
		}
		if m.Validate() != nil {
			return
		}
		form, ok := lpmFormOf(&m)
		if ok != want {
			t.Fatalf("%s: read as LPM form %v, want %v", m.String(), ok, want)
		}
		if !ok {
			return
		}
		rf := refForm{anyFam: form.anyFam, port: form.port, pfx: form.pfx}
		if back := routeMatch(t, rf); back != m {
			t.Fatalf("%s: form %+v gives back %s", m.String(), form, back.String())
		}
	})
}

// bitsOnes32 counts the leading ones of x.
func bitsOnes32(x uint32) int {
	n := 0
	for n < 32 && x&(1<<(31-n)) != 0 {
		n++
	}
	return n
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
