//go:build !linux

package re

import "time"

// threadCPU: no per-thread CPU time here; the rates are wall-clock only.
func threadCPU() (time.Duration, bool) { return 0, false }
