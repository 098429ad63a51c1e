package pcapfile

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Writer writes a pcapng file: a section header, one interface description
// block per distinct link type (written when the first packet of that link
// type arrives; nanosecond timestamps) and one enhanced packet block per
// packet, little-endian. Call Flush when done.
type Writer struct {
	w      *bufio.Writer
	ifaces map[LinkType]uint32
	buf    []byte
	err    error
}

// NewWriter writes the section header block to w.
func NewWriter(w io.Writer) (*Writer, error) {
	pw := &Writer{w: bufio.NewWriterSize(w, 1<<16), ifaces: map[LinkType]uint32{}}
	shb := make([]byte, 28)
	le := binary.LittleEndian
	le.PutUint32(shb, magicSHB)
	le.PutUint32(shb[4:], 28)
	le.PutUint32(shb[8:], magicByteOrd)
	le.PutUint16(shb[12:], 1) // version 1.0
	le.PutUint64(shb[16:], ^uint64(0))
	le.PutUint32(shb[24:], 28)
	_, err := pw.w.Write(shb)
	return pw, err
}

// WritePacket appends p (its Link, Timestamp, WireLen and Data).
func (w *Writer) WritePacket(p Packet) error {
	if w.err != nil {
		return w.err
	}
	if len(p.Data) > MaxPacket {
		return fmt.Errorf("pcapfile: packet of %d bytes exceeds %d", len(p.Data), MaxPacket)
	}
	le := binary.LittleEndian
	id, ok := w.ifaces[p.Link]
	if !ok {
		id = uint32(len(w.ifaces))
		w.ifaces[p.Link] = id
		idb := make([]byte, 32)
		le.PutUint32(idb, blockIDB)
		le.PutUint32(idb[4:], 32)
		le.PutUint16(idb[8:], uint16(p.Link))
		le.PutUint32(idb[12:], 0) // snaplen: unlimited
		le.PutUint16(idb[16:], 9) // if_tsresol
		le.PutUint16(idb[18:], 1) // length 1
		idb[20] = 9               // 10^-9 s
		le.PutUint32(idb[24:], 0) // opt_endofopt
		le.PutUint32(idb[28:], 32)
		if _, w.err = w.w.Write(idb); w.err != nil {
			return w.err
		}
	}
	pad := (len(p.Data) + 3) &^ 3
	total := 32 + pad
	if cap(w.buf) < total {
		w.buf = make([]byte, total)
	}
	b := w.buf[:total]
	clear(b)
	ts := uint64(p.Timestamp)
	le.PutUint32(b, blockEPB)
	le.PutUint32(b[4:], uint32(total))
	le.PutUint32(b[8:], id)
	le.PutUint32(b[12:], uint32(ts>>32))
	le.PutUint32(b[16:], uint32(ts))
	le.PutUint32(b[20:], uint32(len(p.Data)))
	le.PutUint32(b[24:], p.WireLen)
	copy(b[28:], p.Data)
	le.PutUint32(b[total-4:], uint32(total))
	_, w.err = w.w.Write(b)
	return w.err
}

// Flush writes buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}
