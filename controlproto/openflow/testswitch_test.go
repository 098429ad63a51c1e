package openflow

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// tableSwitch is a minimal Switch for tests: flow tables backed by
// tables/flow, each rule keeping its FLOW_MOD to echo it in flow stats,
// two ports, counters that stay zero.
type tableSwitch struct {
	mu       sync.Mutex
	feat     rule.Features
	tables   []*flow.Table
	entries  []map[flow.RuleID]*entry
	barriers int
	outs     []*rule.PacketOut
	// refs, when set, learns of the instructions of every entry added
	// (+1) and removed (-1), under mu.
	refs func(in *rule.Instructions, delta int)
}

type entry struct {
	fm    rule.FlowMod
	added time.Time
}

func newTableSwitch(nTables int, maxEntries int) *tableSwitch {
	s := &tableSwitch{feat: rule.Features{
		DatapathID: 1, NTables: uint8(nTables), MaxEntries: uint32(maxEntries),
		Capabilities: rule.CapFlowStats | rule.CapTableStats | rule.CapPortStats,
		Desc:         rule.Desc{Manufacturer: "gswitch", Hardware: "test", Software: "test", Serial: "0", Datapath: "test switch"},
	}}
	for range nTables {
		t, err := flow.NewTable(flow.Config{Algo: flow.Tuple, MaxEntries: maxEntries})
		if err != nil {
			panic(err)
		}
		s.tables = append(s.tables, t)
		s.entries = append(s.entries, map[flow.RuleID]*entry{})
	}
	return s
}

func (s *tableSwitch) Features() rule.Features { return s.feat }

func (s *tableSwitch) Ports() []rule.Port {
	return []rule.Port{
		{No: 1, HWAddr: [6]byte{2, 0, 0, 0, 0, 1}, Name: "p1", CurrSpeed: 10000000, MaxSpeed: 10000000},
		{No: 2, HWAddr: [6]byte{2, 0, 0, 0, 0, 2}, Name: "p2", CurrSpeed: 10000000, MaxSpeed: 10000000},
	}
}

func (s *tableSwitch) FlowMod(fm *rule.FlowMod) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flowModLocked(fm)
}

func (s *tableSwitch) ref(in *rule.Instructions, delta int) {
	if s.refs != nil {
		s.refs(in, delta)
	}
}

func (s *tableSwitch) flowModLocked(fm *rule.FlowMod) error {
	switch fm.Command {
	case rule.FlowAdd:
		return s.add(fm)
	case rule.FlowModify, rule.FlowModifyStrict:
		t := fm.TableID
		for _, id := range s.tables[t].Modify(fm.Selector(), 0) {
			e := s.entries[t][id]
			s.ref(&e.fm.Instructions, -1)
			e.fm.Instructions, e.fm.Echo.Instructions = fm.Instructions, fm.Echo.Instructions
			s.ref(&e.fm.Instructions, +1)
		}
	default:
		for _, t := range s.tableIDs(fm.TableID) {
			sel := fm.Selector()
			sel.Filter = s.outFilter(t, fm.OutPort, fm.OutGroup)
			for _, e := range s.tables[t].Delete(sel) {
				s.ref(&s.entries[t][e.ID].fm.Instructions, -1)
				delete(s.entries[t], e.ID)
			}
		}
	}
	return nil
}

func (s *tableSwitch) add(fm *rule.FlowMod) error {
	var flags flow.AddFlags
	if fm.Flags&rule.FlagCheckOverlap != 0 {
		flags = flow.CheckOverlap
	}
	r := flow.Rule{Match: fm.Match, Priority: fm.Priority, Cookie: fm.Cookie}
	id, replaced, err := s.tables[fm.TableID].Add(r, flags)
	if err != nil {
		return err
	}
	if replaced {
		s.ref(&s.entries[fm.TableID][id].fm.Instructions, -1)
	}
	s.entries[fm.TableID][id] = &entry{fm: *fm, added: time.Now()}
	s.ref(&fm.Instructions, +1)
	return nil
}

func (s *tableSwitch) tableIDs(t uint8) []uint8 {
	if t != rule.TableAll {
		return []uint8{t}
	}
	var ids []uint8
	for i := range s.tables {
		ids = append(ids, uint8(i))
	}
	return ids
}

// outFilter selects rules with an output to port, or to group (ANY: all).
func (s *tableSwitch) outFilter(t uint8, port, group uint32) func(flow.RuleID, *flow.Rule) bool {
	return func(id flow.RuleID, _ *flow.Rule) bool {
		in := &s.entries[t][id].fm.Instructions
		return outputsTo(in, port, group)
	}
}

func outputsTo(in *rule.Instructions, port, group uint32) bool {
	has := func(k rule.ActionKind, v uint32) bool {
		for _, as := range [][]rule.Action{in.Apply, in.Write} {
			for _, a := range as {
				if a.Kind == k && (a.Port == v && k == rule.ActOutput || a.ID == v && k == rule.ActGroup) {
					return true
				}
			}
		}
		return false
	}
	return (port == rule.PortAny || has(rule.ActOutput, port)) && (group == rule.GroupAny || has(rule.ActGroup, group))
}

func (s *tableSwitch) PacketOut(po *rule.PacketOut) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outs = append(s.outs, po)
	return nil
}

func (s *tableSwitch) FlowStats(req *rule.FlowStatsRequest) ([]rule.FlowStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []rule.FlowStats
	for _, t := range s.tableIDs(req.TableID) {
		ids := make([]flow.RuleID, 0, len(s.entries[t]))
		for id := range s.entries[t] {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			e := s.entries[t][id]
			if s.selects(req, e) {
				out = append(out, e.stats())
			}
		}
	}
	return out, nil
}

func (s *tableSwitch) selects(req *rule.FlowStatsRequest, e *entry) bool {
	return (e.fm.Cookie^req.Cookie)&req.CookieMask == 0 &&
		req.Match.Covers(&e.fm.Match) &&
		outputsTo(&e.fm.Instructions, req.OutPort, req.OutGroup)
}

func (e *entry) stats() rule.FlowStats {
	d := time.Since(e.added)
	return rule.FlowStats{
		TableID: e.fm.TableID, DurationSec: uint32(d / time.Second), DurationNsec: uint32(d % time.Second),
		Priority: e.fm.Priority, IdleTimeout: e.fm.IdleTimeout, HardTimeout: e.fm.HardTimeout,
		Flags: e.fm.Flags, Cookie: e.fm.Cookie, Match: e.fm.Match, Instructions: e.fm.Instructions, Echo: e.fm.Echo,
	}
}

func (s *tableSwitch) TableStats() []rule.TableStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []rule.TableStats
	for i, t := range s.tables {
		out = append(out, rule.TableStats{TableID: uint8(i), Active: uint32(t.Len())})
	}
	return out
}

func (s *tableSwitch) PortStats(port uint32) ([]rule.PortStats, error) {
	var out []rule.PortStats
	for _, p := range s.Ports() {
		if port == rule.PortAny || port == p.No {
			out = append(out, rule.PortStats{PortNo: p.No})
		}
	}
	if len(out) == 0 {
		return nil, badRequest(11, "no port %d", port)
	}
	return out, nil
}

func (s *tableSwitch) Barrier() error {
	s.mu.Lock()
	s.barriers++
	s.mu.Unlock()
	return nil
}

// rules returns the number of rules in all tables.
func (s *tableSwitch) rules() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.tables {
		n += t.Len()
	}
	return n
}

// fullSwitch is a tableSwitch with every optional interface: groups and
// meters in a GroupTable and a MeterTable (flow entries counted as their
// references, and removed with the group or meter they use), configurable
// ports, one queue on port 1, and TABLE_MOD.
type fullSwitch struct {
	*tableSwitch
	groups    *rule.GroupTable
	meters    *rule.MeterTable
	portCfg   map[uint32]uint32 // guarded by mu
	tableMods int               // guarded by mu
	agent     *Agent
}

func newFullSwitch(nTables, maxEntries int) *fullSwitch {
	s := &fullSwitch{
		tableSwitch: newTableSwitch(nTables, maxEntries),
		groups:      rule.NewGroupTable(rule.GroupTableConfig{MaxGroups: [4]uint32{8, 8, 8, 8}, MaxBuckets: 16}),
		meters:      rule.NewMeterTable(rule.MeterTableConfig{MaxMeters: 8, MaxBands: 4}),
		portCfg:     map[uint32]uint32{},
	}
	s.refs = s.countRefs
	return s
}

func (s *fullSwitch) countRefs(in *rule.Instructions, delta int) {
	for _, as := range [][]rule.Action{in.Apply, in.Write} {
		for _, a := range as {
			if a.Kind != rule.ActGroup {
				continue
			}
			if delta > 0 {
				s.groups.AddFlowRef(a.ID)
			} else {
				s.groups.ReleaseFlowRef(a.ID)
			}
		}
	}
	if in.Has&rule.HasMeter != 0 {
		if delta > 0 {
			s.meters.AddFlowRef(in.Meter)
		} else {
			s.meters.ReleaseFlowRef(in.Meter)
		}
	}
}

// FlowMod checks the references again under the lock, since another
// connection may have deleted the group or meter since the agent checked.
func (s *fullSwitch) FlowMod(fm *rule.FlowMod) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !fm.Command.IsDelete() {
		in := &fm.Instructions
		if in.Has&rule.HasMeter != 0 && !s.meters.Exists(in.Meter) {
			return meterModFailed(ofp.ErrCodeMeterModFailedUnknownMeter, "meter %d", in.Meter)
		}
	}
	return s.flowModLocked(fm)
}

func (s *fullSwitch) Ports() []rule.Port {
	ps := s.tableSwitch.Ports()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range ps {
		ps[i].Config = s.portCfg[ps[i].No]
		ps[i].Supported = 0x2820 // 10GB_FD, COPPER, AUTONEG
	}
	return ps
}

func (s *fullSwitch) GroupMod(gm *rule.GroupMod) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	deleted, err := s.groups.Mod(gm)
	if err != nil {
		return err
	}
	for _, id := range deleted {
		s.flowModLocked(&rule.FlowMod{Command: rule.FlowDelete, TableID: rule.TableAll, OutPort: rule.PortAny, OutGroup: id})
	}
	return nil
}

func (s *fullSwitch) GroupDesc() []rule.Group                         { return s.groups.Desc() }
func (s *fullSwitch) GroupStats(id uint32) ([]rule.GroupStats, error) { return s.groups.Stats(id), nil }
func (s *fullSwitch) GroupFeatures() rule.GroupFeatures               { return s.groups.Features() }
func (s *fullSwitch) GroupExists(id uint32) bool                      { return s.groups.Exists(id) }

func (s *fullSwitch) MeterMod(mm *rule.MeterMod) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	deleted, err := s.meters.Mod(mm)
	if err != nil {
		return err
	}
	for _, id := range deleted {
		s.deleteMeterFlows(id)
	}
	return nil
}

// deleteMeterFlows removes the entries whose meter instruction names id.
func (s *fullSwitch) deleteMeterFlows(id uint32) {
	for t := range s.tables {
		sel := flow.Selector{Filter: func(rid flow.RuleID, _ *flow.Rule) bool {
			in := &s.entries[t][rid].fm.Instructions
			return in.Has&rule.HasMeter != 0 && in.Meter == id
		}}
		for _, e := range s.tables[t].Delete(sel) {
			s.ref(&s.entries[t][e.ID].fm.Instructions, -1)
			delete(s.entries[t], e.ID)
		}
	}
}

func (s *fullSwitch) MeterConfig(id uint32) ([]rule.MeterConfig, error) {
	return s.meters.Config(id), nil
}
func (s *fullSwitch) MeterStats(id uint32) ([]rule.MeterStats, error) { return s.meters.Stats(id), nil }
func (s *fullSwitch) MeterFeatures() rule.MeterFeatures               { return s.meters.Features() }
func (s *fullSwitch) MeterExists(id uint32) bool                      { return s.meters.Exists(id) }

func (s *fullSwitch) PortMod(pm *rule.PortMod) error {
	s.mu.Lock()
	s.portCfg[pm.PortNo] = pm.Apply(s.portCfg[pm.PortNo])
	a := s.agent
	s.mu.Unlock()
	if a != nil {
		for _, p := range s.Ports() {
			if p.No == pm.PortNo {
				a.PortStatus(&rule.PortStatus{Reason: rule.PortModified, Port: p})
			}
		}
	}
	return nil
}

func (s *fullSwitch) TableMod(*rule.TableMod) error {
	s.mu.Lock()
	s.tableMods++
	s.mu.Unlock()
	return nil
}

func (s *fullSwitch) Queues(port uint32) ([]rule.Queue, error) {
	switch port {
	case 1, rule.PortAny:
		return []rule.Queue{{ID: 7, Port: 1, MinRate: 100, MaxRate: 0xffff}}, nil
	case 2:
		return nil, nil
	}
	return nil, queueOpFailed(0, "no port %d", port)
}

func (s *fullSwitch) QueueStats(port, queue uint32) ([]rule.QueueStats, error) {
	if (port == 1 || port == rule.PortAny) && (queue == 7 || queue == rule.QueueAll) {
		return []rule.QueueStats{{PortNo: 1, QueueID: 7, TxPackets: 3, TxBytes: 180}}, nil
	}
	return nil, nil
}

// state summarises everything a message may change, to check that a
// rejected one changed nothing.
func (s *fullSwitch) state() string {
	s.mu.Lock()
	cfg := fmt.Sprint(s.portCfg, s.tableMods)
	s.mu.Unlock()
	gs, ms := s.groups.Stats(rule.GroupAll), s.meters.Stats(rule.MeterAll)
	for i := range gs {
		gs[i].DurationSec, gs[i].DurationNsec = 0, 0
	}
	for i := range ms {
		ms[i].DurationSec, ms[i].DurationNsec = 0, 0
	}
	return fmt.Sprint(s.rules(), s.groups.Desc(), s.meters.Config(rule.MeterAll), gs, ms, cfg)
}
