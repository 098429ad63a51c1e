package pubsub

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// spinRW is the table's reader/writer lock: sync.RWMutex's semantics
// (shared readers, one writer, a waiting writer holds back new readers so
// that a stream of matches does not starve it), but a waiter spins, then
// yields, and sleeps only once the wait grows long, instead of parking at
// once.
//
// Why: the table's writes are short (one subscription added or removed:
// a few µs) and come at up to tens of thousands per second while a
// matching goroutine takes the read lock per event. With sync.RWMutex
// every change parked the matcher (its next RLock found the writer
// waiting) and parked the writer (until the event's RUnlock), and each
// wake-up put the woken goroutine on the waker's processor: the matcher
// resumed only once the writer's goroutine ran on to its next sleep, so a
// matcher lost several times the change's own hold per change (bench
// pubsub --churn 10000: 23% of the CPU backend's throughput on the H200,
// 2026-11-26). Spinning, the writer takes the lock as soon as the event in
// progress ends and the matcher goes on as soon as the write ends, each
// on its own core.
//
// state counts the readers holding the lock, plus rwWriter while a writer
// holds or waits for it; w serializes writers (they park on it: writers
// are the rare side).
//
// With GSWITCH_PUBSUB_LOCK=rwmutex in the environment, New's tables use a
// sync.RWMutex instead (std), the lock before 2026-11-26: for comparison
// in the same run (bench pubsub --churn).
type spinRW struct {
	w     sync.Mutex
	state atomic.Int64
	std   *sync.RWMutex
}

// newLock returns the table lock the environment asks for.
func newLock() spinRW {
	if os.Getenv("GSWITCH_PUBSUB_LOCK") == "rwmutex" {
		return spinRW{std: new(sync.RWMutex)}
	}
	return spinRW{}
}

const rwWriter = 1 << 40

// RLock takes the lock shared.
func (l *spinRW) RLock() {
	if l.std != nil {
		l.std.RLock()
		return
	}
	b := backoff{busy: readBusy}
	for {
		if l.state.Add(1) < rwWriter {
			return
		}
		// A writer holds or waits: step back and wait for it.
		l.state.Add(-1)
		for l.state.Load() >= rwWriter {
			b.wait()
		}
	}
}

// RUnlock releases a shared hold.
func (l *spinRW) RUnlock() {
	if l.std != nil {
		l.std.RUnlock()
		return
	}
	if l.state.Add(-1) < 0 {
		panic("pubsub: RUnlock of an unlocked table lock")
	}
}

// Lock takes the lock exclusively: once no other writer holds it, new
// readers wait, and Lock returns when the readers in progress are done.
func (l *spinRW) Lock() {
	if l.std != nil {
		l.std.Lock()
		return
	}
	l.w.Lock()
	b := backoff{busy: writeBusy}
	for n := l.state.Add(rwWriter); n != rwWriter; n = l.state.Load() {
		b.wait()
	}
}

// Unlock releases the exclusive hold.
func (l *spinRW) Unlock() {
	if l.std != nil {
		l.std.Unlock()
		return
	}
	if l.state.Add(-rwWriter) < 0 {
		panic("pubsub: Unlock of an unlocked table lock")
	}
	l.w.Unlock()
}

// backoff paces a waiter: busy polls for up to busy (readers: readBusy,
// a writer's hold is µs; the writer: writeBusy), then yields of the
// thread's core to the OS's other threads (osYield, sched_yield) with a
// runtime.Gosched every yieldsPerGosched of them (other goroutines of this
// processor run then: with one processor the holder itself) for up to
// spinFor, then sleeps of sleepFor (a long hold: a deploy, a layout
// build).
//
// Why (2026-11-26): the busy phase was 64 polls (well under a µs) and the
// yields were all runtime.Gosched. A matcher that waited out a change's
// hold in Gosched went through the scheduler's global run queue for each
// change, where another processor's idle M (the writer's, going to sleep
// after its change) could take it: the matcher moved to another thread
// and core, away from its caches. And a waiter that spins on a machine
// with more runnable threads than cores (the 2-core VM) keeps the core
// from the thread it waits for; sched_yield gives it up.
type backoff struct {
	busy     time.Duration
	n        int
	t0       time.Time
	yielding bool // past the busy phase
}

const (
	readBusy         = 20 * time.Microsecond
	writeBusy        = 2 * time.Microsecond
	spinFor          = 200 * time.Microsecond
	sleepFor         = 20 * time.Microsecond
	busyCheck        = 32 // busy polls between two looks at the clock
	yieldsPerGosched = 8
)

func (b *backoff) wait() {
	b.n++
	if b.n == 1 {
		b.t0 = time.Now()
		return
	}
	if !b.yielding {
		if b.n%busyCheck != 0 || time.Since(b.t0) < b.busy {
			return
		}
		b.yielding = true
	}
	switch {
	case time.Since(b.t0) >= spinFor:
		time.Sleep(sleepFor)
	case b.n%yieldsPerGosched == 0:
		runtime.Gosched()
	default:
		osYield()
	}
}
