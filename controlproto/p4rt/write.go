package p4rt

import (
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
)

// pending is one validated update, ready to apply.
type pending struct {
	op    p4v1.Update_Type
	s     *spec
	rules []flowKey // INSERT: the compiled flow entries
	mc    *mcSpec   // a multicast group update (s is nil)
}

// view answers existence and table occupancy during a batch's validation:
// the store as it is plus the batch's earlier updates.
type view struct {
	st     *store
	exists map[string]bool
	count  map[uint32]int
	groups map[uint32]bool   // multicast groups the batch inserted (true) or deleted (false)
	uses   map[string]uint32 // the multicast group of each entry the batch wrote (0: none)
}

func newView(st *store) *view {
	return &view{st: st, exists: map[string]bool{}, count: map[uint32]int{}, groups: map[uint32]bool{}, uses: map[string]uint32{}}
}

func (v *view) has(key string) bool {
	if e, ok := v.exists[key]; ok {
		return e
	}
	return v.st.entries[key] != nil
}

func (v *view) hasGroup(id uint32) bool {
	if e, ok := v.groups[id]; ok {
		return e
	}
	return v.st.groups[id] != nil
}

func (v *view) numGroups() int {
	n := len(v.st.groups)
	for id, e := range v.groups {
		if e && v.st.groups[id] == nil {
			n++
		} else if !e && v.st.groups[id] != nil {
			n--
		}
	}
	return n
}

// groupUsers counts the entries (default entries included) that use
// multicast group id.
func (v *view) groupUsers(id uint32) int {
	n := 0
	for k, st := range v.st.entries {
		if _, ok := v.uses[k]; !ok && mcGroupOf(st.canon) == id {
			n++
		}
	}
	for _, st := range v.st.defaults {
		if _, ok := v.uses[st.s.key]; !ok && mcGroupOf(st.canon) == id {
			n++
		}
	}
	for _, g := range v.uses {
		if g == id {
			n++
		}
	}
	return n
}

// checkGroup validates a multicast group update against the view.
func (v *view) checkGroup(u *p4v1.Update) (*pending, *Error) {
	m, err := checkMulticast(u.GetEntity().GetPacketReplicationEngineEntry(), u.GetType())
	if err != nil {
		return nil, err
	}
	switch u.GetType() {
	case p4v1.Update_INSERT:
		if v.hasGroup(m.id) {
			return nil, errf(codes.AlreadyExists, "multicast group %d exists", m.id)
		}
		if v.numGroups() >= maxMulticastGroups {
			return nil, errf(codes.ResourceExhausted, "%d multicast groups: the most gswitch keeps", maxMulticastGroups)
		}
		v.groups[m.id] = true
	case p4v1.Update_MODIFY:
		if !v.hasGroup(m.id) {
			return nil, errf(codes.NotFound, "multicast group %d: no such group to modify", m.id)
		}
	case p4v1.Update_DELETE:
		if !v.hasGroup(m.id) {
			return nil, errf(codes.NotFound, "multicast group %d: no such group to delete", m.id)
		}
		if n := v.groupUsers(m.id); n > 0 {
			return nil, errf(codes.FailedPrecondition, "multicast group %d is used by %d table entries (set_multicast_group): delete or change them first", m.id, n)
		}
		v.groups[m.id] = false
	default:
		return nil, errf(codes.InvalidArgument, "update type %s", u.GetType())
	}
	return &pending{op: u.GetType(), mc: m}, nil
}

// checkUses checks that the group an entry's new action uses exists, and
// records the use.
func (v *view) checkUses(s *spec, te *p4v1.TableEntry) *Error {
	if s.action == nil && !s.isDefault {
		return nil // MODIFY without an action: the action stays
	}
	g := uint32(0)
	if s.action != nil {
		g = mcGroupOf(s.canon)
	}
	if g != 0 && !v.hasGroup(g) {
		return errf(codes.NotFound, "table %s: set_multicast_group(%d): multicast group %d does not exist (write the PacketReplicationEngineEntry first)", s.t.p.GetPreamble().GetName(), g, g)
	}
	v.uses[s.key] = g
	return nil
}

// check validates one update against the view, and records its effect.
func (v *view) check(u *p4v1.Update) (*pending, *Error) {
	te := u.GetEntity().GetTableEntry()
	switch {
	case u.GetEntity() == nil || u.GetEntity().GetEntity() == nil:
		return nil, errf(codes.InvalidArgument, "update without an entity")
	case u.GetEntity().GetPacketReplicationEngineEntry() != nil:
		return v.checkGroup(u)
	case te == nil:
		return nil, errf(codes.Unimplemented, "only table entries and multicast group entries can be written (gswitch's pipeline has no other writable entity)")
	}
	switch u.GetType() {
	case p4v1.Update_INSERT, p4v1.Update_MODIFY, p4v1.Update_DELETE:
	default:
		return nil, errf(codes.InvalidArgument, "update type %s", u.GetType())
	}
	s, err := fixed.checkEntry(te, u.GetType())
	if err != nil {
		return nil, err
	}
	p := &pending{op: u.GetType(), s: s}
	if s.isDefault {
		return p, v.checkUses(s, te)
	}
	tid := s.t.p.GetPreamble().GetId()
	name := s.t.p.GetPreamble().GetName()
	switch u.GetType() {
	case p4v1.Update_INSERT:
		if v.has(s.key) {
			return nil, errf(codes.AlreadyExists, "table %s: the entry exists (same match and priority)", name)
		}
		if v.st.count[tid]+v.count[tid] >= s.t.maxRules {
			return nil, errf(codes.ResourceExhausted, "table %s is full (%d entries)", name, s.t.maxRules)
		}
		if p.rules, err = compileRules(s); err != nil {
			return nil, err
		}
		if err := v.checkUses(s, te); err != nil {
			return nil, err
		}
		v.exists[s.key] = true
		v.count[tid]++
	case p4v1.Update_MODIFY:
		if !v.has(s.key) {
			return nil, errf(codes.NotFound, "table %s: no such entry to modify", name)
		}
		if err := v.checkUses(s, te); err != nil {
			return nil, err
		}
	case p4v1.Update_DELETE:
		if !v.has(s.key) {
			return nil, errf(codes.NotFound, "table %s: no such entry to delete", name)
		}
		v.exists[s.key] = false
		v.uses[s.key] = 0
		v.count[tid]--
	}
	return p, nil
}

// apply applies one validated update to the store and the switch and
// returns how to undo it.
func (s *store) apply(tx txn, p *pending) (undo, *Error) {
	if p.mc != nil {
		return s.applyGroup(tx, p.op, p.mc)
	}
	apply := tx.flow
	if p.s.isDefault {
		st := s.defaults[p.s.t.p.GetPreamble().GetId()]
		canon := p.s.canon
		if p.s.action == nil { // reset to the program's default
			canon = defaultEntry(p.s.t)
		}
		return s.modify(apply, st, canon)
	}
	switch p.op {
	case p4v1.Update_INSERT:
		return s.insert(apply, &stored{s: p.s, canon: p.s.canon, rules: p.rules})
	case p4v1.Update_MODIFY:
		st := s.entries[p.s.key]
		canon := p.s.canon
		if p.s.action == nil { // no action: the action stays
			canon = cloneEntry(canon)
			canon.Action = st.canon.GetAction()
		}
		return s.modify(apply, st, canon)
	default:
		return s.del(apply, s.entries[p.s.key])
	}
}

// write applies a batch in the given atomicity mode and returns one error
// (nil: OK) per update; top is an error of the whole request.
//
// Every update is validated completely against the store as the batch's
// earlier updates leave it before it changes anything. CONTINUE_ON_ERROR
// validates and applies update by update, each FlowMod under the switch's
// own lock. ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC validate the whole batch
// first (a bad update fails the batch with nothing changed: it gets its
// error, the others ABORTED), then apply it; should the switch refuse an
// update (a pipeline table full), the updates applied so far are undone in
// reverse order (the failing one gets its error, the others ABORTED). So
// both are all-or-nothing. DATAPLANE_ATOMIC also holds the datapath off
// for the whole batch (Switch.Transact): no packet is classified between
// two of its updates, so each sees the tables before or after the batch.
func (s *Server) write(ups []*p4v1.Update, mode p4v1.WriteRequest_Atomicity) ([]*Error, *Error) {
	errs := make([]*Error, len(ups))
	v := newView(s.st)
	if mode == p4v1.WriteRequest_CONTINUE_ON_ERROR {
		for i, u := range ups {
			p, err := v.check(u)
			if err != nil {
				errs[i] = err
				// the view recorded nothing for a failed update
				continue
			}
			_ = s.transact(func(tx txn) error {
				if _, err := s.st.apply(tx, p); err != nil {
					errs[i] = err
				}
				return nil
			})
			// The store is the truth again for the next update.
			v = newView(s.st)
		}
		return errs, nil
	}
	if mode != p4v1.WriteRequest_ROLLBACK_ON_ERROR && mode != p4v1.WriteRequest_DATAPLANE_ATOMIC {
		return nil, errf(codes.InvalidArgument, "atomicity %d", mode)
	}
	ps := make([]*pending, len(ups))
	failed := -1
	for i, u := range ups {
		p, err := v.check(u)
		if err != nil {
			errs[i] = err
			if failed < 0 {
				failed = i
			}
			continue
		}
		ps[i] = p
	}
	aborted := func(why string) {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = errf(codes.Aborted, "not applied: %s", why)
			}
		}
	}
	if failed >= 0 {
		aborted("the batch failed validation (all-or-nothing)")
		return errs, nil
	}
	run := func(tx txn, i int) (undo, *Error) { return s.st.apply(tx, ps[i]) }
	var undos []undo
	fail := func(tx txn, i int, err *Error) {
		errs[i] = err
		for j := len(undos) - 1; j >= 0; j-- {
			if uerr := undos[j](tx); uerr != nil {
				s.log.Error("p4rt: rollback failed; the store and the switch may disagree", "update", j, "err", uerr.Msg)
			}
		}
		aborted("rolled back after a failed update")
	}
	if mode == p4v1.WriteRequest_DATAPLANE_ATOMIC {
		_ = s.transact(func(tx txn) error {
			for i := range ps {
				u, err := run(tx, i)
				if err != nil {
					fail(tx, i, err)
					return nil
				}
				undos = append(undos, u)
			}
			return nil
		})
		return errs, nil
	}
	for i := range ps {
		var u undo
		var err *Error
		_ = s.transact(func(tx txn) error {
			u, err = run(tx, i)
			if err != nil {
				fail(tx, i, err)
			}
			return nil
		})
		if err != nil {
			return errs, nil
		}
		undos = append(undos, u)
	}
	return errs, nil
}
