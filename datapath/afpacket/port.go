package afpacket

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by a Port's methods after Close.
var ErrClosed = errors.New("afpacket: port closed")

// ErrBusy is returned by ReadBlock when a block is still held or another
// goroutine is reading: a receive queue has one reader at a time.
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
	// noCopy (tests) leaves PACKET_COPY_THRESH off: a RingFrames frame
	// longer than its slot stays truncated.
	noCopy bool
	// Promiscuous adds a PACKET_MR_PROMISC membership: the interface
	// receives frames for every MAC address while the port is open.
	Promiscuous bool
	// EventBuffer is the capacity of the link event channel. Default 16.
	EventBuffer int
	// Ring is the receive ring's layout: RingBlocks (TPACKET_V3, the
	// default) or RingFrames (TPACKET_V2, a slot per frame, handed over as
	// soon as it is written: no block retire timeout; see "Receive rings"
	// in the package documentation).
	Ring RingMode
	// FrameSize is the size of one RingFrames slot in bytes (header,
	// virtio_net_hdr and frame): a multiple of 16 that divides BlockSize.
	// A longer frame is read whole from the socket instead (the kernel
	// queues a copy, TP_STATUS_COPY). Default 2048. Unused with RingBlocks.
	FrameSize int
	// Queues is the number of receive queues: 1 (the default) is one
	// socket and one ring; N > 1 is N sockets, each with a ring of its
	// own (NumBlocks blocks each), joined in one PACKET_FANOUT group that
	// spreads the frames by flow hash (see "Receive queues" in the package
	// documentation). At most MaxQueues.
	Queues int
}

// MaxQueues bounds Config.Queues.
const MaxQueues = 64

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
	if c.Queues == 0 {
		c.Queues = 1
	}
	if c.FrameSize == 0 {
		c.FrameSize = 2048
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
	case c.Ring != RingBlocks && c.Ring != RingFrames:
		return fmt.Errorf("afpacket: ring mode %d", c.Ring)
	case c.Ring == RingFrames && (c.FrameSize < minFrameSize || c.FrameSize%16 != 0 || c.BlockSize%c.FrameSize != 0):
		return fmt.Errorf("afpacket: frame size %d: want a multiple of 16, at least %d, that divides the block size %d", c.FrameSize, minFrameSize, c.BlockSize)
	case c.Queues < 1 || c.Queues > MaxQueues:
		return fmt.Errorf("afpacket: %d receive queues: want 1..%d", c.Queues, MaxQueues)
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
	// Reattaches counts the times the interface was deleted and one of
	// the same name re-attached; ReattachFails the attempts that failed.
	Reattaches, ReattachFails uint64
}

// Port is one Linux interface attached through AF_PACKET sockets: one or
// more receive queues, each a socket with a TPACKET_V3 ring, and one
// transmit socket. See the package documentation.
type Port struct {
	cfg    Config
	index  int
	queues []*Queue // Config.Queues of them; queue 0 is ReadBlock's
	fanout int      // the PACKET_FANOUT group id; -1 with one queue

	w *watcher // follows the interface's state

	closeOnce sync.Once
	closeErr  error
	closing   atomic.Bool // set first thing in Close: lets Send and the readers name their error

	txMu sync.Mutex // serializes Send and guards the fields below
	txFd int        // the transmit socket; -1 once closed
	msgs []mmsghdr
	iovs []unix.Iovec

	txPackets, txBytes, txErrors atomic.Uint64
}

// Open attaches a port to the interface 'name': it resolves it through
// netlink, starts watching its state, and opens Config.Queues AF_PACKET
// sockets bound to it, each with a TPACKET_V3 receive ring (joined in a
// PACKET_FANOUT group when there are several), PACKET_IGNORE_OUTGOING
// and, if asked, promiscuous mode, and a transmit socket. It needs
// CAP_NET_RAW (and CAP_NET_ADMIN for netlink); an error wraps
// ErrNoInterface or os.ErrPermission where that is the cause.
func Open(name string, cfg Config) (*Port, error) {
	cfg.defaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var opened atomic.Pointer[Port] // set once the sockets are open: re-attachment waits for it
	w, info, err := watchLink(name, cfg.EventBuffer, func(l LinkInfo) error {
		if p := opened.Load(); p != nil {
			return p.reattach(l)
		}
		return ErrClosed
	})
	if err != nil {
		return nil, err
	}
	p := &Port{cfg: cfg, index: info.Index, w: w, fanout: -1, txFd: -1}
	if err := p.openSockets(); err != nil {
		for _, q := range p.queues {
			q.close()
		}
		if p.txFd >= 0 {
			unix.Close(p.txFd)
		}
		w.stop()
		return nil, fmt.Errorf("afpacket: %s: %w", name, err)
	}
	opened.Store(p)
	return p, nil
}

// openSockets opens the receive queues and the transmit socket. With
// several queues, every receive socket drops all frames (a filter) from
// before its bind until every one has joined the fanout group, so that no
// frame is read twice (by a socket not yet in the group, and by the
// group) while the group forms: the port receives from the moment Open
// returns, as with one queue.
func (p *Port) openSockets() error {
	fan := p.cfg.Queues > 1
	for i := range p.cfg.Queues {
		q, err := openQueue(p, i, fan)
		if err != nil {
			if fan {
				return fmt.Errorf("receive queue %d: %w", i, err)
			}
			return err
		}
		p.queues = append(p.queues, q)
		if fan {
			if err := p.joinFanout(q); err != nil {
				return fmt.Errorf("receive queue %d: %w", i, err)
			}
		}
	}
	if fan {
		for i, q := range p.queues {
			if err := q.control(func(fd int) error { return attachFilter(fd, ignoreOutgoingFilter) }); err != nil {
				return fmt.Errorf("receive queue %d: %w", i, err)
			}
		}
	}
	var err error
	p.txFd, err = openTxSocket(p.index)
	return err
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

// Stats reads the port's counters: the receive counters and the kernel's
// ring counters of every queue summed (PACKET_STATISTICS, which the
// kernel resets on each read and the queues accumulate), the transmit
// counters and the link watcher's. After Close the counters are still
// returned, with ErrClosed.
func (p *Port) Stats() (Stats, error) {
	var st Stats
	var first error
	for _, q := range p.queues {
		qs, err := q.Stats()
		if err != nil && first == nil {
			first = err
		}
		st.RxPackets += qs.RxPackets
		st.RxBytes += qs.RxBytes
		st.RxTruncated += qs.RxTruncated
		st.RxErrors += qs.RxErrors
		st.RingDrops += qs.RingDrops
		st.RingFreezes += qs.RingFreezes
	}
	st.TxPackets, st.TxBytes, st.TxErrors = p.txPackets.Load(), p.txBytes.Load(), p.txErrors.Load()
	st.EventDrops = p.w.drops.Load()
	st.Reattaches, st.ReattachFails = p.w.reattaches.Load(), p.w.reattachFails.Load()
	return st, first
}

// QueueStats returns receive queue i's counters (the receive and ring
// counters of Stats; the others are zero).
func (p *Port) QueueStats(i int) (Stats, error) { return p.queues[i].Stats() }

// Queues returns the number of receive queues (Config.Queues).
func (p *Port) Queues() int { return len(p.queues) }

// Queue returns receive queue i, 0 <= i < Queues(). Each queue has its own
// reader; ReadBlock and Receive on the port read queue 0.
func (p *Port) Queue(i int) *Queue { return p.queues[i] }

// FanoutGroup returns the port's PACKET_FANOUT group id (assigned by the
// kernel, unique among the network namespace's groups), or -1 for a port
// with one queue, which has no group.
func (p *Port) FanoutGroup() int {
	p.txMu.Lock() // re-attachment replaces the group (reattach.go)
	defer p.txMu.Unlock()
	return p.fanout
}

// ReadBlock reads queue 0 (see Queue.ReadBlock).
func (p *Port) ReadBlock(timeout time.Duration) (*Block, error) {
	return p.queues[0].ReadBlock(timeout)
}

// Receive reads queue 0 (see Queue.Receive).
func (p *Port) Receive(timeout time.Duration, fn func(*Frame)) (int, error) {
	return p.queues[0].Receive(timeout, fn)
}

// Close stops the link watcher, wakes the waiting ReadBlocks and a
// waiting Send (they return ErrClosed), closes the sockets and unmaps the
// rings — each at once, or, while its reader holds a block, when it
// releases it, so frames of a held block stay readable until then. Close
// is idempotent.
func (p *Port) Close() error {
	p.closeOnce.Do(func() {
		p.closing.Store(true)
		var errs []error
		for _, q := range p.queues {
			errs = append(errs, q.close())
		}
		p.closeErr = errors.Join(errs...)
		// A Send blocked for room returns within sendTimeout and sees closing.
		p.txMu.Lock()
		unix.Close(p.txFd)
		p.txFd = -1
		p.txMu.Unlock()
		p.w.stop()
	})
	return p.closeErr
}
