package lpmshape_test

import (
	"encoding/binary"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpmshape"
	"github.com/gswitch/gswitch/tables/lpmshape/shapetest"
	"github.com/gswitch/gswitch/tables/rule"
)

const wildPort = shapetest.WildPort

// TestShapeRandomFlowMods runs random flow change sequences on tables of
// real BGP prefixes (shapetest.RunRandom) and checks after every step the
// shape against brute force and, while LPM serves the table, every lookup
// against the flow table's.
func TestShapeRandomFlowMods(t *testing.T) {
	for seed := uint64(1); seed <= 2; seed++ {
		shapetest.RunRandom(t, newHarness(t, 2), seed)
	}
}

// TestFormOf checks the form reader against matches built from forms,
// and rejects the matches that are not LPM-shaped.
func TestFormOf(t *testing.T) {
	good := []shapetest.Form{
		{AnyFam: true, Port: wildPort},
		{AnyFam: true, Port: 7},
		{Port: wildPort, Pfx: netip.MustParsePrefix("0.0.0.0/0")},
		{Port: wildPort, Pfx: netip.MustParsePrefix("10.1.0.0/16")},
		{Port: 3, Pfx: netip.MustParsePrefix("10.1.2.3/32")},
		{Port: wildPort, Pfx: netip.MustParsePrefix("::/0")},
		{Port: wildPort, Pfx: netip.MustParsePrefix("2001:db8::/32")},
		{Port: 9, Pfx: netip.MustParsePrefix("2001:db8:0:1::/64")},
		{Port: wildPort, Pfx: netip.MustParsePrefix("2001:db8::1/128")},
		{Port: wildPort, Pfx: netip.MustParsePrefix("2001:db8::/65")},
	}
	for _, want := range good {
		m := shapetest.RouteMatch(t, want)
		anyFam, port, pfx, ok := lpmshape.FormOf(&m)
		if !ok || anyFam != want.AnyFam || port != want.Port || !want.AnyFam && pfx != want.Pfx {
			t.Errorf("%s: form %v %d %v, %v; want %+v", m.String(), anyFam, port, pfx, ok, want)
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
		if anyFam, port, pfx, ok := lpmshape.FormOf(&m); ok {
			t.Errorf("%s: read as LPM form %v %d %v", s, anyFam, port, pfx)
		}
	}
}

// TestShapeCases checks the verdict on small tables, one per way that
// rules of two in_port groups, families and the table-miss interact.
func TestShapeCases(t *testing.T) {
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
		h := newHarness(t, 1)
		for _, r := range c.rules {
			m, err := flow.ParseMatch(r.match)
			if err != nil {
				t.Fatal(err)
			}
			h.FlowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: r.prio, Match: m})
		}
		sh := h.tables[0].sh
		if got := sh.Serves(); got != c.shaped || sh.Search(flow.Tuple) != map[bool]string{true: "lpm", false: "tuple"}[c.shaped] {
			t.Errorf("%s: served by LPM = %v (%s), want %v (%+v)", c.name, got, sh.Search(flow.Tuple), c.shaped, sh.Info())
		}
		// Deleting every rule leaves no state behind.
		h.FlowMod(t, &rule.FlowMod{Command: rule.FlowDelete, TableID: rule.TableAll})
		if in := sh.Info(); in != (lpmshape.Info{Transitions: in.Transitions}) {
			t.Errorf("%s: after deleting every rule: %+v", c.name, in)
		}
	}
}

// FuzzShape runs flow change sequences over a small prefix space (so
// that nesting, in_port groups and priority conflicts are frequent) and
// checks after each the shape against brute force and the LPM path's rule
// against the flow table's for keys covering that space
// (shapetest.RunOps). Each op is 3 bytes: command and form, prefix,
// priority.
func FuzzShape(f *testing.F) {
	for _, s := range shapetest.FuzzSeeds() {
		f.Add(s)
	}
	keys := shapetest.OpKeys()
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 3*200 {
			return
		}
		shapetest.RunOps(t, newHarness(t, 1), ops, keys)
	})
}

// TestIDBase checks that a Shape's images are at the id base its caller
// gives (an allocator of engine table ids hands bases out), and at
// DefaultIDBase without one: flow table t's group slot s at
// IDBase | t<<16 | s.
func TestIDBase(t *testing.T) {
	for _, base := range []uint32{0, 1 << 28} {
		img := newImages()
		sh := lpmshape.New(lpmshape.Config{Table: 3, IDBase: base, Images: img, Logger: slog.New(slog.DiscardHandler)})
		ft, err := flow.NewTable(flow.Config{Algo: flow.Tuple})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"10.0.0.0/8", "10.1.0.0/16"} {
			pfx := netip.MustParsePrefix(p)
			m := shapetest.RouteMatch(t, shapetest.Form{Port: wildPort, Pfx: pfx})
			r := flow.Rule{Match: m, Priority: uint16(pfx.Bits())}
			id, _, err := ft.Add(r, 0)
			if err != nil {
				t.Fatal(err)
			}
			sh.Add(id, &r)
		}
		sh.Sync()
		want := base
		if want == 0 {
			want = lpmshape.DefaultIDBase
		}
		want |= 3 << 16
		if _, ok := img.ims[want]; !ok || len(img.ims) != 1 || !sh.Serves() {
			t.Errorf("base %#x: images %v, want one at %#x (serving %v)", base, keysOf(img), want, sh.Serves())
		}
		var k flow.Key
		_ = k.SetUint(flow.FieldEthType, flow.EthTypeIPv4)
		_ = k.SetUint(flow.FieldIPv4Dst, uint64(binary.BigEndian.Uint32([]byte{10, 1, 2, 3})))
		res := make([]flow.RuleID, 1)
		if err := sh.Lookup([]flow.Key{k}, res); err != nil || res[0] != 1 {
			t.Errorf("base %#x: 10.1.2.3 -> rule %d (%v), want 1", base, res[0], err)
		}
	}
}

func keysOf(m *images) []uint32 {
	var out []uint32
	for id := range m.ims {
		out = append(out, id)
	}
	return out
}

// FuzzFormOf builds matches from in_port, eth_type, ip_dst and another
// field with arbitrary values and masks, and checks the form reader: a
// valid match is read as an LPM form exactly when it is one (in_port exact
// or absent, eth_type IPv4/IPv6 or absent, a prefix mask on the family's
// ip_dst, nothing else), and then the form's own match is the match.
func FuzzFormOf(f *testing.F) {
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
			for l < 128 && (l < 64 && hi>>(63-l)&1 == 1 || l >= 64 && lo>>(127-l)&1 == 1) {
				l++
			}
			ph, pl := shapetest.PrefixMask(l)
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
		anyFam, fport, pfx, ok := lpmshape.FormOf(&m)
		if ok != want {
			t.Fatalf("%s: read as LPM form %v, want %v", m.String(), ok, want)
		}
		if !ok {
			return
		}
		rf := shapetest.Form{AnyFam: anyFam, Port: fport, Pfx: pfx}
		if back := shapetest.RouteMatch(t, rf); back != m {
			t.Fatalf("%s: form %+v gives back %s", m.String(), rf, back.String())
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
