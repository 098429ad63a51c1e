// Package route holds gswitch's routing tables: per table id (VRF / kernel
// table), the IPv4 and IPv6 routes with their next hops, the LPM tries the
// datapath looks them up in, and per-route and per-next-hop counters.
//
// # What
//
// A Route is a prefix with one or more weighted next hops (gateway, or none
// for on-link; output port), from a source: a router port's own subnet
// (connected), static configuration, the kernel FIB
// (controlproto/kernelfib), OpenFlow or P4Runtime. A Table keeps
// one route per prefix and answers longest-prefix-match lookups. It is the
// authoritative CPU copy: the sources write it, the datapath reads it.
//
// # Slots, not next hops, in the trie
//
// The tries are package lpm's (GAMT); each family has one. The leaf value a
// lookup returns is not a next-hop index but an entry slot: slot s names the
// *Entry of one installed prefix, so the datapath finds the route (and its
// counters) from the lookup's result word alone, on the CPU (Lookup) or from
// a mirror such as the gpu.Engine (Entry, Entries). Both families share one
// slot space.
//
// An Entry is immutable once published. Replacing a prefix's route (other
// next hops, weights, metric) publishes a new *Entry in the same slot: the
// trie does not change at all, and the counters carry over (the route's, and
// those of next hops that remain). Adding a prefix takes a slot and
// inserts slot into the trie; deleting removes it from the trie and holds the
// slot back: it keeps naming the deleted entry until Options.ReuseAfter
// further publications have passed, so a lookup on a mirror that raced the
// delete (its batch was in flight before the bubbles were applied) finds the
// route it matched, never an unrelated one. Entry.Covers lets a datapath
// check that too.
//
// # Changes and mirrors
//
// Every change writes the trie words through the family's bubble.Mirror.
// With Options.OnChange (or Attach) the table gathers the bubbles after each
// Add, Delete and Replace and hands them to the hook under its lock, in
// order, one update per family per call: a Replace (the resync after a
// netlink overflow) reaches a mirror as one update, so a batch sees the old
// set or the new one. A consumer attaches with Attach, which returns the
// current images and installs the hook atomically.
//
// # Concurrency
//
// One writer at a time (the methods that change the table take the writer's
// lock) and any number of readers. Lookup takes the lock shared, since the
// trie's words change in place; Entry and Entries take no lock (the slot
// array is published through an atomic pointer and grows by copy); counters
// are atomics.
//
// # Validation
//
// Add and Replace validate every route completely before changing anything
// (Validate: table id, masked prefix, 1..MaxNextHops next hops, gateway of
// the prefix's family, not unspecified nor multicast, port known to
// Options.PortOK, weight 1..MaxWeight, no duplicate next hop, known source)
// and return an ErrInvalid error naming the route and the fault; Replace
// also refuses a prefix given twice. A failed call leaves routes, tries,
// bubbles and counters as they were.
//
// # ECMP
//
// Entry.Pick maps a flow hash to a next hop, each taking a share of the hash
// space proportional to its weight: murmur3's finaliser mixes the hash, a
// multiply-shift scales it to the total weight, and a binary search over the
// cumulative weights picks the next hop. The same hash picks the same next
// hop while the route is unchanged.
//
// # How it is checked
//
// The tests compare every lookup with a brute-force reference (a scan of all
// routes for the longest containing prefix) after random interleavings of
// adds, replacements, deletes and resyncs, also through a mirror kept only
// by OnChange's updates; run concurrent readers during updates under the
// race detector; count that Replace changes exactly the routes that differ;
// check Pick's stability and weight split; check that every invalid route
// leaves the table as it was; and load the full BGP table of
// ../shared/data/fib. A fuzz target runs Add/Delete sequences against the
// reference.
package route
