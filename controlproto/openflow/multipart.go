package openflow

import (
	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// Multipart flags.
const (
	mpMore = 1 // OFPMPF_REQ_MORE, OFPMPF_REPLY_MORE
)

// mpHeaderLen is ofp_multipart_request/reply up to its body.
const mpHeaderLen = 16

// maxReplyBody bounds one reply message's body, so that a message stays
// under 64 KiB; longer replies are split with OFPMPF_REPLY_MORE.
const maxReplyBody = 0xffff - mpHeaderLen

// mpRequest is one multipart request message's framing.
type mpRequest struct {
	xid   uint32
	typ   ofp.MultipartType
	flags uint16
	body  []byte
}

func parseMultipart(msg []byte) (mpRequest, *Error) {
	if len(msg) < mpHeaderLen {
		return mpRequest{}, badRequest(ofp.ErrCodeBadRequestLen, "multipart request of %d bytes", len(msg))
	}
	return mpRequest{
		xid:   be32(msg[4:]),
		typ:   ofp.MultipartType(be16(msg[8:])),
		flags: be16(msg[10:]),
		body:  msg[mpHeaderLen:],
	}, nil
}

// encodeMultipartReply splits the entries (each already encoded, none
// longer than maxReplyBody) into as many replies as needed, all but the
// last flagged OFPMPF_REPLY_MORE. With no entries it is one empty reply.
func encodeMultipartReply(xid uint32, t ofp.MultipartType, entries [][]byte) [][]byte {
	var out [][]byte
	e := mpReplyStart(xid, t)
	for _, ent := range entries {
		if len(e.b)-mpHeaderLen+len(ent) > maxReplyBody {
			e.b[11] = mpMore
			out = append(out, e.finish())
			e = mpReplyStart(xid, t)
		}
		e.raw(ent)
	}
	return append(out, e.finish())
}

func mpReplyStart(xid uint32, t ofp.MultipartType) *enc {
	e := newMsg(of.TypeMultipartReply, xid)
	e.u16(uint16(t))
	e.u16(0)
	e.pad(4)
	return e
}

// DecodeFlowStatsRequest decodes ofp_flow_stats_request (also the
// aggregate request, which has the same layout).
func DecodeFlowStatsRequest(body []byte) (*rule.FlowStatsRequest, *Error) {
	if len(body) < 40 {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "flow stats request of %d bytes", len(body))
	}
	r := &rule.FlowStatsRequest{
		TableID:    body[0],
		OutPort:    be32(body[4:]),
		OutGroup:   be32(body[8:]),
		Cookie:     be64(body[16:]),
		CookieMask: be64(body[24:]),
	}
	m, n, err := DecodeMatch(body[32:])
	if err != nil {
		return nil, err
	}
	if 32+n != len(body) {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "%d bytes after the match", len(body)-32-n)
	}
	r.Match = m.Match
	return r, nil
}

// encodeFlowStats encodes ofp_flow_stats.
func encodeFlowStats(fs *rule.FlowStats) []byte {
	e := &enc{}
	e.u16(0)
	e.u8(fs.TableID)
	e.pad(1)
	e.u32(fs.DurationSec)
	e.u32(fs.DurationNsec)
	e.u16(fs.Priority)
	e.u16(fs.IdleTimeout)
	e.u16(fs.HardTimeout)
	e.u16(uint16(fs.Flags))
	e.pad(4)
	e.u64(fs.Cookie)
	e.u64(fs.Packets)
	e.u64(fs.Bytes)
	e.raw(echoMatch(fs.Echo.Match, &fs.Match))
	e.raw(echoInstructions(fs.Echo.Instructions, &fs.Instructions))
	e.b[0], e.b[1] = byte(len(e.b)>>8), byte(len(e.b))
	return e.b
}

func encodeAggregate(fss []rule.FlowStats) []byte {
	e := &enc{}
	var pk, by uint64
	for i := range fss {
		pk += fss[i].Packets
		by += fss[i].Bytes
	}
	e.u64(pk)
	e.u64(by)
	e.u32(uint32(len(fss)))
	e.pad(4)
	return e.b
}

func encodeTableStats(ts *rule.TableStats) []byte {
	e := &enc{}
	e.u8(ts.TableID)
	e.pad(3)
	e.u32(ts.Active)
	e.u64(ts.Lookups)
	e.u64(ts.Matched)
	return e.b
}

func encodePortStats(ps *rule.PortStats) []byte {
	e := &enc{}
	e.u32(ps.PortNo)
	e.pad(4)
	for _, v := range []uint64{ps.RxPackets, ps.TxPackets, ps.RxBytes, ps.TxBytes, ps.RxDropped, ps.TxDropped,
		ps.RxErrors, ps.TxErrors, ps.RxFrameErr, ps.RxOverErr, ps.RxCRCErr, ps.Collisions} {
		e.u64(v)
	}
	e.u32(ps.DurationSec)
	e.u32(ps.DurationNsec)
	return e.b
}

// decodePortStatsRequest reads ofp_port_stats_request.
func decodePortStatsRequest(body []byte) (uint32, *Error) {
	if len(body) != 8 {
		return 0, badRequest(ofp.ErrCodeBadRequestLen, "port stats request of %d bytes, want 8", len(body))
	}
	p := be32(body)
	if p == 0 || (p > rule.PortMax && p != rule.PortAny && p != rule.PortLocal) {
		return 0, badRequest(ofp.ErrCodeBadRequestBadPort, "port %#x", p)
	}
	return p, nil
}

func encodeDesc(d *rule.Desc) []byte {
	e := &enc{}
	e.str(d.Manufacturer, 256)
	e.str(d.Hardware, 256)
	e.str(d.Software, 256)
	e.str(d.Serial, 32)
	e.str(d.Datapath, 256)
	return e.b
}

func encodePortDesc(p *rule.Port) []byte {
	e := &enc{}
	appendPort(e, p)
	return e.b
}

// tableFeaturesFixed is ofp_table_features without properties.
const tableFeaturesFixed = 64

// Table feature property types (enum ofp_table_feature_prop_type).
const (
	tfpInstructions  = 0
	tfpNextTables    = 2
	tfpWriteActions  = 4
	tfpApplyActions  = 6
	tfpMatch         = 8
	tfpWildcards     = 10
	tfpWriteSetfield = 12
	tfpApplySetfield = 14
)

// encodeTableFeatures encodes ofp_table_features for table id of f: no
// name, metadata fully matchable and writable, and the eight properties
// OpenFlow requires, describing what this package decodes (every table
// alike).
func encodeTableFeatures(id uint8, f *rule.Features) []byte {
	e := &enc{}
	e.u16(0)
	e.u8(id)
	e.pad(5)
	e.str("", 32)
	e.u64(^uint64(0))
	e.u64(^uint64(0))
	e.u32(0) // config
	e.u32(f.MaxEntries)
	tfProp(e, tfpInstructions, func() {
		for t := uint16(instGotoTable); t <= instMeter; t++ {
			e.u16(t)
			e.u16(4)
		}
	})
	tfProp(e, tfpNextTables, func() {
		for t := int(id) + 1; t < int(f.NTables); t++ {
			e.u8(uint8(t))
		}
	})
	for _, p := range []uint16{tfpWriteActions, tfpApplyActions} {
		tfProp(e, p, func() {
			for _, k := range sortedActionKinds() {
				e.u16(uint16(k))
				e.u16(4)
			}
		})
	}
	tfProp(e, tfpMatch, func() { oxmHeaders(e, true, false) })
	tfProp(e, tfpWildcards, func() { oxmHeaders(e, false, false) })
	tfProp(e, tfpWriteSetfield, func() { oxmHeaders(e, false, true) })
	tfProp(e, tfpApplySetfield, func() { oxmHeaders(e, false, true) })
	e.b[0], e.b[1] = byte(len(e.b)>>8), byte(len(e.b))
	return e.b
}

// tfProp writes one property: body writes its contents.
func tfProp(e *enc, t uint16, body func()) {
	start := len(e.b)
	e.u16(t)
	e.u16(0)
	body()
	n := len(e.b) - start
	e.b[start+2], e.b[start+3] = byte(n>>8), byte(n)
	e.align8(start)
}

// oxmHeaders writes the OXM headers of the supported basic fields: with
// the hasmask bit for maskable ones when masks, only settable fields when
// settable.
func oxmHeaders(e *enc, masks, settable bool) {
	for _, f := range flow.Fields() {
		if f > maxBasicField || (settable && !canSet(f)) {
			continue
		}
		fi := f.Info()
		hm := uint8(0)
		if masks && fi.Maskable {
			hm = 1
		}
		e.u16(oxmClassBasic)
		e.u8(uint8(f)<<1 | hm)
		e.u8(uint8(oxmSize(f) * (1 + int(hm))))
	}
}
