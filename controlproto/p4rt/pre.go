package p4rt

import (
	"fmt"
	"slices"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/gswitch/gswitch/tables/rule"
)

// The packet replication engine: multicast group entries.
//
// A multicast group (PacketReplicationEngineEntry.multicast_group_entry)
// is realized as the switch's OpenFlow ALL group of the same id, one
// bucket per replica, each an output to the replica's port; the ACL's
// set_multicast_group(group_id) writes that group into the action set (the
// ACL is the last table, so nothing after it overrides the decision, and
// OpenFlow's action set lets a group win over an earlier table's output,
// as the program's metadata does). An output never sends a packet back
// out of the port it came in on (OpenFlow §4.5), which is gswitch.p4's
// egress pruning of that replica.
//
// Groups and the entries that use them stay consistent: an entry naming a
// group that does not exist is refused (NOT_FOUND), and a group that an
// entry (the default entry included) uses cannot be deleted
// (FAILED_PRECONDITION) — in the datapath deleting a group would remove
// those flow entries behind the store's back.

// maxMulticastGroupID is the highest multicast group id (v1model's
// standard_metadata.mcast_grp is bit<16>; 0 means none).
const maxMulticastGroupID = 0xffff

// maxMulticastGroups bounds the groups, maxReplicas each group's replicas
// (RESOURCE_EXHAUSTED beyond; rule.MaxBuckets bounds a datapath group).
const (
	maxMulticastGroups = 4096
	maxReplicas        = 1024
)

// mcSpec is a validated multicast group update.
type mcSpec struct {
	id    uint32
	canon *p4v1.MulticastGroupEntry // INSERT, MODIFY: as Read returns it
	group rule.Group
}

// checkMulticast validates a PRE entry of a write: a multicast group entry
// with an id in 1..0xffff and replicas that name valid ports, each (port,
// instance) once. A DELETE looks at the id only. Clone sessions do not
// exist in gswitch's pipeline (UNIMPLEMENTED).
func checkMulticast(e *p4v1.PacketReplicationEngineEntry, op p4v1.Update_Type) (*mcSpec, *Error) {
	if e.GetCloneSessionEntry() != nil {
		return nil, errf(codes.Unimplemented, "clone sessions are not supported (gswitch.p4 has no clone)")
	}
	mg := e.GetMulticastGroupEntry()
	if mg == nil {
		return nil, errf(codes.InvalidArgument, "packet replication engine entry without a multicast group entry")
	}
	id := mg.GetMulticastGroupId()
	if id == 0 || id > maxMulticastGroupID {
		return nil, errf(codes.InvalidArgument, "multicast_group_id %d: want 1..%d", id, maxMulticastGroupID)
	}
	m := &mcSpec{id: id}
	if op == p4v1.Update_DELETE {
		return m, nil
	}
	if n := len(mg.GetReplicas()); n > maxReplicas {
		return nil, errf(codes.ResourceExhausted, "multicast group %d: %d replicas, at most %d", id, n, maxReplicas)
	}
	m.canon = &p4v1.MulticastGroupEntry{MulticastGroupId: id, Metadata: slices.Clone(mg.GetMetadata())}
	m.group = rule.Group{ID: id, Type: rule.GroupTypeAll}
	seen := map[[2]uint32]bool{}
	for i, r := range mg.GetReplicas() {
		var port uint32
		rc := &p4v1.Replica{Instance: r.GetInstance()}
		switch k := r.GetPortKind().(type) {
		case *p4v1.Replica_EgressPort:
			port = k.EgressPort
			rc.PortKind = &p4v1.Replica_EgressPort{EgressPort: port}
		case *p4v1.Replica_Port:
			v, err := fit(k.Port, 32, fmt.Sprintf("multicast group %d replica %d: port", id, i))
			if err != nil {
				return nil, err
			}
			port = uint32(toUint(v))
			rc.PortKind = &p4v1.Replica_Port{Port: canonical(v)}
		default:
			return nil, errf(codes.InvalidArgument, "multicast group %d replica %d: no port", id, i)
		}
		if (port == 0 || port > maxPortParam) && port != rule.PortController {
			return nil, errf(codes.InvalidArgument, "multicast group %d replica %d: port %d: want 1..%#x or the CPU port %#x", id, i, port, maxPortParam, rule.PortController)
		}
		k := [2]uint32{port, r.GetInstance()}
		if seen[k] {
			return nil, errf(codes.InvalidArgument, "multicast group %d: replica (port %d, instance %d) given twice", id, port, r.GetInstance())
		}
		seen[k] = true
		m.canon.Replicas = append(m.canon.Replicas, rc)
		m.group.Buckets = append(m.group.Buckets, rule.Bucket{WatchPort: rule.PortAny, WatchGroup: rule.GroupAny,
			Actions: []rule.Action{{Kind: rule.ActOutput, Port: port, MaxLen: rule.MaxLenNoBuffer}}})
	}
	return m, nil
}

// mcGroupOf returns the multicast group an entry's action uses (0: none).
func mcGroupOf(te *p4v1.TableEntry) uint32 {
	a := te.GetAction().GetAction()
	if a.GetActionId() != ActionSetMulticastGroup {
		return 0
	}
	for _, p := range a.GetParams() {
		if p.GetParamId() == 1 {
			return uint32(toUint(p.GetValue()))
		}
	}
	return 0
}

// applyGroup applies one validated multicast group update to the store
// and the switch and returns how to undo it.
func (s *store) applyGroup(tx txn, op p4v1.Update_Type, m *mcSpec) (undo, *Error) {
	old := s.groups[m.id]
	var gm rule.GroupMod
	switch op {
	case p4v1.Update_INSERT:
		gm = rule.GroupMod{Command: rule.GroupAdd, Group: m.group}
	case p4v1.Update_MODIFY:
		gm = rule.GroupMod{Command: rule.GroupModify, Group: m.group}
	default:
		gm = rule.GroupMod{Command: rule.GroupDelete, Group: rule.Group{ID: m.id}}
	}
	if err := tx.group(&gm); err != nil {
		return nil, errf(codes.Internal, "multicast group %d: pipeline: %v", m.id, err)
	}
	if op == p4v1.Update_DELETE {
		delete(s.groups, m.id)
	} else {
		s.groups[m.id] = &mcGroup{canon: m.canon, group: m.group}
	}
	return func(tx txn) *Error {
		var back rule.GroupMod
		switch {
		case old == nil:
			back = rule.GroupMod{Command: rule.GroupDelete, Group: rule.Group{ID: m.id}}
		case op == p4v1.Update_DELETE:
			back = rule.GroupMod{Command: rule.GroupAdd, Group: old.group}
		default:
			back = rule.GroupMod{Command: rule.GroupModify, Group: old.group}
		}
		if err := tx.group(&back); err != nil {
			return errf(codes.Internal, "multicast group %d: undo: %v", m.id, err)
		}
		if old == nil {
			delete(s.groups, m.id)
		} else {
			s.groups[m.id] = old
		}
		return nil
	}, nil
}

// mcGroup is an installed multicast group: as Read returns it and as the
// switch has it.
type mcGroup struct {
	canon *p4v1.MulticastGroupEntry
	group rule.Group
}

// readPRE answers a read of PRE entries: multicast groups (id 0: all, in
// id order; an id: that group, or nothing); clone sessions: none.
func (s *Server) readPRE(e *p4v1.PacketReplicationEngineEntry) ([]*p4v1.Entity, *Error) {
	mg := e.GetMulticastGroupEntry()
	if mg == nil {
		if e.GetCloneSessionEntry() != nil {
			return nil, nil // gswitch has no clone sessions
		}
		return nil, errf(codes.InvalidArgument, "read of a packet replication engine entry of no kind")
	}
	var ids []uint32
	if id := mg.GetMulticastGroupId(); id != 0 {
		if s.st.groups[id] != nil {
			ids = []uint32{id}
		}
	} else {
		for id := range s.st.groups {
			ids = append(ids, id)
		}
		slices.Sort(ids)
	}
	out := make([]*p4v1.Entity, 0, len(ids))
	for _, id := range ids {
		c := proto.Clone(s.st.groups[id].canon).(*p4v1.MulticastGroupEntry)
		out = append(out, &p4v1.Entity{Entity: &p4v1.Entity_PacketReplicationEngineEntry{PacketReplicationEngineEntry: &p4v1.PacketReplicationEngineEntry{
			Type: &p4v1.PacketReplicationEngineEntry_MulticastGroupEntry{MulticastGroupEntry: c}}}})
	}
	return out, nil
}
