package pcapfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxPacket bounds a record's captured length (libpcap's own bound for
// ordinary link types is 256 KiB; pcapng files in the wild stay below this).
const MaxPacket = 1 << 20

// maxBlock bounds a pcapng block's total length.
const maxBlock = MaxPacket + 1<<16

// Format is the container format of a capture file.
type Format int

const (
	FormatPcap   Format = iota + 1 // classic libpcap format
	FormatPcapNG                   // pcapng
)

func (f Format) String() string {
	switch f {
	case FormatPcap:
		return "pcap"
	case FormatPcapNG:
		return "pcapng"
	}
	return "unknown"
}

// Packet is one captured packet. Data aliases the Reader's buffer and is
// valid until the next call of Next.
type Packet struct {
	Link      LinkType
	Interface int   // pcapng interface index within its section (0 for pcap)
	Timestamp int64 // nanoseconds since the Unix epoch
	WireLen   uint32
	Data      []byte // the captured bytes; len(Data) is the captured length
	// BigEndian says the file (or pcapng section) was written big-endian;
	// the NULL link type's address family is in that byte order.
	BigEndian bool
}

type iface struct {
	link    LinkType
	snaplen uint32
	tsUnit  int64 // nanoseconds per tick when tsDiv == 0
	tsDiv   int64 // ticks per nanosecond divisor for resolutions finer than 1 ns
}

// Reader reads packets from a pcap or pcapng stream.
type Reader struct {
	r      *bufio.Reader
	format Format
	order  binary.ByteOrder
	off    int64 // bytes consumed so far
	buf    []byte

	// pcap
	nano    bool
	link    LinkType
	snaplen uint32

	// pcapng
	ifaces []iface
}

// ErrFormat is wrapped by every error about malformed input.
var ErrFormat = errors.New("malformed capture file")

func (r *Reader) errf(format string, a ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrFormat, r.off, fmt.Sprintf(format, a...))
}

const (
	magicMicro   = 0xa1b2c3d4
	magicNano    = 0xa1b23c4d
	magicSHB     = 0x0a0d0d0a
	magicByteOrd = 0x1a2b3c4d
)

// NewReader reads the file header from rd and returns a Reader positioned
// at the first packet. The format is chosen by the magic number.
func NewReader(rd io.Reader) (*Reader, error) {
	r := &Reader{r: bufio.NewReaderSize(rd, 1<<16)}
	head, err := r.r.Peek(4)
	if err != nil {
		return nil, r.errf("file shorter than a magic number")
	}
	le := binary.LittleEndian.Uint32(head)
	be := binary.BigEndian.Uint32(head)
	switch {
	case le == magicMicro || le == magicNano:
		r.order, r.nano = binary.LittleEndian, le == magicNano
		return r, r.readPcapHeader()
	case be == magicMicro || be == magicNano:
		r.order, r.nano = binary.BigEndian, be == magicNano
		return r, r.readPcapHeader()
	case be == magicSHB:
		r.format = FormatPcapNG
		if err := r.readSHB(); err != nil {
			return nil, err
		}
		return r, nil
	}
	return nil, r.errf("unknown magic number %#08x (neither pcap nor pcapng)", be)
}

// Format returns the container format.
func (r *Reader) Format() Format { return r.format }

// LinkType returns the link type of a pcap file, or of the first interface
// of a pcapng file (0 when none has been described yet).
func (r *Reader) LinkType() LinkType {
	if r.format == FormatPcap {
		return r.link
	}
	if len(r.ifaces) > 0 {
		return r.ifaces[0].link
	}
	return 0
}

// BigEndian reports the byte order of the file (of the current section for
// pcapng).
func (r *Reader) BigEndian() bool { return r.order == binary.BigEndian }

func (r *Reader) readFull(n int) ([]byte, error) {
	if cap(r.buf) < n {
		r.buf = make([]byte, n)
	}
	b := r.buf[:n]
	m, err := io.ReadFull(r.r, b)
	r.off += int64(m)
	return b, err
}

func (r *Reader) readPcapHeader() error {
	r.format = FormatPcap
	h, err := r.readFull(24)
	if err != nil {
		return r.errf("truncated pcap file header")
	}
	r.snaplen = r.order.Uint32(h[16:])
	r.link = LinkType(r.order.Uint32(h[20:]) & 0x03ffffff)
	return nil
}

// Next returns the next packet, or io.EOF at the clean end of the file.
func (r *Reader) Next() (Packet, error) {
	if r.format == FormatPcap {
		return r.nextPcap()
	}
	return r.nextPcapNG()
}

// peekRecord returns the next n bytes without copying them when they fit
// the read buffer (they stay valid until the next call of Next), and
// consumes them.
func (r *Reader) peekRecord(n int) ([]byte, error) {
	if n > r.r.Size() {
		return r.readFull(n)
	}
	b, err := r.r.Peek(n)
	if err != nil {
		m, _ := r.r.Discard(len(b))
		r.off += int64(m)
		if err == io.EOF && len(b) == 0 {
			return nil, io.EOF
		}
		return nil, io.ErrUnexpectedEOF
	}
	r.r.Discard(n)
	r.off += int64(n)
	return b, nil
}

func (r *Reader) nextPcap() (Packet, error) {
	h, err := r.r.Peek(16)
	if len(h) == 0 && err == io.EOF {
		return Packet{}, io.EOF
	}
	if err != nil {
		return Packet{}, r.errf("truncated record header")
	}
	sec, frac := r.order.Uint32(h), r.order.Uint32(h[4:])
	incl, orig := r.order.Uint32(h[8:]), r.order.Uint32(h[12:])
	if incl > MaxPacket {
		return Packet{}, r.errf("record captured length %d exceeds %d", incl, MaxPacket)
	}
	ts := int64(sec) * 1e9
	if r.nano {
		ts += int64(frac)
	} else {
		ts += int64(frac) * 1e3
	}
	rec, err := r.peekRecord(16 + int(incl))
	if err != nil {
		return Packet{}, r.errf("truncated record: want %d bytes", incl)
	}
	return Packet{Link: r.link, Timestamp: ts, WireLen: orig, Data: rec[16:], BigEndian: r.BigEndian()}, nil
}
