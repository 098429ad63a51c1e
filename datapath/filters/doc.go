// Package filters runs gPF's monitoring filters live on gswitchd's ports:
// many tcpdump filters (tables/filter's pcap-filter language) evaluated on
// every received frame, each counting the packets and bytes it accepts and
// optionally writing them to a pcapng capture file with size rotation.
//
// # Where it runs
//
// A Set is a pipeline.RxStage: the switch calls Rx with each batch a port
// received, the frames as received with the VLAN tag the kernel removed put
// back, before it forwards them. Filters only observe: Rx returns the batch
// unchanged. Every filter of the port is evaluated on every frame
// (multi-match), with tables/filter's CPU evaluator over one Program per
// port compiled from the filters that name that port (or every port).
// Counts are summed per batch and added to each filter's atomic counters
// once per batch.
//
// # The memo
//
// A port carries a few flows at a time, whose frames differ only in bytes
// no filter reads for them (payloads, sequence numbers, IP ids and
// checksums). With 8 filters or more, each receive loop's scratch holds a
// filter.Memo: a frame whose evaluation would read what an earlier frame's
// read, with the same values and length, takes that frame's answers
// without an evaluation. The key is the bytes the earlier evaluation
// actually read (traced, every filter walked), not every byte some filter
// of the set could read: with the 100 filters of bench forward's
// filters100.txt, bench forward's UDP frames read 16 bytes (the Ethernet
// type, the IPv4 header's length byte, fragment field, protocol and
// addresses, the UDP destination port: its 16 flows share one entry), not
// the IPv6 ports' bytes that in a 60-byte UDP frame are its sequence
// number (a key on the whole byte plan, used before, missed on every
// frame of bench forward's traffic). Exactness: TestMemoExact in
// tables/filter (every answer equal to Eval's over mutated packets),
// TestMemoCountsExact and TestMemoCaptureExact here.
//
// rx sums the frames and bytes of a batch per memo slot and counts them
// to the slot's filters once at the batch's end (a slot keeps its answers
// until the next batch: filter.Memo.Begin), so a batch of 64 frames of 16
// flows touches the per-filter counts 16 times, not 64; a frame whose
// answers no slot keeps is counted alone. Capturing filters are offered
// their frames one by one (a mask of the capturing filters, nil when none
// captures). Entries outlive batches (the program is immutable; the
// scratch belongs to the generation's port program), so small batches hit
// too. On traffic that does not repeat (under a quarter of 256 lookups
// hit) the memo steps aside for 16,384 frames: plain evaluations.
//
// # Hot add and remove
//
// The compiled state is immutable and published through one
// atomic.Pointer (the pattern of Tailscale's tstun filter and OVS's
// classifier publication): Rx loads it once per batch, so a batch sees
// either the old set or the new one, never a mix. Add and Delete are
// serialized by Set.mu and publish the change at once; assembling the
// ports' programs anew (linear in the set: ~10-20 ms of CPU for 1,000
// filters) happens after, off the datapath and off Set.mu:
//
//   - Add compiles the new filter alone (a bad expression is an error
//     naming the filter and the position, and nothing changes) and
//     publishes a generation whose side path holds it: Rx evaluates the
//     port's program and then each side filter that observes the port.
//     The filter counts from the next batch on, a fraction of a
//     millisecond after the call for a set of 1,000 (BenchmarkAddVisible1000).
//   - Delete publishes a generation that drops the filter from the side
//     path or, if a program holds it, marks it dead: its matches are no
//     longer counted or captured.
//   - Either starts a merge goroutine (one at a time): it snapshots the
//     filters, assembles the programs with the set's filter.Compiler
//     (which keeps every expression compiled, so only the per-set
//     structures are built; a port whose filters did not change keeps its
//     program), and swaps them in if no change came meanwhile, else starts
//     over on the newer set. Settle waits for it.
//
// Every generation counts each of its filters exactly once per frame, in
// a program or on the side path, and a filter's counters and capture live
// in its entry, which every generation shares: no frame is lost or counted
// twice across a swap, whichever generation a batch runs on.
//
// # Captures
//
// A capturing filter owns a writer goroutine fed through a bounded
// channel. Rx copies an accepted frame into the channel without blocking:
// when it is full the frame is dropped from the capture (not from
// forwarding) and counted. The writer appends pcapng enhanced packet
// blocks (link type Ethernet, nanosecond timestamps), flushes whenever the
// channel runs empty, and rotates the file when it would grow past
// max_bytes: FILE becomes FILE.1, FILE.1 becomes FILE.2 and so on, keeping
// max_files files in all (FILE included). Delete and Close stop the writer
// after it has written everything queued.
//
// # Concurrency
//
// Goroutines: the datapath's receive loops call Rx (several at once for a
// port with several queues; each takes an Evaluator from its generation's
// pool); control-plane callers call Add, Delete, Filters and Close (Set.mu
// serializes them); at most one merge goroutine, which holds Set.mu only
// to snapshot the filters and to swap its result in (Close waits for it);
// one writer goroutine per capturing filter. Lock order: Set.mu, then the
// compiler's (held only around its map of compiled units), or Set.mu then
// a capture's mu (held only to close it). Rx takes no lock.
package filters
