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
	msgs := p.prepare(frames)
	defer clear(p.iovs) // do not keep the caller's frames alive

	sent, bad := 0, 0
	var first error
	var bytes uint64
	err := p.raw.Write(func(fd uintptr) bool {
		for len(msgs) > 0 {
			n, errno := sendmmsg(fd, msgs)
			switch {
			case errno == unix.EAGAIN:
				return false // wait for room
			case errno == unix.EINTR:
				continue
			case errno != 0: // the first frame was refused: skip it
				if first == nil {
					first = fmt.Errorf("afpacket: send: %w", errno)
				}
				bad++
				msgs = msgs[1:]
				continue
			}
			for i := range n {
				bytes += uint64(msgs[i].hdr.Iov.Len)
			}
			sent += n
			msgs = msgs[n:]
		}
		return true
	})
	p.txPackets.Add(uint64(sent))
	p.txBytes.Add(bytes)
	p.txErrors.Add(uint64(bad))
	if err != nil {
		if p.closing.Load() {
			err = ErrClosed
		}
		return sent, err
	}
	return sent, first
}

// emptyFrame stands in for an empty frame, which has no byte to point at.
var emptyFrame = []byte{0}

// prepare fills the port's scratch mmsghdrs and iovecs for 'frames'.
func (p *Port) prepare(frames [][]byte) []mmsghdr {
	if cap(p.msgs) < len(frames) {
		p.msgs = make([]mmsghdr, len(frames))
		p.iovs = make([]unix.Iovec, len(frames))
	}
	msgs, iovs := p.msgs[:len(frames)], p.iovs[:len(frames)]
	for i, f := range frames {
		if len(f) == 0 {
			setIovec(&iovs[i], emptyFrame) // a 1-byte frame the kernel refuses
		} else {
			setIovec(&iovs[i], f)
		}
		msgs[i] = mmsghdr{}
		msgs[i].hdr.Iov = &iovs[i]
		msgs[i].hdr.SetIovlen(1)
	}
	return msgs
}
