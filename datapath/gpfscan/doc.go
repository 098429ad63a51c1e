// Package gpfscan scans a capture through a gpu.PacketFilter
// (ScanCapture): the host side of gPF's offline filtering, one pass over
// a capture held in memory (a mapped file, MapCapture), with the parsing
// spread over several goroutines.
//
// A splitter goroutine hops over the records' headers only (a pcap
// record's captured length, a pcapng block's total length) and cuts the
// file into chunks of at most one batch of packets each; every chunk
// carries the prefix that makes it a capture of its own (the pcap file
// header; the pcapng section header block and the interface description
// blocks seen so far in its section). Worker goroutines parse chunks with
// datapath/pcapfile's Reader, reduce each packet into a row of a batch
// taken from a pool (gpu.PacketBatch.Add), submit the batch (the CUDA filter
// queues it on its next stream, so that several batches are in flight)
// and hand the piece to the consumer: the goroutine that called
// ScanCapture, which waits for the pieces in file order, adds up their
// counters and gives each to the caller's function.
//
// Packets a batch cannot take go to the CPU on the worker (a
// filter.Evaluator of its own per link type): those of a link type or byte
// order other than the filter's (a pcapng file with interfaces of
// several), and those longer than the rows of a set that needs whole
// packets.
//
// Goroutines and ownership: the splitter owns the chunk list; each chunk
// belongs to one worker until its pieces are sent, each piece (and its
// batch) to the consumer once received, and the batch returns to the pool
// after the consumer's function. A semaphore bounds the chunks between
// the splitter and the consumer to the pool's size less one, so that the
// oldest chunk always finds a batch. An error anywhere closes done: every
// goroutine stops, and ScanCapture returns the first error in file order.
//
// It lives outside package gpu, which knows no protocol and no file
// format (internal/archtest), and beside datapath/pcapfile, whose record
// formats it reads in place.
package gpfscan
