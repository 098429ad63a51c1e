package openflow

import (
	"errors"
	"fmt"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// Error is an OpenFlow error: the type and code of the OFPT_ERROR a message
// gets (OpenFlow 1.3.5 §7.4.4), and a human-readable reason for logs. Every
// decoder and handler of this package returns *Error; a Switch returns the
// rule model's *rule.Error or tables/flow's typed errors, which ErrorFor
// maps onto codes.
type Error struct {
	Type   ofp.ErrType
	Code   ofp.ErrCode
	Detail string
}

// Error returns "type/code: detail".
func (e *Error) Error() string {
	return fmt.Sprintf("openflow: %s: %s", ofp.Error{Type: e.Type, Code: e.Code}.String(), e.Detail)
}

// Is reports whether target is an *Error with the same type and code, so
// that errors.Is(err, &Error{Type: t, Code: c}) checks a code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Type == e.Type && t.Code == e.Code
}

// asError returns e as an error: nil for a nil *Error (a nil *Error in an
// error interface would not compare equal to nil).
func asError(e *Error) error {
	if e == nil {
		return nil
	}
	return e
}

func errf(t ofp.ErrType, c ofp.ErrCode, format string, args ...any) *Error {
	return &Error{Type: t, Code: c, Detail: fmt.Sprintf(format, args...)}
}

// Shorthands for the error types this package raises most.
func badRequest(c ofp.ErrCode, format string, args ...any) *Error {
	return errf(ofp.ErrTypeBadRequest, c, format, args...)
}

func badMatch(c ofp.ErrCode, format string, args ...any) *Error {
	return errf(ofp.ErrTypeBadMatch, c, format, args...)
}

func badAction(c ofp.ErrCode, format string, args ...any) *Error {
	return errf(ofp.ErrTypeBadAction, c, format, args...)
}

func badInstruction(c ofp.ErrCode, format string, args ...any) *Error {
	return errf(ofp.ErrTypeBadInstruction, c, format, args...)
}

func flowModFailed(c ofp.ErrCode, format string, args ...any) *Error {
	return errf(ofp.ErrTypeFlowModFailed, c, format, args...)
}

// matchCodes maps tables/flow's match error kinds onto OFPBMC_* codes.
var matchCodes = []struct {
	kind error
	code ofp.ErrCode
}{
	{flow.ErrBadPrereq, ofp.ErrCodeBadMatchBadPrereq},
	{flow.ErrDupField, ofp.ErrCodeBadMatchDupField},
	{flow.ErrBadWildcards, ofp.ErrCodeBadMatchBadWildcards},
	{flow.ErrBadMask, ofp.ErrCodeBadMatchBadMask},
	{flow.ErrBadValue, ofp.ErrCodeBadMatchBadValue},
	{flow.ErrBadLength, ofp.ErrCodeBadMatchBadLen},
	{flow.ErrBadField, ofp.ErrCodeBadMatchBadField},
}

// code is an OFPT_ERROR type and code.
type code struct {
	t ofp.ErrType
	c ofp.ErrCode
}

// ruleCodes maps the rule model's error kinds onto OpenFlow 1.3.5's
// types and codes (§7.4.4). rule.NoSuchPort is not here: its code depends
// on the request (portCodes).
var ruleCodes = map[rule.Kind]code{
	rule.BadFlowCommand: {ofp.ErrTypeFlowModFailed, ofp.ErrCodeFlowModFailedBadCommand},
	rule.BadTable:       {ofp.ErrTypeFlowModFailed, ofp.ErrCodeFlowModFailedBadTableID},
	rule.BadGoto:        {ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionTableID},
	rule.BadSetField:    {ofp.ErrTypeBadAction, ofp.ErrCodeBadActionSetType},

	rule.BadGroupCommand: {ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadCommand},
	rule.GroupExists:     {ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedGroupExists},
	rule.UnknownGroup:    {ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedUnknownGroup},
	rule.InvalidGroup:    {ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedInvalidGroup},
	rule.BadGroupType:    {ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadType},
	rule.OutOfGroups:     {ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedOutOfGroups},
	rule.OutOfBuckets:    {ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedOutOfBuckets},
	rule.BadWatch:        {ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadWatch},
	rule.GroupLoop:       {ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedLoop},
	rule.ChainedGroup:    {ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedChainedGroup},
	// A group action naming a missing group, in a flow entry, a packet-out
	// or another group's bucket: OFPBAC_BAD_OUT_GROUP, as Open vSwitch.
	rule.DanglingGroup: {ofp.ErrTypeBadAction, ofp.ErrCodeBadActionOutGroup},

	rule.BadMeterCommand: {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadCommand},
	rule.MeterExists:     {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedMeterExists},
	rule.UnknownMeter:    {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedUnknownMeter},
	rule.InvalidMeter:    {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedInvalidMeter},
	rule.BadMeterFlags:   {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadFlags},
	rule.OutOfMeters:     {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedOutOfMeters},
	rule.OutOfBands:      {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedOutOfBands},
	rule.BadBand:         {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadBand},
	rule.BadRate:         {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadRate},
	rule.BadBandValue:    {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadBandValue},
	rule.BadBurst:        {ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadBurst},
}

// portCodes gives, by the type of the request's error, the code of a
// port that does not exist (rule.NoSuchPort): PORT_MOD's
// OFPPMFC_BAD_PORT, a queue request's OFPQOFC_BAD_PORT, and OFPBRC_BAD_PORT
// for the rest (port statistics).
var portCodes = map[ofp.ErrType]ofp.ErrCode{
	ofp.ErrTypePortModFailed: ofp.ErrCodePortModFailedBadPort,
	ofp.ErrTypeQueueOpFailed: ofp.ErrCodeQueueOpFailedBadPort,
	ofp.ErrTypeBadRequest:    ofp.ErrCodeBadRequestBadPort,
}

// ErrorFor translates an error from a Switch (or from tables/flow or
// tables/rule) into the OpenFlow error to send: an *Error is kept; a
// rule.Error's kind becomes its code (ruleCodes; rule.NoSuchPort the
// BAD_PORT code of fallback's type); flow.MatchError kinds become
// OFPET_BAD_MATCH codes; flow.ErrOverlap OFPFMFC_OVERLAP; flow.ErrTableFull
// OFPFMFC_TABLE_FULL; anything else the fallback type and code.
func ErrorFor(err error, fallback *Error) *Error {
	var oe *Error
	if errors.As(err, &oe) {
		return oe
	}
	var re *rule.Error
	if errors.As(err, &re) {
		if c, ok := ruleCodes[re.Kind]; ok {
			return errf(c.t, c.c, "%s", re.Detail)
		}
		if c, ok := portCodes[fallback.Type]; ok && re.Kind == rule.NoSuchPort {
			return errf(fallback.Type, c, "%s", re.Detail)
		}
		if re.Kind == rule.NoSuchPort {
			return badRequest(ofp.ErrCodeBadRequestBadPort, "%s", re.Detail)
		}
	}
	if errors.Is(err, flow.ErrBadMatch) {
		for _, mc := range matchCodes {
			if errors.Is(err, mc.kind) {
				return badMatch(mc.code, "%v", err)
			}
		}
		return badMatch(ofp.ErrCodeBadMatchBadField, "%v", err)
	}
	switch {
	case errors.Is(err, flow.ErrOverlap):
		return flowModFailed(ofp.ErrCodeFlowModFailedOverlap, "%v", err)
	case errors.Is(err, flow.ErrTableFull):
		return flowModFailed(ofp.ErrCodeFlowModFailedTableFull, "%v", err)
	}
	return &Error{Type: fallback.Type, Code: fallback.Code, Detail: fmt.Sprintf("%s: %v", fallback.Detail, err)}
}

// ErrorDataLen is how much of an offending message an error carries.
const ErrorDataLen = 64

// EncodeError builds the OFPT_ERROR for e in reply to the message req (its
// xid, and its first ErrorDataLen bytes as data).
func EncodeError(req []byte, e *Error) []byte {
	var xid uint32
	if h, ok := ParseHeader(req); ok {
		xid = h.Xid
	}
	return encodeErrorData(xid, e, req[:min(len(req), ErrorDataLen)])
}

// encodeErrorData builds an OFPT_ERROR with explicit data.
func encodeErrorData(xid uint32, e *Error, data []byte) []byte {
	m := newMsg(of.TypeError, xid)
	m.u16(uint16(e.Type))
	m.u16(uint16(e.Code))
	m.raw(data)
	return m.finish()
}

// ParseError reads an OFPT_ERROR message: its type, code and data.
func ParseError(msg []byte) (t ofp.ErrType, c ofp.ErrCode, data []byte, ok bool) {
	h, ok := ParseHeader(msg)
	if !ok || h.Type != of.TypeError || len(msg) < HeaderLen+4 || int(h.Length) != len(msg) {
		return 0, 0, nil, false
	}
	return ofp.ErrType(be16(msg[8:])), ofp.ErrCode(be16(msg[10:])), msg[12:], true
}
