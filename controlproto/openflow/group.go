package openflow

import (
	"fmt"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// This file holds the codecs of OFPT_GROUP_MOD and of the group multipart
// requests and replies (OpenFlow 1.3.5 §7.3.4.2, §7.3.5.9-11).

// GroupType is a group's type (enum ofp_group_type).
type GroupType uint8

// The group types of OpenFlow 1.3 §5.6.1.
const (
	GroupTypeAll          GroupType = 0
	GroupTypeSelect       GroupType = 1
	GroupTypeIndirect     GroupType = 2
	GroupTypeFastFailover GroupType = 3
	numGroupTypes                   = 4
)

var groupTypeNames = [...]string{"all", "select", "indirect", "ff"}

// String returns the type's name as ovs-ofctl writes it.
func (t GroupType) String() string {
	if int(t) < len(groupTypeNames) {
		return groupTypeNames[t]
	}
	return fmt.Sprintf("type%d", uint8(t))
}

// GroupCommand is a GROUP_MOD command (enum ofp_group_mod_command).
type GroupCommand uint16

// The commands of OpenFlow 1.3.
const (
	GroupAdd    GroupCommand = 0
	GroupModify GroupCommand = 1
	GroupDelete GroupCommand = 2
)

// Bucket is one bucket of a group (ofp_bucket). Weight matters for select
// groups, WatchPort and WatchGroup (PortAny, GroupAny: none) for
// fast-failover ones.
type Bucket struct {
	Weight     uint16
	WatchPort  uint32
	WatchGroup uint32
	Actions    []Action
}

// Group is a group entry as a controller describes it (OFPMP_GROUP_DESC).
type Group struct {
	ID      uint32
	Type    GroupType
	Buckets []Bucket
}

// GroupMod is a decoded GROUP_MOD. For GroupDelete only ID means
// something (GroupAll: every group).
type GroupMod struct {
	Command GroupCommand
	Group
}

const (
	groupModFixed = 16 // ofp_group_mod up to its buckets
	bucketFixed   = 16 // ofp_bucket up to its actions
	// MaxBuckets bounds a group's buckets so that its OFPMP_GROUP stats
	// entry (40 bytes and 16 per bucket) fits in one multipart reply.
	MaxBuckets = (maxReplyBody - groupStatsFixed) / 16
)

func groupModFailed(c ofp.ErrCode, format string, args ...any) *Error {
	return errf(ofp.ErrTypeGroupModFailed, c, format, args...)
}

// DecodeGroupMod decodes and checks a whole OFPT_GROUP_MOD message: what
// does not depend on the switch's groups. Errors are OFPGMFC_* codes,
// OFPBRC_BAD_LEN for a truncated message, or the OFPBAC_* code of a
// bucket's action.
func DecodeGroupMod(msg []byte) (*GroupMod, *Error) {
	if len(msg) < groupModFixed {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "group_mod of %d bytes", len(msg))
	}
	gm := &GroupMod{Command: GroupCommand(be16(msg[8:]))}
	gm.Type, gm.ID = GroupType(msg[10]), be32(msg[12:])
	switch gm.Command {
	case GroupDelete:
		if gm.ID > GroupMax && gm.ID != GroupAll {
			return nil, groupModFailed(ofp.ErrCodeGroupModFailedInvalidGroup, "delete group %#x", gm.ID)
		}
		return gm, nil // type and buckets are ignored (§7.3.4.2)
	case GroupAdd, GroupModify:
	default:
		return nil, groupModFailed(ofp.ErrCodeGroupModBadCommand, "command %d", gm.Command)
	}
	if gm.ID > GroupMax {
		return nil, groupModFailed(ofp.ErrCodeGroupModFailedInvalidGroup, "group %#x is reserved", gm.ID)
	}
	if gm.Type >= numGroupTypes {
		return nil, groupModFailed(ofp.ErrCodeGroupModBadType, "group type %d", gm.Type)
	}
	var err *Error
	if gm.Buckets, err = decodeBuckets(msg[groupModFixed:]); err != nil {
		return nil, err
	}
	return gm, checkBuckets(&gm.Group)
}

// decodeBuckets reads a list of buckets filling b exactly.
func decodeBuckets(b []byte) ([]Bucket, *Error) {
	var bs []Bucket
	for len(b) > 0 {
		if len(b) < bucketFixed {
			return nil, groupModFailed(ofp.ErrCodeGroupModBadBucket, "bucket truncated (%d bytes)", len(b))
		}
		n := int(be16(b))
		if n < bucketFixed || n%8 != 0 || n > len(b) {
			return nil, groupModFailed(ofp.ErrCodeGroupModBadBucket, "bucket length %d (%d bytes left)", n, len(b))
		}
		if len(bs) == MaxBuckets {
			return nil, groupModFailed(ofp.ErrCodeGroupModFailedOutOfBuckets, "more than %d buckets", MaxBuckets)
		}
		bk := Bucket{Weight: be16(b[2:]), WatchPort: be32(b[4:]), WatchGroup: be32(b[8:])}
		var err *Error
		if bk.Actions, err = DecodeActions(b[bucketFixed:n]); err != nil {
			return nil, err
		}
		bs = append(bs, bk)
		b = b[n:]
	}
	return bs, nil
}

// checkBuckets checks the buckets against the group's type: an indirect
// group has exactly one bucket and no weight (OFPGMFC_INVALID_GROUP, as
// Open vSwitch and the OFTest conformance suite have it); watch ports are
// physical ports, LOCAL or ANY and watch groups ordinary ids or ANY
// (OFPGMFC_BAD_WATCH); a fast-failover bucket watches something.
func checkBuckets(g *Group) *Error {
	if g.Type == GroupTypeIndirect && (len(g.Buckets) != 1 || g.Buckets[0].Weight != 0) {
		return groupModFailed(ofp.ErrCodeGroupModFailedInvalidGroup, "an indirect group has one bucket without weight, not %d", len(g.Buckets))
	}
	for i, bk := range g.Buckets {
		if !validWatchPort(bk.WatchPort) || (bk.WatchGroup > GroupMax && bk.WatchGroup != GroupAny) {
			return groupModFailed(ofp.ErrCodeGroupModBadWatch, "bucket %d: watch_port %#x watch_group %#x", i, bk.WatchPort, bk.WatchGroup)
		}
		if g.Type == GroupTypeFastFailover && bk.WatchPort == PortAny && bk.WatchGroup == GroupAny {
			return groupModFailed(ofp.ErrCodeGroupModBadWatch, "fast-failover bucket %d watches neither a port nor a group", i)
		}
		if bk.WatchGroup == g.ID {
			return groupModFailed(ofp.ErrCodeGroupModFailedLoop, "bucket %d watches its own group %d", i, g.ID)
		}
		for _, a := range bk.Actions {
			if a.Kind == ActGroup && a.ID == g.ID {
				return groupModFailed(ofp.ErrCodeGroupModFailedLoop, "bucket %d forwards to its own group %d", i, g.ID)
			}
		}
	}
	return nil
}

func validWatchPort(p uint32) bool {
	return (p != 0 && p <= PortMax) || p == PortLocal || p == PortAny
}

// EncodeGroupMod encodes a GROUP_MOD (for tests and tools).
func EncodeGroupMod(xid uint32, gm *GroupMod) []byte {
	e := newMsg(of.TypeGroupMod, xid)
	e.u16(uint16(gm.Command))
	e.u8(uint8(gm.Type))
	e.pad(1)
	e.u32(gm.ID)
	appendBuckets(e, gm.Buckets)
	return e.finish()
}

func appendBuckets(e *enc, bs []Bucket) {
	for i := range bs {
		start := len(e.b)
		e.u16(0)
		e.u16(bs[i].Weight)
		e.u32(bs[i].WatchPort)
		e.u32(bs[i].WatchGroup)
		e.pad(4)
		e.raw(EncodeActions(bs[i].Actions))
		putLen16(e.b, start)
	}
}

// putLen16 writes the length from start to the end of b at b[start:].
func putLen16(b []byte, start int) {
	n := len(b) - start
	b[start], b[start+1] = byte(n>>8), byte(n)
}

// encodeGroupDesc encodes ofp_group_desc.
func encodeGroupDesc(g *Group) []byte {
	e := &enc{}
	e.u16(0)
	e.u8(uint8(g.Type))
	e.pad(1)
	e.u32(g.ID)
	appendBuckets(e, g.Buckets)
	putLen16(e.b, 0)
	return e.b
}

// Counter is a packet and byte count (ofp_bucket_counter,
// ofp_meter_band_stats).
type Counter struct {
	Packets, Bytes uint64
}

// GroupStats is ofp_group_stats: RefCount counts the flow entries and
// groups that forward to the group.
type GroupStats struct {
	ID                        uint32
	RefCount                  uint32
	Packets, Bytes            uint64
	DurationSec, DurationNsec uint32
	Buckets                   []Counter
}

const groupStatsFixed = 40

func encodeGroupStats(gs *GroupStats) []byte {
	e := &enc{}
	e.u16(0)
	e.pad(2)
	e.u32(gs.ID)
	e.u32(gs.RefCount)
	e.pad(4)
	e.u64(gs.Packets)
	e.u64(gs.Bytes)
	e.u32(gs.DurationSec)
	e.u32(gs.DurationNsec)
	for _, c := range gs.Buckets[:min(len(gs.Buckets), MaxBuckets)] {
		e.u64(c.Packets)
		e.u64(c.Bytes)
	}
	putLen16(e.b, 0)
	return e.b
}

// Group capabilities (enum ofp_group_capabilities).
const (
	GroupCapSelectWeight   uint32 = 1 << 0
	GroupCapSelectLiveness uint32 = 1 << 1
	GroupCapChaining       uint32 = 1 << 2
	GroupCapChainingChecks uint32 = 1 << 3
)

// GroupFeatures is ofp_group_features: Types has bit 1<<GroupType for each
// supported type; MaxGroups and Actions (bits 1<<ActionKind) are per type.
type GroupFeatures struct {
	Types        uint32
	Capabilities uint32
	MaxGroups    [numGroupTypes]uint32
	Actions      [numGroupTypes]uint32
}

func encodeGroupFeatures(f *GroupFeatures) []byte {
	e := &enc{}
	e.u32(f.Types)
	e.u32(f.Capabilities)
	for _, v := range f.MaxGroups {
		e.u32(v)
	}
	for _, v := range f.Actions {
		e.u32(v)
	}
	return e.b
}

// supportedActionBits is the bitmap of the actions this package decodes.
func supportedActionBits() uint32 {
	var m uint32
	for _, k := range sortedActionKinds() {
		m |= 1 << k
	}
	return m
}

// decodeGroupStatsRequest reads ofp_group_stats_request: a group id, an
// ordinary one or GroupAll.
func decodeGroupStatsRequest(body []byte) (uint32, *Error) {
	if len(body) != 8 {
		return 0, badRequest(ofp.ErrCodeBadRequestLen, "group stats request of %d bytes, want 8", len(body))
	}
	id := be32(body)
	if id > GroupMax && id != GroupAll {
		return 0, groupModFailed(ofp.ErrCodeGroupModFailedInvalidGroup, "group stats for group %#x", id)
	}
	return id, nil
}
