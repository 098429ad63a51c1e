package re

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// control is a parsed ACK or NAK frame.
type control struct {
	kind  byte
	epoch uint32
	n     int
	ids   []byte
}

func (c control) id(i int) uint64 { return binary.BigEndian.Uint64(c.ids[8*i:]) }

// ErrNotRE is returned for a frame that is not of EtherType.
var ErrNotRE = errors.New("re: not a redundancy elimination frame")

// shimAt returns the offset of the shim of an RE frame (after the Ethernet
// header and at most one VLAN tag).
func shimAt(f []byte) (int, bool) {
	if len(f) < 14 {
		return 0, false
	}
	off := 12
	et := binary.BigEndian.Uint16(f[12:])
	if et == 0x8100 || et == 0x88a8 || et == 0x9100 {
		if len(f) < 18 {
			return 0, false
		}
		off = 16
		et = binary.BigEndian.Uint16(f[16:])
	}
	return off + 2, et == EtherType
}

// IsControl reports whether frame is an RE ACK or NAK frame.
func IsControl(frame []byte) bool {
	off, ok := shimAt(frame)
	return ok && len(frame) >= off+2 && frame[off] == magic && (frame[off+1] == kindAck || frame[off+1] == kindNak)
}

func parseControl(frame []byte) (control, error) {
	off, ok := shimAt(frame)
	if !ok {
		return control{}, ErrNotRE
	}
	b := frame[off:]
	if len(b) < ctrlHdrLen || b[0] != magic || (b[1] != kindAck && b[1] != kindNak) {
		return control{}, fmt.Errorf("re: control frame: bad header")
	}
	c := control{kind: b[1], epoch: binary.BigEndian.Uint32(b[2:]), n: int(binary.BigEndian.Uint16(b[6:]))}
	if c.epoch == 0 {
		return control{}, fmt.Errorf("re: control frame: epoch 0")
	}
	if len(b) < ctrlHdrLen+8*c.n {
		return control{}, fmt.Errorf("re: control frame: %d ids in %d bytes", c.n, len(b)-ctrlHdrLen)
	}
	c.ids = b[ctrlHdrLen : ctrlHdrLen+8*c.n]
	return c, nil
}

// maxIDsPerFrame keeps a control frame within a 1,500-byte MTU.
const maxIDsPerFrame = (1500 - ctrlHdrLen) / 8

// controlFrame builds one control frame: Ethernet dst, src, EtherType, the
// control header, the ids.
func controlFrame(dst, src [6]byte, kind byte, epoch uint32, ids []uint64) []byte {
	n := 14 + ctrlHdrLen + 8*len(ids)
	f := make([]byte, max(60, n)) // the Ethernet minimum, zero-padded
	copy(f[0:6], dst[:])
	copy(f[6:12], src[:])
	binary.BigEndian.PutUint16(f[12:], EtherType)
	b := f[14:]
	b[0], b[1] = magic, kind
	binary.BigEndian.PutUint32(b[2:], epoch)
	binary.BigEndian.PutUint16(b[6:], uint16(len(ids)))
	for i, id := range ids {
		binary.BigEndian.PutUint64(b[ctrlHdrLen+8*i:], id)
	}
	return f
}

// appendControl appends the control frames that carry ids.
func appendControl(frames [][]byte, dst, src [6]byte, kind byte, epoch uint32, ids []uint64) [][]byte {
	for len(ids) > 0 {
		n := min(len(ids), maxIDsPerFrame)
		frames = append(frames, controlFrame(dst, src, kind, epoch, ids[:n]))
		ids = ids[n:]
	}
	return frames
}
