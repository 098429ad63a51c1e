// Package eventfwd is content-based forwarding's datapath: a receive stage
// (pipeline.RxStage) that takes the event packets out of each received
// batch, matches them against the subscriptions as one batch, and sends
// each, unchanged, to every port whose predicate it satisfies except the
// one it came in on. Other frames go on to the flow tables as before.
//
// # Event packets
//
// An event packet is an Ethernet frame (up to two 802.1Q/802.1ad tags)
// carrying an unfragmented IPv4 or IPv6 UDP datagram to the configured UDP
// port (UDPPayload; IPv6 hop-by-hop, routing and destination options
// headers are skipped). Its payload is one event in tables/pubsub's binary
// encoding (pubsub.DecodeWire, specified in that package's doc). A frame
// to the port that is not an IP datagram of that shape (a fragment, a
// truncated header, a UDP length beyond the IP payload) is not an event
// packet and goes to the flow tables; a datagram whose payload does not
// decode is counted as malformed and dropped. The UDP checksum is not
// verified: the packet is forwarded unchanged and its receivers check it.
//
// # Matching and delivery
//
// Rx decodes the batch's event packets, calls the Matcher once for all of
// them (tables/pubsub.Table.MatchBatch on the CPU, or Hybrid with a
// device), groups the frames per output port in input order and hands each port's frames to the Transmitter
// (pipeline.Switch.Transmit, which copies them, pads them to the Ethernet
// minimum and counts a missing or down port's drops). A port's events
// leave in the order they were received within a batch.
//
// # The device (hybrid.go)
//
// Hybrid is the Matcher gswitchd uses when a GPU opens: batches of at
// least MinBatch events (DefaultMinBatch, 16: a device round trip costs
// about as much as a few events on the CPU) are matched on the device
// (gpu.EventDevice: the CUDA matcher of kernels/pubsub.cu), smaller ones on
// the CPU, and a batch the device fails is matched again on the CPU
// (counted). Subscription changes reach the device as the table's bubble
// updates (pubsub.Device.Update, applied by Device.Update): Hybrid.Sync is
// the subscription service's barrier, so a change is acknowledged once the
// device has it. A device whose bubble updates are live (LiveDevice: the
// CUDA matcher, which scatters the pending words before its next batch,
// ordered on the device, and the layout device) gets them while batches go
// on; otherwise, and for a whole image, batches wait while an update is
// written (tens of µs for a change's bubbles; HybridConfig.CPUDuringUpdates
// sends them to the CPU, which has the change already, instead). A failed
// update turns the device off; the CPU serves from then on. Per-
// subscription match counters count the device's matches too: the device
// (a SlotMatcher) brings back the filter slot that decided each delivery
// and the table credits its subscription (pubsub.Table.CountSlots); a
// batch whose slots did not all come back is matched again on the CPU for
// its counters (Recounts). The table credits under its read lock after the
// device batch (Hybrid.mu released first): a slot freed and taken again by
// a change in between credits its new owner.
//
// # Concurrency
//
// A port with several receive queues calls Rx from several goroutines at
// once: each call takes its own scratch (decoded events, per-port lists)
// from a sync.Pool. The counters are atomics; perPort's map is guarded by
// Stage.mu, a leaf lock held only to find or create a port's counter. The
// matcher is an atomic pointer, so SetMatcher never waits for a batch. The
// subscription table's own lock (pubsub.Table.mu, shared for a batch)
// orders matches against subscription changes: a change is visible to
// every batch matched after the writer returns.
package eventfwd
