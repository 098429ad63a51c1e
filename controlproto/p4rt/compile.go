package p4rt

import (
	"fmt"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// flowKey is one pipeline flow entry a P4 entry compiles to: its table, match
// and priority (its identity in the pipeline's OpenFlow semantics).
type flowKey struct {
	table uint8
	prio  uint16
	match flow.Match
}

// maxExpansion bounds the flow entries one ACL entry may expand into
// (ranges become prefixes, a port match without ip_proto becomes a TCP
// and a UDP entry).
const maxExpansion = 1024

// Cookie marks the pipeline flow entries the P4Runtime server installs.
const Cookie uint64 = 0x7034_7274_0000_0000 // "p4rt"

// compileRules returns the flow entries of a (non-default) entry. An LPM
// entry has priority prefix length + 1 (the default entry has 0): among the
// prefixes that match, the longest wins.
func compileRules(s *spec) ([]flowKey, *Error) {
	var base flow.Match
	prio := uint16(1)
	switch s.t.p.GetPreamble().GetId() {
	case TableL2:
		if err := base.SetField(flow.FieldEthDst, s.fields[1].value, nil); err != nil {
			return nil, errf(codes.Internal, "l2_exact: %v", err)
		}
	case TableIPv4:
		base.SetEthType(flow.EthTypeIPv4)
		if f := s.fields[1]; f != nil { // omitted: the /0 route
			if err := base.SetField(flow.FieldIPv4Dst, f.value, f.mask); err != nil {
				return nil, errf(codes.Internal, "ipv4_lpm: %v", err)
			}
			prio = uint16(f.plen) + 1
		}
	case TableIPv6:
		base.SetEthType(flow.EthTypeIPv6)
		if f := s.fields[1]; f != nil { // omitted: the /0 route
			if err := base.SetField(flow.FieldIPv6Dst, f.value, f.mask); err != nil {
				return nil, errf(codes.Internal, "ipv6_lpm: %v", err)
			}
			prio = uint16(f.plen) + 1
		}
	case TableACL:
		ms, err := aclMatches(s)
		if err != nil {
			return nil, err
		}
		out := make([]flowKey, len(ms))
		for i, m := range ms {
			out[i] = flowKey{table: s.t.pipe, prio: uint16(s.priority), match: m}
		}
		return out, nil
	}
	return []flowKey{{table: s.t.pipe, prio: prio, match: base}}, nil
}

// aclMatches expands an ACL entry into flow matches. The pipeline's flow
// tables follow OpenFlow's prerequisites: IPv4 addresses need
// eth_type=0x0800, IPv6 addresses (ipv6_src, ipv6_dst) eth_type=0x86dd,
// ip_proto needs an exact IPv4 or IPv6 eth_type, L4 ports an exact TCP or
// UDP ip_proto. So an entry that leaves eth_type (or ip_proto) open but
// matches fields that need it becomes one flow entry per value its ternary
// admits; port ranges become prefixes (the fewest value/mask pairs). An
// entry that no packet can match (eth_type 0x86dd with an IPv4 address, or
// 0x0800 with an IPv6 one) compiles to no flow entry at all; one with
// addresses of both families is refused by validation (checkACLFamily).
func aclMatches(s *spec) ([]flow.Match, *Error) {
	f := s.fields
	var base flow.Match
	set := func(ff flow.Field, id uint32) *Error {
		if x := f[id]; x != nil {
			if err := base.SetField(ff, x.value, x.mask); err != nil {
				return errf(codes.Internal, "acl field %d: %v", id, err)
			}
		}
		return nil
	}
	for _, p := range []struct {
		ff flow.Field
		id uint32
	}{{flow.FieldInPort, aclInPort}, {flow.FieldEthSrc, aclEthSrc}, {flow.FieldEthDst, aclEthDst}} {
		if err := set(p.ff, p.id); err != nil {
			return nil, err
		}
	}
	admits := func(x *field, v uint64) bool {
		return x == nil || toUint(x.value) == v&toUint(x.mask)
	}
	hasPorts := f[aclL4Src] != nil || f[aclL4Dst] != nil
	needIPv4 := f[aclIPv4Src] != nil || f[aclIPv4Dst] != nil
	needIPv6 := f[aclIPv6Src] != nil || f[aclIPv6Dst] != nil
	needIP := needIPv4 || needIPv6 || f[aclIPProto] != nil || hasPorts
	var ethTypes []uint64
	switch {
	case needIPv4 && needIPv6: // refused by checkACLFamily
		return nil, errf(codes.InvalidArgument, "acl entry matches IPv4 and IPv6 addresses")
	case needIPv4:
		ethTypes = []uint64{flow.EthTypeIPv4}
	case needIPv6:
		ethTypes = []uint64{flow.EthTypeIPv6}
	case needIP:
		ethTypes = []uint64{flow.EthTypeIPv4, flow.EthTypeIPv6}
	}
	var protos []uint64
	if hasPorts {
		protos = []uint64{flow.IPProtoTCP, flow.IPProtoUDP}
	}
	var out []flow.Match
	emit := func(m flow.Match) *Error {
		if len(out) >= maxExpansion {
			return errf(codes.ResourceExhausted, "acl entry expands into more than %d flow entries (ranges become prefixes)", maxExpansion)
		}
		if err := m.Validate(); err != nil {
			return errf(codes.Internal, "acl entry compiles to an invalid flow match: %v", err)
		}
		out = append(out, m)
		return nil
	}
	if !needIP {
		if err := set(flow.FieldEthType, aclEthType); err != nil {
			return nil, err
		}
		return out, emit(base)
	}
	srcs, dsts := portPrefixes(f[aclL4Src]), portPrefixes(f[aclL4Dst])
	for _, et := range ethTypes {
		if !admits(f[aclEthType], et) {
			continue
		}
		m := base
		m.SetEthType(uint16(et))
		if et == flow.EthTypeIPv4 {
			if err := setOn(&m, flow.FieldIPv4Src, f[aclIPv4Src]); err != nil {
				return nil, err
			}
			if err := setOn(&m, flow.FieldIPv4Dst, f[aclIPv4Dst]); err != nil {
				return nil, err
			}
		} else {
			if err := setOn(&m, flow.FieldIPv6Src, f[aclIPv6Src]); err != nil {
				return nil, err
			}
			if err := setOn(&m, flow.FieldIPv6Dst, f[aclIPv6Dst]); err != nil {
				return nil, err
			}
		}
		if !hasPorts {
			if err := setOn(&m, flow.FieldIPProto, f[aclIPProto]); err != nil {
				return nil, err
			}
			if err := emit(m); err != nil {
				return nil, err
			}
			continue
		}
		for _, proto := range protos {
			if !admits(f[aclIPProto], proto) {
				continue
			}
			mp := m
			mp.SetIPProto(uint8(proto))
			for _, sp := range srcs {
				for _, dp := range dsts {
					mm := mp
					if sp[1] != 0 {
						_ = mm.SetL4Src(sp[0], sp[1])
					}
					if dp[1] != 0 {
						_ = mm.SetL4Dst(dp[0], dp[1])
					}
					if err := emit(mm); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	return out, nil
}

func setOn(m *flow.Match, ff flow.Field, x *field) *Error {
	if x == nil {
		return nil
	}
	if err := m.SetField(ff, x.value, x.mask); err != nil {
		return errf(codes.Internal, "%s: %v", ff, err)
	}
	return nil
}

// portPrefixes returns the value/mask pairs of a range field ({0,0}: any).
func portPrefixes(x *field) [][2]uint16 {
	if x == nil {
		return [][2]uint16{{0, 0}}
	}
	return flow.RangePrefixes(uint16(toUint(x.value)), uint16(toUint(x.mask)))
}

// compileAction turns a P4 action into the pipeline instructions of an
// entry in pipeline table tbl: the action's effect goes into the action
// set (write-actions, one per kind, so a later table overrides an earlier
// one's forwarding decision, as the P4 program's metadata does), drop
// clears the action set, and every table but the last goes on to the next
// (goto_table).
func compileAction(a *p4v1.Action, tbl uint8, last bool) (rule.Instructions, error) {
	var in rule.Instructions
	if !last {
		in.Has |= rule.HasGotoTable
		in.GotoTable = tbl + 1
	}
	if a == nil {
		return in, nil
	}
	param := func(id uint32) []byte {
		for _, p := range a.GetParams() {
			if p.GetParamId() == id {
				return p.GetValue()
			}
		}
		return nil
	}
	mac := func(id uint32) []byte {
		v := param(id)
		out := make([]byte, 6)
		copy(out[6-len(v):], v)
		return out
	}
	output := func(port uint64) rule.Action {
		return rule.Action{Kind: rule.ActOutput, Port: uint32(port), MaxLen: rule.MaxLenNoBuffer}
	}
	setMACs := func(src, dst uint32) []rule.Action {
		return []rule.Action{
			{Kind: rule.ActSetField, Field: flow.FieldEthSrc, Value: mac(src)},
			{Kind: rule.ActSetField, Field: flow.FieldEthDst, Value: mac(dst)},
		}
	}
	var w []rule.Action
	switch a.GetActionId() {
	case ActionNoAction:
		return in, nil
	case ActionForward:
		w = append(w, output(toUint(param(1))))
	case ActionDrop:
		in.Has |= rule.HasClearActions
		return in, nil
	case ActionSendToCPU:
		w = append(w, output(uint64(rule.PortController)))
	case ActionSetNextHop:
		w = append(setMACs(2, 3), rule.Action{Kind: rule.ActDecNwTTL}, output(toUint(param(1))))
	case ActionSetMACs:
		w = setMACs(1, 2)
	case ActionDecrementTTL:
		w = append(w, rule.Action{Kind: rule.ActDecNwTTL})
	case ActionSetMulticastGroup:
		w = append(w, rule.Action{Kind: rule.ActGroup, ID: uint32(toUint(param(1)))})
	default:
		return in, fmt.Errorf("action %#x has no compilation", a.GetActionId())
	}
	in.Has |= rule.HasWriteActions
	in.Write = w
	return in, nil
}
