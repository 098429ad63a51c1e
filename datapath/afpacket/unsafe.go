package afpacket

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The ring's layout (linux/if_packet.h): a block starts with a
// tpacket_block_desc, whose header (tpacket_hdr_v1) begins at byte 8 with
// block_status; frames are tpacket3_hdr followed, at tp_mac, by the data.
const (
	blockHdrOff    = 8
	frameHdrLen    = int(unsafe.Sizeof(unix.Tpacket3Hdr{}))
	blockHdrEnd    = blockHdrOff + int(unsafe.Sizeof(unix.TpacketHdrV1{}))
	statusUserMask = unix.TP_STATUS_USER
)

// blockHdr returns the header of the block 'data' (which is page aligned).
func blockHdr(data []byte) *unix.TpacketHdrV1 {
	return (*unix.TpacketHdrV1)(unsafe.Pointer(&data[blockHdrOff]))
}

// blockReady reports whether the kernel has handed the block over; the
// atomic load orders the reads of the frames after it.
func blockReady(data []byte) bool {
	return atomic.LoadUint32(&blockHdr(data).Block_status)&statusUserMask != 0
}

// releaseBlock hands the block back to the kernel, after every read of it.
func releaseBlock(data []byte) {
	atomic.StoreUint32(&blockHdr(data).Block_status, unix.TP_STATUS_KERNEL)
}

// blockFrames returns the number of frames in a ready block and the offset
// of the first; an offset outside the block yields no frames.
func blockFrames(data []byte) (int, int) {
	h := blockHdr(data)
	off := int(h.Offset_to_first_pkt)
	if off < blockHdrEnd || off > len(data) {
		return 0, 0
	}
	return int(h.Num_pkts), off
}

// frameHeader returns the frame header at 'off' if it lies in the block.
func frameHeader(data []byte, off int) (*unix.Tpacket3Hdr, bool) {
	if off < blockHdrEnd || off+frameHdrLen > len(data) || off%4 != 0 {
		return nil, false
	}
	return (*unix.Tpacket3Hdr)(unsafe.Pointer(&data[off])), true
}

// mmsghdr is struct mmsghdr.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// sendmmsg sends msgs on fd (blocking as the socket is set to); it returns
// how many were sent, or the error of the first.
func sendmmsg(fd uintptr, msgs []mmsghdr) (int, unix.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, fd, uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)), 0, 0, 0)
	return int(n), e
}

// setIovec points 'iov' at 'b' (which must not be empty).
func setIovec(iov *unix.Iovec, b []byte) {
	iov.Base = unsafe.SliceData(b)
	iov.SetLen(len(b))
}
