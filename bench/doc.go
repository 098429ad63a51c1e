// Package bench holds gswitch's benchmarks, one package each, behind the
// "gswitchctl bench ..." commands:
//
//	bench/lpm       IPv4/IPv6 longest-prefix match on the GAMT trie: lookups,
//	                route updates, lookups under updates (gswitchctl bench lpm)
//	bench/classify  OpenFlow wildcard classification with each flow-table
//	                algorithm (gswitchctl bench classify)
//	bench/routes    routes through netlink (kernelfib) or directly into a
//	                route.Table served by a gpu.Engine (gswitchctl bench routes)
//	bench/p4rt      P4Runtime writes: entries/s and write-to-visible latency
//	                (gswitchctl bench p4rt)
//	bench/forward   frames/s forwarded between network namespaces through
//	                gswitchd, Open vSwitch, the Linux bridge and a plain
//	                AF_PACKET forwarder; FLOW_MOD rate (gswitchctl bench forward)
//	bench/pubsub    content-based matching on CCM's scenarios: deploy, change,
//	                per-event latency, events/s in batches (gswitchctl bench pubsub)
//	bench/benchutil what they share: the common flags, the lpm/classify
//	                result and its printing, rounds and medians, the pinned
//	                GPU batch pipe, the GPU backend choice (build tag cuda)
//
// Each benchmark package has one entry point,
//
//	func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error
//
// where args are the command-line flags after "gswitchctl bench WORK"; it
// prints a readable table, or with --json one JSON object per line, to
// stdout. A bad command line is an error wrapping benchutil.ErrUsage
// (gswitchctl exits with 2), wrong answers under --check one wrapping
// benchutil.ErrMismatch (exit 1). Each package's doc says what it
// measures, how (rounds, interleaving, medians) and its JSON schema.
//
// The method they share: a measurement is repeated over --rounds timed
// rounds and the figure reported is the median; where two figures are
// compared (idle against under updates, gswitchd against the plain
// forwarder) the two run back to back in each round, in alternating order,
// so that a machine that speeds up or slows down during the run favours
// neither, and the loss is the median of the rounds' paired losses. Every
// result names the machine (CPU model and cores), the GPU (or none), the
// Go release, the time (UTC) and the data it used.
package bench
