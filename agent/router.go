package agent

import (
	"context"

	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/l3"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/tables/route"
)

// RouterConfig is the router: section: which ports are router ports and
// how next hops are resolved.
type RouterConfig struct {
	// Neighbours is the neighbour mode: own (ARP/ND by gswitchd) or kernel.
	Neighbours string             `yaml:"neighbours"`
	Ports      []RouterPortConfig `yaml:"ports"`
}

// RouterPortConfig makes a port a router port.
type RouterPortConfig struct {
	Port      uint32   `yaml:"port"`
	Addresses []string `yaml:"addresses"`
	MAC       string   `yaml:"mac"`
	Table     uint32   `yaml:"table"`
}

// defaultRouteTable is a router port's table when none is given: the
// kernel's main table.
const defaultRouteTable = 254

// parseRouterPortFlag reads --router-port N=ADDR/LEN[,ADDR/LEN...][,table=T][,mac=MAC].
func parseRouterPortFlag(s string) (RouterPortConfig, error) {
	num, rest, ok := strings.Cut(s, "=")
	n, err := strconv.ParseUint(num, 10, 32)
	bad := func(why string) (RouterPortConfig, error) {
		return RouterPortConfig{}, configErr("--router-port %q: %s (want N=ADDR/LEN[,ADDR/LEN...][,table=T][,mac=MAC], e.g. 1=10.0.1.1/24,2001:db8:1::1/64)", s, why)
	}
	if !ok || err != nil || rest == "" {
		return bad("no port number or addresses")
	}
	rp := RouterPortConfig{Port: uint32(n)}
	for _, item := range strings.Split(rest, ",") {
		switch k, v, kv := strings.Cut(item, "="); {
		case kv && k == "table":
			t, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return bad("table " + v)
			}
			rp.Table = uint32(t)
		case kv && k == "mac":
			rp.MAC = v
		case kv:
			return bad("unknown key " + k)
		default:
			rp.Addresses = append(rp.Addresses, item)
		}
	}
	return rp, nil
}

// routerSettings is the checked router section.
type routerSettings struct {
	mode  l3.NeighMode
	ports []l3.PortConfig // MAC zero: the interface's own
}

// checkRouter validates the router section against the ports.
func checkRouter(rc RouterConfig, ports []PortConfig) (routerSettings, error) {
	var rs routerSettings
	var err error
	if rs.mode, err = l3.ParseNeighMode(rc.Neighbours); err != nil {
		return rs, configErr("router: %v", err)
	}
	seen := map[uint32]bool{}
	owner := map[netip.Addr]uint32{}
	for _, rp := range rc.Ports {
		if !slices.ContainsFunc(ports, func(p PortConfig) bool { return p.Number == rp.Port }) {
			return rs, configErr("router port %d: no such port (ports: lists them)", rp.Port)
		}
		if seen[rp.Port] {
			return rs, configErr("router port %d given twice", rp.Port)
		}
		seen[rp.Port] = true
		pc := l3.PortConfig{No: rp.Port, Table: rp.Table}
		if pc.Table == 0 {
			pc.Table = defaultRouteTable
		}
		if rp.MAC != "" {
			hw, err := net.ParseMAC(rp.MAC)
			if err != nil || len(hw) != 6 || hw[0]&1 != 0 {
				return rs, configErr("router port %d: mac %q: want a unicast Ethernet address", rp.Port, rp.MAC)
			}
			pc.MAC = l3.MAC(hw)
		}
		if len(rp.Addresses) == 0 {
			return rs, configErr("router port %d: no addresses", rp.Port)
		}
		for _, a := range rp.Addresses {
			p, err := netip.ParsePrefix(strings.TrimSpace(a))
			if err != nil {
				return rs, configErr("router port %d: address %q: want ADDR/LEN, e.g. 10.0.1.1/24", rp.Port, a)
			}
			ad := p.Addr()
			switch {
			case ad.Zone() != "" || ad.IsMulticast() || ad.IsUnspecified() || ad.IsLoopback() || ad.Is4In6() || ad.IsLinkLocalUnicast():
				return rs, configErr("router port %d: address %v: want a unicast, non-link-local address", rp.Port, p)
			case p.Masked().Addr() == ad && p.Bits() < ad.BitLen()-1:
				return rs, configErr("router port %d: address %v is its subnet's own address (want a host address, e.g. %v)", rp.Port, p, p.Masked().Addr().Next())
			case owner[ad] != 0:
				return rs, configErr("router address %v given to ports %d and %d", ad, owner[ad], rp.Port)
			}
			owner[ad] = rp.Port
			pc.Addrs = append(pc.Addrs, p)
		}
		rs.ports = append(rs.ports, pc)
	}
	return rs, nil
}

// newRouter makes the router (nil without router ports): port MACs default
// to the interfaces' own, read over netlink.
func (d *Agent) newRouter() error {
	rs := d.st.router
	if len(rs.ports) == 0 {
		return nil
	}
	ports := slices.Clone(rs.ports)
	for i := range ports {
		if ports[i].MAC != (l3.MAC{}) {
			continue
		}
		name := d.st.portName(ports[i].No)
		l, err := afpacket.LookupLink(name)
		if err != nil {
			return fmt.Errorf("router port %d (%s): %w", ports[i].No, name, err)
		}
		if len(l.MAC) != 6 {
			return fmt.Errorf("router port %d (%s): the interface has no Ethernet address; give router mac", ports[i].No, name)
		}
		ports[i].MAC = l3.MAC(l.MAC)
	}
	ids, err := d.ids.Alloc(routerIDsOwner, l3.IDsPerTable*uint64(len(routeTableIDs(ports))))
	if err != nil {
		return err
	}
	r, err := l3.New(l3.Config{Ports: ports, Engine: d.eng, NeighMode: rs.mode, Logger: d.log,
		TableIDBase: ids.First, MaxTables: int(ids.N / l3.IDsPerTable),
		Transmit: func(port uint32, frames [][]byte) { d.sw.Transmit(port, frames) }})
	if err != nil {
		return err
	}
	d.router = r
	return nil
}

// routeTableIDs returns the route tables the router ports use.
func routeTableIDs(ports []l3.PortConfig) []uint32 {
	var ids []uint32
	for _, p := range ports {
		if !slices.Contains(ids, p.Table) {
			ids = append(ids, p.Table)
		}
	}
	return ids
}

// portName returns the interface of port no.
func (st *settings) portName(no uint32) string {
	for _, p := range st.Ports {
		if p.Number == no {
			return p.Interface
		}
	}
	return ""
}

// startRoutes makes the route tables the router ports use, attaches them
// to the router (their LPM images loaded into the engine) and installs the
// ports' connected routes.
func (d *Agent) startRoutes() error {
	if d.router == nil {
		return nil
	}
	for _, id := range d.router.Tables() {
		t, err := d.routeTable(id)
		if err != nil {
			return err
		}
		if err := d.router.AttachTable(t); err != nil {
			return err
		}
		for _, r := range d.router.ConnectedRoutes(id) {
			if err := t.Add(r); err != nil {
				return fmt.Errorf("connected route: %w", err)
			}
		}
	}
	for _, p := range d.router.Ports() {
		d.log.Info("router port", "port", p.No, "mac", p.MAC.String(), "addresses", p.Addrs, "table", p.Table)
	}
	return nil
}

// routeTable returns route table id, making it on first use. Routes may
// only name router ports as next hops.
func (d *Agent) routeTable(id uint32) (*route.Table, error) {
	if t := d.routes[id]; t != nil {
		return t, nil
	}
	portOK := func(uint32) bool { return false }
	if d.router != nil {
		portOK = d.router.Owns
	}
	t, err := route.New(id, route.Options{PortOK: portOK})
	if err != nil {
		return nil, err
	}
	if d.routes == nil {
		d.routes = map[uint32]*route.Table{}
	}
	d.routes[id] = t
	return t, nil
}

// kernelNeighbourLinks maps the router ports' interface indexes to their
// port numbers (neighbour mode kernel).
func (d *Agent) kernelNeighbourLinks() map[int]uint32 {
	links := map[int]uint32{}
	for _, p := range d.router.Ports() {
		if ap := d.ports[p.No]; ap != nil {
			links[ap.Link().Index] = p.No
		}
	}
	return links
}

// neighbourTick is how often the router's neighbour timers run.
const neighbourTick = 100 * time.Millisecond

// neighbours and l3Counters are the agent's ctl.RouterSource side.
func (d *Agent) neighbours() []l3.NeighInfo {
	if d.router == nil {
		return []l3.NeighInfo{}
	}
	return d.router.Neighbours().Dump(time.Now())
}

func (d *Agent) l3Counters() l3.Counters {
	if d.router == nil {
		return l3.Counters{Drops: map[string]uint64{}}
	}
	return d.router.Counters()
}

// pipelineRouter is the router as the pipeline's Config.Router (nil, not
// a nil *l3.Router, without router ports).
func (d *Agent) pipelineRouter() pipeline.Router {
	if d.router == nil {
		return nil
	}
	return d.router
}

// runRouter starts the router's goroutines: the neighbour timers, and in
// neighbour mode kernel the mirror of the kernel's neighbour table.
func (d *Agent) runRouter(ctx context.Context, goRun func(string, func() error)) {
	if d.router == nil {
		return
	}
	goRun("neighbour timers", func() error { d.router.Run(ctx, neighbourTick); return nil })
	if d.st.router.mode == l3.NeighKernel {
		links := d.kernelNeighbourLinks()
		goRun("kernel neighbours", func() error { return d.router.RunKernelNeighbours(ctx, links) })
	}
}
