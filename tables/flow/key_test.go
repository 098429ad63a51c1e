package flow

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestFieldTable checks the field table against the key layout: every
// OpenFlow 1.3 OXM basic field is there with its OXM id, parts cover the
// field's width, and fields overlap only where their prerequisites exclude
// each other.
func TestFieldTable(t *testing.T) {
	if len(fieldList) != 41 {
		t.Fatalf("%d fields, want OXM ids 0-39 and 42", len(fieldList))
	}
	for id := 0; id < maxField; id++ {
		fi := Field(id).Info()
		if (fi == nil) != (id == 40 || id == 41) {
			t.Fatalf("OXM id %d: info %v", id, fi)
		}
		if fi != nil {
			if f, ok := FieldByName(fi.Name); !ok || f != Field(id) || Field(id).String() != fi.Name {
				t.Errorf("field %d: name %q does not map back", id, fi.Name)
			}
		}
	}
	// which pairs may share bits: they must have conflicting prerequisites
	shared := map[[2]Field]bool{}
	for _, a := range allFields {
		for _, b := range allFields {
			if a >= b {
				continue
			}
			for w := range liveBits {
				if fieldBits[a][w]&fieldBits[b][w] != 0 {
					shared[[2]Field{a, b}] = true
				}
			}
		}
	}
	for pair := range shared {
		var m Match
		for _, f := range pair {
			setWithPrereqs(t, &m, f)
		}
		if m.CheckField(pair[0]) == nil && m.CheckField(pair[1]) == nil {
			t.Errorf("%v and %v share bits but a match can hold both", pair[0], pair[1])
		}
	}
	if len(shared) < 20 {
		t.Errorf("only %d pairs of fields share bits", len(shared))
	}
	// a field with its prerequisites is valid on its own
	for _, f := range allFields {
		var m Match
		setWithPrereqs(t, &m, f)
		if err := m.Validate(); err != nil {
			t.Errorf("%v with its prerequisites: %v", f, err)
		}
		if !m.Has(f) {
			t.Errorf("%v: Has is false after setting it", f)
		}
	}
}

// setWithPrereqs sets f to an all-ones value (exact), after its
// prerequisites (first allowed value).
func setWithPrereqs(t *testing.T, m *Match, f Field) {
	t.Helper()
	for _, pr := range f.Info().Prereqs {
		setWithPrereqs(t, m, pr.Field)
		switch {
		case pr.Bits != 0:
			v, mk := m.GetUint(pr.Field)
			_ = m.SetFieldUint(pr.Field, v|pr.Bits, mk|pr.Bits)
		case len(pr.Values) > 0:
			if err := m.SetExact(pr.Field, pr.Values[0]); err != nil {
				t.Fatal(err)
			}
		}
	}
	fi := f.Info()
	if err := m.SetField(f, ones(fi.Bits).toBytes(fi.bytes), nil); err != nil {
		t.Fatal(err)
	}
}

func TestSetFieldErrors(t *testing.T) {
	var m Match
	for _, tc := range []struct {
		f           Field
		value, mask []byte
		want        error
	}{
		{Field(40), []byte{1}, nil, ErrBadField},
		{FieldIPv4Src, []byte{1, 2, 3}, nil, ErrBadLength},
		{FieldIPv4Src, []byte{1, 2, 3, 4}, []byte{255}, ErrBadLength},
		{FieldVlanVID, []byte{0x20, 0}, nil, ErrBadValue},            // 13-bit field
		{FieldVlanVID, []byte{0, 1}, []byte{0xff, 0xff}, ErrBadMask}, // mask beyond 13 bits
		{FieldIPv4Src, []byte{10, 0, 0, 1}, []byte{255, 0, 0, 0}, ErrBadWildcards},
		{FieldMPLSBOS, []byte{2}, nil, ErrBadValue},
	} {
		before := m
		err := m.SetField(tc.f, tc.value, tc.mask)
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrBadMatch) {
			t.Errorf("SetField(%v, %x, %x) = %v, want %v", tc.f, tc.value, tc.mask, err, tc.want)
		}
		if m != before {
			t.Errorf("failed SetField changed the match")
		}
	}
	if err := m.SetIPv4Src(0x0a000001, 8); !errors.Is(err, ErrBadWildcards) {
		t.Errorf("host bits: %v", err)
	}
	if err := m.SetIPv4Src(0x0a000000, 33); !errors.Is(err, ErrBadMask) {
		t.Errorf("prefix 33: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		match string
		want  error
		field string
	}{
		{"eth_type=0x800,ip_proto=6,tcp_dst=80", nil, ""},
		{"eth_type=0x86dd,ip_proto=17,udp_src=53", nil, ""},
		{"tcp_dst=80", ErrBadPrereq, "tcp_dst"},
		{"eth_type=0x800,tcp_dst=80", ErrBadPrereq, "tcp_dst"},
		{"ip_proto=6,tcp_dst=80", ErrBadPrereq, "ip_proto"},
		{"eth_type=0x800,ip_proto=17,tcp_dst=80", ErrBadPrereq, "tcp_dst"}, // (the bits would pass as udp_dst's)
		{"eth_type=0x800,ip_proto=1,icmpv4_type=8", nil, ""},
		{"eth_type=0x800,ip_proto=1,tcp_dst=80", ErrBadPrereq, "tcp_dst"},
		{"eth_type=0x806,arp_op=1,arp_spa=10.0.0.0/8", nil, ""},
		{"eth_type=0x800,arp_op=1", ErrBadPrereq, "arp_op"},
		{"eth_type=0x86dd,ipv4_src=1.2.3.4", ErrBadPrereq, "ipv4_src"},
		{"eth_type=0x800,ipv6_flabel=5", ErrBadPrereq, "ipv6_flabel"},
		{"eth_type=0x86dd,ip_proto=58,icmpv6_type=135,ipv6_nd_target=::1,ipv6_nd_sll=01:02:03:04:05:06", nil, ""},
		{"eth_type=0x86dd,ip_proto=58,icmpv6_type=136,ipv6_nd_sll=01:02:03:04:05:06", ErrBadPrereq, "ipv6_nd_sll"},
		{"eth_type=0x86dd,ip_proto=58,icmpv6_type=1,ipv6_nd_target=::1", ErrBadPrereq, "ipv6_nd_target"},
		{"vlan_vid=0x1005,vlan_pcp=3", nil, ""},
		{"vlan_vid=0x1000/0x1000,vlan_pcp=3", nil, ""},
		{"vlan_vid=5,vlan_pcp=3", ErrBadPrereq, "vlan_pcp"},
		{"vlan_pcp=3", ErrBadPrereq, "vlan_pcp"},
		{"in_phy_port=3", ErrBadPrereq, "in_phy_port"},
		{"in_port=1,in_phy_port=3", nil, ""},
		{"eth_type=0x8847,mpls_label=5,mpls_bos=1", nil, ""},
		{"eth_type=0x8848,mpls_tc=5", nil, ""},
		{"eth_type=0x88e7,pbb_isid=0x123456", nil, ""},
		{"eth_type=0x86dd,ipv6_exthdr=0x100/0x100", nil, ""},
		{"eth_type=0x800,ip_proto=6,tcp_flags=0x2/0x2", nil, ""},
		{"eth_type=0x800,ip_proto=17,tcp_flags=0x2", ErrBadPrereq, "tcp_flags"},
		{"eth_type=0x800/0xff00,ip_proto=6", ErrBadPrereq, "ip_proto"}, // a prerequisite must be exact
		{"metadata=0x1/0x1,tunnel_id=7,eth_dst=01:00:00:00:00:00/01:00:00:00:00:00", nil, ""},
	} {
		m, err := ParseMatch(tc.match)
		if err != nil {
			t.Fatalf("%q: %v", tc.match, err)
		}
		err = validateNamed(&m, tc.match)
		if !errors.Is(err, tc.want) || (tc.want != nil && !errors.Is(err, ErrBadMatch)) {
			t.Errorf("%q: Validate = %v, want %v", tc.match, err, tc.want)
			continue
		}
		var me *MatchError
		if tc.want != nil && (!errors.As(err, &me) || me.Field.String() != tc.field) {
			t.Errorf("%q: error %v names the wrong field, want %s", tc.match, err, tc.field)
		}
	}
	var m Match
	m.Value[9] = 1 // value outside the mask
	if err := m.Validate(); !errors.Is(err, ErrBadWildcards) {
		t.Errorf("value outside mask: %v", err)
	}
	m = Match{}
	m.Mask[26] = 0 // no field lives nowhere: build one in a dead bit
	m.Mask[10] = 1 << 29
	if err := m.Validate(); !errors.Is(err, ErrBadField) {
		t.Errorf("mask where no field lives: %v", err)
	}
}

// validateNamed checks a parsed match as an OpenFlow decoder does: each
// named field's prerequisites, then the bits.
func validateNamed(m *Match, s string) error {
	for _, item := range strings.Split(s, ",") {
		name, _, _ := strings.Cut(item, "=")
		f, _ := FieldByName(name)
		if err := m.CheckField(f); err != nil {
			return err
		}
	}
	return m.Validate()
}

// TestStringRoundTrip checks that ParseMatch reads what String writes, for
// random valid matches of every family.
func TestStringRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	g := newRuleGen(rng, 40, 20)
	for i := 0; i < 2000; i++ {
		m := g.rule(nil).Match
		s := m.String()
		back, err := ParseMatch(s)
		if err != nil || back != m {
			t.Fatalf("%q: parsed back %q, %v", s, back.String(), err)
		}
	}
	for _, s := range []string{"any", "eth_type=0x800,ip_proto=6,ipv4_src=10.0.0.0/8,tcp_dst=80",
		"eth_type=0x800,ipv4_dst=10.0.1.0/255.0.255.0", "eth_dst=01:00:00:00:00:00/01:00:00:00:00:00",
		"eth_type=0x86dd,ipv6_src=2001:db8::/32", "eth_type=0x800,ip_proto=6,tcp_src=0x50/0xfff0"} {
		m, err := ParseMatch(s)
		if err != nil || m.String() != s {
			t.Errorf("%q: String %q, %v", s, m.String(), err)
		}
	}
	for _, bad := range []string{"frob=1", "in_port", "in_port=x", "in_port=1,in_port=2", "ipv4_src=1.2.3.4/40",
		"ipv4_src=::1", "eth_src=1:2:3", "vlan_pcp=8", "tcp_dst=70000", "ipv6_src=1.2.3.4", "eth_dst=01:02:03:04:05:0g"} {
		if _, err := ParseMatch(bad); !errors.Is(err, ErrBadMatch) {
			t.Errorf("ParseMatch(%q) = %v, want a bad-match error", bad, err)
		}
	}
	var m Match
	m.Mask[9], m.Value[9] = 0xff, 0x11 // bits without prerequisites still show
	if s := m.String(); !strings.Contains(s, "ip_ecn") || !strings.Contains(s, "ip_dscp") {
		t.Errorf("invalid match shows as %q", s)
	}
}

// TestCoversOverlaps checks the relations on random matches against random
// packets: a packet matching o matches every m that covers o; a packet built
// to match both shows overlap.
func TestCoversOverlaps(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	g := newRuleGen(rng, 10, 2)
	for i := 0; i < 5000; i++ {
		a, b := g.rule(nil).Match, g.rule(nil).Match
		if rng.IntN(3) == 0 {
			b = a
			b.Clear(allFields[rng.IntN(len(allFields))]) // b covers a
		}
		k := g.key(nil, false)
		for w := range k {
			k[w] = k[w]&^a.Mask[w] | a.Value[w]
		}
		if b.Covers(&a) && !b.Matches(&k) {
			t.Fatalf("%v covers %v but not packet %v", b.String(), a.String(), k)
		}
		if b.Covers(&a) != maskWithin(&b.Mask, &a.Mask) && b.Covers(&a) {
			t.Fatalf("covers with a wider mask")
		}
		// a packet in both, if they overlap
		var both Key
		for w := range both {
			both[w] = a.Value[w] | b.Value[w]
		}
		if got := a.Matches(&both) && b.Matches(&both); got != a.Overlaps(&b) || a.Overlaps(&b) != b.Overlaps(&a) {
			t.Fatalf("%v / %v: overlap %v, a packet in both %v", a.String(), b.String(), a.Overlaps(&b), got)
		}
	}
}

func TestKeyFields(t *testing.T) {
	var k Key
	mac := []byte{1, 2, 3, 4, 5, 6}
	if err := k.Set(FieldEthDst, mac); err != nil {
		t.Fatal(err)
	}
	if err := k.Set(FieldEthSrc, []byte{7, 8, 9, 10, 11, 12}); err != nil {
		t.Fatal(err)
	}
	if k[6] != 0x01020304 || k[7] != 0x0708090a || k[8] != 0x05060b0c {
		t.Fatalf("MACs laid out as %v", k.String())
	}
	_ = k.SetUint(FieldVlanVID, 0x1abc)
	_ = k.SetUint(FieldVlanPCP, 5)
	_ = k.SetUint(FieldIPv6ExtHdr, 0x1ff)
	if k[10] != 0x1abc<<16|5<<13|0x1ff {
		t.Fatalf("w10 = %#x", k[10])
	}
	_ = k.SetUint(FieldMPLSLabel, 0xfffff)
	_ = k.SetUint(FieldMPLSTC, 5)
	_ = k.SetUint(FieldMPLSBOS, 1)
	if k[11] != 0xfffff<<12|5<<9|1<<8 {
		t.Fatalf("w11 = %#x", k[11])
	}
	_ = k.Set(FieldARPSHA, []byte{1, 2, 3, 4, 5, 6})
	_ = k.Set(FieldARPTHA, []byte{7, 8, 9, 10, 11, 12})
	if k[13] != 0x01020304 || k[14] != 0x05060b0c || k[15] != 0x0708090a {
		t.Fatalf("ARP hardware addresses: %v", k.String())
	}
	if string(k.Get(FieldARPTHA)) != string([]byte{7, 8, 9, 10, 11, 12}) || k.GetUint(FieldVlanPCP) != 5 {
		t.Fatal("Get does not read back")
	}
	if err := k.SetUint(FieldIPv6Src, 1); err == nil {
		t.Fatal("SetUint on a 128-bit field")
	}
}

// TestAddErrorsChangeNothing checks that every failed Add (bad match, full
// table, overlap) returns its typed error and leaves the table and its
// image as they were.
func TestAddErrorsChangeNothing(t *testing.T) {
	for _, a := range algos {
		tab, err := NewTable(Config{Algo: a, MaxEntries: 3})
		if err != nil {
			t.Fatal(err)
		}
		add := func(s string, prio uint16, flags AddFlags) error {
			m, err := ParseMatch(s)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = tab.Add(Rule{Match: m, Priority: prio}, flags)
			return err
		}
		if err := add("eth_type=0x800,ipv4_src=10.0.0.0/8", 5, 0); err != nil {
			t.Fatal(err)
		}
		if err := add("eth_type=0x800,ip_proto=6,tcp_dst=80", 5, 0); err != nil {
			t.Fatal(err)
		}
		tab.Mirror().Sync()
		before := tab.Mirror().Image().Clone()
		for _, tc := range []struct {
			match string
			prio  uint16
			flags AddFlags
			want  error
		}{
			{"tcp_dst=80", 1, 0, ErrBadPrereq},
			{"eth_type=0x800,ipv4_src=10.1.0.0/16", 5, CheckOverlap, ErrOverlap},
			{"eth_type=0x800,ipv4_src=10.0.0.0/8", 5, CheckOverlap, ErrOverlap}, // identical counts
			{"eth_type=0x800,ipv4_src=10.0.0.0/8", 4, 0, nil},                   // third rule: fits
			{"eth_type=0x800,ipv4_src=11.0.0.0/8", 4, 0, ErrTableFull},
		} {
			err := add(tc.match, tc.prio, tc.flags)
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v: Add %s: %v, want %v", a, tc.match, err, tc.want)
			}
			if tc.want == ErrTableFull && !strings.Contains(err.Error(), "table full: 3 entries") {
				t.Errorf("table full error reads %q", err)
			}
			if tc.want == nil {
				tab.Mirror().Sync()
				before = tab.Mirror().Image().Clone()
				continue
			}
			if tab.Mirror().Pending() != 0 || tab.Mirror().Image().Diff(before) != "" {
				t.Fatalf("%v: failed Add %s changed the image", a, tc.match)
			}
		}
		if tab.Len() != 3 {
			t.Fatalf("Len %d", tab.Len())
		}
		// replacing at the same match and priority works even when full
		if id, rep, err := tab.Add(Rule{Match: mustParse(t, "eth_type=0x800,ipv4_src=10.0.0.0/8"), Priority: 5, Action: 9}, 0); err != nil || !rep || id != 0 {
			t.Fatalf("replace: %d %v %v", id, rep, err)
		}
		if r, _ := tab.Rule(0); r.Action != 9 {
			t.Fatalf("replace kept the old action")
		}
	}
	if _, err := NewTable(Config{MaxEntries: -1}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("negative MaxEntries: %v", err)
	}
	if _, err := NewTable(Config{Algo: 7}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("bad algo: %v", err)
	}
	for _, s := range []string{"linear", "Tuple", " bloom"} {
		if a, err := ParseAlgo(s); err != nil || !strings.EqualFold(a.String(), strings.TrimSpace(s)) {
			t.Errorf("ParseAlgo(%q) = %v, %v", s, a, err)
		}
	}
	if _, err := ParseAlgo("quantum"); err == nil {
		t.Error("ParseAlgo accepted quantum")
	}
}

func mustParse(t *testing.T, s string) Match {
	t.Helper()
	m, err := ParseMatch(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestSetUintAsSet: SetUint writes what Set writes with the value's
// big-endian bytes, and refuses what it refuses in the same words, for
// every field of at most 64 bits and values at and around its width; it
// allocates nothing when it sets.
func TestSetUintAsSet(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	for _, f := range Fields() {
		fi := f.Info()
		if fi.Bits > 64 {
			if err := new(Key).SetUint(f, 1); err == nil {
				t.Errorf("%v: SetUint of a field of %d bits: no error", f, fi.Bits)
			}
			continue
		}
		vals := []uint64{0, 1, ^uint64(0), rng.Uint64(), 1<<fi.Bits - 1, 1 << fi.Bits, 1<<(8*fi.bytes) - 1, 1 << (8 * fi.bytes)}
		for range 20 {
			vals = append(vals, rng.Uint64()&(1<<fi.Bits-1))
		}
		for _, v := range vals {
			var a, b Key
			for i := range a {
				a[i] = rng.Uint32()
			}
			b = a
			errA, errB := a.SetUint(f, v), b.Set(f, fi.uintBytes(v))
			if a != b || (errA == nil) != (errB == nil) || errA != nil && errA.Error() != errB.Error() {
				t.Fatalf("%v = %#x: SetUint gave %v, %v; Set %v, %v", f, v, a, errA, b, errB)
			}
		}
		var k Key
		if n := testing.AllocsPerRun(50, func() { _ = k.SetUint(f, 1) }); n != 0 {
			t.Errorf("%v: SetUint allocated %v times", f, n)
		}
	}
}
