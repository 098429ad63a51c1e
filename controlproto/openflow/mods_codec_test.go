package openflow

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

// groupModHex is a GROUP_MOD built by hand from OpenFlow 1.3.5 §7.3.4.2:
// add select group 5, a bucket of weight 3 (output:1) and one of weight 1
// watching port 2 (group:4).
const groupModHex = `
04 0f 00 48 00 00 00 01
00 00 01 00 00 00 00 05
00 20 00 03 ff ff ff ff ff ff ff ff 00 00 00 00
  00 00 00 10 00 00 00 01 ff e5 00 00 00 00 00 00
00 18 00 01 00 00 00 02 ff ff ff ff 00 00 00 00
  00 16 00 08 00 00 00 04`

func TestDecodeGroupMod(t *testing.T) {
	msg := unhex(t, groupModHex)
	gm, err := DecodeGroupMod(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := &rule.GroupMod{Command: rule.GroupAdd, Group: rule.Group{ID: 5, Type: rule.GroupTypeSelect, Buckets: []rule.Bucket{
		{Weight: 3, WatchPort: rule.PortAny, WatchGroup: rule.GroupAny, Actions: []rule.Action{{Kind: rule.ActOutput, Port: 1, MaxLen: 0xffe5}}},
		{Weight: 1, WatchPort: 2, WatchGroup: rule.GroupAny, Actions: []rule.Action{{Kind: rule.ActGroup, ID: 4}}},
	}}}
	if !reflect.DeepEqual(gm, want) {
		t.Fatalf("got %+v\nwant %+v", gm, want)
	}
	if got := EncodeGroupMod(1, gm); !bytes.Equal(got, msg) {
		t.Fatalf("re-encoded\n%x\nwant\n%x", got, msg)
	}
	desc := encodeGroupDesc(&gm.Group)
	if !bytes.Equal(desc[8:], msg[16:]) || be16(desc) != uint16(len(desc)) || desc[2] != 1 || be32(desc[4:]) != 5 {
		t.Fatalf("group desc %x", desc)
	}
}

// meterModHex: add meter 3, kbps|burst|stats, a drop band (rate 1000,
// burst 100) and a DSCP-remark band (rate 500, burst 50, prec_level 2).
const meterModHex = `
04 1d 00 30 00 00 00 01
00 00 00 0d 00 00 00 03
00 01 00 10 00 00 03 e8 00 00 00 64 00 00 00 00
00 02 00 10 00 00 01 f4 00 00 00 32 02 00 00 00`

func TestDecodeMeterMod(t *testing.T) {
	msg := unhex(t, meterModHex)
	mm, err := DecodeMeterMod(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := &rule.MeterMod{Command: rule.MeterAdd, MeterConfig: rule.MeterConfig{ID: 3, Flags: rule.MeterKbps | rule.MeterBurst | rule.MeterStatsFlag, Bands: []rule.MeterBand{
		{Type: rule.BandDrop, Rate: 1000, BurstSize: 100},
		{Type: rule.BandDSCPRemark, Rate: 500, BurstSize: 50, PrecLevel: 2},
	}}}
	if !reflect.DeepEqual(mm, want) {
		t.Fatalf("got %+v\nwant %+v", mm, want)
	}
	if got := EncodeMeterMod(1, mm); !bytes.Equal(got, msg) {
		t.Fatalf("re-encoded\n%x\nwant\n%x", got, msg)
	}
	cfg := encodeMeterConfig(&mm.MeterConfig)
	if !bytes.Equal(cfg[:8], unhex(t, "00 28 00 0d 00 00 00 03")) || !bytes.Equal(cfg[8:], msg[16:]) {
		t.Fatalf("meter config %x", cfg)
	}
}

func TestDecodePortModAndTableMod(t *testing.T) {
	msg := unhex(t, `04 10 00 28 00 00 00 01 00 00 00 01 00 00 00 00 02 00 00 00 00 01 00 00
		00 00 00 01 00 00 00 01 00 00 00 00 00 00 00 00`)
	pm, err := DecodePortMod(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := &rule.PortMod{PortNo: 1, HWAddr: [6]byte{2, 0, 0, 0, 0, 1}, Config: rule.PortConfigDown, Mask: rule.PortConfigDown}
	if *pm != *want {
		t.Fatalf("got %+v", pm)
	}
	if got := EncodePortMod(1, pm); !bytes.Equal(got, msg) {
		t.Fatalf("re-encoded %x", got)
	}
	if c := pm.Apply(rule.PortConfigNoFwd); c != rule.PortConfigNoFwd|rule.PortConfigDown {
		t.Fatalf("Apply: %#x", c)
	}
	tm, err := DecodeTableMod(unhex(t, "04 11 00 10 00 00 00 01 01 00 00 00 00 00 00 03"), 2)
	if err != nil || *tm != (rule.TableMod{TableID: 1, Config: 3}) {
		t.Fatalf("table_mod: %+v %v", tm, err)
	}
}

func TestMultipartEncodings(t *testing.T) {
	gs := encodeGroupStats(&rule.GroupStats{ID: 5, RefCount: 2, Packets: 3, Bytes: 4, DurationSec: 6, DurationNsec: 7, Buckets: []rule.Counter{{Packets: 8, Bytes: 9}}})
	if want := unhex(t, `00 38 00 00 00 00 00 05 00 00 00 02 00 00 00 00
		00 00 00 00 00 00 00 03 00 00 00 00 00 00 00 04 00 00 00 06 00 00 00 07
		00 00 00 00 00 00 00 08 00 00 00 00 00 00 00 09`); !bytes.Equal(gs, want) {
		t.Errorf("group stats\n%x\nwant\n%x", gs, want)
	}
	ms := encodeMeterStats(&rule.MeterStats{ID: 3, FlowCount: 1, PacketsIn: 2, BytesIn: 3, DurationSec: 4, DurationNsec: 5, Bands: []rule.Counter{{Packets: 6, Bytes: 7}}})
	if want := unhex(t, `00 00 00 03 00 38 00 00 00 00 00 00 00 00 00 01
		00 00 00 00 00 00 00 02 00 00 00 00 00 00 00 03 00 00 00 04 00 00 00 05
		00 00 00 00 00 00 00 06 00 00 00 00 00 00 00 07`); !bytes.Equal(ms, want) {
		t.Errorf("meter stats\n%x\nwant\n%x", ms, want)
	}
	mf := encodeMeterFeatures(&rule.MeterFeatures{MaxMeter: 8, BandTypes: 6, Capabilities: 15, MaxBands: 4})
	if want := unhex(t, "00 00 00 08 00 00 00 06 00 00 00 0f 04 00 00 00"); !bytes.Equal(mf, want) {
		t.Errorf("meter features %x", mf)
	}
	gf := encodeGroupFeatures(&rule.GroupFeatures{Types: 15, Capabilities: 7, MaxGroups: [4]uint32{1, 2, 3, 4}})
	if len(gf) != 40 || be32(gf) != 15 || be32(gf[8:]) != 1 || be32(gf[20:]) != 4 || be32(gf[36:]) != supportedActionBits() {
		t.Errorf("group features %x", gf)
	}
	qc := encodeQueueGetConfigReply(9, 1, []rule.Queue{{ID: 7, Port: 1, MinRate: 100, MaxRate: 0xffff}})
	if want := unhex(t, `04 17 00 30 00 00 00 09 00 00 00 01 00 00 00 00
		00 00 00 07 00 00 00 01 00 20 00 00 00 00 00 00
		00 01 00 10 00 00 00 00 00 64 00 00 00 00 00 00`); !bytes.Equal(qc, want) {
		t.Errorf("queue config\n%x\nwant\n%x", qc, want)
	}
	qs := encodeQueueStats(&rule.QueueStats{PortNo: 1, QueueID: 7, TxBytes: 2, TxPackets: 3, TxErrors: 4, DurationSec: 5, DurationNsec: 6})
	if len(qs) != 40 || be32(qs[4:]) != 7 || be64(qs[16:]) != 3 || be32(qs[36:]) != 6 {
		t.Errorf("queue stats %x", qs)
	}
}

// groupModWith builds a GROUP_MOD from its command, type, group id and
// the hex of its buckets.
func groupModWith(cmd uint16, typ uint8, id uint32, buckets string) []byte {
	e := newMsg(15, 42)
	e.u16(cmd)
	e.u8(typ)
	e.pad(1)
	e.u32(id)
	e.raw(unhex(nil, buckets))
	return e.finish()
}

const (
	bucketOut1   = "00 20 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 00 00 10 00 00 00 01 ff e5 00 00 00 00 00 00"
	bucketGroup5 = "00 18 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 16 00 08 00 00 00 05"
)

func meterModWith(cmd, flags uint16, id uint32, bands string) []byte {
	e := newMsg(29, 42)
	e.u16(cmd)
	e.u16(flags)
	e.u32(id)
	e.raw(unhex(nil, bands))
	return e.finish()
}

const dropBand = "00 01 00 10 00 00 03 e8 00 00 00 00 00 00 00 00"

// TestModErrors checks the error type and code of every malformed
// GROUP_MOD, METER_MOD, PORT_MOD, TABLE_MOD and QUEUE_GET_CONFIG_REQUEST
// the decoders handle.
func TestModErrors(t *testing.T) {
	gm := func(b []byte) *Error { _, err := DecodeGroupMod(b); return err }
	mm := func(b []byte) *Error { _, err := DecodeMeterMod(b); return err }
	pm := func(b []byte) *Error { _, err := DecodePortMod(b); return err }
	tm := func(b []byte) *Error { _, err := DecodeTableMod(b, 2); return err }
	qc := func(b []byte) *Error { _, err := decodeQueueGetConfig(b); return err }
	portMod := func(port uint32, config, mask, adv uint32) []byte {
		return EncodePortMod(42, &rule.PortMod{PortNo: port, Config: config, Mask: mask, Advertise: adv})
	}
	cases := []struct {
		name   string
		decode func([]byte) *Error
		msg    []byte
		typ    ofp.ErrType
		code   ofp.ErrCode
	}{
		{"group_mod short", gm, unhex(t, "04 0f 00 0c 00 00 00 01 00 00 00 00"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{"group bad command", gm, groupModWith(3, 0, 1, ""), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadCommand},
		{"group bad type", gm, groupModWith(0, 4, 1, ""), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadType},
		{"add reserved group", gm, groupModWith(0, 0, rule.GroupAll, ""), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedInvalidGroup},
		{"delete group ANY", gm, groupModWith(2, 0, rule.GroupAny, ""), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedInvalidGroup},
		{"bucket truncated", gm, groupModWith(0, 0, 1, "00 10 00 00 ff ff ff ff"), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadBucket},
		{"bucket length beyond", gm, groupModWith(0, 0, 1, "00 40 00 00 ff ff ff ff ff ff ff ff 00 00 00 00"), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadBucket},
		{"bucket length not 8n", gm, groupModWith(0, 0, 1, "00 14 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 00 00 00"), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadBucket},
		{"bucket bad action", gm, groupModWith(0, 0, 1, "00 18 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 63 00 08 00 00 00 00"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionType},
		{"bucket group ANY", gm, groupModWith(0, 0, 1, "00 18 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 16 00 08 ff ff ff ff"), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionOutGroup},
		{"indirect two buckets", gm, groupModWith(0, 2, 1, bucketOut1+bucketOut1), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedInvalidGroup},
		{"indirect no bucket", gm, groupModWith(0, 2, 1, ""), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedInvalidGroup},
		{"indirect weight", gm, groupModWith(0, 2, 1, "00 20 00 01"+bucketOut1[11:]), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedInvalidGroup},
		{"ff without watch", gm, groupModWith(0, 3, 1, bucketOut1), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadWatch},
		{"watch port 0", gm, groupModWith(0, 3, 1, "00 10 00 00 00 00 00 00 ff ff ff ff 00 00 00 00"), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadWatch},
		{"watch group reserved", gm, groupModWith(0, 3, 1, "00 10 00 00 ff ff ff ff ff ff ff fc 00 00 00 00"), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModBadWatch},
		{"forwards to itself", gm, groupModWith(0, 0, 5, bucketGroup5), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedLoop},
		{"watches itself", gm, groupModWith(0, 3, 5, "00 10 00 00 ff ff ff ff 00 00 00 05 00 00 00 00"), ofp.ErrTypeGroupModFailed, ofp.ErrCodeGroupModFailedLoop},

		{"meter_mod short", mm, unhex(t, "04 1d 00 0c 00 00 00 01 00 00 00 00"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{"meter bad command", mm, meterModWith(3, 1, 1, ""), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadCommand},
		{"meter 0", mm, meterModWith(0, 1, 0, dropBand), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedInvalidMeter},
		{"meter CONTROLLER", mm, meterModWith(0, 1, rule.MeterController, dropBand), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedInvalidMeter},
		{"add meter ALL", mm, meterModWith(0, 1, rule.MeterAll, dropBand), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedInvalidMeter},
		{"delete meter 0", mm, meterModWith(2, 0, 0, ""), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedInvalidMeter},
		{"kbps and pktps", mm, meterModWith(0, 3, 1, dropBand), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadFlags},
		{"unknown flag", mm, meterModWith(0, 0x11, 1, dropBand), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadFlags},
		{"band truncated", mm, meterModWith(0, 1, 1, "00 01 00"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{"band length beyond", mm, meterModWith(0, 1, 1, "00 01 00 20 00 00 03 e8 00 00 00 00 00 00 00 00"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{"band length 12", mm, meterModWith(0, 1, 1, "00 01 00 0c 00 00 03 e8 00 00 00 00"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{"band unknown type", mm, meterModWith(0, 1, 1, "00 03 00 10 00 00 03 e8 00 00 00 00 00 00 00 00"), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadBand},
		{"experimenter band", mm, meterModWith(0, 1, 1, "ff ff 00 10 00 00 03 e8 00 00 00 00 00 00 23 20"), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadBand},
		{"rate 0", mm, meterModWith(0, 1, 1, "00 01 00 10 00 00 00 00 00 00 00 00 00 00 00 00"), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadRate},
		{"prec_level 0", mm, meterModWith(0, 1, 1, "00 02 00 10 00 00 03 e8 00 00 00 00 00 00 00 00"), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedBadBandValue},

		{"port_mod short", pm, unhex(t, "04 10 00 10 00 00 00 01 00 00 00 01 00 00 00 00"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{"port_mod port 0", pm, portMod(0, 0, 1, 0), ofp.ErrTypePortModFailed, ofp.ErrCodePortModFailedBadPort},
		{"port_mod reserved port", pm, portMod(rule.PortController, 0, 1, 0), ofp.ErrTypePortModFailed, ofp.ErrCodePortModFailedBadPort},
		{"port_mod port ANY", pm, portMod(rule.PortAny, 0, 1, 0), ofp.ErrTypePortModFailed, ofp.ErrCodePortModFailedBadPort},
		{"port_mod bad config", pm, portMod(1, 2, 2, 0), ofp.ErrTypePortModFailed, ofp.ErrCodePortModFailedBadConfig},
		{"port_mod bad advertise", pm, portMod(1, 0, 0, 1<<20), ofp.ErrTypePortModFailed, ofp.ErrCodePortModFailedBadAdvertise},

		{"table_mod short", tm, unhex(t, "04 11 00 0c 00 00 00 01 00 00 00 00"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{"table_mod bad table", tm, unhex(t, "04 11 00 10 00 00 00 01 02 00 00 00 00 00 00 00"), ofp.ErrTypeTableModFailed, ofp.ErrCodeTableModFailedBadTable},
		{"table_mod bad config", tm, unhex(t, "04 11 00 10 00 00 00 01 00 00 00 00 00 00 00 04"), ofp.ErrTypeTableModFailed, ofp.ErrCodeTableModFailedBadConfig},

		{"queue_get_config short", qc, unhex(t, "04 16 00 0c 00 00 00 01 00 00 00 01"), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestLen},
		{"queue_get_config port 0", qc, unhex(t, "04 16 00 10 00 00 00 01 00 00 00 00 00 00 00 00"), ofp.ErrTypeQueueOpFailed, ofp.ErrCodeQueueOpFailedBadPort},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.decode(c.msg)
			if err == nil {
				t.Fatalf("decoded %x", c.msg)
			}
			if err.Type != c.typ || err.Code != c.code {
				t.Fatalf("got %v, want %s", err, ofp.Error{Type: c.typ, Code: c.code})
			}
			checkErrorReply(t, c.msg, EncodeError(c.msg, err))
		})
	}
}

func TestModAccepts(t *testing.T) {
	for name, msg := range map[string][]byte{
		"delete all groups ignores type and buckets": groupModWith(2, 9, rule.GroupAll, "00"),
		"all group without buckets":                  groupModWith(0, 0, 1, ""),
		"ff watching a group":                        groupModWith(0, 3, 1, "00 10 00 00 ff ff ff ff 00 00 00 02 00 00 00 00"),
		"select weight 0":                            groupModWith(0, 1, 1, bucketOut1),
	} {
		if _, err := DecodeGroupMod(msg); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, msg := range map[string][]byte{
		"delete all meters ignores flags and bands": meterModWith(2, 0xff, rule.MeterAll, "00"),
		"neither kbps nor pktps":                    meterModWith(0, 0, 1, dropBand),
		"meter without bands":                       meterModWith(0, 1, 1, ""),
		"meter OFPM_MAX":                            meterModWith(0, 1, rule.MeterMax, dropBand),
	} {
		if _, err := DecodeMeterMod(msg); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// PORT_MOD may name the LOCAL port (a standard port, §4.1).
func TestPortModLocal(t *testing.T) {
	pm, err := DecodePortMod(EncodePortMod(7, &rule.PortMod{PortNo: rule.PortLocal, Config: rule.PortConfigNoFwd, Mask: rule.PortConfigNoFwd}))
	if err != nil || pm.PortNo != rule.PortLocal {
		t.Fatalf("port_mod of LOCAL: %+v, %v", pm, err)
	}
}
