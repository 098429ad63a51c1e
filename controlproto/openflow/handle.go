package openflow

import (
	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

// handler handles one message type and returns the replies (nil for none)
// or the error to report.
type handler func(s *session, msg []byte) ([][]byte, *Error)

// handlers lists the messages a switch accepts from a controller; every
// other type is OFPBRC_BAD_TYPE (the switch-to-controller types). GROUP_MOD,
// METER_MOD, PORT_MOD, TABLE_MOD and QUEUE_GET_CONFIG_REQUEST are served
// through the optional Switch interfaces, and OFPBRC_BAD_TYPE without them.
var handlers = map[of.Type]handler{
	of.TypeHello:            handleIgnore,
	of.TypeError:            handleIgnore,
	of.TypeEchoRequest:      handleEcho,
	of.TypeEchoReply:        handleIgnore,
	of.TypeExperiment:       handleExperimenter,
	of.TypeFeaturesRequest:  handleFeatures,
	of.TypeGetConfigRequest: handleGetConfig,
	of.TypeSetConfig:        handleSetConfig,
	of.TypePacketOut:        handlePacketOut,
	of.TypeFlowMod:          handleFlowMod,
	of.TypeMultipartRequest: handleMultipart,
	of.TypeBarrierRequest:   handleBarrier,
	of.TypeRoleRequest:      handleRole,
	of.TypeGetAsyncRequest:  handleGetAsync,
	of.TypeSetAsync:         handleSetAsync,

	of.TypeGroupMod:              handleGroupMod,
	of.TypeMeterMod:              handleMeterMod,
	of.TypePortMod:               handlePortMod,
	of.TypeTableMod:              handleTableMod,
	of.TypeQueueGetConfigRequest: handleQueueGetConfig,
}

// stateChanging are the messages a slave may not send (§6.3.5).
var stateChanging = map[of.Type]bool{
	of.TypePacketOut: true, of.TypeFlowMod: true, of.TypeGroupMod: true,
	of.TypePortMod: true, of.TypeTableMod: true, of.TypeMeterMod: true,
}

// handle handles one whole message and returns what to send back.
func (s *session) handle(msg []byte) [][]byte {
	h, _ := ParseHeader(msg)
	out, err := s.dispatch(h, msg)
	if err != nil {
		return [][]byte{EncodeError(msg, err)}
	}
	return out
}

func (s *session) dispatch(h Header, msg []byte) ([][]byte, *Error) {
	if h.Version != Version {
		return nil, badRequest(ofp.ErrCodeBadRequestBadVersion, "version %#02x after negotiating 0x04", h.Version)
	}
	if stateChanging[h.Type] && s.a.roleOf(s) == RoleSlave {
		return nil, badRequest(ofp.ErrCodeBadRequestIsSlave, "%s from a slave", h.Type)
	}
	hf, ok := handlers[h.Type]
	if !ok {
		return nil, badRequest(ofp.ErrCodeBadRequestBadType, "message type %d is not supported", uint8(h.Type))
	}
	return hf(s, msg)
}

// one wraps a single reply.
func one(m []byte) ([][]byte, *Error) { return [][]byte{m}, nil }

func handleIgnore(*session, []byte) ([][]byte, *Error) { return nil, nil }

func handleEcho(_ *session, msg []byte) ([][]byte, *Error) {
	r := append([]byte(nil), msg...)
	r[1] = byte(of.TypeEchoReply)
	return one(r)
}

// experimenterLen is ofp_experimenter_header: the header, experimenter
// and exp_type.
const experimenterLen = 16

// handleExperimenter refuses experimenter messages: one shorter than its
// fixed part is OFPBRC_BAD_LEN (§7.4.4.1: "wrong request length for
// type"), any other OFPBRC_BAD_EXPERIMENTER (no experimenter is
// supported).
func handleExperimenter(_ *session, msg []byte) ([][]byte, *Error) {
	if len(msg) < experimenterLen {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "experimenter message of %d bytes, want at least %d", len(msg), experimenterLen)
	}
	return nil, badRequest(ofp.ErrCodeBadRequestBadExperimenter, "experimenter messages are not supported")
}

// exactLen checks a message with no body beyond the header.
func exactLen(msg []byte, n int) *Error {
	if len(msg) != n {
		return badRequest(ofp.ErrCodeBadRequestLen, "message of %d bytes, want %d", len(msg), n)
	}
	return nil
}

func handleFeatures(s *session, msg []byte) ([][]byte, *Error) {
	if err := exactLen(msg, HeaderLen); err != nil {
		return nil, err
	}
	return one(encodeFeaturesReply(be32(msg[4:]), &s.feat))
}

func handleGetConfig(s *session, msg []byte) ([][]byte, *Error) {
	if err := exactLen(msg, HeaderLen); err != nil {
		return nil, err
	}
	s.a.mu.Lock()
	c := s.config
	s.a.mu.Unlock()
	return one(encodeConfigReply(be32(msg[4:]), c))
}

func handleSetConfig(s *session, msg []byte) ([][]byte, *Error) {
	c, err := decodeSetConfig(msg)
	if err != nil {
		return nil, err
	}
	s.a.mu.Lock() // PacketIn reads miss_send_len
	s.config = c
	s.a.mu.Unlock()
	return nil, nil
}

func handleFlowMod(s *session, msg []byte) ([][]byte, *Error) {
	fm, err := DecodeFlowMod(msg)
	if err != nil {
		return nil, err
	}
	if err := CheckTables(fm, s.feat.NTables); err != nil {
		return nil, err
	}
	if fm.BufferID != rule.NoBuffer && !fm.Command.IsDelete() && s.feat.NBuffers == 0 {
		return nil, badRequest(ofp.ErrCodeBadRequestBufferUnknown, "buffer %#x: the switch keeps no buffers", fm.BufferID)
	}
	if !fm.Command.IsDelete() {
		if err := s.checkRefs(&fm.Instructions); err != nil {
			return nil, err
		}
	}
	if e := s.a.sw.FlowMod(fm); e != nil {
		return nil, ErrorFor(e, flowModFailed(ofp.ErrCodeFlowModFailedUnknown, "flow_mod"))
	}
	return nil, nil
}

func handlePacketOut(s *session, msg []byte) ([][]byte, *Error) {
	po, err := DecodePacketOut(msg)
	if err != nil {
		return nil, err
	}
	if po.BufferID != rule.NoBuffer && s.feat.NBuffers == 0 {
		return nil, badRequest(ofp.ErrCodeBadRequestBufferUnknown, "buffer %#x: the switch keeps no buffers", po.BufferID)
	}
	if err := s.checkActionRefs(po.Actions); err != nil {
		return nil, err
	}
	if e := s.a.sw.PacketOut(po); e != nil {
		return nil, ErrorFor(e, badRequest(ofp.ErrCodeBadRequestPerm, "packet_out"))
	}
	return nil, nil
}

// handleBarrier replies once the Switch confirms that every earlier change
// is visible; messages are handled in order, so every earlier message of
// this connection has been handled already.
func handleBarrier(s *session, msg []byte) ([][]byte, *Error) {
	if err := exactLen(msg, HeaderLen); err != nil {
		return nil, err
	}
	if e := s.a.sw.Barrier(); e != nil {
		return nil, ErrorFor(e, badRequest(ofp.ErrCodeBadRequestPerm, "barrier"))
	}
	return one(newMsg(of.TypeBarrierReply, be32(msg[4:])).finish())
}

func handleRole(s *session, msg []byte) ([][]byte, *Error) {
	r, gen, err := decodeRoleRequest(msg)
	if err != nil {
		return nil, err
	}
	r, gen, err = s.a.changeRole(s, r, gen)
	if err != nil {
		return nil, err
	}
	return one(encodeRoleReply(be32(msg[4:]), r, gen))
}

func handleGetAsync(s *session, msg []byte) ([][]byte, *Error) {
	if err := exactLen(msg, HeaderLen); err != nil {
		return nil, err
	}
	s.a.mu.Lock()
	ac := s.async
	s.a.mu.Unlock()
	return one(encodeAsyncReply(be32(msg[4:]), &ac))
}

func handleSetAsync(s *session, msg []byte) ([][]byte, *Error) {
	ac, err := decodeSetAsync(msg)
	if err != nil {
		return nil, err
	}
	s.a.mu.Lock()
	s.async = ac
	s.a.mu.Unlock()
	return nil, nil
}

// handleMultipart assembles REQ_MORE parts (same xid and type, bodies
// concatenated) and answers each request when its last part arrives.
// Several requests may be open at once, told apart by xid, as in Open
// vSwitch (OpenFlow 1.3.5 §7.3.5 asks only that a request's parts share
// its xid and type): a request of another xid, in several parts or in
// one, is answered in turn and leaves the open ones open. At most
// MaxMultipartOpen requests may be open and MaxMultipartRequest bytes
// held for them (OFPBRC_MULTIPART_BUFFER_OVERFLOW); a part whose type
// differs from its request's gets OFPBRC_BAD_MULTIPART, and either error
// drops the request.
func handleMultipart(s *session, msg []byte) ([][]byte, *Error) {
	r, err := parseMultipart(msg)
	if err != nil {
		return nil, err
	}
	if p := s.mp[r.xid]; p != nil {
		s.dropMultipart(r.xid)
		if p.typ != r.typ {
			return nil, badRequest(ofp.ErrCodeBadRequestBadMultipart, "multipart part of type %d for xid %d of type %d", r.typ, r.xid, p.typ)
		}
		if s.mpLen+len(p.body)+len(r.body) > s.a.opts.MaxMultipartRequest {
			return nil, badRequest(ofp.ErrCodeBadRequestMultipartBufferOverflow, "multipart requests over %d bytes", s.a.opts.MaxMultipartRequest)
		}
		r.body = append(p.body, r.body...)
	}
	if r.flags&mpMore != 0 {
		if len(s.mp) >= s.a.opts.MaxMultipartOpen {
			return nil, badRequest(ofp.ErrCodeBadRequestMultipartBufferOverflow, "%d multipart requests open", len(s.mp))
		}
		if s.mpLen+len(r.body) > s.a.opts.MaxMultipartRequest {
			return nil, badRequest(ofp.ErrCodeBadRequestMultipartBufferOverflow, "multipart requests over %d bytes", s.a.opts.MaxMultipartRequest)
		}
		r.body = append([]byte(nil), r.body...)
		if s.mp == nil {
			s.mp = map[uint32]*mpRequest{}
		}
		s.mp[r.xid] = &r
		s.mpLen += len(r.body)
		return nil, nil
	}
	return s.multipart(&r)
}

// dropMultipart forgets the open request of xid.
func (s *session) dropMultipart(xid uint32) {
	if p := s.mp[xid]; p != nil {
		s.mpLen -= len(p.body)
		delete(s.mp, xid)
	}
}

// multipart answers one whole multipart request.
func (s *session) multipart(r *mpRequest) ([][]byte, *Error) {
	switch r.typ {
	case ofp.MultipartTypeDescription:
		return s.mpFixed(r, func() [][]byte { return [][]byte{encodeDesc(&s.feat.Desc)} })
	case ofp.MultipartTypeFlow, ofp.MultipartTypeAggregate:
		return s.mpFlows(r)
	case ofp.MultipartTypeTable:
		return s.mpFixed(r, s.tableStats)
	case ofp.MultipartTypePortStats:
		return s.mpPortStats(r)
	case ofp.MultipartTypePortDescription:
		return s.mpFixed(r, s.portDescs)
	case ofp.MultipartTypeTableFeatures:
		if len(r.body) != 0 {
			return nil, errf(ofp.ErrTypeTableFeaturesFailed, ofp.ErrCodeTableFeaturesFailedPerm, "setting table features is not supported")
		}
		return s.mpFixed(r, s.tableFeatures)
	case ofp.MultipartTypeExperimenter:
		return nil, badRequest(ofp.ErrCodeBadRequestBadExperimenter, "experimenter multipart requests are not supported")
	}
	if out, err, ok := s.mpOptional(r); ok {
		return out, err
	}
	return nil, badRequest(ofp.ErrCodeBadRequestBadMultipart, "multipart type %d is not supported", r.typ)
}

// mpFixed answers a request with an empty body.
func (s *session) mpFixed(r *mpRequest, entries func() [][]byte) ([][]byte, *Error) {
	if len(r.body) != 0 {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "multipart type %d with a %d-byte body", r.typ, len(r.body))
	}
	return encodeMultipartReply(r.xid, r.typ, entries()), nil
}

func (s *session) tableStats() [][]byte {
	var out [][]byte
	for _, ts := range s.a.sw.TableStats() {
		out = append(out, encodeTableStats(&ts))
	}
	return out
}

func (s *session) tableFeatures() [][]byte {
	var out [][]byte
	for i := range int(s.feat.NTables) {
		out = append(out, encodeTableFeatures(uint8(i), &s.feat))
	}
	return out
}

func (s *session) portDescs() [][]byte {
	var out [][]byte
	for _, p := range s.a.sw.Ports() {
		out = append(out, encodePortDesc(&p))
	}
	return out
}

func (s *session) mpFlows(r *mpRequest) ([][]byte, *Error) {
	req, err := DecodeFlowStatsRequest(r.body)
	if err != nil {
		return nil, err
	}
	if req.TableID != rule.TableAll && req.TableID >= s.feat.NTables {
		return nil, badRequest(ofp.ErrCodeBadRequestBadTableID, "table %d of %d", req.TableID, s.feat.NTables)
	}
	fss, e := s.a.sw.FlowStats(req)
	if e != nil {
		return nil, ErrorFor(e, badRequest(ofp.ErrCodeBadRequestPerm, "flow stats"))
	}
	if r.typ == ofp.MultipartTypeAggregate {
		return encodeMultipartReply(r.xid, r.typ, [][]byte{encodeAggregate(fss)}), nil
	}
	ents := make([][]byte, len(fss))
	for i := range fss {
		ents[i] = encodeFlowStats(&fss[i])
	}
	return encodeMultipartReply(r.xid, r.typ, ents), nil
}

func (s *session) mpPortStats(r *mpRequest) ([][]byte, *Error) {
	port, err := decodePortStatsRequest(r.body)
	if err != nil {
		return nil, err
	}
	pss, e := s.a.sw.PortStats(port)
	if e != nil {
		return nil, ErrorFor(e, badRequest(ofp.ErrCodeBadRequestBadPort, "port stats"))
	}
	ents := make([][]byte, len(pss))
	for i := range pss {
		ents[i] = encodePortStats(&pss[i])
	}
	return encodeMultipartReply(r.xid, r.typ, ents), nil
}
