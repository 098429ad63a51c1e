package openflow

import (
	"bytes"
	"testing"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

func mpReq(xid uint32, typ ofp.MultipartType, body string) []byte {
	e := newMsg(of.TypeMultipartRequest, xid)
	e.u16(uint16(typ))
	e.pad(6)
	e.raw(unhex(nil, body))
	return e.finish()
}

// TestOptionalInterfacesAbsent checks that a Switch without the optional
// interfaces answers as before.
func TestOptionalInterfacesAbsent(t *testing.T) {
	c := startSession(t, newTestAgent(newTableSwitch(2, 8)))
	for _, m := range [][]byte{
		EncodeGroupMod(1, addGroup(1, rule.GroupTypeAll)),
		EncodeMeterMod(2, &rule.MeterMod{MeterConfig: rule.MeterConfig{ID: 1, Flags: rule.MeterKbps}}),
		EncodePortMod(3, &rule.PortMod{PortNo: 1}),
		msg(of.TypeTableMod, 4, "00 00 00 00 00 00 00 00"),
		msg(of.TypeQueueGetConfigRequest, 5, "00 00 00 01 00 00 00 00"),
	} {
		c.send(m)
		c.expectError(m, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadType)
	}
	for _, typ := range []ofp.MultipartType{ofp.MultipartTypeGroup, ofp.MultipartTypeGroupDescription, ofp.MultipartTypeGroupFeatures,
		ofp.MultipartTypeMeter, ofp.MultipartTypeMeterConfig, ofp.MultipartTypeMeterFeatures, ofp.MultipartTypeQueue} {
		m := mpReq(10, typ, "ff ff ff ff 00 00 00 00")
		c.send(m)
		c.expectError(m, ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadMultipart)
	}
	// Group actions and meter instructions are not checked without them.
	c.send(flowModWith(t, add0, "", "00 06 00 08 00 00 00 09 00 04 00 10 00 00 00 00 00 16 00 08 00 00 00 05"))
	c.send(msg(of.TypeBarrierRequest, 20, ""))
	c.expect(of.TypeBarrierReply, 20)
}

// TestGroupsMetersSession drives the optional interfaces over a session.
func TestGroupsMetersSession(t *testing.T) {
	sw := newFullSwitch(2, 8)
	a := newTestAgent(sw)
	sw.agent = a
	c := startSession(t, a)
	expectErr := func(m []byte, typ ofp.ErrType, code ofp.ErrCode) {
		t.Helper()
		before := sw.state()
		c.send(m)
		c.expectError(m, typ, code)
		if sw.state() != before {
			t.Fatalf("a rejected message changed the switch")
		}
	}
	ok := func(m []byte) {
		t.Helper()
		c.send(m)
		c.send(msg(of.TypeBarrierRequest, 99, ""))
		c.expect(of.TypeBarrierReply, 99)
	}

	ok(EncodeGroupMod(1, addGroup(4, rule.GroupTypeAll, bucket(out(1)))))
	ok(unhex(t, groupModHex)) // select group 5: buckets to port 1 and to group 4
	expectErr(EncodeGroupMod(2, addGroup(4, rule.GroupTypeAll)), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedGroupExists)
	expectErr(EncodeGroupMod(3, &rule.GroupMod{Command: rule.GroupModify, Group: rule.Group{ID: 4, Type: rule.GroupTypeAll, Buckets: []rule.Bucket{bucket(toGroup(5))}}}), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedLoop)
	expectErr(EncodeGroupMod(4, &rule.GroupMod{Command: rule.GroupDelete, Group: rule.Group{ID: 4}}), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedChainedGroup)
	expectErr(groupModWith(0, 2, 6, bucketOut1+bucketOut1), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedInvalidGroup)
	ok(unhex(t, meterModHex)) // meter 3

	// FLOW_MOD and PACKET_OUT references.
	expectErr(flowModWith(t, add0, "", "00 04 00 10 00 00 00 00 00 16 00 08 00 00 00 09"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionOutGroup)
	expectErr(flowModWith(t, add0, "", "00 06 00 08 00 00 00 09"), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedUnknownMeter)
	expectErr(flowModWith(t, add0, "", "00 06 00 08 00 00 00 00"), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedInvalidMeter)
	expectErr(flowModWith(t, add0, "", "00 03 00 10 00 00 00 00 00 15 00 08 00 00 00 08"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionQueue)
	expectErr(unhex(t, "04 0d 00 20 00 00 00 05 ff ff ff ff ff ff ff fd 00 08 00 00 00 00 00 00 00 16 00 08 00 00 00 09"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionOutGroup)
	ok(flowModWith(t, add0, "", "00 06 00 08 00 00 00 03 00 04 00 18 00 00 00 00 00 15 00 08 00 00 00 07 00 16 00 08 00 00 00 05"))
	if sw.rules() != 1 {
		t.Fatalf("%d rules", sw.rules())
	}

	// Multipart replies.
	c.send(mpReq(30, ofp.MultipartTypeGroupDescription, ""))
	r := c.expect(of.TypeMultipartReply, 30)
	if want := encodeGroupDesc(&rule.Group{ID: 5, Type: rule.GroupTypeSelect, Buckets: mustGroupMod(t, groupModHex).Buckets}); !bytes.Contains(r, want) {
		t.Errorf("group desc %x lacks group 5 %x", r, want)
	}
	c.send(mpReq(31, ofp.MultipartTypeGroup, "00 00 00 05 00 00 00 00"))
	r = c.expect(of.TypeMultipartReply, 31)
	if len(r) != 16+40+32 || be32(r[20:]) != 5 || be32(r[24:]) != 1 { // one flow forwards to group 5
		t.Errorf("group 5 stats %x", r)
	}
	c.send(mpReq(32, ofp.MultipartTypeGroupFeatures, ""))
	if r = c.expect(of.TypeMultipartReply, 32); len(r) != 16+40 || be32(r[16:]) != 15 {
		t.Errorf("group features %x", r)
	}
	c.send(mpReq(33, ofp.MultipartTypeMeterConfig, "ff ff ff ff 00 00 00 00"))
	r = c.expect(of.TypeMultipartReply, 33)
	if want := unhex(t, meterModHex)[16:]; !bytes.Equal(r[24:], want) || be32(r[20:]) != 3 {
		t.Errorf("meter config %x, want bands %x as sent", r, want)
	}
	c.send(mpReq(34, ofp.MultipartTypeMeter, "00 00 00 03 00 00 00 00"))
	if r = c.expect(of.TypeMultipartReply, 34); len(r) != 16+40+32 || be32(r[16:]) != 3 || be32(r[28:]) != 1 {
		t.Errorf("meter stats %x", r)
	}
	c.send(mpReq(35, ofp.MultipartTypeMeterFeatures, ""))
	if r = c.expect(of.TypeMultipartReply, 35); len(r) != 16+16 || be32(r[16:]) != 8 {
		t.Errorf("meter features %x", r)
	}
	c.send(mpReq(36, ofp.MultipartTypeQueue, "ff ff ff ff ff ff ff ff"))
	if r = c.expect(of.TypeMultipartReply, 36); len(r) != 16+40 || be32(r[20:]) != 7 {
		t.Errorf("queue stats %x", r)
	}
	c.send(msg(of.TypeQueueGetConfigRequest, 37, "00 00 00 02 00 00 00 00"))
	if r = c.expect(of.TypeQueueGetConfigReply, 37); len(r) != 16 {
		t.Errorf("queue config of port 2 (no queues) %x", r)
	}
	for _, bad := range []struct {
		m    []byte
		typ  ofp.ErrType
		code ofp.ErrCode
	}{
		{mpReq(40, ofp.MultipartTypeGroup, "ff ff ff ff 00 00 00 00"), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedInvalidGroup},
		{mpReq(41, ofp.MultipartTypeMeter, "00 00 00 00 00 00 00 00"), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedInvalidMeter},
		{mpReq(42, ofp.MultipartTypeGroupFeatures, "00"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{mpReq(43, ofp.MultipartTypeMeterConfig, "00 00 00 01"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{msg(of.TypeQueueGetConfigRequest, 44, "00 00 00 09 00 00 00 00"), ofp.ErrTypeQueueOpFailed, ofp.ErrCodeQueueOpFailedBadPort},
		{EncodePortMod(45, &rule.PortMod{PortNo: 1, HWAddr: [6]byte{2, 0, 0, 0, 0, 9}, Mask: 1, Config: 1}), ofp.ErrTypePortModFailed, ofp.ErrCodePortModFailedBadHwAddr},
		{EncodePortMod(46, &rule.PortMod{PortNo: 9, Mask: 1, Config: 1}), ofp.ErrTypePortModFailed, ofp.ErrCodePortModFailedBadPort},
		{EncodePortMod(47, &rule.PortMod{PortNo: 1, HWAddr: [6]byte{2, 0, 0, 0, 0, 1}, Advertise: 1}), ofp.ErrTypePortModFailed, ofp.ErrCodePortModFailedBadAdvertise},
		{msg(of.TypeTableMod, 48, "05 00 00 00 00 00 00 00"), ofp.ErrTypeTableModFailed, ofp.ErrCodeTableModFailedBadTable},
	} {
		expectErr(bad.m, bad.typ, bad.code)
	}

	// PORT_MOD changes the port and sends PORT_STATUS; TABLE_MOD is accepted.
	c.send(EncodePortMod(50, &rule.PortMod{PortNo: 2, HWAddr: [6]byte{2, 0, 0, 0, 0, 2}, Config: rule.PortConfigDown, Mask: rule.PortConfigDown}))
	st := c.expect(of.TypePortStatus, 0)
	if st[8] != rule.PortModified || be32(st[16:]) != 2 || be32(st[16+32:])&rule.PortConfigDown == 0 {
		t.Errorf("port status %x", st)
	}
	ok(msg(of.TypeTableMod, 51, "ff 00 00 00 00 00 00 00"))
	if sw.tableMods != 1 {
		t.Errorf("%d table mods", sw.tableMods)
	}

	// Deleting the meter and the group removes the flow.
	ok(meterModWith(2, 0, rule.MeterAll, ""))
	if sw.rules() != 0 {
		t.Fatalf("%d rules after deleting every meter", sw.rules())
	}
	ok(groupModWith(2, 0, rule.GroupAll, ""))
	if len(sw.groups.Desc()) != 0 {
		t.Fatal("groups left after deleting all")
	}

	// A slave may not change groups or meters.
	role := msg(of.TypeRoleRequest, 60, "00 00 00 03 00 00 00 00 00 00 00 00 00 00 00 01")
	c.send(role)
	c.expect(of.TypeRoleReply, 60)
	expectErr(EncodeGroupMod(61, addGroup(1, rule.GroupTypeAll)), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestIsSlave)
	expectErr(meterModWith(0, 1, 1, dropBand), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestIsSlave)
}

func mustGroupMod(t *testing.T, h string) *rule.GroupMod {
	gm, err := DecodeGroupMod(unhex(t, h))
	if err != nil {
		t.Fatal(err)
	}
	return gm
}
