package p4rt

import (
	"errors"
	"fmt"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// Switch is what the server needs of the switch it programs:
// *pipeline.Switch has these methods. Transact runs f with the datapath
// held off (no batch is classified between two of f's FlowMods), apply
// being the switch's FlowMod without its own locking; it is how a batch is
// made atomic for the data plane. A failed FlowMod changes nothing.
type Switch interface {
	// TransactGroups runs f with the datapath held off: f applies flow
	// and group changes through the two functions (*pipeline.Switch).
	TransactGroups(f func(flowMod func(*rule.FlowMod) error, groupMod func(*rule.GroupMod) error) error) error
	FlowStats(req *rule.FlowStatsRequest) ([]rule.FlowStats, error)
	PacketOut(po *rule.PacketOut) error
	Ports() []rule.Port
}

// stored is a table entry as installed: its validated spec, its canonical
// form, and the flow entries it compiled to.
type stored struct {
	s     *spec
	canon *p4v1.TableEntry
	rules []flowKey
	seq   uint64 // insertion order, for reads
}

// owners lists the entries that compiled to one flow entry, oldest first;
// the flow entry carries the first one's instructions. (Two ACL entries of
// one priority whose ranges share a prefix share that flow entry.)
type owners struct{ list []*stored }

// store is the server's authoritative copy of the P4 tables: the entries by
// key, the flow entries they installed and who owns each, the default
// entries.
type store struct {
	entries  map[string]*stored
	count    map[uint32]int // entries per table
	rules    map[flowKey]*owners
	defaults map[uint32]*stored
	groups   map[uint32]*mcGroup // multicast groups by id (pre.go)
	seq      uint64
}

// txn is one transaction's access to the switch (Switch.TransactGroups).
type txn struct {
	flow  func(*rule.FlowMod) error
	group func(*rule.GroupMod) error
}

func newStore() *store {
	return &store{entries: map[string]*stored{}, count: map[uint32]int{}, rules: map[flowKey]*owners{}, defaults: map[uint32]*stored{}, groups: map[uint32]*mcGroup{}}
}

func (st *stored) instructions() rule.Instructions {
	in, err := compileAction(st.canon.GetAction().GetAction(), st.s.t.pipe, st.s.t.last)
	if err != nil {
		panic(err) // checkAction accepted only actions compileAction knows
	}
	return in
}

// flowMod builds the pipeline FlowMod for one of the server's flow
// entries. The server keeps its own representation (the canonical P4
// entries in the store) and leaves Echo empty: flow statistics of these
// entries are encoded from the values by whichever protocol reads them.
func flowMod(cmd rule.FlowCommand, r flowKey, in rule.Instructions) *rule.FlowMod {
	fm := &rule.FlowMod{Command: cmd, TableID: r.table, Priority: r.prio, Cookie: Cookie, BufferID: rule.NoBuffer,
		OutPort: rule.PortAny, OutGroup: rule.GroupAny, Match: r.match}
	if cmd == rule.FlowDeleteStrict {
		return fm
	}
	fm.CookieMask = ^uint64(0)
	fm.Instructions = in
	return fm
}

// switchErr maps a switch's refusal to the P4Runtime code.
func switchErr(err error) *Error {
	if errors.Is(err, flow.ErrTableFull) {
		return errf(codes.ResourceExhausted, "pipeline table full: %v", err)
	}
	return errf(codes.Internal, "pipeline: %v", err)
}

// undo reverts one applied update.
type undo func(tx txn) *Error

// insert installs a new entry's flow entries; on failure it removes those
// it added, so the switch is as before.
func (s *store) insert(apply func(*rule.FlowMod) error, st *stored) (undo, *Error) {
	in := st.instructions()
	for i, r := range st.rules {
		if o := s.rules[r]; o != nil {
			o.list = append(o.list, st)
			continue
		}
		if err := apply(flowMod(rule.FlowAdd, r, in)); err != nil {
			s.unwind(apply, st, st.rules[:i])
			return nil, switchErr(err)
		}
		s.rules[r] = &owners{list: []*stored{st}}
	}
	s.seq++
	st.seq = s.seq
	s.entries[st.s.key] = st
	s.count[st.s.t.p.GetPreamble().GetId()]++
	return func(tx txn) *Error { return s.remove(tx.flow, st) }, nil
}

// unwind takes st off the given rules (an insert that failed half way).
func (s *store) unwind(apply func(*rule.FlowMod) error, st *stored, rules []flowKey) {
	for _, r := range rules {
		_ = s.release(apply, st, r)
	}
}

// release takes st off a rule: the flow entry goes when st was its last
// owner, or takes the next owner's instructions when st was the first.
func (s *store) release(apply func(*rule.FlowMod) error, st *stored, r flowKey) error {
	o := s.rules[r]
	if o == nil {
		return nil
	}
	first := len(o.list) > 0 && o.list[0] == st
	for i, x := range o.list {
		if x == st {
			o.list = append(o.list[:i], o.list[i+1:]...)
			break
		}
	}
	if len(o.list) == 0 {
		delete(s.rules, r)
		return apply(flowMod(rule.FlowDeleteStrict, r, rule.Instructions{}))
	}
	if first {
		return apply(flowMod(rule.FlowModifyStrict, r, o.list[0].instructions()))
	}
	return nil
}

// remove deletes an installed entry.
func (s *store) remove(apply func(*rule.FlowMod) error, st *stored) *Error {
	var firstErr error
	for _, r := range st.rules {
		if err := s.release(apply, st, r); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	delete(s.entries, st.s.key)
	s.count[st.s.t.p.GetPreamble().GetId()]--
	if firstErr != nil {
		return switchErr(firstErr)
	}
	return nil
}

// del is DELETE: remove, with an undo that installs the entry again.
func (s *store) del(apply func(*rule.FlowMod) error, st *stored) (undo, *Error) {
	if err := s.remove(apply, st); err != nil {
		return nil, err
	}
	return func(tx txn) *Error {
		_, err := s.insert(tx.flow, st)
		return err
	}, nil
}

// modify gives an installed entry (or a default entry) a new canonical
// form; the flow entries it heads take the new instructions.
func (s *store) modify(apply func(*rule.FlowMod) error, st *stored, canon *p4v1.TableEntry) (undo, *Error) {
	old := st.canon
	st.canon = canon
	in := st.instructions()
	for i, r := range st.rules {
		if o := s.rules[r]; o != nil && o.list[0] != st {
			continue
		}
		if err := apply(flowMod(rule.FlowModifyStrict, r, in)); err != nil {
			st.canon = old
			oldIn := st.instructions()
			for _, rr := range st.rules[:i] {
				_ = apply(flowMod(rule.FlowModifyStrict, rr, oldIn))
			}
			return nil, switchErr(err)
		}
	}
	return func(tx txn) *Error {
		_, err := s.modify(tx.flow, st, old)
		return err
	}, nil
}

// defaultEntry returns the canonical default entry of table t: NoAction.
func defaultEntry(t *tableInfo) *p4v1.TableEntry {
	return &p4v1.TableEntry{TableId: t.p.GetPreamble().GetId(), IsDefaultAction: true,
		Action: &p4v1.TableAction{Type: &p4v1.TableAction_Action{Action: &p4v1.Action{ActionId: ActionNoAction}}}}
}

// reset clears the pipeline's P4 tables (every flow entry in them, the
// server's or not) and the switch's groups (the multicast groups live
// there), and installs each table's default entry (priority 0, match-all:
// NoAction, then on to the next table).
func (s *store) reset(tx txn, p *program) error {
	apply := tx.flow
	for tbl := range uint8(NumPipelineTables) {
		fm := &rule.FlowMod{Command: rule.FlowDelete, TableID: tbl, OutPort: rule.PortAny, OutGroup: rule.GroupAny, BufferID: rule.NoBuffer}
		if err := apply(fm); err != nil {
			return fmt.Errorf("clear pipeline table %d: %w", tbl, err)
		}
	}
	if err := tx.group(&rule.GroupMod{Command: rule.GroupDelete, Group: rule.Group{ID: rule.GroupAll}}); err != nil {
		return fmt.Errorf("clear groups: %w", err)
	}
	*s = *newStore()
	for _, t := range p.tables {
		sp := &spec{t: t, isDefault: true}
		sp.key = sp.makeKey()
		st := &stored{s: sp, canon: defaultEntry(t), rules: []flowKey{{table: t.pipe}}}
		if err := apply(flowMod(rule.FlowAdd, st.rules[0], st.instructions())); err != nil {
			return fmt.Errorf("default entry of %s: %w", t.p.GetPreamble().GetName(), err)
		}
		s.rules[st.rules[0]] = &owners{list: []*stored{st}}
		s.defaults[t.p.GetPreamble().GetId()] = st
	}
	return nil
}

// counters returns the packet and byte counts of every flow entry of the
// server's in the pipeline's P4 tables.
func counters(sw Switch) (map[flowKey][2]uint64, error) {
	out := map[flowKey][2]uint64{}
	for tbl := range uint8(NumPipelineTables) {
		fs, err := sw.FlowStats(&rule.FlowStatsRequest{TableID: tbl, OutPort: rule.PortAny, OutGroup: rule.GroupAny,
			Cookie: Cookie, CookieMask: ^uint64(0)})
		if err != nil {
			return nil, err
		}
		for _, f := range fs {
			out[flowKey{table: f.TableID, prio: f.Priority, match: f.Match}] = [2]uint64{f.Packets, f.Bytes}
		}
	}
	return out, nil
}

// counterData sums an entry's flow entries' counters (a flow entry two
// entries share counts for both).
func (st *stored) counterData(c map[flowKey][2]uint64) *p4v1.CounterData {
	var d p4v1.CounterData
	for _, r := range st.rules {
		v := c[r]
		d.PacketCount += int64(v[0])
		d.ByteCount += int64(v[1])
	}
	return &d
}

func cloneEntry(te *p4v1.TableEntry) *p4v1.TableEntry { return proto.Clone(te).(*p4v1.TableEntry) }
