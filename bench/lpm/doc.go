// Package lpm is "gswitchctl bench lpm": IPv4 and IPv6 longest-prefix match
// on gswitch's GAMT trie (tables/lpm), built from a routing table file.
//
// # What it measures
//
// For each family in the file (or --family) and each traffic kind
// (--traffic: random, uniformly random addresses; table, an address drawn
// inside a prefix drawn from the table; both), one Result:
//
//   - the build time of the trie and its image size (build_ms, image_bytes,
//     bytes_per_entry, the strides in layout);
//   - idle lookups: --lookups addresses looked up in batches of --batch on
//     --threads goroutines, timed over --rounds rounds: mlps is the median
//     round's rate (million lookups/s), ns_per_lookup per goroutine;
//   - updates back to back: --updates route changes from lpm.UpdateTrace
//     (adds, deletes, next-hop changes), the bubbles gathered every 1000
//     as the datapath would (update_max_per_sec, first traffic only);
//   - with --updates-per-sec N, lookups under updates: one goroutine applies
//     N changes/s to the table and ships the bubbles of each Sync to a
//     mirror image (GAMT's update mechanism with the CPU as the device),
//     while another looks the traffic up on the mirror for --duration. Each
//     round runs the same two goroutines once at rate 0 (mlps_idle) and once
//     at rate N (mlps_under_updates), back to back, in alternating order;
//     loss_pct is the median of the rounds' paired losses, loss_pct_rounds
//     each of them; visible_p50_us/visible_p99_us is the time from a change
//     applied to the table to the mirror holding it. On the CPU backend the
//     mirror, kept only by bubbles, must equal the table's image after the
//     run (a difference counts as a mismatch).
//
// With --check, a sample of the lookups (--check-sample, default 200,000)
// is compared with lpm.Reference, which tries every prefix length; any
// mismatch is an error wrapping benchutil.ErrMismatch.
//
// On the GPU backend (--backend gpu, a gswitchctl built with -tags cuda)
// mlps is end to end through pinned batches of --batch keys (1M unless
// given) submitted back to back with --depth in flight over --streams
// streams (benchutil.Pipe: the datapath's way), batch_latency_us their
// Submit-to-results time; mlps_staged goes through the slice API (host
// staging copies included), mlps_kernel is the kernel alone (CUDA events),
// mlps_cpu the CPU backend on the same traffic in the same run. Under
// updates, each Sync's update reaches the device through Backend.Apply,
// called by the updater or by the lookup goroutine (--apply-on). With
// --max-delay D the traffic is also fed key by key through gpu.Batcher
// (batcher_mlps, batcher_latency_us).
//
// # JSON
//
// With --json, one benchutil.Result per line: work "lpm", algo "gamt",
// family 4 or 6, traffic random or table; the keys are the json tags of
// benchutil.Result's fields (omitempty ones only when measured).
package lpm
