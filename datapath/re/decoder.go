package re

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
)

// Verdict says what the decoder made of a received frame.
type Verdict int

const (
	Plain    Verdict = iota // not encoded: forward the frame as received
	Restored                // encoded and restored: forward the returned frame
	Control                 // an ACK or NAK for this side's encoder (Encoder.HandleControl)
	Dropped                 // encoded but not restorable, or malformed: drop it (counted; a NAK is queued)
	Bundle                  // a bundle of frames: ReceiveBundle restores them (Receive leaves it as it is)
)

// Errors of Receive for dropped frames.
var (
	ErrMissing   = errors.New("re: a referenced payload is not in the log")
	ErrCRC       = errors.New("re: restored packet's CRC-32C differs from the sender's")
	ErrMalformed = errors.New("re: malformed encoded frame")
)

// Decoder is the receiving side of a link.
type Decoder struct {
	Stats DecoderStats

	mu        sync.Mutex
	cfg       Config
	log       payloadLog
	epoch     uint32
	peerEpoch uint32 // the encoder's, from its last DATA frame
	acks      []uint64
	naks      []uint64
	crc       crcShift
	// last is the payload the last reference restored from: the next
	// reference is most often to it or to the payload logged after it (a
	// stream sent again references its old copy in order), tried before
	// the log's table (whose look-ups miss the caches).
	last *entry
}

// NewDecoder returns a decoder with a fresh random epoch.
func NewDecoder(cfg Config) (*Decoder, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	d := &Decoder{cfg: cfg, log: newLog(cfg.LogBytes), epoch: randomEpoch()}
	d.log.recycle = true
	return d, nil
}

// Epoch returns the decoder's epoch.
func (d *Decoder) Epoch() uint32 { return d.epoch }

// Receive takes a frame received on the link. For Restored, res is the
// restored frame built in out (grown if needed); for Plain and Bundle, res
// is frame (a bundle is ReceiveBundle's to open).
func (d *Decoder) Receive(frame, out []byte) (res []byte, v Verdict, err error) {
	off, isRE := shimAt(frame)
	if isRE && isBundle(frame, off) {
		return frame, Bundle, nil // ReceiveBundle counts it
	}
	d.Stats.Frames.Add(1)
	d.Stats.BytesIn.Add(uint64(len(frame)))
	if !isRE {
		d.Stats.Plain.Add(1)
		d.Stats.BytesOut.Add(uint64(len(frame)))
		if s, ok := parseTCP(frame); ok && s.end-s.pay >= d.cfg.MinPayload {
			d.mu.Lock()
			d.logPayload(payloadID(frame, s), frame[s.pay:s.end])
			d.mu.Unlock()
		}
		return frame, Plain, nil
	}
	if IsControl(frame) {
		return nil, Control, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	res, err = d.restore(frame[:off-2], frame[off:], out)
	if err != nil {
		d.fail(err)
		return nil, Dropped, err
	}
	d.Stats.Restored.Add(1)
	d.Stats.BytesOut.Add(uint64(len(res)))
	return res, Restored, nil
}

// fail counts a frame that could not be restored.
func (d *Decoder) fail(err error) {
	d.Stats.Failures.Add(1)
	switch {
	case errors.Is(err, ErrMissing):
		d.Stats.Missing.Add(1)
	case errors.Is(err, ErrCRC):
		d.Stats.BadCRC.Add(1)
	default:
		d.Stats.Malformed.Add(1)
	}
}

// restore rebuilds an encoded frame whose bytes before the EtherType
// (addresses, tag) are l2 and whose shim and body are sh; d.mu is held.
func (d *Decoder) restore(l2, sh []byte, out []byte) ([]byte, error) {
	if len(sh) < shimLen || sh[0] != magic || sh[1] != kindData || sh[17] != 0 {
		return nil, fmt.Errorf("%w: bad shim header", ErrMalformed)
	}
	et := binary.BigEndian.Uint16(sh[2:])
	epoch := binary.BigEndian.Uint32(sh[4:])
	sum := binary.BigEndian.Uint32(sh[8:])
	l3len := int(binary.BigEndian.Uint16(sh[12:]))
	hdr := int(binary.BigEndian.Uint16(sh[14:]))
	nref := int(sh[16])
	body := sh[shimLen:]
	if epoch == 0 || hdr > l3len || len(body) < hdr+refLen*nref {
		return nil, fmt.Errorf("%w: lengths", ErrMalformed)
	}
	headers, refs, literal := body[:hdr], body[hdr:hdr+refLen*nref], body[hdr+refLen*nref:]
	payLen := l3len - hdr
	eth := len(l2) // the EtherType's offset
	size := eth + 2 + l3len
	if cap(out) < size {
		out = make([]byte, size)
	}
	out = out[:size]
	copy(out, l2)
	binary.BigEndian.PutUint16(out[eth:], et)
	copy(out[eth+2:], headers)
	pay := out[eth+2+hdr:]
	at := 0 // next byte of pay to fill
	var missing []uint64
	for i := 0; i < nref; i++ {
		r := refs[refLen*i:]
		id := binary.BigEndian.Uint64(r)
		src, n, dst := int(binary.BigEndian.Uint16(r[8:])), int(binary.BigEndian.Uint16(r[10:])), int(binary.BigEndian.Uint16(r[12:]))
		if dst < at || dst+n > payLen || n == 0 {
			return nil, fmt.Errorf("%w: reference %d out of order or out of the payload", ErrMalformed, i)
		}
		lit := dst - at
		if lit > len(literal) {
			return nil, fmt.Errorf("%w: literal bytes short", ErrMalformed)
		}
		copy(pay[at:], literal[:lit])
		literal = literal[lit:]
		x := d.ref(id)
		if x == nil || src+n > len(x.data) {
			missing = append(missing, id)
			at = dst + n
			continue
		}
		copy(pay[dst:], x.data[src:src+n])
		at = dst + n
	}
	if len(missing) > 0 {
		d.naks = append(d.naks, missing...)
		return nil, fmt.Errorf("%w (%d of %d references)", ErrMissing, len(missing), nref)
	}
	if len(literal) != payLen-at {
		return nil, fmt.Errorf("%w: %d literal bytes for %d", ErrMalformed, len(literal), payLen-at)
	}
	copy(pay[at:], literal)
	payCRC := checksum32c(pay[:payLen])
	if d.crc.combine(checksum32c(out[eth+2:eth+2+hdr]), payCRC, payLen) != sum {
		for i := 0; i < nref; i++ {
			d.naks = append(d.naks, binary.BigEndian.Uint64(refs[refLen*i:]))
		}
		return nil, ErrCRC
	}
	s, ok := parseTCP(out)
	if !ok || s.end != len(out) {
		return nil, fmt.Errorf("%w: restored packet is not a TCP segment", ErrMalformed)
	}
	if epoch != d.peerEpoch {
		// A restored frame of a new encoder epoch: the encoder restarted,
		// and its log starts anew; so does this one. (Only a frame that
		// passed its CRC check may reset the log.)
		if d.peerEpoch != 0 {
			d.Stats.Resets.Add(1)
			d.log.reset(nil)
		}
		d.peerEpoch = epoch
	}
	id := payloadIDCRC(out, s, payCRC)
	if s.pay != eth+2+hdr { // the shim's header length is not the headers' own
		id = payloadID(out, s)
	}
	d.logPayload(id, out[s.pay:s.end])
	return out, nil
}

// plainLocked counts a plain frame passed on and logs its payload; d.mu is
// held.
func (d *Decoder) plainLocked(frame []byte) {
	d.Stats.Plain.Add(1)
	d.Stats.BytesOut.Add(uint64(len(frame)))
	if s, ok := parseTCP(frame); ok && s.end-s.pay >= d.cfg.MinPayload {
		d.logPayload(payloadID(frame, s), frame[s.pay:s.end])
	}
}

// ref returns the logged payload of id, or nil; d.mu is held.
func (d *Decoder) ref(id uint64) *entry {
	x := d.last
	if x != nil && (x.gone || x.id != id) {
		if x = x.next; x != nil && (x.gone || x.id != id) {
			x = nil
		}
	}
	if x == nil {
		x = d.log.get(id)
	}
	if x != nil {
		d.last = x
	}
	return x
}

// logPayload logs a payload and queues its acknowledgement; d.mu is held.
func (d *Decoder) logPayload(id uint64, pay []byte) {
	if len(pay) < d.cfg.MinPayload {
		return
	}
	if d.log.get(id) == nil {
		d.log.add(d.log.newEntry(id), pay, nil)
		d.Stats.Logged.Add(1)
	}
	d.acks = append(d.acks, id)
}

// Pending returns how many acknowledgements wait to be sent.
func (d *Decoder) Pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.acks) + len(d.naks)
}

// ControlFrames returns the ACK and NAK frames to send back on the link
// (Ethernet dst and src as given) and forgets them.
func (d *Decoder) ControlFrames(dst, src [6]byte) [][]byte {
	d.mu.Lock()
	acks, naks := d.acks, d.naks
	d.acks, d.naks = nil, nil
	d.mu.Unlock()
	var frames [][]byte
	frames = appendControl(frames, dst, src, kindNak, d.epoch, naks)
	frames = appendControl(frames, dst, src, kindAck, d.epoch, acks)
	d.Stats.Naks.Add(uint64(len(naks)))
	d.Stats.Acks.Add(uint64(len(acks)))
	return frames
}

// Hello returns an ACK frame with no ids: sent when the decoder starts, so
// that the peer's encoder learns the new epoch before it references
// anything.
func (d *Decoder) Hello(dst, src [6]byte) []byte {
	return controlFrame(dst, src, kindAck, d.epoch, nil)
}
