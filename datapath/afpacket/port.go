package afpacket

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by a Port's methods after Close.
var ErrClosed = errors.New("afpacket: port closed")

// ErrBusy is returned by ReadBlock when a block is still held or another
// goroutine is reading: a port has one reader at a time.
var ErrBusy = errors.New("afpacket: a block is held or being read: release it first")

// Config sizes a port's receive ring. The zero value gives the defaults.
type Config struct {
	// BlockSize is the size of one ring block in bytes: a multiple of the
	// page size, and larger than the largest frame (the kernel truncates
	// frames that do not fit). Default 256 KiB.
	BlockSize int
	// NumBlocks is the number of blocks in the ring. Default 32.
	NumBlocks int
	// BlockTimeout is how long the kernel fills a block before it hands it
	// over partly full (retire_blk_tov; millisecond resolution, at least
	// 1 ms): the longest a frame waits in the ring when traffic is light.
	// Default 2 ms.
	BlockTimeout time.Duration
	// Promiscuous adds a PACKET_MR_PROMISC membership: the interface
	// receives frames for every MAC address while the port is open.
	Promiscuous bool
	// EventBuffer is the capacity of the link event channel. Default 16.
	EventBuffer int
}

func (c *Config) defaults() {
	if c.BlockSize == 0 {
		c.BlockSize = 256 << 10
	}
	if c.NumBlocks == 0 {
		c.NumBlocks = 32
	}
	if c.BlockTimeout == 0 {
		c.BlockTimeout = 2 * time.Millisecond
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = 16
	}
}

func (c *Config) validate() error {
	page := os.Getpagesize()
	switch {
	case c.BlockSize <= 0 || c.BlockSize%page != 0:
		return fmt.Errorf("afpacket: block size %d is not a positive multiple of the page size %d", c.BlockSize, page)
	case c.NumBlocks <= 0:
		return fmt.Errorf("afpacket: %d blocks", c.NumBlocks)
	case c.BlockTimeout < time.Millisecond:
		return fmt.Errorf("afpacket: block timeout %v is under 1ms", c.BlockTimeout)
	case c.EventBuffer < 0:
		return fmt.Errorf("afpacket: event buffer %d", c.EventBuffer)
	}
	return nil
}

// Stats are a port's counters since Open.
type Stats struct {
	// RxPackets and RxBytes count the frames handed to the caller and their
	// length on the wire.
	RxPackets, RxBytes uint64
	// RxTruncated counts frames the ring kept only part of (longer than a
	// block can hold); they are in RxPackets too.
	RxTruncated uint64
	// RxErrors counts frames skipped because their ring header was
	// inconsistent (an offset outside the block): never expected.
	RxErrors uint64
	// RingDrops counts frames the kernel dropped because the ring was full
	// (PACKET_STATISTICS tp_drops); RingFreezes the times the ring filled
	// up (tp_freeze_q_cnt).
	RingDrops, RingFreezes uint64
	// TxPackets and TxBytes count the frames the kernel accepted.
	TxPackets, TxBytes uint64
	// TxErrors counts frames the kernel refused (too long, too short, the
	// interface down).
	TxErrors uint64
	// EventDrops counts link events not delivered because the event
	// channel was full (Link still has the latest state).
	EventDrops uint64
}

// Port is one Linux interface attached through an AF_PACKET socket with a
// TPACKET_V3 receive ring. See the package documentation.
type Port struct {
	cfg   Config
	index int
	file  *os.File // the socket, in the Go poller
	raw   syscall.RawConn
	ring  []byte // NumBlocks blocks of BlockSize bytes, mmap'd

	w *watcher // follows the interface's state

	rxMu    sync.Mutex // guards the fields below and the ring's lifetime
	next    int        // the block to read next
	held    bool       // a block is out with the reader
	reading bool       // a ReadBlock is waiting
	closed  bool
	block   Block

	closing atomic.Bool // set first thing in Close: lets Send name its error

	txMu sync.Mutex // serializes Send and guards the fields below
	txFd int        // the transmit socket; -1 once closed
	msgs []mmsghdr
	iovs []unix.Iovec

	waiting []byte                // the block ReadBlock waits for (reader's)
	readyFn func(fd uintptr) bool // reports whether it is ready

	rxPackets, rxBytes, rxTruncated, rxErrors atomic.Uint64
	txPackets, txBytes, txErrors              atomic.Uint64
	statsMu                                   sync.Mutex
	ringDrops, ringFreezes                    uint64 // guarded by statsMu
}

// Open attaches a port to the interface 'name': it resolves it through
// netlink, starts watching its state, and opens an AF_PACKET socket bound
// to it with a TPACKET_V3 receive ring, PACKET_IGNORE_OUTGOING and, if
// asked, promiscuous mode. It needs CAP_NET_RAW (and CAP_NET_ADMIN for
// netlink); an error wraps ErrNoInterface or os.ErrPermission where that
// is the cause.
func Open(name string, cfg Config) (*Port, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w, info, err := watchLink(name, cfg.EventBuffer)
	if err != nil {
		return nil, err
	}
	p := &Port{cfg: cfg, index: info.Index, w: w}
	if err := p.openSocket(); err != nil {
		w.stop()
		return nil, fmt.Errorf("afpacket: %s: %w", name, err)
	}
	return p, nil
}

// openSocket creates, configures, maps and binds the packet socket.
func (p *Port) openSocket() error {
	// Protocol 0: nothing is queued before bind, when the ring exists.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return sysErr("socket(AF_PACKET)", err)
	}
	ring, err := setupSocket(fd, p.index, &p.cfg)
	if err != nil {
		unix.Close(fd)
		return err
	}
	if p.txFd, err = openTxSocket(p.index); err != nil {
		unix.Close(fd)
		unix.Munmap(ring)
		return err
	}
	p.ring = ring
	p.file = os.NewFile(uintptr(fd), "afpacket")
	if p.raw, err = p.file.SyscallConn(); err != nil {
		p.file.Close()
		unix.Close(p.txFd)
		unix.Munmap(ring)
		return err
	}
	return nil
}

// setupSocket turns 'fd' into a bound TPACKET_V3 socket and maps its ring.
func setupSocket(fd, index int, cfg *Config) ([]byte, error) {
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
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
	ring, err := unix.Mmap(fd, 0, cfg.BlockSize*cfg.NumBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return nil, sysErr("mmap of the ring", err)
	}
	sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: index}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Munmap(ring)
		return nil, sysErr("bind", err)
	}
	if cfg.Promiscuous {
		mreq := unix.PacketMreq{Ifindex: int32(index), Type: unix.PACKET_MR_PROMISC}
		if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
			unix.Munmap(ring)
			return nil, sysErr("PACKET_ADD_MEMBERSHIP promiscuous", err)
		}
	}
	return ring, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// sysErr names the failed step; a permission error says which capability
// is missing (and still matches os.ErrPermission).
func sysErr(what string, err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%s: %w (AF_PACKET needs CAP_NET_RAW: run as root or grant the capability)", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Link returns the interface's latest known state.
func (p *Port) Link() LinkInfo { return *p.w.info.Load() }

// Events returns the channel of link state changes (the new state; Deleted
// on removal). It is closed by Close. An event that finds the channel full
// is dropped and counted (Stats.EventDrops); Link is always current.
func (p *Port) Events() <-chan LinkInfo { return p.w.events }

// Stats reads the port's counters, folding in the kernel's ring counters
// (PACKET_STATISTICS, which the kernel resets on each read).
func (p *Port) Stats() (Stats, error) {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	var kerr error
	cerr := p.raw.Control(func(fd uintptr) {
		st, err := unix.GetsockoptTpacketStatsV3(int(fd), unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err != nil {
			kerr = sysErr("PACKET_STATISTICS", err)
			return
		}
		p.ringDrops += uint64(st.Drops)
		p.ringFreezes += uint64(st.Freeze_q_cnt)
	})
	if cerr != nil {
		kerr = ErrClosed
	}
	return Stats{
		RxPackets: p.rxPackets.Load(), RxBytes: p.rxBytes.Load(),
		RxTruncated: p.rxTruncated.Load(), RxErrors: p.rxErrors.Load(),
		RingDrops: p.ringDrops, RingFreezes: p.ringFreezes,
		TxPackets: p.txPackets.Load(), TxBytes: p.txBytes.Load(), TxErrors: p.txErrors.Load(),
		EventDrops: p.w.drops.Load(),
	}, kerr
}

// Close stops the link watcher, wakes a waiting ReadBlock and Send (they
// return ErrClosed), closes the socket and unmaps the ring — at once, or,
// while the reader holds a block, when it releases it, so frames of a held
// block stay readable until then. Close is idempotent.
func (p *Port) Close() error {
	p.rxMu.Lock()
	if p.closed {
		p.rxMu.Unlock()
		return nil
	}
	p.closed = true
	p.closing.Store(true)
	err := p.file.Close() // wakes a ReadBlock waiting in the poller
	if !p.held && !p.reading {
		p.unmapLocked()
	}
	p.rxMu.Unlock()
	// A Send blocked for room returns within sendTimeout and sees closing.
	p.txMu.Lock()
	unix.Close(p.txFd)
	p.txFd = -1
	p.txMu.Unlock()
	p.w.stop()
	return err
}

// unmapLocked unmaps the ring; the caller holds rxMu and the port is closed.
func (p *Port) unmapLocked() {
	if p.ring != nil {
		unix.Munmap(p.ring)
		p.ring = nil
	}
}
