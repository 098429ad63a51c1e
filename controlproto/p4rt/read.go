package p4rt

import (
	"slices"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
)

// readChunk is how many entities one ReadResponse carries at most.
const readChunk = 1000

// Read returns the entities the request's filters select: table entries
// (table_id 0: every table; a table with no match: all its entries; a
// match: that entry; is_default_action: the default entry) with their
// direct counters when counter_data is set in the filter, direct counter
// entries (the same selection) and multicast group entries (id 0: all).
// A wildcard over a kind the pipeline has no object of (counters, meters,
// action profiles, registers, value sets, digests, externs, clone
// sessions) selects nothing, so a read of the whole forwarding state (one
// wildcard per kind, as ONOS's device sync sends) answers with what
// exists; naming an object of such a kind by id is NOT_FOUND (§11.1).
func (s *Server) Read(req *p4v1.ReadRequest, stream p4v1.P4Runtime_ReadServer) error {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return rpcErr(err)
	}
	out, err := s.read(req)
	if err != nil {
		return rpcErr(err)
	}
	for len(out) > 0 {
		n := min(len(out), readChunk)
		if err := stream.Send(&p4v1.ReadResponse{Entities: out[:n]}); err != nil {
			return err
		}
		out = out[n:]
	}
	return nil
}

func (s *Server) read(req *p4v1.ReadRequest) ([]*p4v1.Entity, *Error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.committed {
		return nil, errf(codes.FailedPrecondition, "no forwarding pipeline config has been committed")
	}
	var out []*p4v1.Entity
	var ctrs map[flowKey][2]uint64
	loadCounters := func() *Error {
		if ctrs != nil {
			return nil
		}
		c, err := counters(s.cfg.Switch)
		if err != nil {
			return errf(codes.Internal, "reading counters: %v", err)
		}
		ctrs = c
		return nil
	}
	for _, e := range req.GetEntities() {
		switch {
		case e.GetTableEntry() != nil:
			te := e.GetTableEntry()
			sel, err := s.selectEntries(te)
			if err != nil {
				return nil, err
			}
			withCounters := te.GetCounterData() != nil
			if withCounters {
				if err := loadCounters(); err != nil {
					return nil, err
				}
			}
			for _, st := range sel {
				c := cloneEntry(st.canon)
				if withCounters {
					c.CounterData = st.counterData(ctrs)
				}
				out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_TableEntry{TableEntry: c}})
			}
		case e.GetDirectCounterEntry() != nil:
			dc := e.GetDirectCounterEntry()
			te := dc.GetTableEntry()
			if te == nil {
				te = &p4v1.TableEntry{}
			}
			sel, err := s.selectEntries(te)
			if err != nil {
				return nil, err
			}
			if err := loadCounters(); err != nil {
				return nil, err
			}
			for _, st := range sel {
				key := &p4v1.TableEntry{TableId: st.canon.GetTableId(), Match: st.canon.GetMatch(), Priority: st.canon.GetPriority(), IsDefaultAction: st.canon.GetIsDefaultAction()}
				out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_DirectCounterEntry{DirectCounterEntry: &p4v1.DirectCounterEntry{
					TableEntry: cloneEntry(key), Data: st.counterData(ctrs)}}})
			}
		case e.GetPacketReplicationEngineEntry() != nil:
			pre, err := s.readPRE(e.GetPacketReplicationEngineEntry())
			if err != nil {
				return nil, err
			}
			out = append(out, pre...)
		case e.GetEntity() == nil:
			return nil, errf(codes.InvalidArgument, "read of an empty entity")
		default:
			if err := absentKind(e); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// selectEntries applies a table entry read filter.
func (s *Server) selectEntries(te *p4v1.TableEntry) ([]*stored, *Error) {
	var tables []uint32
	switch {
	case te.GetTableId() == 0:
		if len(te.GetMatch()) > 0 || te.GetIsDefaultAction() {
			return nil, errf(codes.InvalidArgument, "a read of every table (table_id 0) takes no match and no is_default_action")
		}
		for id := range fixed.tables {
			tables = append(tables, id)
		}
		slices.Sort(tables)
	case fixed.tables[te.GetTableId()] == nil:
		return nil, errf(codes.NotFound, "table_id %#x is not in gswitch's pipeline", te.GetTableId())
	default:
		tables = []uint32{te.GetTableId()}
	}
	if te.GetIsDefaultAction() {
		return []*stored{s.st.defaults[te.GetTableId()]}, nil
	}
	if len(te.GetMatch()) > 0 || (te.GetTableId() != 0 && te.GetPriority() != 0 && !fixed.tables[te.GetTableId()].ternary) {
		sp, err := fixed.checkEntry(te, p4v1.Update_DELETE) // the key only
		if err != nil {
			return nil, err
		}
		if st := s.st.entries[sp.key]; st != nil {
			return []*stored{st}, nil
		}
		return nil, nil
	}
	var out []*stored
	for _, st := range s.st.entries {
		if slices.Contains(tables, st.canon.GetTableId()) && (te.GetPriority() == 0 || te.GetPriority() == st.canon.GetPriority()) {
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b *stored) int {
		if a.canon.GetTableId() != b.canon.GetTableId() {
			return int(a.canon.GetTableId()) - int(b.canon.GetTableId())
		}
		return int(a.seq - b.seq)
	})
	return out, nil
}

// absentKind answers a read of an entity kind gswitch's pipeline has no
// object of: nothing for a wildcard (id 0), NOT_FOUND for an id.
func absentKind(e *p4v1.Entity) *Error {
	var what string
	var id uint32
	switch x := e.GetEntity().(type) {
	case *p4v1.Entity_ExternEntry:
		what, id = "extern type", x.ExternEntry.GetExternTypeId()
	case *p4v1.Entity_ActionProfileMember:
		what, id = "action profile", x.ActionProfileMember.GetActionProfileId()
	case *p4v1.Entity_ActionProfileGroup:
		what, id = "action profile", x.ActionProfileGroup.GetActionProfileId()
	case *p4v1.Entity_MeterEntry:
		what, id = "meter", x.MeterEntry.GetMeterId()
	case *p4v1.Entity_DirectMeterEntry:
		what, id = "direct meter of table", x.DirectMeterEntry.GetTableEntry().GetTableId()
	case *p4v1.Entity_CounterEntry:
		what, id = "counter", x.CounterEntry.GetCounterId()
	case *p4v1.Entity_ValueSetEntry:
		what, id = "value set", x.ValueSetEntry.GetValueSetId()
	case *p4v1.Entity_RegisterEntry:
		what, id = "register", x.RegisterEntry.GetRegisterId()
	case *p4v1.Entity_DigestEntry:
		what, id = "digest", x.DigestEntry.GetDigestId()
	default:
		return errf(codes.InvalidArgument, "read of an unknown entity kind %T", e.GetEntity())
	}
	if id != 0 {
		return errf(codes.NotFound, "%s %#x: gswitch's pipeline has none", what, id)
	}
	return nil
}
