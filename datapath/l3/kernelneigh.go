package l3

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// kernelUsable are the kernel neighbour states whose link-layer address
// the kernel itself would send with.
const kernelUsable = netlink.NUD_REACHABLE | netlink.NUD_PERMANENT | netlink.NUD_NOARP |
	netlink.NUD_DELAY | netlink.NUD_PROBE | netlink.NUD_STALE

// kernelNeigh is neighbour mode "kernel"'s link to the kernel: which
// interface is which router port, and the last time each missing
// neighbour was asked for.
type kernelNeigh struct {
	mu      sync.Mutex
	ifindex map[uint32]int // router port -> interface index
	asked   map[NeighKey]time.Time
}

// RunKernelNeighbours mirrors the kernel's neighbour entries of the
// router ports' interfaces (links: interface index -> router port) into
// the neighbour table until ctx is done: the initial dump, then every
// change. A next hop the kernel does not know is asked for with an
// RTM_NEWNEIGH carrying NTF_USE (the kernel then resolves it as if it had
// a packet for it, from the interface's own address: in kernel mode the
// interfaces carry the router addresses in the kernel too). Should the
// subscription fail (a netlink overflow: ENOBUFS), it is opened again with
// a fresh dump, so the mirror does not silently diverge.
func (r *Router) RunKernelNeighbours(ctx context.Context, links map[int]uint32) error {
	kn := &kernelNeigh{ifindex: map[uint32]int{}, asked: map[NeighKey]time.Time{}}
	for idx, port := range links {
		if r.ports[port] == nil {
			return fmt.Errorf("l3: interface %d: port %d is not a router port", idx, port)
		}
		kn.ifindex[port] = idx
	}
	r.kernel.Store(kn)
	for ctx.Err() == nil {
		err := r.kernelSubscription(ctx, links)
		if ctx.Err() != nil {
			return nil
		}
		r.log.Warn("l3: kernel neighbour subscription ended; resubscribing with a fresh dump", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

func (r *Router) kernelSubscription(ctx context.Context, links map[int]uint32) error {
	ch := make(chan netlink.NeighUpdate, 4096)
	done := make(chan struct{})
	defer close(done)
	var errOnce sync.Once
	var subErr error
	err := netlink.NeighSubscribeWithOptions(ch, done, netlink.NeighSubscribeOptions{
		ListExisting:  true,
		ErrorCallback: func(err error) { errOnce.Do(func() { subErr = err }) },
	})
	if err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-ch:
			if !ok {
				if subErr == nil {
					subErr = errors.New("netlink closed the subscription")
				}
				return subErr
			}
			port, ok := links[u.LinkIndex]
			if !ok {
				continue
			}
			a, ok := netip.AddrFromSlice(u.IP)
			if !ok {
				continue
			}
			k := NeighKey{Port: port, Addr: a.Unmap()}
			usable := u.Type == unix.RTM_NEWNEIGH && u.State&kernelUsable != 0 && len(u.HardwareAddr) == 6
			var m MAC
			copy(m[:], u.HardwareAddr)
			r.neigh.SetKernel(k, m, usable)
		}
	}
}

// askKernel asks the kernel to resolve k, at most once per RetransTime
// per neighbour.
func (r *Router) askKernel(k NeighKey, now time.Time) {
	kn := r.kernel.Load()
	if kn == nil {
		return
	}
	kn.mu.Lock()
	idx, ok := kn.ifindex[k.Port]
	if !ok || now.Sub(kn.asked[k]) < r.neigh.cfg.RetransTime {
		kn.mu.Unlock()
		return
	}
	if len(kn.asked) > r.neigh.cfg.MaxEntries {
		clear(kn.asked)
	}
	kn.asked[k] = now
	kn.mu.Unlock()
	fam := netlink.FAMILY_V4
	if k.Addr.Is6() {
		fam = netlink.FAMILY_V6
	}
	err := netlink.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: fam, IP: net.IP(k.Addr.AsSlice()), Flags: netlink.NTF_USE})
	if err != nil {
		r.log.Debug("l3: asking the kernel to resolve a neighbour failed", "port", k.Port, "addr", k.Addr, "err", err)
	}
}
