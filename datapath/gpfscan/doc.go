// Package gpfscan scans a capture through a gpu.PacketFilter, or on the
// CPU alone (ScanCapture): the host side of gPF's offline filtering, one
// pass over a capture held in memory (a mapped file, MapCapture), with
// the parsing spread over several goroutines, and the answers handed
// over in file order.
//
// A splitter goroutine cuts the file into chunks. A classic pcap is cut
// without reading its records (openSplit): the mean size of its first
// 1,024 records sizes chunks of about 95% of a batch, and each chunk
// after the first starts where pcapSync finds a run of 16 plausible
// record headers past the previous start plus that size. Such a chunk is
// open: its worker hops over the records itself from its start while the
// offset is below the next chunk's start (so the file's records are read
// once, by the workers, in parallel) and says where it stopped; it stops
// early at a full batch, or at a record that fails the checks (a captured
// length over pcapfile.MaxPacket, a record past the end of the file). A
// start is only a guess (a payload can hold plausible headers), so the
// consumer checks the chain: it takes a chunk only where it starts where
// the walk before it stopped (the first chunk starts at the first
// record); a chunk that starts elsewhere is dropped, and the consumer
// walks the records from where the last walk stopped up to the end of
// that chunk (and a gap a full batch left, up to the next start) on a
// goroutine of its own with a spare batch; where a walk met a bad
// record, the rest of the file goes through pcapfile.Reader, whose error
// is the scan's, as a serial read gives it. A pcapng file is cut one
// block after the other into chunks of at most one batch of packets,
// each carrying the prefix that makes it a capture of its own (the
// section header block and the interface description blocks seen so far
// in its section), and parsed by a Reader.
//
// With a Filter, a worker copies each packet's first bytes into the next
// row of a batch taken from a pool (the reduction of gpu.PacketBatch),
// submits the batch (the CUDA filter queues it on its next stream, so
// that several batches are in flight) and hands the piece to the
// consumer. Without one, the worker evaluates each packet where it lies
// (a filter.Evaluator of its own) and adds up the piece's counters: the
// CPU backend of gswitchctl filter, on every core. Packets a batch cannot
// take go to the CPU on the worker too: those of a link type or byte
// order other than the filter's (a pcapng file with interfaces of
// several), and those longer than the rows of a set that needs whole
// packets.
//
// Goroutines and ownership: the splitter owns the chunk list; each chunk
// belongs to one worker until its pieces are sent, each piece (and its
// batch) to the consumer once received, and the batch returns to the pool
// it came from after the consumer's function. The consumer (the goroutine
// that called ScanCapture) waits for the pieces in file order, adds up
// their counters and gives each to the caller's function. A semaphore
// bounds the chunks between the splitter and the consumer to the pool's
// size less two: the workers share all batches but the spare, each chunk
// holds at most one batch at a time until its pieces are received, so
// the oldest chunk always finds one; the spare is the consumer's own
// walks', whose pieces it receives as they come. An error anywhere closes
// done: every goroutine stops, and ScanCapture returns the first error in
// file order.
//
// It lives outside package gpu, which knows no protocol and no file
// format (internal/archtest), and beside datapath/pcapfile, whose record
// formats it reads in place.
package gpfscan
