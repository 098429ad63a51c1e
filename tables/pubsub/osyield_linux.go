//go:build linux

package pubsub

import "syscall"

// osYield offers the calling thread's core to another runnable thread of
// the machine (sched_yield), and returns at once when there is none. The
// goroutine stays on its thread and processor.
func osYield() { syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
