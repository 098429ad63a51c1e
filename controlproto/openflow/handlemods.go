package openflow

import (
	"github.com/netrack/openflow/ofp"
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

func handleGroupMod(s *session, msg []byte) ([][]byte, *Error) {
	gs, ok := s.a.sw.(GroupSwitch)
	if !ok {
		return nil, unsupportedType(msg)
	}
	gm, err := DecodeGroupMod(msg)
	if err != nil {
		return nil, err
	}
	if e := gs.GroupMod(gm); e != nil {
		return nil, ErrorFor(e, groupModFailed(ofp.ErrCodeGroupModPerm, "group_mod"))
	}
	return nil, nil
}

func handleMeterMod(s *session, msg []byte) ([][]byte, *Error) {
	ms, ok := s.a.sw.(MeterSwitch)
	if !ok {
		return nil, unsupportedType(msg)
	}
	mm, err := DecodeMeterMod(msg)
	if err != nil {
		return nil, err
	}
	if e := ms.MeterMod(mm); e != nil {
		return nil, ErrorFor(e, meterModFailed(ofp.ErrCodeMeterModFailedUnknown, "meter_mod"))
	}
	return nil, nil
}

func handlePortMod(s *session, msg []byte) ([][]byte, *Error) {
	ps, ok := s.a.sw.(PortModSwitch)
	if !ok {
		return nil, unsupportedType(msg)
	}
	pm, err := DecodePortMod(msg)
	if err != nil {
		return nil, err
	}
	if _, err := pm.CheckPort(s.a.sw.Ports()); err != nil {
		return nil, err
	}
	if e := ps.PortMod(pm); e != nil {
		return nil, ErrorFor(e, portModFailed(ofp.ErrCodePortModFailedPerm, "port_mod"))
	}
	return nil, nil
}

func handleTableMod(s *session, msg []byte) ([][]byte, *Error) {
	ts, ok := s.a.sw.(TableModSwitch)
	if !ok {
		return nil, unsupportedType(msg)
	}
	tm, err := DecodeTableMod(msg, s.feat.NTables)
	if err != nil {
		return nil, err
	}
	if e := ts.TableMod(tm); e != nil {
		return nil, ErrorFor(e, errf(ofp.ErrTypeTableModFailed, ofp.ErrCodeTableModFailedPerm, "table_mod"))
	}
	return nil, nil
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

func (s *session) mpGroupStats(r *mpRequest) ([][]byte, *Error) {
	gs, ok := s.a.sw.(GroupSwitch)
	if !ok {
		return nil, unsupportedMultipart(r.typ)
	}
	id, err := decodeGroupStatsRequest(r.body)
	if err != nil {
		return nil, err
	}
	stats, e := gs.GroupStats(id)
	if e != nil {
		return nil, ErrorFor(e, groupModFailed(ofp.ErrCodeGroupModFailedUnknownGroup, "group stats"))
	}
	ents := make([][]byte, len(stats))
	for i := range stats {
		ents[i] = encodeGroupStats(&stats[i])
	}
	return encodeMultipartReply(r.xid, r.typ, ents), nil
}

func (s *session) mpGroupDesc(r *mpRequest) ([][]byte, *Error) {
	gs, ok := s.a.sw.(GroupSwitch)
	if !ok {
		return nil, unsupportedMultipart(r.typ)
	}
	return s.mpFixed(r, func() [][]byte {
		var out [][]byte
		for _, g := range gs.GroupDesc() {
			out = append(out, encodeGroupDesc(&g))
		}
		return out
	})
}

func (s *session) mpGroupFeatures(r *mpRequest) ([][]byte, *Error) {
	gs, ok := s.a.sw.(GroupSwitch)
	if !ok {
		return nil, unsupportedMultipart(r.typ)
	}
	return s.mpFixed(r, func() [][]byte {
		f := gs.GroupFeatures()
		return [][]byte{encodeGroupFeatures(&f)}
	})
}

func (s *session) mpMeterStats(r *mpRequest) ([][]byte, *Error) {
	ms, ok := s.a.sw.(MeterSwitch)
	if !ok {
		return nil, unsupportedMultipart(r.typ)
	}
	id, err := decodeMeterRequest(r.body)
	if err != nil {
		return nil, err
	}
	stats, e := ms.MeterStats(id)
	if e != nil {
		return nil, ErrorFor(e, meterModFailed(ofp.ErrCodeMeterModFailedUnknownMeter, "meter stats"))
	}
	ents := make([][]byte, len(stats))
	for i := range stats {
		ents[i] = encodeMeterStats(&stats[i])
	}
	return encodeMultipartReply(r.xid, r.typ, ents), nil
}

func (s *session) mpMeterConfig(r *mpRequest) ([][]byte, *Error) {
	ms, ok := s.a.sw.(MeterSwitch)
	if !ok {
		return nil, unsupportedMultipart(r.typ)
	}
	id, err := decodeMeterRequest(r.body)
	if err != nil {
		return nil, err
	}
	cfgs, e := ms.MeterConfig(id)
	if e != nil {
		return nil, ErrorFor(e, meterModFailed(ofp.ErrCodeMeterModFailedUnknownMeter, "meter config"))
	}
	ents := make([][]byte, len(cfgs))
	for i := range cfgs {
		ents[i] = encodeMeterConfig(&cfgs[i])
	}
	return encodeMultipartReply(r.xid, r.typ, ents), nil
}

func (s *session) mpMeterFeatures(r *mpRequest) ([][]byte, *Error) {
	ms, ok := s.a.sw.(MeterSwitch)
	if !ok {
		return nil, unsupportedMultipart(r.typ)
	}
	return s.mpFixed(r, func() [][]byte {
		f := ms.MeterFeatures()
		return [][]byte{encodeMeterFeatures(&f)}
	})
}

func (s *session) mpQueueStats(r *mpRequest) ([][]byte, *Error) {
	qs, ok := s.a.sw.(QueueSwitch)
	if !ok {
		return nil, unsupportedMultipart(r.typ)
	}
	port, queue, err := decodeQueueStatsRequest(r.body)
	if err != nil {
		return nil, err
	}
	stats, e := qs.QueueStats(port, queue)
	if e != nil {
		return nil, ErrorFor(e, queueOpFailed(ofp.ErrCodeQueueOpFailedBadQueue, "queue stats"))
	}
	ents := make([][]byte, len(stats))
	for i := range stats {
		ents[i] = encodeQueueStats(&stats[i])
	}
	return encodeMultipartReply(r.xid, r.typ, ents), nil
}

// checkRefs checks the groups, meter and queues an add or modify
// FLOW_MOD's instructions name, against a switch that has them:
// OFPBAC_BAD_OUT_GROUP, OFPMMFC_INVALID_METER / OFPMMFC_UNKNOWN_METER,
// OFPBAC_BAD_QUEUE.
func (s *session) checkRefs(in *Instructions) *Error {
	if ms, ok := s.a.sw.(MeterSwitch); ok && in.Has&HasMeter != 0 {
		if !validMeterID(in.Meter) {
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
func (s *session) checkActionRefs(as []Action) *Error {
	gs, hasGroups := s.a.sw.(GroupSwitch)
	qs, hasQueues := s.a.sw.(QueueSwitch)
	var queues []Queue
	for _, a := range as {
		switch {
		case a.Kind == ActGroup && hasGroups && !gs.GroupExists(a.ID):
			return badAction(ofp.ErrCodeBadActionOutGroup, "group %d does not exist", a.ID)
		case a.Kind == ActSetQueue && hasQueues:
			if queues == nil {
				queues, _ = qs.Queues(PortAny)
			}
			if !hasQueue(queues, a.ID) {
				return badAction(ofp.ErrCodeBadActionQueue, "no port has queue %d", a.ID)
			}
		}
	}
	return nil
}

func hasQueue(qs []Queue, id uint32) bool {
	for _, q := range qs {
		if q.ID == id {
			return true
		}
	}
	return false
}
