package afpacket

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// Send transmits 'frames' (complete Ethernet frames) on the port with
// sendmmsg, as many per system call as the socket's buffer takes, waiting
// (in the Go poller) while it is full. It returns how many frames the
// kernel accepted and the first error; a frame the kernel refuses (too
// long for the MTU, shorter than an Ethernet header, the interface down)
// is counted in Stats.TxErrors and skipped, and the rest are still sent.
// The kernel copies the frames: they may be reused when Send returns.
// Send may be called concurrently with ReadBlock; concurrent Sends are
// serialized.
func (p *Port) Send(frames [][]byte) (int, error) {
	if len(frames) == 0 {
		return 0, nil
	}
	p.txMu.Lock()
	defer p.txMu.Unlock()
	tx := &p.tx
	*tx = txState{msgs: p.prepare(frames)}
	defer clear(p.iovs) // do not keep the caller's frames alive
	if p.sendFn == nil {
		p.sendFn = p.sendSome // made once: a method value passed on allocates
	}
	err := p.raw.Write(p.sendFn)
	p.txPackets.Add(uint64(tx.sent))
	p.txBytes.Add(tx.bytes)
	p.txErrors.Add(uint64(tx.bad))
	if err != nil {
		if p.closing.Load() {
			err = ErrClosed
		}
		return tx.sent, err
	}
	return tx.sent, tx.first
}

// txState is one Send's progress, kept in the Port (under txMu) so that
// the callback the poller runs needs no allocation.
type txState struct {
	msgs      []mmsghdr // still to send
	sent, bad int
	bytes     uint64
	first     error
}

// sendSome sends what it can of p.tx.msgs; false asks the poller to wait
// for room in the socket buffer and call again.
func (p *Port) sendSome(fd uintptr) bool {
	tx := &p.tx
	for len(tx.msgs) > 0 {
		n, errno := sendmmsg(fd, tx.msgs)
		switch {
		case errno == unix.EAGAIN:
			return false
		case errno == unix.EINTR:
			continue
		case errno != 0: // the first frame was refused: skip it
			if tx.first == nil {
				tx.first = fmt.Errorf("afpacket: send: %w", errno)
			}
			tx.bad++
			tx.msgs = tx.msgs[1:]
			continue
		}
		for i := range n {
			tx.bytes += uint64(tx.msgs[i].len) - vnetHdrLen
		}
		tx.sent += n
		tx.msgs = tx.msgs[n:]
	}
	return true
}

// emptyFrame stands in for an empty frame, which has no byte to point at.
var emptyFrame = []byte{0}

// noOffload is the virtio_net_hdr every sent frame starts with (the socket
// has PACKET_VNET_HDR): no checksum or segmentation left to the kernel,
// the frames are finished.
var noOffload = make([]byte, vnetHdrLen)

// prepare fills the port's scratch mmsghdrs and iovecs for 'frames': two
// iovecs per frame, the virtio_net_hdr and the frame.
func (p *Port) prepare(frames [][]byte) []mmsghdr {
	if cap(p.msgs) < len(frames) {
		p.msgs = make([]mmsghdr, len(frames))
		p.iovs = make([]unix.Iovec, 2*len(frames))
	}
	msgs, iovs := p.msgs[:len(frames)], p.iovs[:2*len(frames)]
	for i, f := range frames {
		setIovec(&iovs[2*i], noOffload)
		if len(f) == 0 {
			setIovec(&iovs[2*i+1], emptyFrame) // a 1-byte frame the kernel refuses
		} else {
			setIovec(&iovs[2*i+1], f)
		}
		msgs[i] = mmsghdr{}
		msgs[i].hdr.Iov = &iovs[2*i]
		msgs[i].hdr.SetIovlen(2)
	}
	return msgs
}
