package kernelfib

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/tables/route"
)

// kkey identifies a kernel route within the mirrored table: the kernel keeps
// several routes for one prefix when their metrics differ and uses the one
// with the lowest.
type kkey struct {
	prefix netip.Prefix
	metric uint32
}

// khop is one next hop as the kernel gives it.
type khop struct {
	gw      netip.Addr
	ifindex int
	weight  uint32
}

// kroute is a kernel unicast route reduced to what gswitch mirrors.
type kroute struct {
	key  kkey
	hops []khop
}

// errSkip marks a kernel route that is not mirrored by design (not unicast,
// TOS-specific): counted, not an error.
type errSkip struct{ why string }

func (e errSkip) Error() string { return e.why }

// fromNetlink reduces a netlink route of the mirrored table. It returns an
// errSkip for routes gswitch does not mirror, and an error for malformed
// ones (an unknown family, a destination that is not a prefix, a
// next hop through another address family).
func fromNetlink(r *netlink.Route) (kroute, error) {
	var kr kroute
	if r.Type != unix.RTN_UNICAST {
		return kr, errSkip{fmt.Sprintf("route type %d is not unicast", r.Type)}
	}
	if r.Tos != 0 {
		return kr, errSkip{fmt.Sprintf("TOS %d route", r.Tos)}
	}
	p, err := prefixOf(r.Family, r.Dst)
	if err != nil {
		return kr, err
	}
	kr.key = kkey{prefix: p, metric: uint32(r.Priority)}
	if len(r.MultiPath) == 0 {
		h, err := hopOf(r.Family, r.Gw, r.Via, r.LinkIndex, 0)
		if err != nil {
			return kr, fmt.Errorf("%v: %w", p, err)
		}
		kr.hops = []khop{h}
		return kr, nil
	}
	for _, nh := range r.MultiPath {
		h, err := hopOf(r.Family, nh.Gw, nh.Via, nh.LinkIndex, nh.Hops)
		if err != nil {
			return kr, fmt.Errorf("%v: %w", p, err)
		}
		kr.hops = append(kr.hops, h)
	}
	return kr, nil
}

func prefixOf(family int, dst *net.IPNet) (netip.Prefix, error) {
	if dst == nil { // the default route
		switch family {
		case unix.AF_INET:
			return netip.PrefixFrom(netip.IPv4Unspecified(), 0), nil
		case unix.AF_INET6:
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0), nil
		}
		return netip.Prefix{}, fmt.Errorf("route of address family %d", family)
	}
	a, ok := netip.AddrFromSlice(dst.IP)
	ones, bits := dst.Mask.Size()
	if !ok || bits == 0 {
		return netip.Prefix{}, fmt.Errorf("destination %v is not a prefix", dst)
	}
	if family == unix.AF_INET {
		a = a.Unmap()
	}
	if (family == unix.AF_INET) != a.Is4() || a.BitLen() != bits {
		return netip.Prefix{}, fmt.Errorf("destination %v does not match the route's family %d", dst, family)
	}
	return netip.PrefixFrom(a, ones), nil
}

func hopOf(family int, gw net.IP, via netlink.Destination, ifindex, hops int) (khop, error) {
	h := khop{ifindex: ifindex, weight: uint32(hops) + 1}
	if via != nil {
		return h, fmt.Errorf("next hop via %v (another address family) is not supported", via)
	}
	if gw != nil {
		a, ok := netip.AddrFromSlice(gw)
		if !ok {
			return h, fmt.Errorf("gateway %v is not an address", gw)
		}
		if family == unix.AF_INET {
			a = a.Unmap()
		}
		h.gw = a
	}
	return h, nil
}

// toRoute turns the kernel route into a route of table id, mapping the
// output interfaces to ports with portOf. It returns false when a next hop
// leaves through an interface that is not a gswitch port (the route is then
// not mirrored: gswitch could not forward the share of flows the kernel
// sends there).
func (kr *kroute) toRoute(id uint32, portOf func(ifindex int) (uint32, bool)) (route.Route, int, bool) {
	r := route.Route{Table: id, Prefix: kr.key.prefix, Source: route.SourceKernel, Metric: kr.key.metric}
	for _, h := range kr.hops {
		port, ok := portOf(h.ifindex)
		if !ok {
			return r, h.ifindex, false
		}
		r.NextHops = append(r.NextHops, route.NextHop{Gateway: h.gw, Port: port, Weight: h.weight})
	}
	slices.SortFunc(r.NextHops, func(a, b route.NextHop) int {
		if a.Port != b.Port {
			return cmp.Compare(a.Port, b.Port)
		}
		return a.Gateway.Compare(b.Gateway)
	})
	return r, 0, true
}

// merge adds the next hops of o that kr lacks (IPv6 appends a sibling).
func (kr *kroute) merge(o kroute) {
	for _, h := range o.hops {
		if !slices.ContainsFunc(kr.hops, func(x khop) bool { return x.gw == h.gw && x.ifindex == h.ifindex }) {
			kr.hops = append(kr.hops, h)
		}
	}
}

// remove drops the next hops of o from kr and reports whether any remain
// (IPv6 deletes one sibling of a multipath route).
func (kr *kroute) remove(o kroute) bool {
	kr.hops = slices.DeleteFunc(kr.hops, func(x khop) bool {
		return slices.ContainsFunc(o.hops, func(h khop) bool { return x.gw == h.gw && x.ifindex == h.ifindex })
	})
	return len(kr.hops) > 0
}
