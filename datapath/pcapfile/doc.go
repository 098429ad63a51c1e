// Package pcapfile reads and writes packet capture files: the classic pcap
// format (both byte orders, microsecond and nanosecond timestamps) and
// pcapng (sections in either byte order; several interfaces, each with its
// own link type and timestamp resolution; enhanced, simple and obsolete
// packet blocks). The format is told apart by the file's magic number, never
// by its name.
//
// # Streaming and bounds
//
// A stream Reader (NewReader) holds one packet at a time: Next returns a
// Packet whose Data aliases an internal buffer (256 KiB: a record that fits
// is not copied) valid until the following call, so files much larger than
// memory are read in constant space. Every length read from the
// file is checked before it is used: a record longer than MaxPacket, a block
// shorter than its fixed part, an interface id without an interface
// description, a truncated header: each is an error naming the byte offset
// in the file, never a panic or an allocation the size of a corrupted
// length field. FuzzReader exercises this with a committed seed corpus.
//
// # In place: memory and mapped files
//
// NewReaderBytes reads a capture held in memory and Open maps a regular
// file (Linux; elsewhere, and for pipes, it streams): records and blocks
// are parsed where they lie, with no read calls, no copy and no
// allocation per packet, and each Packet's Data aliases the bytes and
// stays valid until Close (Persistent). pcap records and pcapng enhanced
// packet blocks take a short path (nextPcapMem, nextPcapNGMem) with the
// same checks and errors as the stream's; FuzzReader runs both readers on
// every input and fails on any difference. Batches parses on a goroutine
// of its own, a batch ahead of the caller's goroutine (gswitchctl
// filter's CPU backend reads this way).
//
// # Link types
//
// The link type numbers are the LINKTYPE_ values of the capture formats
// (which for raw IP, 101, differ from some operating systems' DLT_ values).
// The filter compiler in tables/filter takes a link type to know where the
// link-layer payload starts; this package only carries the number.
//
// # Writing
//
// Writer writes pcapng: one section header, one interface description per
// distinct link type (nanosecond timestamps, if_tsresol 9), and enhanced
// packet blocks. It is the format of the per-filter capture files of
// `gswitchctl filter --write`.
package pcapfile
