// Package kick keeps sub-millisecond deadlines on time in an idle Go
// process.
//
// When no goroutine can run, the Go runtime sleeps in epoll_wait, whose
// timeout is in milliseconds: a shorter delay to the next timer is rounded
// up to 1 ms (runtime/netpoll_epoll.go). A timer, a read deadline or a
// time.Sleep of 100 µs therefore fires after about a millisecond when the
// process has nothing else to do — exactly when a datapath waits out a
// batch delay under light traffic (measured on the 2-core VM with Go 1.26,
// 2026-11-26: time.Sleep(100µs) took 1.07 ms at the median, 120 µs with a
// Kicker armed at the same deadline).
//
// A Kicker is a timerfd (CLOCK_MONOTONIC, non-blocking) that os.NewFile
// has put in the runtime's epoll set. Armed at a deadline, its expiry ends
// the runtime's epoll_wait at that moment, and the runtime then runs the
// timers that are due (the deadline the caller set the ordinary way): the
// Kicker wakes no goroutine itself and is never waited on. Disarm drains
// its expiration count, so that each arming is one edge of the
// edge-triggered epoll. A Kicker belongs to one goroutine at a time; a
// Pool hands them out to callers that wait concurrently.
package kick

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Threshold is the shortest delay the runtime keeps without help: Arm
// does nothing for delays of a millisecond or more.
const Threshold = time.Millisecond

// Kicker is a timerfd in the Go runtime's epoll set.
type Kicker struct {
	f     *os.File
	fd    int
	armed bool
}

// New returns a disarmed Kicker.
func New() (*Kicker, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("timerfd_create", err)
	}
	return &Kicker{f: os.NewFile(uintptr(fd), "kick-timerfd"), fd: fd}, nil
}

// Arm makes the runtime wake up d from now, if d is under Threshold.
// A nil Kicker does nothing.
func (k *Kicker) Arm(d time.Duration) {
	if k == nil || d <= 0 || d >= Threshold {
		return
	}
	its := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if unix.TimerfdSettime(k.fd, 0, &its, nil) == nil {
		k.armed = true
	}
}

// Disarm stops an armed Kicker and drains its expirations.
func (k *Kicker) Disarm() {
	if k == nil || !k.armed {
		return
	}
	k.armed = false
	var off unix.ItimerSpec
	unix.TimerfdSettime(k.fd, 0, &off, nil)
	var b [8]byte
	unix.Read(k.fd, b[:])
}

// Expired disarms a Kicker whose deadline has passed (a caller that slept
// until it): the one-shot timer has fired and stopped itself, so draining
// its expiration count is one system call, not Disarm's two (the datapath
// pauses once per batch). Should it not have fired yet, it is stopped as
// Disarm stops it.
func (k *Kicker) Expired() {
	if k == nil || !k.armed {
		return
	}
	k.armed = false
	var b [8]byte
	if _, err := unix.Read(k.fd, b[:]); err == nil {
		return
	}
	var off unix.ItimerSpec
	unix.TimerfdSettime(k.fd, 0, &off, nil)
	unix.Read(k.fd, b[:]) // it may have fired in between
}

// Close releases the timerfd.
func (k *Kicker) Close() error {
	if k == nil {
		return nil
	}
	return k.f.Close()
}

// Pool hands out Kickers to concurrent waiters. The zero value is ready.
type Pool struct {
	mu   sync.Mutex
	free []*Kicker
	err  bool // a timerfd could not be made: the pool gives nil from then on
}

// Get returns a disarmed Kicker, or nil where none can be made (Arm and
// Disarm of nil do nothing: the deadline is then kept as the runtime
// keeps it).
func (p *Pool) Get() *Kicker {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n := len(p.free); n > 0 {
		k := p.free[n-1]
		p.free = p.free[:n-1]
		return k
	}
	if p.err {
		return nil
	}
	k, err := New()
	if err != nil {
		p.err = true
		return nil
	}
	return k
}

// Put gives back a Kicker from Get (disarming it).
func (p *Pool) Put(k *Kicker) {
	if k == nil {
		return
	}
	k.Disarm()
	p.mu.Lock()
	p.free = append(p.free, k)
	p.mu.Unlock()
}
