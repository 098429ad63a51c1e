package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/tables/rule"
)

// TestWatchPortReattach: the link events of a port deleted and re-created
// under the switch reach the controller as PORT_STATUS DELETE, then ADD
// (the re-attachment, as Open vSwitch sends), then MODIFY for a later
// change.
func TestWatchPortReattach(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	ev := make(chan afpacket.LinkInfo, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.sw.WatchPort(ctx, 2, ev); close(done) }()
	ev <- afpacket.LinkInfo{Name: "p2", Index: 5, Deleted: true}
	ev <- afpacket.LinkInfo{Name: "p2", Index: 9}
	ev <- afpacket.LinkInfo{Name: "p2", Index: 9, AdminUp: true, OperUp: true}
	close(ev)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("WatchPort did not end when its channel closed")
	}
	cancel()
	r.ctrl.mu.Lock()
	defer r.ctrl.mu.Unlock()
	want := []uint8{rule.PortDeleted, rule.PortAdded, rule.PortModified}
	if len(r.ctrl.status) != len(want) {
		t.Fatalf("%d PORT_STATUS, want %d", len(r.ctrl.status), len(want))
	}
	for i, ps := range r.ctrl.status {
		if ps.Reason != want[i] || ps.Port.No != 2 || ps.Port.Name != "p2" {
			t.Errorf("PORT_STATUS %d: reason %d port %d %q, want reason %d port 2", i, ps.Reason, ps.Port.No, ps.Port.Name, want[i])
		}
	}
}
