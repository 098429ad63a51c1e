package flow

import (
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Match is a wildcard match on packet keys: a packet key k matches when
// k[w]&Mask[w] == Value[w] for every word w. A valid match has no value bit
// outside its mask, no mask bit where no field lives, and every matched
// field's prerequisites matched (Validate).
type Match struct {
	Value, Mask Key
}

// Matches reports whether the packet key k matches m.
func (m *Match) Matches(k *Key) bool {
	for w := range k {
		if k[w]&m.Mask[w] != m.Value[w] {
			return false
		}
	}
	return true
}

// Covers reports whether every packet that matches o also matches m (the
// OpenFlow non-strict relation): m's mask is within o's and the values agree
// under m's mask.
func (m *Match) Covers(o *Match) bool {
	for w := range m.Mask {
		if m.Mask[w]&^o.Mask[w] != 0 || o.Value[w]&m.Mask[w] != m.Value[w] {
			return false
		}
	}
	return true
}

// Overlaps reports whether some packet matches both m and o.
func (m *Match) Overlaps(o *Match) bool {
	for w := range m.Mask {
		if (m.Value[w]^o.Value[w])&m.Mask[w]&o.Mask[w] != 0 {
			return false
		}
	}
	return true
}

// IsAll reports whether m matches every packet (all wildcards).
func (m *Match) IsAll() bool { return m.Mask == Key{} }

// SetField sets a field's value and mask: big-endian bytes of the field's
// width; a nil mask means an exact match, an all-zero mask removes the field.
// It rejects unknown fields, wrong lengths, bits beyond the field's width and
// value bits outside the mask. Fields sharing words overwrite each other.
func (m *Match) SetField(f Field, value, mask []byte) error {
	fi := f.Info()
	if fi == nil {
		return &MatchError{Field: f, Err: ErrBadField, Detail: "unknown field"}
	}
	v, err := fi.checkValue("value", value)
	if err != nil {
		return err
	}
	mk := ones(fi.Bits)
	if mask != nil {
		if len(mask) != fi.bytes {
			return &MatchError{Field: f, Err: ErrBadLength, Detail: fmt.Sprintf("mask is %d bytes, want %d", len(mask), fi.bytes)}
		}
		mk = fromBytes(mask)
		if !mk.andNot(ones(fi.Bits)).isZero() {
			return &MatchError{Field: f, Err: ErrBadMask, Detail: fmt.Sprintf("mask %#x has bits beyond the field's %d", mask, fi.Bits)}
		}
	}
	if !v.andNot(mk).isZero() {
		return &MatchError{Field: f, Err: ErrBadWildcards, Detail: fmt.Sprintf("value %#x has bits outside mask %#x", value, mk.toBytes(fi.bytes))}
	}
	fi.put(&m.Value, v)
	fi.put(&m.Mask, mk)
	return nil
}

// SetFieldUint sets a field of at most 64 bits from integers; mask ^0 (or any
// mask covering the whole width) is an exact match.
func (m *Match) SetFieldUint(f Field, value, mask uint64) error {
	fi := f.Info()
	if fi == nil {
		return &MatchError{Field: f, Err: ErrBadField, Detail: "unknown field"}
	}
	if fi.Bits > 64 {
		return &MatchError{Field: f, Err: ErrBadLength, Detail: "field wider than 64 bits"}
	}
	if fi.Bits < 64 {
		mask &= 1<<fi.Bits - 1
	}
	return m.SetField(f, fi.uintBytes(value), fi.uintBytes(mask))
}

// SetExact sets a field of at most 64 bits to an exact value.
func (m *Match) SetExact(f Field, value uint64) error {
	return m.SetFieldUint(f, value, ^uint64(0))
}

// Clear removes a field from the match (it becomes a wildcard).
func (m *Match) Clear(f Field) {
	if fi := f.Info(); fi != nil {
		fi.put(&m.Value, u128{})
		fi.put(&m.Mask, u128{})
	}
}

// Get returns a field's value and mask as big-endian bytes (nil, nil for an
// unknown field). Fields that share words read each other's bits: which one
// a match holds is decided by the prerequisites.
func (m *Match) Get(f Field) (value, mask []byte) {
	fi := f.Info()
	if fi == nil {
		return nil, nil
	}
	return fi.get(&m.Value).toBytes(fi.bytes), fi.get(&m.Mask).toBytes(fi.bytes)
}

// GetUint returns the low 64 bits of a field's value and mask.
func (m *Match) GetUint(f Field) (value, mask uint64) {
	fi := f.Info()
	if fi == nil {
		return 0, 0
	}
	return fi.get(&m.Value).lo, fi.get(&m.Mask).lo
}

// Has reports whether the mask has any bit of field f.
func (m *Match) Has(f Field) bool {
	fi := f.Info()
	if fi == nil {
		return false
	}
	for i, pt := range fi.Parts {
		if m.Mask[pt.Word]&fi.partMask(i) != 0 {
			return true
		}
	}
	return false
}

// exact reports whether field f is matched on all its bits.
func (m *Match) exact(f Field) bool {
	fi := fieldTab[f]
	for i, pt := range fi.Parts {
		if pm := fi.partMask(i); m.Mask[pt.Word]&pm != pm {
			return false
		}
	}
	return true
}

// Typed setters for the fields the loaders and generators use.

// SetInPort matches in_port exactly.
func (m *Match) SetInPort(port uint32) { _ = m.SetExact(FieldInPort, uint64(port)) }

// SetEthType matches eth_type exactly.
func (m *Match) SetEthType(t uint16) { _ = m.SetExact(FieldEthType, uint64(t)) }

// SetIPProto matches ip_proto exactly.
func (m *Match) SetIPProto(proto uint8) { _ = m.SetExact(FieldIPProto, uint64(proto)) }

// SetIPv4Src matches the first plen bits of ipv4_src; host bits must be 0.
func (m *Match) SetIPv4Src(addr uint32, plen int) error {
	return m.setPrefix32(FieldIPv4Src, addr, plen)
}

// SetIPv4Dst matches the first plen bits of ipv4_dst; host bits must be 0.
func (m *Match) SetIPv4Dst(addr uint32, plen int) error {
	return m.setPrefix32(FieldIPv4Dst, addr, plen)
}

func (m *Match) setPrefix32(f Field, addr uint32, plen int) error {
	if plen < 0 || plen > 32 {
		return &MatchError{Field: f, Err: ErrBadMask, Detail: fmt.Sprintf("prefix length %d not in 0..32", plen)}
	}
	return m.SetFieldUint(f, uint64(addr), prefixOnes(32, plen).lo)
}

// SetL4Src matches the source port bits (tcp_src, udp_src and sctp_src share
// them; ip_proto says which one it is) under mask.
func (m *Match) SetL4Src(port, mask uint16) error {
	return m.SetFieldUint(FieldTCPSrc, uint64(port), uint64(mask))
}

// SetL4Dst matches the destination port bits under mask (see SetL4Src).
func (m *Match) SetL4Dst(port, mask uint16) error {
	return m.SetFieldUint(FieldTCPDst, uint64(port), uint64(mask))
}

// SetTCPFlags matches tcp_flags under mask.
func (m *Match) SetTCPFlags(flags, mask uint16) error {
	return m.SetFieldUint(FieldTCPFlags, uint64(flags), uint64(mask))
}

// SetVlanVID matches vlan_vid (13 bits, VIDPresent included) under mask.
func (m *Match) SetVlanVID(vid, mask uint16) error {
	return m.SetFieldUint(FieldVlanVID, uint64(vid), uint64(mask))
}

// prereqOK reports whether every prerequisite of f is met, recursively.
func (m *Match) prereqOK(f Field, depth int) bool {
	fi := f.Info()
	if fi == nil || depth > 8 {
		return false
	}
	for _, pr := range fi.Prereqs {
		if !m.prereqMet(pr) || !m.prereqOK(pr.Field, depth+1) {
			return false
		}
	}
	return true
}

// prereqMet checks one prerequisite (not the prerequisite field's own).
func (m *Match) prereqMet(pr Prereq) bool {
	v, mk := m.GetUint(pr.Field)
	if pr.Bits != 0 {
		return mk&pr.Bits == pr.Bits && v&pr.Bits == pr.Bits
	}
	if !m.exact(pr.Field) {
		return false
	}
	return len(pr.Values) == 0 || slices.Contains(pr.Values, v)
}

// prereqText describes f's prerequisites, for errors.
func prereqText(f Field) string {
	var alts []string
	for _, pr := range f.Info().Prereqs {
		var s string
		switch {
		case pr.Bits != 0:
			s = fmt.Sprintf("%s with bits %#x set", pr.Field, pr.Bits)
		case len(pr.Values) == 0:
			s = fmt.Sprintf("%s matched exactly", pr.Field)
		default:
			vs := make([]string, len(pr.Values))
			for i, v := range pr.Values {
				vs[i] = formatUint(pr.Field.Info(), v)
			}
			s = fmt.Sprintf("%s=%s (exact)", pr.Field, strings.Join(vs, " or "))
		}
		alts = append(alts, s)
	}
	return strings.Join(alts, " and ")
}

// presentFields returns the fields a match is read as holding: every field
// with mask bits whose prerequisites are met, then (for an invalid match)
// fields holding mask bits that none of those explain. covered returns the
// mask bits the fields explain.
func (m *Match) presentFields() (fs []Field, covered Key) {
	var shown [maxField]bool
	for _, f := range allFields {
		if m.Has(f) && m.prereqOK(f, 0) {
			shown[f] = true
			for w := range covered {
				covered[w] |= fieldBits[f][w] & m.Mask[w]
			}
		}
	}
	for _, f := range allFields {
		if shown[f] {
			continue
		}
		extra := false
		for w := range covered {
			if m.Mask[w]&fieldBits[f][w]&^covered[w] != 0 {
				extra = true
			}
		}
		if extra {
			shown[f] = true
			for w := range covered {
				covered[w] |= fieldBits[f][w] & m.Mask[w]
			}
		}
	}
	for _, f := range allFields {
		if shown[f] {
			fs = append(fs, f)
		}
	}
	return fs, covered
}

// Validate checks that the match is one a table accepts: no value bit outside
// the mask, no mask bit where no field lives, and every matched bit belongs
// to a field whose prerequisites (OpenFlow 1.3 table 12) are matched. The
// error names the field and wraps ErrBadMatch and its kind. Validate sees
// bits, not fields: a match built field by field (an OpenFlow decoder) also
// checks each field with CheckField.
func (m *Match) Validate() error {
	for w := range m.Mask {
		if extra := m.Value[w] &^ m.Mask[w]; extra != 0 {
			return &MatchError{Field: ownerOf(w, extra), Err: ErrBadWildcards, Detail: fmt.Sprintf("key word %d: value bits %#x outside the mask", w, extra)}
		}
		if extra := m.Mask[w] &^ liveBits[w]; extra != 0 {
			return &MatchError{Field: NoField, Err: ErrBadField, Detail: fmt.Sprintf("key word %d: mask bits %#x where no field lives", w, extra)}
		}
	}
	var covered Key
	for _, f := range allFields {
		if m.Has(f) && m.prereqOK(f, 0) {
			fi := fieldTab[f]
			for i, pt := range fi.Parts {
				covered[pt.Word] |= fi.partMask(i)
			}
		}
	}
	for _, f := range allFields {
		fi := fieldTab[f]
		for i, pt := range fi.Parts {
			if m.Mask[pt.Word]&fi.partMask(i)&^covered[pt.Word] != 0 {
				return &MatchError{Field: f, Err: ErrBadPrereq, Detail: "needs " + prereqText(f)}
			}
		}
	}
	return nil
}

// CheckField reports whether the match meets field f's prerequisites
// (recursively), as an OpenFlow decoder must check for each OXM field it
// reads: fields that share key words (arp_op and ip_proto, ipv4_src and
// ipv6_src, tcp_dst and udp_dst, ...) hold the same bits, so Validate, which
// sees only bits, reads them as whichever field's prerequisites are met.
func (m *Match) CheckField(f Field) error {
	if f.Info() == nil {
		return &MatchError{Field: f, Err: ErrBadField, Detail: "unknown field"}
	}
	if !m.prereqOK(f, 0) {
		return &MatchError{Field: f, Err: ErrBadPrereq, Detail: "needs " + prereqText(f)}
	}
	return nil
}

// ownerOf returns the first field with bits among b of word w.
func ownerOf(w int, b uint32) Field {
	for _, f := range allFields {
		if fieldBits[f][w]&b != 0 {
			return f
		}
	}
	return NoField
}

// usedWords returns a bit set of the key words the mask uses.
func (m *Match) usedWords() uint32 {
	var u uint32
	for w, x := range m.Mask {
		if x != 0 {
			u |= 1 << w
		}
	}
	return u
}

// String writes the match in ovs-ofctl syntax, fields in OXM order:
// "eth_type=0x800,ip_proto=6,ipv4_src=10.0.0.0/8,tcp_dst=80". A match of
// every packet is "any". Mask bits no field explains appear as w<i>=v/m.
func (m *Match) String() string {
	fs, covered := m.presentFields()
	var parts []string
	for _, f := range fs {
		fi := f.Info()
		parts = append(parts, fi.Name+"="+formatField(fi, fi.get(&m.Value), fi.get(&m.Mask)))
	}
	for w := range m.Mask {
		if extra := m.Mask[w] &^ covered[w]; extra != 0 {
			parts = append(parts, fmt.Sprintf("w%d=%#x/%#x", w, m.Value[w]&extra, extra))
		}
	}
	if len(parts) == 0 {
		return "any"
	}
	return strings.Join(parts, ",")
}

func formatUint(fi *FieldInfo, v uint64) string {
	if fi.format == fmtHex {
		return fmt.Sprintf("%#x", v)
	}
	return strconv.FormatUint(v, 10)
}

// prefixLen returns the prefix length of a width-bit mask, or -1.
func prefixLen(mask u128, width int) int {
	n := bits.OnesCount64(mask.hi) + bits.OnesCount64(mask.lo)
	if mask == prefixOnes(width, n) {
		return n
	}
	return -1
}

func formatField(fi *FieldInfo, v, mask u128) string {
	full := mask == ones(fi.Bits)
	switch fi.format {
	case fmtIPv4, fmtIPv6:
		s := addrOf(fi, v).String()
		if full {
			return s
		}
		if n := prefixLen(mask, fi.Bits); n >= 0 {
			return s + "/" + strconv.Itoa(n)
		}
		return s + "/" + addrOf(fi, mask).String()
	case fmtMAC:
		s := formatMAC(v.toBytes(6))
		if full {
			return s
		}
		return s + "/" + formatMAC(mask.toBytes(6))
	}
	if full {
		return formatUint(fi, v.lo)
	}
	return fmt.Sprintf("%#x/%#x", v.lo, mask.lo)
}

func addrOf(fi *FieldInfo, v u128) netip.Addr {
	if fi.format == fmtIPv4 {
		return netip.AddrFrom4([4]byte(v.toBytes(4)))
	}
	return netip.AddrFrom16([16]byte(v.toBytes(16)))
}

func formatMAC(b []byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

// ParseMatch reads the syntax String writes: comma-separated name=value or
// name=value/mask (IPv4 and IPv6 masks also as /prefix-length); "" and "any"
// match every packet. It does not Validate the result.
func ParseMatch(s string) (Match, error) {
	var m Match
	s = strings.TrimSpace(s)
	if s == "" || s == "any" {
		return m, nil
	}
	var seen [maxField]bool
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, val, ok := strings.Cut(item, "=")
		if !ok {
			return Match{}, &MatchError{Field: NoField, Err: ErrBadValue, Detail: fmt.Sprintf("%q: want name=value", item)}
		}
		f, ok := FieldByName(strings.TrimSpace(name))
		if !ok {
			return Match{}, &MatchError{Field: NoField, Err: ErrBadField, Detail: fmt.Sprintf("unknown field %q", name)}
		}
		if seen[f] {
			return Match{}, &MatchError{Field: f, Err: ErrDupField, Detail: "given twice"}
		}
		seen[f] = true
		if err := m.parseField(f, strings.TrimSpace(val)); err != nil {
			return Match{}, err
		}
	}
	return m, nil
}

func (m *Match) parseField(f Field, s string) error {
	fi := f.Info()
	vs, ms, masked := strings.Cut(s, "/")
	v, err := parseValue(fi, vs)
	if err != nil {
		return err
	}
	mk := ones(fi.Bits)
	if masked {
		if mk, err = parseMask(fi, ms); err != nil {
			return err
		}
	}
	return m.SetField(f, v.toBytes(fi.bytes), mk.toBytes(fi.bytes))
}

func badValue(fi *FieldInfo, s string) error {
	return &MatchError{Field: fi.Field, Err: ErrBadValue, Detail: fmt.Sprintf("cannot read %q", s)}
}

func parseValue(fi *FieldInfo, s string) (u128, error) {
	switch fi.format {
	case fmtIPv4, fmtIPv6:
		a, err := netip.ParseAddr(s)
		if err != nil || a.Is4() != (fi.format == fmtIPv4) || a.Zone() != "" {
			return u128{}, badValue(fi, s)
		}
		return fromBytes(a.AsSlice()), nil
	case fmtMAC:
		return parseMAC(fi, s)
	}
	x, err := strconv.ParseUint(s, 0, 64)
	if err != nil || (fi.Bits < 64 && x>>fi.Bits != 0) {
		return u128{}, badValue(fi, s)
	}
	return u128{0, x}, nil
}

func parseMask(fi *FieldInfo, s string) (u128, error) {
	if fi.format == fmtIPv4 || fi.format == fmtIPv6 {
		if n, err := strconv.Atoi(s); err == nil {
			if n < 0 || n > fi.Bits {
				return u128{}, &MatchError{Field: fi.Field, Err: ErrBadMask, Detail: fmt.Sprintf("prefix length %d not in 0..%d", n, fi.Bits)}
			}
			return prefixOnes(fi.Bits, n), nil
		}
	}
	return parseValue(fi, s)
}

func parseMAC(fi *FieldInfo, s string) (u128, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return u128{}, badValue(fi, s)
	}
	var b [6]byte
	for i, p := range parts {
		x, err := strconv.ParseUint(p, 16, 8)
		if err != nil || len(p) == 0 || len(p) > 2 {
			return u128{}, badValue(fi, s)
		}
		b[i] = byte(x)
	}
	return fromBytes(b[:]), nil
}
