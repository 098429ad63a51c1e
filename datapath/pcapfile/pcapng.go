package pcapfile

import (
	"encoding/binary"
	"io"
)

// pcapng block types.
const (
	blockIDB = 0x00000001
	blockOPB = 0x00000002 // obsolete packet block
	blockSPB = 0x00000003
	blockEPB = 0x00000006
)

// readSHB reads a section header block (the magic was peeked, not
// consumed): it fixes the section's byte order and forgets the previous
// section's interfaces.
func (r *Reader) readSHB() error {
	h, err := r.readFull(12)
	if err != nil {
		return r.errf("truncated section header block")
	}
	switch binary.LittleEndian.Uint32(h[8:]) {
	case magicByteOrd:
		r.setOrder(false)
	default:
		if binary.BigEndian.Uint32(h[8:]) != magicByteOrd {
			return r.errf("bad byte-order magic in section header block")
		}
		r.setOrder(true)
	}
	total := r.u32(h[4:])
	if total < 28 || total%4 != 0 || total > maxBlock {
		return r.errf("section header block length %d invalid", total)
	}
	rest, err := r.readFull(int(total) - 12)
	if err != nil {
		return r.errf("truncated section header block")
	}
	if major := r.order.Uint16(rest); major != 1 {
		return r.errf("unknown pcapng major version %d", major)
	}
	r.ifaces = r.ifaces[:0]
	return nil
}

func (r *Reader) nextPcapNG() (Packet, error) {
	for {
		head, err := r.peek(8)
		if len(head) == 0 && err == io.EOF {
			return Packet{}, io.EOF
		}
		if err != nil {
			return Packet{}, r.errf("truncated block header")
		}
		if binary.BigEndian.Uint32(head) == magicSHB {
			if err := r.readSHB(); err != nil {
				return Packet{}, err
			}
			continue
		}
		typ, total := r.u32(head), r.u32(head[4:])
		if total < 12 || total%4 != 0 || total > maxBlock {
			return Packet{}, r.errf("block type %#x length %d invalid", typ, total)
		}
		start := r.off
		b, err := r.peekRecord(int(total))
		if err != nil {
			return Packet{}, r.errf("truncated block type %#x: want %d bytes", typ, total)
		}
		if r.u32(b[total-4:]) != total {
			r.off = start
			return Packet{}, r.errf("block type %#x: trailing length differs from leading length %d", typ, total)
		}
		body := b[8 : total-4]
		switch typ {
		case blockIDB:
			if err := r.readIDB(body); err != nil {
				return Packet{}, err
			}
		case blockEPB, blockOPB:
			return r.packetBlock(typ, body)
		case blockSPB:
			return r.simpleBlock(body)
		}
	}
}

// nextPcapNGMem is nextPcapNG for a Reader of memory: blocks parsed in
// place, an enhanced packet block without a call that is not inlined.
// Its checks and errors are nextPcapNG's (FuzzReader compares the two).
func (r *Reader) nextPcapNGMem() (Packet, error) {
	for {
		rest := r.mem[r.off:]
		if len(rest) < 8 {
			if len(rest) == 0 {
				return Packet{}, io.EOF
			}
			return Packet{}, r.errf("truncated block header")
		}
		if binary.BigEndian.Uint32(rest) == magicSHB {
			if err := r.readSHB(); err != nil {
				return Packet{}, err
			}
			continue
		}
		typ, total := r.u32(rest), r.u32(rest[4:])
		if total < 12 || total%4 != 0 || total > maxBlock {
			return Packet{}, r.errf("block type %#x length %d invalid", typ, total)
		}
		if int(total) > len(rest) {
			r.off = int64(len(r.mem))
			return Packet{}, r.errf("truncated block type %#x: want %d bytes", typ, total)
		}
		if r.u32(rest[total-4:]) != total {
			return Packet{}, r.errf("block type %#x: trailing length differs from leading length %d", typ, total)
		}
		body := rest[8 : total-4]
		r.off += int64(total)
		switch typ {
		case blockEPB:
			if len(body) < 20 {
				return Packet{}, r.errf("packet block too short")
			}
			id := r.u32(body)
			if uint64(id) >= uint64(len(r.ifaces)) {
				return Packet{}, r.errf("packet block names interface %d, only %d described", id, len(r.ifaces))
			}
			in := &r.ifaces[id]
			capLen := r.u32(body[12:])
			if uint64(capLen) > uint64(len(body)-20) {
				return Packet{}, r.errf("packet block captured length %d overruns its block", capLen)
			}
			end := 20 + int(capLen)
			return Packet{
				Link: in.link, Interface: int(id), Timestamp: in.nanos(r.u32(body[4:]), r.u32(body[8:])),
				WireLen: r.u32(body[16:]), Data: body[20:end:end], BigEndian: r.big,
			}, nil
		case blockIDB:
			if err := r.readIDB(body); err != nil {
				return Packet{}, err
			}
		case blockOPB:
			return r.packetBlock(typ, body)
		case blockSPB:
			return r.simpleBlock(body)
		}
	}
}

func (r *Reader) readIDB(body []byte) error {
	if len(body) < 8 {
		return r.errf("interface description block too short")
	}
	in := iface{link: LinkType(r.order.Uint16(body)), snaplen: r.u32(body[4:]), tsUnit: 1000}
	opts := body[8:]
	for len(opts) >= 4 {
		code, l := r.order.Uint16(opts), int(r.order.Uint16(opts[2:]))
		if code == 0 {
			break
		}
		pad := (l + 3) &^ 3
		if 4+pad > len(opts) {
			return r.errf("interface option %d overruns its block", code)
		}
		if code == 9 && l == 1 { // if_tsresol
			in.tsUnit, in.tsDiv = tsResolution(opts[4])
		}
		opts = opts[4+pad:]
	}
	if len(r.ifaces) >= 1<<16 {
		return r.errf("too many interfaces")
	}
	r.ifaces = append(r.ifaces, in)
	return nil
}

// tsResolution returns nanoseconds per tick (unit) or, for resolutions
// finer than a nanosecond, ticks per nanosecond (div).
func tsResolution(v byte) (unit, div int64) {
	if v&0x80 != 0 { // power of two
		e := uint(v & 0x7f)
		if e >= 62 {
			return 0, 1 << 62
		}
		// ticks of 2^-e seconds: ns = ticks * 1e9 / 2^e, approximated per tick
		if e <= 29 {
			return 1e9 / (1 << e), 0
		}
		return 0, (1 << e) / 1e9
	}
	e := int(v)
	if e > 18 {
		e = 18
	}
	if e <= 9 {
		u := int64(1)
		for i := e; i < 9; i++ {
			u *= 10
		}
		return u, 0
	}
	d := int64(1)
	for i := 9; i < e; i++ {
		d *= 10
	}
	return 0, d
}

func (in *iface) nanos(hi, lo uint32) int64 {
	t := int64(uint64(hi)<<32 | uint64(lo))
	if in.tsDiv != 0 {
		return t / in.tsDiv
	}
	return t * in.tsUnit
}

func (r *Reader) packetBlock(typ uint32, body []byte) (Packet, error) {
	if len(body) < 20 {
		return Packet{}, r.errf("packet block too short")
	}
	var id int
	if typ == blockOPB {
		id = int(r.order.Uint16(body))
	} else {
		id = int(r.u32(body))
	}
	if id >= len(r.ifaces) {
		return Packet{}, r.errf("packet block names interface %d, only %d described", id, len(r.ifaces))
	}
	in := &r.ifaces[id]
	capLen, wire := r.u32(body[12:]), r.u32(body[16:])
	if uint64(capLen) > uint64(len(body)-20) {
		return Packet{}, r.errf("packet block captured length %d overruns its block", capLen)
	}
	return Packet{
		Link: in.link, Interface: id, Timestamp: in.nanos(r.u32(body[4:]), r.u32(body[8:])),
		WireLen: wire, Data: body[20 : 20+capLen], BigEndian: r.big,
	}, nil
}

func (r *Reader) simpleBlock(body []byte) (Packet, error) {
	if len(body) < 4 {
		return Packet{}, r.errf("simple packet block too short")
	}
	if len(r.ifaces) == 0 {
		return Packet{}, r.errf("simple packet block before any interface description")
	}
	in := &r.ifaces[0]
	wire := r.u32(body)
	capLen := uint64(wire)
	if in.snaplen != 0 && uint64(in.snaplen) < capLen {
		capLen = uint64(in.snaplen)
	}
	if capLen > uint64(len(body)-4) {
		capLen = uint64(len(body) - 4)
	}
	return Packet{Link: in.link, WireLen: wire, Data: body[4 : 4+capLen], BigEndian: r.big}, nil
}
