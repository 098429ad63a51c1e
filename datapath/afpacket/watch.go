package afpacket

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// watcher follows one interface's state through an RTNLGRP_LINK netlink
// subscription. Its goroutine owns 'last' and the subscription; 'info' is
// the state readers see.
type watcher struct {
	index  int
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
// so no change after the lookup is missed) and starts following it.
func watchLink(name string, buf int) (*watcher, LinkInfo, error) {
	w := &watcher{
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
	w.index, w.last = info.Index, info
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
			if int(u.Index) == w.index {
				info := linkInfo(u.Link)
				info.Deleted = u.Header.Type == unix.RTM_DELLINK
				w.publish(info)
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
			if l, err := netlink.LinkByIndex(w.index); err == nil {
				w.publish(linkInfo(l))
			}
			return true
		}
		select {
		case <-w.done:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// publish records a state and sends it as an event if it differs from the
// last one (the kernel also notifies changes the agent does not track).
func (w *watcher) publish(info LinkInfo) {
	l := &w.last
	if info.Name == l.Name && info.MTU == l.MTU && info.MAC.String() == l.MAC.String() &&
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
