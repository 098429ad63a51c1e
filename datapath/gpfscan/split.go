package gpfscan

import (
	"encoding/binary"

	"github.com/gswitch/gswitch/datapath/pcapfile"
)

type scanChunk struct {
	start, end int64
	prefix     []byte
	out        chan *ScanPiece
	// pcap: the chunk's records are classic pcap ones: the worker reads
	// them in place, as pcapfile.Reader would (nil: through a Reader).
	pcap *pcapRecords
	// open (classic pcap): start is a guess (pcapSync) and end the next
	// chunk's; the worker hops over the records itself from start while
	// its offset is below end (so it may pass end), stopping early at a
	// full batch or at a record that fails the checks (ScanPiece.at,
	// bad); the consumer takes the chunk only where it starts where the
	// previous one stopped (openSplit).
	open bool
	// sure (an open chunk of the consumer's): start is a record's; a full
	// batch is handed on and another taken (the spare), and a record that
	// fails the checks sends the rest of the file to a Reader, whose
	// answer (its error, as a serial read gives it) is the scan's.
	sure bool
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

// splitCapture cuts data into chunks and calls emit for each, in file
// order; emit returning false stops it. A classic pcap is cut without
// reading its records (openSplit: chunks of about per packets, which the
// workers walk themselves); a pcapng one block after the other, into
// chunks of at most per packets (and about 32 MiB).
func splitCapture(data []byte, per int, emit func(c scanChunk) bool) {
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
		rec := &pcapRecords{big: big, nano: u32(data, big) == 0xa1b23c4d, link: pcapfile.LinkType(u32(data[20:], big) & 0x03ffffff)}
		openSplit(data, per, rec, emit)
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

// openFill is the share of a batch an open chunk's bytes are sized for
// (at the records' mean size): a chunk rarely fills its batch before its
// end, where the consumer would walk the rest itself.
const openFill = 0.95

// openSplit cuts a classic pcap into open chunks without hopping over
// all its records: the mean record size (of the first 1,024 records and
// samples through the file) sizes chunks of about openFill x per packets
// (at most 32 MiB), and each chunk after the first starts where pcapSync
// finds records past the previous start plus that size. The worker of a
// chunk walks its records from there, so that the file's records are
// read once, in parallel; a start pcapSync guessed wrong (a run of
// plausible headers in a payload) is caught by the consumer, where the
// previous chunk's walk does not stop on it, and walked again from where
// that one stopped (ScanCapture).
func openSplit(data []byte, per int, rec *pcapRecords, emit func(c scanChunk) bool) {
	n := int64(len(data))
	prefix := data[:24:24]
	// The mean record size: the first 1,024 records and 64 at each of 63
	// points through the file (where pcapSync finds records), so that a
	// capture whose first packets are unlike the rest still gets chunks
	// that rarely fill their batches.
	hop := func(off int64, most int) (int64, int) {
		from, k := off, 0
		for ; k < most && off+16 <= n; k++ {
			incl := int64(u32(data[off+8:], rec.big))
			if incl > pcapfile.MaxPacket || off+16+incl > n {
				break
			}
			off += 16 + incl
		}
		return off - from, k
	}
	sum, k := hop(24, 1024)
	if n > 1<<20 {
		for i := int64(1); i < 64; i++ {
			if s := pcapSync(data, n*i/64, rec); s >= 0 {
				b, m := hop(s, 64)
				sum, k = sum+b, k+m
			}
		}
	}
	mean := 64.0
	if k > 0 {
		mean = float64(sum) / float64(k)
	}
	size := min(max(int64(float64(per)*mean*openFill), 1), splitMaxBytes)
	for start := int64(24); start < n; {
		next := n
		for from := start + size; from < n; from += 16 << 20 {
			if s := pcapSync(data, from, rec); s >= 0 {
				next = s
				break
			}
		}
		if !emit(scanChunk{start: start, end: next, prefix: prefix, pcap: rec, open: true}) {
			return
		}
		start = next
	}
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
