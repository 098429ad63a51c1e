package pipeline

import (
	"testing"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
)

// TestBatcherRefusesTruncated: a frame the ring kept only part of (a
// frame ring's slot, its whole copy not read) is not forwarded.
func TestBatcherRefusesTruncated(t *testing.T) {
	b := newBatcher(4)
	f := flowFrame(t, 1, 0)
	now := time.Now()
	if b.add(&afpacket.Frame{Data: f[:40], Len: len(f), Time: now}, now) {
		t.Fatal("a truncated frame was taken")
	}
	if !b.add(&afpacket.Frame{Data: f, Len: len(f), Time: now}, now) || len(b.frames) != 1 || len(b.frames[0]) != len(f) {
		t.Fatalf("a whole frame: %d frames", len(b.frames))
	}
}
