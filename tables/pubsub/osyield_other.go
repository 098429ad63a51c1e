//go:build !linux

package pubsub

import "runtime"

// osYield is runtime.Gosched where sched_yield is not used.
func osYield() { runtime.Gosched() }
