package p4rt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"strings"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// Error is a P4Runtime error: the canonical gRPC code the specification
// names for the failure, and a message that says what was wrong and where.
type Error struct {
	Code codes.Code
	Msg  string
}

func (e *Error) Error() string { return e.Code.String() + ": " + e.Msg }

func errf(c codes.Code, format string, args ...any) *Error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// maxPortParam is the highest port a forward or set_next_hop may name
// (OpenFlow's OFPP_MAX: gswitch numbers its ports as OpenFlow does).
const maxPortParam = 0xffffff00

// maxPriority is the highest ACL priority gswitch supports: entries become
// pipeline flow entries with 16-bit priorities.
const maxPriority = 0xffff

// field is one validated match field in fixed-width form: big-endian bytes
// of the field's byte width.
type field struct {
	id    uint32
	kind  p4cfg.MatchField_MatchType
	bytes int
	value []byte // exact, lpm, ternary; range: low
	mask  []byte // ternary; lpm: prefix mask; range: high
	plen  int32
}

// spec is a validated table entry: its key (the identity P4Runtime gives
// it: table, match and priority), its canonical form (what Read returns),
// and its fields and action in the form the compiler takes.
type spec struct {
	t         *tableInfo
	key       string
	isDefault bool
	fields    map[uint32]*field
	priority  int32
	action    *p4v1.Action // nil: MODIFY without an action, or the default entry reset
	canon     *p4v1.TableEntry
}

// fit checks a P4Runtime bytestring against a bitwidth (§8.4: not empty,
// no set bit beyond the width; leading zero bytes are allowed) and returns
// its value in width-sized big-endian bytes.
func fit(b []byte, bitwidth int32, what string) ([]byte, *Error) {
	if len(b) == 0 {
		return nil, errf(codes.OutOfRange, "%s: empty bytestring", what)
	}
	t := bytes.TrimLeft(b, "\x00")
	if n := len(t); n > 0 && (n-1)*8+bits.Len8(t[0]) > int(bitwidth) {
		return nil, errf(codes.OutOfRange, "%s: value 0x%x does not fit in bit<%d>", what, b, bitwidth)
	}
	out := make([]byte, (bitwidth+7)/8)
	copy(out[len(out)-len(t):], t)
	return out, nil
}

// canonical returns the shortest bytestring of a value (§8.4): leading zero
// bytes dropped, one byte for zero.
func canonical(b []byte) []byte {
	t := bytes.TrimLeft(b, "\x00")
	if len(t) == 0 {
		return []byte{0}
	}
	return slices.Clone(t)
}

func isZero(b []byte) bool { return len(bytes.TrimLeft(b, "\x00")) == 0 }

func toUint(b []byte) uint64 {
	var v uint64
	for _, c := range b {
		v = v<<8 | uint64(c)
	}
	return v
}

// prefixMask returns plen one bits followed by zeros, in n bytes.
func prefixMask(n int, plen int32) []byte {
	m := make([]byte, n)
	for i := range m {
		switch {
		case plen >= 8:
			m[i] = 0xff
			plen -= 8
		case plen > 0:
			m[i] = byte(0xff << (8 - plen))
			plen = 0
		}
	}
	return m
}

// widthMask is the all-ones value of a bitwidth in n bytes.
func widthMask(n int, bitwidth int32) []byte {
	m := prefixMask(n, int32(n*8))
	if r := int32(n*8) - bitwidth; r > 0 {
		m[0] >>= r
	}
	return m
}

func and(a, b []byte) []byte {
	out := make([]byte, len(a))
	for i := range a {
		out[i] = a[i] & b[i]
	}
	return out
}

// checkEntry validates a table entry of a Write update completely: ids,
// match kinds, bytestrings, prefix lengths, ternary masks, ranges,
// priorities, the action and its parameters, and what gswitch does not
// support. A DELETE looks at the key only (§9.1: the other fields are
// ignored).
func (p *program) checkEntry(te *p4v1.TableEntry, op p4v1.Update_Type) (*spec, *Error) {
	if te.GetTableId() == 0 {
		return nil, errf(codes.InvalidArgument, "table_id 0: a write must name a table")
	}
	t := p.tables[te.GetTableId()]
	if t == nil {
		return nil, errf(codes.NotFound, "table_id %#x is not in gswitch's pipeline", te.GetTableId())
	}
	name := t.p.GetPreamble().GetName()
	if te.GetIsConst() {
		return nil, errf(codes.InvalidArgument, "table %s: is_const must be false in a write", name)
	}
	s := &spec{t: t, isDefault: te.GetIsDefaultAction(), fields: map[uint32]*field{}, priority: te.GetPriority()}
	if s.isDefault {
		if op != p4v1.Update_MODIFY {
			return nil, errf(codes.InvalidArgument, "table %s: the default entry can only be modified, not %s", name, op)
		}
		if len(te.GetMatch()) > 0 || te.GetPriority() != 0 {
			return nil, errf(codes.InvalidArgument, "table %s: the default entry has no match and priority 0", name)
		}
	} else if err := s.checkMatch(te); err != nil {
		return nil, err
	}
	if !s.isDefault {
		switch {
		case t.ternary && te.GetPriority() <= 0:
			return nil, errf(codes.InvalidArgument, "table %s: priority %d: a table with ternary or range fields needs a priority > 0", name, te.GetPriority())
		case t.ternary && te.GetPriority() > maxPriority:
			return nil, errf(codes.OutOfRange, "table %s: priority %d: gswitch supports 1..%d", name, te.GetPriority(), maxPriority)
		case !t.ternary && te.GetPriority() != 0:
			return nil, errf(codes.InvalidArgument, "table %s: priority %d: a table without ternary or range fields takes priority 0", name, te.GetPriority())
		}
	}
	s.key = s.makeKey()
	if op == p4v1.Update_DELETE {
		s.canon = s.canonical(te, nil)
		return s, nil
	}
	if err := s.checkResources(te); err != nil {
		return nil, err
	}
	if te.GetAction() == nil {
		if op == p4v1.Update_INSERT {
			return nil, errf(codes.InvalidArgument, "table %s: an INSERT needs an action", name)
		}
	} else {
		a, err := p.checkAction(t, te.GetAction(), s.isDefault)
		if err != nil {
			return nil, err
		}
		s.action = a
	}
	s.canon = s.canonical(te, s.action)
	return s, nil
}

func (s *spec) checkMatch(te *p4v1.TableEntry) *Error {
	t, name := s.t, s.t.p.GetPreamble().GetName()
	for _, fm := range te.GetMatch() {
		pf := t.fields[fm.GetFieldId()]
		if pf == nil {
			return errf(codes.InvalidArgument, "table %s: match field id %d does not exist", name, fm.GetFieldId())
		}
		where := fmt.Sprintf("table %s: field %s", name, pf.GetName())
		if s.fields[fm.GetFieldId()] != nil {
			return errf(codes.InvalidArgument, "%s given twice", where)
		}
		f, err := checkField(pf, fm, where)
		if err != nil {
			return err
		}
		s.fields[f.id] = f
	}
	for _, pf := range t.p.GetMatchFields() {
		if pf.GetMatchType() == p4cfg.MatchField_EXACT && s.fields[pf.GetId()] == nil {
			return errf(codes.InvalidArgument, "table %s: exact field %s is missing", name, pf.GetName())
		}
	}
	if t.p.GetPreamble().GetId() == TableACL {
		return s.checkACLFamily()
	}
	return nil
}

// checkACLFamily refuses an ACL entry that matches IPv4 and IPv6 addresses
// at once: a packet carries one or the other, so no packet could match it,
// and such an entry is always a controller's mistake (two entries, one per
// family, is what it means).
func (s *spec) checkACLFamily() *Error {
	var v4, v6 []string
	for _, id := range []uint32{aclIPv4Src, aclIPv4Dst} {
		if s.fields[id] != nil {
			v4 = append(v4, s.t.fields[id].GetName())
		}
	}
	for _, id := range []uint32{aclIPv6Src, aclIPv6Dst} {
		if s.fields[id] != nil {
			v6 = append(v6, s.t.fields[id].GetName())
		}
	}
	if len(v4) > 0 && len(v6) > 0 {
		return errf(codes.InvalidArgument, "table %s: the entry matches IPv4 addresses (%s) and IPv6 addresses (%s): a packet has one or the other; write one entry per address family",
			s.t.p.GetPreamble().GetName(), strings.Join(v4, ", "), strings.Join(v6, ", "))
	}
	return nil
}

func checkField(pf *p4cfg.MatchField, fm *p4v1.FieldMatch, where string) (*field, *Error) {
	bw := pf.GetBitwidth()
	f := &field{id: pf.GetId(), kind: pf.GetMatchType(), bytes: int(bw+7) / 8}
	var err *Error
	switch pf.GetMatchType() {
	case p4cfg.MatchField_EXACT:
		if fm.GetExact() == nil {
			return nil, errf(codes.InvalidArgument, "%s is exact: got %s", where, matchKind(fm))
		}
		f.value, err = fit(fm.GetExact().GetValue(), bw, where)
	case p4cfg.MatchField_LPM:
		lpm := fm.GetLpm()
		if lpm == nil {
			return nil, errf(codes.InvalidArgument, "%s is lpm: got %s", where, matchKind(fm))
		}
		if lpm.GetPrefixLen() <= 0 || lpm.GetPrefixLen() > bw {
			return nil, errf(codes.InvalidArgument, "%s: prefix_len %d: want 1..%d (a don't-care match is omitted)", where, lpm.GetPrefixLen(), bw)
		}
		if f.value, err = fit(lpm.GetValue(), bw, where); err != nil {
			return nil, err
		}
		f.plen = lpm.GetPrefixLen()
		f.mask = prefixMask(f.bytes, int32(f.bytes*8)-bw+f.plen)
		if !bytes.Equal(and(f.value, f.mask), f.value) {
			return nil, errf(codes.InvalidArgument, "%s: value 0x%x has bits set beyond prefix length %d", where, lpm.GetValue(), f.plen)
		}
	case p4cfg.MatchField_TERNARY:
		tern := fm.GetTernary()
		if tern == nil {
			return nil, errf(codes.InvalidArgument, "%s is ternary: got %s", where, matchKind(fm))
		}
		if f.value, err = fit(tern.GetValue(), bw, where+" value"); err != nil {
			return nil, err
		}
		if f.mask, err = fit(tern.GetMask(), bw, where+" mask"); err != nil {
			return nil, err
		}
		if isZero(f.mask) {
			return nil, errf(codes.InvalidArgument, "%s: mask 0 (a don't-care match is omitted)", where)
		}
		if !bytes.Equal(and(f.value, f.mask), f.value) {
			return nil, errf(codes.InvalidArgument, "%s: value 0x%x has bits outside mask 0x%x", where, tern.GetValue(), tern.GetMask())
		}
	case p4cfg.MatchField_RANGE:
		r := fm.GetRange()
		if r == nil {
			return nil, errf(codes.InvalidArgument, "%s is range: got %s", where, matchKind(fm))
		}
		if f.value, err = fit(r.GetLow(), bw, where+" low"); err != nil {
			return nil, err
		}
		if f.mask, err = fit(r.GetHigh(), bw, where+" high"); err != nil {
			return nil, err
		}
		if bytes.Compare(f.value, f.mask) > 0 {
			return nil, errf(codes.InvalidArgument, "%s: low 0x%x above high 0x%x", where, r.GetLow(), r.GetHigh())
		}
		if isZero(f.value) && bytes.Equal(f.mask, widthMask(f.bytes, bw)) {
			return nil, errf(codes.InvalidArgument, "%s: the full range (a don't-care match is omitted)", where)
		}
	default:
		return nil, errf(codes.Internal, "%s: match type %s", where, pf.GetMatchType())
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

func matchKind(fm *p4v1.FieldMatch) string {
	switch fm.GetFieldMatchType().(type) {
	case *p4v1.FieldMatch_Exact_:
		return "exact"
	case *p4v1.FieldMatch_Lpm:
		return "lpm"
	case *p4v1.FieldMatch_Ternary_:
		return "ternary"
	case *p4v1.FieldMatch_Range_:
		return "range"
	case *p4v1.FieldMatch_Optional_:
		return "optional"
	case nil:
		return "no match kind"
	}
	return "another match kind"
}

// checkResources refuses what the fixed pipeline does not have: meters,
// idle timeouts, counter writes.
func (s *spec) checkResources(te *p4v1.TableEntry) *Error {
	name := s.t.p.GetPreamble().GetName()
	switch {
	case te.GetMeterConfig() != nil || te.GetMeterCounterData() != nil:
		return errf(codes.InvalidArgument, "table %s has no direct meter", name)
	case te.GetIdleTimeoutNs() != 0:
		return errf(codes.InvalidArgument, "table %s does not support idle timeouts", name)
	case te.GetCounterData() != nil:
		return errf(codes.Unimplemented, "table %s: writing direct counter values is not supported (they are read-only)", name)
	}
	return nil
}

// checkAction validates a direct action for table t and returns it in
// canonical form (params by id, shortest bytestrings).
func (p *program) checkAction(t *tableInfo, ta *p4v1.TableAction, isDefault bool) (*p4v1.Action, *Error) {
	name := t.p.GetPreamble().GetName()
	a := ta.GetAction()
	if a == nil {
		return nil, errf(codes.InvalidArgument, "table %s is a direct table: its action must be an action, not an action profile member, group or set", name)
	}
	scope, ok := t.actions[a.GetActionId()]
	pa := p.actions[a.GetActionId()]
	if !ok || pa == nil {
		return nil, errf(codes.InvalidArgument, "table %s: action id %#x is not one of the table's actions", name, a.GetActionId())
	}
	aname := pa.GetPreamble().GetName()
	if scope == p4cfg.ActionRef_DEFAULT_ONLY && !isDefault {
		return nil, errf(codes.PermissionDenied, "table %s: action %s is for the default entry only", name, aname)
	}
	if scope == p4cfg.ActionRef_TABLE_ONLY && isDefault {
		return nil, errf(codes.PermissionDenied, "table %s: action %s is not allowed as the default action", name, aname)
	}
	out := &p4v1.Action{ActionId: a.GetActionId()}
	seen := map[uint32]bool{}
	for _, prm := range a.GetParams() {
		var pp *p4cfg.Action_Param
		for _, x := range pa.GetParams() {
			if x.GetId() == prm.GetParamId() {
				pp = x
			}
		}
		if pp == nil {
			return nil, errf(codes.InvalidArgument, "action %s: param id %d does not exist", aname, prm.GetParamId())
		}
		if seen[pp.GetId()] {
			return nil, errf(codes.InvalidArgument, "action %s: param %s given twice", aname, pp.GetName())
		}
		seen[pp.GetId()] = true
		v, err := fit(prm.GetValue(), pp.GetBitwidth(), fmt.Sprintf("action %s: param %s", aname, pp.GetName()))
		if err != nil {
			return nil, err
		}
		if pp.GetName() == "group_id" && isZero(v) {
			return nil, errf(codes.InvalidArgument, "action %s: group_id 0 is no multicast group (1..%d)", aname, maxMulticastGroupID)
		}
		if pp.GetName() == "port" {
			if port := toUint(v); port == 0 || port > maxPortParam {
				return nil, errf(codes.InvalidArgument, "action %s: port %d: want 1..%#x", aname, port, maxPortParam)
			}
		}
		out.Params = append(out.Params, &p4v1.Action_Param{ParamId: pp.GetId(), Value: canonical(v)})
	}
	for _, x := range pa.GetParams() {
		if !seen[x.GetId()] {
			return nil, errf(codes.InvalidArgument, "action %s: param %s is missing", aname, x.GetName())
		}
	}
	slices.SortFunc(out.Params, func(a, b *p4v1.Action_Param) int { return int(a.ParamId) - int(b.ParamId) })
	return out, nil
}

// makeKey encodes the entry's identity: table, fields in id order, priority.
func (s *spec) makeKey() string {
	var b strings.Builder
	var w [8]byte
	binary.BigEndian.PutUint32(w[:4], s.t.p.GetPreamble().GetId())
	b.Write(w[:4])
	if s.isDefault {
		b.WriteString("default")
		return b.String()
	}
	for _, pf := range s.t.p.GetMatchFields() {
		f := s.fields[pf.GetId()]
		if f == nil {
			b.WriteByte(0)
			continue
		}
		b.WriteByte(1)
		b.Write(f.value)
		b.Write(f.mask)
	}
	binary.BigEndian.PutUint32(w[:4], uint32(s.priority))
	b.Write(w[:4])
	return b.String()
}

// canonical builds the entry as Read returns it: fields in id order with
// shortest bytestrings, the canonical action.
func (s *spec) canonical(te *p4v1.TableEntry, a *p4v1.Action) *p4v1.TableEntry {
	out := &p4v1.TableEntry{TableId: te.GetTableId(), Priority: s.priority, IsDefaultAction: s.isDefault,
		ControllerMetadata: te.GetControllerMetadata(), Metadata: slices.Clone(te.GetMetadata())}
	for _, pf := range s.t.p.GetMatchFields() {
		f := s.fields[pf.GetId()]
		if f == nil {
			continue
		}
		fm := &p4v1.FieldMatch{FieldId: f.id}
		switch f.kind {
		case p4cfg.MatchField_EXACT:
			fm.FieldMatchType = &p4v1.FieldMatch_Exact_{Exact: &p4v1.FieldMatch_Exact{Value: canonical(f.value)}}
		case p4cfg.MatchField_LPM:
			fm.FieldMatchType = &p4v1.FieldMatch_Lpm{Lpm: &p4v1.FieldMatch_LPM{Value: canonical(f.value), PrefixLen: f.plen}}
		case p4cfg.MatchField_TERNARY:
			fm.FieldMatchType = &p4v1.FieldMatch_Ternary_{Ternary: &p4v1.FieldMatch_Ternary{Value: canonical(f.value), Mask: canonical(f.mask)}}
		case p4cfg.MatchField_RANGE:
			fm.FieldMatchType = &p4v1.FieldMatch_Range_{Range: &p4v1.FieldMatch_Range{Low: canonical(f.value), High: canonical(f.mask)}}
		}
		out.Match = append(out.Match, fm)
	}
	if a != nil {
		out.Action = &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: proto.Clone(a).(*p4v1.Action)}}
	}
	return out
}
