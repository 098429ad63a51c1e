package pipeline

import (
	"errors"
	"testing"

	"github.com/gswitch/gswitch/tables/rule"
)

func TestTransactAppliesUnderOneLock(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	add := func(port uint32) *rule.FlowMod {
		return &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(port), Instructions: applyOut(3),
			BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny}
	}
	stop := errors.New("stop")
	err := r.sw.Transact(func(apply func(*rule.FlowMod) error) error {
		if err := apply(add(1)); err != nil {
			return err
		}
		if err := apply(add(2)); err != nil {
			return err
		}
		bad := add(1)
		bad.TableID = 200 // no such table: refused, nothing changes
		if err := apply(bad); err == nil {
			t.Error("a FlowMod to table 200 was accepted")
		}
		return stop
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Transact returned %v, want f's error", err)
	}
	r.sw.Process(1, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	r.sw.Process(2, [][]byte{udpFrame(t, "10.0.0.1", "10.0.0.2")})
	if got := len(r.devs[2].take()); got != 2 {
		t.Fatalf("port 3 got %d frames, want 2 (both entries applied)", got)
	}
}
