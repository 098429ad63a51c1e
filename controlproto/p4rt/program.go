package p4rt

import (
	_ "embed"
	"fmt"
	"slices"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// P4Source is gswitch.p4, the reference source of the fixed pipeline.
//
//go:embed p4/gswitch.p4
var P4Source []byte

// P4InfoText is the fixed pipeline's P4Info as text protobuf.
//
//go:embed p4/gswitch.p4info.txtpb
var P4InfoText []byte

// The ids of gswitch.p4info.txtpb the server's code refers to.
const (
	TableL2   uint32 = 0x02000001
	TableIPv4 uint32 = 0x02000002
	TableIPv6 uint32 = 0x02000003
	TableACL  uint32 = 0x02000004

	ActionNoAction uint32 = 0x01445b37 // p4c's: core.p4's NoAction carries no @id

	ActionForward      uint32 = 0x01000002
	ActionDrop         uint32 = 0x01000003
	ActionSendToCPU    uint32 = 0x01000004
	ActionSetNextHop   uint32 = 0x01000005
	ActionSetMACs      uint32 = 0x01000006
	ActionDecrementTTL uint32 = 0x01000007
	// ActionSetMulticastGroup (the ACL's) replicates the packet to a
	// multicast group's replicas (PacketReplicationEngineEntry).
	ActionSetMulticastGroup uint32 = 0x01000008

	CounterL2   uint32 = 0x13000001
	CounterIPv4 uint32 = 0x13000002
	CounterIPv6 uint32 = 0x13000003
	CounterACL  uint32 = 0x13000004

	PacketInHeader  uint32 = 0x04000001
	PacketOutHeader uint32 = 0x04000002
)

// The ACL's match field ids (the IPv6 addresses were added last: the
// earlier ids never change).
const (
	aclInPort uint32 = iota + 1
	aclEthSrc
	aclEthDst
	aclEthType
	aclIPv4Src
	aclIPv4Dst
	aclIPProto
	aclL4Src
	aclL4Dst
	aclIPv6Src
	aclIPv6Dst
)

// P4Info returns a fresh copy of the fixed pipeline's P4Info.
func P4Info() *p4cfg.P4Info {
	return proto.Clone(fixed.info).(*p4cfg.P4Info)
}

// program is the P4Info indexed for validation.
type program struct {
	info    *p4cfg.P4Info
	tables  map[uint32]*tableInfo
	actions map[uint32]*p4cfg.Action
	// counters maps a direct counter id to its table.
	counters map[uint32]uint32
}

// tableInfo is one P4 table: its P4Info, its fields by id, the actions it
// allows (and their scope), and the pipeline table it lives in.
type tableInfo struct {
	p        *p4cfg.Table
	fields   map[uint32]*p4cfg.MatchField
	actions  map[uint32]p4cfg.ActionRef_Scope
	ternary  bool  // some field is ternary, range or optional: priority required
	pipe     uint8 // pipeline table index
	last     bool  // the last P4 table: hits and misses do not go on
	counter  uint32
	maxRules int
}

var fixed = mustProgram(P4InfoText)

func mustProgram(txt []byte) *program {
	info := &p4cfg.P4Info{}
	if err := prototext.Unmarshal(txt, info); err != nil {
		panic(fmt.Sprintf("p4rt: embedded P4Info: %v", err))
	}
	p, err := newProgram(info)
	if err != nil {
		panic(fmt.Sprintf("p4rt: embedded P4Info: %v", err))
	}
	return p
}

// pipeTable is each P4 table's pipeline table: the order packets see them.
var pipeTable = map[uint32]uint8{TableL2: 0, TableIPv4: 1, TableIPv6: 2, TableACL: 3}

// NumPipelineTables is how many pipeline tables the P4 program occupies
// (pipeline tables 0..NumPipelineTables-1).
const NumPipelineTables = 4

func newProgram(info *p4cfg.P4Info) (*program, error) {
	p := &program{info: info, tables: map[uint32]*tableInfo{}, actions: map[uint32]*p4cfg.Action{}, counters: map[uint32]uint32{}}
	for _, a := range info.GetActions() {
		p.actions[a.GetPreamble().GetId()] = a
	}
	for _, t := range info.GetTables() {
		id := t.GetPreamble().GetId()
		pipe, ok := pipeTable[id]
		if !ok {
			return nil, fmt.Errorf("table %#x (%s) has no pipeline table", id, t.GetPreamble().GetName())
		}
		ti := &tableInfo{p: t, fields: map[uint32]*p4cfg.MatchField{}, actions: map[uint32]p4cfg.ActionRef_Scope{}, pipe: pipe,
			last: pipe == NumPipelineTables-1, maxRules: int(t.GetSize())}
		for _, f := range t.GetMatchFields() {
			ti.fields[f.GetId()] = f
			switch f.GetMatchType() {
			case p4cfg.MatchField_TERNARY, p4cfg.MatchField_RANGE, p4cfg.MatchField_OPTIONAL:
				ti.ternary = true
			}
		}
		for _, r := range t.GetActionRefs() {
			if p.actions[r.GetId()] == nil {
				return nil, fmt.Errorf("table %s: action %#x not declared", t.GetPreamble().GetName(), r.GetId())
			}
			ti.actions[r.GetId()] = r.GetScope()
		}
		if ids := t.GetDirectResourceIds(); len(ids) == 1 {
			ti.counter = ids[0]
			p.counters[ids[0]] = id
		}
		p.tables[id] = ti
	}
	if len(p.tables) != NumPipelineTables {
		return nil, fmt.Errorf("%d tables: want %d", len(p.tables), NumPipelineTables)
	}
	return p, nil
}

// sameAsFixed decides whether a controller's P4Info describes gswitch's
// fixed pipeline: the same tables, match fields, actions, parameters,
// direct counters and controller packet metadata, with the same ids,
// names, bit widths, match types, action references and scopes. What does
// not change the pipeline (documentation, annotations, aliases, table
// sizes, pkg_info) is not compared. The error names the first difference.
func sameAsFixed(got *p4cfg.P4Info) error {
	want := fixed.info
	if err := sameList("table", want.GetTables(), got.GetTables(), func(t *p4cfg.Table) *p4cfg.Preamble { return t.GetPreamble() }, sameTable); err != nil {
		return err
	}
	if err := sameList("action", want.GetActions(), got.GetActions(), func(a *p4cfg.Action) *p4cfg.Preamble { return a.GetPreamble() }, sameAction); err != nil {
		return err
	}
	if err := sameList("direct counter", want.GetDirectCounters(), got.GetDirectCounters(), func(c *p4cfg.DirectCounter) *p4cfg.Preamble { return c.GetPreamble() }, sameCounter); err != nil {
		return err
	}
	if err := sameList("controller packet metadata", want.GetControllerPacketMetadata(), got.GetControllerPacketMetadata(),
		func(c *p4cfg.ControllerPacketMetadata) *p4cfg.Preamble { return c.GetPreamble() }, sameCPM); err != nil {
		return err
	}
	for _, extra := range []struct {
		what string
		n    int
	}{{"counters", len(got.GetCounters())}, {"meters", len(got.GetMeters())}, {"direct meters", len(got.GetDirectMeters())},
		{"action profiles", len(got.GetActionProfiles())}, {"registers", len(got.GetRegisters())}, {"digests", len(got.GetDigests())},
		{"value sets", len(got.GetValueSets())}, {"externs", len(got.GetExterns())}} {
		if extra.n > 0 {
			return fmt.Errorf("the P4Info declares %d %s: gswitch's pipeline has none", extra.n, extra.what)
		}
	}
	return nil
}

// sameList matches two lists of P4 objects by id (in any order) and
// compares each pair.
func sameList[T any](what string, want, got []T, pre func(T) *p4cfg.Preamble, same func(w, g T) error) error {
	byID := map[uint32]T{}
	for _, g := range got {
		id := pre(g).GetId()
		if _, dup := byID[id]; dup {
			return fmt.Errorf("%s id %#x declared twice", what, id)
		}
		byID[id] = g
	}
	for _, w := range want {
		wp := pre(w)
		g, ok := byID[wp.GetId()]
		if !ok {
			return fmt.Errorf("%s %s (id %#x) is missing", what, wp.GetName(), wp.GetId())
		}
		if gn := pre(g).GetName(); gn != wp.GetName() {
			return fmt.Errorf("%s id %#x is named %q: gswitch's is %q", what, wp.GetId(), gn, wp.GetName())
		}
		if err := same(w, g); err != nil {
			return fmt.Errorf("%s %s: %w", what, wp.GetName(), err)
		}
		delete(byID, wp.GetId())
	}
	for id, g := range byID {
		return fmt.Errorf("%s %s (id %#x) is not in gswitch's pipeline", what, pre(g).GetName(), id)
	}
	return nil
}

func sameTable(w, g *p4cfg.Table) error {
	if len(w.GetMatchFields()) != len(g.GetMatchFields()) {
		return fmt.Errorf("%d match fields: want %d", len(g.GetMatchFields()), len(w.GetMatchFields()))
	}
	for i, wf := range w.GetMatchFields() {
		gf := g.GetMatchFields()[i]
		if gf.GetId() != wf.GetId() || gf.GetName() != wf.GetName() || gf.GetBitwidth() != wf.GetBitwidth() || gf.GetMatchType() != wf.GetMatchType() {
			return fmt.Errorf("match field %d is %d %q bit<%d> %s: want %d %q bit<%d> %s", i+1,
				gf.GetId(), gf.GetName(), gf.GetBitwidth(), gf.GetMatchType(), wf.GetId(), wf.GetName(), wf.GetBitwidth(), wf.GetMatchType())
		}
	}
	refs := func(t *p4cfg.Table) []string {
		var out []string
		for _, r := range t.GetActionRefs() {
			out = append(out, fmt.Sprintf("%#x/%s", r.GetId(), r.GetScope()))
		}
		slices.Sort(out)
		return out
	}
	if wr, gr := refs(w), refs(g); !slices.Equal(wr, gr) {
		return fmt.Errorf("action references %v: want %v", gr, wr)
	}
	if !slices.Equal(w.GetDirectResourceIds(), g.GetDirectResourceIds()) {
		return fmt.Errorf("direct resources %x: want %x", g.GetDirectResourceIds(), w.GetDirectResourceIds())
	}
	if g.GetConstDefaultActionId() != w.GetConstDefaultActionId() || g.GetIsConstTable() != w.GetIsConstTable() {
		return fmt.Errorf("const default action or const table differs")
	}
	return nil
}

func sameAction(w, g *p4cfg.Action) error {
	if len(w.GetParams()) != len(g.GetParams()) {
		return fmt.Errorf("%d params: want %d", len(g.GetParams()), len(w.GetParams()))
	}
	for i, wp := range w.GetParams() {
		gp := g.GetParams()[i]
		if gp.GetId() != wp.GetId() || gp.GetName() != wp.GetName() || gp.GetBitwidth() != wp.GetBitwidth() {
			return fmt.Errorf("param %d is %d %q bit<%d>: want %d %q bit<%d>", i+1, gp.GetId(), gp.GetName(), gp.GetBitwidth(), wp.GetId(), wp.GetName(), wp.GetBitwidth())
		}
	}
	return nil
}

func sameCounter(w, g *p4cfg.DirectCounter) error {
	if w.GetSpec().GetUnit() != g.GetSpec().GetUnit() || w.GetDirectTableId() != g.GetDirectTableId() {
		return fmt.Errorf("unit %s table %#x: want %s table %#x", g.GetSpec().GetUnit(), g.GetDirectTableId(), w.GetSpec().GetUnit(), w.GetDirectTableId())
	}
	return nil
}

func sameCPM(w, g *p4cfg.ControllerPacketMetadata) error {
	if len(w.GetMetadata()) != len(g.GetMetadata()) {
		return fmt.Errorf("%d metadata fields: want %d", len(g.GetMetadata()), len(w.GetMetadata()))
	}
	for i, wm := range w.GetMetadata() {
		gm := g.GetMetadata()[i]
		if gm.GetId() != wm.GetId() || gm.GetName() != wm.GetName() || gm.GetBitwidth() != wm.GetBitwidth() {
			return fmt.Errorf("metadata %d is %d %q bit<%d>: want %d %q bit<%d>", i+1, gm.GetId(), gm.GetName(), gm.GetBitwidth(), wm.GetId(), wm.GetName(), wm.GetBitwidth())
		}
	}
	return nil
}
