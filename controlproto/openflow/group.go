package openflow

import (
	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

// This file holds the codecs of OFPT_GROUP_MOD and of the group multipart
// requests and replies (OpenFlow 1.3.5 §7.3.4.2, §7.3.5.9-11).

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
func DecodeGroupMod(msg []byte) (*rule.GroupMod, *Error) {
	if len(msg) < groupModFixed {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "group_mod of %d bytes", len(msg))
	}
	gm := &rule.GroupMod{Command: rule.GroupCommand(be16(msg[8:]))}
	gm.Type, gm.ID = rule.GroupType(msg[10]), be32(msg[12:])
	switch gm.Command {
	case rule.GroupDelete:
		if gm.ID > rule.GroupMax && gm.ID != rule.GroupAll {
			return nil, groupModFailed(ofp.ErrCodeGroupModFailedInvalidGroup, "delete group %#x", gm.ID)
		}
		return gm, nil // type and buckets are ignored (§7.3.4.2)
	case rule.GroupAdd, rule.GroupModify:
	default:
		return nil, groupModFailed(ofp.ErrCodeGroupModBadCommand, "command %d", gm.Command)
	}
	if gm.ID > rule.GroupMax {
		return nil, groupModFailed(ofp.ErrCodeGroupModFailedInvalidGroup, "group %#x is reserved", gm.ID)
	}
	if gm.Type >= rule.NumGroupTypes {
		return nil, groupModFailed(ofp.ErrCodeGroupModBadType, "group type %d", gm.Type)
	}
	var err *Error
	if gm.Buckets, err = decodeBuckets(msg[groupModFixed:]); err != nil {
		return nil, err
	}
	return gm, checkBuckets(&gm.Group)
}

// decodeBuckets reads a list of buckets filling b exactly.
func decodeBuckets(b []byte) ([]rule.Bucket, *Error) {
	var bs []rule.Bucket
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
		bk := rule.Bucket{Weight: be16(b[2:]), WatchPort: be32(b[4:]), WatchGroup: be32(b[8:])}
		var err *Error
		if bk.Actions, err = DecodeActions(b[bucketFixed:n]); err != nil {
			return nil, err
		}
		bs = append(bs, bk)
		b = b[n:]
	}
	return bs, nil
}

// checkBuckets checks what a group says about itself (rule.CheckGroup):
// an indirect group has exactly one bucket and no weight
// (OFPGMFC_INVALID_GROUP, as Open vSwitch and the OFTest conformance suite
// have it); watch ports are physical ports, LOCAL or ANY and watch groups
// ordinary ids or ANY (OFPGMFC_BAD_WATCH); a fast-failover bucket watches
// something; no bucket watches or forwards to its own group
// (OFPGMFC_LOOP).
//
// A bucket of an all, indirect or fast-failover group with a weight gets
// OFPGMFC_INVALID_GROUP: OpenFlow 1.3.5 §7.3.4.2 defines weight "only for
// select groups", and Open vSwitch (lib/ofp-group.c) answers this code.
func checkBuckets(g *rule.Group) *Error {
	if g.Type != rule.GroupTypeSelect {
		for i := range g.Buckets {
			if g.Buckets[i].Weight != 0 {
				return groupModFailed(ofp.ErrCodeGroupModFailedInvalidGroup, "bucket %d of a group of type %d has weight %d: weights are for select groups", i, g.Type, g.Buckets[i].Weight)
			}
		}
	}
	if err := rule.CheckGroup(g); err != nil {
		return ErrorFor(err, groupModFailed(ofp.ErrCodeGroupModFailedInvalidGroup, "group_mod"))
	}
	return nil
}

// EncodeGroupMod encodes a GROUP_MOD (for tests and tools).
func EncodeGroupMod(xid uint32, gm *rule.GroupMod) []byte {
	e := newMsg(of.TypeGroupMod, xid)
	e.u16(uint16(gm.Command))
	e.u8(uint8(gm.Type))
	e.pad(1)
	e.u32(gm.ID)
	appendBuckets(e, gm.Buckets)
	return e.finish()
}

func appendBuckets(e *enc, bs []rule.Bucket) {
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
func encodeGroupDesc(g *rule.Group) []byte {
	e := &enc{}
	e.u16(0)
	e.u8(uint8(g.Type))
	e.pad(1)
	e.u32(g.ID)
	appendBuckets(e, g.Buckets)
	putLen16(e.b, 0)
	return e.b
}

const groupStatsFixed = 40

func encodeGroupStats(gs *rule.GroupStats) []byte {
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

func encodeGroupFeatures(f *rule.GroupFeatures) []byte {
	e := &enc{}
	e.u32(f.Types)
	e.u32(f.Capabilities)
	for _, v := range f.MaxGroups {
		e.u32(v)
	}
	for range rule.NumGroupTypes {
		e.u32(supportedActionBits()) // buckets may hold every action this package decodes
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
	if id > rule.GroupMax && id != rule.GroupAll {
		return 0, groupModFailed(ofp.ErrCodeGroupModFailedInvalidGroup, "group stats for group %#x", id)
	}
	return id, nil
}
