// Package p4rt is "gswitchctl bench p4rt": the P4Runtime server
// (controlproto/p4rt) in front of a pipeline switch, measured from a
// P4Runtime client over gRPC on 127.0.0.1.
//
// # The set-up
//
// A pipeline.Switch with two fake ports (port 2 counts what it is sent),
// classifying on the CPU backend or, with --backend gpu, on the GPU engine;
// its P4Runtime server on a 127.0.0.1 TCP port; one client that wins the
// arbitration (election id 1) and commits gswitch's P4Info. This is the
// bench's own copy of gswitchd's graph (newP4Bench), not gswitchd's agent.
//
// # What it measures
//
// For each table of --tables (acl: ternary entries on the IPv4 source
// address and protocol, one per address; ipv4_lpm: /32 routes), entries
// that forward to port 2:
//
//   - write_rate, for each batch size of --batches: --entries entries
//     inserted with WriteRequests of that many updates, then deleted the
//     same way: inserts_per_sec, deletes_per_sec (first update sent to the
//     last WriteResponse);
//   - visible_latency: over 1,000 background entries, --samples entries
//     inserted one at a time; for each, the time from sending the Write to
//     the first sw.Process of a matching frame on port 1 that the switch
//     forwards to port 2 (frames processed back to back from the moment the
//     Write is sent, the datapath's code path): visible_p50_us, _p99_us,
//     _max_us; write_p50_us is the Write RPC's own time.
//
// # JSON
//
// With --json, one Result per line (work "p4rt", measure "write_rate" or
// "visible_latency"); the keys are the json tags of Result's fields.
package p4rt
