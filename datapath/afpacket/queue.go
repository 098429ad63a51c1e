package afpacket

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/internal/kick"
)

// Queue is one receive queue of a port: an AF_PACKET socket with its own
// TPACKET_V3 ring and its own reader. A port with one queue has no fanout
// group; with several, the kernel gives each frame to one of them by flow
// hash (see "Receive queues" in the package documentation).
type Queue struct {
	p    *Port
	id   int
	file *os.File // the socket, in the Go poller
	raw  syscall.RawConn
	ring []byte // NumBlocks blocks of BlockSize bytes, mmap'd

	rxMu    sync.Mutex // guards the fields below and the ring's lifetime
	next    int        // the block to read next
	held    bool       // a block is out with the reader
	reading bool       // a ReadBlock is waiting
	closed  bool
	block   Block

	gen   uint64   // sockets replaced so far (reattach.go): a wait or block of an older one yields nothing
	stale [][]byte // rings of replaced sockets, unmapped once no reader holds or waits on one

	copyBufs [][]byte // RingFrames: buffers of the frames read whole from the socket (reader's)

	kick    *kick.Kicker          // wakes the runtime at a sub-millisecond ReadBlock deadline (reader's; closed with the ring)
	waiting []byte                // the block ReadBlock waits for (reader's)
	readyFn func(fd uintptr) bool // reports whether it is ready

	rxPackets, rxBytes, rxTruncated, rxErrors atomic.Uint64
	statsMu                                   sync.Mutex
	ringDrops, ringFreezes                    uint64 // guarded by statsMu
}

// openQueue creates, configures, maps and binds receive queue 'id' of p.
// With 'fan', the socket drops every frame (dropAllFilter) until the port
// replaces its filter once the fanout group is whole.
func openQueue(p *Port, id int, fan bool) (*Queue, error) {
	// Protocol 0: nothing is queued before bind, when the ring exists.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, sysErr("socket(AF_PACKET)", err)
	}
	if fan {
		if err := attachFilter(fd, dropAllFilter); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	// One promiscuous membership is enough (the interface counts them).
	ring, err := setupSocket(fd, p.index, &p.cfg, p.cfg.Promiscuous && id == 0)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	q := &Queue{p: p, id: id, ring: ring, file: os.NewFile(uintptr(fd), "afpacket")}
	if q.raw, err = q.file.SyscallConn(); err != nil {
		q.file.Close()
		unix.Munmap(ring)
		return nil, err
	}
	return q, nil
}

// setupSocket turns 'fd' into a bound TPACKET_V3 (RingBlocks) or
// TPACKET_V2 (RingFrames) socket and maps its ring.
func setupSocket(fd, index int, cfg *Config, promisc bool) ([]byte, error) {
	if cfg.Ring == RingFrames {
		if err := setupFrameRing(fd, cfg); err != nil {
			return nil, err
		}
	} else if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return nil, sysErr("PACKET_VERSION TPACKET_V3", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return nil, sysErr("PACKET_IGNORE_OUTGOING (Linux 4.20 or later)", err)
	}
	// A virtio_net_hdr before each received frame says what checksum and
	// segmentation offload is left to do (offload.go); it must be set
	// before the ring exists, and every sent frame then starts with one.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return nil, sysErr("PACKET_VNET_HDR", err)
	}
	if cfg.Ring == RingFrames {
		req := frameRingReq(cfg)
		if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return nil, sysErr("PACKET_RX_RING (TPACKET_V2)", err)
		}
		return mapAndBind(fd, index, cfg, promisc)
	}
	const frameSize = 2048 // only sizes the ring's bookkeeping: V3 packs frames
	req := unix.TpacketReq3{
		Block_size:     uint32(cfg.BlockSize),
		Block_nr:       uint32(cfg.NumBlocks),
		Frame_size:     frameSize,
		Frame_nr:       uint32(cfg.BlockSize / frameSize * cfg.NumBlocks),
		Retire_blk_tov: uint32(cfg.BlockTimeout / time.Millisecond),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return nil, sysErr("PACKET_RX_RING", err)
	}
	return mapAndBind(fd, index, cfg, promisc)
}

// mapAndBind maps the socket's ring, binds it to the interface and sets
// the promiscuous membership.
func mapAndBind(fd, index int, cfg *Config, promisc bool) ([]byte, error) {
	ring, err := unix.Mmap(fd, 0, cfg.BlockSize*cfg.NumBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, sysErr("mmap of the ring", err)
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: index}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Munmap(ring)
		return nil, sysErr("bind", err)
	}
	if promisc {
		mreq := unix.PacketMreq{Ifindex: int32(index), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			unix.Munmap(ring)
			return nil, sysErr("PACKET_ADD_MEMBERSHIP promiscuous", err)
		}
	}
	return ring, nil
}

// fanoutMode is the group's mode: by flow hash (a flow stays on one
// queue, so its order is kept), IP fragments reassembled first (so that
// all fragments of a datagram hash alike: the later ones carry no ports).
const fanoutMode = unix.PACKET_FANOUT_HASH | unix.PACKET_FANOUT_FLAG_DEFRAG

// joinFanout puts queue q into the port's fanout group. The first queue
// creates it with PACKET_FANOUT_FLAG_UNIQUEID, so the kernel picks an id
// no other group of the network namespace has (another port's, another
// process's); the others join that id. PACKET_FANOUT_FLAG_IGNORE_OUTGOING
// (a recent flag) keeps the interface's outgoing frames out of the group, as
// PACKET_IGNORE_OUTGOING does for a lone socket (the group's hook replaces
// the sockets' own); older kernels refuse or ignore it, and ignoreOutgoingFilter does
// the same work on them (and on every kernel, at the cost of a filter run
// per frame, as a second guard).
func (p *Port) joinFanout(q *Queue) error {
	return q.control(func(fd int) error {
		if p.fanout < 0 {
			err := setFanout(fd, 0, fanoutMode|unix.PACKET_FANOUT_FLAG_UNIQUEID|unix.PACKET_FANOUT_FLAG_IGNORE_OUTGOING)
			if err == unix.EINVAL {
				err = setFanout(fd, 0, fanoutMode|unix.PACKET_FANOUT_FLAG_UNIQUEID)
			}
			if err != nil {
				return sysErr("PACKET_FANOUT (a new group)", err)
			}
			v, err := unix.GetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
			if err != nil {
				return sysErr("reading the PACKET_FANOUT group id", err)
			}
			p.fanout = v & 0xffff
			return nil
		}
		// A member joins with the group's flags, without UNIQUEID (the
		// kernel keeps it only while creating the group).
		err := setFanout(fd, uint16(p.fanout), fanoutMode|unix.PACKET_FANOUT_FLAG_IGNORE_OUTGOING)
		if err == unix.EINVAL {
			err = setFanout(fd, uint16(p.fanout), fanoutMode)
		}
		if err != nil {
			return sysErr(fmt.Sprintf("PACKET_FANOUT (joining group %d)", p.fanout), err)
		}
		return nil
	})
}

func setFanout(fd int, id uint16, typeFlags int) error {
	return unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, int(id)|typeFlags<<16)
}

// Classic BPF socket filters (the value a filter returns is how many bytes
// of the frame to keep: 0 drops it).
var (
	// dropAllFilter drops every frame.
	dropAllFilter = []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}
	// ignoreOutgoingFilter drops frames leaving the interface (packet type
	// PACKET_OUTGOING, read from the skb as the ancillary field
	// SKF_AD_PKTTYPE) and keeps the others whole.
	ignoreOutgoingFilter = []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: skfAdOff + skfAdPktType},
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.PACKET_OUTGOING},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0},
		{Code: unix.BPF_RET | unix.BPF_K, K: 0xffffffff},
	}
)

// SKF_AD_OFF + SKF_AD_PKTTYPE (linux/filter.h): the ancillary load of
// skb->pkt_type.
const (
	skfAdOff     = 0xfffff000 // -0x1000 as a uint32
	skfAdPktType = 4
)

// attachFilter sets (or replaces) the socket's filter.
func attachFilter(fd int, f []unix.SockFilter) error {
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: unsafe.SliceData(f)}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &prog); err != nil {
		return sysErr("SO_ATTACH_FILTER", err)
	}
	return nil
}

// control runs fn on the queue's socket.
func (q *Queue) control(fn func(fd int) error) error {
	var ferr error
	if err := q.raw.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

// PollFD returns the descriptor of the queue's socket, or -1 once the
// queue is closed, for a reader that waits for several queues at once
// with poll(2): POLLIN means a frame (a frame ring) or a retired block (a
// block ring) is ready for ReadBlock. The descriptor is the socket's as
// the call returns; a Close or a re-attachment (reattach.go) may replace
// or close it during the poll, which then ends with POLLNVAL, or by its
// timeout, so a waiter asks again before each poll and bounds it.
func (q *Queue) PollFD() int {
	q.rxMu.Lock()
	defer q.rxMu.Unlock()
	fd := -1
	if !q.closed && q.raw != nil {
		q.raw.Control(func(f uintptr) { fd = int(f) })
	}
	return fd
}

// Index returns the queue's number in its port, 0..Queues()-1.
func (q *Queue) Index() int { return q.id }

// Stats reads the queue's receive counters, folding in the kernel's ring
// counters (PACKET_STATISTICS of its socket, which the kernel resets on
// each read). Only the receive and ring fields are set. After Close the
// counters are still returned, with ErrClosed.
func (q *Queue) Stats() (Stats, error) {
	q.statsMu.Lock()
	defer q.statsMu.Unlock()
	kerr := q.foldKernelStatsLocked()
	return Stats{
		RxPackets: q.rxPackets.Load(), RxBytes: q.rxBytes.Load(),
		RxTruncated: q.rxTruncated.Load(), RxErrors: q.rxErrors.Load(),
		RingDrops: q.ringDrops, RingFreezes: q.ringFreezes,
	}, kerr
}

// close closes the socket (waking a waiting ReadBlock) and unmaps the ring
// now, or, while the reader holds a block or is still returning from a
// wait, when it is done with it.
func (q *Queue) close() error {
	q.rxMu.Lock()
	defer q.rxMu.Unlock()
	if q.closed {
		return nil
	}
	q.closed = true
	err := q.file.Close() // wakes a ReadBlock waiting in the poller
	if !q.held && !q.reading {
		q.unmapLocked()
	}
	return err
}

// unmapLocked unmaps the ring; the caller holds rxMu and the queue is
// closed.
func (q *Queue) unmapLocked() {
	q.unmapStaleLocked()
	if q.kick != nil { // no reader waits now (the caller is the reader, or none holds or reads)
		q.kick.Close()
		q.kick = nil
	}
	if q.ring != nil {
		unix.Munmap(q.ring)
		q.ring = nil
	}
}
