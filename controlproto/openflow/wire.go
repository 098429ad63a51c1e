package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	of "github.com/netrack/openflow"
)

// Version is the only OpenFlow version the agent speaks: 1.3 (0x04).
const Version = 0x04

// HeaderLen is the length of ofp_header.
const HeaderLen = 8

// Header is ofp_header.
type Header struct {
	Version uint8
	Type    of.Type
	Length  uint16
	Xid     uint32
}

// ParseHeader reads the header at the front of b (at least HeaderLen bytes).
func ParseHeader(b []byte) (Header, bool) {
	if len(b) < HeaderLen {
		return Header{}, false
	}
	return Header{
		Version: b[0],
		Type:    of.Type(b[1]),
		Length:  binary.BigEndian.Uint16(b[2:]),
		Xid:     binary.BigEndian.Uint32(b[4:]),
	}, true
}

// ErrFraming is returned by ReadMessage for a header whose length is shorter
// than the header itself: the stream cannot be framed any more.
var ErrFraming = errors.New("openflow: message length shorter than its header")

// ReadMessage reads one whole message (header included) from r into a fresh
// slice. A length under HeaderLen is ErrFraming.
func ReadMessage(r io.Reader) ([]byte, error) {
	var h [HeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(h[2:]))
	if n < HeaderLen {
		return h[:], fmt.Errorf("%w: %d", ErrFraming, n)
	}
	msg := make([]byte, n)
	copy(msg, h[:])
	if _, err := io.ReadFull(r, msg[HeaderLen:]); err != nil {
		return nil, err
	}
	return msg, nil
}

// enc builds a message in big-endian order.
type enc struct{ b []byte }

func (e *enc) u8(v uint8)   { e.b = append(e.b, v) }
func (e *enc) u16(v uint16) { e.b = binary.BigEndian.AppendUint16(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *enc) raw(v []byte) { e.b = append(e.b, v...) }
func (e *enc) pad(n int)    { e.b = append(e.b, make([]byte, n)...) }

// str writes s as a NUL-padded fixed-size field of n bytes (truncated to
// n-1 so that it stays NUL-terminated).
func (e *enc) str(s string, n int) {
	if len(s) > n-1 {
		s = s[:n-1]
	}
	e.raw([]byte(s))
	e.pad(n - len(s))
}

// align8 pads to a multiple of 8 bytes from start.
func (e *enc) align8(start int) { e.pad(pad8(len(e.b) - start)) }

// pad8 returns the bytes needed to round n up to a multiple of 8.
func pad8(n int) int { return (8 - n%8) % 8 }

// newMsg starts a message with a header whose length is fixed by finish.
func newMsg(t of.Type, xid uint32) *enc {
	e := &enc{b: make([]byte, 0, 64)}
	e.u8(Version)
	e.u8(uint8(t))
	e.u16(0)
	e.u32(xid)
	return e
}

// finish writes the length into the header and returns the message.
func (e *enc) finish() []byte {
	binary.BigEndian.PutUint16(e.b[2:], uint16(len(e.b)))
	return e.b
}

func be16(b []byte) uint16 { return binary.BigEndian.Uint16(b) }
func be32(b []byte) uint32 { return binary.BigEndian.Uint32(b) }
func be64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
