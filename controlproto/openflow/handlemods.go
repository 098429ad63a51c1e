package openflow

import (
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

// This file handles the messages served through the optional Switch
// interfaces (GROUP_MOD, METER_MOD, PORT_MOD, TABLE_MOD, QUEUE_GET_CONFIG
// and their multipart requests), and checks the group, meter and queue
// references of FLOW_MOD and PACKET_OUT.

func unsupportedType(msg []byte) *Error {
	return badRequest(ofp.ErrCodeBadRequestBadType, "message type %d is not supported by this switch", msg[1])
}

func unsupportedMultipart(t ofp.MultipartType) *Error {
	return badRequest(ofp.ErrCodeBadRequestBadMultipart, "multipart type %d is not supported by this switch", t)
}

// handleOptionalMod answers a modify message that the switch serves
// through its optional interface S: OFPBRC_BAD_TYPE where it has no S,
// decode's error, or apply's error put through ErrorFor onto fallback. A
// modify message that succeeds has no reply.
func handleOptionalMod[S, M any](s *session, msg []byte, decode func([]byte) (M, *Error), apply func(S, M) error, fallback *Error) ([][]byte, *Error) {
	sw, ok := s.a.sw.(S)
	if !ok {
		return nil, unsupportedType(msg)
	}
	m, err := decode(msg)
	if err != nil {
		return nil, err
	}
	if e := apply(sw, m); e != nil {
		return nil, ErrorFor(e, fallback)
	}
	return nil, nil
}

func handleGroupMod(s *session, msg []byte) ([][]byte, *Error) {
	return handleOptionalMod(s, msg, DecodeGroupMod, GroupSwitch.GroupMod,
		groupModFailed(ofp.ErrCodeGroupModPerm, "group_mod"))
}

func handleMeterMod(s *session, msg []byte) ([][]byte, *Error) {
	return handleOptionalMod(s, msg, DecodeMeterMod, MeterSwitch.MeterMod,
		meterModFailed(ofp.ErrCodeMeterModFailedUnknown, "meter_mod"))
}

func handlePortMod(s *session, msg []byte) ([][]byte, *Error) {
	decode := func(msg []byte) (*rule.PortMod, *Error) {
		pm, err := DecodePortMod(msg)
		if err != nil {
			return nil, err
		}
		if _, err := CheckPort(pm, s.a.sw.Ports()); err != nil {
			return nil, err
		}
		return pm, nil
	}
	return handleOptionalMod(s, msg, decode, PortModSwitch.PortMod,
		portModFailed(ofp.ErrCodePortModFailedPerm, "port_mod"))
}

func handleTableMod(s *session, msg []byte) ([][]byte, *Error) {
	decode := func(msg []byte) (*rule.TableMod, *Error) { return DecodeTableMod(msg, s.feat.NTables) }
	return handleOptionalMod(s, msg, decode, TableModSwitch.TableMod,
		errf(ofp.ErrTypeTableModFailed, ofp.ErrCodeTableModFailedPerm, "table_mod"))
}

func handleQueueGetConfig(s *session, msg []byte) ([][]byte, *Error) {
	qs, ok := s.a.sw.(QueueSwitch)
	if !ok {
		return nil, unsupportedType(msg)
	}
	port, err := decodeQueueGetConfig(msg)
	if err != nil {
		return nil, err
	}
	queues, e := qs.Queues(port)
	if e != nil {
		return nil, ErrorFor(e, queueOpFailed(ofp.ErrCodeQueueOpFailedBadPort, "queue_get_config"))
	}
	return one(encodeQueueGetConfigReply(be32(msg[4:]), port, queues))
}

// mpOptional answers the multipart requests served through the optional
// interfaces; ok is false for other types.
func (s *session) mpOptional(r *mpRequest) (out [][]byte, err *Error, ok bool) {
	switch r.typ {
	case ofp.MultipartTypeGroup:
		out, err = s.mpGroupStats(r)
	case ofp.MultipartTypeGroupDescription:
		out, err = s.mpGroupDesc(r)
	case ofp.MultipartTypeGroupFeatures:
		out, err = s.mpGroupFeatures(r)
	case ofp.MultipartTypeMeter:
		out, err = s.mpMeterStats(r)
	case ofp.MultipartTypeMeterConfig:
		out, err = s.mpMeterConfig(r)
	case ofp.MultipartTypeMeterFeatures:
		out, err = s.mpMeterFeatures(r)
	case ofp.MultipartTypeQueue:
		out, err = s.mpQueueStats(r)
	default:
		return nil, nil, false
	}
	return out, err, true
}

// mpOptionalStats answers a multipart request that the switch serves
// through its optional interface S with one entry per item get returns:
// OFPBRC_BAD_MULTIPART where it has no S, decode's error for the request
// body, or get's error put through ErrorFor onto fallback.
func mpOptionalStats[S, Q, T any](s *session, r *mpRequest, decode func([]byte) (Q, *Error), get func(S, Q) ([]T, error), fallback *Error, encode func(*T) []byte) ([][]byte, *Error) {
	sw, ok := s.a.sw.(S)
	if !ok {
		return nil, unsupportedMultipart(r.typ)
	}
	q, err := decode(r.body)
	if err != nil {
		return nil, err
	}
	items, e := get(sw, q)
	if e != nil {
		return nil, ErrorFor(e, fallback)
	}
	ents := make([][]byte, len(items))
	for i := range items {
		ents[i] = encode(&items[i])
	}
	return encodeMultipartReply(r.xid, r.typ, ents), nil
}

// mpOptionalFixed answers a multipart request with an empty body that the
// switch serves through its optional interface S: OFPBRC_BAD_MULTIPART
// where it has no S, else mpFixed with the entries S gives.
func mpOptionalFixed[S any](s *session, r *mpRequest, entries func(S) [][]byte) ([][]byte, *Error) {
	sw, ok := s.a.sw.(S)
	if !ok {
		return nil, unsupportedMultipart(r.typ)
	}
	return s.mpFixed(r, func() [][]byte { return entries(sw) })
}

func (s *session) mpGroupStats(r *mpRequest) ([][]byte, *Error) {
	return mpOptionalStats(s, r, decodeGroupStatsRequest, GroupSwitch.GroupStats,
		groupModFailed(ofp.ErrCodeGroupModFailedUnknownGroup, "group stats"), encodeGroupStats)
}

func (s *session) mpGroupDesc(r *mpRequest) ([][]byte, *Error) {
	return mpOptionalFixed(s, r, func(gs GroupSwitch) [][]byte {
		var out [][]byte
		for _, g := range gs.GroupDesc() {
			out = append(out, encodeGroupDesc(&g))
		}
		return out
	})
}

func (s *session) mpGroupFeatures(r *mpRequest) ([][]byte, *Error) {
	return mpOptionalFixed(s, r, func(gs GroupSwitch) [][]byte {
		f := gs.GroupFeatures()
		return [][]byte{encodeGroupFeatures(&f)}
	})
}

func (s *session) mpMeterStats(r *mpRequest) ([][]byte, *Error) {
	return mpOptionalStats(s, r, decodeMeterRequest, MeterSwitch.MeterStats,
		meterModFailed(ofp.ErrCodeMeterModFailedUnknownMeter, "meter stats"), encodeMeterStats)
}

func (s *session) mpMeterConfig(r *mpRequest) ([][]byte, *Error) {
	return mpOptionalStats(s, r, decodeMeterRequest, MeterSwitch.MeterConfig,
		meterModFailed(ofp.ErrCodeMeterModFailedUnknownMeter, "meter config"), encodeMeterConfig)
}

func (s *session) mpMeterFeatures(r *mpRequest) ([][]byte, *Error) {
	return mpOptionalFixed(s, r, func(ms MeterSwitch) [][]byte {
		f := ms.MeterFeatures()
		return [][]byte{encodeMeterFeatures(&f)}
	})
}

// queueStatsRequest is ofp_queue_stats_request's port and queue.
type queueStatsRequest struct{ port, queue uint32 }

func (s *session) mpQueueStats(r *mpRequest) ([][]byte, *Error) {
	decode := func(body []byte) (queueStatsRequest, *Error) {
		port, queue, err := decodeQueueStatsRequest(body)
		return queueStatsRequest{port, queue}, err
	}
	get := func(qs QueueSwitch, q queueStatsRequest) ([]rule.QueueStats, error) {
		return qs.QueueStats(q.port, q.queue)
	}
	return mpOptionalStats(s, r, decode, get,
		queueOpFailed(ofp.ErrCodeQueueOpFailedBadQueue, "queue stats"), encodeQueueStats)
}

// checkRefs checks the groups, meter and queues an add or modify
// FLOW_MOD's instructions name, against a switch that has them:
// OFPBAC_BAD_OUT_GROUP, OFPMMFC_INVALID_METER / OFPMMFC_UNKNOWN_METER,
// OFPBAC_BAD_QUEUE.
func (s *session) checkRefs(in *rule.Instructions) *Error {
	if ms, ok := s.a.sw.(MeterSwitch); ok && in.Has&rule.HasMeter != 0 {
		if !rule.ValidMeterID(in.Meter) {
			return meterModFailed(ofp.ErrCodeMeterModFailedInvalidMeter, "meter instruction names meter %#x", in.Meter)
		}
		if !ms.MeterExists(in.Meter) {
			return meterModFailed(ofp.ErrCodeMeterModFailedUnknownMeter, "meter instruction names meter %d, which does not exist", in.Meter)
		}
	}
	if err := s.checkActionRefs(in.Apply); err != nil {
		return err
	}
	return s.checkActionRefs(in.Write)
}

// checkActionRefs checks group and set_queue actions against a switch
// with groups or queues.
func (s *session) checkActionRefs(as []rule.Action) *Error {
	gs, hasGroups := s.a.sw.(GroupSwitch)
	qs, hasQueues := s.a.sw.(QueueSwitch)
	var queues []rule.Queue
	for _, a := range as {
		switch {
		case a.Kind == rule.ActGroup && hasGroups && !gs.GroupExists(a.ID):
			return badAction(ofp.ErrCodeBadActionOutGroup, "group %d does not exist", a.ID)
		case a.Kind == rule.ActSetQueue && hasQueues:
			if queues == nil {
				queues, _ = qs.Queues(rule.PortAny)
			}
			if !hasQueue(queues, a.ID) {
				return badAction(ofp.ErrCodeBadActionQueue, "no port has queue %d", a.ID)
			}
		}
	}
	return nil
}

func hasQueue(qs []rule.Queue, id uint32) bool {
	for _, q := range qs {
		if q.ID == id {
			return true
		}
	}
	return false
}
