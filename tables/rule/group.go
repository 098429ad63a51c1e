package rule

import "fmt"

// GroupType is a group's type (OpenFlow 1.3 §5.6.1).
type GroupType uint8

// The group types.
const (
	GroupTypeAll          GroupType = 0 // every bucket
	GroupTypeSelect       GroupType = 1 // one live bucket, by weight
	GroupTypeIndirect     GroupType = 2 // its one bucket
	GroupTypeFastFailover GroupType = 3 // the first live bucket
	// NumGroupTypes is the number of group types.
	NumGroupTypes = 4
)

var groupTypeNames = [...]string{"all", "select", "indirect", "ff"}

// String returns the type's name as ovs-ofctl writes it.
func (t GroupType) String() string {
	if int(t) < len(groupTypeNames) {
		return groupTypeNames[t]
	}
	return fmt.Sprintf("type%d", uint8(t))
}

// GroupCommand is what a GroupMod does.
type GroupCommand uint16

// The commands.
const (
	GroupAdd    GroupCommand = 0
	GroupModify GroupCommand = 1
	GroupDelete GroupCommand = 2
)

// Bucket is one bucket of a group. Weight matters for select groups,
// WatchPort and WatchGroup (PortAny, GroupAny: none) for liveness.
type Bucket struct {
	Weight     uint16
	WatchPort  uint32
	WatchGroup uint32
	Actions    []Action
}

// Group is a group entry as a controller describes it.
type Group struct {
	ID      uint32
	Type    GroupType
	Buckets []Bucket
}

// GroupMod adds, modifies or deletes a group. For GroupDelete only ID
// means something (GroupAll: every group).
type GroupMod struct {
	Command GroupCommand
	Group
}

// MaxBuckets bounds a group's buckets: its statistics (40 bytes and 16
// per bucket) then fit in one message of at most 64 KiB with a 16-byte
// header, as OpenFlow's multipart replies have.
const MaxBuckets = (0xffff - 16 - 40) / 16

// Counter is a packet and byte count (of a bucket, of a meter band).
type Counter struct {
	Packets, Bytes uint64
}

// GroupStats are a group's counters: RefCount counts the flow entries and
// groups that forward to the group.
type GroupStats struct {
	ID                        uint32
	RefCount                  uint32
	Packets, Bytes            uint64
	DurationSec, DurationNsec uint32
	Buckets                   []Counter
}

// Group capabilities.
const (
	GroupCapSelectWeight   uint32 = 1 << 0
	GroupCapSelectLiveness uint32 = 1 << 1
	GroupCapChaining       uint32 = 1 << 2
	GroupCapChainingChecks uint32 = 1 << 3
)

// GroupFeatures describes a group table: Types has bit 1<<GroupType for
// each supported type; MaxGroups is per type. (Which actions buckets may
// hold is the protocol edge's to say: every action it decodes.)
type GroupFeatures struct {
	Types        uint32
	Capabilities uint32
	MaxGroups    [NumGroupTypes]uint32
}

// CheckGroup checks what a group says about itself, without the other
// groups: an indirect group has exactly one bucket and no weight
// (InvalidGroup, as Open vSwitch and the OFTest conformance suite have
// it); watch ports are ordinary ports, PortLocal or PortAny and watch
// groups ordinary ids or GroupAny, and a fast-failover bucket watches
// something (BadWatch); no bucket watches or forwards to its own group
// (GroupLoop).
func CheckGroup(g *Group) error { return asError(checkGroup(g)) }

func checkGroup(g *Group) *Error {
	if g.Type == GroupTypeIndirect && (len(g.Buckets) != 1 || g.Buckets[0].Weight != 0) {
		return Errorf(InvalidGroup, "an indirect group has one bucket without weight, not %d", len(g.Buckets))
	}
	for i, bk := range g.Buckets {
		if !validWatchPort(bk.WatchPort) || (bk.WatchGroup > GroupMax && bk.WatchGroup != GroupAny) {
			return Errorf(BadWatch, "bucket %d: watch_port %#x watch_group %#x", i, bk.WatchPort, bk.WatchGroup)
		}
		if g.Type == GroupTypeFastFailover && bk.WatchPort == PortAny && bk.WatchGroup == GroupAny {
			return Errorf(BadWatch, "fast-failover bucket %d watches neither a port nor a group", i)
		}
		if bk.WatchGroup == g.ID {
			return Errorf(GroupLoop, "bucket %d watches its own group %d", i, g.ID)
		}
		for _, a := range bk.Actions {
			if a.Kind == ActGroup && a.ID == g.ID {
				return Errorf(GroupLoop, "bucket %d forwards to its own group %d", i, g.ID)
			}
		}
	}
	return nil
}

func validWatchPort(p uint32) bool {
	return (p != 0 && p <= PortMax) || p == PortLocal || p == PortAny
}
