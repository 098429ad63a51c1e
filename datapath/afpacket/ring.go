package afpacket

import (
	"encoding/binary"
	"errors"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/datapath/packet"
	"github.com/gswitch/gswitch/internal/kick"
	"github.com/gswitch/gswitch/tables/flow"
)

// Frame is one received frame. Data aliases the ring: it is valid until
// the Block it came from is released.
type Frame struct {
	// Data is the frame as captured, from the Ethernet header on.
	Data []byte
	// Len is the frame's length on the wire; more than len(Data) when the
	// ring truncated it.
	Len int
	// Time is when the kernel received it.
	Time time.Time
	// Tagged says the kernel removed the outermost VLAN tag (VLAN
	// acceleration, which Linux applies on receive even in software): TCI
	// and TPID are that tag, and Data starts without it.
	Tagged bool
	TCI    uint16
	TPID   uint16
	// CsumNotReady is TP_STATUS_CSUMNOTREADY: the sender left the L4
	// checksum to the device (checksum offload), and Offload says where it
	// goes and whether the frame is a GSO frame still to be segmented.
	// Such a frame must be finished (AppendFinished) before it is sent on.
	CsumNotReady bool
	Offload      Offload
}

// AppendWire appends the frame to dst as it was on the wire: Data, with
// the VLAN tag the kernel removed (Tagged) put back after the MAC
// addresses. A forwarder sends this, not Data, or its tagged frames leave
// without their tag.
func (f *Frame) AppendWire(dst []byte) []byte {
	if !f.Tagged || len(f.Data) < 12 {
		return append(dst, f.Data...)
	}
	dst = append(dst, f.Data[:12]...)
	dst = binary.BigEndian.AppendUint16(dst, f.TPID)
	dst = binary.BigEndian.AppendUint16(dst, f.TCI)
	return append(dst, f.Data[12:]...)
}

// Parse extracts the frame's key, with the removed VLAN tag put back.
func (f *Frame) Parse(k *flow.Key, inPort uint32) packet.Reason {
	if f.Tagged {
		return packet.ParseTagged(k, f.Data, inPort, f.TCI)
	}
	return packet.Parse(k, f.Data, inPort)
}

// Block is one block of the receive ring that the kernel handed over: a
// batch of frames, read in place with Next and given back with Release.
type Block struct {
	q    *Queue
	data []byte // the block
	n, i int    // frames in the block, frames returned
	off  int    // offset of the next frame header in data
	gen  uint64 // the queue's socket generation the block belongs to

	// RingFrames: data is the whole ring, the block is the n slots from
	// first on (wrapping); copies counts the frames read from the socket.
	frames bool
	first  int
	copies int

	packets, bytes, truncated, errors uint64 // flushed into the queue's counters on Release
}

// Len returns the number of frames in the block.
func (b *Block) Len() int { return b.n }

// Next fills 'f' with the next frame and reports whether there was one. It
// checks every offset the kernel wrote against the block's bounds; a frame
// that fails the check ends the block and is counted in Stats.RxErrors.
func (b *Block) Next(f *Frame) bool {
	if b.i >= b.n {
		return false
	}
	if b.frames {
		if !b.nextFrame2(f) {
			b.errors++
			b.i++
			return b.Next(f)
		}
		b.i++
		b.packets++
		b.bytes += uint64(f.Len)
		if len(f.Data) < f.Len {
			b.truncated++
		}
		return true
	}
	h, ok := frameHeader(b.data, b.off)
	if ok {
		start := b.off + int(h.Mac)
		end := start + int(h.Snaplen)
		if ok = start >= b.off && end <= len(b.data); ok {
			*f = Frame{
				Data: b.data[start:end:end],
				Len:  int(h.Len),
				Time: time.Unix(int64(h.Sec), int64(h.Nsec)),
			}
			f.Tagged, f.TCI, f.TPID = vlanOf(h)
			// The virtio_net_hdr lies just before the frame; it is read only
			// for frames whose status says the offload is pending (for
			// others the kernel may not have written it).
			if h.Status&unix.TP_STATUS_CSUMNOTREADY != 0 {
				f.CsumNotReady = true
				if v := start - vnetHdrLen; v >= b.off+frameHdrLen {
					f.Offload = parseVnetHdr(b.data[v:start])
				}
			}
		}
	}
	if !ok {
		b.errors += uint64(b.n - b.i)
		b.i = b.n
		return false
	}
	b.i++
	b.off += int(h.Next_offset)
	b.packets++
	b.bytes += uint64(f.Len)
	if len(f.Data) < f.Len {
		b.truncated++
	}
	return true
}

// vlanOf reads the VLAN tag the kernel removed, if any.
func vlanOf(h *unix.Tpacket3Hdr) (bool, uint16, uint16) {
	if h.Status&unix.TP_STATUS_VLAN_VALID == 0 {
		return false, 0, 0
	}
	tpid := uint16(0x8100)
	if h.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
		tpid = h.Hv1.Vlan_tpid
	}
	return true, uint16(h.Hv1.Vlan_tci), tpid
}

// Release gives the block back to the kernel; its frames' Data must not be
// used afterwards. Releasing twice is harmless.
func (b *Block) Release() {
	q := b.q
	q.rxMu.Lock()
	defer q.rxMu.Unlock()
	if !q.held {
		return
	}
	q.held = false
	q.rxPackets.Add(b.packets)
	q.rxBytes.Add(b.bytes)
	q.rxTruncated.Add(b.truncated)
	q.rxErrors.Add(b.errors)
	if q.closed {
		q.unmapLocked()
		return
	}
	if b.gen != q.gen { // a block of a replaced socket: its ring goes
		q.unmapStaleLocked()
		return
	}
	if b.frames {
		cfg := &q.p.cfg
		total := cfg.slots()
		for i := range b.n {
			releaseSlot(slotAt(b.data, cfg, (b.first+i)%total))
		}
		q.next = (b.first + b.n) % total
		return
	}
	releaseBlock(b.data)
	q.next = (q.next + 1) % q.p.cfg.NumBlocks
}

// ReadBlock returns the queue's next block of frames, waiting for one up
// to 'timeout' (0: do not wait; negative: until a block, Close or a
// re-attachment). It returns nil and no error when the time passes without
// a block, and when the port re-attached to a re-created interface during
// the wait (reattach.go: the next call reads the new ring). The block
// must be released before the next ReadBlock; a queue has one reader at a
// time (ErrBusy otherwise), and the queues of a port are read
// independently.
func (q *Queue) ReadBlock(timeout time.Duration) (*Block, error) {
	q.rxMu.Lock()
	if q.closed {
		q.rxMu.Unlock()
		return nil, ErrClosed
	}
	if q.held || q.reading {
		q.rxMu.Unlock()
		return nil, ErrBusy
	}
	q.reading = true
	cfg := &q.p.cfg
	var data []byte
	if cfg.Ring == RingFrames {
		data = slotAt(q.ring, cfg, q.next)
	} else {
		data = q.ring[q.next*cfg.BlockSize : (q.next+1)*cfg.BlockSize]
	}
	file, raw, gen := q.file, q.raw, q.gen
	q.rxMu.Unlock()

	ready, err := q.wait(file, raw, data, timeout)

	q.rxMu.Lock()
	defer q.rxMu.Unlock()
	q.reading = false
	if q.closed {
		if !q.held {
			q.unmapLocked()
		}
		return nil, ErrClosed
	}
	if gen != q.gen { // the port re-attached while we waited: the block was the old ring's
		q.unmapStaleLocked()
		return nil, nil
	}
	if err != nil || !ready {
		return nil, err
	}
	q.held = true
	if cfg.Ring == RingFrames {
		q.block = Block{q: q, data: q.ring, gen: gen, frames: true, first: q.next}
		q.block.n = readyRun(q.ring, cfg, q.next, cfg.BlockSize/cfg.FrameSize)
		return &q.block, nil
	}
	q.block = Block{q: q, data: data, gen: gen}
	q.block.n, q.block.off = blockFrames(data)
	return &q.block, nil
}

// wait waits until the block 'data' of the socket 'file' belongs to user
// space, for at most 'timeout'.
func (q *Queue) wait(file *os.File, raw syscall.RawConn, data []byte, timeout time.Duration) (bool, error) {
	if q.ready(data) || timeout == 0 {
		return q.ready(data), nil
	}
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
		if timeout < kick.Threshold { // see package kick: else an idle process wakes ~1 ms late
			if q.kick == nil {
				q.kick, _ = kick.New() // nil on failure: the deadline is kept as the runtime keeps it
			}
			q.kick.Arm(timeout)
			defer q.kick.Disarm()
		}
	}
	if err := file.SetReadDeadline(deadline); err != nil {
		if q.p.closing.Load() {
			return false, ErrClosed
		}
		return false, err
	}
	// The kernel signals readiness when it retires a block; the callback
	// re-checks the block's status after every wake-up.
	q.waiting = data
	if q.readyFn == nil {
		q.readyFn = func(uintptr) bool { return q.ready(q.waiting) } // made once: no allocation per wait
	}
	err := raw.Read(q.readyFn)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	case q.p.closing.Load():
		return false, ErrClosed
	}
	return false, err
}

// ready reports whether the block (RingBlocks) or slot (RingFrames) 'data'
// belongs to user space.
func (q *Queue) ready(data []byte) bool {
	if q.p.cfg.Ring == RingFrames {
		return slotReady(data)
	}
	return blockReady(data)
}

// Receive reads one block of the queue (waiting as ReadBlock does), calls
// 'fn' on each of its frames, releases it and returns the number of
// frames. 'fn' must not keep the frame's Data.
func (q *Queue) Receive(timeout time.Duration, fn func(*Frame)) (int, error) {
	b, err := q.ReadBlock(timeout)
	if b == nil {
		return 0, err
	}
	n := 0
	var f Frame
	for b.Next(&f) {
		fn(&f)
		n++
	}
	b.Release()
	return n, nil
}
