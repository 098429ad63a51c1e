package l3

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// NeighState is the state of a neighbour entry (a simplified RFC 4861
// §7.3.2 machine; ARP entries follow the same one).
type NeighState uint8

// The states.
const (
	// Incomplete: solicitations sent, no answer yet; packets wait in the
	// entry's queue.
	Incomplete NeighState = iota + 1
	// Reachable: confirmed (a solicited reply) less than ReachableTime ago.
	Reachable
	// Stale: the confirmation is older than ReachableTime, or the address
	// was learned from the neighbour's own request. Packets are still
	// forwarded for StaleTime more while unicast probes ask for a fresh
	// confirmation; after that the entry is not used again until a reply
	// arrives (it goes back to Incomplete).
	Stale
	// Failed: MaxProbes solicitations went unanswered; the queued packets
	// were dropped. New packets are dropped for RetransTime, then
	// resolution starts again.
	Failed
	// Kernel: an entry mirrored from the kernel's neighbour table
	// (neighbour mode "kernel"); usable while the kernel says so.
	Kernel
)

func (s NeighState) String() string {
	switch s {
	case Incomplete:
		return "incomplete"
	case Reachable:
		return "reachable"
	case Stale:
		return "stale"
	case Failed:
		return "failed"
	case Kernel:
		return "kernel"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// NeighConfig tunes the neighbour table; zero fields take the defaults.
type NeighConfig struct {
	ReachableTime time.Duration // default 30 s (RFC 4861's REACHABLE_TIME)
	StaleTime     time.Duration // usable grace after ReachableTime while probing; default 5 s
	RetransTime   time.Duration // between solicitations; default 1 s
	MaxProbes     int           // solicitations before Failed; default 3
	QueueLen      int           // packets waiting per neighbour; default 16
	MaxEntries    int           // entries at most; default 4096
	GCTime        time.Duration // an entry unused this long is removed; default 5 min
}

func (c *NeighConfig) normalize() {
	if c.ReachableTime <= 0 {
		c.ReachableTime = 30 * time.Second
	}
	if c.StaleTime <= 0 {
		c.StaleTime = 5 * time.Second
	}
	if c.RetransTime <= 0 {
		c.RetransTime = time.Second
	}
	if c.MaxProbes <= 0 {
		c.MaxProbes = 3
	}
	if c.QueueLen <= 0 {
		c.QueueLen = 16
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = 4096
	}
	if c.GCTime <= 0 {
		c.GCTime = 5 * time.Minute
	}
}

// NeighKey names a neighbour: an address on a port.
type NeighKey struct {
	Port uint32
	Addr netip.Addr
}

type neighbour struct {
	state     NeighState
	mac       MAC
	confirmed time.Time // last confirmation (Reachable, Stale)
	used      time.Time
	probes    int       // solicitations sent in the current round
	nextProbe time.Time // when the next is due (zero: none pending)
	failedAt  time.Time
	queue     [][]byte // packets waiting (Incomplete), MACs not yet written
}

// Neighbours is the neighbour table: one entry per (port, address), the
// state machine, and the queues of packets waiting for resolution. Its
// methods take the clock reading as an argument, so tests drive time.
// Safe for concurrent use.
type Neighbours struct {
	cfg NeighConfig
	mu  sync.Mutex
	m   map[NeighKey]*neighbour
}

// NewNeighbours returns an empty table.
func NewNeighbours(cfg NeighConfig) *Neighbours {
	cfg.normalize()
	return &Neighbours{cfg: cfg, m: map[NeighKey]*neighbour{}}
}

// Verdict is what to do with a packet for a neighbour.
type Verdict uint8

// The verdicts of Resolve.
const (
	// Send: the MAC is known and usable.
	Send Verdict = iota
	// Queued: the packet waits in the entry's queue (the caller gave it up).
	Queued
	// Dropped: the packet is dropped (Resolve's Reason says why).
	Dropped
)

// Resolution is Resolve's answer.
type Resolution struct {
	Verdict Verdict
	MAC     MAC    // for Send
	Reason  Reason // for Dropped; DropQueueFull for Queued when an older packet was pushed out
	// Solicit asks the caller to send a solicitation now: multicast
	// (broadcast ARP) when Unicast is zero, else a unicast probe to it.
	Solicit bool
	Unicast MAC
}

// Resolve decides for one packet to neighbour k at now. A packet that must
// wait is copied into the entry's queue (the caller keeps pkt); a full
// queue drops its oldest packet. kernel is true in neighbour
// mode "kernel": nothing is solicited and an address the kernel has not
// resolved is dropped.
func (n *Neighbours) Resolve(k NeighKey, pkt []byte, now time.Time, kernel bool) Resolution {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.m[k]
	if kernel {
		if e != nil && e.state == Kernel {
			e.used = now
			return Resolution{Verdict: Send, MAC: e.mac}
		}
		return Resolution{Verdict: Dropped, Reason: DropNeighbour}
	}
	if e == nil {
		if len(n.m) >= n.cfg.MaxEntries && !n.evictLocked(now) {
			return Resolution{Verdict: Dropped, Reason: DropNeighbourTable}
		}
		e = &neighbour{}
		n.m[k] = e
		return n.startLocked(e, pkt, now)
	}
	e.used = now
	switch e.state {
	case Reachable:
		if now.Sub(e.confirmed) < n.cfg.ReachableTime {
			return Resolution{Verdict: Send, MAC: e.mac}
		}
		e.state = Stale
		fallthrough
	case Stale:
		age := now.Sub(e.confirmed)
		if age >= n.cfg.ReachableTime+n.cfg.StaleTime {
			return n.startLocked(e, pkt, now) // too old to trust: resolve again
		}
		r := Resolution{Verdict: Send, MAC: e.mac}
		if e.nextProbe.IsZero() {
			e.probes, e.nextProbe = 1, now.Add(n.cfg.RetransTime)
			r.Solicit, r.Unicast = true, e.mac
		}
		return r
	case Incomplete:
		return n.enqueueLocked(e, pkt)
	case Failed:
		if now.Sub(e.failedAt) < n.cfg.RetransTime {
			return Resolution{Verdict: Dropped, Reason: DropNeighbour}
		}
		return n.startLocked(e, pkt, now)
	case Kernel:
		return Resolution{Verdict: Send, MAC: e.mac}
	}
	return Resolution{Verdict: Dropped, Reason: DropNeighbour}
}

// startLocked makes e Incomplete, queues pkt and asks for a multicast
// solicitation.
func (n *Neighbours) startLocked(e *neighbour, pkt []byte, now time.Time) Resolution {
	e.state, e.mac = Incomplete, MAC{}
	e.probes, e.nextProbe, e.used = 1, now.Add(n.cfg.RetransTime), now
	r := n.enqueueLocked(e, pkt)
	r.Solicit = true
	return r
}

func (n *Neighbours) enqueueLocked(e *neighbour, pkt []byte) Resolution {
	r := Resolution{Verdict: Queued}
	if len(e.queue) >= n.cfg.QueueLen {
		copy(e.queue, e.queue[1:])
		e.queue = e.queue[:len(e.queue)-1]
		r.Reason = DropQueueFull
	}
	e.queue = append(e.queue, append([]byte(nil), pkt...))
	return r
}

// evictLocked removes one entry that holds no packets and is not in use
// (Failed first, then the least recently used); false when none can go.
func (n *Neighbours) evictLocked(now time.Time) bool {
	var victim NeighKey
	var oldest time.Time
	found := false
	for k, e := range n.m {
		if e.state == Kernel || len(e.queue) > 0 {
			continue
		}
		if e.state == Failed {
			delete(n.m, k)
			return true
		}
		if !found || e.used.Before(oldest) {
			victim, oldest, found = k, e.used, true
		}
	}
	if found && now.Sub(oldest) > n.cfg.ReachableTime {
		delete(n.m, victim)
		return true
	}
	return false
}

// Confirm records a link-layer address for k learned at now and returns
// the packets that were waiting for it (the caller writes the MAC into
// them and sends them). solicited is true for an answer to our
// solicitation (ARP reply, NA with the S flag): the entry becomes
// Reachable. Otherwise (the neighbour's own ARP request or NS, an
// unsolicited NA with the override flag) it becomes Stale, or stays
// Reachable if the address is the same (RFC 4861 §7.2.3, §7.2.5); create
// says whether such news creates an entry that does not exist.
func (n *Neighbours) Confirm(k NeighKey, mac MAC, solicited, create bool, now time.Time) [][]byte {
	n.mu.Lock()
	defer n.mu.Unlock()
	e := n.m[k]
	if e == nil {
		if !create || len(n.m) >= n.cfg.MaxEntries && !n.evictLocked(now) {
			return nil
		}
		e = &neighbour{used: now}
		n.m[k] = e
	}
	if e.state == Kernel {
		return nil
	}
	switch {
	case solicited:
		e.state, e.confirmed = Reachable, now
	case e.state == Reachable && e.mac == mac && now.Sub(e.confirmed) < n.cfg.ReachableTime:
		// The same address: nothing new.
	default:
		e.state = Stale
		e.confirmed = now.Add(-n.cfg.ReachableTime) // stale from now, with the grace period ahead
	}
	e.mac = mac
	e.probes, e.nextProbe = 0, time.Time{}
	q := e.queue
	e.queue = nil
	return q
}

// SetKernel mirrors the kernel's entry for k: usable true installs or
// refreshes it with mac, false removes it (it went away, failed, or is
// not usable).
func (n *Neighbours) SetKernel(k NeighKey, mac MAC, usable bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !usable {
		if e := n.m[k]; e != nil && e.state == Kernel {
			delete(n.m, k)
		}
		return
	}
	n.m[k] = &neighbour{state: Kernel, mac: mac}
}

// Solicitation is a solicitation Tick asks the caller to send.
type Solicitation struct {
	Key     NeighKey
	Unicast MAC // zero: multicast (broadcast ARP)
}

// Tick runs the timers at now: it returns the solicitations due (retries)
// and the packets dropped because their neighbour failed, and removes
// entries unused for GCTime.
func (n *Neighbours) Tick(now time.Time) (sol []Solicitation, dropped int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, e := range n.m {
		switch {
		case e.state == Kernel:
			continue
		case e.state == Incomplete && !e.nextProbe.After(now):
			if e.probes >= n.cfg.MaxProbes {
				dropped += len(e.queue)
				clear(e.queue)
				e.queue, e.state, e.failedAt, e.nextProbe = nil, Failed, now, time.Time{}
				continue
			}
			e.probes++
			e.nextProbe = now.Add(n.cfg.RetransTime)
			sol = append(sol, Solicitation{Key: k})
		case e.state == Stale && !e.nextProbe.IsZero() && !e.nextProbe.After(now):
			if e.probes >= n.cfg.MaxProbes {
				e.nextProbe = time.Time{} // the grace period ends it
				continue
			}
			e.probes++
			e.nextProbe = now.Add(n.cfg.RetransTime)
			sol = append(sol, Solicitation{Key: k, Unicast: e.mac})
		case len(e.queue) == 0 && now.Sub(e.used) > n.cfg.GCTime:
			delete(n.m, k)
		}
	}
	slices.SortFunc(sol, func(a, b Solicitation) int { return a.Key.Addr.Compare(b.Key.Addr) })
	return sol, dropped
}

// NeighInfo describes one entry (gswitchctl neighbours).
type NeighInfo struct {
	Port   uint32 `json:"port"`
	Addr   string `json:"addr"`
	MAC    string `json:"mac,omitempty"`
	State  string `json:"state"`
	AgeMS  int64  `json:"age_ms"` // since the last confirmation; -1 if never confirmed
	Queued int    `json:"queued"`
}

// Dump lists the entries at now, by port and address. An entry's state is
// reported as it would be used now (a Reachable entry past ReachableTime
// is Stale).
func (n *Neighbours) Dump(now time.Time) []NeighInfo {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]NeighInfo, 0, len(n.m))
	for k, e := range n.m {
		st := e.state
		if st == Reachable && now.Sub(e.confirmed) >= n.cfg.ReachableTime {
			st = Stale
		}
		ni := NeighInfo{Port: k.Port, Addr: k.Addr.String(), State: st.String(), AgeMS: -1, Queued: len(e.queue)}
		if st != Incomplete && st != Failed {
			ni.MAC = e.mac.String()
		}
		if !e.confirmed.IsZero() {
			ni.AgeMS = now.Sub(e.confirmed).Milliseconds()
		}
		out = append(out, ni)
	}
	slices.SortFunc(out, func(a, b NeighInfo) int {
		if a.Port != b.Port {
			return int(int64(a.Port) - int64(b.Port))
		}
		return netip.MustParseAddr(a.Addr).Compare(netip.MustParseAddr(b.Addr))
	})
	return out
}

// Len returns the number of entries.
func (n *Neighbours) Len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.m)
}
