package kernelfib

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"

	"github.com/gswitch/gswitch/tables/route"
)

// ToNetlink returns the kernel route of r in kernel table r.Table, each next
// hop through the interface ifindexOf names for its port: the inverse of
// what the mirror does, for tests and benchmarks that drive the kernel.
func ToNetlink(r *route.Route, ifindexOf func(port uint32) (int, bool)) (*netlink.Route, error) {
	nr := &netlink.Route{
		Table:    int(r.Table),
		Dst:      &net.IPNet{IP: r.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(r.Prefix.Bits(), r.Prefix.Addr().BitLen())},
		Priority: int(r.Metric),
	}
	hops := make([]*netlink.NexthopInfo, 0, len(r.NextHops))
	for _, h := range r.NextHops {
		ifindex, ok := ifindexOf(h.Port)
		if !ok {
			return nil, fmt.Errorf("kernelfib: route %v: port %d has no interface", r.Prefix, h.Port)
		}
		nh := &netlink.NexthopInfo{LinkIndex: ifindex, Hops: int(h.Weight) - 1}
		if h.Gateway.IsValid() {
			nh.Gw = h.Gateway.AsSlice()
		}
		hops = append(hops, nh)
	}
	if len(hops) == 1 && hops[0].Hops == 0 {
		nr.LinkIndex, nr.Gw = hops[0].LinkIndex, hops[0].Gw
		if nr.Gw == nil {
			nr.Scope = netlink.SCOPE_LINK
		}
	} else {
		nr.MultiPath = hops
	}
	return nr, nil
}

// Install adds routes to the kernel through h, one RTM_NEWROUTE each (see
// ToNetlink). It stops at the first error, naming the route.
func Install(h *netlink.Handle, rs []route.Route, ifindexOf func(port uint32) (int, bool)) error {
	for i := range rs {
		nr, err := ToNetlink(&rs[i], ifindexOf)
		if err != nil {
			return err
		}
		if err := h.RouteAdd(nr); err != nil {
			return fmt.Errorf("kernelfib: adding %v to kernel table %d: %w", rs[i].Prefix, rs[i].Table, err)
		}
	}
	return nil
}
