package gpfscan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"syscall"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// cpuEval is a worker's CPU evaluator of one link type's program.
type cpuEval struct {
	ev  *filter.Evaluator
	out []uint64
}

// ScanConfig configures ScanCapture.
type ScanConfig struct {
	Filter    gpu.PacketFilter // the set compiled for Link and BigEndian
	Link      pcapfile.LinkType
	BigEndian bool
	// Program is the set Filter evaluates (for its packets too long for
	// the rows of a set that needs whole packets; nil: Compile's).
	Program *filter.Program
	// Compile returns the set compiled for another link type and byte
	// order (its packets are evaluated on the CPU); called from the
	// workers, it must be safe for concurrent use.
	Compile func(link pcapfile.LinkType, bigEndian bool) (*filter.Program, error)
	Workers int // parsing goroutines (0: GOMAXPROCS)
	Batch   int // packets per batch (0: 65536)
	Batches int // batches in the pool (0: 2 x Workers + 2)
	// Pool, if not empty, is the pool: batches of the Filter's own, of at
	// least Batch packets, with bitmaps if Keep, reused from scan to scan
	// (page-locked memory is slow to allocate); the scan leaves them
	// allocated.
	Pool []*gpu.PacketBatch
	Keep bool // keep each packet and its matches (ScanPiece.Packets, Matches)
}

// ScanPiece is a run of consecutive packets of the capture and their
// answers, given to ScanCapture's function in file order.
type ScanPiece struct {
	Offset int64    // file bytes up to the end of this piece's chunk (for progress)
	N      int      // packets
	Counts []uint64 // per filter: packets matched
	Bytes  []uint64 // per filter: wire lengths of the packets matched
	// Packets (ScanConfig.Keep): the packets, their Data valid during the
	// function's call (it may alias the capture's bytes).
	Packets []pcapfile.Packet
	nf      int
	b       *gpu.PacketBatch
	row     []int32  // per kept packet: its row in b, or -1-i for CPU answer i
	cpuBits []uint64 // words of the CPU answers, (nf+63)/64 each
	slab    []byte   // kept packets read through a Reader: their bytes
	lens    []int32  // and lengths
	cpu     []uint64 // the CPU's counts then bytes (nf each)
	last    bool
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
				bit := word & -word
				word ^= bit
				if err := fn(j*32 + bitIndex32(bit)); err != nil {
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
			bit := word & -word
			word ^= bit
			if err := fn(j*64 + bitIndex64(bit)); err != nil {
				return err
			}
		}
	}
	return nil
}

func bitIndex32(b uint32) int {
	n := 0
	for b > 1 {
		b >>= 1
		n++
	}
	return n
}

func bitIndex64(b uint64) int {
	n := 0
	for b > 1 {
		b >>= 1
		n++
	}
	return n
}

type scanChunk struct {
	start, end int64
	prefix     []byte
	out        chan *ScanPiece
	// pcap: the chunk's records are classic pcap ones whose headers the
	// splitter checked (each within the file, a captured length at most
	// pcapfile.MaxPacket): the worker reads them in place, as
	// pcapfile.Reader would (nil: through a Reader).
	pcap *pcapRecords
}

// pcapRecords is what a classic pcap record needs from its file header.
type pcapRecords struct {
	big  bool // the file's byte order
	nano bool
	link pcapfile.LinkType
}

// u32 reads a word in a file's byte order (inlined: no interface call
// per record).
func u32(b []byte, big bool) uint32 {
	_ = b[3]
	if big {
		return uint32(b[3]) | uint32(b[2])<<8 | uint32(b[1])<<16 | uint32(b[0])<<24
	}
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

const (
	pcapngSHB = 0x0a0d0d0a
	pcapngIDB = 1
	pcapngOPB = 2
	pcapngSPB = 3
	pcapngEPB = 6
	// a block no longer than this is cut at (pcapfile's bound is
	// MaxPacket plus 64 KiB): a longer one ends the splitting, and the
	// reader of the last chunk reports it.
	maxScanBlock = pcapfile.MaxPacket + 1<<16
)

// splitMaxBytes bounds a chunk's bytes.
const splitMaxBytes = 32 << 20

// parallelSplitMin is the size from which a classic pcap is split by
// several goroutines (a variable for the tests).
var parallelSplitMin int64 = 64 << 20

// splitCapture cuts data into chunks of at most per packets (and about
// 32 MiB) and calls emit for each, in file order; emit returning false
// stops it. A classic pcap of at least parallelSplitMin bytes is split
// by workers goroutines first (splitPcapParallel); the rest, and any
// file that way fails on, one record or block after the other.
func splitCapture(data []byte, per, workers int, emit func(c scanChunk) bool) {
	const maxBytes = splitMaxBytes
	n := int64(len(data))
	if n < 4 {
		emit(scanChunk{start: 0, end: n})
		return
	}
	le, be := binary.LittleEndian.Uint32(data), binary.BigEndian.Uint32(data)
	switch {
	case le == 0xa1b2c3d4 || le == 0xa1b23c4d || be == 0xa1b2c3d4 || be == 0xa1b23c4d:
		if n < 24 {
			emit(scanChunk{start: 0, end: n})
			return
		}
		big := be == 0xa1b2c3d4 || be == 0xa1b23c4d
		prefix := data[:24]
		rec := &pcapRecords{big: big, nano: u32(data, big) == 0xa1b23c4d, link: pcapfile.LinkType(u32(data[20:], big) & 0x03ffffff)}
		if n >= parallelSplitMin && workers > 1 {
			if cs, ok := splitPcapParallel(data, per, workers, rec); ok {
				for _, c := range cs {
					c.prefix = prefix
					if !emit(c) {
						return
					}
				}
				return
			}
		}
		start, off, pk := int64(24), int64(24), 0
		for off < n {
			if off+16 > n {
				break
			}
			incl := int64(u32(data[off+8:], big))
			if incl > pcapfile.MaxPacket || off+16+incl > n {
				break
			}
			if pk == per || off-start >= maxBytes {
				if !emit(scanChunk{start: start, end: off, prefix: prefix, pcap: rec}) {
					return
				}
				start, pk = off, 0
			}
			off += 16 + incl
			pk++
		}
		if off == n {
			emit(scanChunk{start: start, end: n, prefix: prefix, pcap: rec})
		} else { // a bad record: the Reader says where and what
			emit(scanChunk{start: start, end: n, prefix: prefix})
		}
	case be == pcapngSHB:
		var order binary.ByteOrder = binary.LittleEndian
		var prefix []byte
		start, off, pk := int64(0), int64(0), 0
		for off+12 <= n {
			if binary.BigEndian.Uint32(data[off:]) == pcapngSHB {
				bo := binary.LittleEndian.Uint32(data[off+8:])
				o := binary.ByteOrder(binary.LittleEndian)
				if bo != 0x1a2b3c4d {
					o = binary.BigEndian
				}
				total := int64(o.Uint32(data[off+4:]))
				if total < 28 || total%4 != 0 || total > maxScanBlock || off+total > n {
					break
				}
				if off > start {
					if !emit(scanChunk{start: start, end: off, prefix: prefix}) {
						return
					}
				}
				order, prefix = o, data[off:off+total:off+total]
				off += total
				start, pk = off, 0
				continue
			}
			typ, total := order.Uint32(data[off:]), int64(order.Uint32(data[off+4:]))
			if total < 12 || total%4 != 0 || total > maxScanBlock || off+total > n {
				break
			}
			isPkt := typ == pcapngEPB || typ == pcapngSPB || typ == pcapngOPB
			if isPkt && (pk == per || off-start >= maxBytes) {
				if !emit(scanChunk{start: start, end: off, prefix: prefix}) {
					return
				}
				start, pk = off, 0
			}
			if typ == pcapngIDB {
				// Later chunks need it: a new prefix (the chunks emitted
				// keep theirs).
				np := make([]byte, 0, len(prefix)+int(total))
				prefix = append(append(np, prefix...), data[off:off+total]...)
				if pk == 0 && off == start {
					start = off + total // in the prefix already
				}
			}
			if isPkt {
				pk++
			}
			off += total
		}
		emit(scanChunk{start: start, end: n, prefix: prefix})
	default:
		emit(scanChunk{start: 0, end: n}) // the reader names the magic number
	}
}

// splitPcapParallel cuts a classic pcap into chunks on workers
// goroutines: part i of the file starts at the first offset past i/workers
// of it where 16 plausible records follow one another (pcapSync); each
// goroutine hops over its part's records from there, cutting chunks, and
// must land exactly on the next part's start (the last on the end of the
// file). Then the records from the file header on pass through every
// part's start, and the chunks are the serial split's; otherwise (a
// false start, a bad record) it answers false and the caller splits
// serially.
func splitPcapParallel(data []byte, per, workers int, rec *pcapRecords) ([]scanChunk, bool) {
	n := int64(len(data))
	starts := make([]int64, workers+1)
	starts[0], starts[workers] = 24, n
	for i := 1; i < workers; i++ {
		if starts[i] = pcapSync(data, max(n*int64(i)/int64(workers), starts[i-1]), rec); starts[i] < 0 {
			return nil, false
		}
	}
	parts := make([][]scanChunk, workers)
	ok := make([]bool, workers)
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start, off, end, pk := starts[i], starts[i], starts[i+1], 0
			var cs []scanChunk
			for off < end {
				if off+16 > n {
					return
				}
				incl := int64(u32(data[off+8:], rec.big))
				if incl > pcapfile.MaxPacket || off+16+incl > n {
					return
				}
				if pk == per || off-start >= splitMaxBytes {
					cs = append(cs, scanChunk{start: start, end: off, pcap: rec})
					start, pk = off, 0
				}
				off += 16 + incl
				pk++
			}
			if off != end {
				return
			}
			if off > start {
				cs = append(cs, scanChunk{start: start, end: off, pcap: rec})
			}
			parts[i], ok[i] = cs, true
		}()
	}
	wg.Wait()
	var all []scanChunk
	for i := range parts {
		if !ok[i] {
			return nil, false
		}
		all = append(all, parts[i]...)
	}
	return all, true
}

// pcapSync returns the first offset from from on where 16 plausible
// records (or those up to the end of the file) follow one another: a
// captured length at most pcapfile.MaxPacket and the wire length, a wire
// length at most 256 KiB (libpcap's largest snapshot; it also refuses
// the record header read 4 bytes late, whose wire length is the frame's
// first bytes), a sub-second part under a second, seconds within a day of
// the first's; it returns the ninth of them (a false start tends to fall
// into step with the records after a hop or two), or -1 if none is found
// in the next 16 MiB.
func pcapSync(data []byte, from int64, rec *pcapRecords) int64 {
	n := int64(len(data))
	sub := uint32(1000000)
	if rec.nano {
		sub = 1000000000
	}
	var chain [16]int64
	for o := from; o+16 <= n && o < from+16<<20; o++ {
		at, j := o, 0
		sec0 := u32(data[o:], rec.big)
		for ; j < 16 && at+16 <= n; j++ {
			chain[j] = at
			h := data[at : at+16]
			sec, frac, incl, orig := u32(h, rec.big), u32(h[4:], rec.big), u32(h[8:], rec.big), u32(h[12:], rec.big)
			if incl > pcapfile.MaxPacket || incl > orig || orig > 1<<18 || frac >= sub || sec+86400 < sec0 || sec > sec0+86400 ||
				at+16+int64(incl) > n {
				break
			}
			at += 16 + int64(incl)
		}
		if j == 16 || at == n {
			// A false start often falls into step with the records
			// after a hop or two: the chain's ninth (or middle) one is
			// the likelier record.
			return chain[min(8, j/2)]
		}
	}
	return -1
}

// ScanCapture runs the filters over every packet of a capture held in
// data (a whole pcap or pcapng file) and calls each with the pieces in
// file order. It returns the first error: a malformed capture (the
// reader's, with the chunk's file offsets), a compile error of another
// link type, the filter's, or each's.
func ScanCapture(data []byte, cfg ScanConfig, each func(p *ScanPiece) error) error {
	if cfg.Filter == nil {
		return errors.New("gpfscan: no filter")
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	per := cfg.Batch
	if per <= 0 {
		per = 65536
	}
	pool := cfg.Batches
	if pool <= 0 {
		pool = 2*workers + 2
	}
	pool = max(pool, 2)
	if len(cfg.Pool) > 0 {
		pool = len(cfg.Pool)
	}
	free := make(chan *gpu.PacketBatch, pool)
	var all []*gpu.PacketBatch
	defer func() {
		for _, b := range all {
			cfg.Filter.FreeBatch(b)
		}
	}()
	nf := 0
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
		free <- b
		nf = b.Filters
	}
	done := make(chan struct{})
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(func() { close(done) }) }
	defer stop()
	slots := make(chan struct{}, pool-1)
	order := make(chan chan *ScanPiece, pool)
	work := make(chan scanChunk, pool)
	go func() { // the splitter
		defer close(order)
		defer close(work)
		splitCapture(data, per, workers, func(c scanChunk) bool {
			select {
			case slots <- struct{}{}:
			case <-done:
				return false
			}
			c.out = make(chan *ScanPiece, 4)
			select {
			case order <- c.out:
			case <-done:
				return false
			}
			select {
			case work <- c:
				return true
			case <-done:
				return false
			}
		})
	}()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sw := &scanWorker{cfg: &cfg, nf: nf, free: free, done: done, evs: map[linkKey]*cpuEval{}}
			for c := range work {
				sw.chunk(data, c)
			}
		}()
	}
	var first error
	total := make([]uint64, 2*nf)
	var cur chan *ScanPiece
consume:
	for out := range order {
		cur = out
		for p := range out {
			err := p.err
			if p.b != nil {
				if werr := cfg.Filter.Wait(p.b); err == nil {
					err = werr
				}
			}
			if err == nil {
				p.Counts, p.Bytes = total[:nf], total[nf:]
				clear(total)
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
				err = each(p)
			}
			if p.b != nil {
				free <- p.b
				p.b = nil
			}
			if err != nil {
				first = err
				break consume
			}
		}
		<-slots
		cur = nil
	}
	stop()
	// Drain: the workers see done and leave; chunks no worker took are
	// closed here; pieces still queued had their batches submitted, so
	// they are waited for before the deferred FreeBatch.
	wg.Wait()
	for c := range work {
		close(c.out)
	}
	if cur != nil {
		for p := range cur {
			if p.b != nil {
				cfg.Filter.Wait(p.b)
			}
		}
	}
	for out := range order {
		for p := range out {
			if p.b != nil {
				cfg.Filter.Wait(p.b)
			}
		}
	}
	return first
}

type linkKey struct {
	link pcapfile.LinkType
	big  bool
}

type scanWorker struct {
	cfg  *ScanConfig
	nf   int
	free chan *gpu.PacketBatch
	done chan struct{}
	evs  map[linkKey]*cpuEval
}

// send hands p to the consumer; false when the scan stopped (then p's
// batch, if submitted, is the drainer's).
func (w *scanWorker) send(c scanChunk, p *ScanPiece) bool {
	select {
	case c.out <- p:
		return true
	case <-w.done:
		if p.b != nil {
			w.cfg.Filter.Wait(p.b)
		}
		return false
	}
}

// cpuPacket evaluates a packet on the CPU into p's counters (and, kept,
// its matches).
func (w *scanWorker) cpuPacket(p *ScanPiece, link pcapfile.LinkType, big bool, data []byte, wire uint32) error {
	ce, err := w.eval(link, big)
	if err != nil {
		return err
	}
	words := (w.nf + 63) / 64
	ce.ev.Eval(data, wire, ce.out)
	if p.cpu == nil {
		p.cpu = make([]uint64, 2*w.nf)
	}
	for j, word := range ce.out[:words] {
		for word != 0 {
			bit := word & -word
			word ^= bit
			f := j*64 + bitIndex64(bit)
			p.cpu[f]++
			p.cpu[w.nf+f] += uint64(wire)
		}
	}
	if w.cfg.Keep {
		p.row = append(p.row, int32(-1-len(p.cpuBits)/max(words, 1)))
		p.cpuBits = append(p.cpuBits, ce.out[:words]...)
	}
	return nil
}

// fastPcap is chunk for checked pcap records of the filter's link type
// when no packet is kept: each record's captured bytes go straight into
// the next row (the common case, and the hot loop of a scan).
func (w *scanWorker) fastPcap(data []byte, c scanChunk) {
	p := &ScanPiece{Offset: c.end, nf: w.nf}
	big := c.pcap.big
	var b *gpu.PacketBatch
	take := func() bool {
		select {
		case b = <-w.free:
			b.Reset()
			p.b = b
			return true
		case <-w.done:
			return false
		}
	}
	// hand submits p's batch and sends p; false when the scan stopped or
	// the submission failed (then p carried its error).
	hand := func(last bool) bool {
		if b != nil && b.N == 0 {
			w.free <- b
			p.b, b = nil, nil
		}
		if b != nil {
			if err := w.cfg.Filter.Submit(b); err != nil {
				w.free <- b
				p.b, p.err, p.last = nil, err, true
				w.send(c, p)
				return false
			}
		}
		p.last = last
		return w.send(c, p)
	}
	for off := c.start; off < c.end; {
		h := data[off : off+16]
		incl := int64(u32(h[8:], big))
		wire := u32(h[12:], big)
		pk := data[off+16 : off+16+incl : off+16+incl]
		off += 16 + incl
		if b == nil && !take() {
			return
		}
		if b.N == len(b.Caplen) { // full: this piece goes, the packet starts the next
			if !hand(false) {
				return
			}
			p, b = &ScanPiece{Offset: c.end, nf: w.nf}, nil
			if !take() {
				return
			}
		}
		p.N++
		if b.Whole && len(pk) > b.Snap { // longer than whole-packet rows: the CPU
			if err := w.cpuPacket(p, c.pcap.link, big, pk, wire); err != nil {
				p.err, p.last = err, true
				if b.N == 0 {
					w.free <- b
					p.b = nil
				}
				w.send(c, p)
				return
			}
			continue
		}
		k := b.N
		copy(b.Data[k*b.Snap:(k+1)*b.Snap], pk)
		b.Caplen[k], b.Wire[k] = uint32(len(pk)), wire
		b.N++
	}
	hand(true)
}

func (w *scanWorker) chunk(data []byte, c scanChunk) {
	defer close(c.out)
	if c.pcap != nil && !w.cfg.Keep && c.pcap.link == w.cfg.Link && c.pcap.big == w.cfg.BigEndian {
		w.fastPcap(data, c)
		return
	}
	p := &ScanPiece{Offset: c.end, nf: w.nf}
	fail := func(err error) {
		p.err, p.last = err, true
		w.send(c, p)
	}
	var rd *pcapfile.Reader
	if c.pcap == nil {
		var err error
		if rd, err = pcapfile.NewReader(io.MultiReader(bytes.NewReader(c.prefix), bytes.NewReader(data[c.start:c.end]))); err != nil {
			fail(err)
			return
		}
	}
	off := c.start
	next := func() (pcapfile.Packet, error) {
		if rd != nil {
			return rd.Next()
		}
		if off >= c.end {
			return pcapfile.Packet{}, io.EOF
		}
		r := c.pcap
		h := data[off : off+16]
		incl := int64(u32(h[8:], r.big))
		ts := int64(u32(h, r.big)) * 1e9
		if r.nano {
			ts += int64(u32(h[4:], r.big))
		} else {
			ts += int64(u32(h[4:], r.big)) * 1e3
		}
		p := pcapfile.Packet{Link: r.link, Timestamp: ts, WireLen: u32(h[12:], r.big), Data: data[off+16 : off+16+incl : off+16+incl],
			BigEndian: r.big}
		off += 16 + incl
		return p, nil
	}
	flush := func() bool {
		if p.b != nil {
			if p.b.N == 0 {
				w.free <- p.b
				p.b = nil
			} else if err := w.cfg.Filter.Submit(p.b); err != nil {
				w.free <- p.b
				p.b = nil
				fail(err)
				return false
			}
		}
		if w.cfg.Keep && rd != nil {
			at := 0
			for i := range p.Packets {
				n := int(p.lens[i])
				p.Packets[i].Data = p.slab[at : at+n : at+n]
				at += n
			}
		}
		return true
	}
	for {
		pk, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			if flush() {
				p.err = fmt.Errorf("the records at file offsets %d to %d: %w", c.start, c.end, err)
				p.last = true
				w.send(c, p)
			}
			return
		}
		toDevice := pk.Link == w.cfg.Link && pk.BigEndian == w.cfg.BigEndian
		if toDevice {
			if p.b == nil {
				select {
				case p.b = <-w.free:
					p.b.Reset()
				case <-w.done:
					return
				}
			}
			ok, err := p.b.Add(pk.Data, pk.WireLen)
			if !ok && err == nil { // full: this piece goes, the packet starts the next
				if !flush() || !w.send(c, p) {
					return
				}
				p = &ScanPiece{Offset: c.end, nf: w.nf}
				select {
				case p.b = <-w.free:
					p.b.Reset()
				case <-w.done:
					return
				}
				ok, err = p.b.Add(pk.Data, pk.WireLen)
			}
			if err != nil && errors.Is(err, gpu.ErrPacketTooLong) {
				toDevice = false
			} else if err != nil || !ok {
				fail(fmt.Errorf("gpfscan: a batch refused a packet: %v", err))
				return
			} else if w.cfg.Keep {
				p.row = append(p.row, int32(p.b.N-1))
			}
		}
		if !toDevice {
			if err := w.cpuPacket(p, pk.Link, pk.BigEndian, pk.Data, pk.WireLen); err != nil {
				fail(err)
				return
			}
		}
		p.N++
		if w.cfg.Keep {
			if rd != nil { // the Reader's buffer: copied (re-pointed by flush)
				p.slab = append(p.slab, pk.Data...)
				p.lens = append(p.lens, int32(len(pk.Data)))
				pk.Data = nil
			}
			p.Packets = append(p.Packets, pk)
		}
	}
	if flush() {
		p.last = true
		w.send(c, p)
	}
}

func (w *scanWorker) eval(link pcapfile.LinkType, big bool) (*cpuEval, error) {
	k := linkKey{link, big}
	if ce, ok := w.evs[k]; ok {
		return ce, nil
	}
	var p *filter.Program
	switch {
	case k == linkKey{w.cfg.Link, w.cfg.BigEndian} && w.cfg.Program != nil:
		p = w.cfg.Program
	case w.cfg.Compile == nil:
		return nil, fmt.Errorf("gpfscan: a packet of link type %v and no compiler for it", link)
	default:
		var err error
		if p, err = w.cfg.Compile(link, big); err != nil {
			return nil, err
		}
	}
	if len(p.Roots) != w.nf {
		return nil, fmt.Errorf("gpfscan: %d filters compiled for link type %v, %d in the set", len(p.Roots), link, w.nf)
	}
	ce := &cpuEval{ev: filter.NewEvaluator(p), out: make([]uint64, max(p.Words(), 1))}
	w.evs[k] = ce
	return ce, nil
}

// MapCapture maps a capture file read-only and fills the mapping's page
// tables from the page cache on workers goroutines, each over its part of
// the file (MADV_POPULATE_READ, then a read of a byte per page, which
// faults in what the advice left out, in parallel): a scan's single
// splitter then finds every page mapped (not for a file larger than half
// the memory: it is faulted in as the scan reaches it). The caller calls
// unmap when done with the bytes.
func MapCapture(path string, workers int) (data []byte, unmap func() error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if st.Size() == 0 {
		return nil, func() error { return nil }, nil
	}
	if st.Size() != int64(int(st.Size())) {
		return nil, nil, fmt.Errorf("%s: too large to map", path)
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	// A file larger than half the memory is not faulted in ahead: its
	// first pages would be gone again before the scan reached them.
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) == nil && uint64(len(data)) > uint64(si.Totalram)*uint64(si.Unit)/2 {
		return data, func() error { return syscall.Munmap(data) }, nil
	}
	const madvPopulateRead = 22
	workers = max(workers, 1)
	part := (len(data)/workers + 4095) &^ 4095
	var wg sync.WaitGroup
	sink := make([]byte, workers+1)
	for i, lo := 0, 0; lo < len(data); i, lo = i+1, lo+part {
		wg.Add(1)
		go func(i int, b []byte) {
			defer wg.Done()
			_ = syscall.Madvise(b, madvPopulateRead)
			var x byte
			for j := 0; j < len(b); j += 4096 {
				x ^= b[j]
			}
			sink[i] = x
		}(i, data[lo:min(lo+part, len(data))])
	}
	wg.Wait()
	return data, func() error { return syscall.Munmap(data) }, nil
}
