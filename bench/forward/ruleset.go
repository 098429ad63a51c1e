package forward

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// Rule sets where classification matters (--ruleset synthetic:N,C or
// classbench:FILE). Table 0 holds the rule set; each rule's instruction is
// goto_table:1 (its frames go on) or none (they are dropped: one rule in
// dropEvery, drawn at random). Table 1 holds one rule per pair,
// in_port=2k+1 → output:2k+2. A frame no rule of table 0 matches is dropped
// by the table miss (fail mode secure, no table-miss rule). The same rules
// go to Open vSwitch as an ovs-ofctl add-flows file.

// dropEvery: one rule of the set in dropEvery drops its frames.
const dropEvery = 8

// rulesetSeed seeds the rule set, its drop choices and the traffic.
const rulesetSeed = 1

// ruleSet is table 0's rules and what each does with its frames.
type ruleSet struct {
	spec  string      // as --ruleset gave it
	rules []flow.Rule // table 0, in installation order
	drop  []bool      // drop[i]: rules[i] drops its frames
	// eligible[k]: the rules pair k's frames may be drawn from (those
	// matching any in_port or pair k's generator port).
	eligible [][]int32
}

// parseRuleset checks a --ruleset value: trivial, synthetic:N,C[,...] or
// classbench:FILE (the file is read later).
func parseRuleset(s string) error {
	kind, arg, _ := strings.Cut(s, ":")
	switch kind {
	case "trivial":
		if arg != "" {
			return fmt.Errorf("trivial takes no argument")
		}
		return nil
	case "synthetic":
		_, err := flow.ParseSynthetic(arg)
		return err
	case "classbench":
		if arg == "" {
			return fmt.Errorf("classbench:FILE needs a file")
		}
		return nil
	case "events":
		_, err := parseEvents(s, 1)
		return err
	}
	return fmt.Errorf("%q: want trivial, synthetic:N,C[,F,Cm,f], classbench:FILE or events[:F]", s)
}

// loadRuleset builds the rule set of a non-trivial --ruleset for 'pairs'
// port pairs. Synthetic rules that match in_port (a random 32-bit value in
// GSwitch's generator) are moved onto a generator port, rule i onto pair
// i mod pairs, keeping its class. log is for what it has to say (nothing
// today).
func loadRuleset(spec string, pairs int, log io.Writer) (*ruleSet, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	rs := &ruleSet{spec: spec}
	switch kind {
	case "synthetic":
		sp, err := flow.ParseSynthetic(arg)
		if err != nil {
			return nil, err
		}
		rs.rules = sp.Generate(rulesetSeed)
		for i := range rs.rules {
			m := &rs.rules[i].Match
			if m.Has(flow.FieldInPort) {
				m.SetInPort(uint32(2*(i%pairs) + 1))
			}
		}
	case "classbench":
		fh, err := os.Open(arg)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		cb, err := flow.ReadClassBench(fh, arg)
		if err != nil {
			return nil, err
		}
		if rs.rules, err = flow.ExpandClassBench(cb); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("--ruleset %q has no rules to load", spec)
	}
	if len(rs.rules) == 0 {
		return nil, fmt.Errorf("--ruleset %s: no rules", spec)
	}
	// Every rule goes to the switches as it is: tcp_flags and masked
	// ports travel as Open vSwitch sends them in OpenFlow 1.3 (the ONF
	// tcp_flags field, masked tcp/udp ports), which gswitchd takes too. A
	// rule the FLOW_MOD encoding would not carry exactly is an error, never
	// a different rule installed.
	for i := range rs.rules {
		if err := openflow.MatchEncodable(&rs.rules[i].Match); err != nil {
			return nil, fmt.Errorf("--ruleset %s: rule %d: %w", spec, i, err)
		}
	}
	rng := rand.New(rand.NewPCG(rulesetSeed, 0xd209))
	rs.drop = make([]bool, len(rs.rules))
	for i := range rs.drop {
		rs.drop[i] = rng.IntN(dropEvery) == 0
	}
	rs.eligible = make([][]int32, pairs)
	for i := range rs.rules {
		in, mask := rs.rules[i].Match.GetUint(flow.FieldInPort)
		for k := range pairs {
			if mask == 0 || in == uint64(2*k+1) {
				rs.eligible[k] = append(rs.eligible[k], int32(i))
			}
		}
	}
	for k, e := range rs.eligible {
		if len(e) == 0 {
			return nil, fmt.Errorf("--ruleset %s: no rule matches pair %d's port %d", spec, k, 2*k+1)
		}
	}
	return rs, nil
}

// flowMods is the rule set as FLOW_MODs (xids from 'xid'): table 0's rules,
// then table 1's in_port rules of 'pairs' pairs.
func (rs *ruleSet) flowMods(pairs int, xid uint32) [][]byte {
	out := make([][]byte, 0, len(rs.rules)+pairs)
	for i := range rs.rules {
		fm := &rule.FlowMod{
			Command: rule.FlowAdd, TableID: 0, Priority: rs.rules[i].Priority,
			BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny,
			Match: rs.rules[i].Match, Cookie: uint64(i),
		}
		if !rs.drop[i] {
			fm.Instructions = rule.Instructions{Has: rule.HasGotoTable, GotoTable: 1}
		}
		out = append(out, openflow.EncodeFlowMod(xid+uint32(len(out)), fm))
	}
	for k := range pairs {
		var m flow.Match
		m.SetInPort(uint32(2*k + 1))
		out = append(out, openflow.EncodeFlowMod(xid+uint32(len(out)), &rule.FlowMod{
			Command: rule.FlowAdd, TableID: 1, Priority: matchPriority,
			BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny,
			Match: m,
			Instructions: rule.Instructions{
				Has:   rule.HasApplyActions,
				Apply: []rule.Action{{Kind: rule.ActOutput, Port: uint32(2*k + 2)}},
			},
		}))
	}
	return out
}

// ovsFile is the rule set as an ovs-ofctl add-flows file for one pair
// (Open vSwitch runs with ports 1 and 2 only).
func (rs *ruleSet) ovsFile() (string, error) {
	var b strings.Builder
	for i := range rs.rules {
		m, err := ovsMatch(&rs.rules[i].Match)
		if errors.Is(err, errNeverMatches) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("rule %d (%s): %w", i, rs.rules[i].Match.String(), err)
		}
		act := "goto_table:1"
		if rs.drop[i] {
			act = "drop"
		}
		fmt.Fprintf(&b, "table=0,priority=%d%s,actions=%s\n", rs.rules[i].Priority, m, act)
	}
	fmt.Fprintf(&b, "table=1,priority=%d,in_port=1,actions=output:2\n", matchPriority)
	return b.String(), nil
}

// errNeverMatches: no frame matches the rule in gswitchd (see ovsMatch).
var errNeverMatches = errors.New("the rule matches no frame")

// ovsMatch writes a match in ovs-ofctl's syntax (",field=value/mask" for
// each field), for the fields the synthetic and ClassBench sets use.
func ovsMatch(m *flow.Match) (string, error) {
	var b strings.Builder
	hex := func(name string, f flow.Field, full uint64) {
		v, mask := m.GetUint(f)
		if mask == full {
			fmt.Fprintf(&b, ",%s=%#x", name, v)
		} else {
			fmt.Fprintf(&b, ",%s=%#x/%#x", name, v, mask)
		}
	}
	mac := func(name string, f flow.Field) {
		v, mask := m.Get(f)
		fmt.Fprintf(&b, ",%s=%s/%s", name, macString(v), macString(mask))
	}
	ip := func(name string, f flow.Field) {
		v, mask := m.GetUint(f)
		fmt.Fprintf(&b, ",%s=%s/%s", name, ipString(uint32(v)), ipString(uint32(mask)))
	}
	rest := *m // what is left to write: must be nothing at the end
	for _, f := range []flow.Field{flow.FieldInPort, flow.FieldEthDst, flow.FieldEthSrc, flow.FieldEthType,
		flow.FieldVlanVID, flow.FieldIPDSCP, flow.FieldIPProto, flow.FieldIPv4Src, flow.FieldIPv4Dst,
		flow.FieldTCPSrc, flow.FieldTCPDst, flow.FieldTCPFlags} {
		if !m.Has(f) {
			continue
		}
		rest.Clear(f)
		switch f {
		case flow.FieldInPort:
			v, _ := m.GetUint(f)
			fmt.Fprintf(&b, ",in_port=%d", v)
		case flow.FieldEthDst:
			mac("dl_dst", f)
		case flow.FieldEthSrc:
			mac("dl_src", f)
		case flow.FieldEthType:
			hex("dl_type", f, 0xffff)
		case flow.FieldVlanVID:
			// vlan_tci: the VID and OFPVID_PRESENT (the CFI bit), with
			// the PCP (bits 13-15) if matched.
			vid, vmask := m.GetUint(f)
			tci, tmask := vid&0x1fff, vmask&0x1fff
			if pcp, pmask := m.GetUint(flow.FieldVlanPCP); m.Has(flow.FieldVlanPCP) {
				tci, tmask = tci|pcp<<13, tmask|pmask<<13
				rest.Clear(flow.FieldVlanPCP)
			}
			fmt.Fprintf(&b, ",vlan_tci=%#04x/%#04x", tci, tmask)
		case flow.FieldIPDSCP:
			hex("ip_dscp", f, 0x3f)
		case flow.FieldIPProto:
			hex("nw_proto", f, 0xff)
		case flow.FieldIPv4Src:
			ip("nw_src", f)
		case flow.FieldIPv4Dst:
			ip("nw_dst", f)
		case flow.FieldTCPSrc, flow.FieldTCPDst:
			// The port bits: Open vSwitch's tp_src/tp_dst need TCP,
			// UDP or SCTP in nw_proto.
			proto, pmask := m.GetUint(flow.FieldIPProto)
			if pmask == 0 || (proto != flow.IPProtoTCP && proto != flow.IPProtoUDP && proto != 132) {
				return "", fmt.Errorf("a port match without ip_proto TCP, UDP or SCTP")
			}
			hex(map[flow.Field]string{flow.FieldTCPSrc: "tp_src", flow.FieldTCPDst: "tp_dst"}[f], f, 0xffff)
		case flow.FieldTCPFlags:
			// The key's tcp_flags holds the header's 12 flag bits: a
			// rule wanting a bit above them set never matches (its line
			// is left out), one wanting it clear always does.
			v, mask := m.GetUint(f)
			if v&mask&^0xfff != 0 {
				return "", errNeverMatches
			}
			if mask&0xfff == 0xfff {
				fmt.Fprintf(&b, ",tcp_flags=%#x", v&0xfff)
			} else if mask&0xfff != 0 {
				fmt.Fprintf(&b, ",tcp_flags=%#x/%#x", v&mask&0xfff, mask&0xfff)
			}
		}
	}
	if !rest.IsAll() {
		return "", fmt.Errorf("fields %s: not written for Open vSwitch", rest.String())
	}
	return b.String(), nil
}

func macString(b []byte) string {
	s := make([]string, len(b))
	for i, x := range b {
		s[i] = strconv.FormatUint(uint64(x)|0x100, 16)[1:]
	}
	return strings.Join(s, ":")
}
