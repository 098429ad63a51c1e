// Package routes is "gswitchctl bench routes": routes flowing through a
// route source into a route.Table whose LPM images a gpu.Engine serves, as
// gswitchd's kernel FIB mirror feeds its router.
//
// # The set-up
//
// The route source (--via) is netlink (the default; root): a private
// network namespace with four veth "ports", whose kernel table 100 a
// kernelfib.Mirror copies into the route.Table; the changes go to the
// kernel as RTM_NEWROUTE/RTM_DELROUTE over --netlink-senders sockets at
// once, each prefix's changes on one socket, in order. Or direct:
// route.Table.Add/Delete/Update called in the process. The route.Table's
// bubble updates reach the Engine through Engine.Apply (table ids 200 and
// 201); --backend is cpu, gpu or cpu,gpu (each in turn in one run).
//
// # What it measures
//
// For each family, on a shuffled copy of the file's distinct prefixes
// (some held back as latency probes), each route with one or two next hops
// on the ports:
//
//   - load: every route sent, until the last one answers on the Engine:
//     routes_per_sec, load_sec (kernel_routes_per_sec: the kernel's
//     acceptance alone);
//   - update-to-visible latency: --samples changes (half adds, half deletes
//     of held-back prefixes), each from the change to the first Engine
//     lookup (one address) that returns it: visible_p50_us, _p99_us, _max_us;
//   - lookups, idle and under updates: --lookups random addresses looked
//     up on the Engine for --duration per run, in batches of --batch (1M on
//     the GPU unless given, through pinned batches as the datapath does).
//     With --updates-per-sec N an updater goroutine hands over the changes
//     due every --tick as one batch; each round runs idle (the updater
//     ticking at rate 0) and under updates back to back, in alternating
//     order: mlps_idle and mlps_under_updates are medians over --rounds
//     rounds, loss_pct the median of the paired losses (every round's figure
//     in mlps_idle_rounds, mlps_under_updates_rounds, loss_pct_rounds);
//     updates_per_sec is the rate achieved, rebuilds and gc_cycles what
//     happened meanwhile, overflows and resyncs the netlink mirror's.
//
// With --check, --check-sample addresses (half random, half inside loaded
// prefixes; default 100,000) are looked up on the Engine and compared with
// a reference map of the routes after every change; any mismatch is an
// error wrapping benchutil.ErrMismatch.
//
// # JSON
//
// With --json, one Result per family and backend per line (work "routes");
// the keys are the json tags of Result's fields.
//
// The switch it builds is its own: Run wires route.New, gpu.Open and, with
// --via netlink, kernelfib.New itself (benchRoutesFamily, newNetlinkSource,
// openEngine), not gswitchd's agent.
package routes
