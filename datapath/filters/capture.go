package filters

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/gswitch/gswitch/datapath/pcapfile"
)

// capture is a filter's capture file and its writer goroutine. offer
// (the datapath) never blocks; the writer owns the file.
type capture struct {
	cfg     CaptureConfig
	ch      chan packetOf
	written atomic.Uint64
	dropped atomic.Uint64
	err     atomic.Pointer[error] // first write error; the writer then discards

	mu     sync.Mutex // guards closed, and the close of ch against offer
	closed atomic.Bool
	done   chan struct{}
	log    *slog.Logger

	// Owned by the writer goroutine.
	f    *os.File
	w    *pcapfile.Writer
	size int64
}

// pcapng sizes: section header 28, interface description 32, enhanced
// packet block 32 + data padded to 4.
const (
	shbLen = 28
	idbLen = 32
)

func epbLen(n int) int64 { return 32 + int64((n+3)&^3) }

func openCapture(cfg CaptureConfig, depth int, log *slog.Logger) (*capture, error) {
	if cfg.MaxFiles == 0 {
		cfg.MaxFiles = 1
		if cfg.MaxBytes > 0 {
			cfg.MaxFiles = 2
		}
	}
	c := &capture{cfg: cfg, ch: make(chan packetOf, depth), done: make(chan struct{}), log: log}
	if err := c.open(); err != nil {
		return nil, err
	}
	go c.run()
	return c, nil
}

// open creates (truncates) the current file and writes its headers.
func (c *capture) open() error {
	f, err := os.OpenFile(c.cfg.File, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	w, err := pcapfile.NewWriter(f)
	if err != nil {
		f.Close()
		return err
	}
	c.f, c.w, c.size = f, w, shbLen
	return nil
}

// offer queues a copy of frame, or counts it dropped when the queue is
// full or the capture closed.
func (c *capture) offer(frame []byte, ts int64) {
	if c.closed.Load() {
		return
	}
	p := packetOf{Link: pcapfile.LinkEthernet, Timestamp: ts, WireLen: uint32(len(frame)), Data: append([]byte(nil), frame...)}
	c.mu.Lock() // only contended with close
	defer c.mu.Unlock()
	if c.closed.Load() {
		return
	}
	select {
	case c.ch <- p:
	default:
		c.dropped.Add(1)
	}
}

// close stops the writer after it has written what is queued.
func (c *capture) close() {
	c.mu.Lock()
	if c.closed.Swap(true) {
		c.mu.Unlock()
		<-c.done
		return
	}
	close(c.ch)
	c.mu.Unlock()
	<-c.done
}

func (c *capture) run() {
	defer close(c.done)
	defer func() {
		if c.w != nil {
			c.fail(c.w.Flush())
			c.fail(c.f.Close())
		}
	}()
	for p := range c.ch {
		c.write(p)
		for drained := false; !drained; {
			select {
			case q, ok := <-c.ch:
				if !ok {
					return
				}
				c.write(q)
			default:
				drained = true
			}
		}
		if c.w != nil {
			c.fail(c.w.Flush())
		}
	}
}

func (c *capture) write(p packetOf) {
	if c.w == nil {
		return // a failed rotation
	}
	n := epbLen(len(p.Data))
	if c.size == shbLen {
		n += idbLen
	}
	if c.cfg.MaxBytes > 0 && c.size > shbLen && c.size+n > c.cfg.MaxBytes {
		if err := c.rotate(); err != nil {
			c.fail(err)
			return
		}
		n += idbLen
	}
	if err := c.w.WritePacket(p); err != nil {
		c.fail(err)
		return
	}
	c.size += n
	c.written.Add(1)
}

// rotate closes the current file, shifts FILE.i to FILE.i+1 (the oldest
// beyond MaxFiles removed) and FILE to FILE.1, and opens a new FILE.
func (c *capture) rotate() error {
	err := errors.Join(c.w.Flush(), c.f.Close())
	c.w, c.f = nil, nil
	if err != nil {
		return err
	}
	keep := c.cfg.MaxFiles - 1 // rotated files kept
	if keep <= 0 {
		if err := os.Remove(c.cfg.File); err != nil {
			return err
		}
		return c.open()
	}
	_ = os.Remove(fmt.Sprintf("%s.%d", c.cfg.File, keep))
	for i := keep - 1; i >= 1; i-- {
		if err := os.Rename(fmt.Sprintf("%s.%d", c.cfg.File, i), fmt.Sprintf("%s.%d", c.cfg.File, i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(c.cfg.File, c.cfg.File+".1"); err != nil {
		return err
	}
	return c.open()
}

func (c *capture) fail(err error) {
	if err == nil {
		return
	}
	if c.err.CompareAndSwap(nil, &err) {
		c.log.Warn("capture write failed", "file", c.cfg.File, "err", err)
	}
}
