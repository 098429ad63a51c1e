package agent

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netns"

	"github.com/gswitch/gswitch/controlproto/kernelfib"
	"github.com/gswitch/gswitch/tables/route"
)

// StaticRouteConfig is one entry of the routes: list.
type StaticRouteConfig struct {
	Table    uint32          `yaml:"table"` // 0: 254 (main)
	Prefix   string          `yaml:"prefix"`
	NextHops []NextHopConfig `yaml:"next_hops"`
	Metric   uint32          `yaml:"metric"`
}

// NextHopConfig is one next hop of a static route.
type NextHopConfig struct {
	Gateway string `yaml:"gateway"` // empty: on-link
	Port    uint32 `yaml:"port"`
	Weight  uint32 `yaml:"weight"` // 0: 1
}

// KernelFIBConfig is the kernel_fib: section: which kernel routing table
// gswitchd mirrors over netlink.
type KernelFIBConfig struct {
	Table         uint32 `yaml:"table"`          // 0: off
	Netns         string `yaml:"netns"`          // a named network namespace (/run/netns); empty: gswitchd's own
	ReceiveBuffer int    `yaml:"receive_buffer"` // bytes; 0: the kernel's default
}

// routesFlags are the flags of the routing sources.
type routesFlags struct {
	kfibTable, kfibRcvbuf int
	kfibNetns             string
}

func (r *routesFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&r.kfibTable, "kernel-fib-table", 0, "mirror this kernel routing table over netlink into the route table of the same id: `N` (254: main; 0: off)")
	fs.StringVar(&r.kfibNetns, "kernel-fib-netns", "", "the kernel FIB's network namespace: a `NAME` in /run/netns (default: gswitchd's own)")
	fs.IntVar(&r.kfibRcvbuf, "kernel-fib-receive-buffer", 0, "netlink receive buffer of the kernel FIB subscription in `BYTES` (0: the kernel's default); an overflow resyncs from a dump")
}

func (r *routesFlags) override(set map[string]bool, c *KernelFIBConfig) {
	if set["kernel-fib-table"] {
		c.Table = uint32(max(r.kfibTable, 0))
		if r.kfibTable < 0 || r.kfibTable > 1<<32-1 {
			c.Table = 1<<32 - 1 // refused by checkRoutes' port-table check, named
		}
	}
	setIf(set, "kernel-fib-netns", &c.Netns, r.kfibNetns)
	setIf(set, "kernel-fib-receive-buffer", &c.ReceiveBuffer, r.kfibRcvbuf)
}

// staticRoutes converts and validates the routes: list: each route
// completely (route.Validate), its next hops on router ports, its table
// one that a router port uses. Errors are one line naming the entry.
func staticRoutes(c *Config) ([]route.Route, error) {
	routerPort := map[uint32]bool{}
	tables := map[uint32]bool{}
	for _, rp := range c.Router.Ports {
		routerPort[rp.Port] = true
		tables[cmpOr(rp.Table, defaultRouteTable)] = true
	}
	var out []route.Route
	seen := map[uint32]map[netip.Prefix]int{}
	for i, sr := range c.Routes {
		where := fmt.Sprintf("routes[%d] (%s)", i, sr.Prefix)
		r := route.Route{Table: cmpOr(sr.Table, defaultRouteTable), Source: route.SourceStatic, Metric: sr.Metric}
		p, err := netip.ParsePrefix(strings.TrimSpace(sr.Prefix))
		if err != nil {
			return nil, configErr("%s: prefix: want ADDR/LEN, e.g. 10.0.0.0/8", where)
		}
		if p.Masked() != p {
			return nil, configErr("%s: prefix has host bits set (want %v)", where, p.Masked())
		}
		r.Prefix = p
		if !tables[r.Table] {
			return nil, configErr("%s: table %d is no router port's table (router.ports: table, default %d)", where, r.Table, defaultRouteTable)
		}
		for j, h := range sr.NextHops {
			nh := route.NextHop{Port: h.Port, Weight: cmpOr(h.Weight, 1)}
			if h.Gateway != "" {
				if nh.Gateway, err = netip.ParseAddr(strings.TrimSpace(h.Gateway)); err != nil {
					return nil, configErr("%s: next_hops[%d]: gateway %q is not an address", where, j, h.Gateway)
				}
			}
			if !routerPort[h.Port] {
				return nil, configErr("%s: next_hops[%d]: port %d is not a router port (router.ports)", where, j, h.Port)
			}
			r.NextHops = append(r.NextHops, nh)
		}
		if err := route.Validate(&r, r.Table, nil); err != nil {
			return nil, configErr("%s: %v", where, err)
		}
		if seen[r.Table] == nil {
			seen[r.Table] = map[netip.Prefix]int{}
		}
		if k, dup := seen[r.Table][p]; dup {
			return nil, configErr("%s: prefix %v of table %d already given in routes[%d]", where, p, r.Table, k)
		}
		seen[r.Table][p] = i
		out = append(out, r)
	}
	return out, nil
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// checkKernelFIB validates the kernel_fib: section.
func checkKernelFIB(c *Config) error {
	k := c.KernelFIB
	if k.Table == 0 {
		if k.Netns != "" || k.ReceiveBuffer != 0 {
			return configErr("kernel_fib: netns and receive_buffer need kernel_fib.table (--kernel-fib-table)")
		}
		return nil
	}
	if !slices.ContainsFunc(c.Router.Ports, func(rp RouterPortConfig) bool { return cmpOr(rp.Table, defaultRouteTable) == k.Table }) {
		return configErr("kernel_fib: table %d is no router port's table (router.ports: table, default %d)", k.Table, defaultRouteTable)
	}
	if k.ReceiveBuffer < 0 {
		return configErr("kernel_fib: receive_buffer %d: want bytes >= 0", k.ReceiveBuffer)
	}
	if strings.ContainsAny(k.Netns, "/") || k.Netns == "." || k.Netns == ".." {
		return configErr("kernel_fib: netns %q: want a name in /run/netns", k.Netns)
	}
	return nil
}

// routeSources is the agent's part for the route sources beside the
// router's connected routes.
type routeSources struct {
	kfib   *kernelfib.Mirror // nil without kernel_fib
	kfibNS netns.NsHandle    // kernel_fib.netns, when given
}

// startStaticRoutes installs the routes: list into their tables.
func (d *Agent) startStaticRoutes() error {
	rs, err := staticRoutes(&d.st.Config)
	if err != nil {
		return err
	}
	for _, r := range rs {
		t, err := d.routeTable(r.Table)
		if err != nil {
			return err
		}
		if err := t.Add(r); err != nil {
			return fmt.Errorf("static route: %w", err)
		}
	}
	if len(rs) > 0 {
		d.log.Info("static routes installed", "routes", len(rs))
	}
	return nil
}

// startKernelFIB makes the kernel FIB mirror (nil without kernel_fib), with
// the router ports' interfaces as the ports routes may leave through.
func (d *Agent) startKernelFIB() error {
	k := d.st.KernelFIB
	if k.Table == 0 {
		return nil
	}
	t, err := d.routeTable(k.Table)
	if err != nil {
		return err
	}
	cfg := kernelfib.Config{Table: k.Table, ReceiveBuffer: k.ReceiveBuffer, ForceReceiveBuffer: k.ReceiveBuffer > 0, Log: d.log.With("component", "kernel_fib")}
	if k.Netns != "" {
		ns, err := netns.GetFromName(k.Netns)
		if err != nil {
			return fmt.Errorf("kernel_fib: netns %q: %w", k.Netns, err)
		}
		d.kfibNS = ns
		cfg.Namespace = &d.kfibNS
	}
	links := d.kernelNeighbourLinks()
	cfg.PortOf = func(ifindex int) (uint32, bool) {
		p, ok := links[ifindex]
		return p, ok
	}
	if d.kfib, err = kernelfib.New(cfg, t); err != nil {
		return err
	}
	return nil
}

// runKernelFIB starts the kernel FIB mirror's goroutine.
func (d *Agent) runKernelFIB(ctx context.Context, goRun func(string, func() error)) {
	if d.kfib == nil {
		return
	}
	goRun("kernel fib", func() error { return d.kfib.Run(ctx) }) // close() closes kfibNS after Run's goroutines end
}

// routeTables is the agent's ctl.RouteSource side.
func (d *Agent) routeTables() (map[uint32]*route.Table, map[uint32]map[string]map[string]uint64) {
	src := map[uint32]map[string]map[string]uint64{}
	if d.kfib != nil {
		s := d.kfib.Stats()
		src[d.st.KernelFIB.Table] = map[string]map[string]uint64{"kernel": {
			"events": s.Events, "adds": s.Adds, "deletes": s.Deletes, "rejected": s.Rejected,
			"skipped": s.Skipped, "overflows": s.Overflows, "resyncs": s.Resyncs, "kernel_routes": uint64(s.Routes),
		}}
	}
	return d.routes, src
}
