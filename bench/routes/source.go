package routes

// The route sources: straight into the route.Table (directSource), or into
// a private namespace's kernel table that kernelfib mirrors into it
// (netlinkSource).

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/controlproto/kernelfib"
	"github.com/gswitch/gswitch/tables/route"
)

// routeSource is how the benchmark changes routes: straight into the
// route.Table, or into a kernel table that kernelfib mirrors.
type routeSource interface {
	add(r *route.Route) error
	del(p netip.Prefix) error
	// update applies a batch of changes in order: one route.Table.Update
	// (direct), one RTM_NEWROUTE or RTM_DELROUTE each (netlink: the kernel
	// has no batch, and the mirror batches what it drains from its socket).
	update(cs []route.Change) error
	close()
}

type directSource struct{ tb *route.Table }

func (s directSource) add(r *route.Route) error       { return s.tb.Add(*r) }
func (s directSource) del(p netip.Prefix) error       { return s.tb.Delete(p) }
func (s directSource) update(cs []route.Change) error { return s.tb.Update(cs) }
func (s directSource) close()                         {}

// netlinkSource is a private network namespace with veth ports whose
// table benchTable a kernelfib.Mirror copies into the route.Table.
type netlinkSource struct {
	ns      netns.NsHandle
	h       *netlink.Handle
	senders []*netlink.Handle // --netlink-senders: h and senders-1 more sockets
	ifindex map[uint32]int
	mirror  *kernelfib.Mirror
	cancel  context.CancelFunc
	done    chan error
}

func newNetlinkSource(tb *route.Table, rcvbuf, senders int) (*netlinkSource, error) {
	s := &netlinkSource{ifindex: map[uint32]int{}}
	var err error
	func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		orig, e := netns.Get()
		if e != nil {
			err = e
			return
		}
		defer orig.Close()
		s.ns, err = netns.New() // enters it
		if e := netns.Set(orig); e != nil {
			panic(fmt.Sprintf("cannot return to the original network namespace: %v", e))
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("bench routes: a private network namespace: %w", err)
	}
	if s.h, err = netlink.NewHandleAt(s.ns); err != nil {
		s.ns.Close()
		return nil, err
	}
	s.senders = []*netlink.Handle{s.h}
	for len(s.senders) < senders {
		h, err := netlink.NewHandleAt(s.ns)
		if err != nil {
			s.close()
			return nil, err
		}
		s.senders = append(s.senders, h)
	}
	ports := map[int]uint32{}
	for port := uint32(1); port <= benchPorts; port++ {
		name := fmt.Sprintf("d%d", port)
		if err := s.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: "p" + name}); err != nil {
			s.close()
			return nil, fmt.Errorf("bench routes: veth %s: %w", name, err)
		}
		for _, n := range []string{name, "p" + name} {
			l, err := s.h.LinkByName(n)
			if err == nil {
				err = s.h.LinkSetUp(l)
			}
			if err != nil {
				s.close()
				return nil, fmt.Errorf("bench routes: %s: %w", n, err)
			}
		}
		l, _ := s.h.LinkByName(name)
		for _, a := range []string{fmt.Sprintf("10.255.%d.1/24", port), fmt.Sprintf("2001:db8:ff:%d::1/64", port)} {
			addr, _ := netlink.ParseAddr(a)
			addr.Flags = unix.IFA_F_NODAD
			if err := s.h.AddrAdd(l, addr); err != nil {
				s.close()
				return nil, fmt.Errorf("bench routes: address %s: %w", a, err)
			}
		}
		s.ifindex[port] = l.Attrs().Index
		ports[l.Attrs().Index] = port
	}
	m, err := kernelfib.New(kernelfib.Config{Table: benchTable, Namespace: &s.ns, ReceiveBuffer: rcvbuf, ForceReceiveBuffer: rcvbuf > 0,
		PortOf: func(i int) (uint32, bool) { p, ok := ports[i]; return p, ok }}, tb)
	if err != nil {
		s.close()
		return nil, err
	}
	s.mirror = m
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel, s.done = cancel, make(chan error, 1)
	go func() { s.done <- m.Run(ctx) }()
	select {
	case <-m.Synced():
	case err := <-s.done:
		s.done <- err
		s.close()
		return nil, fmt.Errorf("bench routes: kernel FIB mirror: %w", err)
	}
	return s, nil
}

func (s *netlinkSource) ifindexOf(port uint32) (int, bool) {
	i, ok := s.ifindex[port]
	return i, ok
}

func (s *netlinkSource) add(r *route.Route) error { return s.addOn(s.h, r) }

func (s *netlinkSource) addOn(h *netlink.Handle, r *route.Route) error {
	nr, err := kernelfib.ToNetlink(r, s.ifindexOf)
	if err != nil {
		return err
	}
	return h.RouteReplace(nr)
}

func (s *netlinkSource) del(p netip.Prefix) error { return s.delOn(s.h, p) }

func (s *netlinkSource) delOn(h *netlink.Handle, p netip.Prefix) error {
	r := route.Route{Table: benchTable, Prefix: p}
	nr, _ := kernelfib.ToNetlink(&r, s.ifindexOf)
	if !p.Addr().Is4() {
		nr.Priority = 1024
	}
	return h.RouteDel(nr)
}

// update sends the changes, one RTM_NEWROUTE or RTM_DELROUTE each, over
// the sender sockets at once: the changes of one prefix all on one socket,
// in order (changes of different prefixes commute), as a routing daemon
// with several netlink sockets would. One socket waits for each change's
// acknowledgement before it sends the next.
func (s *netlinkSource) update(cs []route.Change) error {
	apply := func(h *netlink.Handle, c *route.Change) error {
		if c.Delete {
			return s.delOn(h, c.Route.Prefix)
		}
		return s.addOn(h, &c.Route)
	}
	n := len(s.senders)
	if n == 1 || len(cs) == 1 {
		for i := range cs {
			if err := apply(s.h, &cs[i]); err != nil {
				return err
			}
		}
		return nil
	}
	parts := make([][]int, n)
	for i := range cs {
		k := prefixShard(cs[i].Route.Prefix, n)
		parts[k] = append(parts[k], i)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for k, h := range s.senders {
		if len(parts[k]) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, i := range parts[k] {
				if err := apply(h, &cs[i]); err != nil {
					errs[k] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prefixShard spreads prefixes over n senders (FNV-1a of the address and
// length).
func prefixShard(p netip.Prefix, n int) int {
	h := uint32(2166136261)
	for _, b := range p.Addr().AsSlice() {
		h = (h ^ uint32(b)) * 16777619
	}
	h = (h ^ uint32(p.Bits())) * 16777619
	return int(h % uint32(n))
}

func (s *netlinkSource) close() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	for _, h := range s.senders[min(1, len(s.senders)):] {
		h.Close()
	}
	if s.h != nil {
		s.h.Close()
	}
	s.ns.Close()
}
