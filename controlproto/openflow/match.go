package openflow

import (
	"fmt"

	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
)

// OXM constants (OpenFlow 1.3 §7.2.3).
const (
	oxmClassBasic        = 0x8000 // OFPXMC_OPENFLOW_BASIC
	oxmClassExperimenter = 0xffff // OFPXMC_EXPERIMENTER
	matchTypeOXM         = 1      // OFPMT_OXM
	oxmHeaderLen         = 4
	// maxBasicField is the last OXM basic field of OpenFlow 1.3
	// (OFPXMT_OFB_IPV6_EXTHDR); later ids (tcp_flags is 42) belong to 1.4
	// and 1.5 and are refused as unknown.
	maxBasicField = 39
	// onfExperimenter is the ONF's experimenter id (ONF_EXPERIMENTER_ID),
	// under which OpenFlow 1.3 carries tcp_flags (ONFOXM_ET_TCP_FLAGS,
	// field 42: the ONF's extension EXT-109, Open vSwitch's choice for
	// OpenFlow 1.3).
	onfExperimenter = 0x4f4e4600
	onfTCPFlags     = 42
)

// Open vSwitch's OpenFlow 1.3, which gswitch speaks too (see the package
// doc, "Open vSwitch's extensions"): tcp_flags as the ONF experimenter
// field, and masks on the transport ports, which OpenFlow 1.3's table 11
// does not allow but Open vSwitch accepts and sends in every version
// (ovs-ofctl -O OpenFlow13 "tcp,tp_dst=0x400/0xfc00" sends
// OXM_OF_TCP_DST_W). ClassBench's port ranges and flags need both.
func extMaskable(f flow.Field) bool {
	switch f {
	case flow.FieldTCPSrc, flow.FieldTCPDst, flow.FieldUDPSrc, flow.FieldUDPDst, flow.FieldSCTPSrc, flow.FieldSCTPDst:
		return true
	}
	return false
}

// maskable says whether a field may carry a mask on the wire: OpenFlow
// 1.3's table 11, and the transport ports (extMaskable).
func maskable(f flow.Field) bool { return f.Info().Maskable || extMaskable(f) }

// oxm is one OXM TLV as read from the wire.
type oxm struct {
	class   uint16
	field   uint8
	hasMask bool
	payload []byte // value, then mask when hasMask
}

// parseOXM reads the TLV at the front of b and returns it and its length.
func parseOXM(b []byte) (oxm, int, bool) {
	if len(b) < oxmHeaderLen {
		return oxm{}, 0, false
	}
	n := oxmHeaderLen + int(b[3])
	if n > len(b) {
		return oxm{}, 0, false
	}
	return oxm{
		class:   be16(b),
		field:   b[2] >> 1,
		hasMask: b[2]&1 != 0,
		payload: b[oxmHeaderLen:n],
	}, n, true
}

// basicField returns the flow.Field of an OpenFlow 1.3 basic OXM field,
// or of the ONF experimenter field tcp_flags (whose payload it strips of
// the experimenter id).
func basicField(x *oxm) (flow.Field, bool) {
	if x.class == oxmClassExperimenter && x.field == onfTCPFlags && len(x.payload) >= 4 && be32(x.payload) == onfExperimenter {
		x.payload = x.payload[4:]
		return flow.FieldTCPFlags, true
	}
	if x.class != oxmClassBasic || x.field > maxBasicField {
		return 0, false
	}
	f := flow.Field(x.field)
	return f, f.Valid()
}

// oxmSize is a field's payload length on the wire (without a mask). It is
// the field's width in bytes but for mpls_label and ipv6_flabel: 20-bit
// fields that OpenFlow 1.3 carries in 4 bytes (§7.2.3.7, as Open vSwitch
// and os-ken send them), one byte more than tables/flow keeps.
func oxmSize(f flow.Field) int {
	if f == flow.FieldMPLSLabel || f == flow.FieldIPv6FLabel {
		return 4
	}
	return (f.Bits() + 7) / 8
}

// fromWire returns the bytes of a wire payload part (value or mask) of
// field f in tables/flow's width: the extra leading bytes of a 4-byte
// mpls_label or ipv6_flabel are cut off, and must be zero (ok false
// otherwise).
func fromWire(f flow.Field, b []byte) ([]byte, bool) {
	n := (f.Bits() + 7) / 8
	if len(b) <= n {
		return b, true
	}
	for _, x := range b[:len(b)-n] {
		if x != 0 {
			return nil, false
		}
	}
	return b[len(b)-n:], true
}

// toWire returns b, a value of field f in tables/flow's width, widened
// with leading zeros to its wire size (oxmSize).
func toWire(f flow.Field, b []byte) []byte {
	n := oxmSize(f)
	if len(b) >= n {
		return b
	}
	return append(make([]byte, n-len(b), n), b...)
}

// Match is a decoded ofp_match: the match as tables/flow uses it, the
// fields in the order the controller gave them, and the encoded form
// (ofp_match with its padding) to echo in flow stats and FLOW_REMOVED.
type Match struct {
	Match  flow.Match
	Fields []flow.Field
	Wire   []byte
}

// DecodeMatch reads the ofp_match at the front of b and returns it and its
// length with padding. It checks the match completely: type OXM, lengths,
// the padding present, only OpenFlow 1.3 basic fields and the ONF's
// tcp_flags, no field twice, masks only where the standard allows them (and
// on the transport ports, as Open vSwitch allows), values and masks within each
// field's width, no value bits outside the mask, and every field's
// prerequisites (flow.Match.CheckField, then Validate). Errors are
// OFPET_BAD_MATCH codes.
func DecodeMatch(b []byte) (Match, int, *Error) {
	if len(b) < 4 {
		return Match{}, 0, badMatch(ofp.ErrCodeBadMatchBadLen, "match header truncated")
	}
	if t := be16(b); t != matchTypeOXM {
		return Match{}, 0, badMatch(ofp.ErrCodeBadMatchBadType, "match type %d, only OXM (1) is supported", t)
	}
	n := int(be16(b[2:]))
	padded := n + pad8(n)
	if n < 4 || padded > len(b) {
		return Match{}, 0, badMatch(ofp.ErrCodeBadMatchBadLen, "match length %d does not fit in %d bytes", n, len(b))
	}
	m := Match{Wire: append([]byte(nil), b[:padded]...)}
	if err := m.readFields(b[4:n]); err != nil {
		return Match{}, 0, err
	}
	return m, padded, nil
}

// readFields sets every TLV of b into m, then checks prerequisites.
func (m *Match) readFields(b []byte) *Error {
	var seen [flow.FieldTCPFlags + 1]bool
	for len(b) > 0 {
		x, n, ok := parseOXM(b)
		if !ok {
			return badMatch(ofp.ErrCodeBadMatchBadLen, "OXM TLV truncated")
		}
		b = b[n:]
		f, err := m.setField(&x)
		if err != nil {
			return err
		}
		if seen[f] {
			return badMatch(ofp.ErrCodeBadMatchDupField, "field %s given twice", f)
		}
		seen[f] = true
		m.Fields = append(m.Fields, f)
	}
	for _, f := range m.Fields {
		if err := m.Match.CheckField(f); err != nil {
			return ErrorFor(err, badMatch(ofp.ErrCodeBadMatchBadPrereq, "field %s", f))
		}
	}
	if err := m.Match.Validate(); err != nil {
		return ErrorFor(err, badMatch(ofp.ErrCodeBadMatchBadField, "match"))
	}
	return nil
}

// setField checks one TLV and sets it into the match.
func (m *Match) setField(x *oxm) (flow.Field, *Error) {
	f, ok := basicField(x)
	if !ok {
		return 0, badMatch(ofp.ErrCodeBadMatchBadField, "unsupported OXM class %#04x field %d", x.class, x.field)
	}
	size := oxmSize(f)
	want := size
	if x.hasMask {
		want *= 2
	}
	if len(x.payload) != want {
		return 0, badMatch(ofp.ErrCodeBadMatchBadLen, "field %s: %d bytes, want %d", f, len(x.payload), want)
	}
	if x.hasMask && !maskable(f) {
		return 0, badMatch(ofp.ErrCodeBadMatchBadMask, "field %s cannot be masked", f)
	}
	value, ok := fromWire(f, x.payload[:size])
	if !ok {
		return 0, badMatch(ofp.ErrCodeBadMatchBadValue, "field %s: value %#x has bits beyond the field's %d", f, x.payload[:size], f.Bits())
	}
	var mask []byte
	if x.hasMask {
		if mask, ok = fromWire(f, x.payload[size:]); !ok {
			return 0, badMatch(ofp.ErrCodeBadMatchBadMask, "field %s: mask %#x has bits beyond the field's %d", f, x.payload[size:], f.Bits())
		}
	}
	if err := m.Match.SetField(f, value, mask); err != nil {
		return 0, ErrorFor(err, badMatch(ofp.ErrCodeBadMatchBadValue, "field %s", f))
	}
	return f, nil
}

// EncodeMatch encodes a flow.Match as ofp_match with padding: the fields it
// holds (those with mask bits whose prerequisites are met) in OXM order,
// masked only when the mask is not all ones, tcp_flags as the ONF
// experimenter field. It is for matches that did not come from a
// controller; one that did is echoed from Match.Wire. Every bit of the
// match is written: a mask OpenFlow 1.3 does not allow on a field is
// written as it is (DecodeMatch, like any strict switch, refuses it with
// OFPBMC_BAD_MASK), never dropped, so the encoding never stands for another
// match. MatchEncodable says whether DecodeMatch takes it back.
func EncodeMatch(m *flow.Match) []byte {
	e := &enc{}
	e.u16(matchTypeOXM)
	e.u16(0)
	for _, f := range flow.Fields() {
		if !m.Has(f) || m.CheckField(f) != nil {
			continue
		}
		appendOXM(e, f, m)
	}
	n := len(e.b)
	e.b[2], e.b[3] = byte(n>>8), byte(n)
	e.align8(0)
	return e.b
}

// appendOXM writes field f of m as one TLV.
func appendOXM(e *enc, f flow.Field, m *flow.Match) {
	v, mk := m.Get(f)
	full := true
	for i, x := range mk {
		want := byte(0xff)
		if top := f.Bits() % 8; i == 0 && top != 0 {
			want = byte(1<<top - 1)
		}
		full = full && x == want
	}
	v, mk = toWire(f, v), toWire(f, mk)
	hdr := 0 // the experimenter id before the value
	if f == flow.FieldTCPFlags {
		e.u16(oxmClassExperimenter)
		hdr = 4
	} else {
		e.u16(oxmClassBasic)
	}
	if full {
		e.u8(uint8(f) << 1)
		e.u8(uint8(hdr + len(v)))
	} else {
		e.u8(uint8(f)<<1 | 1)
		e.u8(uint8(hdr + 2*len(v)))
	}
	if hdr > 0 {
		e.u32(onfExperimenter)
	}
	e.raw(v)
	if !full {
		e.raw(mk)
	}
}

// MatchEncodable reports whether DecodeMatch takes back m's EncodeMatch as
// m itself; if not, the error names the first field it does not (a mask
// where neither OpenFlow 1.3 nor Open vSwitch allows one, a field whose
// prerequisites m lacks).
func MatchEncodable(m *flow.Match) error {
	got, _, err := DecodeMatch(EncodeMatch(m))
	if err != nil {
		return fmt.Errorf("openflow: match %s: %w", m.String(), err)
	}
	if got.Match != *m {
		return fmt.Errorf("openflow: match %s is encoded as %s", m.String(), got.Match.String())
	}
	return nil
}
