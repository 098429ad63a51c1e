// Package pubsub is "gswitchctl bench pubsub": content-based matching
// (tables/pubsub, CCM's counting algorithm indexed as Siena's SFF, or the
// GPU matcher) on CCM's workloads (Margara & Cugola, DEBS'11).
//
//	gswitchctl bench pubsub [--sweep none|attrs|constraints|filters|interfaces|names|numeric|zipf|all]
//	                        [--scale F] [--events N] [--batches 1,1024,16384] [--latency-samples N]
//	                        [--rounds N] [--threads N] [--check N] [--backend cpu|gpu] [--seed N] [--json]
//	                        [--churn RATE] [--churn-batch N] [--churn-seconds S] [--churn-clients N] [--churn-op OP]
//	                        [--small-modes copy,mapped,flag,graph,off] [--small-splits 8,16,32] [--cpuprofile FILE]
//
// The base scenario is CCM's default (pubsub.DefaultScenario: 10
// interfaces, 22,500–27,500 filters each, 3–5 constraints per filter, about
// 1M constraints; 100 names; events of 3–5 attributes; half numeric with
// = != > <, half string with = != ^= *=). --scale multiplies the filters
// per interface (0.01 for a quick run). A sweep varies one parameter of the
// base and runs each point:
//
//	attrs        attributes per event: 1, 3–5 (the default), 8, 16
//	constraints  constraints per filter: 1, 3–5, 8, 12
//	filters      filters per interface: ×0.1, ×0.5, ×1, ×2 the default
//	interfaces   10, 25, 50, 100 interfaces, the filters per interface scaled
//	             so that the total stays the default's (CCM keeps the load)
//	names        10 (at least the most constraints per filter), 100, 1,000, 10,000 names
//	numeric      share of numeric names: 0, 0.5, 1
//	zipf         names drawn with a Zipf distribution of exponent 1.2 and 2
//
// Per point it measures, on the CPU matcher:
//
//   - deploy: the wall time of one bulk AddSpecs of every subscription into
//     an empty table (ms);
//   - change: the time of one subscription change made visible (an Add of
//     a filter of the scenario and its Remove, each timed; p50 in µs). The
//     table's writer lock is the barrier: a change is visible to every
//     match that starts after the writer returns;
//   - latency: one event at a time on one locked OS thread (Table.Match),
//     the p50 and p99 of the wall time and the p50 of the thread's CPU time
//     per event (which leaves out the time a shared machine did not run the
//     thread), over --latency-samples events;
//   - throughput: MatchBatch in batches of each --batches size over
//     --events events, --threads goroutines each matching the whole set,
//     --rounds timed rounds: events/s (the median round) and µs per event;
//     with one thread also events per second of the thread's CPU time
//     (what a core that is not taken away does, on a shared machine);
//   - check: --check events compared with the brute-force evaluator
//     (pubsub.BruteMatch); a mismatch fails the run (exit 1);
//   - churn (--churn RATE, 0 by default: not measured): matching
//     throughput in batches of --churn-batch (1,024) on one goroutine,
//     rounds with RATE subscription changes per second applied by
//     --churn-clients other goroutines (1; each an Add of a filter of the
//     scenario, then the Remove of the oldest it added, each made visible
//     before its next: with several clients, changes that wait for one
//     device update go out together in the next) interleaved with rounds without
//     (quiet, churn; churn, quiet; ... --rounds pairs), each round about
//     --churn-seconds of matching at the quiet rate; it reports the median
//     of each kind, the loss: the median over the pairs of each pair's
//     100 × (1 − churn/quiet), % (the two rounds of a pair are back to
//     back, so the host's slow drifts cancel within a pair; the quartiles
//     of the pairs' losses and the ratio of the two medians beside it;
//     many short pairs give a steadier median than a few long ones: the
//     pairs' losses spread by about ±10 points on a GPU host, so 48 pairs
//     leave the median uncertain by about 2 points and 400 pairs of 50 ms,
//     --rounds 400 --churn-seconds 0.05, by about 0.2-0.3), the change
//     rate achieved and each change's time until visible (p50, p99). A
//     change goroutine sleeps until its next change is due, and a Go sleep
//     of under a millisecond lasts about one millisecond on the hosts
//     measured, so the changes come in bursts and a short round ends a
//     few behind: ask a few percent more (--churn 10400) to reach a rate
//     (achieved_rate says what was reached). cpu: the
//     table's Add/Remove and MatchBatch; gpu: gswitchd's path, an
//     eventfwd.Hybrid on a device of its own (every batch on the device,
//     each change made visible by Hybrid.Sync: the table's bubbles copied
//     to the device; cpu_batches counts batches it matched on the CPU).
//     --churn-op tells the loss's parts apart: change (the default, as
//     above), table (the table's change only; the gpu path's device is
//     brought up to date between rounds; on the cpu path the same as
//     change), lock (the table's write lock taken and released, no change:
//     the hand-over alone, pubsub.Table.Barrier), cpu (10 µs of busy work
//     per change and no change: what the change goroutine's CPU alone
//     costs).
//     The changes are removed afterwards. The CUDA matcher's updates are
//     live (the words of the changes made before a call scattered by its
//     first batch's kernel, on the device; GSWITCH_PUBSUB_UPDATE=eager: a
//     scatter per change in a stream of its own, ahead: a scatter per
//     change in the stream the next batch takes, staged or sync: the
//     earlier ways, which hold the batches while the words are copied).
//     --cpuprofile writes a CPU profile of the whole run. rate_reached says whether
//     the changes per second reached the asked rate (within 2%).
//
// The deploy's parts: deploy_table_ms is the table's bulk add
// (parallel where its parts are independent, pubsub's par.go).
//
// --backend gpu matches through the CUDA matcher on device 0
// (gpu.StartEventDevice: the matcher gswitchd uses, its CUDA context and
// kernel opened on a goroutine of their own from the start). Deploy is
// then timed from the subscriptions (Go structs) until the device answers:
// pubsub.Table.AddSpecsDevice fills the table's slots, builds the device
// image from them while it fills the indexes (deploy_layout_ms, the
// build's own time) and, as soon as the image is built, hands it to the
// device (its first bubble.Mirror.Sync, a copy the device keeps; the
// context's start awaited, the image uploaded: deploy_device_ms) while the
// indexes are still being filled; deploy_ms = deploy_table_ms is the whole
// call. Latency is one event per device round trip on the small-batch path
// (latency_parts: the p50 of its encoding, queueing, waiting and decoding;
// latency_modes: the p50 and p99 in each --small-modes mode and each
// --small-splits blocks per event, with the p50 of their parts, see
// gpu.SmallMode), throughput goes through Match (encoding by name, copies, kernel,
// decoding; a call of 4,096 events or more in four parts on four
// goroutines), and "visible" times a change until every batch queued
// after it sees it: the table's Add or Remove, the layout's bubbles
// (pubsub.Device.Update) and the device's update (CUDAMatcher.Update: the
// words pending for the next batch's scatter), 200 of each (p50 and p99 in
// µs), with device_bytes the image's size. In a build without CUDA it is
// an error saying so.
//
// # JSON
//
// With --json, one object per point:
//
//	{"work": "pubsub", "backend": "cpu", "sweep": "filters", "point": "x0.5",
//	 "interfaces": 10, "filters": 124811, "constraints": 499380, "names": 100,
//	 "attrs": "3-5", "constraints_per_filter": "3-5", "numeric_share": 0.5, "zipf": 0,
//	 "deploy_ms": 310.2, "change_p50_us": 3.1,
//	 (gpu: "deploy_device_ms": 450.1, "deploy_layout_ms": 295.3, "change_visible_p50_us": 55.3,
//	  "change_visible_p99_us": 124.0, "device_bytes": 14463456,)
//	 "latency_p50_us": 12.0, "latency_p99_us": 40.1, "latency_cpu_p50_us": 11.8,
//	 "batches": [{"batch": 1024, "events_per_sec": 95000, "us_per_event": 10.5, "events_per_cpu_sec": 99000}],
//	 "threads": 1, "events": 20000, "rounds": 5, "ports_per_event": 2.7,
//	 "checked": 100, "mismatches": 0, "machine": "...", "gpu": "none", "go": "go1.24", "time": "...",
//	 "deploy_table_ms": 410.2,
//	 (gpu: "latency_parts": {"mode": "copy", "encode_us": 0.4, "queue_us": 3.1, "wait_us": 14.2, "decode_us": 0.1},
//	  "latency_modes": [{"mode": "copy", "p50_us": 18.5, "p99_us": 30.1, "parts": {...}}, ...],)
//	 (--churn: "churn": {"path": "table", "rate": 10000, "clients": 1, "batch": 1024, "round_events": 40000, "rounds": 5,
//	  "quiet_events_per_sec": 41000, "churn_events_per_sec": 40500, "loss_pct": 1.2, "loss_p25_pct": 0.4,
//	  "loss_p75_pct": 2.3, "loss_of_medians_pct": 1.4, "pair_loss_pct": [1.1, 0.4, ...], "achieved_rate": 9950,
//	  "changes": 49000, "change_p50_us": 9.1, "change_p99_us": 60.2, "cpu_batches": 0})}
package pubsub
