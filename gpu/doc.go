// Package gpu is gswitch's device runtime: one narrow Backend interface for
// tables mirrored as bubble images (package bubble), with a CPU
// implementation that is always built and a CUDA implementation behind the
// build tag cuda.
//
// # What a backend holds
//
// A table's authoritative copy lives in package tables; what a backend holds
// is a mirror of its device image, a few regions of 32-bit words. Load
// installs a whole image. Apply takes one bubble.Update, as
// bubble.Mirror.Sync hands it out: either a whole image of a new generation
// (after the table outgrew its head-room and was rebuilt) or the write
// bubbles (region, offset, latest value) since the previous Sync. An Update
// is all-or-nothing: the backend checks every bubble before writing any — in
// range, none in the meta region, and, for the LPM kinds, every pointer
// entry aimed at a deeper level and a node that exists there — so a rejected
// Update changes nothing and a lookup, on the CPU or on the device, can never
// index outside its image. Every lookup issued after Apply returns sees the
// whole Update.
//
// The kinds: LPM4 and LPM6, the GAMT tries of package lpm (see
// tables/lpm/doc.go for the encoding: meta region, one region per level,
// entries inf<<8 | jump), and Flow, the flow table images of package flow
// (six regions; see tables/flow/doc.go), answered by LookupFlow on keys
// packed with flow.PackSoA. A Flow image is checked whole with flow.NewView;
// its bubbles must lie in range and may not touch the seeds or any header
// word but the count (both fixed for a generation), and the lookups, the
// CPU View and the device kernel flow_lookup (kernels/flow.cu) alike,
// re-check every offset they follow. On the device a Flow table is one
// buffer of its regions plus a 20-word descriptor (region bases and lengths,
// algorithm, P, families, slots, what to stage in shared memory); its
// lookups run through batches like the LPM kinds, after any Apply's scatter (the gamt module's
// bubble_scatter, global offsets), and KernelTimeFlow times the kernel alone.
//
// # The CPU backend
//
// CPU keeps each table's image and an lpm.View over it. The View reads the
// words in place, so applied bubbles are seen at once; a whole image gets a
// new View. It is the fallback wherever no GPU is usable, the backend for
// batches too small to be worth a launch, and the reference the CUDA backend
// is tested against: both run the same conformance cases (random tables and
// the real BGP table, with rounds of updates synced and applied), and every
// answer must equal the lpm.Table's own lookup bit for bit.
//
// # The CUDA backend (build tag cuda)
//
// CUDA drives one GPU through the driver API (gorgonia.org/cu). A CUDA
// context is bound to an OS thread, so one goroutine, locked to its thread,
// owns the context and does every device call; the methods send it closures
// over a channel and wait.
//
// On the device a table is ONE buffer holding all its regions end to end,
// plus a descriptor buffer of three words per level (base word, stride,
// first address bit), at most MaxDeviceLevels levels. The kernels (package
// kernels, gamt.cu) are gamt_lookup4 and gamt_lookup6 (one thread per
// address, grid-stride, the descriptors in shared memory; IPv6 with full
// 128-bit addresses, read as the Hi, Lo pairs of []lpm.Addr6) and
// bubble_scatter (img[off[i]] = val[i], offsets global). Apply with bubbles
// makes no device call and does not hop to the owning goroutine: it checks
// the Update on the caller's goroutine without the backend's lock and queues
// its (offset, value) pairs on the host, per table, under the lock (a bitmap
// per image word finds words written twice; the last write wins). An update
// of bigUpdate (4,096) bubbles or more is ordered into a chunk before the lock
// is taken: one IPv6 route change can rewrite 800K pushed leaves, and a
// lookup must not wait for that work. The next operation that reads a table
// (a lookup, a kernel timing) first scatters what is queued: the pairs go
// into one of two pinned staging buffers (the host fills one while the
// scatter of the other may still read it; an event per buffer says when it
// is free, or a later batch's Wait), the scatter, reading them in place, is
// queued on the update stream, the buffer's event is recorded after it and
// every lookup stream waits on it: the ordering the interface promises (the
// scatter runs before every lookup issued after Apply). A whole image goes into a new buffer that replaces the
// old one once the device is idle, dropping the old table's queued bubbles:
// the only Apply that synchronizes.
//
// Lookups run in Batches (see Batch): keys and results in page-locked host
// memory the backend allocated, each batch with device twins and an event.
// Submit runs on the caller's goroutine with the context made current on its
// thread and, with one cgo call, queues the batch's copy-in (one segment, or
// one per key column of a partly filled flow batch), the lookup kernel (every
// lookup kernel takes img, desc, nl, keys, out, n, stride; the grid is what
// the device holds resident at once, from the kernel's occupancy and its
// dynamic shared memory) and the copy-out in the next of N streams
// (SetStreams; GAMT §4.4), and records the batch's event; Wait synchronizes
// on it. Several batches in flight overlap each other's copies and kernels.
// The slice lookups (LookupLPM4, LookupLPM6, LookupFlow) of up to 32K keys
// (a Coalescer's shared batches) each run in a lookup slot of their own (a
// batch from a free list, under a read lock): several callers' lookups are
// on the device at once, each waiting for its own event. Bigger ones run,
// one at a time, through pools of such batches (two per stream,
// DefaultChunk keys each), the host copying the keys in and the results
// out (split over goroutines). KernelTimeLPM4,
// KernelTimeLPM6 and KernelTimeFlow time a kernel alone (CUDA events).
//
// Bubbles queued by Apply are scattered before the next batch on an update
// stream that holds nothing else (so a scatter never waits behind a lookup),
// in an order that keeps even a lookup running during the scatter from
// following a new pointer into unwritten words: every non-pointer word (LPM
// leaves) in one launch, then the pointers, deepest region first (an LPM
// pointer always aims at a deeper level; a flow image's order and count
// refer to deeper regions), chunk by chunk in Apply order (see chunk); an
// event recorded after it is waited on by every lookup stream, so every
// batch submitted after Apply returns sees the whole update.
//
// flow_lookup (kernels/flow.cu) is specialised per projection width P, so a
// packet's key lives in registers, and stages the hash coefficients in use,
// the class descriptors, the order and the Bloom filters into shared memory
// when they fit a budget (FlowSmemEnv; by default what a block gets without
// opting in); on the H100 staging changed nothing measurable on acl1. The
// widths are split over three kernels (flow_lookup_w8, flow_lookup_w16 and
// flow_lookup for 17 to 27 words; CUDA.flowFn picks one per table), since a
// kernel holds the registers of its widest width and registers bound the
// warps an SM keeps resident: on acl1's 5-word keys one kernel for every
// width ran one block per SM (130 registers), flow_lookup_w8 runs four.
// Tuple, Bloom and merged images are walked with a lane per packet that
// takes its warp's next packet as soon as its own is done, each class first
// through its prefilter (flow.PreBucket) and the Bloom test and probe run
// once half the warp holds a class that passed it (FlowRefill, the
// kernels' mode 0); FlowThreadPerPacket (mode 1) is one thread walking one
// packet to the end, kept for KernelTimeFlowMode's comparison. Batches of
// up to flowWarpMax keys (16,384; GSWITCH_FLOW_WARP) run with a warp per
// packet instead (FlowWarpPerPacket, mode 2): its lanes walk 32 classes of
// the packet at once and share the best rank after each round, so a small
// batch's kernel no longer lasts one packet's whole walk (128K rules in
// 512 classes, merged, on an H200: 7 µs for 64 to 1,024 keys against
// 34-39 µs), at about half the refilled lanes' rate on large batches.
//
// Resident lookups (ResidentConfig, NewCUDAConfig; the agent's
// --resident-lookups; GSWITCH_CUDA_RESIDENT=N; off by default;
// resident_cuda.go, kernels/resident.cu) take the launch out of a small
// lookup: a kernel stays on the device, a block per slot of a mailbox in
// pinned host memory, and a Submit of at most 64 keys in a batch that holds
// a slot is two stores into it (the fields, then the request number); the
// block copies the keys into shared memory, walks them with a warp per
// packet (warp_walk, shared with flow_lookup's mode 2) over the table it
// has staged, and writes the results and the batch's completion word, which
// Ready and Wait read as in the flag wait mode. The kernel leaves once no
// slot has had a request for its idle time (2 ms), all its blocks
// together, and is launched again by the next Submit (or a waiter) that
// finds none alive; Close, frees and allocations stop it first. A batch is posted
// only once the update stream has marked every queued scatter done, and a
// post of a newer version of the tables (CUDA.rver: loads and scatters)
// relaunches the kernel, whose SMs' caches are not coherent with the
// scatter's writes. On an H200 a lookup of 4 keys takes 11-12 µs at the
// p50 and 15-19 at the p99 this way, 7-9 µs of it the kernel's own
// (BenchmarkCUDAResidentLatency; see docs/gpu.md).
//
// # The Engine
//
// Engine is the Backend the agent runs on: a CPU backend holding every
// table (updates go there first: it is the authoritative mirror) and zero or
// more device backends holding replicas. Batches below MinBatch go to the
// CPU; the others go round robin over the devices (Engine.NewBatch allocates
// on the next device; a slice lookup is split over all of them). A device
// that fails — a load or update it cannot do although the CPU accepted it, a
// failing launch or copy at Submit or at Wait — is logged once, counted,
// exposed by the Engine's metrics (Collector: gswitch_backend_device_up 0) and taken out of
// service for good; the lookup that failed and every later one are answered
// by the CPU, with the same answers. Open builds an Engine for --backend
// auto|cpu|gpu.
//
// With --backend auto and a device (ModeAuto) each flow table is placed on
// the CPU or on the devices (autoplace.go): a calibration, at Load and
// after an Apply that changed the table's class count, times the CPU's
// lookup of keys sampled from the table's own image and a device's lookup
// of one batch of MinBatch keys, and Choose (pure, placement.go) compares
// the costs per key with a hysteresis of SwitchMargin. A table placed on
// the CPU has every lookup answered there (cpuServes, Submit); every device
// still holds its replica, so a move is immediate. The calibrations run on
// one goroutine of the Engine (the calibrator), which Close stops; the
// lookups read the placements through an atomic pointer to a map copied on
// write (lock-free, allocation-free), and an Apply only reads the class
// count and marks the table. TableBackends reports every table's backend
// and why. PlacementGeneration moves after every change of which backend
// may serve a table (a table loaded anew, a calibration that moved one, a
// device that could not hold a table or failed), so that a Coalescer's
// users can cache whether any of their tables is coalesced
// (Coalescer.Coalesces, Generation): the datapath runs its synchronous
// path while none is. The Batcher forms batches from keys that arrive one by one,
// closing a batch when it is full or when its oldest key has waited
// MaxDelay (GSwitch §7.4).
//
// The PTX is built with nvcc on a machine that has it (make kernels) and
// embedded: sm_90 PTX on compute capability 9.x (H100, H200), compute_80
// PTX, JIT-compiled by the driver, elsewhere. The environment variable
// GSWITCH_PTX_DIR makes the backend read freshly built PTX instead, and the
// test TestCUDAEmbeddedPTX fails when the embedded copy differs from it;
// GSWITCH_PTX=compute80 forces the JIT path on Hopper. The kernels read the
// images and descriptors through kernels/layout.h, generated from the Go
// constants (FlowDesc*, Stage*, LevelDesc* here; package flow's and lpm's
// layouts) by go generate ./kernels.
//
// NewCUDA returns an error when no device is usable, and the caller falls
// back to the CPU backend. gorgonia.org/cu initialises the driver in its
// package init and exits the process if that fails; this package defines
// cuInit itself (cuinit_cuda.go), calling the driver's through
// dlsym(RTLD_NEXT), so that a failed initialisation reaches NewCUDA as an
// error instead. A cuda build still needs the driver library
// (libcuda.so.1) to start at all.
//
// # Markers, matching and filtering (the payload kernels)
//
// Three more workloads run beside the tables, each behind a small interface
// with a CPU implementation (always built, the reference) and a CUDA one:
//
//   - Markers (markers.go): Rabin fingerprint markers of payloads packed as
//     rabin.Pack lays them out, the bitmap of rabin.Marker.Bitmap; CPUMarkers
//     and CUDA.RabinMarkers (kernels/rabin.cu: the tables in shared memory;
//     for windows of 16, 32, 48 or 64 bytes each payload cut into segments
//     of a thread each, read 32 bytes at a time with the next block loaded
//     ahead, the byte leaving the window taken from the blocks kept in
//     registers; the generic kernel a thread per payload). StreamMarkers
//     cuts a stream into 64 KiB payloads that start w−1 bytes early, for
//     gswitchctl re markers and chunk --backend gpu; MarkerPipeline marks
//     many payloads through pinned batches that several goroutines pack
//     while earlier ones are copied and computed (bench re --backend gpu),
//     its runs cut by a planning goroutine as the fillers take them.
//     Batches by reference (RegionMarkers, MarkerBatch.AddRef,
//     MarkerPipeline.BitmapRegion): the payloads stay in host memory
//     registered with the device (a receive ring, cuMemHostRegister,
//     mapped) and the host writes only the index; no host copy of a
//     payload. By default (RabinMarkers.Via ViaCopy; markers_copy.go,
//     markers_copy_cuda.go) the copy engine moves runs of consecutive
//     frames a fixed pitch apart out of the region with 2-D copies into a
//     staging buffer (planCopies cuts the runs, by pitch and by length),
//     and the kernel rabin_gather lays the staging rows out as the compact
//     buffer in device memory; with ViaGather (markers_gather_cuda.go)
//     rabin_gather reads the payloads over PCIe itself (a warp per
//     payload, whole 128-byte lines, shifted to the packed alignment with
//     shuffles), which tops out below the copy engine's rate. Then the
//     markers kernel.
//   - EventMatcher (pubsub.go): CCM content-based matching over a
//     pubsub.Layout; CPUEventMatcher and CUDA.PubsubMatcher
//     (kernels/pubsub.cu: each event scans the anchor lists of its
//     attributes' names for filters whose 64-bit name signature its own
//     covers and evaluates those; up to 64 blocks per event in small
//     batches, the event's attributes and strings in shared memory; the
//     slots of the filters that decided each delivery come back for the
//     subscriptions' counters). EncodeEvents selects attributes by name on
//     the host, as CCM does. Subscription changes reach it as live updates
//     (pubsub_live_cuda.go): their words wait on the host and the next
//     batch scatters them in its own stream, ordered against the other
//     streams by events, so matching never stops for a change.
//   - PacketFilter (filter.go): gPF filtering over a filter.Layout, with
//     per-filter packet and byte counters and optional per-packet bitmaps;
//     CPUFilter (EvalStages) and CUDA.PacketFilter (kernels/filter.cu). Its
//     default kernel, gpf_walk, runs each filter's control-flow form for
//     the packets an index of equality tests and port ranges lists it
//     under (filter_walk.go: BuildWalkIndex from the layout's words, and
//     WalkEvaluator, the kernel's CPU twin): a warp copies its 32 rows
//     into shared memory, looks its packets' field values up, queues the
//     (packet, filter) pairs the lookups list in shared memory and walks
//     them 32 at a time, a pair a lane; gpf_walk_v1 is its earlier form,
//     kept to compare; gpf_filter is the three
//     stages fused, a thread per packet, its values in shared memory or a
//     per-stream device scratch (SetFilterKernel chooses). Packets travel
//     reduced: FilterSnap bounds the bytes criteria read. The host side of
//     a capture's pass (chunks parsed on several goroutines into pooled
//     batches, answers in file order) is package datapath/gpfscan, which
//     knows the capture formats; OpenFilterGPU (FilterGPU, FilterDevice)
//     opens a device for gswitchctl filter and bench filter.
//
// Their modules load on first use (loadAux; an empty embedded PTX is an
// error then, not at NewCUDA). Their batches live in page-locked memory with
// device twins and an event; Submit queues copy-in, kernel and copy-out with
// one cgo call (auxQueue) in the next of the object's own streams, on the
// caller's goroutine with the context made current on its thread (like
// Submit of the tables' batches), and Wait synchronizes on the event; setup
// and freeing hop to the owning goroutine (c.do). A batch belongs to the
// object between Submit and Wait; different batches may be used from
// different goroutines. KernelTime times the kernel alone with events. The
// CUDA tests compare every answer with the CPU implementation's bit for bit
// (TestCUDARabinMarkers, TestCUDAPubsubRandom, TestCUDAPubsubScenario,
// TestCUDAFilterCaptures, TestCUDAFilterScan) and the benchmarks print kernel-only and
// end-to-end rates (docs/bench/2026-11-25-h100-kern-run*.txt).
//
// # Building the cuda variant
//
// gorgonia.org/cu v0.9.6 calls CUDA 12 driver signatures. gpu/cudacompat
// holds a cuda.h of the project's own that, put first on the include path,
// maps the few names CUDA 13 changed back to the old entry points:
//
//	CGO_CFLAGS="-I$PWD/gpu/cudacompat -I/usr/local/cuda/include" \
//	CGO_LDFLAGS="-L/usr/local/cuda/lib64" go test -tags cuda ./gpu/
package gpu
