package route

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// NextHop is where a routed packet goes. Gateway is the next router's
// address; the zero (invalid) netip.Addr means on-link: the packet's own
// destination is resolved. Port is the OpenFlow/gswitch port number of the
// output interface. Weight (>= 1) is the next hop's share of an ECMP route.
type NextHop struct {
	Gateway netip.Addr
	Port    uint32
	Weight  uint32
}

// String formats a next hop as "via GW port P weight W" (on-link: "dev
// port P ...").
func (h NextHop) String() string {
	if h.Gateway.IsValid() {
		return fmt.Sprintf("via %v port %d weight %d", h.Gateway, h.Port, h.Weight)
	}
	return fmt.Sprintf("on-link port %d weight %d", h.Port, h.Weight)
}

// Route is one prefix of one routing table (Table: the VRF / kernel table
// id). Source says where it came from (one of Sources); Metric is kept for
// display (the table holds one route per prefix: the last one written).
type Route struct {
	Table    uint32
	Prefix   netip.Prefix
	NextHops []NextHop
	Source   string
	Metric   uint32
}

// The route sources.
const (
	SourceStatic   = "static"
	SourceKernel   = "kernel"
	SourceOpenFlow = "openflow"
	SourceP4RT     = "p4rt"
	// SourceConnected marks a router port's own subnet (on-link), which
	// gswitchd installs from the port's addresses (datapath/l3).
	SourceConnected = "connected"
)

// Sources lists the valid values of Route.Source.
var Sources = []string{SourceStatic, SourceKernel, SourceOpenFlow, SourceP4RT, SourceConnected}

// Limits on a route's next hops.
const (
	// MaxNextHops is the most next hops (ECMP paths) a route may have.
	MaxNextHops = 256
	// MaxWeight is the largest weight of one next hop.
	MaxWeight = 1 << 16
	// MaxPort is the largest port number (OpenFlow's OFPP_MAX).
	MaxPort = 0xffffff00
)

// Errors of the package, wrapped with what was wrong and where; test them
// with errors.Is.
var (
	// ErrInvalid: a route failed validation (the message says which field).
	ErrInvalid = errors.New("invalid route")
	// ErrNotFound: Delete of a prefix the table does not hold.
	ErrNotFound = errors.New("route not found")
	// ErrFull: no free entry slot is left (2^24-1 routes at most per family).
	ErrFull = errors.New("route table full")
)

func invalid(r *Route, format string, args ...any) error {
	return fmt.Errorf("route %v (table %d): %w: %s", r.Prefix, r.Table, ErrInvalid, fmt.Sprintf(format, args...))
}

// Equal reports whether two routes are the same, next hops in the same order.
func (r Route) Equal(o Route) bool {
	return r.Table == o.Table && r.Prefix == o.Prefix && r.Source == o.Source &&
		r.Metric == o.Metric && slices.Equal(r.NextHops, o.NextHops)
}

// Clone returns a copy of r that shares no memory with it.
func (r Route) Clone() Route {
	r.NextHops = slices.Clone(r.NextHops)
	return r
}

// String formats a route as "PREFIX [via GW] port P weight W, ... (source)".
func (r Route) String() string {
	s := r.Prefix.String()
	for i, h := range r.NextHops {
		if i > 0 {
			s += ","
		}
		s += " " + h.String()
	}
	return fmt.Sprintf("%s (table %d, %s, metric %d)", s, r.Table, r.Source, r.Metric)
}

// Validate checks r completely for a table with id table whose ports are
// accepted by portOK (nil: any port in 1..MaxPort): the table id, a valid and
// masked prefix without zone, 1..MaxNextHops next hops, each with a gateway
// of the prefix's family (or none: on-link) that is neither unspecified nor
// multicast nor zoned, a known port, a weight in 1..MaxWeight, no two next
// hops alike, and a known source. The error names the first fault.
func Validate(r *Route, table uint32, portOK func(uint32) bool) error {
	switch {
	case r.Table != table:
		return invalid(r, "route for table %d given to table %d", r.Table, table)
	case !r.Prefix.IsValid():
		return invalid(r, "prefix is not valid")
	case r.Prefix.Addr().Zone() != "":
		return invalid(r, "prefix has a zone")
	case r.Prefix.Masked() != r.Prefix:
		return invalid(r, "prefix has host bits set (want %v)", r.Prefix.Masked())
	case len(r.NextHops) == 0:
		return invalid(r, "no next hop")
	case len(r.NextHops) > MaxNextHops:
		return invalid(r, "%d next hops, at most %d", len(r.NextHops), MaxNextHops)
	case !slices.Contains(Sources, r.Source):
		return invalid(r, "unknown source %q (want one of %v)", r.Source, Sources)
	}
	v4 := r.Prefix.Addr().Is4()
	for i, h := range r.NextHops {
		if err := checkNextHop(r, i, h, v4, portOK); err != nil {
			return err
		}
		for _, o := range r.NextHops[:i] {
			if o.Gateway == h.Gateway && o.Port == h.Port {
				return invalid(r, "next hop %d (%v) repeats an earlier one", i, h)
			}
		}
	}
	return nil
}

func checkNextHop(r *Route, i int, h NextHop, v4 bool, portOK func(uint32) bool) error {
	g := h.Gateway
	switch {
	case g.IsValid() && g.Is4() != v4:
		return invalid(r, "next hop %d: gateway %v is not of the prefix's family", i, g)
	case g.IsValid() && g.Zone() != "":
		return invalid(r, "next hop %d: gateway %v has a zone (the port names the link)", i, g)
	case g.IsValid() && g.IsUnspecified():
		return invalid(r, "next hop %d: gateway %v is unspecified (leave it out for on-link)", i, g)
	case g.IsValid() && g.IsMulticast():
		return invalid(r, "next hop %d: gateway %v is multicast", i, g)
	case h.Port == 0 || h.Port > MaxPort:
		return invalid(r, "next hop %d: port %d not in 1..%d", i, h.Port, uint32(MaxPort))
	case portOK != nil && !portOK(h.Port):
		return invalid(r, "next hop %d: port %d is not a port of this switch", i, h.Port)
	case h.Weight == 0 || h.Weight > MaxWeight:
		return invalid(r, "next hop %d: weight %d not in 1..%d", i, h.Weight, MaxWeight)
	}
	return nil
}
