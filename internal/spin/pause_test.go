package spin

import (
	"testing"
	"time"
)

// TestPauseTakesTime: Pause returns for n ≤ 0, and a million pauses take
// measurable time (PAUSE is 10–150 cycles on today's x86 cores): the loop
// runs, it is not a no-op.
func TestPauseTakesTime(t *testing.T) {
	Pause(0)
	Pause(-3)
	t0 := time.Now()
	Pause(1_000_000)
	if d := time.Since(t0); d < 100*time.Microsecond {
		t.Fatalf("a million pauses took %v", d)
	}
}

// BenchmarkPause reports the time of one pause on this machine.
func BenchmarkPause(b *testing.B) {
	for b.Loop() {
		Pause(1)
	}
}
