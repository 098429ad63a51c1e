package openflow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

// Error type and codes this file needs under short names.
const (
	errTypeRole  = ofp.ErrTypeRoleRequestFailed
	errCodeStale = ofp.ErrCodeRoleRequestFailedStale
)

// ErrNotReading is why the agent drops a connection whose peer stopped
// reading (Options.WriteTimeout, Options.MaxOutputBytes).
var ErrNotReading = errors.New("openflow: the peer stopped reading")

// outQueue is the depth of a connection's output queue in messages.
// Replies wait for room; async messages are dropped when it is full. The
// queue is also bounded in bytes (Options.MaxOutputBytes).
const outQueue = 256

// session is the switch side of one controller connection. One goroutine
// (run) reads and handles messages in order, so a reply is sent only
// after every earlier message was handled; a writer goroutine drains out;
// a keepalive goroutine sends echo requests.
type session struct {
	a    *Agent
	conn net.Conn
	out  chan []byte
	done chan struct{}
	once sync.Once

	lastRecv    atomic.Int64  // unix nanos of the last message received
	lastWrite   atomic.Int64  // unix nanos of the last whole write
	queued      atomic.Int64  // bytes in out and in the writer's hands
	why         atomic.Value  // error: why the agent dropped the connection
	notReading  atomic.Bool   // dropped for not reading (counted once: dropNotReading)
	drained     chan struct{} // the writer finished a write (cap 1)
	pinBucket   tokenBucket   // packet-in rate limit; guarded by a.mu
	established atomic.Bool   // past the handshake
	active      bool          // the agent dialled it (a --controller), not a listener's client

	// Guarded by a.mu.
	role  Role
	async AsyncConfig

	// Owned by the reading goroutine.
	feat   rule.Features
	config SwitchConfig
	mp     map[uint32]*mpRequest // multipart requests being assembled (REQ_MORE), by xid
	mpLen  int                   // the bytes of their bodies
}

func newSession(a *Agent, conn net.Conn) *session {
	return &session{
		a:         a,
		conn:      conn,
		out:       make(chan []byte, outQueue),
		done:      make(chan struct{}),
		drained:   make(chan struct{}, 1),
		role:      RoleEqual,
		async:     DefaultAsync,
		pinBucket: tokenBucket{rate: float64(max(a.opts.PacketInRate, 0)), burst: float64(a.opts.PacketInBurst)},
		config:    SwitchConfig{MissSendLen: 128},
	}
}

// close ends the session (idempotent).
func (s *session) close() {
	s.once.Do(func() {
		close(s.done)
		s.conn.Close()
	})
}

// run performs the handshake, then reads and handles messages until the
// connection ends.
func (s *session) run(ctx context.Context) error {
	defer s.close()
	stop := context.AfterFunc(ctx, s.close)
	defer stop()
	if err := s.handshake(); err != nil {
		return err
	}
	s.feat = s.a.sw.Features()
	s.established.Store(true)
	s.a.register(s)
	defer s.a.unregister(s)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.writer() }()
	go func() { defer wg.Done(); s.keepalive() }()
	err := s.readLoop()
	s.close()
	wg.Wait()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// handshake sends HELLO and checks the controller's.
func (s *session) handshake() error {
	// A deadline on the HELLO too: over TLS this write runs the TLS
	// handshake, which a silent peer would otherwise stall forever.
	s.conn.SetWriteDeadline(time.Now().Add(s.a.opts.HelloTimeout))
	if _, err := s.conn.Write(EncodeHello(s.a.nextXid())); err != nil {
		return err
	}
	s.conn.SetWriteDeadline(time.Time{})
	s.conn.SetReadDeadline(time.Now().Add(s.a.opts.HelloTimeout))
	msg, err := ReadMessage(s.conn)
	if err != nil {
		return fmt.Errorf("waiting for HELLO: %w", err)
	}
	s.conn.SetReadDeadline(time.Time{})
	s.lastRecv.Store(time.Now().UnixNano())
	if herr := NegotiateHello(msg); herr != nil {
		// HELLO_FAILED carries an ASCII explanation as its data (§7.4.4.1).
		h, _ := ParseHeader(msg)
		s.conn.SetWriteDeadline(time.Now().Add(s.a.opts.HelloTimeout))
		s.conn.Write(encodeErrorData(h.Xid, herr, []byte(herr.Detail)))
		return herr
	}
	return nil
}

// writer sends queued messages until the session closes. Every write has
// a deadline (Options.WriteTimeout): a peer that stops reading fails it,
// and the session closes.
func (s *session) writer() {
	for {
		select {
		case <-s.done:
			return
		case m := <-s.out:
			s.conn.SetWriteDeadline(time.Now().Add(s.a.opts.WriteTimeout))
			_, err := s.conn.Write(m)
			s.queued.Add(-int64(len(m)))
			if err == nil {
				s.lastWrite.Store(time.Now().UnixNano())
			}
			select {
			case s.drained <- struct{}{}:
			default:
			}
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					s.dropNotReading(fmt.Errorf("%w: a write took over %v", ErrNotReading, s.a.opts.WriteTimeout))
				}
				s.a.opts.Logf("openflow: controller %s: write: %v; dropping the connection", s.conn.RemoteAddr(), err)
				s.close()
				return
			}
		}
	}
}

// dropNotReading records that the session is dropped because its peer
// stopped reading: the agent's count (OutputDrops) once per session,
// however many of the writer's and the senders' deadlines find it, and
// the first reason.
func (s *session) dropNotReading(why error) {
	if s.notReading.CompareAndSwap(false, true) {
		s.a.outputDrops.Add(1)
		s.why.Store(why)
	}
}

// send queues a reply. While the queue holds Options.MaxOutputBytes (or
// outQueue messages) it waits for the writer, so that the reading
// goroutine stops reading: the peer's requests back up in its own socket,
// not in gswitchd's memory. A wait longer than Options.WriteTimeout means
// the peer stopped reading: the session closes. False when the session
// closed.
func (s *session) send(m []byte) bool {
	limit := int64(s.a.opts.MaxOutputBytes)
	var timer *time.Timer
	for q := s.queued.Load(); q > 0 && q+int64(len(m)) > limit; q = s.queued.Load() {
		if timer == nil {
			timer = time.NewTimer(s.a.opts.WriteTimeout)
			defer timer.Stop()
		}
		select {
		case <-s.drained:
		case <-s.done:
			return false
		case <-timer.C:
			s.a.opts.Logf("openflow: controller %s: output queue held %d bytes (limit %d) for %v; dropping the connection",
				s.conn.RemoteAddr(), q, limit, s.a.opts.WriteTimeout)
			s.dropNotReading(fmt.Errorf("%w: %d bytes queued for %v", ErrNotReading, q, s.a.opts.WriteTimeout))
			s.close()
			return false
		}
	}
	s.queued.Add(int64(len(m)))
	if timer == nil {
		timer = time.NewTimer(s.a.opts.WriteTimeout)
		defer timer.Stop()
	}
	select {
	case s.out <- m:
		return true
	case <-s.done:
	case <-timer.C:
		s.a.opts.Logf("openflow: controller %s: output queue full for %v; dropping the connection", s.conn.RemoteAddr(), s.a.opts.WriteTimeout)
		s.dropNotReading(fmt.Errorf("%w: output queue full for %v", ErrNotReading, s.a.opts.WriteTimeout))
		s.close()
	}
	s.queued.Add(-int64(len(m)))
	return false
}

// sendAsync queues an async message unless the queue is full (in
// messages or in bytes).
func (s *session) sendAsync(m []byte) bool {
	if s.queued.Load()+int64(len(m)) > int64(s.a.opts.MaxOutputBytes) {
		return false
	}
	s.queued.Add(int64(len(m)))
	select {
	case s.out <- m:
		return true
	default:
		s.queued.Add(-int64(len(m)))
		return false
	}
}

// keepalive sends ECHO_REQUEST after EchoInterval of silence and drops the
// connection when nothing arrives within EchoTimeout after it. The timeout
// runs from the moment the echo was due, whether or not the request could
// be queued: a peer that stops reading fills the queue, and must not
// thereby escape the check. A peer that reads, only slowly (a write
// completed since the echo was due but could not be queued), gets the
// echo queued then, timed from then.
func (s *session) keepalive() {
	iv, to := s.a.opts.EchoInterval, s.a.opts.EchoTimeout
	t := time.NewTicker(max(min(iv, to)/4, time.Millisecond))
	defer t.Stop()
	var echoAt int64 // unix nanos of the outstanding echo request, 0 if none
	queued := false  // the outstanding echo request was queued
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		now, last := time.Now().UnixNano(), s.lastRecv.Load()
		switch {
		case echoAt != 0 && last >= echoAt:
			echoAt = 0
		case echoAt != 0 && !queued && s.lastWrite.Load() > echoAt:
			// The queue was full when the echo was due, but the peer has
			// read since: it is alive, only slow. Queue the echo now and
			// time it from here.
			queued, echoAt = s.sendAsync(newMsg(of.TypeEchoRequest, s.a.nextXid()).finish()), now
		case echoAt != 0 && now-echoAt >= int64(to):
			s.a.opts.Logf("openflow: controller %s: no reply to echo for %v; dropping the connection", s.conn.RemoteAddr(), to)
			s.why.Store(fmt.Errorf("openflow: no reply to echo for %v", to))
			s.close()
			return
		case echoAt == 0 && now-last >= int64(iv):
			queued, echoAt = s.sendAsync(newMsg(of.TypeEchoRequest, s.a.nextXid()).finish()), now
		}
	}
}

// readLoop reads and handles messages in order.
func (s *session) readLoop() error {
	for {
		msg, err := ReadMessage(s.conn)
		if err != nil {
			if errors.Is(err, ErrFraming) {
				// The stream cannot be framed any more: answer, then drop it.
				s.conn.SetWriteDeadline(time.Now().Add(s.a.opts.WriteTimeout))
				s.conn.Write(EncodeError(msg, badRequest(ofp.ErrCodeBadRequestLen, "%v", err)))
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		s.lastRecv.Store(time.Now().UnixNano())
		for _, r := range s.handle(msg) {
			if !s.send(r) {
				if err, ok := s.why.Load().(error); ok {
					return err
				}
				return nil
			}
		}
	}
}
