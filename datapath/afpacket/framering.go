package afpacket

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/internal/kick"
)

// RingMode is a receive ring's layout (Config.Ring).
type RingMode int

const (
	// RingBlocks is a TPACKET_V3 ring: frames packed into blocks that the
	// kernel hands over when full or BlockTimeout (at least 1 ms) after
	// their first frame. Few wake-ups under load; under light traffic a
	// frame may wait BlockTimeout in the kernel.
	RingBlocks RingMode = iota
	// RingFrames is a TPACKET_V2 ring: one slot of FrameSize bytes per
	// frame, each handed over (and its reader woken) as soon as the kernel
	// has written it. ReadBlock returns the run of ready slots as one
	// Block, so a loaded queue still reads frames in batches.
	RingFrames
)

// String names the mode as the flags do.
func (m RingMode) String() string {
	switch m {
	case RingBlocks:
		return "block"
	case RingFrames:
		return "frame"
	}
	return fmt.Sprintf("RingMode(%d)", int(m))
}

// ParseRingMode reads "block" or "frame".
func ParseRingMode(s string) (RingMode, error) {
	switch strings.ToLower(s) {
	case "block":
		return RingBlocks, nil
	case "frame":
		return RingFrames, nil
	}
	return 0, fmt.Errorf("afpacket: ring mode %q: want block or frame", s)
}

// The TPACKET_V2 slot: a tpacket2_hdr, then (at tp_mac) the frame, with
// the virtio_net_hdr just before it.
const (
	frame2HdrLen = int(unsafe.Sizeof(unix.Tpacket2Hdr{}))
	minFrameSize = 128
	// maxCopyFrame bounds a frame read from the socket (TP_STATUS_COPY):
	// a GSO frame of up to 64 KiB and its virtio_net_hdr.
	maxCopyFrame = 64<<10 + 256
)

// setupFrameRing makes 'fd' a TPACKET_V2 socket with a ring of
// NumBlocks*BlockSize/FrameSize slots. PACKET_COPY_THRESH makes the kernel
// queue a whole copy of a frame longer than a slot on the socket (while the
// socket's receive buffer has room), flagging the slot TP_STATUS_COPY.
func setupFrameRing(fd int, cfg *Config) error {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V2); err != nil {
		return sysErr("PACKET_VERSION TPACKET_V2", err)
	}
	if !cfg.noCopy {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_COPY_THRESH, 1); err != nil {
			return sysErr("PACKET_COPY_THRESH", err)
		}
		// Room for the copies: a burst of 64 KiB GSO frames from a local
		// TCP sender must not outrun the default receive buffer (about
		// 200 KiB). SO_RCVBUFFORCE passes net.core.rmem_max with
		// CAP_NET_ADMIN; without it SO_RCVBUF gets what the limit allows.
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, copyRcvBuf) != nil {
			unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, copyRcvBuf)
		}
	}
	return nil
}

// copyRcvBuf is a frame ring socket's receive buffer, which holds the
// whole copies of frames longer than a slot until they are read.
const copyRcvBuf = 8 << 20

// frameRingReq is the PACKET_RX_RING request of a RingFrames ring.
func frameRingReq(cfg *Config) unix.TpacketReq {
	return unix.TpacketReq{
		Block_size: uint32(cfg.BlockSize),
		Block_nr:   uint32(cfg.NumBlocks),
		Frame_size: uint32(cfg.FrameSize),
		Frame_nr:   uint32(cfg.BlockSize / cfg.FrameSize * cfg.NumBlocks),
	}
}

// slots returns the number of slots of a RingFrames ring.
func (c *Config) slots() int { return c.BlockSize / c.FrameSize * c.NumBlocks }

// slotAt returns slot i of a RingFrames ring (slots never cross blocks).
func slotAt(ring []byte, cfg *Config, i int) []byte {
	per := cfg.BlockSize / cfg.FrameSize
	off := i/per*cfg.BlockSize + i%per*cfg.FrameSize
	return ring[off : off+cfg.FrameSize : off+cfg.FrameSize]
}

// slotHdr returns a slot's header.
func slotHdr(slot []byte) *unix.Tpacket2Hdr {
	return (*unix.Tpacket2Hdr)(unsafe.Pointer(&slot[0]))
}

// slotReady reports whether the kernel has handed the slot over; the
// atomic load orders the reads of the frame after it.
func slotReady(slot []byte) bool {
	return atomic.LoadUint32(&slotHdr(slot).Status)&unix.TP_STATUS_USER != 0
}

// releaseSlot hands the slot back to the kernel, after every read of it.
func releaseSlot(slot []byte) {
	atomic.StoreUint32(&slotHdr(slot).Status, unix.TP_STATUS_KERNEL)
}

// readyRun counts the ready slots from 'first' on (wrapping), at most max;
// slot 'first' is known to be ready.
func readyRun(ring []byte, cfg *Config, first, max int) int {
	n, total := 1, cfg.slots()
	for n < max && n < total && slotReady(slotAt(ring, cfg, (first+n)%total)) {
		n++
	}
	return n
}

// nextFrame2 fills f with the block's next frame of a RingFrames ring.
func (b *Block) nextFrame2(f *Frame) bool {
	cfg := &b.q.p.cfg
	slot := slotAt(b.data, cfg, (b.first+b.i)%cfg.slots())
	h := slotHdr(slot)
	start := int(h.Mac)
	end := start + int(h.Snaplen)
	if start < frame2HdrLen || end > len(slot) || end < start {
		return false
	}
	*f = Frame{
		Data: slot[start:end:end],
		Len:  int(h.Len),
		Time: time.Unix(int64(h.Sec), int64(h.Nsec)),
	}
	if h.Status&unix.TP_STATUS_VLAN_VALID != 0 {
		f.Tagged, f.TCI, f.TPID = true, h.Vlan_tci, 0x8100
		if h.Status&unix.TP_STATUS_VLAN_TPID_VALID != 0 {
			f.TPID = h.Vlan_tpid
		}
	}
	if h.Status&unix.TP_STATUS_CSUMNOTREADY != 0 {
		f.CsumNotReady = true
		if v := start - vnetHdrLen; v >= frame2HdrLen {
			f.Offload = parseVnetHdr(slot[v:start])
		}
	}
	if h.Status&unix.TP_STATUS_COPY != 0 && len(f.Data) < f.Len {
		b.readCopy(f)
	}
	return true
}

// readCopy replaces a truncated frame's data by the whole copy the kernel
// queued on the socket (TP_STATUS_COPY: copies are queued in the order of
// their slots). If the copy is not there (the socket was replaced, or a
// read failed), the frame stays truncated. Each copy of a block has a
// buffer of its own (kept by the queue for the next blocks), so the
// frames of a block stay valid until it is released.
func (b *Block) readCopy(f *Frame) {
	q := b.q
	if b.copies == len(q.copyBufs) {
		q.copyBufs = append(q.copyBufs, make([]byte, maxCopyFrame))
	}
	buf := q.copyBufs[b.copies]
	q.rxMu.Lock()
	if b.gen != q.gen || q.closed {
		q.rxMu.Unlock()
		return
	}
	n := -1
	q.raw.Control(func(fd uintptr) {
		// MSG_DONTWAIT: the copy was queued before the slot was flagged.
		m, _, err := unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT|unix.MSG_TRUNC)
		if err == nil {
			n = m
		}
	})
	q.rxMu.Unlock()
	if n < vnetHdrLen || n > len(buf) || n-vnetHdrLen != f.Len {
		return
	}
	b.copies++
	f.Data = buf[vnetHdrLen:n:n]
	if f.CsumNotReady {
		f.Offload = parseVnetHdr(buf[:vnetHdrLen])
	}
}

// Ring returns the queue's ring layout (Config.Ring).
func (q *Queue) Ring() RingMode { return q.p.cfg.Ring }

// Pause sleeps for d, on time below a millisecond (package kick). A reader
// that holds an open batch and found its frame ring empty pauses until
// the batch's deadline and then reads what came meanwhile, instead of
// waiting in ReadBlock, which a frame ring wakes for every frame. Pause
// belongs to the queue's reader, like ReadBlock.
func (q *Queue) Pause(d time.Duration) {
	if d <= 0 {
		return
	}
	if d >= kick.Threshold {
		time.Sleep(d)
		return
	}
	// Marked as reading, as during a ReadBlock wait, so that a Close
	// meanwhile leaves the ring and the kicker to this goroutine.
	q.rxMu.Lock()
	if q.closed || q.held || q.reading {
		q.rxMu.Unlock()
		time.Sleep(d)
		return
	}
	q.reading = true
	q.rxMu.Unlock()
	if q.kick == nil {
		q.kick, _ = kick.New()
	}
	q.kick.Arm(d)
	time.Sleep(d)
	q.kick.Expired()
	q.rxMu.Lock()
	q.reading = false
	switch {
	case q.closed && !q.held:
		q.unmapLocked()
	case len(q.stale) > 0 && !q.held: // re-attached meanwhile
		q.unmapStaleLocked()
	}
	q.rxMu.Unlock()
}

// Ring returns queue 0's ring layout.
func (p *Port) Ring() RingMode { return p.cfg.Ring }

// Pause pauses queue 0's reader (see Queue.Pause).
func (p *Port) Pause(d time.Duration) { p.queues[0].Pause(d) }

// PollFD is queue 0's PollFD.
func (p *Port) PollFD() int { return p.queues[0].PollFD() }
