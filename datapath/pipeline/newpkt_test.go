package pipeline

import (
	"reflect"
	"slices"
	"testing"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// TestNewPktResets fills every field of a batch's packets, as an earlier
// batch leaves them, and checks that newPkt hands them out empty but for
// the key (which Parse writes whole) and the action set's storage: a
// field added to pkt and not reset in newPkt fails here.
func TestNewPktResets(t *testing.T) {
	w := &worker{}
	w.pkts = make([]pkt, 3)
	for i := range w.pkts {
		v := reflect.ValueOf(&w.pkts[i]).Elem()
		for j := range v.NumField() {
			f := v.Field(j)
			f = reflect.NewAt(f.Type(), f.Addr().UnsafePointer()).Elem() // the unexported fields too
			switch f.Kind() {
			case reflect.Bool:
				f.SetBool(true)
			case reflect.Int, reflect.Int64:
				f.SetInt(7)
			case reflect.Uint8, reflect.Uint32, reflect.Uint64:
				f.SetUint(7)
			case reflect.Slice:
				if f.Type() == reflect.TypeFor[[]rule.Action]() {
					f.Set(reflect.ValueOf([]rule.Action{{Kind: rule.ActGroup}}))
				} else {
					f.Set(reflect.ValueOf([]byte{1}))
				}
			case reflect.Array: // the key
				for k := range f.Len() {
					f.Index(k).SetUint(7)
				}
			default:
				t.Fatalf("pkt field %s of kind %v: teach this test to fill it", v.Type().Field(j).Name, f.Kind())
			}
		}
	}
	w.pkts = w.pkts[:0]
	for i := range 4 { // three reused, one appended
		p := w.newPkt()
		if len(p.actset) != 0 {
			t.Errorf("packet %d: action set %v", i, p.actset)
		}
		got := *p
		got.key, got.actset = [len(got.key)]uint32{}, nil
		if !reflect.ValueOf(got).IsZero() {
			t.Errorf("packet %d not reset: %+v", i, got)
		}
	}
}

// TestPackSoA checks the worker's packing straight from the packets
// against flow.PackSoA of their gathered keys, for projections with words
// outside the key, repeated words and none, over a subset of the packets.
func TestPackSoA(t *testing.T) {
	w := &worker{}
	for i := range 40 {
		p := w.newPkt()
		for k := range p.key {
			p.key[k] = uint32(i*1000 + k)
		}
	}
	for i := 0; i < 40; i += 3 {
		w.idx = append(w.idx, i)
	}
	for _, words := range [][]int{nil, {0}, {3, 1, 26}, {5, -1, 27, 5, 100}, {26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0}} {
		want := flow.PackSoA(slices.Clone(w.gatherKeys()), words, nil)
		dst := make([]uint32, 3) // garbage to overwrite, too short
		dst[0] = 99
		got := w.packSoA(words, dst[:0])
		if !slices.Equal(got, want) {
			t.Errorf("words %v: got %v, want %v", words, got, want)
		}
		big := slices.Repeat([]uint32{7}, len(want)+5) // storage reused, stale values overwritten
		if got := w.packSoA(words, big[:0]); !slices.Equal(got, want) {
			t.Errorf("words %v into used storage: got %v, want %v", words, got, want)
		}
	}
}
