package pubsubapi

import (
	"fmt"
	"net"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// Publisher sends events as event packets: one UDP datagram per event,
// its payload the event's binary encoding (pubsub.Event.AppendWire). It is
// the publishers' side of content-based forwarding; gswitchd delivers each
// datagram, unchanged, to the ports whose subscriptions it matches. A
// Publisher is not safe for concurrent use.
type Publisher struct {
	c   net.Conn
	buf []byte
}

// Dial returns a publisher sending to addr (HOST:PORT, the gswitchd
// pubsub udp_port on a host behind the switch).
func Dial(addr string) (*Publisher, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("pubsub publish: %w", err)
	}
	return &Publisher{c: c}, nil
}

// NewPublisher returns a publisher on a connected UDP socket c.
func NewPublisher(c net.Conn) *Publisher { return &Publisher{c: c} }

// Publish encodes and sends one event.
func (p *Publisher) Publish(e *pubsub.Event) error {
	var err error
	if p.buf, err = e.AppendWire(p.buf[:0]); err != nil {
		return err
	}
	_, err = p.c.Write(p.buf)
	return err
}

// Close closes the socket.
func (p *Publisher) Close() error { return p.c.Close() }
