package rule

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// GroupTableConfig bounds a GroupTable. Zero fields take the defaults.
type GroupTableConfig struct {
	// MaxGroups bounds the groups of each type (default 4096 each).
	MaxGroups [NumGroupTypes]uint32
	// MaxBuckets bounds a group's buckets (default and at most
	// MaxBuckets).
	MaxBuckets int
	// Now is the clock for durations (default time.Now).
	Now func() time.Time
}

// GroupTable is the model's group table, with OpenFlow 1.3's group
// semantics: GroupMod validation and application (existence, limits,
// references to other groups and loops among them, chained-group
// deletion), descriptions, counters and features, the reference counts of
// flow entries, and bucket selection for the datapath (chaining through
// watched groups, liveness through watched ports). It is safe for
// concurrent use.
type GroupTable struct {
	mu     sync.Mutex
	cfg    GroupTableConfig
	groups map[uint32]*groupEntry
}

type groupEntry struct {
	g              Group
	added          time.Time
	flowRefs       uint32
	packets, bytes uint64
	buckets        []Counter
}

// NewGroupTable returns an empty group table.
func NewGroupTable(cfg GroupTableConfig) *GroupTable {
	for i := range cfg.MaxGroups {
		if cfg.MaxGroups[i] == 0 {
			cfg.MaxGroups[i] = 4096
		}
	}
	if cfg.MaxBuckets <= 0 || cfg.MaxBuckets > MaxBuckets {
		cfg.MaxBuckets = MaxBuckets
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &GroupTable{cfg: cfg, groups: map[uint32]*groupEntry{}}
}

// Mod applies a GroupMod, or changes nothing and returns an *Error of
// kind GroupExists, UnknownGroup, InvalidGroup, BadGroupType,
// BadGroupCommand, OutOfGroups, OutOfBuckets, BadWatch (also a watched
// group that does not exist), DanglingGroup (a group action naming a
// group that does not exist), GroupLoop (a change that would make a group
// reach itself through group actions or watch groups) or ChainedGroup
// (deleting a group another group forwards to or watches). It returns the
// ids of the deleted groups, whose flow entries the switch must remove
// (OpenFlow 1.3 §6.5).
func (t *GroupTable) Mod(gm *GroupMod) (deleted []uint32, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch gm.Command {
	case GroupAdd:
		return nil, asError(t.add(&gm.Group))
	case GroupModify:
		return nil, asError(t.modify(&gm.Group))
	case GroupDelete:
		ids, e := t.delete(gm.ID)
		return ids, asError(e)
	}
	return nil, Errorf(BadGroupCommand, "command %d", gm.Command)
}

func (t *GroupTable) add(g *Group) *Error {
	if _, ok := t.groups[g.ID]; ok {
		return Errorf(GroupExists, "group %d exists", g.ID)
	}
	if err := t.check(g, nil); err != nil {
		return err
	}
	t.groups[g.ID] = &groupEntry{g: cloneGroup(g), added: t.cfg.Now(), buckets: make([]Counter, len(g.Buckets))}
	return nil
}

func (t *GroupTable) modify(g *Group) *Error {
	old, ok := t.groups[g.ID]
	if !ok {
		return Errorf(UnknownGroup, "group %d does not exist", g.ID)
	}
	if err := t.check(g, old); err != nil {
		return err
	}
	// The counters stay; the bucket counters follow the new buckets.
	old.g = cloneGroup(g)
	old.buckets = make([]Counter, len(g.Buckets))
	return nil
}

// check checks a group to be added (old nil) or to replace old.
func (t *GroupTable) check(g *Group, old *groupEntry) *Error {
	switch {
	case g.ID > GroupMax:
		return Errorf(InvalidGroup, "group %#x is reserved", g.ID)
	case g.Type >= NumGroupTypes:
		return Errorf(BadGroupType, "group type %d", g.Type)
	case len(g.Buckets) > t.cfg.MaxBuckets:
		return Errorf(OutOfBuckets, "%d buckets, at most %d", len(g.Buckets), t.cfg.MaxBuckets)
	case (old == nil || old.g.Type != g.Type) && t.countType(g.Type) >= t.cfg.MaxGroups[g.Type]:
		return Errorf(OutOfGroups, "%d %s groups already", t.cfg.MaxGroups[g.Type], g.Type)
	}
	if err := checkGroup(g); err != nil {
		return err
	}
	if err := t.checkRefsExist(g); err != nil {
		return err
	}
	if old == nil {
		return nil // nothing forwards to a new group, so it closes no loop
	}
	for _, r := range groupRefs(g) {
		if t.reaches(r, g.ID) {
			return Errorf(GroupLoop, "group %d would reach itself through group %d", g.ID, r)
		}
	}
	return nil
}

func (t *GroupTable) countType(typ GroupType) uint32 {
	var n uint32
	for _, e := range t.groups {
		if e.g.Type == typ {
			n++
		}
	}
	return n
}

// checkRefsExist checks that the groups g's buckets forward to or watch
// exist.
func (t *GroupTable) checkRefsExist(g *Group) *Error {
	for i, bk := range g.Buckets {
		if _, ok := t.groups[bk.WatchGroup]; bk.WatchGroup != GroupAny && !ok {
			return Errorf(BadWatch, "bucket %d watches group %d, which does not exist", i, bk.WatchGroup)
		}
		for _, a := range bk.Actions {
			if _, ok := t.groups[a.ID]; a.Kind == ActGroup && !ok {
				return Errorf(DanglingGroup, "bucket %d forwards to group %d, which does not exist", i, a.ID)
			}
		}
	}
	return nil
}

// groupRefs returns the groups g's buckets forward to or watch.
func groupRefs(g *Group) []uint32 {
	var refs []uint32
	for _, bk := range g.Buckets {
		if bk.WatchGroup != GroupAny {
			refs = append(refs, bk.WatchGroup)
		}
		for _, a := range bk.Actions {
			if a.Kind == ActGroup {
				refs = append(refs, a.ID)
			}
		}
	}
	return refs
}

// reaches reports whether target is from, or reachable from it through
// the installed groups' references.
func (t *GroupTable) reaches(from, target uint32) bool {
	seen := map[uint32]bool{}
	stack := []uint32{from}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if id == target {
			return true
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if e, ok := t.groups[id]; ok {
			stack = append(stack, groupRefs(&e.g)...)
		}
	}
	return false
}

func (t *GroupTable) delete(id uint32) ([]uint32, *Error) {
	if id == GroupAll {
		ids := slices.Sorted(maps.Keys(t.groups))
		clear(t.groups)
		return ids, nil
	}
	if _, ok := t.groups[id]; !ok {
		return nil, nil // deleting a missing group is not an error
	}
	for oid, e := range t.groups {
		if oid != id && slices.Contains(groupRefs(&e.g), id) {
			return nil, Errorf(ChainedGroup, "group %d forwards to or watches group %d", oid, id)
		}
	}
	delete(t.groups, id)
	return []uint32{id}, nil
}

func cloneGroup(g *Group) Group {
	c := Group{ID: g.ID, Type: g.Type, Buckets: make([]Bucket, len(g.Buckets))}
	for i, bk := range g.Buckets {
		bk.Actions = slices.Clone(bk.Actions)
		c.Buckets[i] = bk
	}
	return c
}

// Exists reports whether group id exists.
func (t *GroupTable) Exists(id uint32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.groups[id]
	return ok
}

// Get returns a copy of group id.
func (t *GroupTable) Get(id uint32) (Group, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.groups[id]
	if !ok {
		return Group{}, false
	}
	return cloneGroup(&e.g), true
}

// Desc describes every group, ascending by id.
func (t *GroupTable) Desc() []Group {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Group, 0, len(t.groups))
	for _, id := range slices.Sorted(maps.Keys(t.groups)) {
		out = append(out, cloneGroup(&t.groups[id].g))
	}
	return out
}

// AddFlowRef counts a flow entry that forwards to group id; false when
// the group does not exist (the flow must then be refused:
// DanglingGroup). Call it, and ReleaseFlowRef when the entry goes,
// under the lock that makes the flow change atomic.
func (t *GroupTable) AddFlowRef(id uint32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.groups[id]
	if ok {
		e.flowRefs++
	}
	return ok
}

// ReleaseFlowRef forgets a flow entry counted by AddFlowRef.
func (t *GroupTable) ReleaseFlowRef(id uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.groups[id]; ok && e.flowRefs > 0 {
		e.flowRefs--
	}
}

// Count adds a packet of n bytes to group id and to its bucket (bucket
// -1: the group only, when no bucket was live).
func (t *GroupTable) Count(id uint32, bucket int, n int) {
	t.count(id, []int{bucket}, uint64(n))
}

// CountPick adds a packet of n bytes to group id once and to each of the
// buckets it went through (Pick's answer; none when no bucket was live).
func (t *GroupTable) CountPick(id uint32, buckets []int, n int) {
	t.count(id, buckets, uint64(max(n, 0)))
}

// count adds a packet of n bytes to group id once and to each of its
// buckets in buckets (those out of range are passed over).
func (t *GroupTable) count(id uint32, buckets []int, n uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.groups[id]
	if !ok {
		return
	}
	e.packets++
	e.bytes += n
	for _, b := range buckets {
		if b >= 0 && b < len(e.buckets) {
			e.buckets[b].Packets++
			e.buckets[b].Bytes += n
		}
	}
}

// Stats returns the counters of group id, or of every group for GroupAll
// (ascending by id); none for a missing group. RefCount counts the flow
// entries (AddFlowRef) and the groups that forward to or watch the group.
func (t *GroupTable) Stats(id uint32) []GroupStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	groupRefCount := map[uint32]uint32{}
	for _, e := range t.groups {
		for _, r := range slices.Compact(slices.Sorted(slices.Values(groupRefs(&e.g)))) {
			groupRefCount[r]++
		}
	}
	ids := []uint32{id}
	if id == GroupAll {
		ids = slices.Sorted(maps.Keys(t.groups))
	}
	var out []GroupStats
	now := t.cfg.Now()
	for _, gid := range ids {
		e, ok := t.groups[gid]
		if !ok {
			continue
		}
		d := max(now.Sub(e.added), 0)
		out = append(out, GroupStats{
			ID: gid, RefCount: e.flowRefs + groupRefCount[gid], Packets: e.packets, Bytes: e.bytes,
			DurationSec: uint32(d / time.Second), DurationNsec: uint32(d % time.Second),
			Buckets: slices.Clone(e.buckets),
		})
	}
	return out
}

// Features describes the table: every type, weights, liveness, chaining
// with loop checks.
func (t *GroupTable) Features() GroupFeatures {
	return GroupFeatures{
		Types:        1<<NumGroupTypes - 1,
		Capabilities: GroupCapSelectWeight | GroupCapSelectLiveness | GroupCapChaining | GroupCapChainingChecks,
		MaxGroups:    t.cfg.MaxGroups,
	}
}

// maxLivenessDepth bounds the recursion through watched groups (loops are
// refused, so it only guards against very long chains).
const maxLivenessDepth = 32

// Pick returns the buckets a packet goes through in group id (indices
// into its buckets), or none when the group does not exist or no bucket
// is live: every bucket of an all group, the one of an indirect group,
// one live bucket of nonzero weight chosen by hash in proportion to the
// weights for a select group, the first live bucket of a fast-failover
// group. A bucket is live when its watched port is live (live(port)) and
// its watched group has a live bucket.
func (t *GroupTable) Pick(id uint32, hash uint32, live func(port uint32) bool) []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.groups[id]
	if !ok {
		return nil
	}
	switch e.g.Type {
	case GroupTypeAll:
		idx := make([]int, len(e.g.Buckets))
		for i := range idx {
			idx[i] = i
		}
		return idx
	case GroupTypeIndirect:
		return []int{0}
	case GroupTypeSelect:
		return t.pickWeighted(&e.g, hash, live)
	}
	for i := range e.g.Buckets {
		if t.bucketLive(&e.g.Buckets[i], live, 0) {
			return []int{i}
		}
	}
	return nil
}

func (t *GroupTable) pickWeighted(g *Group, hash uint32, live func(uint32) bool) []int {
	var total uint64
	for i := range g.Buckets {
		if g.Buckets[i].Weight > 0 && t.bucketLive(&g.Buckets[i], live, 0) {
			total += uint64(g.Buckets[i].Weight)
		}
	}
	if total == 0 {
		return nil
	}
	x := uint64(hash) * total >> 32 // in [0, total)
	for i := range g.Buckets {
		w := uint64(g.Buckets[i].Weight)
		if w == 0 || !t.bucketLive(&g.Buckets[i], live, 0) {
			continue
		}
		if x < w {
			return []int{i}
		}
		x -= w
	}
	return nil
}

func (t *GroupTable) bucketLive(bk *Bucket, live func(uint32) bool, depth int) bool {
	if bk.WatchPort != PortAny && (live == nil || !live(bk.WatchPort)) {
		return false
	}
	if bk.WatchGroup == GroupAny {
		return true
	}
	e, ok := t.groups[bk.WatchGroup]
	if !ok || depth >= maxLivenessDepth {
		return false
	}
	for i := range e.g.Buckets {
		if t.bucketLive(&e.g.Buckets[i], live, depth+1) {
			return true
		}
	}
	return false
}
