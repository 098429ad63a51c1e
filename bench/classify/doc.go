// Package classify is "gswitchctl bench classify": OpenFlow-style wildcard
// classification (tables/flow) with each of its search algorithms.
//
// # What it measures
//
// The rules come from a ClassBench filter file (--classbench; port ranges
// expanded into prefix entries, priority by line order) or from a synthetic
// rule set of GSwitch §6's shape (--synthetic N,C[,F,Cm,f]: N rules in C
// classes). The traffic is --lookups packet keys drawn from the rules
// (headers inside random rules plus uniform ones for ClassBench; packets of
// random rule groups, wildcard bits random, for synthetic sets).
//
// For each algorithm of --algo (linear, tuple, bloom, merge; default all,
// in that order) it builds a flow.Table (build_ms, entries, classes,
// image_bytes, the projected key words in layout) and times
// Table.LookupBatch in batches of --batch on --threads goroutines over
// --rounds rounds: mpps is the median round's rate (million packets/s).
// Linear search scans every rule, so it is timed on fewer packets (a round
// of about 2e8 rule comparisons; the notes say how many).
//
// With --check, a sample of the answers (--check-sample; by default as
// many as a scan of every rule does in a few seconds) is compared with
// flow.BruteForce over the table's rules; any mismatch is an error wrapping
// benchutil.ErrMismatch.
//
// On the GPU backend (--backend gpu, a gswitchctl built with -tags cuda)
// mpps is end to end through pinned batches in SoA order (benchutil.Pipe,
// the datapath's way), mpps_staged through LookupFlow calls (host staging
// included), mpps_kernel the classification kernel alone (CUDA events),
// mpps_cpu the CPU on the same packets; --check also compares every GPU
// answer with the CPU's. --kernel-only skips the end-to-end figures.
//
// # JSON
//
// With --json, one benchutil.Result per algorithm per line: work
// "classify", algo, traffic "rules", rules (before range expansion),
// entries, classes, mpps, ...; the keys are the json tags of
// benchutil.Result's fields.
package classify
