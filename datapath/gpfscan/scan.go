package gpfscan

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// ScanConfig configures ScanCapture.
type ScanConfig struct {
	// Filter evaluates the batches; nil: the CPU evaluates every packet
	// where it lies in the capture (each worker a filter.Evaluator of
	// Program's; no batches, no copy).
	Filter    gpu.PacketFilter
	Link      pcapfile.LinkType // the link type and byte order Filter and Program are compiled for
	BigEndian bool
	// Program is the set Filter evaluates (for its packets too long for
	// the rows of a set that needs whole packets; nil: Compile's). Without
	// a Filter, the set the CPU evaluates (nil: Compile's for Link).
	Program *filter.Program
	// Compile returns the set compiled for another link type and byte
	// order (its packets are evaluated on the CPU); called from the
	// workers, it must be safe for concurrent use.
	Compile func(link pcapfile.LinkType, bigEndian bool) (*filter.Program, error)
	Workers int // parsing goroutines (0: GOMAXPROCS)
	// Batch is the packets per batch (0: 65536); without a Filter, about
	// the packets of a chunk (0: 16384).
	Batch int
	// Batches is the batches in the pool (0: 2 x Workers + 2; at least
	// 3); without a Filter, the chunks in flight.
	Batches int
	// Pool, if not empty, is the pool: batches of the Filter's own, of at
	// least Batch packets, with bitmaps if Keep, at least 3, reused from
	// scan to scan (page-locked memory is slow to allocate); the scan
	// leaves them allocated.
	Pool []*gpu.PacketBatch
	Keep bool // keep each packet and its matches (ScanPiece.Packets, Matches)
}

// ScanPiece is a run of consecutive packets of the capture and their
// answers, given to ScanCapture's function in file order.
type ScanPiece struct {
	Offset int64    // file bytes up to the end of this piece (or of its chunk; for progress)
	N      int      // packets
	Counts []uint64 // per filter: packets matched
	Bytes  []uint64 // per filter: wire lengths of the packets matched
	// Packets (ScanConfig.Keep): the packets, their Data valid during the
	// function's call (it may alias the capture's bytes).
	Packets []pcapfile.Packet
	nf      int
	b       *gpu.PacketBatch
	pool    chan *gpu.PacketBatch // where b goes back to
	row     []int32               // per kept packet: its row in b, or -1-i for CPU answer i
	cpuBits []uint64              // words of the CPU answers, (nf+63)/64 each
	slab    []byte                // kept packets read through a Reader: their bytes
	lens    []int32               // and lengths
	cpu     []uint64              // the CPU's counts then bytes (nf each)
	at      int64                 // an open chunk's: the file offset after the piece's last record
	bad     bool                  // an open chunk's: its walk stopped at a record that fails the checks, at at
	err     error
}

// Matches calls fn with each filter that packet i (of Packets) matched,
// in filter order.
func (p *ScanPiece) Matches(i int, fn func(f int) error) error {
	r := p.row[i]
	if r >= 0 {
		w := p.b.BitWords
		for j, word := range p.b.Bits[int(r)*w : int(r+1)*w] {
			for word != 0 {
				f := j*32 + bits.TrailingZeros32(word)
				word &= word - 1
				if err := fn(f); err != nil {
					return err
				}
			}
		}
		return nil
	}
	words := (p.nf + 63) / 64
	c := int(-1 - r)
	for j, word := range p.cpuBits[c*words : (c+1)*words] {
		for word != 0 {
			f := j*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if err := fn(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// ScanCapture runs the filters over every packet of a capture held in
// data (a whole pcap or pcapng file) and calls each with the pieces in
// file order. It returns the first error: a malformed capture (the
// reader's, with the chunk's file offsets), a compile error of another
// link type, the filter's, or each's.
func ScanCapture(data []byte, cfg ScanConfig, each func(p *ScanPiece) error) error {
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	pool := cfg.Batches
	if pool <= 0 {
		pool = 2*workers + 2
	}
	pool = max(pool, 3)
	per := cfg.Batch
	nf := 0
	var all []*gpu.PacketBatch
	free := make(chan *gpu.PacketBatch, pool)
	spare := make(chan *gpu.PacketBatch, 1) // the consumer's own walks' batch
	slots := make(chan struct{}, pool)      // chunks between the splitter and the consumer
	if cfg.Filter == nil {
		if cfg.Program == nil {
			if cfg.Compile == nil {
				return errors.New("gpfscan: no filter, no program")
			}
			p, err := cfg.Compile(cfg.Link, cfg.BigEndian)
			if err != nil {
				return err
			}
			cfg.Program = p
		}
		nf = len(cfg.Program.Roots)
		if per <= 0 {
			per = 16384
		}
	} else {
		if per <= 0 {
			per = 65536
		}
		if len(cfg.Pool) > 0 {
			if pool = len(cfg.Pool); pool < 3 {
				return fmt.Errorf("gpfscan: a pool of %d batches, want at least 3", pool)
			}
		}
		defer func() {
			for _, b := range all {
				cfg.Filter.FreeBatch(b)
			}
		}()
		for i := 0; i < pool; i++ {
			var b *gpu.PacketBatch
			if len(cfg.Pool) > 0 {
				b = cfg.Pool[i]
				if len(b.Caplen) < per || (cfg.Keep && b.BitWords == 0) {
					return fmt.Errorf("gpfscan: a pooled batch of %d packets (bitmaps %v) for batches of %d (keep %v)", len(b.Caplen), b.BitWords > 0, per, cfg.Keep)
				}
			} else {
				var err error
				if b, err = cfg.Filter.NewBatch(per, cfg.Keep); err != nil {
					return err
				}
				all = append(all, b)
			}
			if i == 0 {
				spare <- b
			} else {
				free <- b
			}
			nf = b.Filters
		}
		// The spare is not the workers': pool-1 batches for at most
		// pool-2 chunks (each holds at most one batch at a time until
		// its pieces are received), so that the oldest chunk always
		// finds one.
		slots = make(chan struct{}, pool-2)
	}
	done := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(done) }) }
	defer stop()
	order := make(chan *scanChunk, pool)
	work := make(chan scanChunk, pool)
	go func() { // the splitter
		defer close(order)
		defer close(work)
		splitCapture(data, per, func(c scanChunk) bool {
			select {
			case slots <- struct{}{}:
			case <-done:
				return false
			}
			c.out = make(chan *ScanPiece, 4)
			select {
			case order <- &c:
			case <-done:
				return false
			}
			// Never blocks (the slots bound the chunks in work), and a
			// chunk in order must reach a worker, which closes its out
			// (a select with done could leave it unclosed).
			work <- c
			return true
		})
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sw := newWorker(&cfg, nf, free, done)
			for c := range work {
				sw.chunk(data, c)
			}
		}()
	}
	c := consumer{cfg: &cfg, nf: nf, each: each, stop: stop, total: make([]uint64, 2*nf), want: -1}
	// walk is the consumer's own walk of an open chunk's records, sure
	// of its start, on a goroutine of its own with the spare.
	walk := func(from, to int64, prefix []byte, rec *pcapRecords) error {
		if testWalk != nil {
			testWalk(from, to)
		}
		cc := scanChunk{start: from, end: to, prefix: prefix, pcap: rec, open: true, sure: true, out: make(chan *ScanPiece, 4)}
		go newWorker(&cfg, nf, spare, done).chunk(data, cc)
		return c.take(&cc)
	}
	var first error
	var last *scanChunk
	for ch := range order {
		var err error
		switch {
		case !ch.open:
			err = c.take(ch)
		default:
			// A pcap's chunks are open: each is taken where it starts
			// where the walk before it stopped; a gap (a walk stopped at
			// a full batch) is walked first, and a chunk that starts
			// elsewhere (a false start, or one that walk passed) is
			// dropped and its part walked from where the walk stopped.
			if c.want < 0 {
				c.want = ch.start // the first record's
			}
			last = ch
			if c.want < ch.start {
				err = walk(c.want, ch.start, ch.prefix, ch.pcap)
			}
			if err == nil && c.want == ch.start {
				if err = c.take(ch); err == nil && c.bad {
					err = walk(c.want, ch.end, ch.prefix, ch.pcap) // the Reader's answer
				}
			} else {
				drain(&cfg, ch.out)
				if err == nil && c.want < ch.end {
					err = walk(c.want, ch.end, ch.prefix, ch.pcap)
				}
			}
		}
		<-slots
		if err != nil {
			first = err
			break
		}
	}
	if first == nil && last != nil && c.want < int64(len(data)) {
		first = walk(c.want, int64(len(data)), last.prefix, last.pcap)
	}
	stop()
	// Drain: the workers see done and leave; chunks no worker took are
	// closed here; pieces still queued had their batches submitted, so
	// they are waited for before the deferred FreeBatch.
	wg.Wait()
	for ch := range work {
		close(ch.out)
	}
	for ch := range order {
		drain(&cfg, ch.out)
	}
	return first
}

// testWalk, if set (tests), is called with each consumer's walk.
var testWalk func(from, to int64)

// consumer adds up the pieces of the chunks in file order and hands them
// to the caller's function.
type consumer struct {
	cfg   *ScanConfig
	nf    int
	each  func(p *ScanPiece) error
	stop  func()
	total []uint64
	want  int64 // open chunks: where the next one must start (-1: none yet)
	bad   bool  // the last piece taken stopped at a bad record (at want)
}

// take hands ch's pieces to the function, in order, until its out is
// closed; the first error stops the scan (the rest are drained).
func (c *consumer) take(ch *scanChunk) error {
	var first error
	nf := c.nf
	for p := range ch.out {
		if first != nil {
			release(c.cfg, p)
			continue
		}
		err := p.err
		if p.b != nil {
			if werr := c.cfg.Filter.Wait(p.b); err == nil {
				err = werr
			}
		}
		if err == nil {
			if ch.open {
				p.Offset = p.at
			}
			p.Counts, p.Bytes = c.total[:nf], c.total[nf:]
			clear(c.total)
			if p.b != nil {
				for f := 0; f < nf; f++ {
					p.Counts[f] += uint64(p.b.Counts[f])
					p.Bytes[f] += p.b.Bytes[f]
				}
			}
			if p.cpu != nil {
				for f := 0; f < nf; f++ {
					p.Counts[f] += p.cpu[f]
					p.Bytes[f] += p.cpu[nf+f]
				}
			}
			err = c.each(p)
		}
		if p.b != nil {
			p.pool <- p.b
			p.b = nil
		}
		if err != nil {
			first = err
			c.stop()
			continue
		}
		if ch.open {
			c.want, c.bad = p.at, p.bad
		}
	}
	return first
}

// release waits for a piece's batch (submitted) and puts it back.
func release(cfg *ScanConfig, p *ScanPiece) {
	if p.b != nil {
		cfg.Filter.Wait(p.b)
		p.pool <- p.b
		p.b = nil
	}
}

// drain drops a chunk's pieces until its out is closed.
func drain(cfg *ScanConfig, out chan *ScanPiece) {
	for p := range out {
		release(cfg, p)
	}
}
