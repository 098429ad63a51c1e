package p4rt

import (
	"sync"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
)

// electionID is a P4Runtime Uint128.
type electionID struct{ hi, lo uint64 }

func toElection(u *p4v1.Uint128) (electionID, bool) {
	if u == nil {
		return electionID{}, false
	}
	return electionID{u.GetHigh(), u.GetLow()}, true
}

func (e electionID) less(o electionID) bool { return e.hi < o.hi || e.hi == o.hi && e.lo < o.lo }
func (e electionID) proto() *p4v1.Uint128   { return &p4v1.Uint128{High: e.hi, Low: e.lo} }

// client is one StreamChannel: its arbitration state and its send queue
// (one goroutine sends, since a gRPC stream's Send is not concurrent).
type client struct {
	send       chan *p4v1.StreamMessageResponse
	done       chan struct{}
	overflow   chan struct{} // closed when a control message found the queue full
	overOnce   sync.Once
	arbitrated bool
	role       string
	id         electionID
	hasID      bool
}

// roleState is the arbitration of one role (the default role is "").
type roleState struct {
	clients map[*client]bool
	primary *client
	past    electionID // the highest election id seen (election_id_past)
	hasPast bool
}

// arbiter implements §5 of the specification: per role, the live stream
// with the highest election id (at least the highest ever seen) is the
// primary; every change of primary is announced to all of the role's
// clients, the primary with OK, the backups with ALREADY_EXISTS (NOT_FOUND
// while there is no primary).
type arbiter struct {
	mu       sync.Mutex
	deviceID uint64
	roles    map[string]*roleState
}

// update handles a MasterArbitrationUpdate; a non-nil error terminates
// the stream with that code.
func (a *arbiter) update(c *client, m *p4v1.MasterArbitrationUpdate) *Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	role := m.GetRole().GetName()
	if m.GetDeviceId() != a.deviceID {
		if c.arbitrated {
			return errf(codes.FailedPrecondition, "device_id %d: this stream is for device %d", m.GetDeviceId(), a.deviceID)
		}
		return errf(codes.NotFound, "device_id %d: this server is device %d", m.GetDeviceId(), a.deviceID)
	}
	if c.arbitrated && role != c.role {
		return errf(codes.FailedPrecondition, "role %q: this stream has role %q (open a new stream to change roles)", role, c.role)
	}
	if m.GetRole().GetConfig() != nil {
		return errf(codes.InvalidArgument, "role %q: role.config is not supported (every role has full pipeline access)", role)
	}
	id, hasID := toElection(m.GetElectionId())
	rs := a.roles[role]
	if rs == nil {
		rs = &roleState{clients: map[*client]bool{}}
		a.roles[role] = rs
	}
	if hasID {
		for o := range rs.clients {
			if o != c && o.hasID && o.id == id {
				return errf(codes.InvalidArgument, "election_id %d:%d is already used by another controller of role %q", id.hi, id.lo, role)
			}
		}
	}
	c.arbitrated, c.role, c.id, c.hasID = true, role, id, hasID
	rs.clients[c] = true
	wasPrimary := rs.primary == c
	if hasID && (!rs.hasPast || !id.less(rs.past)) {
		rs.past, rs.hasPast = id, true
		rs.primary = c
		a.notifyAll(role, rs)
		return nil
	}
	if wasPrimary { // a primary downgraded itself
		rs.primary = nil
		a.notifyAll(role, rs)
		return nil
	}
	a.notify(role, rs, c)
	return nil
}

// leave removes a closed stream; a primary leaving is announced.
func (a *arbiter) leave(c *client) {
	a.mu.Lock()
	defer a.mu.Unlock()
	rs := a.roles[c.role]
	if rs == nil || !rs.clients[c] {
		return
	}
	delete(rs.clients, c)
	if rs.primary == c {
		rs.primary = nil
		a.notifyAll(c.role, rs)
	}
}

func (a *arbiter) notifyAll(role string, rs *roleState) {
	for c := range rs.clients {
		a.notify(role, rs, c)
	}
}

// notify sends c the role's arbitration state (§5.5).
func (a *arbiter) notify(role string, rs *roleState, c *client) {
	m := &p4v1.MasterArbitrationUpdate{DeviceId: a.deviceID}
	if role != "" {
		m.Role = &p4v1.Role{Name: role}
	}
	if rs.hasPast {
		m.ElectionId = rs.past.proto()
	}
	switch {
	case rs.primary == c:
		m.Status = &status.Status{Code: int32(codes.OK), Message: "primary"}
	case rs.primary != nil:
		m.Status = &status.Status{Code: int32(codes.AlreadyExists), Message: "backup: another controller is primary"}
	default:
		m.Status = &status.Status{Code: int32(codes.NotFound), Message: "backup: there is no primary"}
	}
	c.push(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Arbitration{Arbitration: m}}, true)
}

// push queues a message for the client without ever blocking (it is
// called under the arbiter's lock and from the datapath): a packet-in or
// stream error is dropped when the queue is full (reported false); a
// control message that finds it full ends the stream (RESOURCE_EXHAUSTED),
// since a client that does not read must not hold up the others.
func (c *client) push(m *p4v1.StreamMessageResponse, mustDeliver bool) bool {
	select {
	case c.send <- m:
		return true
	default:
	}
	if mustDeliver {
		c.overOnce.Do(func() { close(c.overflow) })
	}
	return false
}

// isPrimary reports whether the given election id is the role's primary's.
func (a *arbiter) isPrimary(role string, u *p4v1.Uint128) *Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	rs := a.roles[role]
	if rs == nil && role != "" {
		return errf(codes.NotFound, "role %q: no controller of this role has connected", role)
	}
	id, ok := toElection(u)
	if !ok {
		return errf(codes.PermissionDenied, "no election_id: only the primary may write")
	}
	if rs == nil || rs.primary == nil || rs.primary.id != id {
		return errf(codes.PermissionDenied, "election_id %d:%d is not the primary's of role %q", id.hi, id.lo, role)
	}
	return nil
}

// clientIsPrimary reports whether a stream is its role's primary.
func (a *arbiter) clientIsPrimary(c *client) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	rs := a.roles[c.role]
	return c.arbitrated && rs != nil && rs.primary == c
}

// primaries returns every role's primary (packet-ins go to each).
func (a *arbiter) primaries() []*client {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*client
	for _, rs := range a.roles {
		if rs.primary != nil {
			out = append(out, rs.primary)
		}
	}
	return out
}

// count returns the number of arbitrated streams.
func (a *arbiter) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, rs := range a.roles {
		n += len(rs.clients)
	}
	return n
}
