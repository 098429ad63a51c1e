package openflow

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/tables/rule"
)

// Options configure an Agent. Zero fields take the defaults.
type Options struct {
	// EchoInterval: after this long without any message from the
	// controller the agent sends an ECHO_REQUEST (default 5 s).
	EchoInterval time.Duration
	// EchoTimeout: the connection is dropped when nothing arrives for this
	// long after the echo request (default 10 s).
	EchoTimeout time.Duration
	// HelloTimeout bounds the wait for the controller's HELLO (default 10 s).
	HelloTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between attempts of an
	// active connection; it doubles after each failure (default 1 s, 16 s).
	MinBackoff, MaxBackoff time.Duration
	// WriteTimeout bounds every write to a connection, and the wait of a
	// reply for room in the output queue: a peer that reads nothing for
	// this long is dropped (default 10 s).
	WriteTimeout time.Duration
	// MaxOutputBytes bounds the bytes queued for a connection's writer
	// (default 4 MiB). A reply that does not fit waits for the writer,
	// and the connection's requests are not read meanwhile; one that
	// waits WriteTimeout closes the connection. Asynchronous messages
	// (packet-in, flow-removed, port-status, echo requests) that do not
	// fit are dropped.
	MaxOutputBytes int
	// PacketInRate limits the packet-ins sent to each connection, in
	// packets a second, with bursts of PacketInBurst (as Open vSwitch's
	// controller_rate_limit and controller_burst_limit); over the limit
	// they are dropped and counted (PacketInsLimited). Default 1000 a
	// second, bursts of a quarter of the rate (at least 1); a negative
	// PacketInRate turns the limit off.
	PacketInRate  int
	PacketInBurst int
	// MaxMultipartRequest bounds the bytes of the multipart requests a
	// connection is assembling from REQ_MORE parts, all open ones
	// together (default 1 MiB); a part beyond it gets
	// OFPBRC_MULTIPART_BUFFER_OVERFLOW and its request is dropped.
	MaxMultipartRequest int
	// MaxMultipartOpen bounds the multipart requests a connection may
	// have open (REQ_MORE parts received, the last part not yet) at once
	// (default 16); one more gets OFPBRC_MULTIPART_BUFFER_OVERFLOW.
	MaxMultipartOpen int
	// Logf logs connection events (default log.Printf).
	Logf func(format string, args ...any)
	// TLSClient configures active "ssl:"/"tls:" connections (with the
	// controller's CA in RootCAs and, for mutual authentication, the
	// switch's certificate); ServerName defaults to the target's host.
	TLSClient *tls.Config
	// TLSServer configures passive "pssl:"/"ptls:" listeners (the
	// switch's certificate; ClientAuth and ClientCAs to authenticate
	// controllers).
	TLSServer *tls.Config
}

func (o *Options) normalize() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.EchoInterval, 5*time.Second)
	def(&o.EchoTimeout, 10*time.Second)
	def(&o.HelloTimeout, 10*time.Second)
	def(&o.MinBackoff, time.Second)
	def(&o.MaxBackoff, 16*time.Second)
	def(&o.WriteTimeout, 10*time.Second)
	if o.MaxOutputBytes <= 0 {
		o.MaxOutputBytes = 4 << 20
	}
	if o.PacketInRate == 0 {
		o.PacketInRate = 1000
	}
	if o.PacketInBurst <= 0 {
		o.PacketInBurst = max(1, o.PacketInRate/4)
	}
	if o.MaxMultipartOpen <= 0 {
		o.MaxMultipartOpen = 16
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.MaxMultipartRequest <= 0 {
		o.MaxMultipartRequest = 1 << 20
	}
	if o.Logf == nil {
		o.Logf = log.Printf
	}
}

// Agent is the switch side of OpenFlow 1.3 for one Switch, with any number
// of controller connections (passive and active). It holds what the
// connections share: the roles and the master election generation id.
type Agent struct {
	sw   Switch
	opts Options
	xid  atomic.Uint32 // xids of the agent's own requests and async messages

	pinLimited  atomic.Uint64 // packet-ins dropped by PacketInRate
	outputDrops atomic.Uint64 // connections closed by WriteTimeout/MaxOutputBytes

	mu       sync.Mutex // guards the fields below
	sessions map[*session]struct{}
	genID    uint64
	genSet   bool
}

// NewAgent returns an agent for sw.
func NewAgent(sw Switch, opts Options) *Agent {
	opts.normalize()
	return &Agent{sw: sw, opts: opts, sessions: map[*session]struct{}{}}
}

// nextXid returns a fresh xid for a message the agent starts.
func (a *Agent) nextXid() uint32 { return a.xid.Add(1) }

// Serve runs one controller connection until it fails, the controller
// closes it, or ctx is done; it closes conn. It returns nil when ctx ended
// it, else why the connection ended.
func (a *Agent) Serve(ctx context.Context, conn net.Conn) error {
	s := newSession(a, conn)
	return s.run(ctx)
}

// PacketInsLimited returns the number of packet-ins not sent to a
// connection because of its rate limit (Options.PacketInRate), summed over
// connections.
func (a *Agent) PacketInsLimited() uint64 { return a.pinLimited.Load() }

// OutputDrops returns the number of connections closed because their peer
// stopped reading (Options.WriteTimeout, MaxOutputBytes).
func (a *Agent) OutputDrops() uint64 { return a.outputDrops.Load() }

// Connections returns the number of connections past the handshake.
func (a *Agent) Connections() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.sessions)
}

// Controllers returns the number of connections past the handshake to the
// controllers the agent dialled (Connect, ConnectTarget, Run's active
// targets). Sessions accepted by a listener — ovs-ofctl, a monitoring tool
// — are not counted: like Open vSwitch's service connections, they do not
// take a standalone switch out of its fail mode.
func (a *Agent) Controllers() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for s := range a.sessions {
		if s.active {
			n++
		}
	}
	return n
}

func (a *Agent) register(s *session) {
	a.mu.Lock()
	a.sessions[s] = struct{}{}
	a.mu.Unlock()
}

func (a *Agent) unregister(s *session) {
	a.mu.Lock()
	delete(a.sessions, s)
	a.mu.Unlock()
}

// changeRole applies a ROLE_REQUEST of s (OpenFlow 1.3 §6.3.5): master and
// slave requests carry a generation id that must not be older than the
// last one seen (compared as a signed difference, wrapping), else
// OFPRRFC_STALE; a new master turns every other master into a slave. It
// returns the role s holds afterwards and the generation id to report.
func (a *Agent) changeRole(s *session, r Role, gen uint64) (Role, uint64, *Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if r == RoleMaster || r == RoleSlave {
		if a.genSet && int64(gen-a.genID) < 0 {
			return 0, 0, errf(errTypeRole, errCodeStale, "generation id %d is older than %d", gen, a.genID)
		}
		a.genID, a.genSet = gen, true
	}
	if r == RoleMaster {
		for o := range a.sessions {
			if o != s && o.role == RoleMaster {
				o.role = RoleSlave
			}
		}
	}
	if r != RoleNoChange {
		s.role = r
	}
	return s.role, a.genID, nil
}

// roleOf returns s's role.
func (a *Agent) roleOf(s *session) Role {
	a.mu.Lock()
	defer a.mu.Unlock()
	return s.role
}

// broadcast queues an async message for every connection whose role and
// async configuration accept it; pick returns the mask for a config and
// role index. It returns the number of connections it was queued on.
// With limit, each connection's packet-in rate limit applies.
func (a *Agent) broadcast(reason uint8, limit bool, pick func(*AsyncConfig) [2]uint32, encode func(cfg SwitchConfig) []byte) int {
	a.mu.Lock()
	var to []*session
	var cfgs []SwitchConfig
	now := time.Now()
	for s := range a.sessions {
		i := 0
		if s.role == RoleSlave {
			i = 1
		}
		if reason < 32 && pick(&s.async)[i]&(1<<reason) != 0 {
			if limit && !s.pinBucket.allow(now) {
				a.pinLimited.Add(1)
				continue
			}
			to = append(to, s)
			cfgs = append(cfgs, s.config)
		}
	}
	a.mu.Unlock()
	n := 0
	for i, s := range to {
		if s.sendAsync(encode(cfgs[i])) {
			n++
		}
	}
	return n
}

// PacketIn sends a packet to the controllers that want it (by role and
// async configuration), and returns to how many. A connection whose output
// queue is full drops it, and so does one over its packet-in rate limit
// (Options.PacketInRate; counted by PacketInsLimited). A packet-in of reason OFPR_INVALID_TTL (which a
// connection receives only after SET_ASYNC asks for it: DefaultAsync
// leaves it out, as Open vSwitch does) carries at most the connection's
// miss_send_len bytes (SET_CONFIG; 128 by default), as no output action
// gave it a max_len.
func (a *Agent) PacketIn(pi *rule.PacketIn) int {
	return a.broadcast(pi.Reason, true, func(c *AsyncConfig) [2]uint32 { return c.PacketIn },
		func(cfg SwitchConfig) []byte {
			if pi.Reason == rule.ReasonInvalidTTL {
				p := *pi
				p.MaxLen = cfg.MissSendLen
				return EncodePacketIn(0, &p)
			}
			return EncodePacketIn(0, pi)
		})
}

// FlowRemoved notifies the controllers that want it of a removed flow.
// The caller sends it only for entries with FlagSendFlowRem.
func (a *Agent) FlowRemoved(fr *rule.FlowRemoved) int {
	return a.broadcast(fr.Reason, false, func(c *AsyncConfig) [2]uint32 { return c.FlowRemoved },
		func(SwitchConfig) []byte { return EncodeFlowRemoved(0, fr) })
}

// PortStatus notifies the controllers that want it of a port change.
func (a *Agent) PortStatus(ps *rule.PortStatus) int {
	return a.broadcast(ps.Reason, false, func(c *AsyncConfig) [2]uint32 { return c.PortStatus },
		func(SwitchConfig) []byte { return EncodePortStatus(0, ps) })
}

// Run serves every target until ctx is done: "ptcp:PORT[:IP]" and
// "pssl:"/"ptls:" listen, "tcp:HOST[:PORT]" and "ssl:"/"tls:" connect and
// reconnect with back-off. It returns the first error setting a target up
// (a bad target, a port in use, TLS without its Options).
func (a *Agent) Run(ctx context.Context, targets ...string) error {
	var wg sync.WaitGroup
	var listeners []net.Listener
	for _, t := range targets {
		tg, err := ParseTarget(t)
		if err == nil {
			err = a.checkTLS(tg)
		}
		if err != nil {
			closeAll(listeners)
			return err
		}
		if tg.Passive {
			l, err := a.listen(tg)
			if err != nil {
				closeAll(listeners)
				return err
			}
			listeners = append(listeners, l)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = a.ServeListener(ctx, l)
			}()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.connect(ctx, tg)
		}()
	}
	wg.Wait()
	return nil
}

// checkTLS reports a TLS target without its configuration.
func (a *Agent) checkTLS(tg Target) error {
	switch {
	case tg.TLS && tg.Passive && a.opts.TLSServer == nil:
		return fmt.Errorf("openflow: passive TLS target %s needs Options.TLSServer", tg.Addr)
	case tg.TLS && !tg.Passive && a.opts.TLSClient == nil:
		return fmt.Errorf("openflow: TLS target %s needs Options.TLSClient", tg.Addr)
	}
	return nil
}

func (a *Agent) listen(tg Target) (net.Listener, error) {
	l, err := net.Listen("tcp", tg.Addr)
	if err != nil || !tg.TLS {
		return l, err
	}
	return tls.NewListener(l, a.opts.TLSServer), nil
}

func closeAll(ls []net.Listener) {
	for _, l := range ls {
		l.Close()
	}
}

// ServeListener accepts controller connections on l and serves each until
// ctx is done, then closes l and waits for them.
func (a *Agent) ServeListener(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Serve(ctx, c); err != nil {
				a.opts.Logf("openflow: controller %s: %v", c.RemoteAddr(), err)
			}
		}()
	}
}

// Connect keeps an active connection to the controller at addr until ctx
// is done: after a failed dial or a lost connection it waits MinBackoff,
// doubling up to MaxBackoff; a connection that got past the handshake
// resets the wait.
func (a *Agent) Connect(ctx context.Context, addr string) {
	a.connect(ctx, Target{Addr: addr})
}

// ConnectTarget is Connect for a target string ("tcp:", "ssl:", "tls:").
func (a *Agent) ConnectTarget(ctx context.Context, target string) error {
	tg, err := ParseTarget(target)
	if err == nil && tg.Passive {
		err = fmt.Errorf("openflow: %q is a passive target", target)
	}
	if err == nil {
		err = a.checkTLS(tg)
	}
	if err != nil {
		return err
	}
	a.connect(ctx, tg)
	return nil
}

// dial opens one connection to an active target.
func (a *Agent) dial(ctx context.Context, tg Target) (net.Conn, error) {
	if !tg.TLS {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", tg.Addr)
	}
	cfg := a.opts.TLSClient.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(tg.Addr)
	}
	d := tls.Dialer{Config: cfg}
	return d.DialContext(ctx, "tcp", tg.Addr)
}

func (a *Agent) connect(ctx context.Context, tg Target) {
	addr := tg.Addr
	wait := a.opts.MinBackoff
	for ctx.Err() == nil {
		c, err := a.dial(ctx, tg)
		if err == nil {
			s := newSession(a, c)
			s.active = true
			err = s.run(ctx)
			if s.established.Load() {
				wait = a.opts.MinBackoff
			}
		}
		if ctx.Err() != nil {
			return
		}
		a.opts.Logf("openflow: controller %s: %v; retrying in %v", addr, err, wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, a.opts.MaxBackoff)
	}
}
