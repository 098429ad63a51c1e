package openflow

import (
	"bytes"
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/malformed")

// A malformed case: a message (its xid is set by the harness) and the
// OFPT_ERROR type and code OpenFlow 1.3.5 §7.4.4 gives it; closes when
// the stream cannot be framed any more and the connection ends after the
// error.
type malformed struct {
	name   string
	msg    []byte
	typ    ofp.ErrType
	code   ofp.ErrCode
	closes bool
}

// hx joins hex strings (spaces ignored) into bytes.
func hx(parts ...string) []byte { return unhex(nil, strings.Join(parts, " ")) }

// u16h and u32h format numbers as hex bytes.
func u16h(v int) string { return fmt.Sprintf("%02x %02x", v>>8&0xff, v&0xff) }
func u32h(v uint32) string {
	return fmt.Sprintf("%02x %02x %02x %02x", v>>24, v>>16&0xff, v>>8&0xff, v&0xff)
}

// hlen is the number of bytes of a hex string.
func hlen(s string) int { return len(unhex(nil, s)) }

// raw builds a message of type t with body (hex); its length is set.
func raw(t of.Type, body string) []byte {
	return fixLen(hx("04", fmt.Sprintf("%02x", uint8(t)), "00 00 00 00 00 00", body))
}

// oxmh is one basic OXM TLV; hasMask sets the hasmask bit (payload then
// holds value and mask).
func oxmh(field int, hasMask bool, payload string) string {
	hm := 0
	if hasMask {
		hm = 1
	}
	return fmt.Sprintf("80 00 %02x %02x %s", field<<1|hm, hlen(payload), payload)
}

// Action and instruction builders (hex).
func outA(port uint32) string { return "00 00 00 10 " + u32h(port) + " ff e5 00 00 00 00 00 00" }
func groupA(id uint32) string { return "00 16 00 08 " + u32h(id) }
func setFieldA(oxm string) string {
	n := 4 + hlen(oxm)
	return "00 19 " + u16h(n+pad8(n)) + " " + oxm + strings.Repeat(" 00", pad8(n))
}
func instr(t int, body string) string { return u16h(t) + " " + u16h(4+hlen(body)) + " " + body }
func applyI(acts string) string       { return instr(4, "00 00 00 00 "+acts) }
func writeI(acts string) string       { return instr(3, "00 00 00 00 "+acts) }

// fmh is a FLOW_MOD: command, table, match OXMs, instructions.
func fmh(cmd, table int, oxms, instrs string) []byte {
	return flowModWith(nil, fmt.Sprintf("%02x %02x", table, cmd), oxms, instrs)
}

// mph is a multipart request of type mt with flags and body.
func mph(mt, flags int, body string) []byte {
	return raw(of.TypeMultipartRequest, u16h(mt)+" "+u16h(flags)+" 00 00 00 00 "+body)
}

// poh is a PACKET_OUT: buffer, in_port, actions, data.
func poh(buffer, inPort uint32, acts, data string) []byte {
	return raw(of.TypePacketOut, u32h(buffer)+" "+u32h(inPort)+" "+u16h(hlen(acts))+" 00 00 00 00 00 00 "+acts+" "+data)
}

// bucketh is a bucket: weight, watch port and group, actions.
func bucketh(weight int, watchPort, watchGroup uint32, acts string) string {
	return u16h(16+hlen(acts)) + " " + u16h(weight) + " " + u32h(watchPort) + " " + u32h(watchGroup) + " 00 00 00 00 " + acts
}
func gmh(cmd, typ int, id uint32, buckets string) []byte {
	return raw(of.TypeGroupMod, u16h(cmd)+fmt.Sprintf(" %02x 00 ", typ)+u32h(id)+" "+buckets)
}
func mmh(cmd, flags int, id uint32, bands string) []byte {
	return raw(of.TypeMeterMod, u16h(cmd)+" "+u16h(flags)+" "+u32h(id)+" "+bands)
}
func bandh(typ int, length int, rate, burst uint32, extra string) string {
	return u16h(typ) + " " + u16h(length) + " " + u32h(rate) + " " + u32h(burst) + " " + extra
}

const (
	anyP  = rule.PortAny
	anyG  = rule.GroupAny
	noBuf = rule.NoBuffer
	frame = "ff ff ff ff ff ff 02 00 00 00 00 01 08 06 00 01 08 00 06 04 00 01 02 00 00 00 00 01 0a 00 00 01 00 00 00 00 00 00 0a 00 00 02"
	tDrop = 1
	tDSCP = 2
	kbps  = 1
	pktps = 2
	ipv4V = "0a 00 00 01"
)

const (
	bReq = ofp.ErrTypeBadRequest
	bAct = ofp.ErrTypeBadAction
	bIns = ofp.ErrTypeBadInstruction
	bMat = ofp.ErrTypeBadMatch
	fmF  = ofp.ErrTypeFlowModFailed
	gmF  = ofp.ErrTypeGroupModFailed
	mmF  = ofp.ErrTypeMeterModFailed
	pmF  = ofp.ErrTypePortModFailed
	tmF  = ofp.ErrTypeTableModFailed
	qoF  = ofp.ErrTypeQueueOpFailed
	scF  = ofp.ErrTypeSwitchConfigFailed
	rrF  = ofp.ErrTypeRoleRequestFailed
	tfF  = ofp.ErrTypeTableFeaturesFailed
)

// malformedCases is the corpus: at least 100 messages, each wrong in one
// way, over every message family the switch accepts.
func malformedCases() []malformed {
	hdr := func(v, t int, length int) []byte { // a header-only message
		return hx(fmt.Sprintf("%02x %02x", v, t), u16h(length), "00 00 00 00")
	}
	cs := []malformed{
		// Headers: version, length, type.
		{"header-version-1.0-echo", hdr(1, 2, 8), bReq, ofp.ErrCodeBadRequestBadVersion, false},
		{"header-version-1.4-echo", hdr(5, 2, 8), bReq, ofp.ErrCodeBadRequestBadVersion, false},
		{"header-version-0-barrier", hdr(0, 20, 8), bReq, ofp.ErrCodeBadRequestBadVersion, false},
		{"header-version-ff-features", hdr(0xff, 5, 8), bReq, ofp.ErrCodeBadRequestBadVersion, false},
		{"header-version-1.2-flow-mod", func() []byte { m := fmh(0, 0, "", ""); m[0] = 3; return m }(), bReq, ofp.ErrCodeBadRequestBadVersion, false},
		{"header-length-0", hdr(4, 2, 0), bReq, ofp.ErrCodeBadRequestLen, true},
		{"header-length-4", hdr(4, 2, 4), bReq, ofp.ErrCodeBadRequestLen, true},
		{"header-length-7", hdr(4, 20, 7), bReq, ofp.ErrCodeBadRequestLen, true},
		{"type-features-reply", raw(of.TypeFeaturesReply, strings.Repeat("00 ", 24)), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-get-config-reply", raw(of.TypeGetConfigReply, "00 00 00 80"), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-packet-in", raw(of.TypePacketIn, strings.Repeat("00 ", 24)), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-flow-removed", raw(of.TypeFlowRemoved, strings.Repeat("00 ", 48)), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-port-status", raw(of.TypePortStatus, strings.Repeat("00 ", 72)), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-multipart-reply", raw(of.TypeMultipartReply, "00 00 00 00 00 00 00 00"), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-barrier-reply", raw(of.TypeBarrierReply, ""), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-queue-get-config-reply", raw(of.TypeQueueGetConfigReply, "00 00 00 01 00 00 00 00"), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-role-reply", raw(of.TypeRoleReply, strings.Repeat("00 ", 16)), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-get-async-reply", raw(of.TypeGetAsyncReply, strings.Repeat("00 ", 24)), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-30", hdr(4, 30, 8), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-33-bundle", hdr(4, 33, 8), bReq, ofp.ErrCodeBadRequestBadType, false},
		{"type-255", hdr(4, 255, 8), bReq, ofp.ErrCodeBadRequestBadType, false},

		// Fixed-size requests.
		{"features-request-with-body", raw(of.TypeFeaturesRequest, "00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"get-config-request-with-body", raw(of.TypeGetConfigRequest, "00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"barrier-request-with-body", raw(of.TypeBarrierRequest, "00 00 00 00 00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"get-async-request-with-body", raw(of.TypeGetAsyncRequest, "00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"set-config-short", raw(of.TypeSetConfig, "00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"set-config-long", raw(of.TypeSetConfig, "00 00 00 80 00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"set-config-bad-flags", raw(of.TypeSetConfig, "00 08 00 80"), scF, ofp.ErrCodeSwitchConfigFailedBadFlags, false},
		{"role-request-short", raw(of.TypeRoleRequest, "00 00 00 02"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"role-request-bad-role", raw(of.TypeRoleRequest, "00 00 00 07 00 00 00 00 00 00 00 00 00 00 00 01"), rrF, ofp.ErrCodeRoleRequestFailedBadRole, false},
		{"set-async-short", raw(of.TypeSetAsync, "00 00 00 07"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"experimenter-10-bytes", raw(of.TypeExperiment, "00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"experimenter-unknown", raw(of.TypeExperiment, "00 00 23 20 00 00 00 0a"), bReq, ofp.ErrCodeBadRequestBadExperimenter, false},

		// FLOW_MOD: fixed part.
		{"flow-mod-short", raw(of.TypeFlowMod, strings.Repeat("00 ", 40)), bReq, ofp.ErrCodeBadRequestLen, false},
		{"flow-mod-bad-command-5", fmh(5, 0, "", ""), fmF, ofp.ErrCodeFlowModFailedBadCommand, false},
		{"flow-mod-bad-command-ff", fmh(0xff, 0, "", ""), fmF, ofp.ErrCodeFlowModFailedBadCommand, false},
		{"flow-mod-bad-flags", func() []byte { m := fmh(0, 0, "", ""); m[45] = 0x80; return m }(), fmF, ofp.ErrCodeFlowModFailedBadFlags, false},
		{"flow-mod-add-table-all", fmh(0, 0xff, "", ""), fmF, ofp.ErrCodeFlowModFailedBadTableID, false},
		{"flow-mod-add-table-beyond", fmh(0, 7, "", ""), fmF, ofp.ErrCodeFlowModFailedBadTableID, false},
		{"flow-mod-unknown-buffer", func() []byte { m := fmh(0, 0, "", ""); copy(m[32:], hx("00 00 00 07")); return m }(), bReq, ofp.ErrCodeBadRequestBufferUnknown, false},

		// FLOW_MOD: match framing and OXM TLVs.
		{"match-type-standard", func() []byte { m := fmh(0, 0, "", ""); m[49] = 0; return m }(), bMat, ofp.ErrCodeBadMatchBadType, false},
		{"match-length-3", func() []byte { m := fmh(0, 0, "", ""); m[51] = 3; return m }(), bMat, ofp.ErrCodeBadMatchBadLen, false},
		{"match-length-beyond-message", func() []byte { m := fmh(0, 0, "", ""); m[50], m[51] = 0x01, 0x00; return m }(), bMat, ofp.ErrCodeBadMatchBadLen, false},
		{"oxm-header-truncated", fmh(0, 0, "80 00", ""), bMat, ofp.ErrCodeBadMatchBadLen, false},
		{"oxm-payload-beyond-match", fmh(0, 0, "80 00 0a 04 08 00", ""), bMat, ofp.ErrCodeBadMatchBadLen, false},
		{"oxm-class-nxm0", fmh(0, 0, "00 00 00 04 00 00 00 01", ""), bMat, ofp.ErrCodeBadMatchBadField, false},
		{"oxm-class-experimenter", fmh(0, 0, "ff ff 00 08 00 00 23 20 00 00 00 01", ""), bMat, ofp.ErrCodeBadMatchBadField, false},
		{"oxm-field-40", fmh(0, 0, oxmh(40, false, "00 00"), ""), bMat, ofp.ErrCodeBadMatchBadField, false},
		{"oxm-field-127", fmh(0, 0, oxmh(127, false, "00"), ""), bMat, ofp.ErrCodeBadMatchBadField, false},
		{"oxm-in-port-3-bytes", fmh(0, 0, oxmh(0, false, "00 00 01"), ""), bMat, ofp.ErrCodeBadMatchBadLen, false},
		{"oxm-eth-type-1-byte", fmh(0, 0, oxmh(5, false, "08"), ""), bMat, ofp.ErrCodeBadMatchBadLen, false},
		{"oxm-in-port-masked", fmh(0, 0, oxmh(0, true, "00 00 00 01 ff ff ff ff"), ""), bMat, ofp.ErrCodeBadMatchBadMask, false},
		{"oxm-eth-type-masked", fmh(0, 0, oxmh(5, true, "08 00 ff ff"), ""), bMat, ofp.ErrCodeBadMatchBadMask, false},
		{"oxm-masked-odd-length", fmh(0, 0, oxmh(3, true, "02 00 00 00 00 01 ff ff ff ff ff"), ""), bMat, ofp.ErrCodeBadMatchBadLen, false},
		{"oxm-duplicate-eth-type", fmh(0, 0, ethIP+" "+ethIP, ""), bMat, ofp.ErrCodeBadMatchDupField, false},
		{"oxm-ipv4-src-without-eth-type", fmh(0, 0, oxmh(11, false, ipv4V), ""), bMat, ofp.ErrCodeBadMatchBadPrereq, false},
		{"oxm-tcp-dst-without-ip-proto", fmh(0, 0, ethIP+" "+oxmh(14, false, "00 50"), ""), bMat, ofp.ErrCodeBadMatchBadPrereq, false},
		{"oxm-tcp-dst-with-udp", fmh(0, 0, ethIP+" "+oxmh(10, false, "11")+" "+oxmh(14, false, "00 50"), ""), bMat, ofp.ErrCodeBadMatchBadPrereq, false},
		{"oxm-arp-op-with-ipv4", fmh(0, 0, ethIP+" "+oxmh(21, false, "00 01"), ""), bMat, ofp.ErrCodeBadMatchBadPrereq, false},
		{"oxm-vlan-vid-13-bits", fmh(0, 0, oxmh(6, false, "20 00"), ""), bMat, ofp.ErrCodeBadMatchBadValue, false},
		{"oxm-ip-dscp-64", fmh(0, 0, ethIP+" "+oxmh(8, false, "40"), ""), bMat, ofp.ErrCodeBadMatchBadValue, false},
		{"oxm-ipv6-flabel-spare-bits", fmh(0, 0, "80 00 0a 02 86 dd "+oxmh(28, false, "00 10 00 00"), ""), bMat, ofp.ErrCodeBadMatchBadValue, false},
		{"oxm-ipv4-src-value-outside-mask", fmh(0, 0, ethIP+" "+oxmh(11, true, "0a 00 00 01 ff ff ff 00"), ""), bMat, ofp.ErrCodeBadMatchBadWildcards, false},
		{"oxm-mpls-label-21-bits", fmh(0, 0, "80 00 0a 02 88 47 "+oxmh(34, false, "00 10 00 00"), ""), bMat, ofp.ErrCodeBadMatchBadValue, false},

		// FLOW_MOD: instructions.
		{"instruction-header-truncated", fmh(0, 0, "", "00 04 00"), bIns, ofp.ErrCodeBadInstructionLen, false},
		{"instruction-length-4", fmh(0, 0, "", "00 01 00 04 00 00 00 00"), bIns, ofp.ErrCodeBadInstructionLen, false},
		{"instruction-length-beyond", fmh(0, 0, "", "00 04 00 20 00 00 00 00"), bIns, ofp.ErrCodeBadInstructionLen, false},
		{"instruction-unknown-type-7", fmh(0, 0, "", "00 07 00 08 00 00 00 00"), bIns, ofp.ErrCodeBadInstructionUnknown, false},
		{"instruction-experimenter", fmh(0, 0, "", "ff ff 00 08 00 00 23 20"), bIns, ofp.ErrCodeBadInstructionExperimenter, false},
		{"instruction-goto-length-16", fmh(0, 0, "", "00 01 00 10 01 00 00 00 00 00 00 00 00 00 00 00"), bIns, ofp.ErrCodeBadInstructionLen, false},
		{"instruction-goto-backwards", fmh(0, 1, "", "00 01 00 08 00 00 00 00"), bIns, ofp.ErrCodeBadInstructionTableID, false},
		{"instruction-goto-beyond-tables", fmh(0, 0, "", "00 01 00 08 09 00 00 00"), bIns, ofp.ErrCodeBadInstructionTableID, false},
		{"instruction-duplicate-apply", fmh(0, 0, "", applyI("")+" "+applyI("")), bIns, ofp.ErrCodeBadInstructionUnsupported, false},
		{"instruction-write-metadata-outside-mask", fmh(0, 0, "", "00 02 00 18 00 00 00 00 00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 01"), bIns, ofp.ErrCodeBadInstructionUnsupportedMetadata, false},
		{"instruction-meter-missing", fmh(0, 0, "", "00 06 00 08 00 00 00 09"), mmF, ofp.ErrCodeMeterModFailedUnknownMeter, false},
		{"instruction-meter-0", fmh(0, 0, "", "00 06 00 08 00 00 00 00"), mmF, ofp.ErrCodeMeterModFailedInvalidMeter, false},
		{"instruction-clear-actions-with-body", fmh(0, 0, "", "00 05 00 10 00 00 00 00 00 00 00 00 00 00 00 00"), bIns, ofp.ErrCodeBadInstructionLen, false},

		// FLOW_MOD: actions.
		{"action-header-truncated", poh(noBuf, rule.PortController, "00 00 00 10", frame), bAct, ofp.ErrCodeBadActionLen, false},
		{"action-length-12", fmh(0, 0, "", applyI("00 00 00 0c 00 00 00 01 ff e5 00 00 00 00 00 00")), bAct, ofp.ErrCodeBadActionLen, false},
		{"action-output-length-8", fmh(0, 0, "", applyI("00 00 00 08 00 00 00 01")), bAct, ofp.ErrCodeBadActionLen, false},
		{"action-unknown-type-9", fmh(0, 0, "", applyI("00 09 00 08 00 00 00 00")), bAct, ofp.ErrCodeBadActionType, false},
		{"action-experimenter", fmh(0, 0, "", applyI("ff ff 00 10 00 00 23 20 00 00 00 00 00 00 00 00")), bAct, ofp.ErrCodeBadActionExperimenter, false},
		{"action-output-port-0", fmh(0, 0, "", applyI(outA(0))), bAct, ofp.ErrCodeBadActionOutPort, false},
		{"action-output-port-any", fmh(0, 0, "", applyI(outA(anyP))), bAct, ofp.ErrCodeBadActionOutPort, false},
		{"action-output-port-reserved-gap", fmh(0, 0, "", applyI(outA(0xffffff01))), bAct, ofp.ErrCodeBadActionOutPort, false},
		{"action-group-reserved", fmh(0, 0, "", applyI(groupA(0xfffffffc))), bAct, ofp.ErrCodeBadActionOutGroup, false},
		{"action-group-missing", fmh(0, 0, "", applyI(groupA(77))), bAct, ofp.ErrCodeBadActionOutGroup, false},
		{"action-push-vlan-0800", fmh(0, 0, "", applyI("00 11 00 08 08 00 00 00")), bAct, ofp.ErrCodeBadActionArgument, false},
		{"action-push-mpls-0800", fmh(0, 0, "", applyI("00 13 00 08 08 00 00 00")), bAct, ofp.ErrCodeBadActionArgument, false},
		{"action-push-pbb-8100", fmh(0, 0, "", applyI("00 1a 00 08 81 00 00 00")), bAct, ofp.ErrCodeBadActionArgument, false},
		{"action-set-queue-missing", fmh(0, 0, "", writeI("00 15 00 08 00 00 00 63")), bAct, ofp.ErrCodeBadActionQueue, false},
		{"set-field-in-port", fmh(0, 0, "", applyI(setFieldA(oxmh(0, false, "00 00 00 02")))), bAct, ofp.ErrCodeBadActionSetType, false},
		{"set-field-ipv6-exthdr", fmh(0, 0, "80 00 0a 02 86 dd", applyI(setFieldA(oxmh(39, false, "00 01")))), bAct, ofp.ErrCodeBadActionSetType, false},
		{"set-field-experimenter-class", fmh(0, 0, "", applyI("00 19 00 10 ff ff 00 04 00 00 23 20 00 00 00 00")), bAct, ofp.ErrCodeBadActionSetType, false},
		{"set-field-masked", fmh(0, 0, "", applyI(setFieldA(oxmh(3, true, "02 00 00 00 00 01 ff ff ff ff ff ff")))), bAct, ofp.ErrCodeBadActionSetArgument, false},
		{"set-field-eth-dst-5-bytes", fmh(0, 0, "", applyI(setFieldA(oxmh(3, false, "02 00 00 00 00")))), bAct, ofp.ErrCodeBadActionSetLen, false},
		{"set-field-oxm-beyond-action", fmh(0, 0, "", applyI("00 19 00 08 80 00 06 06")), bAct, ofp.ErrCodeBadActionSetLen, false},
		{"set-field-vlan-vid-13-bits", fmh(0, 0, "", applyI(setFieldA(oxmh(6, false, "20 00")))), bAct, ofp.ErrCodeBadActionSetArgument, false},
		{"set-field-ipv4-src-without-ipv4", fmh(0, 0, "", applyI(setFieldA(oxmh(11, false, ipv4V)))), bAct, ofp.ErrCodeBadActionMatchInconsistent, false},
		{"set-field-tcp-src-with-udp", fmh(0, 0, ethIP+" "+oxmh(10, false, "11"), writeI(setFieldA(oxmh(13, false, "00 50")))), bAct, ofp.ErrCodeBadActionMatchInconsistent, false},
		{"set-field-vlan-pcp-untagged", fmh(0, 0, oxmh(6, false, "00 00"), applyI(setFieldA(oxmh(7, false, "03")))), bAct, ofp.ErrCodeBadActionMatchInconsistent, false},
		{"oversized-flow-mod", func() []byte {
			acts := strings.Repeat(outA(1)+" ", 4091)
			return fmh(0, 0, "", applyI(acts))
		}(), bAct, ofp.ErrCodeBadActionTooMany, false},

		// GROUP_MOD.
		{"group-mod-short", raw(of.TypeGroupMod, "00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"group-mod-bad-command", gmh(3, 0, 2, ""), gmF, ofp.ErrCodeGroupModBadCommand, false},
		{"group-mod-bad-type", gmh(0, 4, 2, ""), gmF, ofp.ErrCodeGroupModBadType, false},
		{"group-mod-add-reserved-id", gmh(0, 0, 0xfffffffe, ""), gmF, ofp.ErrCodeGroupModFailedInvalidGroup, false},
		{"group-mod-add-all", gmh(0, 0, rule.GroupAll, ""), gmF, ofp.ErrCodeGroupModFailedInvalidGroup, false},
		{"group-mod-delete-reserved-id", gmh(2, 0, 0xffffff01, ""), gmF, ofp.ErrCodeGroupModFailedInvalidGroup, false},
		{"group-mod-indirect-two-buckets", gmh(0, 2, 2, bucketh(0, anyP, anyG, outA(1))+" "+bucketh(0, anyP, anyG, outA(2))), gmF, ofp.ErrCodeGroupModFailedInvalidGroup, false},
		{"group-mod-all-bucket-weight", gmh(0, 0, 2, bucketh(3, anyP, anyG, outA(1))), gmF, ofp.ErrCodeGroupModFailedInvalidGroup, false},
		{"group-mod-ff-bucket-weight", gmh(0, 3, 2, bucketh(3, 1, anyG, outA(1))), gmF, ofp.ErrCodeGroupModFailedInvalidGroup, false},
		{"group-mod-bucket-truncated", gmh(0, 0, 2, "00 10 00 00 ff ff ff ff"), gmF, ofp.ErrCodeGroupModBadBucket, false},
		{"group-mod-bucket-length-12", gmh(0, 0, 2, "00 0c 00 00 ff ff ff ff ff ff ff ff 00 00 00 00"), gmF, ofp.ErrCodeGroupModBadBucket, false},
		{"group-mod-bucket-length-beyond", gmh(0, 0, 2, "00 40 00 00 ff ff ff ff ff ff ff ff 00 00 00 00"), gmF, ofp.ErrCodeGroupModBadBucket, false},
		{"group-mod-ff-bucket-watches-nothing", gmh(0, 3, 2, bucketh(0, anyP, anyG, outA(1))), gmF, ofp.ErrCodeGroupModBadWatch, false},
		{"group-mod-watch-port-0", gmh(0, 3, 2, bucketh(0, 0, anyG, outA(1))), gmF, ofp.ErrCodeGroupModBadWatch, false},
		{"group-mod-forwards-to-itself", gmh(0, 0, 2, bucketh(0, anyP, anyG, groupA(2))), gmF, ofp.ErrCodeGroupModFailedLoop, false},
		{"group-mod-bucket-bad-action", gmh(0, 0, 2, bucketh(0, anyP, anyG, "00 09 00 08 00 00 00 00")), bAct, ofp.ErrCodeBadActionType, false},
		{"group-mod-add-existing", gmh(0, 0, 1, bucketh(0, anyP, anyG, outA(2))), gmF, ofp.ErrCodeGroupModFailedGroupExists, false},
		{"group-mod-modify-unknown", gmh(1, 0, 9, bucketh(0, anyP, anyG, outA(2))), gmF, ofp.ErrCodeGroupModFailedUnknownGroup, false},
		{"group-mod-delete-chained", gmh(2, 0, 1, ""), gmF, ofp.ErrCodeGroupModFailedChainedGroup, false},
		{"group-mod-bucket-to-missing-group", gmh(0, 0, 2, bucketh(0, anyP, anyG, groupA(66))), bAct, ofp.ErrCodeBadActionOutGroup, false},

		// METER_MOD.
		{"meter-mod-short", raw(of.TypeMeterMod, "00 00 00 01"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"meter-mod-bad-command", mmh(3, kbps, 2, bandh(tDrop, 16, 1000, 0, "00 00 00 00")), mmF, ofp.ErrCodeMeterModFailedBadCommand, false},
		{"meter-mod-id-0", mmh(0, kbps, 0, bandh(tDrop, 16, 1000, 0, "00 00 00 00")), mmF, ofp.ErrCodeMeterModFailedInvalidMeter, false},
		{"meter-mod-id-controller", mmh(0, kbps, 0xfffffffd, bandh(tDrop, 16, 1000, 0, "00 00 00 00")), mmF, ofp.ErrCodeMeterModFailedInvalidMeter, false},
		{"meter-mod-kbps-and-pktps", mmh(0, kbps|pktps, 2, bandh(tDrop, 16, 1000, 0, "00 00 00 00")), mmF, ofp.ErrCodeMeterModFailedBadFlags, false},
		{"meter-mod-unknown-flag", mmh(0, kbps|0x10, 2, bandh(tDrop, 16, 1000, 0, "00 00 00 00")), mmF, ofp.ErrCodeMeterModFailedBadFlags, false},
		{"meter-mod-band-type-3", mmh(0, kbps, 2, bandh(3, 16, 1000, 0, "00 00 00 00")), mmF, ofp.ErrCodeMeterModFailedBadBand, false},
		{"meter-mod-band-rate-0", mmh(0, kbps, 2, bandh(tDrop, 16, 0, 0, "00 00 00 00")), mmF, ofp.ErrCodeMeterModFailedBadRate, false},
		{"meter-mod-dscp-prec-0", mmh(0, kbps, 2, bandh(tDSCP, 16, 1000, 0, "00 00 00 00")), mmF, ofp.ErrCodeMeterModFailedBadBandValue, false},
		{"meter-mod-band-truncated", mmh(0, kbps, 2, "00 01 00 08 00 00 03 e8"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"meter-mod-too-many-bands", mmh(0, kbps, 2, strings.Repeat(bandh(tDrop, 16, 1000, 0, "00 00 00 00")+" ", 5)), mmF, ofp.ErrCodeMeterModFailedOutOfBands, false},
		{"meter-mod-add-existing", mmh(0, kbps, 1, bandh(tDrop, 16, 1000, 0, "00 00 00 00")), mmF, ofp.ErrCodeMeterModFailedMeterExists, false},
		{"meter-mod-modify-unknown", mmh(1, kbps, 9, bandh(tDrop, 16, 1000, 0, "00 00 00 00")), mmF, ofp.ErrCodeMeterModFailedUnknownMeter, false},

		// PORT_MOD, TABLE_MOD, QUEUE_GET_CONFIG.
		{"port-mod-short", raw(of.TypePortMod, "00 00 00 01"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"port-mod-bad-port", raw(of.TypePortMod, "00 00 00 09 00 00 00 00 02 00 00 00 00 09 00 00 00 00 00 01 00 00 00 01 00 00 00 00 00 00 00 00"), pmF, ofp.ErrCodePortModFailedBadPort, false},
		{"port-mod-port-any", raw(of.TypePortMod, "ff ff ff ff 00 00 00 00 02 00 00 00 00 01 00 00 00 00 00 01 00 00 00 01 00 00 00 00 00 00 00 00"), pmF, ofp.ErrCodePortModFailedBadPort, false},
		{"port-mod-bad-hw-addr", raw(of.TypePortMod, "00 00 00 01 00 00 00 00 02 00 00 00 00 99 00 00 00 00 00 01 00 00 00 01 00 00 00 00 00 00 00 00"), pmF, ofp.ErrCodePortModFailedBadHwAddr, false},
		{"table-mod-short", raw(of.TypeTableMod, "00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"table-mod-bad-table", raw(of.TypeTableMod, "09 00 00 00 00 00 00 00"), tmF, ofp.ErrCodeTableModFailedBadTable, false},
		{"queue-get-config-short", raw(of.TypeQueueGetConfigRequest, "00 00 00 01"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"queue-get-config-port-0", raw(of.TypeQueueGetConfigRequest, "00 00 00 00 00 00 00 00"), qoF, ofp.ErrCodeQueueOpFailedBadPort, false},

		// Multipart requests.
		{"multipart-short", raw(of.TypeMultipartRequest, "00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-unknown-type", mph(20, 0, ""), bReq, ofp.ErrCodeBadRequestBadMultipart, false},
		{"multipart-desc-with-body", mph(0, 0, "00 00 00 00 00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-flow-short", mph(1, 0, "ff 00 00 00 ff ff ff ff"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-flow-bad-table", mph(1, 0, "09 00 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 04 00 00 00 00"), bReq, ofp.ErrCodeBadRequestBadTableID, false},
		{"multipart-flow-bad-match", mph(1, 0, "ff 00 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 0c "+oxmh(11, false, ipv4V)+" 00 00 00 00"), bMat, ofp.ErrCodeBadMatchBadPrereq, false},
		{"multipart-aggregate-trailing", mph(2, 0, "ff 00 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 04 00 00 00 00 00 00 00 00 00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-table-with-body", mph(3, 0, "00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-port-stats-short", mph(4, 0, "00 00 00 01"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-port-stats-port-0", mph(4, 0, "00 00 00 00 00 00 00 00"), bReq, ofp.ErrCodeBadRequestBadPort, false},
		{"multipart-port-stats-missing-port", mph(4, 0, "00 00 00 09 00 00 00 00"), bReq, ofp.ErrCodeBadRequestBadPort, false},
		{"multipart-queue-stats-short", mph(5, 0, "00 00 00 01"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-group-stats-short", mph(6, 0, "00 00 00 01"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-group-desc-with-body", mph(7, 0, "00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-meter-stats-short", mph(9, 0, "00 00 00 01"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-table-features-set", mph(12, 0, strings.Repeat("00 ", 64)), tfF, ofp.ErrCodeTableFeaturesFailedPerm, false},
		{"multipart-port-desc-with-body", mph(13, 0, "00 00 00 00"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"multipart-experimenter", mph(0xffff, 0, "00 00 23 20 00 00 00 01"), bReq, ofp.ErrCodeBadRequestBadExperimenter, false},

		// PACKET_OUT.
		{"packet-out-short", raw(of.TypePacketOut, "ff ff ff ff 00 00 00 01"), bReq, ofp.ErrCodeBadRequestLen, false},
		{"packet-out-actions-len-beyond", raw(of.TypePacketOut, u32h(noBuf)+" ff ff ff fd 00 40 00 00 00 00 00 00 "+outA(1)), bReq, ofp.ErrCodeBadRequestLen, false},
		{"packet-out-in-port-any", poh(noBuf, anyP, outA(1), frame), bReq, ofp.ErrCodeBadRequestBadPort, false},
		{"packet-out-in-port-0", poh(noBuf, 0, outA(1), frame), bReq, ofp.ErrCodeBadRequestBadPort, false},
		{"packet-out-in-port-reserved-gap", poh(noBuf, 0xffffff10, outA(1), frame), bReq, ofp.ErrCodeBadRequestBadPort, false},
		{"packet-out-unknown-buffer", poh(5, rule.PortController, outA(1), ""), bReq, ofp.ErrCodeBadRequestBufferUnknown, false},
		{"packet-out-bad-action-length", poh(noBuf, rule.PortController, "00 00 00 0c 00 00 00 01 00 00 00 00", frame), bAct, ofp.ErrCodeBadActionLen, false},
		{"packet-out-output-port-0", poh(noBuf, rule.PortController, outA(0), frame), bAct, ofp.ErrCodeBadActionOutPort, false},
		{"packet-out-group-missing", poh(noBuf, rule.PortController, groupA(42), frame), bAct, ofp.ErrCodeBadActionOutGroup, false},
		{"packet-out-set-field-in-port", poh(noBuf, rule.PortController, setFieldA(oxmh(0, false, "00 00 00 01"))+" "+outA(1), frame), bAct, ofp.ErrCodeBadActionSetType, false},
	}
	return cs
}

// malformedSetup installs what the corpus runs against: groups 1 and 5
// (5 forwards to 1), meter 1 and two flow entries.
func malformedSetup() [][]byte {
	return [][]byte{
		EncodeGroupMod(1, addGroup(1, rule.GroupTypeAll, bucket(out(1)))),
		EncodeGroupMod(2, addGroup(5, rule.GroupTypeAll, bucket(toGroup(1)))),
		EncodeMeterMod(3, &rule.MeterMod{Command: rule.MeterAdd, MeterConfig: rule.MeterConfig{ID: 1, Flags: rule.MeterKbps,
			Bands: []rule.MeterBand{{Type: rule.BandDrop, Rate: 10}}}}),
		flowModWith(nil, add0, "", "00 06 00 08 00 00 00 01 00 04 00 10 00 00 00 00 00 16 00 08 00 00 00 05"),
		flowModWith(nil, add0, ethIP+" "+oxmh(10, false, "06"), applyI(outA(2))),
	}
}

// goldenText is a case's golden file: the input, the exact OFPT_ERROR and
// whether the connection ends.
func goldenText(c *malformed, reply []byte) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: OFPT_ERROR type %d code %d (%s/%s)", c.name, c.typ, c.code, c.typ, ofp.Error{Type: c.typ, Code: c.code})
	if c.closes {
		b.WriteString("; the connection is closed after it")
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "in %s\n", hex.EncodeToString(c.msg))
	fmt.Fprintf(&b, "out %s\n", hex.EncodeToString(reply))
	return b.String()
}

// TestMalformedCorpus sends every case of the corpus to a session over
// TCP and checks the reply against the case's type and code and its
// golden file in testdata/malformed (go test -run TestMalformedCorpus
// -update rewrites them): the exact OFPT_ERROR, with the request's xid
// and its first 64 bytes. After each case the connection (or a new one,
// where the stream cannot be framed any more) answers ECHO, and nothing
// in the switch changed (flows, groups, meters, ports).
func TestMalformedCorpus(t *testing.T) {
	cases := malformedCases()
	if len(cases) < 100 {
		t.Fatalf("%d cases, want at least 100", len(cases))
	}
	sw := newFullSwitch(2, 64)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := NewAgent(sw, Options{Logf: func(string, ...any) {}})
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); a.ServeListener(ctx, l) }()
	defer func() { cancel(); <-served }()
	dial := func() *ctl {
		conn, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c := &ctl{t: t, c: conn}
		c.recv()
		c.send(EncodeHello(1))
		return c
	}
	c := dial()
	defer func() { c.c.Close() }()
	for _, m := range malformedSetup() {
		c.send(m)
	}
	c.send(msg(of.TypeBarrierRequest, 9, ""))
	c.expect(of.TypeBarrierReply, 9)
	before := sw.state()
	dir := filepath.Join("testdata", "malformed")
	seen := map[string]bool{}
	for i := range cases {
		cs := &cases[i]
		if seen[cs.name] {
			t.Fatalf("case %s twice", cs.name)
		}
		seen[cs.name] = true
		xid := uint32(0x10000 + i)
		if len(cs.msg) >= HeaderLen {
			cs.msg[4], cs.msg[5], cs.msg[6], cs.msg[7] = byte(xid>>24), byte(xid>>16), byte(xid>>8), byte(xid)
		}
		c.send(cs.msg)
		c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		reply, err := ReadMessage(c.c)
		if err != nil {
			t.Fatalf("%s: no reply: %v", cs.name, err)
		}
		typ, code, data, ok := ParseError(reply)
		h, _ := ParseHeader(reply)
		switch {
		case !ok:
			t.Errorf("%s: reply %x is not an error", cs.name, reply)
		case typ != cs.typ || code != cs.code:
			t.Errorf("%s: got %s, want %s", cs.name, ofp.Error{Type: typ, Code: code}, ofp.Error{Type: cs.typ, Code: cs.code})
		case len(cs.msg) >= HeaderLen && h.Xid != xid:
			t.Errorf("%s: error xid %#x, want %#x", cs.name, h.Xid, xid)
		case !bytes.Equal(data, cs.msg[:min(len(cs.msg), ErrorDataLen)]):
			t.Errorf("%s: error data %x, want the request's first %d bytes", cs.name, data, ErrorDataLen)
		}
		path := filepath.Join(dir, fmt.Sprintf("%03d-%s.golden", i, cs.name))
		text := goldenText(cs, reply)
		if *update {
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		} else if want, err := os.ReadFile(path); err != nil {
			t.Errorf("%s: %v (run go test -run TestMalformedCorpus -update)", cs.name, err)
		} else if string(want) != text {
			t.Errorf("%s: differs from %s:\n got %s\nwant %s", cs.name, path, text, want)
		}
		if cs.closes {
			c.c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := io.Copy(io.Discard, c.c); err != nil || n != 0 {
				t.Errorf("%s: the connection was not closed after the error (%d bytes, %v)", cs.name, n, err)
			}
			c.c.Close()
			c = dial()
		}
		echo := msg(of.TypeEchoRequest, xid, "01 02 03 04")
		c.send(echo)
		if r := c.expect(of.TypeEchoReply, xid); !bytes.Equal(r[HeaderLen:], echo[HeaderLen:]) {
			t.Errorf("%s: echo reply %x", cs.name, r)
		}
		if after := sw.state(); after != before {
			t.Fatalf("%s changed the switch:\n%s\nwant\n%s", cs.name, after, before)
		}
	}
	if *update {
		return
	}
	// No stale goldens: every file is a case's.
	files, _ := filepath.Glob(filepath.Join(dir, "*.golden"))
	if len(files) != len(cases) {
		t.Errorf("%d golden files for %d cases (stale files? run with -update after removing them)", len(files), len(cases))
	}
}
