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

// outQueue is the depth of a connection's output queue. Replies wait for
// room; async messages are dropped when it is full.
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

	lastRecv    atomic.Int64 // unix nanos of the last message received
	established atomic.Bool  // past the handshake
	active      bool         // the agent dialled it (a --controller), not a listener's client

	// Guarded by a.mu.
	role  Role
	async AsyncConfig

	// Owned by the reading goroutine.
	feat   rule.Features
	config SwitchConfig
	mp     *mpRequest // a multipart request being assembled (REQ_MORE)
}

func newSession(a *Agent, conn net.Conn) *session {
	return &session{
		a:      a,
		conn:   conn,
		out:    make(chan []byte, outQueue),
		done:   make(chan struct{}),
		role:   RoleEqual,
		async:  DefaultAsync,
		config: SwitchConfig{MissSendLen: 128},
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
		s.conn.Write(encodeErrorData(h.Xid, herr, []byte(herr.Detail)))
		return herr
	}
	return nil
}

// writer sends queued messages until the session closes.
func (s *session) writer() {
	for {
		select {
		case <-s.done:
			return
		case m := <-s.out:
			if _, err := s.conn.Write(m); err != nil {
				s.close()
				return
			}
		}
	}
}

// send queues a reply, waiting for room; false when the session closed.
func (s *session) send(m []byte) bool {
	select {
	case s.out <- m:
		return true
	case <-s.done:
		return false
	}
}

// sendAsync queues an async message unless the queue is full.
func (s *session) sendAsync(m []byte) bool {
	select {
	case s.out <- m:
		return true
	default:
		return false
	}
}

// keepalive sends ECHO_REQUEST after EchoInterval of silence and drops the
// connection when nothing arrives within EchoTimeout after it.
func (s *session) keepalive() {
	iv, to := s.a.opts.EchoInterval, s.a.opts.EchoTimeout
	t := time.NewTicker(max(min(iv, to)/4, time.Millisecond))
	defer t.Stop()
	var echoAt int64 // unix nanos of the outstanding echo request, 0 if none
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
		case echoAt != 0 && now-echoAt >= int64(to):
			s.a.opts.Logf("openflow: controller %s: no reply to echo for %v; dropping the connection", s.conn.RemoteAddr(), to)
			s.close()
			return
		case echoAt == 0 && now-last >= int64(iv):
			e := newMsg(of.TypeEchoRequest, s.a.nextXid())
			if s.sendAsync(e.finish()) {
				echoAt = now
			}
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
				return nil
			}
		}
	}
}
