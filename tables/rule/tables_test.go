package rule

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func out(p uint32) Action     { return Action{Kind: ActOutput, Port: p, MaxLen: 0xffe5} }
func toGroup(g uint32) Action { return Action{Kind: ActGroup, ID: g} }

func bucket(as ...Action) Bucket {
	return Bucket{WatchPort: PortAny, WatchGroup: GroupAny, Actions: as}
}

func addGroup(id uint32, typ GroupType, bs ...Bucket) *GroupMod {
	return &GroupMod{Command: GroupAdd, Group: Group{ID: id, Type: typ, Buckets: bs}}
}

func wantKind(t *testing.T, err error, kind Kind) {
	t.Helper()
	var re *Error
	if !errors.As(err, &re) || re.Kind != kind || !errors.Is(err, kind) {
		t.Fatalf("got %v, want %s", err, kind)
	}
}

func TestGroupTable(t *testing.T) {
	gt := NewGroupTable(GroupTableConfig{MaxGroups: [4]uint32{3, 1, 1, 1}, MaxBuckets: 2})
	mustMod := func(gm *GroupMod) []uint32 {
		t.Helper()
		ids, err := gt.Mod(gm)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	gerr := func(gm *GroupMod, kind Kind) {
		t.Helper()
		before := gt.Desc()
		_, err := gt.Mod(gm)
		wantKind(t, err, kind)
		if !reflect.DeepEqual(gt.Desc(), before) {
			t.Fatalf("a rejected group_mod changed the table")
		}
	}
	mustMod(addGroup(1, GroupTypeAll, bucket(out(1)), bucket(out(2))))
	mustMod(addGroup(2, GroupTypeAll, bucket(toGroup(1))))
	mustMod(addGroup(3, GroupTypeAll, bucket(toGroup(2))))
	gerr(addGroup(1, GroupTypeAll), GroupExists)
	gerr(addGroup(4, GroupTypeAll), OutOfGroups)
	gerr(addGroup(4, GroupTypeSelect, bucket(), bucket(), bucket()), OutOfBuckets)
	gerr(&GroupMod{Command: GroupModify, Group: Group{ID: 9}}, UnknownGroup)
	gerr(addGroup(GroupAll, GroupTypeAll), InvalidGroup)
	gerr(addGroup(4, 7), BadGroupType)
	gerr(&GroupMod{Command: 5}, BadGroupCommand)
	// 1 -> 3 -> 2 -> 1 is a loop, directly or through a watched group.
	gerr(&GroupMod{Command: GroupModify, Group: Group{ID: 1, Type: GroupTypeAll, Buckets: []Bucket{bucket(toGroup(3))}}}, GroupLoop)
	gerr(&GroupMod{Command: GroupModify, Group: Group{ID: 1, Type: GroupTypeAll, Buckets: []Bucket{{WatchPort: PortAny, WatchGroup: 3}}}}, GroupLoop)
	gerr(&GroupMod{Command: GroupModify, Group: Group{ID: 1, Type: GroupTypeAll, Buckets: []Bucket{bucket(toGroup(1))}}}, GroupLoop)
	gerr(addGroup(4, GroupTypeFastFailover, Bucket{WatchPort: PortAny, WatchGroup: 77}), BadWatch)
	gerr(&GroupMod{Command: GroupDelete, Group: Group{ID: 1}}, ChainedGroup)
	_, err := gt.Mod(addGroup(4, GroupTypeSelect, bucket(toGroup(99))))
	wantKind(t, err, DanglingGroup)

	// Reference counts: flows and groups.
	if !gt.AddFlowRef(1) || gt.AddFlowRef(42) {
		t.Fatal("AddFlowRef")
	}
	gt.Count(1, 1, 100)
	gt.Count(1, -1, 50)
	st := gt.Stats(1)
	if len(st) != 1 || st[0].RefCount != 2 || st[0].Packets != 2 || st[0].Bytes != 150 || !reflect.DeepEqual(st[0].Buckets, []Counter{{}, {Packets: 1, Bytes: 100}}) {
		t.Fatalf("stats %+v", st)
	}
	gt.ReleaseFlowRef(1)
	if st := gt.Stats(1); st[0].RefCount != 1 {
		t.Fatalf("ref count after release: %d", st[0].RefCount)
	}
	if len(gt.Stats(GroupAll)) != 3 || len(gt.Stats(77)) != 0 {
		t.Fatal("stats of all / of a missing group")
	}

	// Modify keeps the counters, changes the type within the limits.
	mustMod(&GroupMod{Command: GroupModify, Group: Group{ID: 3, Type: GroupTypeSelect, Buckets: []Bucket{bucket(out(1))}}})
	if g, _ := gt.Get(3); g.Type != GroupTypeSelect || gt.Stats(3)[0].RefCount != 0 {
		t.Fatalf("after modify: %+v", g)
	}
	if ids := mustMod(&GroupMod{Command: GroupDelete, Group: Group{ID: 3}}); !reflect.DeepEqual(ids, []uint32{3}) {
		t.Fatalf("deleted %v", ids)
	}
	if ids := mustMod(&GroupMod{Command: GroupDelete, Group: Group{ID: 3}}); ids != nil {
		t.Fatalf("deleting a missing group deleted %v", ids)
	}
	if ids := mustMod(&GroupMod{Command: GroupDelete, Group: Group{ID: GroupAll}}); !reflect.DeepEqual(ids, []uint32{1, 2}) || len(gt.Desc()) != 0 {
		t.Fatalf("delete all: %v, left %v", ids, gt.Desc())
	}
	f := gt.Features()
	if f.Types != 15 || f.MaxGroups != [4]uint32{3, 1, 1, 1} {
		t.Fatalf("features %+v", f)
	}
}

func TestMeterTable(t *testing.T) {
	mt := NewMeterTable(MeterTableConfig{MaxMeters: 2, MaxBands: 2, MaxBurst: 1000})
	drop := MeterBand{Type: BandDrop, Rate: 1000, BurstSize: 100}
	add := func(id uint32, flags MeterFlags, bands ...MeterBand) *MeterMod {
		return &MeterMod{Command: MeterAdd, MeterConfig: MeterConfig{ID: id, Flags: flags, Bands: bands}}
	}
	merr := func(mm *MeterMod, kind Kind) {
		t.Helper()
		before := mt.Config(MeterAll)
		_, err := mt.Mod(mm)
		wantKind(t, err, kind)
		if !reflect.DeepEqual(mt.Config(MeterAll), before) {
			t.Fatal("a rejected meter_mod changed the table")
		}
	}
	if _, err := mt.Mod(add(1, MeterKbps|MeterBurst|MeterStatsFlag, drop)); err != nil {
		t.Fatal(err)
	}
	merr(add(1, MeterKbps, drop), MeterExists)
	merr(&MeterMod{Command: MeterModify, MeterConfig: MeterConfig{ID: 5}}, UnknownMeter)
	merr(add(2, MeterKbps, drop, drop, drop), OutOfBands)
	merr(add(2, MeterKbps|MeterBurst, MeterBand{Type: BandDrop, Rate: 1, BurstSize: 5000}), BadBurst)
	merr(add(2, MeterKbps, MeterBand{Type: 3, Rate: 1}), BadBand)
	merr(add(2, MeterKbps, MeterBand{Type: BandDrop}), BadRate)
	merr(add(2, MeterKbps, MeterBand{Type: BandDSCPRemark, Rate: 1}), BadBandValue)
	merr(add(2, MeterKbps|MeterPktps, drop), BadMeterFlags)
	merr(add(0, MeterKbps, drop), InvalidMeter)
	merr(&MeterMod{Command: 9}, BadMeterCommand)
	if _, err := mt.Mod(add(2, MeterPktps, drop)); err != nil {
		t.Fatal(err)
	}
	merr(add(3, MeterPktps, drop), OutOfMeters)

	// Configurations come back as set, burst_size included.
	want := []MeterConfig{{ID: 1, Flags: MeterKbps | MeterBurst | MeterStatsFlag, Bands: []MeterBand{drop}}, {ID: 2, Flags: MeterPktps, Bands: []MeterBand{drop}}}
	if got := mt.Config(MeterAll); !reflect.DeepEqual(got, want) {
		t.Fatalf("config %+v", got)
	}
	if !mt.AddFlowRef(2) || mt.AddFlowRef(7) {
		t.Fatal("AddFlowRef")
	}
	if st := mt.Stats(2); len(st) != 1 || st[0].FlowCount != 1 || len(st[0].Bands) != 1 {
		t.Fatalf("stats %+v", st)
	}
	ids, err := mt.Mod(&MeterMod{Command: MeterDelete, MeterConfig: MeterConfig{ID: MeterAll}})
	if err != nil || !reflect.DeepEqual(ids, []uint32{1, 2}) || mt.Exists(1) {
		t.Fatalf("delete all: %v %v", ids, err)
	}
	f := mt.Features()
	if f.MaxMeter != 2 || f.BandTypes != 6 || f.MaxBands != 2 || f.Capabilities != 15 {
		t.Fatalf("features %+v", f)
	}
}

func TestGroupPick(t *testing.T) {
	gt := NewGroupTable(GroupTableConfig{})
	w := func(weight uint16, port uint32) Bucket {
		b := bucket(out(port))
		b.Weight = weight
		return b
	}
	watch := func(port, group uint32) Bucket {
		return Bucket{WatchPort: port, WatchGroup: group, Actions: []Action{out(port)}}
	}
	for _, gm := range []*GroupMod{
		addGroup(1, GroupTypeAll, bucket(out(1)), bucket(out(2))),
		addGroup(2, GroupTypeSelect, w(1, 1), w(0, 2), w(3, 3)),
		addGroup(3, GroupTypeIndirect, bucket(out(1))),
		addGroup(4, GroupTypeFastFailover, watch(1, GroupAny), watch(2, GroupAny)),
		addGroup(5, GroupTypeFastFailover, watch(PortAny, 4), watch(3, GroupAny)),
	} {
		if _, err := gt.Mod(gm); err != nil {
			t.Fatal(err)
		}
	}
	all := func(uint32) bool { return true }
	down := map[uint32]bool{}
	live := func(p uint32) bool { return !down[p] }
	if got := gt.Pick(1, 0, all); !reflect.DeepEqual(got, []int{0, 1}) {
		t.Errorf("all: %v", got)
	}
	if got := gt.Pick(3, 0, all); !reflect.DeepEqual(got, []int{0}) {
		t.Errorf("indirect: %v", got)
	}
	// Weights 1:0:3 over a uniform spread of hashes.
	n := [3]int{}
	for h := uint32(0); h < 1<<16; h++ {
		n[gt.Pick(2, h*65537, all)[0]]++
	}
	if n[1] != 0 || n[0] < 15000 || n[0] > 17500 || n[2] < 47500 || n[2] > 50000 {
		t.Errorf("select spread %v, want about 1:0:3", n)
	}
	if got := gt.Pick(4, 0, live); !reflect.DeepEqual(got, []int{0}) {
		t.Errorf("ff: %v", got)
	}
	down[1] = true
	if got := gt.Pick(4, 0, live); !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("ff with port 1 down: %v", got)
	}
	if got := gt.Pick(5, 0, live); !reflect.DeepEqual(got, []int{0}) {
		t.Errorf("ff watching live group 4: %v", got)
	}
	down[2] = true
	if got := gt.Pick(5, 0, live); !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("ff watching dead group 4: %v", got)
	}
	down[3] = true
	if got := gt.Pick(5, 0, live); got != nil {
		t.Errorf("ff with nothing live: %v", got)
	}
	if got := gt.Pick(9, 0, live); got != nil {
		t.Errorf("missing group: %v", got)
	}
}

// TestMeterAllow checks the token buckets against rates and bursts.
func TestMeterAllow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	newMeter := func(flags MeterFlags, bands ...MeterBand) *Meter {
		mt := NewMeterTable(MeterTableConfig{Now: func() time.Time { return t0 }})
		if _, err := mt.Mod(&MeterMod{Command: MeterAdd, MeterConfig: MeterConfig{ID: 1, Flags: flags, Bands: bands}}); err != nil {
			t.Fatal(err)
		}
		return mt.Get(1)
	}
	// 100 packets/s, burst 10: 10 pass at once, then one every 10 ms.
	m := newMeter(MeterPktps|MeterBurst, MeterBand{Type: BandDrop, Rate: 100, BurstSize: 10})
	passed := 0
	for range 20 {
		if drop, _ := m.Allow(t0, 64); !drop {
			passed++
		}
	}
	if passed != 10 {
		t.Fatalf("%d of a burst of 20 passed, want 10", passed)
	}
	passed = 0
	for i := range 1000 { // one packet per ms for 1 s: 100 pass
		if drop, _ := m.Allow(t0.Add(time.Duration(i+1)*time.Millisecond), 64); !drop {
			passed++
		}
	}
	if passed != 100 {
		t.Fatalf("%d of 1000 packets over 1 s passed at 100 packets/s", passed)
	}

	// 1000 kb/s, burst 100 kbit: 12 frames of 1000 bytes (8 kbit) pass at
	// once; over the next second 125 more.
	m = newMeter(MeterKbps|MeterBurst, MeterBand{Type: BandDrop, Rate: 1000, BurstSize: 100})
	passed = 0
	for i := range 1000 {
		if drop, _ := m.Allow(t0.Add(time.Duration(i)*time.Millisecond), 1000); !drop {
			passed++
		}
	}
	if passed < 12+124 || passed > 12+125 {
		t.Fatalf("%d frames of 8 kbit passed in 1 s at 1000 kb/s with 100 kbit burst", passed)
	}

	// Two bands: above 10 packets/s remark by 1, above 20 drop. At 30/s
	// the highest exceeded band applies.
	m = newMeter(MeterPktps|MeterBurst, MeterBand{Type: BandDSCPRemark, Rate: 10, BurstSize: 5, PrecLevel: 1}, MeterBand{Type: BandDrop, Rate: 20, BurstSize: 5})
	var pass, remark, dropped int
	for i := range 300 {
		drop, prec := m.Allow(t0.Add(time.Duration(i)*time.Second/30), 100)
		switch {
		case drop:
			dropped++
		case prec == 1:
			remark++
		default:
			pass++
		}
	}
	if pass < 95 || pass > 105 || dropped < 95 || dropped > 105 || remark < 95 || remark > 105 {
		t.Fatalf("at 30/s: %d passed, %d remarked, %d dropped; want about 100 each", pass, remark, dropped)
	}
	if got := m.bands[0].count.Packets + m.bands[1].count.Packets; got != uint64(remark+dropped) || m.packetsIn != 300 {
		t.Fatalf("band counters %d, packets in %d", got, m.packetsIn)
	}
	// A clock that goes back adds nothing and does not panic.
	m.Allow(t0.Add(-time.Hour), 100)
}

func TestRemarkDSCP(t *testing.T) {
	cases := []struct {
		in   uint8
		prec int
		want uint8
	}{
		{10, 1, 12}, // AF11 -> AF12
		{10, 2, 14}, // AF11 -> AF13
		{14, 1, 14}, // AF13 stays
		{34, 5, 38}, // AF41 -> AF43
		{46, 1, 46}, // EF has no drop precedence
		{0, 1, 0},   // best effort
	}
	for _, c := range cases {
		if got := RemarkDSCP(c.in, c.prec); got != c.want {
			t.Errorf("RemarkDSCP(%d, %d) = %d, want %d", c.in, c.prec, got, c.want)
		}
	}
}
