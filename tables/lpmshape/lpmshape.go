package lpmshape

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"math/bits"
	"net/netip"
	"slices"
	"sync"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
)

// DefaultIDBase is the image id base a Shape takes when its Config
// gives none: flow table t's group slot s is at IDBase | t<<16 | s. The
// daemon's flow tables are ids 0..253 and the L3 router's route tables
// start at 1<<20 (datapath/l3.TableIDBase), below this range; an
// allocator of engine table ids hands bases out through Config.IDBase.
const DefaultIDBase uint32 = 1 << 24

// Images is where a Shape keeps the LPM images of its groups and looks
// packets up in them: the switch's lookup engine (gpu.Engine, through an
// adapter that maps ids and families onto its table ids and kinds). Load
// replaces an image whole; Apply applies an image's update and returns
// once later lookups see it.
type Images interface {
	Load(id uint32, fam lpm.Family, im *bubble.Image) error
	Apply(id uint32, u bubble.Update) error
	LookupLPM4(id uint32, addrs []uint32, out []uint32) error
	LookupLPM6(id uint32, addrs []lpm.Addr6, out []uint32) error
}

// Config configures a Shape.
type Config struct {
	// Table is the flow table's id: in image ids and log lines.
	Table uint8
	// IDBase is the first image id (default DefaultIDBase); the ids used
	// are IDBase | Table<<16 | slot, slot < MaxGroups.
	IDBase uint32
	// Images holds the groups' images (required).
	Images Images
	// Logger logs transitions and failures (default slog.Default()).
	Logger *slog.Logger
}

// MaxGroups bounds the groups (family x in_port key) of one flow table:
// a rule that would need another group makes the table "foreign".
const MaxGroups = 1024

// wildPort is the in_port key of rules without in_port.
const wildPort = uint64(1) << 32

// Priorities in the trie are int32 so that "none" sits outside 0..65535.
const (
	noPrioMin int32 = 1 << 17 // the minimum of no priorities
	noPrioMax int32 = -1      // the maximum of no priorities
)

// imageID is the image id of group slot slot.
func (l *Shape) imageID(slot int) uint32 {
	return l.base | uint32(l.tid)<<16 | uint32(slot)
}

// lpmForm is one rule as the shape tracker sees it.
type lpmForm struct {
	live    bool         // in the groups (an LPM-form rule)
	foreign bool         // counted in Shape.foreign
	anyFam  bool         // no eth_type: /0 of both families and the non-IP default
	fam     lpm.Family   // the family of a rule with eth_type
	port    uint64       // in_port, or wildPort
	pfx     netip.Prefix // its ip_dst prefix (/0 without ip_dst); anyFam: unused
	prio    uint16
}

// lpmFormOf reads a match as an LPM form: optional exact in_port, then
// nothing else (any family) or eth_type 0x0800/0x86dd exactly with an
// optional ipv4_dst/ipv6_dst prefix. ok is false for any other match.
func lpmFormOf(m *flow.Match) (f lpmForm, ok bool) {
	rest := *m
	f.port = wildPort
	if rest.Has(flow.FieldInPort) {
		v, mk := rest.GetUint(flow.FieldInPort)
		if mk != 0xffffffff {
			return f, false
		}
		f.port = v
		rest.Clear(flow.FieldInPort)
	}
	if !rest.Has(flow.FieldEthType) {
		f.anyFam = true
		return f, rest.IsAll()
	}
	et, mk := rest.GetUint(flow.FieldEthType)
	if mk != 0xffff {
		return f, false
	}
	rest.Clear(flow.FieldEthType)
	switch et {
	case flow.EthTypeIPv4:
		f.fam = lpm.IPv4
		v, mk := rest.GetUint(flow.FieldIPv4Dst)
		rest.Clear(flow.FieldIPv4Dst)
		l := bits.LeadingZeros32(^uint32(mk))
		if uint32(mk) != ^uint32(0)<<(32-l) || uint32(v)&^uint32(mk) != 0 {
			return f, false
		}
		var a [4]byte
		binary.BigEndian.PutUint32(a[:], uint32(v))
		f.pfx = netip.PrefixFrom(netip.AddrFrom4(a), l)
	case flow.EthTypeIPv6:
		f.fam = lpm.IPv6
		v, mk := rest.Get(flow.FieldIPv6Dst)
		rest.Clear(flow.FieldIPv6Dst)
		mhi, mlo := binary.BigEndian.Uint64(mk[:8]), binary.BigEndian.Uint64(mk[8:])
		l := bits.LeadingZeros64(^mhi)
		if l == 64 {
			l += bits.LeadingZeros64(^mlo)
		}
		if whi, wlo := prefixMask(l); mhi != whi || mlo != wlo {
			return f, false
		}
		f.pfx = netip.PrefixFrom(netip.AddrFrom16([16]byte(v)), l)
	default:
		return f, false
	}
	return f, rest.IsAll()
}

// prefixMask returns the 128-bit mask of the first l bits.
func prefixMask(l int) (hi, lo uint64) {
	switch {
	case l == 0:
		return 0, 0
	case l <= 64:
		return ^uint64(0) << (64 - l), 0
	}
	return ^uint64(0), ^uint64(0) << (128 - l)
}

// prefixBits returns p's address left-aligned in 128 bits and its length.
func prefixBits(p netip.Prefix) (hi, lo uint64, l int) {
	a := p.Addr().As16()
	if p.Addr().Is4() {
		return uint64(binary.BigEndian.Uint32(a[12:])) << 32, 0, p.Bits()
	}
	return binary.BigEndian.Uint64(a[:8]), binary.BigEndian.Uint64(a[8:]), p.Bits()
}

// bitAt returns bit d (0: the most significant) of a left-aligned address.
func bitAt(hi, lo uint64, d int) int {
	if d < 64 {
		return int(hi >> (63 - d) & 1)
	}
	return int(lo >> (127 - d) & 1)
}

// famIndex is a family's index in Shape.fams.
func famIndex(f lpm.Family) int {
	if f == lpm.IPv6 {
		return 1
	}
	return 0
}

var zeroPrefix = [2]netip.Prefix{netip.PrefixFrom(netip.IPv4Unspecified(), 0), netip.PrefixFrom(netip.IPv6Unspecified(), 0)}

// lpmGroup is the rules of one family with one in_port key: per prefix
// the rules there, best rank first; their priority trie; and the LPM table
// whose leaf at a prefix is that prefix's best rule + 1. The LPM table is
// made when the flow table is LPM-shaped and the group holds a prefix
// longer than /0; a group of /0 rules alone (the table-miss entry's, say)
// has none and answers every packet with def.
type lpmGroup struct {
	fam      lpm.Family
	port     uint64
	slot     int
	at       map[netip.Prefix][]flow.RuleID
	def      flow.RuleID // the best rule at /0 (flow.NoMatch: none)
	specific int         // prefixes longer than /0 in at
	trie     prioTrie
	lt       *lpm.Table // nil until needed (see above)
	dirty    bool       // bubbles not yet applied to the classifier
	broken   bool       // the classifier holds no current image of it
	dead     bool       // removed; its slot is free
}

// lpmFamily is one family's groups: the wildcard in_port group and one
// per in_port value.
type lpmFamily struct {
	wild  *lpmGroup
	ports map[uint32]*lpmGroup
}

// Shape tracks one flow table's shape and serves it by LPM while it is
// LPM-shaped. It is not safe for concurrent use: the caller serializes
// changes (Add, Remove, Sync, SetEnabled) against each other and against
// lookups (Lookup, Serves, Search, Info), which may run concurrently with
// each other (the pipeline: changes under its write lock, lookups under
// its read lock).
type Shape struct {
	tid  uint8
	base uint32
	cls  Images
	log  *slog.Logger

	forms     []lpmForm // by RuleID
	foreign   int       // rules not of the LPM form
	famRules  int       // live rules with an eth_type (at least one makes a table LPM-shaped)
	conflicts int       // trie nodes whose priorities break longest-prefix order
	broken    int       // groups whose image the classifier does not hold
	unbuilt   int       // groups with prefixes longer than /0 but no LPM table yet
	fams      [2]lpmFamily
	anyIP     map[uint64][]flow.RuleID // any-family rules by in_port key, best first
	bySlot    []*lpmGroup
	freeSlots []int
	groups    int
	dirty     []*lpmGroup

	off     bool // LPM serving disabled (benchmarks compare with the classifier)
	serving bool
	toLPM   uint64 // transitions to LPM serving
	toFlow  uint64 // transitions back to the classifier
}

// New returns the shape tracker of an empty flow table.
func New(cfg Config) *Shape {
	if cfg.IDBase == 0 {
		cfg.IDBase = DefaultIDBase
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Shape{tid: cfg.Table, base: cfg.IDBase, cls: cfg.Images, log: cfg.Logger, anyIP: map[uint64][]flow.RuleID{}}
	for i := range l.fams {
		l.fams[i].ports = map[uint32]*lpmGroup{}
	}
	return l
}

// SetEnabled turns LPM serving on (the default) or off, so that a
// benchmark compares both on one table; the shape is kept either way.
func (l *Shape) SetEnabled(on bool) {
	l.off = !on
	l.Sync()
}

// Serves reports whether lookups of the table go to its LPM tables.
func (l *Shape) Serves() bool { return l.serving }

// shaped says whether the table is LPM-shaped: only LPM-form rules, at
// least one with an eth_type, no priority conflict (its images aside).
func (l *Shape) shaped() bool {
	return !l.off && l.foreign == 0 && l.famRules > 0 && l.conflicts == 0
}

// better reports whether rule a ranks above rule b (flow.Rank).
func (l *Shape) better(a, b flow.RuleID) bool {
	return flow.Rank(l.forms[a].prio, a) > flow.Rank(l.forms[b].prio, b)
}

// insertRanked adds id to a best-first list.
func (l *Shape) insertRanked(list []flow.RuleID, id flow.RuleID) []flow.RuleID {
	i := 0
	for i < len(list) && l.better(list[i], id) {
		i++
	}
	return slices.Insert(list, i, id)
}

// Add reads a rule just added to the flow table under id.
func (l *Shape) Add(id flow.RuleID, r *flow.Rule) {
	for int(id) >= len(l.forms) {
		l.forms = append(l.forms, lpmForm{})
	}
	f, ok := lpmFormOf(&r.Match)
	f.prio = r.Priority
	// The leaf holds id+1 in 24 bits; a rule needing a group the table
	// has no slot for cannot be served either.
	if !ok || uint32(id) >= lpm.MaxNextHop || l.newGroups(&f) > MaxGroups-l.groups {
		f.foreign = true
		l.forms[id] = f
		l.foreign++
		return
	}
	f.live = true
	l.forms[id] = f
	if f.anyFam {
		l.anyIP[f.port] = l.insertRanked(l.anyIP[f.port], id)
		l.place(lpm.IPv4, f.port, zeroPrefix[0], id, 1)
		l.place(lpm.IPv6, f.port, zeroPrefix[1], id, 1)
		return
	}
	l.famRules++
	l.place(f.fam, f.port, f.pfx, id, 1)
}

// Remove forgets a rule just deleted from the flow table.
func (l *Shape) Remove(id flow.RuleID) {
	if int(id) >= len(l.forms) {
		return
	}
	f := &l.forms[id]
	switch {
	case f.foreign:
		l.foreign--
	case !f.live:
	case f.anyFam:
		l.anyIP[f.port] = slices.DeleteFunc(l.anyIP[f.port], func(x flow.RuleID) bool { return x == id })
		if len(l.anyIP[f.port]) == 0 {
			delete(l.anyIP, f.port)
		}
		l.place(lpm.IPv4, f.port, zeroPrefix[0], id, -1)
		l.place(lpm.IPv6, f.port, zeroPrefix[1], id, -1)
	default:
		l.famRules--
		l.place(f.fam, f.port, f.pfx, id, -1)
	}
	l.forms[id] = lpmForm{}
}

// newGroups counts the groups a rule of form f would have to create.
func (l *Shape) newGroups(f *lpmForm) int {
	n := 0
	for i := range l.fams {
		if !f.anyFam && famIndex(f.fam) != i {
			continue
		}
		fa := &l.fams[i]
		if f.port == wildPort && fa.wild == nil || f.port != wildPort && fa.ports[uint32(f.port)] == nil {
			n++
		}
	}
	return n
}

// group returns the group of (fam, port), creating it when asked.
func (l *Shape) group(fam lpm.Family, port uint64, create bool) *lpmGroup {
	fa := &l.fams[famIndex(fam)]
	var g *lpmGroup
	if port == wildPort {
		g = fa.wild
	} else {
		g = fa.ports[uint32(port)]
	}
	if g != nil || !create {
		return g
	}
	g = &lpmGroup{fam: fam, port: port, at: map[netip.Prefix][]flow.RuleID{}, def: flow.NoMatch, trie: newPrioTrie(&l.conflicts)}
	if n := len(l.freeSlots); n > 0 {
		g.slot, l.freeSlots = l.freeSlots[n-1], l.freeSlots[:n-1]
		l.bySlot[g.slot] = g
	} else {
		g.slot = len(l.bySlot)
		l.bySlot = append(l.bySlot, g)
	}
	l.groups++
	if port == wildPort {
		fa.wild = g
	} else {
		fa.ports[uint32(port)] = g
	}
	return g
}

// build makes a group's LPM table from its prefixes and loads its image
// into the classifier.
func (l *Shape) build(g *lpmGroup) {
	routes := make([]lpm.Route, 0, len(g.at))
	for p, list := range g.at {
		routes = append(routes, lpm.Route{Prefix: p, NextHop: uint32(list[0]) + 1})
	}
	lt, err := lpm.Build(g.fam, routes, lpm.Options{})
	if err == nil {
		err = l.cls.Load(l.imageID(g.slot), g.fam, lt.Mirror().Sync().Full)
	}
	l.unbuilt--
	if err != nil {
		l.log.Error("lpmshape: LPM image of a flow table not loaded; the classifier serves the table", "table", l.tid, "family", g.fam, "err", err)
		g.broken = true
		l.broken++
		return
	}
	g.lt = lt
}

// dropGroup removes an empty group: its slot is freed and an empty image
// replaces its own in the classifier (releasing the memory).
func (l *Shape) dropGroup(g *lpmGroup) {
	fa := &l.fams[famIndex(g.fam)]
	if g.port == wildPort {
		fa.wild = nil
	} else {
		delete(fa.ports, uint32(g.port))
	}
	if g.broken {
		l.broken--
	}
	g.dead = true
	l.bySlot[g.slot] = nil
	l.freeSlots = append(l.freeSlots, g.slot)
	l.groups--
	if g.lt == nil {
		return
	}
	// The classifier cannot drop a table: a tiny empty image (no free
	// nodes) takes the place of the old one until the slot is reused.
	if lt, err := lpm.New(g.fam, lpm.Options{MinFree: -1, HeadRoom: -1}); err == nil {
		_ = l.cls.Load(l.imageID(g.slot), g.fam, lt.Mirror().Sync().Full)
	}
}

// place adds (delta 1) or removes (delta -1) rule id at prefix p of group
// (fam, port): the prefix's list, the LPM leaf, the trie and the conflicts
// it affects.
func (l *Shape) place(fam lpm.Family, port uint64, p netip.Prefix, id flow.RuleID, delta int32) {
	g := l.group(fam, port, delta > 0)
	if g == nil {
		return
	}
	list := g.at[p]
	var head flow.RuleID = flow.NoMatch
	if len(list) > 0 {
		head = list[0]
	}
	if delta > 0 {
		list = l.insertRanked(list, id)
	} else {
		list = slices.DeleteFunc(list, func(x flow.RuleID) bool { return x == id })
	}
	mn, mx := noPrioMin, noPrioMax
	if len(list) == 0 {
		delete(g.at, p)
	} else {
		g.at[p] = list
		mx, mn = int32(l.forms[list[0]].prio), int32(l.forms[list[len(list)-1]].prio)
	}
	l.count(g, p, head, list)
	l.setLeaf(g, p, head, list)
	hi, lo, plen := prefixBits(p)
	g.trie.set(hi, lo, plen, mn, mx, delta)
	fa := &l.fams[famIndex(fam)]
	if port == wildPort {
		g.trie.recheck(nil, hi, lo, plen)
		for _, pg := range fa.ports {
			pg.trie.recheck(&g.trie, hi, lo, plen)
		}
	} else {
		var w *prioTrie
		if fa.wild != nil {
			w = &fa.wild.trie
		}
		g.trie.recheck(w, hi, lo, plen)
	}
	if g.trie.nodes[0].rules == 0 {
		l.dropGroup(g)
	}
}

// count keeps the group's default rule and its count of prefixes longer
// than /0 after p's list changed (old: its previous best rule).
func (l *Shape) count(g *lpmGroup, p netip.Prefix, old flow.RuleID, list []flow.RuleID) {
	if p.Bits() == 0 {
		g.def = flow.NoMatch
		if len(list) > 0 {
			g.def = list[0]
		}
		return
	}
	d := 0
	switch {
	case old == flow.NoMatch && len(list) > 0:
		d = 1
	case old != flow.NoMatch && len(list) == 0:
		d = -1
	}
	g.specific += d
	if g.lt == nil && !g.broken && (d == 1 && g.specific == 1 || d == -1 && g.specific == 0) {
		l.unbuilt += d
	}
}

// setLeaf writes the LPM leaf of prefix p after its list changed (old: the
// previous best rule).
func (l *Shape) setLeaf(g *lpmGroup, p netip.Prefix, old flow.RuleID, list []flow.RuleID) {
	if g.broken || g.lt == nil {
		return
	}
	var err error
	switch {
	case len(list) == 0:
		err = g.lt.Delete(p)
	case list[0] != old:
		err = g.lt.Insert(p, uint32(list[0])+1)
	default:
		return
	}
	if err != nil {
		l.log.Error("lpmshape: LPM table of a flow table rejected a change; the classifier serves the table", "table", l.tid, "prefix", p, "err", err)
		g.broken = true
		l.broken++
		return
	}
	if !g.dirty {
		g.dirty = true
		l.dirty = append(l.dirty, g)
	}
}

// Sync applies the LPM tables' changes to the classifier (Apply returns
// once later lookups see them; an image it rejects is reloaded whole) and
// switches the table between LPM and classifier serving when its shape
// changed.
func (l *Shape) Sync() {
	for _, g := range l.dirty {
		g.dirty = false
		if g.dead || g.broken {
			continue
		}
		u := g.lt.Mirror().Sync()
		if u.Full == nil && len(u.Bubbles) == 0 {
			continue
		}
		if err := l.cls.Apply(l.imageID(g.slot), u); err != nil {
			l.log.Error("lpmshape: classifier rejected an LPM update; reloading the image", "table", l.tid, "family", g.fam, "err", err)
			if lerr := l.cls.Load(l.imageID(g.slot), g.fam, g.lt.Mirror().Image().Clone()); lerr != nil {
				l.log.Error("lpmshape: LPM image not reloaded; the classifier serves the table", "table", l.tid, "err", lerr)
				g.broken = true
				l.broken++
			}
		}
	}
	clear(l.dirty)
	l.dirty = l.dirty[:0]
	shaped := l.shaped()
	if shaped && l.unbuilt > 0 {
		for _, g := range l.bySlot {
			if g != nil && g.lt == nil && !g.broken && g.specific > 0 {
				l.build(g)
			}
		}
	}
	now := shaped && l.broken == 0 && l.unbuilt == 0
	if now == l.serving {
		return
	}
	l.serving = now
	if now {
		l.toLPM++
		l.log.Info("lpmshape: flow table is LPM-shaped; served by longest-prefix match", "table", l.tid, "rules", l.famRules)
	} else {
		l.toFlow++
		l.log.Info("lpmshape: flow table no longer LPM-shaped; served by the classifier", "table", l.tid,
			"foreign_rules", l.foreign, "priority_conflicts", l.conflicts, "broken_images", l.broken)
	}
}

// Search names how the table is searched now: "lpm" or the classifier's
// algorithm.
func (l *Shape) Search(algo flow.Algo) string {
	if l.serving {
		return "lpm"
	}
	return algo.String()
}

// Info describes a flow table's LPM shape, for the control socket and
// metrics.
type Info struct {
	Shaped      bool   // served by LPM now
	Rules       int    // rules of the LPM form with an eth_type
	Foreign     int    // rules of another form
	Conflicts   int    // trie nodes whose priorities break longest-prefix order
	Groups      int    // rule groups (family x in_port key)
	Images      int    // groups with an LPM table (the others hold /0 rules only)
	Prefixes    int    // prefixes in the groups
	Transitions uint64 // changes between LPM and classifier serving
	Broken      int    // groups whose image the classifier does not hold
}

func (l *Shape) Info() Info {
	in := Info{Shaped: l.serving, Rules: l.famRules, Foreign: l.foreign, Conflicts: l.conflicts,
		Groups: l.groups, Transitions: l.toLPM + l.toFlow, Broken: l.broken}
	for _, g := range l.bySlot {
		if g != nil {
			in.Prefixes += len(g.at)
			if g.lt != nil {
				in.Images++
			}
		}
	}
	return in
}

// Key layout of the fields the LPM lookup reads, from tables/flow's table.
var (
	keyInPort  = flow.FieldInPort.Info().Parts[0]
	keyEthType = flow.FieldEthType.Info().Parts[0]
	keyIPv4Dst = flow.FieldIPv4Dst.Info().Parts[0]
	keyIPv6Dst = flow.FieldIPv6Dst.Info().Parts
)

func init() {
	// lookup reads these words whole; say so loudly if tables/flow moves them.
	if keyInPort.Width != 32 || keyIPv4Dst.Width != 32 || len(keyIPv6Dst) != 4 || keyEthType.Width != 16 {
		panic(fmt.Sprintf("lpmshape: unexpected key layout of in_port/eth_type/ip_dst: %v %v %v %v", keyInPort, keyEthType, keyIPv4Dst, keyIPv6Dst))
	}
	for _, p := range keyIPv6Dst {
		if p.Width != 32 {
			panic("lpmshape: unexpected key layout of ipv6_dst")
		}
	}
}

// lpmBatch is one group's share of a lookup batch.
type lpmBatch struct {
	idx []int32
	a4  []uint32
	a6  []lpm.Addr6
	res []uint32
}

// lpmScratch is a lookup's buffers, one batch per group slot.
type lpmScratch struct {
	b    []lpmBatch
	used []int
}

var lpmScratchPool = sync.Pool{New: func() any { return new(lpmScratch) }}

func (sc *lpmScratch) batch(slot int) *lpmBatch {
	for slot >= len(sc.b) {
		sc.b = append(sc.b, lpmBatch{})
	}
	b := &sc.b[slot]
	if len(b.idx) == 0 {
		sc.used = append(sc.used, slot)
	}
	return b
}

// Lookup finds each key's rule by LPM (the table must be LPM-shaped):
// per family one batch for the wildcard group and one per in_port group
// present, each looked up in its image through the classifier; a packet
// takes the better-ranked of its groups' answers. A packet of
// neither family takes the best any-family rule of its in_port. out[i] is
// flow.NoMatch where no rule matches.
func (l *Shape) Lookup(keys []flow.Key, out []flow.RuleID) error {
	sc := lpmScratchPool.Get().(*lpmScratch)
	defer lpmScratchPool.Put(sc)
	v4, v6 := &l.fams[0], &l.fams[1]
	for i := range keys {
		k := &keys[i]
		out[i] = flow.NoMatch
		port := k[keyInPort.Word]
		switch k[keyEthType.Word] >> keyEthType.Shift & 0xffff {
		case flow.EthTypeIPv4:
			a := k[keyIPv4Dst.Word]
			if g := v4.wild; g != nil {
				l.route4(sc, g, i, a, out)
			}
			if len(v4.ports) > 0 {
				if g := v4.ports[port]; g != nil {
					l.route4(sc, g, i, a, out)
				}
			}
		case flow.EthTypeIPv6:
			p := keyIPv6Dst
			a := lpm.Addr6{Hi: uint64(k[p[0].Word])<<32 | uint64(k[p[1].Word]), Lo: uint64(k[p[2].Word])<<32 | uint64(k[p[3].Word])}
			if g := v6.wild; g != nil {
				l.route6(sc, g, i, a, out)
			}
			if len(v6.ports) > 0 {
				if g := v6.ports[port]; g != nil {
					l.route6(sc, g, i, a, out)
				}
			}
		default:
			out[i] = l.nonIP(port)
		}
	}
	var err error
	for _, slot := range sc.used {
		b := &sc.b[slot]
		if err == nil {
			err = l.lookupGroup(l.bySlot[slot], b, out)
		}
		b.idx, b.a4, b.a6 = b.idx[:0], b.a4[:0], b.a6[:0]
	}
	sc.used = sc.used[:0]
	return err
}

// route4 sends packet i to g's batch, or gives it g's default rule when g
// has no LPM table (its rules are all /0).
func (l *Shape) route4(sc *lpmScratch, g *lpmGroup, i int, a uint32, out []flow.RuleID) {
	if g.lt == nil {
		l.merge(out, i, g.def)
		return
	}
	sc.batch(g.slot).add4(i, a)
}

func (l *Shape) route6(sc *lpmScratch, g *lpmGroup, i int, a lpm.Addr6, out []flow.RuleID) {
	if g.lt == nil {
		l.merge(out, i, g.def)
		return
	}
	sc.batch(g.slot).add6(i, a)
}

// merge makes id packet i's rule if it ranks better. Both groups' answers
// match the packet and lie on one chain of prefixes, where the shape makes
// the longer one rank higher: the better rank is the longer prefix (or
// the same prefix's best).
func (l *Shape) merge(out []flow.RuleID, i int, id flow.RuleID) {
	if id != flow.NoMatch && (out[i] == flow.NoMatch || l.better(id, out[i])) {
		out[i] = id
	}
}

func (b *lpmBatch) add4(i int, a uint32) {
	b.idx = append(b.idx, int32(i))
	b.a4 = append(b.a4, a)
}

func (b *lpmBatch) add6(i int, a lpm.Addr6) {
	b.idx = append(b.idx, int32(i))
	b.a6 = append(b.a6, a)
}

// lookupGroup looks one group's batch up and merges the answers into out.
func (l *Shape) lookupGroup(g *lpmGroup, b *lpmBatch, out []flow.RuleID) error {
	n := len(b.idx)
	b.res = slices.Grow(b.res[:0], n)[:n]
	var err error
	if g.fam == lpm.IPv4 {
		err = l.cls.LookupLPM4(l.imageID(g.slot), b.a4, b.res)
	} else {
		err = l.cls.LookupLPM6(l.imageID(g.slot), b.a6, b.res)
	}
	if err != nil {
		return fmt.Errorf("lpmshape: table %d: LPM lookup (%v, slot %d): %w", l.tid, g.fam, g.slot, err)
	}
	for j, leaf := range b.res {
		if leaf != 0 {
			l.merge(out, int(b.idx[j]), flow.RuleID(leaf-1))
		}
	}
	return nil
}

// nonIP returns the rule of a packet of neither family: the best
// any-family rule with its in_port or none.
func (l *Shape) nonIP(port uint32) flow.RuleID {
	best := flow.NoMatch
	if w := l.anyIP[wildPort]; len(w) > 0 {
		best = w[0]
	}
	if p := l.anyIP[uint64(port)]; len(p) > 0 && (best == flow.NoMatch || l.better(p[0], best)) {
		best = p[0]
	}
	return best
}

// prioTrie is a binary trie of the prefixes of one group, holding per node
// the least and greatest priority of the rules at its prefix and the least
// priority strictly below it. Longest-prefix order gives the classifier's
// answer when no node is "bad": a node is bad when its greatest priority is
// not below the least priority under it (some more specific prefix does
// not win over it). For an in_port group the node's figures are combined
// with the wildcard group's node at the same prefix, since packets of
// that port match both groups' rules (recheck). A change at a prefix
// changes only the nodes on its path, so each costs O(prefix length).
type prioTrie struct {
	nodes []pnode // nodes[0] is the root; kid 0 means none
	free  []int32
	path  []int32
	bad   int  // bad nodes in this trie
	total *int // bad nodes in all the table's tries
}

type pnode struct {
	kid      [2]int32
	min, max int32 // priorities of the rules at the node (noPrioMin/Max: none)
	sub      int32 // least priority strictly below the node
	rules    int32 // rules at the node and below
	bad      bool
}

var emptyNode = pnode{min: noPrioMin, max: noPrioMax, sub: noPrioMin}

func newPrioTrie(total *int) prioTrie {
	return prioTrie{nodes: []pnode{emptyNode}, total: total}
}

func (t *prioTrie) alloc() int32 {
	if n := len(t.free); n > 0 {
		x := t.free[n-1]
		t.free = t.free[:n-1]
		t.nodes[x] = emptyNode
		return x
	}
	t.nodes = append(t.nodes, emptyNode)
	return int32(len(t.nodes) - 1)
}

func (t *prioTrie) setBad(x int32, bad bool) {
	if t.nodes[x].bad == bad {
		return
	}
	t.nodes[x].bad = bad
	d := 1
	if !bad {
		d = -1
	}
	t.bad += d
	*t.total += d
}

// set records the new priority range [mn, mx] of the rules at prefix
// (hi, lo)/plen, whose rule count changed by delta, and refreshes the
// subtree minima on its path; nodes left without rules are removed.
func (t *prioTrie) set(hi, lo uint64, plen int, mn, mx, delta int32) {
	path := append(t.path[:0], 0)
	x := int32(0)
	for d := 0; d < plen; d++ {
		b := bitAt(hi, lo, d)
		c := t.nodes[x].kid[b]
		if c == 0 {
			c = t.alloc()
			t.nodes[x].kid[b] = c
		}
		x = c
		path = append(path, x)
	}
	t.nodes[x].min, t.nodes[x].max = mn, mx
	for _, y := range path {
		t.nodes[y].rules += delta
	}
	for d := plen; d >= 0; d-- {
		nd := &t.nodes[path[d]]
		sub := noPrioMin
		for _, c := range nd.kid {
			if c != 0 {
				sub = min(sub, t.nodes[c].min, t.nodes[c].sub)
			}
		}
		nd.sub = sub
	}
	for d := plen; d > 0 && t.nodes[path[d]].rules == 0; d-- {
		y := path[d]
		t.nodes[path[d-1]].kid[bitAt(hi, lo, d-1)] = 0
		t.setBad(y, false)
		t.free = append(t.free, y)
	}
	t.path = path
}

// recheck recomputes whether the nodes on the path to (hi, lo)/plen are
// bad, combining each with the node at the same prefix of w (the wildcard
// group's trie, for an in_port group; nil for the wildcard group itself).
func (t *prioTrie) recheck(w *prioTrie, hi, lo uint64, plen int) {
	x, y := int32(0), int32(-1)
	if w != nil {
		y = 0
	}
	for d := 0; ; d++ {
		nd := &t.nodes[x]
		mx, sub := nd.max, nd.sub
		if y >= 0 {
			wn := &w.nodes[y]
			mx, sub = max(mx, wn.max), min(sub, wn.sub)
		}
		t.setBad(x, mx >= sub)
		if d == plen {
			return
		}
		b := bitAt(hi, lo, d)
		if x = nd.kid[b]; x == 0 {
			return
		}
		if y >= 0 {
			if y = w.nodes[y].kid[b]; y == 0 {
				y = -1
			}
		}
	}
}
