package packet

import (
	"math/rand/v2"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
)

// TestSettersAgreeWithFieldTable writes random values of every field the
// parser writes through its fast setter and through flow.Key.SetUint (or
// Key.Set for 128-bit fields) and requires identical keys: the parser's
// word packing is the field table's.
func TestSettersAgreeWithFieldTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b16 := func() []byte {
		b := make([]byte, 16)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	type check struct {
		field flow.Field
		set   func(k *flow.Key, v uint64, b []byte) // fast path; v is the field value, b its 16 bytes (128-bit fields)
	}
	mac := func(v uint64) []byte { // 48-bit value as 6 bytes
		return []byte{byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
	}
	checks := []check{
		{flow.FieldInPort, func(k *flow.Key, v uint64, _ []byte) { k[wInPort] = uint32(v) }},
		{flow.FieldInPhyPort, func(k *flow.Key, v uint64, _ []byte) { k[wInPhyPort] = uint32(v) }},
		{flow.FieldEthDst, func(k *flow.Key, v uint64, _ []byte) { putEthAddrs(k, append(mac(v), make([]byte, 8)...)) }},
		{flow.FieldEthSrc, func(k *flow.Key, v uint64, _ []byte) {
			putEthAddrs(k, append(append(make([]byte, 6), mac(v)...), 0, 0))
		}},
		{flow.FieldEthType, func(k *flow.Key, v uint64, _ []byte) { putEthType(k, uint32(v)) }},
		{flow.FieldVlanVID, func(k *flow.Key, v uint64, _ []byte) {
			if v&flow.VIDPresent != 0 {
				putVLAN(k, uint32(v&0xfff))
			}
		}},
		{flow.FieldVlanPCP, func(k *flow.Key, v uint64, _ []byte) {
			putVLAN(k, uint32(v<<13))
			k[wVLAN] &^= flow.VIDPresent << 16 // the check sets only pcp
		}},
		{flow.FieldIPDSCP, func(k *flow.Key, v uint64, _ []byte) { putIPProtoTOS(k, 0, uint8(v<<2)) }},
		{flow.FieldIPECN, func(k *flow.Key, v uint64, _ []byte) { putIPProtoTOS(k, 0, uint8(v)) }},
		{flow.FieldIPProto, func(k *flow.Key, v uint64, _ []byte) { putIPProtoTOS(k, uint8(v), 0) }},
		{flow.FieldIPv4Src, func(k *flow.Key, v uint64, _ []byte) { putIPv4Addrs(k, uint32(v), 0) }},
		{flow.FieldIPv4Dst, func(k *flow.Key, v uint64, _ []byte) { putIPv4Addrs(k, 0, uint32(v)) }},
		{flow.FieldTCPSrc, func(k *flow.Key, v uint64, _ []byte) { putL4Ports(k, uint32(v<<16)) }},
		{flow.FieldTCPDst, func(k *flow.Key, v uint64, _ []byte) { putL4Ports(k, uint32(v)) }},
		{flow.FieldUDPSrc, func(k *flow.Key, v uint64, _ []byte) { putL4Ports(k, uint32(v<<16)) }},
		{flow.FieldUDPDst, func(k *flow.Key, v uint64, _ []byte) { putL4Ports(k, uint32(v)) }},
		{flow.FieldSCTPSrc, func(k *flow.Key, v uint64, _ []byte) { putL4Ports(k, uint32(v<<16)) }},
		{flow.FieldSCTPDst, func(k *flow.Key, v uint64, _ []byte) { putL4Ports(k, uint32(v)) }},
		{flow.FieldICMPv4Type, func(k *flow.Key, v uint64, _ []byte) { putICMPTypeCode(k, uint8(v), 0) }},
		{flow.FieldICMPv4Code, func(k *flow.Key, v uint64, _ []byte) { putICMPTypeCode(k, 0, uint8(v)) }},
		{flow.FieldICMPv6Type, func(k *flow.Key, v uint64, _ []byte) { putICMPTypeCode(k, uint8(v), 0) }},
		{flow.FieldICMPv6Code, func(k *flow.Key, v uint64, _ []byte) { putICMPTypeCode(k, 0, uint8(v)) }},
		{flow.FieldARPOp, func(k *flow.Key, v uint64, _ []byte) { putARPOp(k, uint32(v)) }},
		{flow.FieldARPSPA, func(k *flow.Key, v uint64, _ []byte) { putARPAddrs(k, make([]byte, 6), uint32(v), make([]byte, 6), 0) }},
		{flow.FieldARPTPA, func(k *flow.Key, v uint64, _ []byte) { putARPAddrs(k, make([]byte, 6), 0, make([]byte, 6), uint32(v)) }},
		{flow.FieldARPSHA, func(k *flow.Key, v uint64, _ []byte) { putARPAddrs(k, mac(v), 0, make([]byte, 6), 0) }},
		{flow.FieldARPTHA, func(k *flow.Key, v uint64, _ []byte) { putARPAddrs(k, make([]byte, 6), 0, mac(v), 0) }},
		{flow.FieldIPv6Src, func(k *flow.Key, _ uint64, b []byte) { putIPv6Addrs(k, b, make([]byte, 16)) }},
		{flow.FieldIPv6Dst, func(k *flow.Key, _ uint64, b []byte) { putIPv6Addrs(k, make([]byte, 16), b) }},
		{flow.FieldIPv6FLabel, func(k *flow.Key, v uint64, _ []byte) { putIPv6FLabel(k, uint32(v)) }},
		{flow.FieldIPv6NDTarget, func(k *flow.Key, _ uint64, b []byte) { putNDTarget(k, b) }},
		{flow.FieldIPv6NDSLL, func(k *flow.Key, v uint64, _ []byte) { putNDLL(k, mac(v)) }},
		{flow.FieldIPv6NDTLL, func(k *flow.Key, v uint64, _ []byte) { putNDLL(k, mac(v)) }},
		{flow.FieldMPLSLabel, func(k *flow.Key, v uint64, _ []byte) { putMPLS(k, uint32(v<<12)|0xff) }},
		{flow.FieldMPLSTC, func(k *flow.Key, v uint64, _ []byte) { putMPLS(k, uint32(v<<9)|0xff) }},
		{flow.FieldMPLSBOS, func(k *flow.Key, v uint64, _ []byte) { putMPLS(k, uint32(v<<8)|0xff) }},
		{flow.FieldPBBISID, func(k *flow.Key, v uint64, _ []byte) { putPBBISID(k, uint32(v)|0xff000000) }},
		{flow.FieldIPv6ExtHdr, func(k *flow.Key, v uint64, _ []byte) { putIPv6ExtHdr(k, uint32(v)) }},
		{flow.FieldTCPFlags, func(k *flow.Key, v uint64, _ []byte) { putTCPFlags(k, uint32(v&0x0fff)) }},
	}
	covered := map[flow.Field]bool{}
	for _, c := range checks {
		covered[c.field] = true
		bits := c.field.Bits()
		for i := 0; i < 200; i++ {
			var v uint64
			if bits <= 64 {
				v = rng.Uint64() >> (64 - bits)
			}
			switch c.field {
			case flow.FieldVlanVID:
				v = v&0x0fff | flow.VIDPresent // a parsed vid is present or the field is zero
				if i == 0 {
					v = 0
				}
			case flow.FieldTCPFlags:
				v &= 0x0fff
			}
			b := b16()
			var fast, ref flow.Key
			c.set(&fast, v, b)
			var err error
			if bits > 64 {
				err = ref.Set(c.field, b)
			} else {
				err = ref.SetUint(c.field, v)
			}
			if err != nil {
				t.Fatalf("%v: %v", c.field, err)
			}
			if fast != ref {
				t.Fatalf("%v = %#x (%x): fast path wrote %v, field table %v", c.field, v, b, fast.String(), ref.String())
			}
		}
	}
	// Every field but the pipeline fields must be checked.
	for _, f := range flow.Fields() {
		if f == flow.FieldMetadata || f == flow.FieldTunnelID {
			continue
		}
		if !covered[f] {
			t.Errorf("field %v has no setter check", f)
		}
	}
}
