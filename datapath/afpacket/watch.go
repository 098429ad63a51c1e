package afpacket

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// watcher follows one interface's state through an RTNLGRP_LINK netlink
// subscription. Its goroutine owns 'last', 'index' and the subscription;
// 'info' is the state readers see. After the interface is deleted, a new
// interface of the same name is re-attached (reattach, set before the
// goroutine starts) and followed instead.
type watcher struct {
	name     string // the interface's name at Open: what a re-created one must be called
	index    int
	reattach func(LinkInfo) error // moves the port onto a new interface (reattach.go); nil: none
	// reattaches counts interfaces re-attached; reattachFails the attempts
	// that failed (the interface went away again, a socket error).
	reattaches, reattachFails atomic.Uint64

	info   atomic.Pointer[LinkInfo]
	events chan LinkInfo
	drops  atomic.Uint64 // events dropped on a full channel
	fails  atomic.Uint64 // subscription errors reported by netlink

	updates  chan netlink.LinkUpdate
	done     chan struct{} // closed by stop: ends the subscription
	finished chan struct{} // closed when the goroutine has returned
	stopOnce sync.Once
	last     LinkInfo
}

// watchLink subscribes to link changes, then resolves 'name' (in that order,
// so no change after the lookup is missed) and starts following it;
// reattach (nil: none) is called with a new interface of that name after
// the first is deleted.
func watchLink(name string, buf int, reattach func(LinkInfo) error) (*watcher, LinkInfo, error) {
	w := &watcher{
		reattach: reattach,
		events:   make(chan LinkInfo, buf),
		done:     make(chan struct{}),
		finished: make(chan struct{}),
	}
	if err := w.subscribe(); err != nil {
		return nil, LinkInfo{}, sysErr("netlink link subscription", err)
	}
	info, err := LookupLink(name)
	if err != nil {
		close(w.done)
		go func() { // let netlink's goroutine finish: it closes the channel
			for range w.updates {
			}
		}()
		return nil, LinkInfo{}, err
	}
	w.name, w.index, w.last = name, info.Index, info
	w.info.Store(&info)
	go w.run()
	return w, info, nil
}

func (w *watcher) subscribe() error {
	w.updates = make(chan netlink.LinkUpdate, 64)
	return netlink.LinkSubscribeWithOptions(w.updates, w.done, netlink.LinkSubscribeOptions{
		ErrorCallback: func(error) { w.fails.Add(1) },
	})
}

// run delivers changes until stop; when netlink ends the subscription on
// its own (a receive error, e.g. ENOBUFS), it subscribes again and
// re-reads the state, which it may have missed.
func (w *watcher) run() {
	defer close(w.finished)
	defer close(w.events)
	for {
		for u := range w.updates {
			switch {
			case int(u.Index) == w.index:
				info := linkInfo(u.Link)
				info.Deleted = u.Header.Type == unix.RTM_DELLINK
				w.publish(info)
			case w.last.Deleted && u.Header.Type == unix.RTM_NEWLINK && u.Link.Attrs().Name == w.name:
				w.tryReattach(linkInfo(u.Link))
			}
		}
		if !w.resubscribe() {
			return
		}
	}
}

// resubscribe retries until it succeeds (true) or stop is called (false).
func (w *watcher) resubscribe() bool {
	for {
		select {
		case <-w.done:
			return false
		default:
		}
		if err := w.subscribe(); err == nil {
			w.reread()
			return true
		}
		select {
		case <-w.done:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// reread publishes the interface's state after a gap in the
// notifications: deleted if its index is gone, and re-attached if an
// interface of its name exists by then.
func (w *watcher) reread() {
	l, err := netlink.LinkByIndex(w.index)
	if err == nil && l.Attrs().Name == w.name {
		w.publish(linkInfo(l))
		return
	}
	if err == nil { // renamed: followed as before
		w.publish(linkInfo(l))
		return
	}
	if !w.last.Deleted {
		gone := w.last
		gone.Deleted = true
		w.publish(gone)
	}
	if l, err := netlink.LinkByName(w.name); err == nil {
		w.tryReattach(linkInfo(l))
	}
}

// tryReattach moves the port onto the interface 'info' (a new one with
// the old one's name) and follows it from now on; the event it publishes
// is the first without Deleted. A failure is counted and the next
// notification of that name tries again.
func (w *watcher) tryReattach(info LinkInfo) {
	if w.reattach == nil || info.Index == w.index {
		return
	}
	if err := w.reattach(info); err != nil {
		w.reattachFails.Add(1)
		return
	}
	w.reattaches.Add(1)
	w.index = info.Index
	w.publish(info)
}

// publish records a state and sends it as an event if it differs from the
// last one (the kernel also notifies changes the agent does not track).
func (w *watcher) publish(info LinkInfo) {
	l := &w.last
	if info.Name == l.Name && info.Index == l.Index && info.MTU == l.MTU && info.MAC.String() == l.MAC.String() &&
		info.AdminUp == l.AdminUp && info.OperUp == l.OperUp && info.Deleted == l.Deleted {
		return
	}
	w.last = info
	w.info.Store(&info)
	select {
	case w.events <- info:
	default:
		w.drops.Add(1)
	}
}

// stop ends the subscription and waits for the goroutine.
func (w *watcher) stop() {
	w.stopOnce.Do(func() { close(w.done) })
	<-w.finished
}
