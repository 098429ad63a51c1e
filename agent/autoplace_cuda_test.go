//go:build cuda

package agent

import "testing"

// TestAutoPlacementFollowsTableCUDA is TestAutoPlacementFollowsTable on a
// real GPU: gswitchd's own engine (--backend auto), the device's cost
// timed (a batch of --min-batch 1024 keys, plus the host's cost per key),
// a tuple-search table grown until its CPU lookups cost more, then shrunk.
func TestAutoPlacementFollowsTableCUDA(t *testing.T) {
	a, c := autoAgent(t, 0, 1024)
	if a.Engine().Devices() == 0 {
		t.Fatal("no usable GPU")
	}
	tb := growAndShrink(t, a, c)
	t.Logf("on the device: %+v", tb)
}
