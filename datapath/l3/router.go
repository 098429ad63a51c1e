package l3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/route"
)

// NeighMode says how next hops' link-layer addresses are found.
type NeighMode uint8

// The neighbour modes.
const (
	// NeighOwn: the router resolves with ARP and neighbour solicitations
	// itself (the default).
	NeighOwn NeighMode = iota
	// NeighKernel: the router reads the kernel's neighbour table (over
	// netlink, see RunKernelNeighbours) and never solicits.
	NeighKernel
)

// ParseNeighMode reads "own" (or "") or "kernel".
func ParseNeighMode(s string) (NeighMode, error) {
	switch s {
	case "own", "":
		return NeighOwn, nil
	case "kernel":
		return NeighKernel, nil
	}
	return 0, fmt.Errorf("neighbour mode %q: want own or kernel", s)
}

func (m NeighMode) String() string {
	if m == NeighKernel {
		return "kernel"
	}
	return "own"
}

// PortConfig makes a switch port a router port.
type PortConfig struct {
	No    uint32         // the gswitch (OpenFlow) port number
	MAC   MAC            // the port's address: frames to it are routed
	Addrs []netip.Prefix // the port's addresses with their subnets, e.g. 10.0.1.1/24
	Table uint32         // the routing table its packets are looked up in
}

// Engine is what the router needs of a lookup backend: gpu.Engine has it.
// Route tables' LPM images are loaded as their own table ids (see
// Config.TableIDBase) and kept current with their bubbles.
type Engine interface {
	Load(id gpu.TableID, kind gpu.Kind, im *bubble.Image) error
	Apply(id gpu.TableID, u bubble.Update) error
	LookupLPM4(id gpu.TableID, addrs []uint32, out []uint32) error
	LookupLPM6(id gpu.TableID, addrs []lpm.Addr6, out []uint32) error
}

// DefaultTableIDBase is Config.TableIDBase's default: the first
// gpu.TableID the router uses unless told otherwise. The pipeline's flow
// tables use ids 0..253.
const DefaultTableIDBase gpu.TableID = 1 << 20

// IDsPerTable is the number of engine table ids one route table takes:
// its IPv4 and its IPv6 image.
const IDsPerTable = 2

// Config configures a Router.
type Config struct {
	Ports  []PortConfig
	Engine Engine // required
	// TableIDBase is the first engine table id of the route tables' LPM
	// images: the i-th table AttachTable sees has its IPv4 image at
	// TableIDBase+2i and its IPv6 image at TableIDBase+2i+1 (0:
	// DefaultTableIDBase). The agent passes the first id of a range its
	// table-id allocator handed out, so that no other table's ids overlap.
	TableIDBase gpu.TableID
	// MaxTables bounds the route tables AttachTable accepts, so that their
	// images stay inside the IDsPerTable*MaxTables ids from TableIDBase
	// (0: no bound).
	MaxTables int
	Neigh     NeighConfig
	NeighMode NeighMode
	// ICMPRate bounds the ICMP errors sent (time exceeded, unreachable) per
	// second, with a burst of as many (default 100; negative: none sent).
	ICMPRate int
	// Transmit sends frames the router originates outside a batch
	// (solicitation retries); required for NeighOwn.
	Transmit func(port uint32, frames [][]byte)
	// Now reads the clock (default time.Now); tests drive it.
	Now    func() time.Time
	Logger *slog.Logger
}

// rport is a router port.
type rport struct {
	PortConfig
	tab *rtable
}

// addrFor returns the port's address of target's family to speak to it
// from: one whose subnet holds target, else the first of the family.
func (p *rport) addrFor(target netip.Addr) (netip.Addr, bool) {
	var first netip.Addr
	for _, a := range p.Addrs {
		if a.Addr().Is4() != target.Is4() {
			continue
		}
		if a.Contains(target) {
			return a.Addr(), true
		}
		if !first.IsValid() {
			first = a.Addr()
		}
	}
	return first, first.IsValid()
}

// owns reports whether a is one of the port's addresses.
func (p *rport) owns(a netip.Addr) bool {
	return slices.ContainsFunc(p.Addrs, func(x netip.Prefix) bool { return x.Addr() == a })
}

// rtable is a route table attached to the router and its images' ids.
type rtable struct {
	t        *route.Table
	id4, id6 gpu.TableID
	mu       sync.Mutex // orders the first load against the change hook
	loaded   bool
}

// Router is gswitch's L3 forwarding stage. See the package documentation.
type Router struct {
	cfg    Config
	log    *slog.Logger
	ports  map[uint32]*rport
	local  map[netip.Addr]uint32 // every router address -> its port
	tables map[uint32]*rtable
	neigh  *Neighbours
	kernel atomic.Pointer[kernelNeigh] // neighbour mode kernel, once RunKernelNeighbours runs
	pool   sync.Pool

	icmpMu     sync.Mutex
	icmpTokens float64
	icmpLast   time.Time

	drops                                           [NumReasons]atomic.Uint64
	forwarded, forwardedBytes                       atomic.Uint64
	arpReplies, ndAdverts, solicits, echoes, errors atomic.Uint64
	icmpLimited, queued                             atomic.Uint64
}

// New checks the configuration and returns a router with no route tables
// attached yet (AttachTable).
func New(cfg Config) (*Router, error) {
	if cfg.Engine == nil {
		return nil, errors.New("l3: no engine")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ICMPRate == 0 {
		cfg.ICMPRate = 100
	}
	if cfg.TableIDBase == 0 {
		cfg.TableIDBase = DefaultTableIDBase
	}
	if cfg.MaxTables < 0 {
		return nil, fmt.Errorf("l3: MaxTables %d: want 0 (no bound) or more", cfg.MaxTables)
	}
	r := &Router{cfg: cfg, log: cfg.Logger, ports: map[uint32]*rport{}, local: map[netip.Addr]uint32{},
		tables: map[uint32]*rtable{}, neigh: NewNeighbours(cfg.Neigh), icmpTokens: float64(max(cfg.ICMPRate, 0))}
	for _, pc := range cfg.Ports {
		if err := r.addPort(pc); err != nil {
			return nil, err
		}
	}
	r.pool.New = func() any { return &batch{} }
	return r, nil
}

func (r *Router) addPort(pc PortConfig) error {
	switch {
	case pc.No == 0:
		return errors.New("l3: router port number 0")
	case r.ports[pc.No] != nil:
		return fmt.Errorf("l3: router port %d given twice", pc.No)
	case pc.MAC == MAC{} || pc.MAC[0]&1 != 0:
		return fmt.Errorf("l3: router port %d: MAC %v is not a unicast address", pc.No, pc.MAC)
	}
	for _, a := range pc.Addrs {
		ad := a.Addr()
		switch {
		case !a.IsValid() || ad.Zone() != "":
			return fmt.Errorf("l3: router port %d: address %v is not valid", pc.No, a)
		case ad.IsMulticast() || ad.IsUnspecified() || ad.IsLoopback() || ad.Is4In6():
			return fmt.Errorf("l3: router port %d: address %v is not a unicast address", pc.No, a)
		case a.Masked().Addr() == ad && a.Bits() < ad.BitLen()-1:
			return fmt.Errorf("l3: router port %d: address %v is its subnet's own address (want a host address, e.g. %v)", pc.No, a, a.Masked().Addr().Next())
		}
		if p, dup := r.local[ad]; dup {
			return fmt.Errorf("l3: address %v given to ports %d and %d", ad, p, pc.No)
		}
		r.local[ad] = pc.No
	}
	r.ports[pc.No] = &rport{PortConfig: pc}
	return nil
}

// Owns reports whether port no is a router port: its frames go to Route,
// not to the flow tables.
func (r *Router) Owns(no uint32) bool { return r.ports[no] != nil }

// Ports returns the router ports' configurations, ascending.
func (r *Router) Ports() []PortConfig {
	out := make([]PortConfig, 0, len(r.ports))
	for _, p := range r.ports {
		out = append(out, p.PortConfig)
	}
	slices.SortFunc(out, func(a, b PortConfig) int { return int(int64(a.No) - int64(b.No)) })
	return out
}

// Tables returns the ids of the route tables the ports use, ascending.
func (r *Router) Tables() []uint32 {
	var ids []uint32
	for _, p := range r.ports {
		if !slices.Contains(ids, p.Table) {
			ids = append(ids, p.Table)
		}
	}
	slices.Sort(ids)
	return ids
}

// ConnectedRoutes returns the routes of the ports' own subnets (on-link,
// weight 1, source connected, metric 0), for table id.
func (r *Router) ConnectedRoutes(id uint32) []route.Route {
	var out []route.Route
	for _, p := range r.Ports() {
		if p.Table != id {
			continue
		}
		for _, a := range p.Addrs {
			out = append(out, route.Route{Table: id, Prefix: a.Masked(), Source: route.SourceConnected,
				NextHops: []route.NextHop{{Port: p.No, Weight: 1}}})
		}
	}
	return out
}

// AttachTable makes t serve the router ports whose Table is t.ID(): its
// LPM images are loaded into the engine and every later change is applied
// to them (route.Table.Attach). Call it before traffic starts, once per
// table.
func (r *Router) AttachTable(t *route.Table) error {
	if r.tables[t.ID()] != nil {
		return fmt.Errorf("l3: route table %d attached twice", t.ID())
	}
	if r.cfg.MaxTables > 0 && len(r.tables) >= r.cfg.MaxTables {
		return fmt.Errorf("l3: route table %d: the router's engine table ids hold %d route tables", t.ID(), r.cfg.MaxTables)
	}
	n := gpu.TableID(len(r.tables))
	base := r.cfg.TableIDBase
	rt := &rtable{t: t, id4: base + IDsPerTable*n, id6: base + IDsPerTable*n + 1}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	v4, v6 := t.Attach(func(fam lpm.Family, u bubble.Update) { r.apply(rt, fam, u) })
	if err := r.cfg.Engine.Load(rt.id4, gpu.LPM4, v4); err != nil {
		t.Attach(nil)
		return fmt.Errorf("l3: route table %d: load IPv4 image: %w", t.ID(), err)
	}
	if err := r.cfg.Engine.Load(rt.id6, gpu.LPM6, v6); err != nil {
		t.Attach(nil)
		return fmt.Errorf("l3: route table %d: load IPv6 image: %w", t.ID(), err)
	}
	rt.loaded = true
	r.tables[t.ID()] = rt
	for _, p := range r.ports {
		if p.Table == t.ID() {
			p.tab = rt
		}
	}
	return nil
}

// apply is the route table's change hook: it runs under the table's
// writer lock, so the engine sees the updates in order. Should the engine
// refuse one, the family's whole image is loaded again (the table is
// authoritative).
func (r *Router) apply(rt *rtable, fam lpm.Family, u bubble.Update) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if !rt.loaded {
		return // AttachTable's images hold this change
	}
	id, kind := rt.id4, gpu.LPM4
	if fam == lpm.IPv6 {
		id, kind = rt.id6, gpu.LPM6
	}
	if err := r.cfg.Engine.Apply(id, u); err != nil {
		r.log.Warn("l3: engine refused a route update; reloading the image", "table", rt.t.ID(), "family", fam, "err", err)
		if err := r.cfg.Engine.Load(id, kind, rt.t.LPM(fam).Mirror().Image().Clone()); err != nil {
			r.log.Error("l3: reloading a route image failed; lookups fall back to the CPU", "table", rt.t.ID(), "family", fam, "err", err)
		}
	}
}

// Neighbours returns the neighbour table.
func (r *Router) Neighbours() *Neighbours { return r.neigh }

// Run runs the neighbour timers (solicitation retries, failures, garbage
// collection) every interval until ctx is done.
func (r *Router) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Tick()
		}
	}
}

// Tick runs the neighbour timers once, sending the solicitations due
// through Config.Transmit.
func (r *Router) Tick() {
	sol, dropped := r.neigh.Tick(r.cfg.Now())
	r.drops[DropNeighbour].Add(uint64(dropped))
	for _, s := range sol {
		if f := r.solicitation(s.Key, s.Unicast); f != nil && r.cfg.Transmit != nil {
			r.cfg.Transmit(s.Key.Port, [][]byte{f})
		}
	}
}

// solicitation builds an ARP request or a neighbour solicitation for k
// (unicast to mac when not zero); nil if the port has no address of k's
// family.
func (r *Router) solicitation(k NeighKey, mac MAC) []byte {
	p := r.ports[k.Port]
	if p == nil {
		return nil
	}
	src, ok := p.addrFor(k.Addr)
	if !ok {
		return nil
	}
	r.solicits.Add(1)
	if k.Addr.Is4() {
		dst := mac
		if dst == (MAC{}) {
			dst = broadcastMAC
		}
		return buildARP(dst, p.MAC, arpRequest, p.MAC, src, MAC{}, k.Addr)
	}
	return buildNS(mac, p.MAC, src, k.Addr)
}

// allowICMP takes a token of the ICMP error budget.
func (r *Router) allowICMP(now time.Time) bool {
	if r.cfg.ICMPRate < 0 {
		return false
	}
	r.icmpMu.Lock()
	defer r.icmpMu.Unlock()
	rate := float64(r.cfg.ICMPRate)
	if !r.icmpLast.IsZero() {
		r.icmpTokens = min(rate, r.icmpTokens+now.Sub(r.icmpLast).Seconds()*rate)
	}
	r.icmpLast = now
	if r.icmpTokens < 1 {
		r.icmpLimited.Add(1)
		return false
	}
	r.icmpTokens--
	return true
}
