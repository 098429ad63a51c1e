package flow

import (
	"math/rand/v2"
	"testing"
)

// This file generates random rule sets for the property tests: rules in a
// chosen number of classes (distinct masks) over every protocol family the
// key shares words between, with values drawn from small pools so that rules
// overlap, repeat matches at other priorities and tie on priority.

// tfield is one field of a class template: its mask.
type tfield struct {
	f    Field
	mask u128
}

// template is a class: a fixed set of fields and masks, and the values its
// prerequisite fields take.
type template struct {
	fields []tfield
	vals   map[Field]uint64
}

// base protocol families: their prerequisite fields (exact) and the optional
// fields a template may add.
type family struct {
	pre      []tfield
	preVals  map[Field]uint64
	optional []Field
}

var l2opt = []Field{FieldInPort, FieldMetadata, FieldEthDst, FieldEthSrc, FieldVlanVID, FieldTunnelID}

func exact(f Field) tfield { return tfield{f, ones(f.Bits())} }

var families = []family{
	{pre: []tfield{exact(FieldEthType), exact(FieldIPProto)}, preVals: map[Field]uint64{FieldEthType: EthTypeIPv4, FieldIPProto: IPProtoTCP},
		optional: append([]Field{FieldIPv4Src, FieldIPv4Dst, FieldTCPSrc, FieldTCPDst, FieldTCPFlags, FieldIPDSCP, FieldIPECN}, l2opt...)},
	{pre: []tfield{exact(FieldEthType), exact(FieldIPProto)}, preVals: map[Field]uint64{FieldEthType: EthTypeIPv4, FieldIPProto: IPProtoUDP},
		optional: append([]Field{FieldIPv4Src, FieldIPv4Dst, FieldUDPSrc, FieldUDPDst}, l2opt...)},
	{pre: []tfield{exact(FieldEthType), exact(FieldIPProto)}, preVals: map[Field]uint64{FieldEthType: EthTypeIPv4, FieldIPProto: IPProtoICMP},
		optional: []Field{FieldIPv4Src, FieldIPv4Dst, FieldICMPv4Type, FieldICMPv4Code, FieldInPort}},
	{pre: []tfield{exact(FieldEthType)}, preVals: map[Field]uint64{FieldEthType: EthTypeIPv4},
		optional: []Field{FieldIPv4Src, FieldIPv4Dst, FieldIPProto, FieldIPDSCP, FieldInPort}},
	{pre: []tfield{exact(FieldEthType)}, preVals: map[Field]uint64{FieldEthType: EthTypeARP},
		optional: []Field{FieldARPOp, FieldARPSPA, FieldARPTPA, FieldARPSHA, FieldARPTHA, FieldInPort}},
	{pre: []tfield{exact(FieldEthType), exact(FieldIPProto)}, preVals: map[Field]uint64{FieldEthType: EthTypeIPv6, FieldIPProto: IPProtoTCP},
		optional: []Field{FieldIPv6Src, FieldIPv6Dst, FieldIPv6FLabel, FieldIPv6ExtHdr, FieldTCPSrc, FieldTCPDst, FieldTCPFlags}},
	{pre: []tfield{exact(FieldEthType), exact(FieldIPProto), exact(FieldICMPv6Type)}, preVals: map[Field]uint64{FieldEthType: EthTypeIPv6, FieldIPProto: IPProtoICMPv6, FieldICMPv6Type: 135},
		optional: []Field{FieldIPv6Src, FieldIPv6NDTarget, FieldIPv6NDSLL, FieldICMPv6Code}},
	{pre: []tfield{exact(FieldEthType), exact(FieldIPProto), exact(FieldICMPv6Type)}, preVals: map[Field]uint64{FieldEthType: EthTypeIPv6, FieldIPProto: IPProtoICMPv6, FieldICMPv6Type: 136},
		optional: []Field{FieldIPv6Dst, FieldIPv6NDTarget, FieldIPv6NDTLL}},
	{pre: []tfield{exact(FieldEthType)}, preVals: map[Field]uint64{FieldEthType: EthTypeMPLS},
		optional: []Field{FieldMPLSLabel, FieldMPLSTC, FieldMPLSBOS, FieldInPort}},
	{pre: []tfield{exact(FieldEthType)}, preVals: map[Field]uint64{FieldEthType: EthTypePBB},
		optional: []Field{FieldPBBISID, FieldEthDst}},
	{pre: []tfield{exact(FieldVlanVID)}, preVals: map[Field]uint64{FieldVlanVID: VIDPresent | 7},
		optional: []Field{FieldVlanPCP, FieldInPort, FieldEthSrc}},
	{optional: append([]Field{FieldInPhyPort}, l2opt...)},
}

// randMask returns a mask for f: exact, a prefix, or random bits.
func randMask(rng *rand.Rand, f Field) u128 {
	w := f.Bits()
	switch rng.IntN(3) {
	case 0:
		return ones(w)
	case 1:
		return prefixOnes(w, 1+rng.IntN(w))
	default:
		m := u128{rng.Uint64(), rng.Uint64()}.and(ones(w))
		if m.isZero() {
			m = ones(w)
		}
		return m
	}
}

// genTemplates returns n templates with distinct masks (fewer if it cannot
// find that many).
func genTemplates(rng *rand.Rand, n int) []template {
	var out []template
	seen := map[Key]bool{}
	samplePools := newPools(rand.New(rand.NewPCG(7, 7)), 3)
	for tries := 0; len(out) < n && tries < 100*n; tries++ {
		fam := &families[rng.IntN(len(families))]
		tf := append([]tfield(nil), fam.pre...)
		for _, f := range fam.optional {
			if rng.IntN(3) == 0 {
				mk := randMask(rng, f)
				if f == FieldInPhyPort {
					tf = append(tf, exact(FieldInPort))
					mk = ones(32)
				}
				tf = append(tf, tfield{f, mk})
			}
		}
		t := template{fields: tf, vals: fam.preVals}
		if r := ruleFrom(rng, t, samplePools); r.Match.Validate() != nil {
			continue
		}
		var m Match
		for _, f := range t.fields {
			fieldTab[f.f].put(&m.Mask, f.mask)
		}
		if seen[m.Mask] {
			continue
		}
		seen[m.Mask] = true
		out = append(out, t)
	}
	return out
}

// pools holds a few values per field, so that rules collide and overlap.
type pools map[Field][]u128

func newPools(rng *rand.Rand, size int) pools {
	p := pools{}
	for _, f := range allFields {
		n := 2 + rng.IntN(size)
		for i := 0; i < n; i++ {
			p[f] = append(p[f], u128{rng.Uint64(), rng.Uint64()}.and(ones(f.Bits())))
		}
	}
	return p
}

// ruleFrom makes a rule of template t with values from the pools.
func ruleFrom(rng *rand.Rand, t template, pl pools) Rule {
	var r Rule
	fam := t.vals
	for _, tf := range t.fields {
		v := pl[tf.f][rng.IntN(len(pl[tf.f]))]
		if x, ok := fam[tf.f]; ok {
			v = u128{0, x}
		}
		fi := fieldTab[tf.f]
		fi.put(&r.Match.Value, v.and(tf.mask))
		fi.put(&r.Match.Mask, tf.mask)
	}
	r.Priority = uint16(rng.IntN(8)) // few priorities: ties and chains
	if rng.IntN(4) == 0 {
		r.Priority = uint16(rng.IntN(65536))
	}
	r.Cookie = uint64(rng.IntN(4))
	r.Action = rng.Uint32()
	return r
}

// ruleGen makes random valid rules over a set of templates.
type ruleGen struct {
	rng   *rand.Rand
	tmpls []template
	pools pools
}

// newRuleGen returns a generator of rules in about classes classes, with
// 2 to poolSize+1 values per field.
func newRuleGen(rng *rand.Rand, classes, poolSize int) *ruleGen {
	g := &ruleGen{rng: rng, pools: newPools(rng, poolSize)}
	for len(g.tmpls) < classes {
		before := len(g.tmpls)
		g.tmpls = append(g.tmpls, genTemplates(rng, classes-len(g.tmpls))...)
		if len(g.tmpls) == before {
			break
		}
	}
	return g
}

// rule returns a random valid rule.
func (g *ruleGen) rule(t *testing.T) Rule {
	for {
		i := g.rng.IntN(len(g.tmpls))
		r := ruleFrom(g.rng, g.tmpls[i], g.pools)
		if err := r.Match.Validate(); err == nil {
			return r
		} else if t != nil && g.rng.IntN(1000) == 0 {
			t.Logf("generator made an invalid match (retrying): %v", err)
		}
	}
}

// key returns a packet key: pool values everywhere and, if hit, the values
// of a random rule from rules.
func (g *ruleGen) key(rules []Rule, hit bool) Key {
	var k Key
	for _, f := range allFields {
		if g.rng.IntN(2) == 0 {
			fieldTab[f].put(&k, g.pools[f][g.rng.IntN(len(g.pools[f]))])
		}
	}
	for w := range k {
		if g.rng.IntN(8) == 0 {
			k[w] = g.rng.Uint32()
		}
	}
	if hit && len(rules) > 0 {
		r := &rules[g.rng.IntN(len(rules))]
		for w := range k {
			k[w] = k[w]&^r.Match.Mask[w] | r.Match.Value[w]
		}
	}
	return k
}
