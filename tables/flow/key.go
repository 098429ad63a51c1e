package flow

import (
	"encoding/binary"
	"fmt"
)

// KeyWords is the width of a packet key in 32-bit words.
const KeyWords = 27

// Key is a packet key: the OpenFlow 1.3 match fields of one packet, laid out
// in 32-bit words as the package documentation's diagram shows. Fields that
// never occur in the same packet share words.
type Key [KeyWords]uint32

// Field is an OpenFlow 1.3 OXM basic field, numbered by its OXM field id
// (OFPXMT_OFB_*).
type Field uint8

// The OXM basic fields of OpenFlow 1.3, plus TCP_FLAGS (OpenFlow 1.5, ONF
// extension for 1.3).
const (
	FieldInPort       Field = 0
	FieldInPhyPort    Field = 1
	FieldMetadata     Field = 2
	FieldEthDst       Field = 3
	FieldEthSrc       Field = 4
	FieldEthType      Field = 5
	FieldVlanVID      Field = 6
	FieldVlanPCP      Field = 7
	FieldIPDSCP       Field = 8
	FieldIPECN        Field = 9
	FieldIPProto      Field = 10
	FieldIPv4Src      Field = 11
	FieldIPv4Dst      Field = 12
	FieldTCPSrc       Field = 13
	FieldTCPDst       Field = 14
	FieldUDPSrc       Field = 15
	FieldUDPDst       Field = 16
	FieldSCTPSrc      Field = 17
	FieldSCTPDst      Field = 18
	FieldICMPv4Type   Field = 19
	FieldICMPv4Code   Field = 20
	FieldARPOp        Field = 21
	FieldARPSPA       Field = 22
	FieldARPTPA       Field = 23
	FieldARPSHA       Field = 24
	FieldARPTHA       Field = 25
	FieldIPv6Src      Field = 26
	FieldIPv6Dst      Field = 27
	FieldIPv6FLabel   Field = 28
	FieldICMPv6Type   Field = 29
	FieldICMPv6Code   Field = 30
	FieldIPv6NDTarget Field = 31
	FieldIPv6NDSLL    Field = 32
	FieldIPv6NDTLL    Field = 33
	FieldMPLSLabel    Field = 34
	FieldMPLSTC       Field = 35
	FieldMPLSBOS      Field = 36
	FieldPBBISID      Field = 37
	FieldTunnelID     Field = 38
	FieldIPv6ExtHdr   Field = 39
	FieldTCPFlags     Field = 42
)

// Well-known values used by the prerequisites.
const (
	EthTypeIPv4      = 0x0800
	EthTypeARP       = 0x0806
	EthTypeIPv6      = 0x86dd
	EthTypeMPLS      = 0x8847
	EthTypeMPLSMcast = 0x8848
	EthTypePBB       = 0x88e7

	IPProtoICMP   = 1
	IPProtoTCP    = 6
	IPProtoUDP    = 17
	IPProtoICMPv6 = 58
	IPProtoSCTP   = 132

	// VIDPresent is OFPVID_PRESENT: set in vlan_vid for tagged packets.
	VIDPresent = 0x1000
)

// Part is one piece of a field in the key: Width bits at bit Shift of word
// Word. A field's parts are listed most significant first.
type Part struct {
	Word, Shift, Width uint8
}

// Prereq is one prerequisite of a field (OpenFlow 1.3 §7.2.3.8, table 12):
// Field must be matched exactly (full mask) and, when Values is not empty,
// equal one of them; when Bits is not zero the field need only match those
// bits, set (vlan_vid's OFPVID_PRESENT: "VLAN_VID != NONE").
type Prereq struct {
	Field  Field
	Values []uint64
	Bits   uint64
}

// format says how String and ParseMatch write a field's value.
type format uint8

const (
	fmtDec format = iota
	fmtHex
	fmtIPv4
	fmtIPv6
	fmtMAC
)

// FieldInfo describes one field: its name (as ovs-ofctl spells it), OXM id,
// width, where it lives in the key and what it requires.
type FieldInfo struct {
	Name  string
	Field Field
	Bits  int
	// Maskable says whether OpenFlow 1.3 (table 11) allows a mask. The table
	// itself accepts a mask on any field (as Open vSwitch does, e.g. for
	// port-range expansion); the OpenFlow layer rejects masks where the
	// standard does not allow them.
	Maskable bool
	Parts    []Part
	Prereqs  []Prereq
	format   format
	lsb      []uint8 // per part: bit position of its least significant bit in the field value
	bytes    int
}

// partMask returns part i's bits in its word.
func (fi *FieldInfo) partMask(i int) uint32 {
	p := fi.Parts[i]
	return uint32((uint64(1)<<p.Width)-1) << p.Shift
}

func ethTypeIs(v ...uint64) []Prereq { return []Prereq{{Field: FieldEthType, Values: v}} }
func ipProtoIs(v ...uint64) []Prereq {
	return []Prereq{{Field: FieldIPProto, Values: v}}
}

var (
	preIP     = ethTypeIs(EthTypeIPv4, EthTypeIPv6)
	preIPv4   = ethTypeIs(EthTypeIPv4)
	preIPv6   = ethTypeIs(EthTypeIPv6)
	preARP    = ethTypeIs(EthTypeARP)
	preMPLS   = ethTypeIs(EthTypeMPLS, EthTypeMPLSMcast)
	preTCP    = ipProtoIs(IPProtoTCP)
	preUDP    = ipProtoIs(IPProtoUDP)
	preSCTP   = ipProtoIs(IPProtoSCTP)
	preICMPv4 = ipProtoIs(IPProtoICMP)
	preICMPv6 = ipProtoIs(IPProtoICMPv6)
)

func p(word, shift, width uint8) Part { return Part{word, shift, width} }

// fieldList is the field table: everything else is derived from it.
var fieldList = []FieldInfo{
	{Name: "in_port", Field: FieldInPort, Bits: 32, Parts: []Part{p(0, 0, 32)}},
	{Name: "in_phy_port", Field: FieldInPhyPort, Bits: 32, Parts: []Part{p(1, 0, 32)}, Prereqs: []Prereq{{Field: FieldInPort}}},
	{Name: "metadata", Field: FieldMetadata, Bits: 64, Maskable: true, Parts: []Part{p(2, 0, 32), p(3, 0, 32)}, format: fmtHex},
	{Name: "eth_dst", Field: FieldEthDst, Bits: 48, Maskable: true, Parts: []Part{p(6, 0, 32), p(8, 16, 16)}, format: fmtMAC},
	{Name: "eth_src", Field: FieldEthSrc, Bits: 48, Maskable: true, Parts: []Part{p(7, 0, 32), p(8, 0, 16)}, format: fmtMAC},
	{Name: "eth_type", Field: FieldEthType, Bits: 16, Parts: []Part{p(9, 16, 16)}, format: fmtHex},
	{Name: "vlan_vid", Field: FieldVlanVID, Bits: 13, Maskable: true, Parts: []Part{p(10, 16, 13)}, format: fmtHex},
	{Name: "vlan_pcp", Field: FieldVlanPCP, Bits: 3, Parts: []Part{p(10, 13, 3)}, Prereqs: []Prereq{{Field: FieldVlanVID, Bits: VIDPresent}}},
	{Name: "ip_dscp", Field: FieldIPDSCP, Bits: 6, Parts: []Part{p(9, 2, 6)}, Prereqs: preIP},
	{Name: "ip_ecn", Field: FieldIPECN, Bits: 2, Parts: []Part{p(9, 0, 2)}, Prereqs: preIP},
	{Name: "ip_proto", Field: FieldIPProto, Bits: 8, Parts: []Part{p(9, 8, 8)}, Prereqs: preIP},
	{Name: "ipv4_src", Field: FieldIPv4Src, Bits: 32, Maskable: true, Parts: []Part{p(12, 0, 32)}, Prereqs: preIPv4, format: fmtIPv4},
	{Name: "ipv4_dst", Field: FieldIPv4Dst, Bits: 32, Maskable: true, Parts: []Part{p(16, 0, 32)}, Prereqs: preIPv4, format: fmtIPv4},
	{Name: "tcp_src", Field: FieldTCPSrc, Bits: 16, Parts: []Part{p(20, 16, 16)}, Prereqs: preTCP},
	{Name: "tcp_dst", Field: FieldTCPDst, Bits: 16, Parts: []Part{p(20, 0, 16)}, Prereqs: preTCP},
	{Name: "udp_src", Field: FieldUDPSrc, Bits: 16, Parts: []Part{p(20, 16, 16)}, Prereqs: preUDP},
	{Name: "udp_dst", Field: FieldUDPDst, Bits: 16, Parts: []Part{p(20, 0, 16)}, Prereqs: preUDP},
	{Name: "sctp_src", Field: FieldSCTPSrc, Bits: 16, Parts: []Part{p(20, 16, 16)}, Prereqs: preSCTP},
	{Name: "sctp_dst", Field: FieldSCTPDst, Bits: 16, Parts: []Part{p(20, 0, 16)}, Prereqs: preSCTP},
	{Name: "icmpv4_type", Field: FieldICMPv4Type, Bits: 8, Parts: []Part{p(20, 16, 8)}, Prereqs: preICMPv4},
	{Name: "icmpv4_code", Field: FieldICMPv4Code, Bits: 8, Parts: []Part{p(20, 0, 8)}, Prereqs: preICMPv4},
	{Name: "arp_op", Field: FieldARPOp, Bits: 16, Parts: []Part{p(9, 0, 16)}, Prereqs: preARP},
	{Name: "arp_spa", Field: FieldARPSPA, Bits: 32, Maskable: true, Parts: []Part{p(12, 0, 32)}, Prereqs: preARP, format: fmtIPv4},
	{Name: "arp_tpa", Field: FieldARPTPA, Bits: 32, Maskable: true, Parts: []Part{p(16, 0, 32)}, Prereqs: preARP, format: fmtIPv4},
	{Name: "arp_sha", Field: FieldARPSHA, Bits: 48, Maskable: true, Parts: []Part{p(13, 0, 32), p(14, 16, 16)}, Prereqs: preARP, format: fmtMAC},
	{Name: "arp_tha", Field: FieldARPTHA, Bits: 48, Maskable: true, Parts: []Part{p(15, 0, 32), p(14, 0, 16)}, Prereqs: preARP, format: fmtMAC},
	{Name: "ipv6_src", Field: FieldIPv6Src, Bits: 128, Maskable: true, Parts: []Part{p(12, 0, 32), p(13, 0, 32), p(14, 0, 32), p(15, 0, 32)}, Prereqs: preIPv6, format: fmtIPv6},
	{Name: "ipv6_dst", Field: FieldIPv6Dst, Bits: 128, Maskable: true, Parts: []Part{p(16, 0, 32), p(17, 0, 32), p(18, 0, 32), p(19, 0, 32)}, Prereqs: preIPv6, format: fmtIPv6},
	{Name: "ipv6_flabel", Field: FieldIPv6FLabel, Bits: 20, Maskable: true, Parts: []Part{p(11, 0, 20)}, Prereqs: preIPv6, format: fmtHex},
	{Name: "icmpv6_type", Field: FieldICMPv6Type, Bits: 8, Parts: []Part{p(20, 16, 8)}, Prereqs: preICMPv6},
	{Name: "icmpv6_code", Field: FieldICMPv6Code, Bits: 8, Parts: []Part{p(20, 0, 8)}, Prereqs: preICMPv6},
	{Name: "ipv6_nd_target", Field: FieldIPv6NDTarget, Bits: 128, Parts: []Part{p(21, 0, 32), p(22, 0, 32), p(23, 0, 32), p(24, 0, 32)}, Prereqs: []Prereq{{Field: FieldICMPv6Type, Values: []uint64{135, 136}}}, format: fmtIPv6},
	{Name: "ipv6_nd_sll", Field: FieldIPv6NDSLL, Bits: 48, Parts: []Part{p(25, 0, 32), p(26, 16, 16)}, Prereqs: []Prereq{{Field: FieldICMPv6Type, Values: []uint64{135}}}, format: fmtMAC},
	{Name: "ipv6_nd_tll", Field: FieldIPv6NDTLL, Bits: 48, Parts: []Part{p(25, 0, 32), p(26, 16, 16)}, Prereqs: []Prereq{{Field: FieldICMPv6Type, Values: []uint64{136}}}, format: fmtMAC},
	{Name: "mpls_label", Field: FieldMPLSLabel, Bits: 20, Parts: []Part{p(11, 12, 20)}, Prereqs: preMPLS},
	{Name: "mpls_tc", Field: FieldMPLSTC, Bits: 3, Parts: []Part{p(11, 9, 3)}, Prereqs: preMPLS},
	{Name: "mpls_bos", Field: FieldMPLSBOS, Bits: 1, Parts: []Part{p(11, 8, 1)}, Prereqs: preMPLS},
	{Name: "pbb_isid", Field: FieldPBBISID, Bits: 24, Maskable: true, Parts: []Part{p(11, 0, 24)}, Prereqs: ethTypeIs(EthTypePBB), format: fmtHex},
	{Name: "tunnel_id", Field: FieldTunnelID, Bits: 64, Maskable: true, Parts: []Part{p(4, 0, 32), p(5, 0, 32)}, format: fmtHex},
	{Name: "ipv6_exthdr", Field: FieldIPv6ExtHdr, Bits: 9, Maskable: true, Parts: []Part{p(10, 0, 9)}, Prereqs: preIPv6, format: fmtHex},
	{Name: "tcp_flags", Field: FieldTCPFlags, Bits: 16, Maskable: true, Parts: []Part{p(26, 0, 16)}, Prereqs: preTCP, format: fmtHex},
}

const maxField = 43

var (
	// fieldTab is indexed by Field; nil where no field has that OXM id.
	fieldTab [maxField]*FieldInfo
	// fieldBits[f][w] holds the bits of word w that field f occupies.
	fieldBits [maxField]Key
	// liveBits holds, per word, the bits where some field lives.
	liveBits Key
	// fieldByName maps a field's name to the field.
	fieldByName = map[string]Field{}
	// allFields lists the fields in OXM id order.
	allFields []Field
)

func init() {
	for i := range fieldList {
		fi := &fieldList[i]
		fieldTab[fi.Field] = fi
		fieldByName[fi.Name] = fi.Field
		allFields = append(allFields, fi.Field)
		fi.bytes = (fi.Bits + 7) / 8
		rest, sum := fi.Bits, 0
		for j, pt := range fi.Parts {
			sum += int(pt.Width)
			rest -= int(pt.Width)
			fi.lsb = append(fi.lsb, uint8(rest))
			m := fi.partMask(j)
			fieldBits[fi.Field][pt.Word] |= m
			liveBits[pt.Word] |= m
		}
		if sum != fi.Bits {
			panic(fmt.Sprintf("flow: field %s: parts cover %d bits, want %d", fi.Name, sum, fi.Bits))
		}
	}
}

// Fields returns every field, in OXM id order.
func Fields() []Field { return append([]Field(nil), allFields...) }

// FieldByName returns the field with that name (ovs-ofctl spelling, e.g.
// "ipv4_src", "tcp_dst").
func FieldByName(name string) (Field, bool) {
	f, ok := fieldByName[name]
	return f, ok
}

// Info returns the description of f, or nil if f is not a known field.
func (f Field) Info() *FieldInfo {
	if int(f) >= maxField {
		return nil
	}
	return fieldTab[f]
}

// Valid reports whether f is a known field.
func (f Field) Valid() bool { return f.Info() != nil }

// String returns the field's name.
func (f Field) String() string {
	if fi := f.Info(); fi != nil {
		return fi.Name
	}
	return fmt.Sprintf("oxm%d", uint8(f))
}

// Bits returns the field's width in bits (0 for an unknown field).
func (f Field) Bits() int {
	if fi := f.Info(); fi != nil {
		return fi.Bits
	}
	return 0
}

// u128 is a field value of up to 128 bits.
type u128 struct{ hi, lo uint64 }

func (x u128) shr(n uint) u128 {
	switch {
	case n == 0:
		return x
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{0, x.hi >> (n - 64)}
	default:
		return u128{x.hi >> n, x.lo>>n | x.hi<<(64-n)}
	}
}

func (x u128) shl(n uint) u128 {
	switch {
	case n == 0:
		return x
	case n >= 128:
		return u128{}
	case n >= 64:
		return u128{x.lo << (n - 64), 0}
	default:
		return u128{x.hi<<n | x.lo>>(64-n), x.lo << n}
	}
}

func (x u128) or(y u128) u128     { return u128{x.hi | y.hi, x.lo | y.lo} }
func (x u128) and(y u128) u128    { return u128{x.hi & y.hi, x.lo & y.lo} }
func (x u128) andNot(y u128) u128 { return u128{x.hi &^ y.hi, x.lo &^ y.lo} }
func (x u128) isZero() bool       { return x.hi|x.lo == 0 }

// ones returns a value with the low n bits set.
func ones(n int) u128 {
	return u128{^uint64(0), ^uint64(0)}.shr(uint(128 - n))
}

// prefixOnes returns a width-bit value whose top n bits are set.
func prefixOnes(width, n int) u128 {
	return ones(width).andNot(ones(width - n))
}

// fromBytes reads a big-endian value of at most 16 bytes.
func fromBytes(b []byte) u128 {
	var buf [16]byte
	copy(buf[16-len(b):], b)
	return u128{binary.BigEndian.Uint64(buf[:8]), binary.BigEndian.Uint64(buf[8:])}
}

// toBytes writes x as n big-endian bytes.
func (x u128) toBytes(n int) []byte {
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], x.hi)
	binary.BigEndian.PutUint64(buf[8:], x.lo)
	return append([]byte(nil), buf[16-n:]...)
}

// put writes the field value v into the key words w.
func (fi *FieldInfo) put(w *Key, v u128) {
	for i, pt := range fi.Parts {
		m := fi.partMask(i)
		bitsv := uint32(v.shr(uint(fi.lsb[i])).lo) << pt.Shift
		w[pt.Word] = w[pt.Word]&^m | bitsv&m
	}
}

// get reads the field value from the key words w.
func (fi *FieldInfo) get(w *Key) u128 {
	var v u128
	for i, pt := range fi.Parts {
		x := (w[pt.Word] & fi.partMask(i)) >> pt.Shift
		v = v.or(u128{0, uint64(x)}.shl(uint(fi.lsb[i])))
	}
	return v
}

// checkValue converts big-endian bytes to a field value, checking the length
// and that no bit lies outside the field's width.
func (fi *FieldInfo) checkValue(what string, b []byte) (u128, error) {
	if len(b) != fi.bytes {
		return u128{}, &MatchError{Field: fi.Field, Err: ErrBadLength, Detail: fmt.Sprintf("%s is %d bytes, want %d", what, len(b), fi.bytes)}
	}
	v := fromBytes(b)
	if !v.andNot(ones(fi.Bits)).isZero() {
		return u128{}, &MatchError{Field: fi.Field, Err: ErrBadValue, Detail: fmt.Sprintf("%s %#x has bits beyond the field's %d", what, b, fi.Bits)}
	}
	return v, nil
}

// uintBytes returns v as the big-endian bytes of field fi.
func (fi *FieldInfo) uintBytes(v uint64) []byte {
	return u128{0, v}.toBytes(fi.bytes)
}

// Set writes a field's value into the key (big-endian bytes of the field's
// width). Fields sharing words overwrite each other's bits.
func (k *Key) Set(f Field, value []byte) error {
	fi := f.Info()
	if fi == nil {
		return &MatchError{Field: f, Err: ErrBadField, Detail: "unknown field"}
	}
	v, err := fi.checkValue("value", value)
	if err != nil {
		return err
	}
	fi.put(k, v)
	return nil
}

// SetUint writes a field of at most 64 bits from an integer.
func (k *Key) SetUint(f Field, v uint64) error {
	fi := f.Info()
	if fi == nil {
		return &MatchError{Field: f, Err: ErrBadField, Detail: "unknown field"}
	}
	if fi.Bits > 64 {
		return &MatchError{Field: f, Err: ErrBadLength, Detail: "field wider than 64 bits"}
	}
	// As Set(f, fi.uintBytes(v)) without the bytes, which cost the
	// datapath an allocation per write_metadata and set-field: v cut to
	// the field's bytes, refused with bits beyond its width.
	if fi.bytes < 8 {
		v &= 1<<(8*uint(fi.bytes)) - 1
	}
	if fi.Bits < 64 && v>>uint(fi.Bits) != 0 {
		return k.Set(f, fi.uintBytes(v)) // Set's error, in its words
	}
	fi.put(k, u128{0, v})
	return nil
}

// Get returns a field's value as big-endian bytes (nil for an unknown field).
func (k *Key) Get(f Field) []byte {
	fi := f.Info()
	if fi == nil {
		return nil
	}
	return fi.get(k).toBytes(fi.bytes)
}

// GetUint returns the low 64 bits of a field's value.
func (k *Key) GetUint(f Field) uint64 {
	fi := f.Info()
	if fi == nil {
		return 0
	}
	return fi.get(k).lo
}

// String lists the key's non-zero words as "w<i>=0x<value>".
func (k *Key) String() string {
	s := ""
	for i, w := range k {
		if w != 0 {
			if s != "" {
				s += ","
			}
			s += fmt.Sprintf("w%d=%#x", i, w)
		}
	}
	if s == "" {
		return "zero"
	}
	return s
}
