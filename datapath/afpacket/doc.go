// Package afpacket attaches gswitch's datapath to Linux interfaces: a Port
// is one interface (a veth end, a bridge port, a physical NIC) resolved and
// watched through netlink, read through one or more AF_PACKET sockets
// with a TPACKET_V3 (or TPACKET_V2) receive ring each (receive queues) and written through
// a socket of its own with sendmmsg. It is the first and last step of the flow of a packet
// (DESIGN.md): frames come out of the ring in batches, their keys are
// extracted in place (Frame.Parse, package datapath/packet), and the
// frames the actions produce leave in batches.
//
// # Receiving
//
// The ring is NumBlocks blocks of BlockSize bytes mapped into the process.
// The kernel packs frames into the current block and hands it over when it
// is full or BlockTimeout has passed since its first frame (so the timeout
// bounds the added latency under light traffic, and under load a block is
// a natural batch). ReadBlock waits for the next block in the Go runtime's
// poller (no thread is blocked, Close wakes it), and returns a Block whose
// frames Next yields in place: Frame.Data aliases the ring, nothing is
// copied, nothing is allocated per frame or per block. Release gives the
// block back; until then the kernel cannot refill it, and when every
// block is held or unread the kernel drops frames and counts them
// (PACKET_STATISTICS, folded into Stats.RingDrops). Under light traffic a
// block retires with few frames in it, so what a ring lasts without its
// reader is about NumBlocks * BlockTimeout, not its bytes: a reader kept
// off its core longer than that (64 ms at the defaults, 32 blocks of 2 ms)
// loses frames of traffic as light as one frame every 2 ms. Every offset
// the kernel wrote is checked against the block's bounds before it is
// followed.
//
// # Receive rings
//
// That is the default ring, Config.Ring = RingBlocks (TPACKET_V3). Its
// block retire timeout has a resolution of a millisecond and is at least
// one, so under light traffic a frame can wait a millisecond or more in
// the kernel before its reader even sees it: no batch delay below that
// can be kept. RingFrames is a TPACKET_V2 ring instead: NumBlocks blocks
// cut into slots of FrameSize bytes (default 2048), one frame per slot,
// each slot handed over (its status set, the reader woken) as soon as the
// kernel has written it. ReadBlock waits for the next slot in the poller
// as for a block, then returns the run of consecutive ready slots (at most
// a ring block's worth, wrapping at the ring's end) as one Block, so a
// loaded queue still reads its frames in batches, and Release gives those
// slots back in order. The frame's receive time, VLAN tag and
// virtio_net_hdr come from the slot as from a V3 frame header.
//
// A frame longer than a slot would be truncated (snaplen = slot room); the
// socket sets PACKET_COPY_THRESH, so the kernel also queues a whole copy
// of such a frame on the socket (while its receive buffer, set to 8 MiB,
// has room) and
// flags the slot TP_STATUS_COPY: Next reads the copy with recvfrom (the
// copies are queued in slot order) into a buffer the queue keeps, so a
// 64 KiB GSO frame from a local stack arrives whole. Without a copy the
// frame stays truncated and counts in Stats.RxTruncated (gswitchd's
// datapath drops it: Counters.OffloadDrops). Frames at most a
// slot long, the common case, are read in place, as on a V3 ring.
//
// A ring alone does not keep a short delay: when the process is idle the
// Go runtime sleeps with a millisecond's resolution, so a ReadBlock
// deadline of 100 µs expired after about 1 ms. A ReadBlock that waits less
// than a millisecond arms the queue's timerfd (package kick) at its
// deadline, which wakes the runtime on time.
//
// With --rx-ring auto gswitchd picks the frame ring when --max-delay is
// under a millisecond and no GPU serves its datapath, the block ring
// otherwise (on the shared device batches' path the frame ring's many
// small batches queued longer than the block ring's timeout: H200,
// 2026-11-26); --rx-ring block|frame forces one.
//
// Linux removes the outermost VLAN tag on receive, also on veth (the
// software path untags before packet taps run), and AF_PACKET reports it
// beside the frame: Frame.Tagged, TCI, TPID. Frame.Parse puts it back into
// the key.
//
// Checksum and segmentation offload: a frame a local stack sent through a
// veth (tx checksum and TSO on, the default) arrives with its TCP/UDP
// checksum partial and possibly as one GSO frame of up to 64 KiB; the
// kernel flags it TP_STATUS_CSUMNOTREADY (Frame.CsumNotReady). The socket
// sets PACKET_VNET_HDR, so the kernel writes a virtio_net_hdr before each
// frame, which gives the checksum's start and offset and the GSO type and
// segment size (Frame.Offload). FinishChecksum and AppendFinished complete
// such a frame in software (the checksum; TCP over IPv4/IPv6 and UDP_L4
// segmentation) before it is forwarded. Sent frames are prefixed with an
// empty virtio_net_hdr: they are always finished.
//
// The socket sets PACKET_IGNORE_OUTGOING (Linux 4.20 or later; Open fails
// without it): frames leaving the interface — sent by this port, another
// port on the same interface, or the host — are not read back. (The kernel
// never loops a socket's own frames back to it; the option is what keeps
// a second socket's, or the host stack's, out.) With Config.Promiscuous a
// PACKET_MR_PROMISC membership puts the interface in promiscuous mode for
// as long as the socket lives; the kernel drops it on Close.
//
// # Receive queues
//
// One ring read by one goroutine keeps a port's receive work on one core
// at most. Config.Queues = N > 1 opens N receive sockets on the interface,
// each with its own ring (NumBlocks blocks each) and its own reader
// (Port.Queue(i): ReadBlock, Receive; Port.ReadBlock and Receive read queue
// 0), joined in one PACKET_FANOUT group: the kernel hands each received
// frame to exactly one member. The mode is PACKET_FANOUT_HASH, the
// frame's flow hash (addresses and ports, symmetric) modulo N, so all
// frames of a flow go to one queue and keep their order, which a switch
// must; with PACKET_FANOUT_FLAG_DEFRAG IP fragments are reassembled
// before they are hashed (a later fragment carries no ports and would
// land elsewhere). The first socket creates the group with
// PACKET_FANOUT_FLAG_UNIQUEID, so the kernel picks an id no other group in
// the network namespace has (Port.FanoutGroup): two ports, or two
// processes, on one interface never share a group, and each reads every
// frame. With one queue (the default) there is no group at all.
//
// The group's hook replaces the sockets' own, so a socket's
// PACKET_IGNORE_OUTGOING no longer applies: the group asks for
// PACKET_FANOUT_FLAG_IGNORE_OUTGOING (a recent flag), and on older kernels,
// which refuse or ignore it, a socket filter (classic BPF on the skb's
// packet type) drops outgoing frames before they reach a ring. While the
// group forms, each new socket drops every frame (another filter) from
// its bind until all have joined, so no frame is read twice by a socket
// not yet in the group and by the group. Stats sums the queues' receive
// and ring counters (each socket's PACKET_STATISTICS); QueueStats gives
// one queue's. There is one transmit socket and one link watcher per port
// whatever the number of queues.
//
// Queues spread the reader's work (gswitchd runs one datapath loop per
// queue), not necessarily the kernel's: on a veth, and on any device
// without receive-side scaling, the kernel delivers a frame to the packet
// sockets in the context of whoever made it arrive — on veth, the sender's
// transmit call, on the sender's core — and the fanout only picks which
// ring it lands in. On a multi-queue NIC the rings are filled on the cores
// the NIC's interrupts run on.
//
// # Sending
//
// Send hands a batch to sendmmsg: one system call per batch (per socket
// buffer's worth), a result per frame, so one refused frame (too long, too
// short) is counted and skipped while the rest go. It sends on a socket of
// its own: bound to the interface with protocol 0 (it receives nothing),
// blocking (SO_SNDTIMEO bounds a wait for room, so Close is noticed), and
// not registered with the Go poller. A socket in an epoll set wakes its
// epoll on every sent frame the kernel frees (sock_wfree calls the socket's
// write-space callback, and the epoll entry counts as a sleeper): at a
// million frames per second those wake-ups are a large part of the cost (on
// the 2-core VM, 12% of all CPU time in sock_def_write_space alone, more in
// the Go scheduler's wake-ups; bench forward's generator went from 1.0 to
// 1.25 Mframes/s without them). Sent frames carry no virtio_net_hdr: the
// datapath finishes every offloaded frame before it sends it. A TPACKET_V2
// TX ring on the transmit socket (frames copied into slots, one send(2) for
// all, no message headers to copy) was built and measured against sendmmsg
// and not kept: gswitchd spent 0.86 µs of CPU per forwarded frame with it
// and 0.78-0.87 µs without (bench forward at 800k frames/s, 10K rules, the
// 2-core VM, three runs each), since on veth the cost is the skb and the
// transmit path, which the ring does not change, and the ring adds slot
// bookkeeping and a page reference per frame. Neither a received block nor
// a sent batch allocates (a test checks both).
//
// # Link state
//
// Open subscribes to RTNLGRP_LINK before it resolves the interface (so no
// change after the lookup is missed), and a goroutine follows the
// interface: Link returns the latest state (name, index, MTU, MAC,
// administrative and operational state) and Events delivers each change
// (repeated notifications of an unchanged state are suppressed). If netlink
// ends the subscription (a receive error such as ENOBUFS), the watcher
// subscribes again and re-reads the state.
//
// A port follows its interface by name, as Open vSwitch does: when the
// interface is deleted (Events: Deleted) its sockets are dead, and when an
// interface of the same name appears later the port re-attaches to it —
// new sockets and rings on the new ifindex swapped into the same Port and
// Queue values (reattach.go), so that every holder of the Port keeps
// working — and Events delivers the new state (not Deleted, the new
// Index). A reader waiting in ReadBlock on the dead socket is woken and
// gets no block; a block it holds stays valid until released.
// Stats.Reattaches counts re-attachments.
//
// # Invariants and thread-safety
//
//   - One reader per queue: a queue's ReadBlock, Block.Next, Block.Release
//     and Receive belong to one goroutine at a time (ReadBlock says ErrBusy
//     otherwise), and a block must be released before the next is read.
//     Different queues are read by different goroutines concurrently.
//   - Send may run concurrently with the reader; concurrent Sends are
//     serialized. Link, Events and Stats may be called from anywhere.
//   - Close may be called from any goroutine, any number of times: it wakes
//     every waiting ReadBlock and Send (ErrClosed), stops the watcher
//     (closing the Events channel) and closes the sockets. Each ring is
//     unmapped at once, or — while its reader holds a block — when that
//     block is released, so a frame is never unmapped under its reader.
//   - Errors name the step that failed; a missing interface wraps
//     ErrNoInterface, a missing privilege os.ErrPermission with a hint at
//     CAP_NET_RAW.
//
// The tests build real network namespaces and veth pairs and need root.
package afpacket
