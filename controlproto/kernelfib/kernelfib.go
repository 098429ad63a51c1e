package kernelfib

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/tables/route"
)

// Config says which kernel table to mirror and how.
type Config struct {
	// Table is the kernel routing table id to mirror (1..2^32-1; 254 is
	// "main"). The routes go into the route.Table given to New, whose id
	// must be the same.
	Table uint32
	// Namespace is the network namespace whose FIB is mirrored; nil: the
	// process's own.
	Namespace *netns.NsHandle
	// PortOf maps a kernel interface index to the gswitch port attached to
	// that interface. Routes with a next hop through any other interface are
	// skipped (and counted).
	PortOf func(ifindex int) (port uint32, ok bool)
	// ReceiveBuffer sets the subscription socket's receive buffer in bytes
	// (0: the kernel's default). A burst of changes larger than it overflows
	// the socket (ENOBUFS), which makes the mirror resync from a fresh dump.
	ReceiveBuffer int
	// ForceReceiveBuffer sets the size with SO_RCVBUFFORCE, beyond the
	// kernel's rmem_max (needs CAP_NET_ADMIN).
	ForceReceiveBuffer bool
	// Log receives one line per resync, rejected route and subscription
	// error; nil discards them.
	Log *slog.Logger
}

// Stats counts what the mirror did. Events counts every route message of
// the mirrored table; Adds and Deletes the changes made to the route.Table
// (an Add also replaces a prefix's route); Rejected the kernel routes that
// could not be mirrored because they were malformed or the route.Table
// refused them; Skipped those not mirrored by design (not unicast, TOS, a
// next hop through an interface that is no gswitch port); Overflows the
// subscription sockets that overflowed (ENOBUFS); Resyncs the full dumps
// loaded (the first one included).
type Stats struct {
	Events, Adds, Deletes, Rejected, Skipped, Overflows, Resyncs uint64
	// Routes is the number of kernel routes (prefix and metric) held.
	Routes int
}

// Mirror keeps a route.Table equal to one kernel routing table.
type Mirror struct {
	cfg Config
	tb  *route.Table
	log *slog.Logger

	// byPrefix holds the kernel's routes of each prefix, ordered by metric;
	// the first is the one the kernel uses and the one mirrored. Only Run's
	// goroutine touches it.
	byPrefix map[netip.Prefix][]kroute

	events, adds, deletes, rejected, skipped, overflows, resyncs atomic.Uint64
	nroutes                                                      atomic.Int64

	testHook func() // run before each message is applied (tests: a slow reader)

	mu     sync.Mutex
	synced chan struct{} // closed when the first dump is loaded
	gen    uint64        // resyncs done, for WaitResync
	cond   *sync.Cond
}

// New returns a mirror of kernel table cfg.Table into tb.
func New(cfg Config, tb *route.Table) (*Mirror, error) {
	switch {
	case cfg.Table == 0:
		return nil, errors.New("kernelfib: table 0 (unspecified) cannot be mirrored")
	case tb.ID() != cfg.Table:
		return nil, fmt.Errorf("kernelfib: kernel table %d mirrored into route table %d: the ids must be equal", cfg.Table, tb.ID())
	case cfg.PortOf == nil:
		return nil, errors.New("kernelfib: Config.PortOf is required")
	case cfg.ReceiveBuffer < 0:
		return nil, fmt.Errorf("kernelfib: receive buffer %d is negative", cfg.ReceiveBuffer)
	}
	m := &Mirror{cfg: cfg, tb: tb, log: cfg.Log, byPrefix: make(map[netip.Prefix][]kroute), synced: make(chan struct{})}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.cond = sync.NewCond(&m.mu)
	return m, nil
}

// Stats returns the counters.
func (m *Mirror) Stats() Stats {
	return Stats{
		Events: m.events.Load(), Adds: m.adds.Load(), Deletes: m.deletes.Load(),
		Rejected: m.rejected.Load(), Skipped: m.skipped.Load(), Overflows: m.overflows.Load(),
		Resyncs: m.resyncs.Load(), Routes: int(m.nroutes.Load()),
	}
}

// Synced returns a channel closed once the first dump has been loaded.
func (m *Mirror) Synced() <-chan struct{} { return m.synced }

// WaitResyncs waits until at least n resyncs (the first load included) have
// completed, or ctx ends.
func (m *Mirror) WaitResyncs(ctx context.Context, n uint64) error {
	stop := context.AfterFunc(ctx, func() {
		m.mu.Lock()
		m.cond.Broadcast()
		m.mu.Unlock()
	})
	defer stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	for m.gen < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		m.cond.Wait()
	}
	return nil
}

// Run mirrors the table until ctx ends: it subscribes to the route changes,
// loads a full dump with route.Table.Replace, then applies every change; when
// the subscription ends (an overflow, ENOBUFS, or another socket error) it
// subscribes again and resyncs from a fresh dump, so a lost message never
// leaves the tables apart. It returns only when ctx ends, or with the error
// of a first subscription or dump that fails.
func (m *Mirror) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		loaded, err := m.session(ctx)
		if err != nil && !loaded && m.resyncs.Load() == 0 {
			return err
		}
		if err != nil && ctx.Err() == nil {
			m.log.Warn("kernel FIB mirror: resubscribing", "table", m.cfg.Table, "err", err)
			select { // a socket that keeps failing must not spin
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	return nil
}

// session is one subscription: dump, resync, then changes until the
// subscription ends (its error) or ctx does (nil). loaded says whether the
// dump was loaded.
func (m *Mirror) session(ctx context.Context) (loaded bool, err error) {
	ch := make(chan netlink.RouteUpdate, 4096)
	done := make(chan struct{})
	var subErr atomic.Pointer[error]
	opts := netlink.RouteSubscribeOptions{
		Namespace:              m.cfg.Namespace,
		ReceiveBufferSize:      m.cfg.ReceiveBuffer,
		ReceiveBufferForceSize: m.cfg.ForceReceiveBuffer,
		ErrorCallback: func(err error) {
			if errors.Is(err, netlink.ErrDumpInterrupted) {
				return
			}
			subErr.Store(&err)
		},
	}
	if err := netlink.RouteSubscribeWithOptions(ch, done, opts); err != nil {
		return false, fmt.Errorf("kernelfib: subscribe to table %d: %w", m.cfg.Table, err)
	}
	defer func() {
		close(done)
		for range ch { // let the receiver finish
		}
	}()
	// While the dump loads (seconds for a full table), a collector keeps
	// reading the subscription, so that a busy FIB does not overflow the
	// socket during every resync; what it read is applied after the dump.
	stopCollect := make(chan struct{})
	collected := make(chan []netlink.RouteUpdate, 1)
	go func() {
		var buf []netlink.RouteUpdate
		for {
			select {
			case u, ok := <-ch:
				if !ok {
					collected <- buf
					return
				}
				buf = append(buf, u)
			case <-stopCollect:
				collected <- buf
				return
			}
		}
	}()
	err = m.resync()
	close(stopCollect)
	buf := <-collected
	if err != nil {
		return false, err
	}
	var dirty []netip.Prefix
	seen := map[netip.Prefix]bool{}
	for _, u := range buf {
		if p, ok := m.note(u); ok && !seen[p] {
			seen[p] = true
			dirty = append(dirty, p)
		}
	}
	m.reconcileAll(dirty)
	for {
		select {
		case <-ctx.Done():
			return true, nil
		case u, ok := <-ch:
			if !ok {
				err := errors.New("subscription closed")
				if p := subErr.Load(); p != nil {
					err = *p
				}
				if strings.Contains(err.Error(), unix.ENOBUFS.Error()) {
					m.overflows.Add(1)
					m.log.Warn("kernel FIB mirror: netlink socket overflowed (ENOBUFS), resyncing from a fresh dump", "table", m.cfg.Table)
				}
				return true, fmt.Errorf("kernelfib: table %d: %w", m.cfg.Table, err)
			}
			m.updateBatch(u, ch)
		}
	}
}

// dump lists the kernel table, retrying a dump that a change interrupted.
func (m *Mirror) dump() ([]netlink.Route, error) {
	h := &netlink.Handle{}
	if m.cfg.Namespace != nil {
		var err error
		if h, err = netlink.NewHandleAt(*m.cfg.Namespace, unix.NETLINK_ROUTE); err != nil {
			return nil, fmt.Errorf("kernelfib: netlink handle: %w", err)
		}
		defer h.Close()
	} else {
		var err error
		if h, err = netlink.NewHandle(unix.NETLINK_ROUTE); err != nil {
			return nil, fmt.Errorf("kernelfib: netlink handle: %w", err)
		}
		defer h.Close()
	}
	filter := &netlink.Route{Table: int(m.cfg.Table)}
	var err error
	for try := 0; try < 10; try++ {
		var rs []netlink.Route
		rs, err = h.RouteListFiltered(netlink.FAMILY_ALL, filter, netlink.RT_FILTER_TABLE)
		if err == nil {
			return rs, nil
		}
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return nil, fmt.Errorf("kernelfib: dump of table %d: %w", m.cfg.Table, err)
}

// resync replaces the mirrored state and the route table's kernel routes
// with a fresh dump (routes of other sources in the table stay, unless a
// kernel route now holds their prefix).
func (m *Mirror) resync() error {
	krs, err := m.dump()
	if err != nil {
		return err
	}
	m.byPrefix = make(map[netip.Prefix][]kroute, len(krs))
	m.nroutes.Store(0)
	n := 0
	for i := range krs {
		kr, ok := m.convert(&krs[i])
		if ok {
			// A dump lists IPv4 aliases (routes of one prefix and metric)
			// in the kernel's order, the one in use first; IPv6 gives a
			// multipath route as one message, siblings merged.
			if krs[i].Family == unix.AF_INET {
				m.appendRoute(kr)
			} else {
				m.mergeRoute(kr)
			}
			n++
		}
	}
	want := make([]route.Route, 0, len(m.byPrefix))
	for p := range m.byPrefix {
		if r, ok := m.desired(p); ok {
			want = append(want, r)
		}
	}
	for _, r := range m.tb.Routes() {
		if r.Source != route.SourceKernel && len(m.byPrefix[r.Prefix]) == 0 {
			want = append(want, r)
		}
	}
	before := m.tb.Stats()
	if err := m.tb.Replace(want); err != nil {
		// One bad route must not stop the rest: install route by route.
		m.log.Warn("kernel FIB mirror: resync refused as a whole, installing route by route", "table", m.cfg.Table, "err", err)
		m.resyncEach(want)
	} else {
		after := m.tb.Stats()
		m.adds.Add(after.Adds - before.Adds + after.Changes - before.Changes)
		m.deletes.Add(after.Deletes - before.Deletes)
	}
	m.resyncs.Add(1)
	m.log.Info("kernel FIB mirror: loaded a dump", "table", m.cfg.Table, "kernel_routes", n, "installed", m.tb.Len())
	m.mu.Lock()
	if m.gen == 0 {
		close(m.synced)
	}
	m.gen++
	m.cond.Broadcast()
	m.mu.Unlock()
	return nil
}

// resyncEach is the slow resync: every route on its own, the refused ones
// rejected, the kernel routes no longer wanted deleted.
func (m *Mirror) resyncEach(want []route.Route) {
	keep := make(map[netip.Prefix]bool, len(want))
	for _, r := range want {
		keep[r.Prefix] = true
	}
	for _, r := range m.tb.Routes() {
		if !keep[r.Prefix] && r.Source == route.SourceKernel && m.tb.Delete(r.Prefix) == nil {
			m.deletes.Add(1)
		}
	}
	for _, r := range want {
		m.install(r)
	}
}

// convert reduces a netlink route of the mirrored table, counting those it
// skips or rejects.
func (m *Mirror) convert(r *netlink.Route) (kroute, bool) {
	kr, err := fromNetlink(r)
	var skip errSkip
	switch {
	case errors.As(err, &skip):
		m.skipped.Add(1)
		return kr, false
	case err != nil:
		m.rejected.Add(1)
		m.log.Warn("kernel FIB mirror: route rejected", "table", m.cfg.Table, "err", err)
		return kr, false
	}
	return kr, true
}

// update applies one route message.
func (m *Mirror) update(u netlink.RouteUpdate) {
	if p, ok := m.note(u); ok {
		m.reconcile(p)
	}
}

// maxBatch bounds the route messages updateBatch drains into one change.
const maxBatch = 1024

// updateBatch applies u and the messages already waiting behind it on ch
// (up to maxBatch) as one change of the route table (route.Table.Update):
// one bubble write and one engine update for a burst, where a message each
// cost a publication each (a routing daemon's burst, or 100,000 changes/s
// from bench routes). A closed ch ends the draining; the caller sees it
// closed on its next receive.
func (m *Mirror) updateBatch(u netlink.RouteUpdate, ch <-chan netlink.RouteUpdate) {
	var dirty []netip.Prefix
	seen := map[netip.Prefix]bool{}
	add := func(u netlink.RouteUpdate) {
		if p, ok := m.note(u); ok && !seen[p] {
			seen[p] = true
			dirty = append(dirty, p)
		}
	}
	add(u)
drain:
	for len(seen) < maxBatch {
		select {
		case v, ok := <-ch:
			if !ok {
				break drain
			}
			add(v)
		default:
			break drain
		}
	}
	m.reconcileAll(dirty)
}

// note applies one route message to the mirror's copy of the kernel table
// and returns the prefix whose route may have changed.
func (m *Mirror) note(u netlink.RouteUpdate) (netip.Prefix, bool) {
	if uint32(u.Table) != m.cfg.Table {
		return netip.Prefix{}, false
	}
	m.events.Add(1)
	if m.testHook != nil {
		m.testHook()
	}
	kr, ok := m.convert(&u.Route)
	if !ok {
		return netip.Prefix{}, false
	}
	p := kr.key.prefix
	switch u.Type {
	case unix.RTM_NEWROUTE:
		switch {
		case u.Family == unix.AF_INET6 && u.NlFlags&unix.NLM_F_REPLACE == 0:
			// IPv6 keeps the next hops of a multipath route as sibling
			// routes: an append, or an add of an existing prefix and
			// metric, adds siblings.
			m.mergeRoute(kr)
		case u.Family == unix.AF_INET && u.NlFlags&unix.NLM_F_APPEND != 0:
			// ip route append: IPv4 keeps the new alias behind the routes
			// of the same prefix and metric; the first stays in use.
			m.appendRoute(kr)
		case u.Family == unix.AF_INET && u.NlFlags&unix.NLM_F_REPLACE == 0:
			// ip route prepend (an add without replace or append): the
			// new alias goes first and is the one in use.
			m.prependRoute(kr)
		default:
			m.setRoute(kr)
		}
	case unix.RTM_DELROUTE:
		m.delRoute(kr, u.Family == unix.AF_INET6)
	default:
		return netip.Prefix{}, false
	}
	return p, true
}

func (m *Mirror) find(k kkey) int {
	return slices.IndexFunc(m.byPrefix[k.prefix], func(x kroute) bool { return x.key.metric == k.metric })
}

// setRoute stores kr in place of the first kernel route with its prefix
// and metric (a replace), or adds it.
func (m *Mirror) setRoute(kr kroute) {
	if i := m.find(kr.key); i >= 0 {
		m.byPrefix[kr.key.prefix][i] = kr
		return
	}
	m.insertAt(kr, m.firstAbove(kr.key, false))
}

// appendRoute adds kr behind the routes of its prefix and metric.
func (m *Mirror) appendRoute(kr kroute) {
	if !m.hasAlias(kr) {
		m.insertAt(kr, m.firstAbove(kr.key, true))
	}
}

// prependRoute adds kr before the routes of its prefix and metric.
func (m *Mirror) prependRoute(kr kroute) {
	if !m.hasAlias(kr) {
		m.insertAt(kr, m.firstAbove(kr.key, false))
	}
}

// hasAlias reports whether an IPv4 alias equal to kr (prefix, metric and
// next hops) is in the mirror. The kernel refuses a second such alias
// (EEXIST), so a message that adds one the mirror holds is a change it has
// applied already: one read while a dump loaded (session) and replayed
// on the dump, which had caught it. Added again, it would outlive the
// message that deletes it.
func (m *Mirror) hasAlias(kr kroute) bool {
	return slices.ContainsFunc(m.byPrefix[kr.key.prefix], func(x kroute) bool {
		return x.key == kr.key && slices.Equal(x.hops, kr.hops)
	})
}

// firstAbove is where a route of k's metric goes in its prefix's list
// (sorted by metric, aliases in the kernel's order): before the first route
// of a higher metric (same: true) or of the same or a higher one.
func (m *Mirror) firstAbove(k kkey, same bool) int {
	l := m.byPrefix[k.prefix]
	i := 0
	for i < len(l) && (l[i].key.metric < k.metric || same && l[i].key.metric == k.metric) {
		i++
	}
	return i
}

func (m *Mirror) insertAt(kr kroute, i int) {
	m.byPrefix[kr.key.prefix] = slices.Insert(m.byPrefix[kr.key.prefix], i, kr)
	m.nroutes.Add(1)
}

func (m *Mirror) mergeRoute(kr kroute) {
	if i := m.find(kr.key); i >= 0 {
		m.byPrefix[kr.key.prefix][i].merge(kr)
		return
	}
	m.setRoute(kr)
}

// delRoute removes the kernel route; for IPv6, a message naming only some of
// a multipath route's next hops removes those siblings; for IPv4, the alias
// whose next hops the message names.
func (m *Mirror) delRoute(kr kroute, v6 bool) {
	i := m.find(kr.key)
	if i < 0 {
		return
	}
	l := m.byPrefix[kr.key.prefix]
	if !v6 {
		// The kernel deleted one alias of the prefix and metric, the
		// message names its next hops: that one (else the first).
		if j := slices.IndexFunc(l, func(x kroute) bool { return x.key == kr.key && slices.Equal(x.hops, kr.hops) }); j >= 0 {
			i = j
		}
	}
	if v6 && len(kr.hops) < len(l[i].hops) && l[i].remove(kr) {
		return
	}
	l = slices.Delete(l, i, i+1)
	m.nroutes.Add(-1)
	if len(l) == 0 {
		delete(m.byPrefix, kr.key.prefix)
		return
	}
	m.byPrefix[kr.key.prefix] = l
}

// desired returns the route the table should hold for p: the kernel's
// lowest-metric route, if all its next hops are on gswitch ports.
func (m *Mirror) desired(p netip.Prefix) (route.Route, bool) {
	l := m.byPrefix[p]
	if len(l) == 0 {
		return route.Route{}, false
	}
	r, ifindex, ok := l[0].toRoute(m.cfg.Table, m.cfg.PortOf)
	if !ok {
		m.skipped.Add(1)
		m.log.Debug("kernel FIB mirror: route through an interface that is not a gswitch port skipped", "prefix", p, "ifindex", ifindex)
	}
	return r, ok
}

// reconcile makes the table's route for p what the kernel state says.
func (m *Mirror) reconcile(p netip.Prefix) { m.reconcileAll([]netip.Prefix{p}) }

// reconcileAll makes the table's routes for ps what the kernel state says,
// as one route.Table.Update; should that fail (one route the table
// refuses), each change is applied alone, so that the others still land.
func (m *Mirror) reconcileAll(ps []netip.Prefix) {
	var cs []route.Change
	for _, p := range ps {
		want, ok := m.desired(p)
		cur, have := m.tb.Get(p)
		switch {
		case ok:
			if !have || !cur.Route.Equal(want) {
				cs = append(cs, route.Change{Route: want})
			}
		case have && cur.Source == route.SourceKernel:
			cs = append(cs, route.Change{Route: route.Route{Prefix: p}, Delete: true})
		}
	}
	if len(cs) == 0 {
		return
	}
	if len(cs) > 1 {
		if err := m.tb.Update(cs); err == nil {
			for _, c := range cs {
				if c.Delete {
					m.deletes.Add(1)
				} else {
					m.adds.Add(1)
				}
			}
			return
		}
	}
	for _, c := range cs {
		if !c.Delete {
			m.install(c.Route)
		} else if err := m.tb.Delete(c.Route.Prefix); err == nil {
			m.deletes.Add(1)
		}
	}
}

func (m *Mirror) install(r route.Route) {
	if err := m.tb.Add(r); err != nil {
		m.rejected.Add(1)
		m.log.Warn("kernel FIB mirror: route rejected", "table", m.cfg.Table, "err", err)
		return
	}
	m.adds.Add(1)
}
