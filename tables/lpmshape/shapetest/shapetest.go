// Package shapetest is the test harness of tables/lpmshape, shared by its
// own tests and by those of the switches that use it (datapath/pipeline,
// on the CPU and on a GPU): a generator of LPM-form rules on clustered
// samples of the real BGP table, a brute-force verdict on a table's shape,
// and property tests that drive a Target with random rule changes and
// check, after each, the Shape's verdict against brute force and, while
// the Shape serves the table, every lookup against the flow table's own.
package shapetest

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/gswitch/gswitch/internal/shareddata"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/lpmshape"
	"github.com/gswitch/gswitch/tables/rule"
)

// Target is a switch (or a stand-in) whose flow tables carry Shapes.
type Target interface {
	// FlowMod applies fm or fails the test.
	FlowMod(tb testing.TB, fm *rule.FlowMod)
	// Expire removes the entries whose timeouts have passed at now.
	Expire(now time.Time)
	// Inspect runs f on table tid's flow table and Shape (nil before its
	// first rule) with changes held off.
	Inspect(tid uint8, f func(ft *flow.Table, sh *lpmshape.Shape))
}

// The real BGP table, loaded once per test process.
var fib struct {
	once   sync.Once
	v4, v6 []netip.Prefix
	err    error
}

// FibPrefixes returns the prefixes of the shared BGP table, by family.
func FibPrefixes(tb testing.TB) (v4, v6 []netip.Prefix) {
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

// WildPort is a Form's Port without in_port.
const WildPort = uint64(1) << 32

// Form is what the generator knows of a rule it made.
type Form struct {
	Foreign bool // not of the LPM form
	AnyFam  bool // no eth_type
	Port    uint64
	Pfx     netip.Prefix
}

// ZeroPrefix is the /0 of IPv4 and of IPv6.
var ZeroPrefix = [2]netip.Prefix{netip.PrefixFrom(netip.IPv4Unspecified(), 0), netip.PrefixFrom(netip.IPv6Unspecified(), 0)}

// PrefixMask returns the 128-bit mask of the first l bits.
func PrefixMask(l int) (hi, lo uint64) {
	switch {
	case l == 0:
		return 0, 0
	case l <= 64:
		return ^uint64(0) << (64 - l), 0
	}
	return ^uint64(0), ^uint64(0) << (128 - l)
}

// RouteMatch builds the match of an LPM-form rule.
func RouteMatch(tb testing.TB, f Form) flow.Match {
	var m flow.Match
	if f.Port != WildPort {
		m.SetInPort(uint32(f.Port))
	}
	if f.AnyFam {
		return m
	}
	a := f.Pfx.Addr()
	if a.Is4() {
		m.SetEthType(flow.EthTypeIPv4)
		if err := m.SetIPv4Dst(binary.BigEndian.Uint32(a.AsSlice()), f.Pfx.Bits()); err != nil {
			tb.Fatal(err)
		}
		return m
	}
	m.SetEthType(flow.EthTypeIPv6)
	hi, lo := PrefixMask(f.Pfx.Bits())
	var mk [16]byte
	binary.BigEndian.PutUint64(mk[:8], hi)
	binary.BigEndian.PutUint64(mk[8:], lo)
	if err := m.SetField(flow.FieldIPv6Dst, a.AsSlice(), mk[:]); err != nil {
		tb.Fatal(err)
	}
	return m
}

// RefShaped decides the shape of ft by brute force over every pair of
// rules.
func RefShaped(ft *flow.Table, forms map[flow.Match]Form) bool {
	type rr struct {
		f    Form
		prio uint16
	}
	var rs []rr
	fam := 0
	ok := true
	ft.Rules(func(_ flow.RuleID, r *flow.Rule) bool {
		f, known := forms[r.Match]
		if !known || f.Foreign {
			ok = false
			return false
		}
		if !f.AnyFam {
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
			if a.f.Port != b.f.Port && a.f.Port != WildPort && b.f.Port != WildPort {
				continue
			}
			// b strictly more specific than a, on packets of b's family.
			if b.f.AnyFam {
				continue
			}
			pa := a.f.Pfx
			if a.f.AnyFam {
				pa = ZeroPrefix[1]
				if b.f.Pfx.Addr().Is4() {
					pa = ZeroPrefix[0]
				}
			}
			if pa.Addr().Is4() != b.f.Pfx.Addr().Is4() || pa.Bits() >= b.f.Pfx.Bits() || !pa.Contains(b.f.Pfx.Addr()) {
				continue
			}
			if b.prio <= a.prio {
				return false
			}
		}
	}
	return true
}

// Gen makes LPM-form rules on clustered samples of the real table.
type Gen struct {
	Rng    *rand.Rand
	V4, V6 []netip.Prefix
	Forms  map[flow.Match]Form
}

// NewGen samples runs4 and runs6 runs of runLen consecutive prefixes of
// the real table (and covering /8, /12, /16 prefixes of each run).
func NewGen(tb testing.TB, seed uint64, runs4, runs6, runLen int) *Gen {
	all4, all6 := FibPrefixes(tb)
	g := &Gen{Rng: rand.New(rand.NewPCG(seed, 7)), Forms: map[flow.Match]Form{}}
	pick := func(all []netip.Prefix, runs int) []netip.Prefix {
		var out []netip.Prefix
		for range runs {
			i := g.Rng.IntN(len(all) - runLen)
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
	g.V4, g.V6 = pick(all4, runs4), pick(all6, runs6)
	return g
}

// Prio gives a priority consistent with longest-prefix order: bands of 4
// per prefix length.
func (g *Gen) Prio(plen int) uint16 { return uint16(10 + 4*plen + g.Rng.IntN(4)) }

// Port gives an in_port key: WildPort three times in four, else 1..3.
func (g *Gen) Port() uint64 {
	if g.Rng.IntN(4) == 0 {
		return uint64(1 + g.Rng.IntN(3))
	}
	return WildPort
}

// Rule returns a random LPM-form rule and its priority.
func (g *Gen) Rule(tb testing.TB) (flow.Match, uint16) {
	f := Form{Port: g.Port()}
	var prio uint16
	switch x := g.Rng.IntN(20); {
	case x == 0: // table-miss
		f.AnyFam, f.Port = true, WildPort
	case x == 1: // in_port only
		f.AnyFam = true
		prio = g.Prio(0)
	case x == 2: // eth_type only
		f.Pfx = ZeroPrefix[g.Rng.IntN(2)]
		prio = g.Prio(0)
	case x < 15:
		f.Pfx = g.V4[g.Rng.IntN(len(g.V4))]
		prio = g.Prio(f.Pfx.Bits())
	default:
		f.Pfx = g.V6[g.Rng.IntN(len(g.V6))]
		prio = g.Prio(f.Pfx.Bits())
	}
	m := RouteMatch(tb, f)
	g.Forms[m] = f
	return m, prio
}

// Breaker returns a rule that breaks the shape (or may): another field, or
// a specific prefix below the priorities of its covers.
func (g *Gen) Breaker(tb testing.TB) (flow.Match, uint16) {
	if g.Rng.IntN(2) == 0 {
		var m flow.Match
		m.SetEthType(flow.EthTypeIPv4)
		m.SetIPProto(6)
		_ = m.SetL4Dst(uint16(g.Rng.IntN(1024)), 0xffff)
		g.Forms[m] = Form{Foreign: true}
		return m, uint16(g.Rng.IntN(300))
	}
	f := Form{Port: g.Port(), Pfx: g.V4[g.Rng.IntN(len(g.V4))]}
	m := RouteMatch(tb, f)
	g.Forms[m] = f
	return m, uint16(g.Rng.IntN(10))
}

// Keys returns lookup keys: in-table and random addresses of both
// families, non-IP frames, on ports 1..4.
func (g *Gen) Keys(tb testing.TB, n int) []flow.Key {
	out := make([]flow.Key, n)
	for i := range out {
		k := &out[i]
		_ = k.SetUint(flow.FieldInPort, uint64(1+g.Rng.IntN(4)))
		_ = k.SetUint(flow.FieldEthSrc, g.Rng.Uint64()&(1<<48-1))
		switch x := g.Rng.IntN(10); {
		case x == 0: // ARP: its target address lives in ipv4_dst's word
			_ = k.SetUint(flow.FieldEthType, flow.EthTypeARP)
			_ = k.SetUint(flow.FieldARPTPA, uint64(g.Rng.Uint32()))
		case x < 6:
			_ = k.SetUint(flow.FieldEthType, flow.EthTypeIPv4)
			_ = k.SetUint(flow.FieldIPProto, 17)
			a := g.Rng.Uint32()
			if x < 4 {
				p := g.V4[g.Rng.IntN(len(g.V4))]
				base := binary.BigEndian.Uint32(p.Addr().AsSlice())
				a = base | a&^uint32(^uint64(0)<<(32-p.Bits()))
			}
			_ = k.SetUint(flow.FieldIPv4Dst, uint64(a))
		default:
			_ = k.SetUint(flow.FieldEthType, flow.EthTypeIPv6)
			var b [16]byte
			binary.BigEndian.PutUint64(b[:8], g.Rng.Uint64())
			binary.BigEndian.PutUint64(b[8:], g.Rng.Uint64())
			if x < 9 {
				p := g.V6[g.Rng.IntN(len(g.V6))]
				pb := p.Addr().As16()
				mhi, mlo := PrefixMask(p.Bits())
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

// Out is the instructions the harness gives entries: apply-actions,
// output to port.
func Out(port uint32) rule.Instructions {
	return rule.Instructions{Has: rule.HasApplyActions, Apply: []rule.Action{{Kind: rule.ActOutput, Port: port}}}
}

// Check compares the Shape's verdict on table tid with the brute-force
// one and, when the Shape serves the table, the rule it chooses with the
// flow table's own lookup for every key. It reports whether LPM serves.
func Check(tb testing.TB, tg Target, tid uint8, forms map[flow.Match]Form, keys []flow.Key, step int) bool {
	tb.Helper()
	served := false
	tg.Inspect(tid, func(ft *flow.Table, sh *lpmshape.Shape) {
		want := RefShaped(ft, forms)
		got := sh != nil && sh.Serves()
		if got != want {
			info := lpmshape.Info{}
			if sh != nil {
				info = sh.Info()
			}
			tb.Fatalf("step %d: table %d served by LPM = %v, brute force says LPM-shaped = %v (%+v, %d rules)", step, tid, got, want, info, ft.Len())
		}
		if !got {
			return
		}
		served = true
		res := make([]flow.RuleID, len(keys))
		if err := sh.Lookup(keys, res); err != nil {
			tb.Fatalf("step %d: LPM lookup: %v", step, err)
		}
		for i := range keys {
			w, _ := ft.Lookup(&keys[i])
			if res[i] != w {
				tb.Fatalf("step %d: key %v: LPM chose rule %d, the classifier %d", step, keys[i].String(), res[i], w)
			}
		}
	})
	return served
}

// RunRandom runs a random sequence of 500 flow changes (adds, replacing
// adds, strict and non-strict deletes, modifies, hard timeouts, rules
// that break the shape and their removal) on table seed%2 of tg, tables
// of real BGP prefixes with in_port groups and table-miss rules, and
// checks after every step with Check. The sequence must see both states
// and at least two transitions.
func RunRandom(t *testing.T, tg Target, seed uint64) {
	g := NewGen(t, seed, 12, 6, 12)
	tid := uint8(seed % 2)
	var breakers []rule.FlowMod
	served, broken := 0, 0
	for step := range 500 {
		switch x := g.Rng.IntN(100); {
		case x < 50 || step < 100:
			m, prio := g.Rule(t)
			tg.FlowMod(t, &rule.FlowMod{Command: rule.FlowAdd, TableID: tid, Priority: prio, Cookie: uint64(step), Match: m})
		case x < 55:
			m, prio := g.Breaker(t)
			fm := rule.FlowMod{Command: rule.FlowAdd, TableID: tid, Priority: prio, Match: m}
			tg.FlowMod(t, &fm)
			breakers = append(breakers, fm)
		case x < 70 && len(breakers) > 0:
			i := g.Rng.IntN(len(breakers))
			fm := breakers[i]
			breakers = append(breakers[:i], breakers[i+1:]...)
			fm.Command, fm.Instructions = rule.FlowDeleteStrict, rule.Instructions{}
			tg.FlowMod(t, &fm)
		case x < 85:
			// Strict delete of a random rule.
			var victim *flow.Rule
			tg.Inspect(tid, func(ft *flow.Table, _ *lpmshape.Shape) {
				n := 0
				ft.Rules(func(_ flow.RuleID, r *flow.Rule) bool {
					if n++; g.Rng.IntN(n) == 0 {
						rc := *r
						victim = &rc
					}
					return true
				})
			})
			if victim != nil {
				tg.FlowMod(t, &rule.FlowMod{Command: rule.FlowDeleteStrict, TableID: tid, Priority: victim.Priority, Match: victim.Match})
			}
		case x < 88:
			// Non-strict delete of everything under a /12 of a prefix.
			p := g.V4[g.Rng.IntN(len(g.V4))]
			f := Form{Port: WildPort, Pfx: netip.PrefixFrom(p.Addr(), min(12, p.Bits())).Masked()}
			tg.FlowMod(t, &rule.FlowMod{Command: rule.FlowDelete, TableID: tid, Match: RouteMatch(t, f)})
		case x < 92:
			m, _ := g.Rule(t)
			tg.FlowMod(t, &rule.FlowMod{Command: rule.FlowModify, TableID: tid, Match: m, Instructions: Out(3)})
		case x < 96:
			// Rules with a hard timeout, expired at once.
			for range 1 + g.Rng.IntN(5) {
				m, prio := g.Rule(t)
				tg.FlowMod(t, &rule.FlowMod{Command: rule.FlowAdd, TableID: tid, Priority: prio, HardTimeout: 1, Match: m})
			}
			if ok := Check(t, tg, tid, g.Forms, g.Keys(t, 50), step); ok {
				served++
			}
			tg.Expire(time.Now().Add(2 * time.Second))
		default:
			// Delete by cookie: rules of one earlier step.
			tg.FlowMod(t, &rule.FlowMod{Command: rule.FlowDelete, TableID: rule.TableAll, Cookie: uint64(g.Rng.IntN(step + 1)), CookieMask: ^uint64(0)})
		}
		if Check(t, tg, tid, g.Forms, g.Keys(t, 100), step) {
			served++
		} else {
			broken++
		}
	}
	// Remove every breaker: the shape must come back.
	for _, fm := range breakers {
		fm.Command, fm.Instructions = rule.FlowDeleteStrict, rule.Instructions{}
		tg.FlowMod(t, &fm)
	}
	Check(t, tg, tid, g.Forms, g.Keys(t, 1000), -1)
	var info lpmshape.Info
	tg.Inspect(tid, func(_ *flow.Table, sh *lpmshape.Shape) { info = sh.Info() })
	t.Logf("seed %d: %d steps served by LPM, %d by the classifier; end: %+v", seed, served, broken, info)
	if served < 100 || broken < 10 || info.Transitions < 2 {
		t.Errorf("seed %d: the sequence did not exercise both states (%d served, %d not, %d transitions)", seed, served, broken, info.Transitions)
	}
}

// FuzzSeeds are seed inputs of RunOps.
func FuzzSeeds() [][]byte {
	rng := rand.New(rand.NewPCG(5, 5))
	var out [][]byte
	for range 24 {
		b := make([]byte, 3*(8+rng.IntN(40)))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		out = append(out, b)
	}
	return out
}

// OpKeys are lookup keys covering RunOps's small prefix space, on ports
// 1..4, of both families and ARP.
func OpKeys() []flow.Key {
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
	return keys
}

// RunOps runs flow changes over a small prefix space (so that nesting,
// in_port groups and priority conflicts are frequent) on table 0 of tg
// and checks after each with Check against keys (OpKeys). Each op is 3
// bytes: command and form, prefix, priority.
func RunOps(t *testing.T, tg Target, ops []byte, keys []flow.Key) {
	lens := [8]int{0, 1, 2, 3, 8, 16, 24, 32}
	forms := map[flow.Match]Form{}
	for i := 0; i+3 <= len(ops); i += 3 {
		b0, b1, b2 := ops[i], ops[i+1], ops[i+2]
		fm := Form{Port: WildPort}
		if p := b0 >> 2 & 3; p != 0 {
			fm.Port = uint64(p)
		}
		l := lens[b1&7]
		var m flow.Match
		switch b0 >> 4 & 3 {
		case 0:
			fm.AnyFam = true
		case 3:
			var mk flow.Match
			mk.SetEthType(flow.EthTypeIPv4)
			_ = mk.SetL4Dst(80, 0xffff)
			mk.SetIPProto(6)
			m, fm = mk, Form{Foreign: true}
		case 1:
			fm.Pfx = netip.PrefixFrom(netip.AddrFrom4([4]byte{b1 &^ 7}), l).Masked()
		case 2:
			var a [16]byte
			a[0] = b1 &^ 7
			fm.Pfx = netip.PrefixFrom(netip.AddrFrom16(a), l*4).Masked()
		}
		if !fm.Foreign {
			m = RouteMatch(t, fm)
		}
		forms[m] = fm
		prio := uint16(b2 & 0x3f)
		if b2&0x80 != 0 && !fm.AnyFam && !fm.Foreign {
			prio = uint16(10 + 4*fm.Pfx.Bits() + int(b2&3))
		}
		cmd := rule.FlowAdd
		if b0&3 == 3 {
			cmd = rule.FlowDeleteStrict
		}
		tg.FlowMod(t, &rule.FlowMod{Command: cmd, Priority: prio, Match: m})
		Check(t, tg, 0, forms, keys, i/3)
	}
}
