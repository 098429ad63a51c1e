package openflow

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

func out(p uint32) rule.Action     { return rule.Action{Kind: rule.ActOutput, Port: p, MaxLen: 0xffe5} }
func toGroup(g uint32) rule.Action { return rule.Action{Kind: rule.ActGroup, ID: g} }

func bucket(as ...rule.Action) rule.Bucket {
	return rule.Bucket{WatchPort: rule.PortAny, WatchGroup: rule.GroupAny, Actions: as}
}

func addGroup(id uint32, typ rule.GroupType, bs ...rule.Bucket) *rule.GroupMod {
	return &rule.GroupMod{Command: rule.GroupAdd, Group: rule.Group{ID: id, Type: typ, Buckets: bs}}
}

func wantCode(t *testing.T, err error, typ ofp.ErrType, code ofp.ErrCode) {
	t.Helper()
	// The tables return the rule model's errors; the agent sends them as
	// ErrorFor maps them.
	if err == nil || !errors.Is(ErrorFor(err, &Error{Type: 0xffff}), &Error{Type: typ, Code: code}) {
		t.Fatalf("got %v, want %s", err, ofp.Error{Type: typ, Code: code})
	}
}

func TestGroupTable(t *testing.T) {
	gt := rule.NewGroupTable(rule.GroupTableConfig{MaxGroups: [4]uint32{3, 1, 1, 1}, MaxBuckets: 2})
	mustMod := func(gm *rule.GroupMod) []uint32 {
		t.Helper()
		ids, err := gt.Mod(gm)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	gerr := func(gm *rule.GroupMod, code ofp.ErrCode) {
		t.Helper()
		before := gt.Desc()
		_, err := gt.Mod(gm)
		wantCode(t, err, ofp.ErrTypeGroupModFailed, code)
		if !reflect.DeepEqual(gt.Desc(), before) {
			t.Fatalf("a rejected group_mod changed the table")
		}
	}
	mustMod(addGroup(1, rule.GroupTypeAll, bucket(out(1)), bucket(out(2))))
	mustMod(addGroup(2, rule.GroupTypeAll, bucket(toGroup(1))))
	mustMod(addGroup(3, rule.GroupTypeAll, bucket(toGroup(2))))
	gerr(addGroup(1, rule.GroupTypeAll), ofp.ErrCodeGroupModFailedGroupExists)
	gerr(addGroup(4, rule.GroupTypeAll), ofp.ErrCodeGroupModFailedOutOfGroups)
	gerr(addGroup(4, rule.GroupTypeSelect, bucket(), bucket(), bucket()), ofp.ErrCodeGroupModFailedOutOfBuckets)
	gerr(&rule.GroupMod{Command: rule.GroupModify, Group: rule.Group{ID: 9}}, ofp.ErrCodeGroupModFailedUnknownGroup)
	gerr(addGroup(rule.GroupAll, rule.GroupTypeAll), ofp.ErrCodeGroupModFailedInvalidGroup)
	gerr(addGroup(4, 7), ofp.ErrCodeGroupModBadType)
	gerr(&rule.GroupMod{Command: 5}, ofp.ErrCodeGroupModBadCommand)
	// 1 -> 3 -> 2 -> 1 is a loop, directly or through a watched group.
	gerr(&rule.GroupMod{Command: rule.GroupModify, Group: rule.Group{ID: 1, Type: rule.GroupTypeAll, Buckets: []rule.Bucket{bucket(toGroup(3))}}}, ofp.ErrCodeGroupModFailedLoop)
	gerr(&rule.GroupMod{Command: rule.GroupModify, Group: rule.Group{ID: 1, Type: rule.GroupTypeAll, Buckets: []rule.Bucket{{WatchPort: rule.PortAny, WatchGroup: 3}}}}, ofp.ErrCodeGroupModFailedLoop)
	gerr(&rule.GroupMod{Command: rule.GroupModify, Group: rule.Group{ID: 1, Type: rule.GroupTypeAll, Buckets: []rule.Bucket{bucket(toGroup(1))}}}, ofp.ErrCodeGroupModFailedLoop)
	gerr(addGroup(4, rule.GroupTypeFastFailover, rule.Bucket{WatchPort: rule.PortAny, WatchGroup: 77}), ofp.ErrCodeGroupModBadWatch)
	gerr(&rule.GroupMod{Command: rule.GroupDelete, Group: rule.Group{ID: 1}}, ofp.ErrCodeGroupModFailedChainedGroup)
	_, err := gt.Mod(addGroup(4, rule.GroupTypeSelect, bucket(toGroup(99))))
	wantCode(t, err, ofp.ErrTypeBadAction, ofp.ErrCodeBadActionOutGroup)

	// Reference counts: flows and groups.
	if !gt.AddFlowRef(1) || gt.AddFlowRef(42) {
		t.Fatal("AddFlowRef")
	}
	gt.Count(1, 1, 100)
	gt.Count(1, -1, 50)
	st := gt.Stats(1)
	if len(st) != 1 || st[0].RefCount != 2 || st[0].Packets != 2 || st[0].Bytes != 150 || !reflect.DeepEqual(st[0].Buckets, []rule.Counter{{}, {Packets: 1, Bytes: 100}}) {
		t.Fatalf("stats %+v", st)
	}
	gt.ReleaseFlowRef(1)
	if st := gt.Stats(1); st[0].RefCount != 1 {
		t.Fatalf("ref count after release: %d", st[0].RefCount)
	}
	if len(gt.Stats(rule.GroupAll)) != 3 || len(gt.Stats(77)) != 0 {
		t.Fatal("stats of all / of a missing group")
	}

	// Modify keeps the counters, changes the type within the limits.
	mustMod(&rule.GroupMod{Command: rule.GroupModify, Group: rule.Group{ID: 3, Type: rule.GroupTypeSelect, Buckets: []rule.Bucket{bucket(out(1))}}})
	if g, _ := gt.Get(3); g.Type != rule.GroupTypeSelect || gt.Stats(3)[0].RefCount != 0 {
		t.Fatalf("after modify: %+v", g)
	}
	if ids := mustMod(&rule.GroupMod{Command: rule.GroupDelete, Group: rule.Group{ID: 3}}); !reflect.DeepEqual(ids, []uint32{3}) {
		t.Fatalf("deleted %v", ids)
	}
	if ids := mustMod(&rule.GroupMod{Command: rule.GroupDelete, Group: rule.Group{ID: 3}}); ids != nil {
		t.Fatalf("deleting a missing group deleted %v", ids)
	}
	if ids := mustMod(&rule.GroupMod{Command: rule.GroupDelete, Group: rule.Group{ID: rule.GroupAll}}); !reflect.DeepEqual(ids, []uint32{1, 2}) || len(gt.Desc()) != 0 {
		t.Fatalf("delete all: %v, left %v", ids, gt.Desc())
	}
	f := gt.Features()
	if f.Types != 15 || f.MaxGroups != [4]uint32{3, 1, 1, 1} || be32(encodeGroupFeatures(&f)[24:])&(1<<rule.ActGroup) == 0 {
		t.Fatalf("features %+v", f)
	}
}

func TestMeterTable(t *testing.T) {
	mt := rule.NewMeterTable(rule.MeterTableConfig{MaxMeters: 2, MaxBands: 2, MaxBurst: 1000})
	drop := rule.MeterBand{Type: rule.BandDrop, Rate: 1000, BurstSize: 100}
	add := func(id uint32, flags rule.MeterFlags, bands ...rule.MeterBand) *rule.MeterMod {
		return &rule.MeterMod{Command: rule.MeterAdd, MeterConfig: rule.MeterConfig{ID: id, Flags: flags, Bands: bands}}
	}
	merr := func(mm *rule.MeterMod, code ofp.ErrCode) {
		t.Helper()
		before := mt.Config(rule.MeterAll)
		_, err := mt.Mod(mm)
		wantCode(t, err, ofp.ErrTypeMeterModFailed, code)
		if !reflect.DeepEqual(mt.Config(rule.MeterAll), before) {
			t.Fatal("a rejected meter_mod changed the table")
		}
	}
	if _, err := mt.Mod(add(1, rule.MeterKbps|rule.MeterBurst|rule.MeterStatsFlag, drop)); err != nil {
		t.Fatal(err)
	}
	merr(add(1, rule.MeterKbps, drop), ofp.ErrCodeMeterModFailedMeterExists)
	merr(&rule.MeterMod{Command: rule.MeterModify, MeterConfig: rule.MeterConfig{ID: 5}}, ofp.ErrCodeMeterModFailedUnknownMeter)
	merr(add(2, rule.MeterKbps, drop, drop, drop), ofp.ErrCodeMeterModFailedOutOfBands)
	merr(add(2, rule.MeterKbps|rule.MeterBurst, rule.MeterBand{Type: rule.BandDrop, Rate: 1, BurstSize: 5000}), ofp.ErrCodeMeterModFailedBadBurst)
	merr(add(2, rule.MeterKbps, rule.MeterBand{Type: 3, Rate: 1}), ofp.ErrCodeMeterModFailedBadBand)
	merr(add(2, rule.MeterKbps, rule.MeterBand{Type: rule.BandDrop}), ofp.ErrCodeMeterModFailedBadRate)
	merr(add(2, rule.MeterKbps, rule.MeterBand{Type: rule.BandDSCPRemark, Rate: 1}), ofp.ErrCodeMeterModFailedBadBandValue)
	merr(add(2, rule.MeterKbps|rule.MeterPktps, drop), ofp.ErrCodeMeterModFailedBadFlags)
	merr(add(0, rule.MeterKbps, drop), ofp.ErrCodeMeterModFailedInvalidMeter)
	merr(&rule.MeterMod{Command: 9}, ofp.ErrCodeMeterModFailedBadCommand)
	if _, err := mt.Mod(add(2, rule.MeterPktps, drop)); err != nil {
		t.Fatal(err)
	}
	merr(add(3, rule.MeterPktps, drop), ofp.ErrCodeMeterModFailedOutOfMeters)

	// Configurations come back as set, burst_size included.
	want := []rule.MeterConfig{{ID: 1, Flags: rule.MeterKbps | rule.MeterBurst | rule.MeterStatsFlag, Bands: []rule.MeterBand{drop}}, {ID: 2, Flags: rule.MeterPktps, Bands: []rule.MeterBand{drop}}}
	if got := mt.Config(rule.MeterAll); !reflect.DeepEqual(got, want) {
		t.Fatalf("config %+v", got)
	}
	if !mt.AddFlowRef(2) || mt.AddFlowRef(7) {
		t.Fatal("AddFlowRef")
	}
	if st := mt.Stats(2); len(st) != 1 || st[0].FlowCount != 1 || len(st[0].Bands) != 1 {
		t.Fatalf("stats %+v", st)
	}
	ids, err := mt.Mod(&rule.MeterMod{Command: rule.MeterDelete, MeterConfig: rule.MeterConfig{ID: rule.MeterAll}})
	if err != nil || !reflect.DeepEqual(ids, []uint32{1, 2}) || mt.Exists(1) {
		t.Fatalf("delete all: %v %v", ids, err)
	}
	f := mt.Features()
	if f.MaxMeter != 2 || f.BandTypes != 6 || f.MaxBands != 2 || f.Capabilities != 15 {
		t.Fatalf("features %+v", f)
	}
}

// TestRuleCodes pins the OFPT_ERROR type and code of every rule model
// error kind, in particular of those the datapath returns (the os-ken
// switch test tool checks them).
func TestRuleCodes(t *testing.T) {
	for _, k := range rule.Kinds() {
		if _, ok := ruleCodes[k]; !ok && k != rule.NoSuchPort {
			t.Errorf("kind %s has no OpenFlow code", k)
		}
	}
	cases := []struct {
		kind     rule.Kind
		fallback *Error
		typ      ofp.ErrType
		code     ofp.ErrCode
	}{
		{rule.BadGoto, flowModFailed(ofp.ErrCodeFlowModFailedUnknown, ""), ofp.ErrTypeBadInstruction, ofp.ErrCodeBadInstructionTableID},
		{rule.BadTable, flowModFailed(ofp.ErrCodeFlowModFailedUnknown, ""), ofp.ErrTypeFlowModFailed, ofp.ErrCodeFlowModFailedBadTableID},
		{rule.BadFlowCommand, flowModFailed(ofp.ErrCodeFlowModFailedUnknown, ""), ofp.ErrTypeFlowModFailed, ofp.ErrCodeFlowModFailedBadCommand},
		{rule.BadSetField, flowModFailed(ofp.ErrCodeFlowModFailedUnknown, ""), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionSetType},
		{rule.BadSetField, groupModFailed(ofp.ErrCodeGroupModPerm, ""), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionSetType},
		{rule.DanglingGroup, flowModFailed(ofp.ErrCodeFlowModFailedUnknown, ""), ofp.ErrTypeBadAction, ofp.ErrCodeBadActionOutGroup},
		{rule.UnknownMeter, flowModFailed(ofp.ErrCodeFlowModFailedUnknown, ""), ofp.ErrTypeMeterModFailed, ofp.ErrCodeMeterModFailedUnknownMeter},
		{rule.NoSuchPort, portModFailed(ofp.ErrCodePortModFailedPerm, ""), ofp.ErrTypePortModFailed, ofp.ErrCodePortModFailedBadPort},
		{rule.NoSuchPort, queueOpFailed(ofp.ErrCodeQueueOpFailedBadPort, ""), ofp.ErrTypeQueueOpFailed, ofp.ErrCodeQueueOpFailedBadPort},
		{rule.NoSuchPort, badRequest(ofp.ErrCodeBadRequestBadPort, ""), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadPort},
		{rule.NoSuchPort, badRequest(ofp.ErrCodeBadRequestPerm, ""), ofp.ErrTypeBadRequest, ofp.ErrCodeBadRequestBadPort},
	}
	for _, c := range cases {
		got := ErrorFor(fmt.Errorf("wrapped: %w", rule.Errorf(c.kind, "test")), c.fallback)
		if got.Type != c.typ || got.Code != c.code {
			t.Errorf("%s with fallback %v: got %v, want %s", c.kind, c.fallback, got, ofp.Error{Type: c.typ, Code: c.code})
		}
	}
}

// TestMaxBuckets checks that the model's bound on buckets is the one the
// wire gives: a group's stats entry must fit in one multipart reply.
func TestMaxBuckets(t *testing.T) {
	if MaxBuckets != rule.MaxBuckets || MaxBands != rule.MaxBands {
		t.Fatalf("openflow bounds %d buckets, %d bands; the model %d, %d", MaxBuckets, MaxBands, rule.MaxBuckets, rule.MaxBands)
	}
}
