package gpfscan

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/gswitch/gswitch/datapath/pcapfile"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
)

// cpuEval is a worker's CPU evaluator of one link type's program.
type cpuEval struct {
	ev    *filter.Evaluator
	out   []uint64
	words int // of out, for the filters
}

type linkKey struct {
	link pcapfile.LinkType
	big  bool
}

type scanWorker struct {
	cfg  *ScanConfig
	nf   int
	free chan *gpu.PacketBatch // where its batches come from and go back to
	done chan struct{}
	evs  map[linkKey]*cpuEval
}

func newWorker(cfg *ScanConfig, nf int, free chan *gpu.PacketBatch, done chan struct{}) *scanWorker {
	return &scanWorker{cfg: cfg, nf: nf, free: free, done: done, evs: map[linkKey]*cpuEval{}}
}

// send hands p to the consumer; false when the scan stopped (then p's
// batch, if submitted, is waited for and dropped).
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

// take gives p a batch from the worker's pool; false when the scan
// stopped.
func (w *scanWorker) take(p *ScanPiece) bool {
	select {
	case p.b = <-w.free:
		p.b.Reset()
		p.pool = w.free
		return true
	case <-w.done:
		return false
	}
}

// submit submits p's batch (an empty one goes back to the pool); the
// error is the filter's (then the batch went back too).
func (w *scanWorker) submit(p *ScanPiece) error {
	if p.b == nil {
		return nil
	}
	if p.b.N == 0 {
		w.free <- p.b
		p.b = nil
		return nil
	}
	if err := w.cfg.Filter.Submit(p.b); err != nil {
		w.free <- p.b
		p.b = nil
		return err
	}
	return nil
}

// fail sends p with err, its batch (if any) submitted first, so that the
// consumer's Wait for it is one for a batch submitted (or p has none).
func (w *scanWorker) fail(c scanChunk, p *ScanPiece, err error) {
	if serr := w.submit(p); serr != nil {
		err = errors.Join(err, serr)
	}
	p.err = err
	w.send(c, p)
}

// cpuPacket evaluates a packet on the CPU into p's counters (and, kept,
// its matches).
func (w *scanWorker) cpuPacket(p *ScanPiece, ce *cpuEval, data []byte, wire uint32) {
	ce.ev.Eval(data, wire, ce.out)
	if p.cpu == nil {
		p.cpu = make([]uint64, 2*w.nf)
	}
	cnt, byt := p.cpu[:w.nf], p.cpu[w.nf:]
	for j, word := range ce.out[:ce.words] {
		for word != 0 {
			f := j*64 + bits.TrailingZeros64(word)
			word &= word - 1
			cnt[f]++
			byt[f] += uint64(wire)
		}
	}
	if w.cfg.Keep {
		p.row = append(p.row, int32(-1-len(p.cpuBits)/max(ce.words, 1)))
		p.cpuBits = append(p.cpuBits, ce.out[:ce.words]...)
	}
}

func (w *scanWorker) chunk(data []byte, c scanChunk) {
	defer close(c.out)
	if c.open {
		w.open(data, c)
		return
	}
	w.read(data, c)
}

// open walks an open chunk's classic pcap records from c.start while the
// offset is below c.end, each in place: its captured bytes copied into
// the next row of a batch (the hot loop of a GPU scan), or evaluated
// where they lie (a scan on the CPU, or a link type or byte order other
// than the filter's). A chunk not sure of its start stops at a full
// batch and at a record that fails the checks (a captured length over
// pcapfile.MaxPacket, a record past the end of the file): its last piece
// says where (at) and which (bad).
func (w *scanWorker) open(data []byte, c scanChunk) {
	r := c.pcap
	big, n, keep := r.big, int64(len(data)), w.cfg.Keep
	p := &ScanPiece{nf: w.nf, at: c.start}
	// On the CPU: evaluated where they lie (the evaluator is found at
	// the first packet, so that a bad record comes first).
	onCPU := w.cfg.Filter == nil || r.link != w.cfg.Link || big != w.cfg.BigEndian
	var ce *cpuEval
	if !onCPU && !w.take(p) {
		return
	}
	b := p.b
	var mul int64 = 1e3
	if r.nano {
		mul = 1
	}
	off, bad := c.start, false
walk:
	for off < c.end {
		if off+16 > n {
			bad = true
			break
		}
		h := data[off : off+16 : off+16]
		incl := int64(u32(h[8:], big))
		if incl > pcapfile.MaxPacket || off+16+incl > n {
			bad = true
			break
		}
		wire := u32(h[12:], big)
		pk := data[off+16 : off+16+incl : off+16+incl]
		switch {
		case onCPU:
			if ce == nil {
				var err error
				if ce, err = w.eval(r.link, big); err != nil {
					w.fail(c, p, err)
					return
				}
			}
			w.cpuPacket(p, ce, pk, wire)
		default:
			if b.N == len(b.Caplen) { // full
				if !c.sure {
					break walk
				}
				if err := w.submit(p); err != nil {
					w.fail(c, p, err)
					return
				}
				if !w.send(c, p) {
					return
				}
				p = &ScanPiece{nf: w.nf, at: off}
				if !w.take(p) {
					return
				}
				b = p.b
			}
			if b.Whole && len(pk) > b.Snap { // longer than whole-packet rows: the CPU
				pce, err := w.eval(r.link, big)
				if err != nil {
					w.fail(c, p, err)
					return
				}
				w.cpuPacket(p, pce, pk, wire)
				break
			}
			k := b.N
			copy(b.Data[k*b.Snap:(k+1)*b.Snap], pk)
			b.Caplen[k], b.Wire[k] = uint32(incl), wire
			b.N++
			if keep {
				p.row = append(p.row, int32(k))
			}
		}
		if keep {
			p.Packets = append(p.Packets, pcapfile.Packet{Link: r.link, WireLen: wire, Data: pk, BigEndian: big,
				Timestamp: int64(u32(h, big))*1e9 + int64(u32(h[4:], big))*mul})
		}
		p.N++
		off += 16 + incl
		p.at = off
	}
	if err := w.submit(p); err != nil {
		w.fail(c, p, err)
		return
	}
	if bad && c.sure { // the Reader says what is wrong, as a serial read would
		if p.N > 0 && !w.send(c, p) {
			return
		}
		w.read(data, scanChunk{start: off, end: n, prefix: c.prefix, out: c.out})
		return
	}
	p.bad = bad
	w.send(c, p)
}

// read reads a chunk through a pcapfile.Reader (a pcapng chunk, or the
// rest of a classic pcap from a record that failed the checks): its
// packets of the filter's link type and byte order go into batches, the
// others to the CPU.
func (w *scanWorker) read(data []byte, c scanChunk) {
	p := &ScanPiece{Offset: c.end, nf: w.nf, at: c.end}
	fail := func(err error) { w.fail(c, p, err) }
	rd, err := pcapfile.NewReader(io.MultiReader(bytes.NewReader(c.prefix), bytes.NewReader(data[c.start:c.end])))
	if err != nil {
		fail(err)
		return
	}
	flush := func() bool {
		if err := w.submit(p); err != nil {
			fail(err)
			return false
		}
		if w.cfg.Keep {
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
		pk, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			fail(fmt.Errorf("the records at file offsets %d to %d: %w", c.start, c.end, err))
			return
		}
		toDevice := w.cfg.Filter != nil && pk.Link == w.cfg.Link && pk.BigEndian == w.cfg.BigEndian
		if toDevice {
			if p.b == nil && !w.take(p) {
				return
			}
			ok, err := p.b.Add(pk.Data, pk.WireLen)
			if !ok && err == nil { // full: this piece goes, the packet starts the next
				if !flush() || !w.send(c, p) {
					return
				}
				p = &ScanPiece{Offset: c.end, nf: w.nf, at: c.end}
				if !w.take(p) {
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
			ce, err := w.eval(pk.Link, pk.BigEndian)
			if err != nil {
				fail(err)
				return
			}
			w.cpuPacket(p, ce, pk.Data, pk.WireLen)
		}
		p.N++
		if w.cfg.Keep { // the Reader's buffer: copied (re-pointed by flush)
			p.slab = append(p.slab, pk.Data...)
			p.lens = append(p.lens, int32(len(pk.Data)))
			pk.Data = nil
			p.Packets = append(p.Packets, pk)
		}
	}
	if flush() {
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
	ce := &cpuEval{ev: filter.NewEvaluator(p), out: make([]uint64, max(p.Words(), 1)), words: (w.nf + 63) / 64}
	w.evs[k] = ce
	return ce, nil
}
