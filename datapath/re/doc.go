// Package re is redundancy elimination between two gswitchd at the two ends
// of a link (the "WAN" port): the encoder on one side replaces byte runs of
// outgoing TCP payloads that the other side has already seen with
// references, and the decoder on the other side puts the bytes back. It is
// the system of Sun et al. (TPDS'16, GPU Rabin fingerprinting) carried to an
// encoder, a decoder and a protocol between them; the fingerprints and
// markers are package tables/rabin's (and the GPU's, kernels/rabin.cu).
//
// # What is logged
//
// A payload is the TCP payload of an IPv4 or IPv6 frame (an 802.1Q tag
// allowed) of at least MinPayload bytes, of the traffic the port's match
// selects (Config.Match; by default every TCP segment). Each side keeps a log
// of such payloads, bounded in bytes (Config.LogBytes, first in first out):
// the encoder of the payloads it sent, the decoder of those it received. A
// payload is named by its id, 64 bits computed from the packet alone on
// both sides: the CRC-32C of the payload in the high half, the CRC-32C of
// the addresses, ports and TCP sequence number in the low half. So a plain
// frame carries nothing extra: both ends name it the same way.
//
// # Encoding
//
// The encoder finds the payload's markers (window Config.Window, Config.Bits
// mask bits), looks each marker's fingerprint up in its index (fingerprint →
// the latest logged payload and position with that fingerprint, and an
// earlier one, acknowledged or the first displaced since none was, so that
// data repeating faster than acknowledgements return still finds a copy
// it may use), checks the bytes, and extends the match both ways as far
// as the bytes agree (Max-Match). Matches shorter than MinMatch are ignored. A match that
// reaches the start (end) of the logged payload goes on in the payload
// logged just before (after) it, as far as the bytes agree there, with a
// reference of its own: a stream sent again is rarely cut into the same
// TCP segments, and each new segment then spans two logged ones. The
// backward extension may run over the references found before it in the
// payload (at markers of bytes that recur elsewhere, whose runs stop
// short); the longer run replaces them. The frame is sent encoded only when
// the encoded frame is shorter than the original; else it goes unchanged.
// Either way its payload enters the log.
//
// The index's location for a fingerprint is the latest one: for bytes
// that recur often (a licence header, lines most files share, the fields
// of tar headers) not the copy the payload repeats. So the encoder also
// keeps, per flow (hints.go: a hash of addresses and ports, 1,024 slots),
// the log location just after the flow's last reference and the next
// sequence number: a payload in order expects its bytes to continue
// there, tries its first window there before any marker, and at each
// marker tries the expected location (moved by every match) before the
// index. Every candidate is checked byte by byte, so a wrong guess costs a
// comparison, never a wrong reference. On two versions of the Linux source
// (the README's pair) this took the second's savings from 73.9% to 92.8%.
//
// # The encoded frame (the shim)
//
// The Ethernet header (and VLAN tags) stay; the innermost EtherType becomes
// EtherType (0x88b5, IEEE 802 local experimental), and then, big-endian:
//
//	0      1      2      4          8          12     14     16   17   18
//	+------+------+------+----------+----------+------+------+----+----+----------
//	| 'G'  | 0x11 | type | epoch    | crc32c   | l3len| hdrl | R  | 0  | headers…
//	+------+------+------+----------+----------+------+------+----+----+----------
//	magic  ver 1,  the    encoder's  CRC-32C of original IP   refs      hdrl bytes
//	       DATA    orig.  epoch      the whole  packet  and             of IP and TCP
//	               Ether-            original   length  TCP             headers as
//	               Type              IP packet          header          sent
//	                                                    bytes
//
// then R references of 14 bytes each — payload id (8), offset in that
// payload (2), length (2), offset in this payload (2); references in
// increasing order of their offset here, not overlapping — and then the
// literal bytes: the payload's bytes outside the references, in order. The
// decoder rebuilds the payload, appends it to the headers, checks the length
// and the CRC-32C of the whole IP packet (so a restored packet is exactly
// the packet sent, checksums included), and restores the EtherType.
//
// # Bundles
//
// With RE on, most frames of a repeated stream shrink to a shim, the
// headers and a reference or two (about 90 bytes), but each would still
// cost a whole frame on the link: a transmit on the sender (for a veth,
// the peer's AF_PACKET receive runs in the sender's system call) and a
// ring slot and a read on the receiver. So Link.Send packs them
// (bundle.go, Config.Bundle): after a batch is encoded, each run of
// consecutive frames with the same bytes before their innermost EtherType
// (destination, source, at most one 802.1Q/802.1ad tag) that fit together
// within Config.Bundle bytes after the EtherType (the WAN port's MTU) goes
// as one bundle frame:
//
//	addresses [tag] | 0x88b5 | 'G' | 0x14 | count N (2) | N × ( length L (2) | L bytes: the frame from its EtherType on )
//
// A frame in a bundle is rebuilt as the bundle's bytes before its
// EtherType followed by its own L bytes. Encoded frames and plain frames
// alike may be bundled (small plain ones: TCP acknowledgements going the
// other way); control frames and bundles are not, and a frame that fits
// with no neighbour, or a run of one, goes as itself. Only consecutive
// frames are packed, so the frames leave in the batch's order and the
// decoder logs the payloads in the order the encoder logged them.
//
// The decoder (ReceiveBundle, from Link.Rx: one frame in, several out)
// takes the bundle as untrusted input: a count of 0, a length shorter
// than an EtherType or past the end, and an RE frame inside other than an
// encoded one (a control frame, a bundle) are malformed. A bad length
// loses the frames from it on (their boundaries are unknown); a frame
// that is malformed in itself, or cannot be restored, is dropped alone and
// counted as an unbundled one would be; bytes after the last frame
// (Ethernet padding) are ignored. FuzzReceive opens bundles too.
//
// # Acknowledgements, loss, reordering, restarts
//
// The encoder references only payloads the decoder has acknowledged. The
// decoder acknowledges the ids of the payloads it logs (plain or restored) in
// control frames of the same EtherType sent back on the link (AckFrame):
//
//	'G' | 0x12 (ACK) or 0x13 (NAK) | decoder epoch (4) | count N (2) | N ids of 8 bytes
//
// A frame that cannot be restored (a referenced payload missing, evicted,
// or a CRC mismatch) is dropped and counted, and its missing ids are sent in a
// NAK so that the encoder stops referencing them; the sender's TCP
// retransmits, and the retransmission goes out plain or with references the
// decoder has. Each side draws a random epoch when it starts: an ACK or NAK
// with a decoder epoch the encoder has not seen resets the encoder's
// acknowledgements (the decoder restarted with an empty log), and a DATA
// frame with an encoder epoch the decoder has not seen, once restored and
// checked, empties the decoder's log (the encoder restarted). Payload ids are
// named by content, so the logs need not be emptied for correctness; it
// keeps them in step. Loss and reordering therefore cost savings,
// never bytes: a payload is only referenced after its acknowledgement came
// back, and every restored packet is checked against the sender's CRC. A
// lost bundle loses all the frames in it at once (a dozen or more TCP
// segments of one flow, mostly): none of their payloads is logged by the
// decoder nor acknowledged, so the encoder references none of them, and
// the sender's TCP retransmits them, encoded against what the decoder has
// or raw; the loss costs the flow a retransmission of a window's part,
// not bytes.
//
// # Where the markers are computed
//
// The encoder's markers come from the CPU, found lazily while matching
// (lazy.go: inside a repeated run they are the matched logged payload's;
// a payload that matches nothing is fingerprinted in four lanes,
// rabin.Marker.MarkersFP), or, for a
// batch of at least Config.MinBatch eligible payloads, from
// Config.Markers: the seam through which the agent passes the GPU
// (DeviceMarkers over gpu.Markers, the kernel rabin_markers of
// kernels/rabin.cu) when its engine has a device in service. Every
// implementation gives rabin's positions bit for bit; the fingerprints of
// the markers are computed on the CPU from their windows. A batch the
// device fails goes to the CPU, and DeviceMarkers stays out of service
// after its first failure (counted: EncoderCounters.OffloadFailures).
//
// # The log's memory
//
// Each side's log keeps the payloads' bytes in one ring of Config.LogBytes
// bytes, written in the order they are logged; logging a payload evicts
// the oldest ones whose bytes it overwrites. A payload costs no allocation
// for its bytes, and none for its entry once the log is full (evicted
// entries are reused, log.go); an encoder entry keeps up to 12 markers
// inline. The encoder's index and both logs' ids are open-addressing
// tables (index.go) that hand out a value's address, so updating a
// fingerprint's slots is one probe, not a map read and a write; the ids'
// cells are 16 bytes, and the decoder tries its last reference's payload
// and the next one before the table, the encoder the next logged payload
// for each acknowledged id (both come in order, mostly). Each side
// checksums a payload once: the shim's CRC of the IP packet is combined
// from the headers' and the payload's CRCs (crc.go), the latter also the
// high half of the id. The encoder adds its counters once per batch.
//
// # Concurrency
//
// Encoder and Decoder each have one mutex (Encoder.mu, Decoder.mu);
// neither calls the other, so no order between them is needed. The
// encoder's EncodeBatch parses and names a whole batch (and has a device
// compute its markers) before it takes the lock, with a Scratch of the
// caller's; it then holds the lock once for the batch's matching (the
// CPU's lazy markers included), building and logging, in order. The
// decoder holds its lock for one frame. Counters are atomics, read
// without the locks.
//
// A Link's goroutines (pipe.go; the agent runs all three on its WAN port):
//
//   - The callers of Send, the switch's port goroutines. Without
//     RunEncoder each encodes and sends on its own goroutine, as above.
//     While RunEncoder runs, Send copies the batch into a hand-off of its
//     own, prepares it (parse, name, markers: the work outside the lock)
//     and queues it on a channel of RunEncoder's depth, taking encPipe.mu
//     for reading around the queueing (and waiting there for room: the
//     queue never drops, it holds its callers back, counted in
//     EncoderCounters.QueueWaits), and returns.
//   - The encoder's goroutine (RunEncoder): it owns the queued hand-offs
//     and its output buffers; it takes the batches in queue order and, for
//     each, takes Encoder.mu (match, log, build) and then sends the result
//     on the port, outside any lock of the package. So the payloads are
//     logged in the order they go on the wire, and the frames of one flow
//     (which come from one port goroutine, in order) keep their order. When
//     its context ends, encPipe.mu is taken for writing, the queue closed,
//     the batches in it sent; a Send that finds the queue closed waits until
//     they are, then encodes on its own goroutine.
//   - The port's receive goroutine runs Rx (the decoder, Decoder.mu per
//     frame or bundle; a control frame goes to Encoder.HandleControl,
//     Encoder.mu),
//     and RunAcks sends the decoder's control frames straight to the port.
//     The agent has the switch process what Rx leaves on another goroutine
//     (pipeline's SetRxSplit), so decoding and the switch's work on the
//     restored frames overlap.
//
// Locks are never nested: encPipe.mu is released before Encoder.mu is
// taken on the encoder's goroutine and is not held by it; Link.peer is a
// leaf. The decoder logs payloads in the order they arrive, which is the
// order the encoder logged them unless the link lost or reordered frames;
// that case needs no agreement on order (payloads are named by content,
// references only to acknowledged ones, every restored packet checked by
// its CRC), so the pipelining changes nothing on the wire.
package re
