package openflow

import (
	"slices"
	"sync"
	"time"

	"github.com/gswitch/gswitch/tables/flow"
)

// tableSwitch is a minimal Switch for tests: flow tables backed by
// tables/flow, each rule keeping its FLOW_MOD to echo it in flow stats,
// two ports, counters that stay zero.
type tableSwitch struct {
	mu       sync.Mutex
	feat     Features
	tables   []*flow.Table
	entries  []map[flow.RuleID]*entry
	barriers int
	outs     []*PacketOut
}

type entry struct {
	fm    FlowMod
	added time.Time
}

func newTableSwitch(nTables int, maxEntries int) *tableSwitch {
	s := &tableSwitch{feat: Features{
		DatapathID: 1, NTables: uint8(nTables), MaxEntries: uint32(maxEntries),
		Capabilities: CapFlowStats | CapTableStats | CapPortStats,
		Desc:         Desc{Manufacturer: "gswitch", Hardware: "test", Software: "test", Serial: "0", Datapath: "test switch"},
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

func (s *tableSwitch) Features() Features { return s.feat }

func (s *tableSwitch) Ports() []Port {
	return []Port{
		{No: 1, HWAddr: [6]byte{2, 0, 0, 0, 0, 1}, Name: "p1", CurrSpeed: 10000000, MaxSpeed: 10000000},
		{No: 2, HWAddr: [6]byte{2, 0, 0, 0, 0, 2}, Name: "p2", CurrSpeed: 10000000, MaxSpeed: 10000000},
	}
}

func (s *tableSwitch) FlowMod(fm *FlowMod) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch fm.Command {
	case FlowAdd:
		return s.add(fm)
	case FlowModify, FlowModifyStrict:
		t := fm.TableID
		for _, id := range s.tables[t].Modify(fm.Selector(), 0) {
			e := s.entries[t][id]
			e.fm.Instructions, e.fm.Wire = fm.Instructions, fm.Wire
		}
	default:
		for _, t := range s.tableIDs(fm.TableID) {
			sel := fm.Selector()
			sel.Filter = s.outFilter(t, fm.OutPort, fm.OutGroup)
			for _, e := range s.tables[t].Delete(sel) {
				delete(s.entries[t], e.ID)
			}
		}
	}
	return nil
}

func (s *tableSwitch) add(fm *FlowMod) error {
	var flags flow.AddFlags
	if fm.Flags&FlagCheckOverlap != 0 {
		flags = flow.CheckOverlap
	}
	r := flow.Rule{Match: fm.Match.Match, Priority: fm.Priority, Cookie: fm.Cookie}
	id, _, err := s.tables[fm.TableID].Add(r, flags)
	if err != nil {
		return err
	}
	s.entries[fm.TableID][id] = &entry{fm: *fm, added: time.Now()}
	return nil
}

func (s *tableSwitch) tableIDs(t uint8) []uint8 {
	if t != TableAll {
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

func outputsTo(in *Instructions, port, group uint32) bool {
	has := func(k ActionKind, v uint32) bool {
		for _, as := range [][]Action{in.Apply, in.Write} {
			for _, a := range as {
				if a.Kind == k && (a.Port == v && k == ActOutput || a.ID == v && k == ActGroup) {
					return true
				}
			}
		}
		return false
	}
	return (port == PortAny || has(ActOutput, port)) && (group == GroupAny || has(ActGroup, group))
}

func (s *tableSwitch) PacketOut(po *PacketOut) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outs = append(s.outs, po)
	return nil
}

func (s *tableSwitch) FlowStats(req *FlowStatsRequest) ([]FlowStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []FlowStats
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

func (s *tableSwitch) selects(req *FlowStatsRequest, e *entry) bool {
	return (e.fm.Cookie^req.Cookie)&req.CookieMask == 0 &&
		req.Match.Match.Covers(&e.fm.Match.Match) &&
		outputsTo(&e.fm.Instructions, req.OutPort, req.OutGroup)
}

func (e *entry) stats() FlowStats {
	d := time.Since(e.added)
	return FlowStats{
		TableID: e.fm.TableID, DurationSec: uint32(d / time.Second), DurationNsec: uint32(d % time.Second),
		Priority: e.fm.Priority, IdleTimeout: e.fm.IdleTimeout, HardTimeout: e.fm.HardTimeout,
		Flags: e.fm.Flags, Cookie: e.fm.Cookie, Match: e.fm.Match, Instructions: e.fm.Instructions, Wire: e.fm.Wire,
	}
}

func (s *tableSwitch) TableStats() []TableStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []TableStats
	for i, t := range s.tables {
		out = append(out, TableStats{TableID: uint8(i), Active: uint32(t.Len())})
	}
	return out
}

func (s *tableSwitch) PortStats(port uint32) ([]PortStats, error) {
	var out []PortStats
	for _, p := range s.Ports() {
		if port == PortAny || port == p.No {
			out = append(out, PortStats{PortNo: p.No})
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
