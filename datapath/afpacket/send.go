package afpacket

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// sendTimeout bounds one blocked sendmmsg on the transmit socket
// (SO_SNDTIMEO), so that a Send waiting for room notices Close.
const sendTimeout = 100 * time.Millisecond

// openTxSocket opens the port's transmit socket: an AF_PACKET socket bound
// to the interface with protocol 0 (it receives nothing), blocking, and
// not in the Go poller. See "Sending" in the package documentation for why
// it is a socket of its own.
func openTxSocket(index int) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, sysErr("socket(AF_PACKET) for sending", err)
	}
	tv := unix.NsecToTimeval(sendTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		unix.Close(fd)
		return -1, sysErr("SO_SNDTIMEO", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: index}); err != nil {
		unix.Close(fd)
		return -1, sysErr("bind of the transmit socket", err)
	}
	return fd, nil
}

// Send transmits 'frames' (complete Ethernet frames) on the port with
// sendmmsg, as many per system call as the socket's buffer takes, waiting
// while it is full. It returns how many frames the kernel accepted and the
// first error; a frame the kernel refuses (too long for the MTU, shorter
// than an Ethernet header, the interface down) is counted in
// Stats.TxErrors and skipped, and the rest are still sent. The kernel
// copies the frames: they may be reused when Send returns. Send may be
// called concurrently with ReadBlock; concurrent Sends are serialized.
func (p *Port) Send(frames [][]byte) (int, error) {
	if len(frames) == 0 {
		return 0, nil
	}
	p.txMu.Lock()
	defer p.txMu.Unlock()
	if p.txFd < 0 || p.closing.Load() {
		return 0, ErrClosed
	}
	msgs := p.prepare(frames)
	defer clear(p.iovs) // do not keep the caller's frames alive
	var (
		sent, bad int
		bytes     uint64
		first     error
	)
	for len(msgs) > 0 {
		n, errno := sendmmsg(uintptr(p.txFd), msgs)
		switch {
		case errno == unix.EAGAIN || errno == unix.EINTR: // SO_SNDTIMEO passed, or a signal
			if p.closing.Load() {
				first = ErrClosed
				msgs = nil
			}
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
			bytes += uint64(msgs[i].len)
		}
		sent += n
		msgs = msgs[n:]
	}
	p.txPackets.Add(uint64(sent))
	p.txBytes.Add(bytes)
	p.txErrors.Add(uint64(bad))
	return sent, first
}

// emptyFrame stands in for an empty frame, which has no byte to point at.
var emptyFrame = []byte{0}

// prepare fills the port's scratch mmsghdrs and iovecs for 'frames', one
// iovec per frame.
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
