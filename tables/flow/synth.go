package flow

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// SynthSpec describes a synthetic rule set in the shape of the GSwitch
// paper's evaluation (§6), written N,C[,F,Cm,f]:
//
//   - f fields (1..12, default 12): the first f fields of the OpenFlow 1.0
//     12-tuple in this fixed order: in_port, eth_src, eth_dst, eth_type,
//     vlan_vid, vlan_pcp, ipv4_src, ipv4_dst, ip_proto, ip_dscp, tcp_src,
//     tcp_dst.
//   - A class is a set of matched fields among those f (at least one) with,
//     for ipv4_src and ipv4_dst, a prefix length from 8 to 32; every other
//     field is matched exactly (vlan_vid on all 13 bits, OFPVID_PRESENT set).
//     Prerequisites are part of the class: a class with an IPv4 field,
//     ip_proto, ip_dscp or a TCP port also matches eth_type=0x0800, one with
//     a TCP port also ip_proto=6, one with vlan_pcp also vlan_vid. Distinct
//     classes have distinct masks.
//   - C classes (1 <= C <= N, and no more than the f fields allow), of which
//     F (default 0) are full: they match all f fields (full classes differ in
//     their prefix lengths, so F is at most 625 with both IPv4 fields, 25
//     with one, 1 with none). The other C-F classes are drawn at random.
//   - N rules, rule i in class i mod C (after a random shuffle of the
//     classes): every class holds N/C rules, give or take one.
//   - Cm overlapping classes (1..C, default 1): rules come in groups of Cm
//     consecutive rules (the last group may be shorter), all cut from one
//     random base header, so a packet built from a group's base header
//     matches the group's rules, in Cm different classes.
//   - Base headers: random in_port (32 bits), MACs, VLAN id (12 bits) and
//     pcp, IPv4 addresses, DSCP and TCP ports; eth_type 0x0800, ip_proto 6.
//     Priorities are uniform random 16-bit values; no two rules have the
//     same match and priority (a colliding priority is drawn again). A
//     class with few possible values (eth_type alone, a vlan_pcp, a short
//     prefix) repeats matches at different priorities, as OpenFlow allows.
type SynthSpec struct {
	N, C, F, Cm, Fields int
}

// synthFields is the OpenFlow 1.0 12-tuple in the order SynthSpec uses.
var synthFields = []Field{
	FieldInPort, FieldEthSrc, FieldEthDst, FieldEthType, FieldVlanVID, FieldVlanPCP,
	FieldIPv4Src, FieldIPv4Dst, FieldIPProto, FieldIPDSCP, FieldTCPSrc, FieldTCPDst,
}

// Indices into synthFields.
const (
	sfEthType = 3
	sfVID     = 4
	sfPCP     = 5
	sfIPSrc   = 6
	sfIPDst   = 7
	sfProto   = 8
	sfTCPSrc  = 10
	sfTCPDst  = 11

	synthMinPrefix = 8
	synthPrefixes  = 32 - synthMinPrefix + 1
	maxSynthRules  = maxMaxEntries
)

// closeSet adds the prerequisites of a set of synthFields (a bit set).
func closeSet(s uint32) uint32 {
	if s&(1<<sfTCPSrc|1<<sfTCPDst) != 0 {
		s |= 1 << sfProto
	}
	if s>>sfIPSrc != 0 {
		s |= 1 << sfEthType
	}
	if s&(1<<sfPCP) != 0 {
		s |= 1 << sfVID
	}
	return s
}

// prefixCombos returns how many prefix-length choices a field set has.
func prefixCombos(s uint32) int {
	n := 1
	for _, b := range []int{sfIPSrc, sfIPDst} {
		if s&(1<<b) != 0 {
			n *= synthPrefixes
		}
	}
	return n
}

// synthCaps holds synthCapacity's answers, by f.
var synthCaps = func() (t [13][2]int) {
	for f := 1; f <= 12; f++ {
		t[f][0], t[f][1] = countClasses(f)
	}
	return t
}()

// synthCapacity returns the number of full and non-full classes f fields allow.
func synthCapacity(f int) (full, nonFull int) {
	if f < 1 || f > 12 {
		return 0, 0
	}
	return synthCaps[f][0], synthCaps[f][1]
}

func countClasses(f int) (full, nonFull int) {
	all := uint32(1)<<f - 1
	for s := uint32(1); s <= all; s++ {
		if closeSet(s) != s {
			continue
		}
		if s == all {
			full = prefixCombos(s)
		} else {
			nonFull += prefixCombos(s)
		}
	}
	return full, nonFull
}

// ParseSynthetic reads "N,C[,F,Cm,f]" (trailing values may be left out) and
// validates it.
func ParseSynthetic(spec string) (SynthSpec, error) {
	parts := strings.Split(spec, ",")
	if len(parts) < 2 || len(parts) > 5 {
		return SynthSpec{}, fmt.Errorf("synthetic spec %q: want N,C[,F,Cm,f]", spec)
	}
	vals := []int{0, 0, 0, 1, len(synthFields)}
	names := []string{"N", "C", "F", "Cm", "f"}
	for i, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 0 || v > maxSynthRules {
			return SynthSpec{}, fmt.Errorf("synthetic spec %q: %s=%q is not a number in 0..%d", spec, names[i], p, maxSynthRules)
		}
		vals[i] = v
	}
	s := SynthSpec{N: vals[0], C: vals[1], F: vals[2], Cm: vals[3], Fields: vals[4]}
	return s, s.Validate()
}

// Validate checks the spec's numbers against each other.
func (s SynthSpec) Validate() error {
	switch {
	case s.N < 1 || s.N > maxSynthRules:
		return fmt.Errorf("synthetic: N=%d rules, want 1..%d", s.N, maxSynthRules)
	case s.Fields < 1 || s.Fields > len(synthFields):
		return fmt.Errorf("synthetic: f=%d fields, want 1..%d", s.Fields, len(synthFields))
	case s.C < 1 || s.C > s.N:
		return fmt.Errorf("synthetic: C=%d classes, want 1..N (N=%d)", s.C, s.N)
	case s.F < 0 || s.F > s.C:
		return fmt.Errorf("synthetic: F=%d full classes, want 0..C (C=%d)", s.F, s.C)
	case s.Cm < 1 || s.Cm > s.C:
		return fmt.Errorf("synthetic: Cm=%d overlapping classes, want 1..C (C=%d)", s.Cm, s.C)
	}
	full, nonFull := synthCapacity(s.Fields)
	if s.F > full {
		return fmt.Errorf("synthetic: F=%d full classes, but %d fields allow %d", s.F, s.Fields, full)
	}
	if s.C-s.F > nonFull {
		return fmt.Errorf("synthetic: C=%d classes with F=%d full: %d fields allow %d classes that are not full (%d in all)", s.C, s.F, s.Fields, nonFull, full+nonFull)
	}
	return nil
}

// String describes the spec in words.
func (s SynthSpec) String() string {
	names := make([]string, s.Fields)
	for i := range names {
		names[i] = synthFields[i].String()
	}
	return fmt.Sprintf("%d rules in %d classes (%d full), %d overlapping, %d fields: %s", s.N, s.C, s.F, s.Cm, s.Fields, strings.Join(names, ","))
}

// synthClass is a class: its field set and prefix lengths.
type synthClass struct {
	set            uint32
	srcLen, dstLen int
}

// mask returns the class's mask over a base header.
func (c synthClass) cut(base *Key) Match {
	var m Match
	for i, f := range synthFields {
		if c.set&(1<<i) == 0 {
			continue
		}
		fi := fieldTab[f]
		mk := ones(fi.Bits)
		switch i {
		case sfIPSrc:
			mk = prefixOnes(32, c.srcLen)
		case sfIPDst:
			mk = prefixOnes(32, c.dstLen)
		}
		fi.put(&m.Mask, mk)
		fi.put(&m.Value, fi.get(base).and(mk))
	}
	return m
}

// classes draws the spec's classes: F full ones, then C-F others.
func (s SynthSpec) classes(rng *rand.Rand) []synthClass {
	all := uint32(1)<<s.Fields - 1
	seen := map[synthClass]bool{}
	var out []synthClass
	add := func(c synthClass) {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	randLens := func(c *synthClass) {
		if c.set&(1<<sfIPSrc) != 0 {
			c.srcLen = synthMinPrefix + rng.IntN(synthPrefixes)
		}
		if c.set&(1<<sfIPDst) != 0 {
			c.dstLen = synthMinPrefix + rng.IntN(synthPrefixes)
		}
	}
	full, nonFull := synthCapacity(s.Fields)
	for len(out) < s.F {
		c := synthClass{set: all}
		if 2*s.F > full {
			out = append(out, s.enumerate(all, all)...)
			rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
			out = out[:s.F]
			break
		}
		randLens(&c)
		add(c)
	}
	want := s.C - s.F
	if 2*want > nonFull {
		pool := s.enumerate(0, all)
		rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
		return append(out, pool[:want]...)
	}
	for n := 0; n < want; {
		c := synthClass{set: closeSet(rng.Uint32() & all)}
		if c.set == 0 || c.set == all {
			continue
		}
		randLens(&c)
		if !seen[c] {
			add(c)
			n++
		}
	}
	return out
}

// enumerate lists every class with field set only (if only != 0) or every
// closed set other than all.
func (s SynthSpec) enumerate(only, all uint32) []synthClass {
	var out []synthClass
	for set := uint32(1); set <= all; set++ {
		if closeSet(set) != set || (only != 0 && set != only) || (only == 0 && set == all) {
			continue
		}
		srcs, dsts := []int{0}, []int{0}
		if set&(1<<sfIPSrc) != 0 {
			srcs = lensRange()
		}
		if set&(1<<sfIPDst) != 0 {
			dsts = lensRange()
		}
		for _, a := range srcs {
			for _, b := range dsts {
				out = append(out, synthClass{set: set, srcLen: a, dstLen: b})
			}
		}
	}
	return out
}

func lensRange() []int {
	var l []int
	for n := synthMinPrefix; n <= 32; n++ {
		l = append(l, n)
	}
	return l
}

// synthBase returns a random base header.
func synthBase(rng *rand.Rand) Key {
	var k Key
	_ = k.SetUint(FieldInPort, uint64(rng.Uint32()))
	_ = k.SetUint(FieldEthSrc, rng.Uint64()>>16)
	_ = k.SetUint(FieldEthDst, rng.Uint64()>>16)
	_ = k.SetUint(FieldEthType, EthTypeIPv4)
	_ = k.SetUint(FieldVlanVID, VIDPresent|uint64(rng.IntN(4096)))
	_ = k.SetUint(FieldVlanPCP, uint64(rng.IntN(8)))
	_ = k.SetUint(FieldIPv4Src, uint64(rng.Uint32()))
	_ = k.SetUint(FieldIPv4Dst, uint64(rng.Uint32()))
	_ = k.SetUint(FieldIPProto, IPProtoTCP)
	_ = k.SetUint(FieldIPDSCP, uint64(rng.IntN(64)))
	_ = k.SetUint(FieldTCPSrc, uint64(rng.IntN(65536)))
	_ = k.SetUint(FieldTCPDst, uint64(rng.IntN(65536)))
	return k
}

// Generate returns the spec's N rules (see SynthSpec), the same for the same
// seed. An invalid spec gives no rules.
func (s SynthSpec) Generate(seed uint64) []Rule {
	if s.Validate() != nil {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x5e17e71c))
	cls := s.classes(rng)
	rng.Shuffle(len(cls), func(i, j int) { cls[i], cls[j] = cls[j], cls[i] })
	used := map[uint64]bool{} // hash of (match, priority)
	rules := make([]Rule, 0, s.N)
	var base Key
	for i := 0; i < s.N; i++ {
		if i%s.Cm == 0 {
			base = synthBase(rng)
		}
		m := cls[i%len(cls)].cut(&base)
		mh := matchHash(&m)
		prio, ok := uint16(rng.Uint32()), false
		for try := 0; try < 65536 && !ok; try++ {
			if try >= 8 {
				prio++
			} else if try > 0 {
				prio = uint16(rng.Uint32())
			}
			ok = !used[mh^uint64(prio)*0x9e3779b97f4a7c15]
		}
		if !ok {
			continue // 65536 rules with one match: no priority left
		}
		used[mh^uint64(prio)*0x9e3779b97f4a7c15] = true
		rules = append(rules, Rule{Match: m, Priority: prio, Cookie: uint64(i), Action: uint32(i)})
	}
	return rules
}

// SynthTraffic returns n packet keys for rules made by s.Generate: each from
// a random group of Cm consecutive rules, the group's fields set so that the
// packet matches all of them, every other bit of the 12-tuple random (other
// key words 0).
func SynthTraffic(s SynthSpec, rules []Rule, n int, seed uint64) []Key {
	rng := rand.New(rand.NewPCG(seed, 0x7a4f1c))
	keys := make([]Key, max(n, 0))
	cm := max(s.Cm, 1)
	groups := (len(rules) + cm - 1) / cm
	for i := range keys {
		k := synthBase(rng)
		if groups > 0 {
			g := rng.IntN(groups)
			for j := g * cm; j < min((g+1)*cm, len(rules)); j++ {
				m := &rules[j].Match
				for w := range k {
					k[w] = k[w]&^m.Mask[w] | m.Value[w]
				}
			}
		}
		keys[i] = k
	}
	return keys
}

// matchHash is a deterministic 64-bit hash of a match.
func matchHash(m *Match) uint64 {
	h := uint64(0x243f6a8885a308d3)
	for w := range m.Mask {
		h = (h ^ uint64(m.Value[w])<<32 ^ uint64(m.Mask[w])) * 0x9e3779b97f4a7c15
		h ^= h >> 29
	}
	return h
}
