//go:build !linux

package pubsub

import "time"

var start = time.Now()

// threadCPU falls back to wall time where there is no thread CPU clock.
func threadCPU() time.Duration { return time.Since(start) }
