package p4rt

import (
	"testing"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"
)

// TestWriteValidation sends one bad update per case and checks the
// batch's UNKNOWN status carries the spec's code for it, and that nothing
// changed.
func TestWriteValidation(t *testing.T) {
	r, _ := ready(t, 2)
	if err := r.write(0, ins(l2Entry(macB, 2))); err != nil {
		t.Fatal(err)
	}
	aclOK := func() *p4v1.TableEntry {
		return &p4v1.TableEntry{TableId: TableACL, Priority: 5, Action: act(ActionDrop),
			Match: []*p4v1.FieldMatch{ternary(aclIPProto, []byte{17}, []byte{0xff})}}
	}
	with := func(f func(te *p4v1.TableEntry)) *p4v1.TableEntry {
		te := aclOK()
		f(te)
		return te
	}
	cases := []struct {
		name string
		u    *p4v1.Update
		want codes.Code
	}{
		{"duplicate insert", ins(l2Entry(macB, 1)), codes.AlreadyExists},
		{"modify missing", upd(p4v1.Update_MODIFY, l2Entry(macA, 1)), codes.NotFound},
		{"delete missing", upd(p4v1.Update_DELETE, l2Entry(macA, 1)), codes.NotFound},
		{"unspecified type", upd(p4v1.Update_UNSPECIFIED, l2Entry(macA, 1)), codes.InvalidArgument},
		{"no entity", &p4v1.Update{Type: p4v1.Update_INSERT}, codes.InvalidArgument},
		{"counter entry", &p4v1.Update{Type: p4v1.Update_MODIFY, Entity: &p4v1.Entity{Entity: &p4v1.Entity_CounterEntry{CounterEntry: &p4v1.CounterEntry{}}}}, codes.Unimplemented},
		{"table 0", ins(&p4v1.TableEntry{Action: act(ActionDrop)}), codes.InvalidArgument},
		{"unknown table", ins(&p4v1.TableEntry{TableId: 0x02000099, Action: act(ActionDrop)}), codes.NotFound},
		{"unknown field", ins(&p4v1.TableEntry{TableId: TableL2, Match: []*p4v1.FieldMatch{exact(1, macA), exact(2, macA)}, Action: act(ActionDrop)}), codes.InvalidArgument},
		{"field twice", ins(&p4v1.TableEntry{TableId: TableL2, Match: []*p4v1.FieldMatch{exact(1, macA), exact(1, macA)}, Action: act(ActionDrop)}), codes.InvalidArgument},
		{"exact missing", ins(&p4v1.TableEntry{TableId: TableL2, Action: act(ActionDrop)}), codes.InvalidArgument},
		{"wrong match kind", ins(&p4v1.TableEntry{TableId: TableL2, Match: []*p4v1.FieldMatch{lpm(1, macA, 48)}, Action: act(ActionDrop)}), codes.InvalidArgument},
		{"value too wide", ins(&p4v1.TableEntry{TableId: TableL2, Match: []*p4v1.FieldMatch{exact(1, []byte{1, 2, 0, 0, 0, 0, 1})}, Action: act(ActionDrop)}), codes.OutOfRange},
		{"empty value", ins(&p4v1.TableEntry{TableId: TableL2, Match: []*p4v1.FieldMatch{exact(1, nil)}, Action: act(ActionDrop)}), codes.OutOfRange},
		{"lpm bits beyond prefix", ins(ipv4Entry([]byte{10, 1, 2, 3}, 24, act(ActionDrop))), codes.InvalidArgument},
		{"lpm prefix 0", ins(ipv4Entry([]byte{0}, 0, act(ActionDrop))), codes.InvalidArgument},
		{"lpm prefix 33", ins(ipv4Entry([]byte{10, 0, 0, 0}, 33, act(ActionDrop))), codes.InvalidArgument},
		{"priority on exact table", ins(func() *p4v1.TableEntry { te := l2Entry(macA, 1); te.Priority = 3; return te }()), codes.InvalidArgument},
		{"no priority on ternary table", ins(with(func(te *p4v1.TableEntry) { te.Priority = 0 })), codes.InvalidArgument},
		{"negative priority", ins(with(func(te *p4v1.TableEntry) { te.Priority = -1 })), codes.InvalidArgument},
		{"priority too high", ins(with(func(te *p4v1.TableEntry) { te.Priority = 70000 })), codes.OutOfRange},
		{"ternary value outside mask", ins(with(func(te *p4v1.TableEntry) { te.Match[0] = ternary(aclIPProto, []byte{17}, []byte{0xf0}) })), codes.InvalidArgument},
		{"ternary mask 0", ins(with(func(te *p4v1.TableEntry) { te.Match[0] = ternary(aclIPProto, []byte{0}, []byte{0}) })), codes.InvalidArgument},
		{"range low > high", ins(with(func(te *p4v1.TableEntry) { te.Match = append(te.Match, rng(aclL4Dst, []byte{0, 9}, []byte{0, 8})) })), codes.InvalidArgument},
		{"range full", ins(with(func(te *p4v1.TableEntry) { te.Match = append(te.Match, rng(aclL4Dst, []byte{0}, []byte{0xff, 0xff})) })), codes.InvalidArgument},
		{"insert without action", ins(with(func(te *p4v1.TableEntry) { te.Action = nil })), codes.InvalidArgument},
		{"action not in table", ins(with(func(te *p4v1.TableEntry) { te.Action = act(ActionSetNextHop, []byte{1}, macA, macB) })), codes.InvalidArgument},
		{"unknown action", ins(with(func(te *p4v1.TableEntry) { te.Action = act(0x01000099) })), codes.InvalidArgument},
		{"missing param", ins(with(func(te *p4v1.TableEntry) { te.Action = act(ActionForward) })), codes.InvalidArgument},
		{"extra param", ins(with(func(te *p4v1.TableEntry) { te.Action = act(ActionDrop, []byte{1}) })), codes.InvalidArgument},
		{"param too wide", ins(with(func(te *p4v1.TableEntry) { te.Action = act(ActionSetMACs, []byte{1, 0, 0, 0, 0, 0, 0}, macB) })), codes.OutOfRange},
		{"port 0", ins(with(func(te *p4v1.TableEntry) { te.Action = act(ActionForward, []byte{0}) })), codes.InvalidArgument},
		{"action profile member", ins(with(func(te *p4v1.TableEntry) {
			te.Action = &p4v1.TableAction{Type: &p4v1.TableAction_ActionProfileMemberId{ActionProfileMemberId: 1}}
		})), codes.InvalidArgument},
		{"is_const", ins(with(func(te *p4v1.TableEntry) { te.IsConst = true })), codes.InvalidArgument},
		{"idle timeout", ins(with(func(te *p4v1.TableEntry) { te.IdleTimeoutNs = 1e9 })), codes.InvalidArgument},
		{"counter write", ins(with(func(te *p4v1.TableEntry) { te.CounterData = &p4v1.CounterData{PacketCount: 1} })), codes.Unimplemented},
		{"default entry with match", upd(p4v1.Update_MODIFY, &p4v1.TableEntry{TableId: TableL2, IsDefaultAction: true, Match: []*p4v1.FieldMatch{exact(1, macA)}}), codes.InvalidArgument},
		{"delete default entry", upd(p4v1.Update_DELETE, &p4v1.TableEntry{TableId: TableL2, IsDefaultAction: true}), codes.InvalidArgument},
		{"forward as default only", upd(p4v1.Update_MODIFY, &p4v1.TableEntry{TableId: TableL2, IsDefaultAction: true, Action: act(ActionSetNextHop, []byte{1}, macA, macB)}), codes.InvalidArgument},
	}
	for _, c := range cases {
		err := r.write(0, c.u)
		if code(err) != codes.Unknown {
			t.Errorf("%s: status %v, want UNKNOWN with details", c.name, err)
			continue
		}
		if got := details(t, err); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: details %v, want [%s] (%v)", c.name, got, c.want, err)
		}
	}
	if n := len(r.read(t, tableEntity(0))); n != 1 {
		t.Fatalf("after the bad updates %d entries, want the 1 good one", n)
	}
	// A DELETE looks at the key only: an invalid action is ignored.
	del := l2Entry(macB, 0)
	if err := r.write(0, upd(p4v1.Update_DELETE, del)); err != nil {
		t.Fatalf("delete with a nonsensical action: %v", err)
	}
}

// TestBatchDetails checks CONTINUE_ON_ERROR: every update is attempted and
// the status carries one p4.v1.Error per update, OK for the good ones.
func TestBatchDetails(t *testing.T) {
	r, _ := ready(t, 2)
	err := r.write(p4v1.WriteRequest_CONTINUE_ON_ERROR,
		ins(l2Entry(macA, 1)), ins(l2Entry(macA, 2)), ins(l2Entry(macB, 2)), upd(p4v1.Update_DELETE, l2Entry([]byte{9}, 1)))
	want := []codes.Code{codes.OK, codes.AlreadyExists, codes.OK, codes.NotFound}
	got := details(t, err)
	if code(err) != codes.Unknown || len(got) != len(want) {
		t.Fatalf("status %v details %v, want UNKNOWN with %v", err, got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("update %d: %s, want %s", i, got[i], want[i])
		}
	}
	if n := len(r.read(t, tableEntity(TableL2))); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
}

// TestAtomicModes checks ROLLBACK_ON_ERROR and DATAPLANE_ATOMIC are
// all-or-nothing, for a validation failure and for a switch that runs out
// of room half way.
func TestAtomicModes(t *testing.T) {
	for _, mode := range []p4v1.WriteRequest_Atomicity{p4v1.WriteRequest_ROLLBACK_ON_ERROR, p4v1.WriteRequest_DATAPLANE_ATOMIC} {
		t.Run(mode.String(), func(t *testing.T) {
			r := newRig(t, 2, 8) // 8 flow entries per pipeline table: the default entry and 7
			r.primary(t, 1)
			r.setPipeline(t, 1)
			if err := r.write(0, ins(l2Entry([]byte{0xee}, 1))); err != nil {
				t.Fatal(err)
			}
			// An invalid third update: nothing applies.
			err := r.write(mode, ins(l2Entry([]byte{1}, 1)), upd(p4v1.Update_DELETE, l2Entry([]byte{0xee}, 1)), ins(l2Entry([]byte{2}, 0)))
			got := details(t, err)
			if want := []codes.Code{codes.Aborted, codes.Aborted, codes.InvalidArgument}; code(err) != codes.Unknown || len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
				t.Fatalf("invalid batch: %v %v, want UNKNOWN %v", err, got, want)
			}
			if es := r.read(t, tableEntity(0)); len(es) != 1 {
				t.Fatalf("after the refused batch %d entries, want 1", len(es))
			}
			// Ten inserts and a delete: the pipeline table holds 7 entries
			// besides the default one, so the batch fails when it is full
			// and is rolled back (the delete of the first entry included).
			var ups []*p4v1.Update
			ups = append(ups, upd(p4v1.Update_DELETE, l2Entry([]byte{0xee}, 1)))
			for i := range 10 {
				ups = append(ups, ins(l2Entry([]byte{0x10, byte(i)}, 2)))
			}
			err = r.write(mode, ups...)
			got = details(t, err)
			full := 0
			for _, c := range got {
				if c == codes.ResourceExhausted {
					full++
				} else if c != codes.Aborted {
					t.Errorf("a rolled-back update has code %s, want ABORTED", c)
				}
			}
			if code(err) != codes.Unknown || len(got) != 11 || full != 1 {
				t.Fatalf("overflowing batch: %v %v: want UNKNOWN, one RESOURCE_EXHAUSTED, the rest ABORTED", err, got)
			}
			es := r.read(t, tableEntity(0))
			if len(es) != 1 || es[0].GetTableEntry().GetMatch()[0].GetExact().GetValue()[0] != 0xee {
				t.Fatalf("after the rollback: %v, want the one first entry", es)
			}
			// The switch agrees: the entry forwards, nothing else does.
			f := udpFrame(t, "10.0.0.1", "10.0.0.2", 1, 2)
			copy(f[0:6], []byte{0, 0, 0, 0, 0, 0xee})
			r.sw.Process(2, [][]byte{f})
			if len(r.devs[0].take()) != 1 {
				t.Fatal("the restored entry does not forward")
			}
			if err := r.write(mode, ins(l2Entry([]byte{3}, 2)), ins(l2Entry([]byte{4}, 2))); err != nil {
				t.Fatalf("a good batch: %v", err)
			}
		})
	}
	r, _ := ready(t, 1)
	if err := r.write(p4v1.WriteRequest_Atomicity(7), ins(l2Entry(macA, 1))); code(err) != codes.InvalidArgument {
		t.Fatalf("atomicity 7: %v, want INVALID_ARGUMENT", err)
	}
}

// TestSharedRangeRules checks two ACL entries of one priority whose ranges
// expand to a common prefix: deleting one keeps the other's matches.
func TestSharedRangeRules(t *testing.T) {
	r, _ := ready(t, 3)
	acl := func(lo, hi uint16, port byte) *p4v1.TableEntry {
		return &p4v1.TableEntry{TableId: TableACL, Priority: 7, Action: act(ActionForward, []byte{port}),
			Match: []*p4v1.FieldMatch{ternary(aclIPProto, []byte{17}, []byte{0xff}), rng(aclL4Dst, []byte{byte(lo >> 8), byte(lo)}, []byte{byte(hi >> 8), byte(hi)})}}
	}
	if err := r.write(0, ins(acl(0, 1, 2)), ins(acl(0, 2, 3))); err != nil { // both expand to 0/15
		t.Fatal(err)
	}
	if err := r.write(0, upd(p4v1.Update_DELETE, acl(0, 1, 0))); err != nil {
		t.Fatal(err)
	}
	for _, port := range []uint16{0, 1, 2} {
		r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2", 9, port)})
	}
	if n := len(r.devs[2].take()); n != 3 {
		t.Fatalf("after deleting the [0,1] entry, the [0,2] entry forwarded %d of 3 frames", n)
	}
}
