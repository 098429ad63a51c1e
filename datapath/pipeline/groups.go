package pipeline

import (
	"hash/fnv"
	"time"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// maxGroupDepth bounds group chaining (a bucket forwarding to another
// group). The group table refuses loops; this only guards the stack.
const maxGroupDepth = 16

// GroupMod adds, modifies or deletes groups through the group table; the
// flow entries that forward to a deleted group are removed (FLOW_REMOVED
// reason GROUP_DELETE for those with send_flow_rem). It holds the
// switch's write lock, so no batch sees a flow entry whose group is gone.
func (s *Switch) GroupMod(gm *rule.GroupMod) error {
	if err := checkBuckets(&gm.Group); err != nil {
		return err
	}
	defer s.unlockWrite(WriteGroupMod, s.lockWrite())
	return s.groupModLocked(gm)
}

// groupModLocked is GroupMod with s.mu held (the buckets' actions checked
// or not: it checks them again).
func (s *Switch) groupModLocked(gm *rule.GroupMod) error {
	if err := checkBuckets(&gm.Group); err != nil {
		return err
	}
	deleted, err := s.groups.Mod(gm)
	if err != nil {
		return err
	}
	for _, id := range deleted {
		s.removeWhereLocked(func(e *entry) bool {
			return outputsTo(&e.fm.Instructions, rule.PortAny, id)
		}, rule.RemovedGroupDelete)
	}
	return nil
}

// GroupDesc describes every group, ascending by id.
func (s *Switch) GroupDesc() []rule.Group { return s.groups.Desc() }

// GroupStats returns the counters of one group, or of all for GroupAll.
func (s *Switch) GroupStats(id uint32) ([]rule.GroupStats, error) {
	return s.groups.Stats(id), nil
}

// GroupFeatures describes the group table.
func (s *Switch) GroupFeatures() rule.GroupFeatures { return s.groups.Features() }

// GroupExists reports whether group id exists.
func (s *Switch) GroupExists(id uint32) bool { return s.groups.Exists(id) }

// MeterMod adds, modifies or deletes meters through the meter table; the
// flow entries that use a deleted meter are removed (OpenFlow 1.3 has no
// FLOW_REMOVED reason for it: DELETE is sent to those with send_flow_rem).
func (s *Switch) MeterMod(mm *rule.MeterMod) error {
	defer s.unlockWrite(WriteMeterMod, s.lockWrite())
	deleted, err := s.meters.Mod(mm)
	if err != nil {
		return err
	}
	for _, id := range deleted {
		s.removeWhereLocked(func(e *entry) bool {
			in := &e.fm.Instructions
			return in.Has&rule.HasMeter != 0 && in.Meter == id
		}, rule.RemovedDelete)
	}
	return nil
}

// MeterConfig returns the configuration of one meter, or of all.
func (s *Switch) MeterConfig(id uint32) ([]rule.MeterConfig, error) {
	return s.meters.Config(id), nil
}

// MeterStats returns the counters of one meter, or of all.
func (s *Switch) MeterStats(id uint32) ([]rule.MeterStats, error) {
	return s.meters.Stats(id), nil
}

// MeterFeatures describes the meter table.
func (s *Switch) MeterFeatures() rule.MeterFeatures { return s.meters.Features() }

// MeterExists reports whether meter id exists.
func (s *Switch) MeterExists(id uint32) bool { return s.meters.Exists(id) }

// removeWhereLocked deletes, from every table, the entries pred selects.
func (s *Switch) removeWhereLocked(pred func(*entry) bool, reason uint8) {
	for _, t := range s.tables {
		sel := flow.Selector{Filter: func(id flow.RuleID, _ *flow.Rule) bool {
			e := t.entry(id)
			return e != nil && pred(e)
		}}
		removed := t.ft.Delete(sel)
		for _, r := range removed {
			s.removedLocked(t, r.ID, reason)
		}
		if len(removed) > 0 {
			if err := s.syncLocked(t); err != nil {
				s.log.Error("pipeline: removing the entries of a deleted group or meter", "table", t.id, "err", err)
			}
		}
	}
}

// groupRefs lists the groups an entry's actions forward to.
func groupRefs(in *rule.Instructions) []uint32 {
	var ids []uint32
	for _, as := range [][]rule.Action{in.Apply, in.Write} {
		for _, a := range as {
			if a.Kind == rule.ActGroup {
				ids = append(ids, a.ID)
			}
		}
	}
	return ids
}

// acquireRefsLocked counts a new entry's references to groups and meters,
// or, when one is missing, counts none and returns OFPBAC_BAD_OUT_GROUP
// or OFPMMFC_UNKNOWN_METER. Groups and meters change only under s.mu.
func (s *Switch) acquireRefsLocked(in *rule.Instructions) error {
	gs := groupRefs(in)
	for i, id := range gs {
		if !s.groups.AddFlowRef(id) {
			for _, got := range gs[:i] {
				s.groups.ReleaseFlowRef(got)
			}
			return rule.Errorf(rule.DanglingGroup, "group %d does not exist", id)
		}
	}
	if in.Has&rule.HasMeter != 0 && !s.meters.AddFlowRef(in.Meter) {
		for _, got := range gs {
			s.groups.ReleaseFlowRef(got)
		}
		return rule.Errorf(rule.UnknownMeter, "meter %d does not exist", in.Meter)
	}
	return nil
}

// releaseRefs forgets the references acquireRefsLocked counted.
func (s *Switch) releaseRefs(in *rule.Instructions) {
	for _, id := range groupRefs(in) {
		s.groups.ReleaseFlowRef(id)
	}
	if in.Has&rule.HasMeter != 0 {
		s.meters.ReleaseFlowRef(in.Meter)
	}
}

// live reports whether a port can carry traffic: present, link up and not
// configured down (a fast-failover or select bucket's watch_port).
func (s *Switch) live(no uint32) bool {
	p := s.ports[no]
	return p != nil && p.up()
}

// flowHash hashes the fields a select group spreads flows by: Ethernet
// addresses and type, VLAN, IP addresses and protocol, and L4 ports, so
// that every packet of a flow takes the same bucket.
func flowHash(k *flow.Key) uint32 {
	h := fnv.New32a()
	for _, f := range hashFields {
		h.Write(k.Get(f))
	}
	return h.Sum32()
}

var hashFields = []flow.Field{
	flow.FieldEthSrc, flow.FieldEthDst, flow.FieldEthType, flow.FieldVlanVID, flow.FieldIPProto,
	flow.FieldIPv4Src, flow.FieldIPv4Dst, flow.FieldIPv6Src, flow.FieldIPv6Dst,
	flow.FieldTCPSrc, flow.FieldTCPDst, flow.FieldUDPSrc, flow.FieldUDPDst, flow.FieldSCTPSrc, flow.FieldSCTPDst,
	flow.FieldARPSPA, flow.FieldARPTPA,
}

// group runs a packet through group id: each bucket the group table picks
// gets its own copy of the packet and runs its actions on it, so the
// packet itself is unchanged. A group with no live bucket drops (counted
// against the group only).
func (w *worker) group(p *pkt, id uint32) {
	if w.depth >= maxGroupDepth {
		w.s.unsupported.Add(1)
		return
	}
	if p.dirty {
		p.reparse()
	}
	buckets := w.s.groups.Pick(id, flowHash(&p.key), w.s.live)
	w.s.groups.CountPick(id, buckets, len(p.data))
	if len(buckets) == 0 {
		w.s.groupDrops.Add(1)
		return
	}
	g, ok := w.s.groups.Get(id)
	if !ok {
		return
	}
	w.depth++
	defer func() { w.depth-- }()
	for _, b := range buckets {
		if b >= len(g.Buckets) {
			continue
		}
		c := *p
		c.data = append([]byte(nil), p.data...)
		c.actset = nil
		w.execList(&c, g.Buckets[b].Actions)
	}
}

// meter runs a packet through meter id: a drop band drops it, a DSCP
// remark band raises its IP DSCP drop precedence. A meter that is gone
// (its entries are removed with it) lets the packet pass.
func (w *worker) meter(p *pkt, id uint32) {
	m := w.s.meters.Get(id)
	if m == nil {
		return
	}
	drop, prec := m.Allow(time.Unix(0, w.now), len(p.data))
	if drop {
		w.s.meterDrops.Add(1)
		p.drop = true
		return
	}
	if prec == 0 {
		return
	}
	if p.dirty {
		p.reparse()
	}
	eth := p.key.GetUint(flow.FieldEthType)
	if eth != 0x0800 && eth != 0x86dd {
		return
	}
	old := uint8(p.key.GetUint(flow.FieldIPDSCP))
	if nd := rule.RemarkDSCP(old, prec); nd != old && setField(p.data, flow.FieldIPDSCP, []byte{nd}) {
		p.dirty = true
	}
}
