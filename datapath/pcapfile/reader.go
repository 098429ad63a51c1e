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

// Reader reads packets from a pcap or pcapng stream, or from memory.
//
// A Reader has one of two sources: a buffered stream (NewReader: r is
// set) or a byte slice parsed in place (NewReaderBytes, and Open's
// mapping of a file: r is nil, mem holds the bytes and off is the position
// in them). Every read goes through peek, consume and readFull, which
// serve either source; Next takes a shorter path for a pcap in memory.
type Reader struct {
	r      *bufio.Reader // nil: the source is mem
	mem    []byte
	format Format
	order  binary.ByteOrder
	big    bool  // order is big-endian
	off    int64 // bytes consumed so far
	buf    []byte

	closer func() error // Open's: unmaps or closes the file

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

// streamBuffer is a stream Reader's buffer: records up to this size are
// parsed in place in it; fewer, larger reads than bufio's default.
const streamBuffer = 256 << 10

// NewReader reads the file header from rd and returns a Reader positioned
// at the first packet. The format is chosen by the magic number.
func NewReader(rd io.Reader) (*Reader, error) {
	return newReader(&Reader{r: bufio.NewReaderSize(rd, streamBuffer)})
}

// NewReaderBytes returns a Reader of a capture held in memory, parsed in
// place: no copy and no allocation per packet, and each Packet's Data
// aliases b (valid as long as b is; see Persistent).
func NewReaderBytes(b []byte) (*Reader, error) {
	if b == nil {
		b = []byte{}
	}
	return newReader(&Reader{mem: b})
}

func newReader(r *Reader) (*Reader, error) {
	head, err := r.peek(4)
	if err != nil {
		return nil, r.errf("file shorter than a magic number")
	}
	le := binary.LittleEndian.Uint32(head)
	be := binary.BigEndian.Uint32(head)
	switch {
	case le == magicMicro || le == magicNano:
		r.setOrder(false)
		r.nano = le == magicNano
		return r, r.readPcapHeader()
	case be == magicMicro || be == magicNano:
		r.setOrder(true)
		r.nano = be == magicNano
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

func (r *Reader) setOrder(big bool) {
	r.big = big
	if big {
		r.order = binary.BigEndian
	} else {
		r.order = binary.LittleEndian
	}
}

// u32 reads a word in the file's (section's) byte order; unlike r.order's,
// the call is inlined.
func (r *Reader) u32(b []byte) uint32 {
	if r.big {
		return binary.BigEndian.Uint32(b)
	}
	return binary.LittleEndian.Uint32(b)
}

// Persistent reports whether each Packet's Data stays valid after the next
// call of Next: true for a Reader of memory (NewReaderBytes, and Open's
// mapping of a regular file), where Data aliases the bytes themselves and
// stays valid until Close; false for a stream, whose Data is valid until
// the next call of Next.
func (r *Reader) Persistent() bool { return r.r == nil }

// Offset returns the bytes of the file consumed so far (progress).
func (r *Reader) Offset() int64 { return r.off }

// Close releases what Open took (the mapping or the file). A Reader from
// NewReader or NewReaderBytes has nothing to release. After Close, the
// Data of the packets a Reader of Open returned must not be used.
func (r *Reader) Close() error {
	c := r.closer
	r.closer, r.mem, r.r = nil, []byte{}, nil
	if c == nil {
		return nil
	}
	return c()
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
func (r *Reader) BigEndian() bool { return r.big }

// peek returns the next n bytes without consuming them; fewer and an
// error (io.EOF when none are left) at the end of the input.
func (r *Reader) peek(n int) ([]byte, error) {
	if r.r != nil {
		return r.r.Peek(n)
	}
	rest := r.mem[r.off:]
	if len(rest) < n {
		if len(rest) == 0 {
			return nil, io.EOF
		}
		return rest, io.ErrUnexpectedEOF
	}
	return rest[:n:n], nil
}

// readFull consumes the next n bytes and returns them: in place for a
// Reader of memory, else copied into r.buf (valid until the next read).
func (r *Reader) readFull(n int) ([]byte, error) {
	if r.r == nil {
		rest := r.mem[r.off:]
		if len(rest) < n {
			r.off += int64(len(rest))
			return rest, io.ErrUnexpectedEOF
		}
		r.off += int64(n)
		return rest[:n:n], nil
	}
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
	r.snaplen = r.u32(h[16:])
	r.link = LinkType(r.u32(h[20:]) & 0x03ffffff)
	return nil
}

// Next returns the next packet, or io.EOF at the clean end of the file.
func (r *Reader) Next() (Packet, error) {
	if r.format == FormatPcap {
		if r.r == nil {
			return r.nextPcapMem()
		}
		return r.nextPcap()
	}
	if r.r == nil {
		return r.nextPcapNGMem()
	}
	return r.nextPcapNG()
}

// peekRecord returns the next n bytes without copying them when they fit
// the read buffer (they stay valid until the next call of Next), and
// consumes them.
func (r *Reader) peekRecord(n int) ([]byte, error) {
	if r.r == nil {
		if r.off == int64(len(r.mem)) {
			return nil, io.EOF
		}
		return r.readFull(n)
	}
	if n > r.r.Size() {
		return r.readFull(n)
	}
	b, err := r.r.Peek(n)
	if err != nil {
		// The stream ended inside the record: consume what there was.
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

// nextPcapMem is nextPcap for a Reader of memory: the record parsed in
// place, with no call that is not inlined.
func (r *Reader) nextPcapMem() (Packet, error) {
	rest := r.mem[r.off:]
	if len(rest) < 16 {
		if len(rest) == 0 {
			return Packet{}, io.EOF
		}
		return Packet{}, r.errf("truncated record header")
	}
	incl := r.u32(rest[8:])
	if incl > MaxPacket {
		return Packet{}, r.errf("record captured length %d exceeds %d", incl, MaxPacket)
	}
	end := 16 + int(incl)
	if end > len(rest) {
		r.off = int64(len(r.mem))
		return Packet{}, r.errf("truncated record: want %d bytes", incl)
	}
	ts := int64(r.u32(rest)) * 1e9
	if frac := int64(r.u32(rest[4:])); r.nano {
		ts += frac
	} else {
		ts += frac * 1e3
	}
	r.off += int64(end)
	return Packet{Link: r.link, Timestamp: ts, WireLen: r.u32(rest[12:]), Data: rest[16:end:end], BigEndian: r.big}, nil
}

func (r *Reader) nextPcap() (Packet, error) {
	h, err := r.peek(16)
	if len(h) == 0 && err == io.EOF {
		return Packet{}, io.EOF
	}
	if err != nil {
		return Packet{}, r.errf("truncated record header")
	}
	sec, frac := r.u32(h), r.u32(h[4:])
	incl, orig := r.u32(h[8:]), r.u32(h[12:])
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
	return Packet{Link: r.link, Timestamp: ts, WireLen: orig, Data: rec[16:], BigEndian: r.big}, nil
}
