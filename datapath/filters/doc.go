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
// once per batch. A batch holds a few flows' frames, which differ in no
// byte a filter reads: with 8 filters or more, Rx keeps the batch's
// answers by memo key (filter.Program.MemoKey: those bytes, with the
// frame's length) in an open-addressing table of 128 slots, and a frame
// whose key is there takes its answers without an evaluation (equal keys
// give equal answers; TestMemoCountsExact, and TestMemoKeyDecides in
// tables/filter). The table lives in the pooled scratch and is emptied
// per batch (a stamp), so no answer outlives the batch's generation.
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
