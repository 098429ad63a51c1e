// Package lpmshape recognises flow tables that are routing tables and
// serves them by longest-prefix match (tables/lpm, GAMT) instead of a
// wildcard classifier. It is pure: it reads the rules a table gains and
// loses, and keeps LPM images in whatever holds them (Images: the switch's
// lookup engine, a CPU or GPU backend); it does no I/O and knows no
// control protocol.
//
// # The LPM form and the shape
//
// A rule is of the LPM form when its match holds only ipv4_dst or
// ipv6_dst with a prefix mask (or no ip_dst: /0) and the eth_type
// 0x0800/0x86dd it needs, optionally in_port (exact); a rule with in_port
// alone or nothing (the table-miss entry) is an "any-family" rule: the /0
// of both families and the answer for packets of neither. A table is
// LPM-shaped when all its rules are of that form, at least one has an
// eth_type, and priorities follow prefix length: of two rules some packet
// matches both of (same family or an any-family rule, in_port equal or
// either one absent, one prefix inside the other), the longer prefix has
// the strictly higher priority. Rules with the same prefix may have any
// priorities. Then the best rule of the longest matching prefix is a
// classifier's answer, rank for rank (flow.Rank) (ovs-ofctl add-flow
// "priority=24,ip,nw_dst=10.1.2.0/24,actions=..." with priority = prefix
// length is such a table).
//
// # Invariants and how they are kept
//
// The shape is kept incrementally on every Add and Remove (a modify
// changes no match, and a replacing add none either): the LPM-form rules
// are kept in groups, one per family and in_port key (the rules without
// in_port, and one group per in_port value rules name), each holding per
// prefix its rules best rank first, a binary trie of the prefixes with per
// node the least and greatest priority there and the least priority below,
// and an lpm.Table whose leaf at a prefix is its best rule's RuleID+1. A
// trie node is a conflict when its greatest priority is not below the
// least under it (an in_port group's node takes the wildcard group's node
// at the same prefix into account, since its packets match both); a change
// touches only the nodes on its prefix's path (O(prefix length); a change
// without in_port also rechecks that path in every in_port group). The
// table is LPM-shaped while no rule is of another form and no node is a
// conflict. The flow table stays authoritative and its owner keeps it
// current whatever the shape; Serves says whether lookups may come here,
// and changes as the shape breaks and comes back (both logged, counted in
// Info.Transitions).
//
// A group's LPM table is built (lpm.Build from its prefixes) the first
// time the table is LPM-shaped while the group holds a prefix longer than
// /0, and kept from then on whether or not the table is served by it, so a
// return costs nothing; a group of /0 rules alone (a table-miss entry, an
// eth_type-only rule) needs no image: its best rule answers every packet
// of the family. Each image is loaded into Images under the id
// Config.IDBase | table<<16 | group slot (IDBase defaults to
// DefaultIDBase, 1<<24: above a switch's flow tables and datapath/l3's
// route tables at 1<<20; the caller passes the base it was allocated); a
// removed group's slot gets a tiny empty image, since Images cannot drop
// one. Sync applies the bubbles of every changed image (Images.Apply
// returns once later lookups see them; a rejected update reloads the image
// whole), so a caller that syncs before its barrier answers has current
// images. At most MaxGroups groups per table and rule ids below 2^24-1
// (else the rule counts as of another form); a group whose image Images
// refuses leaves the table to the classifier.
//
// # Lookups
//
// Lookup splits a batch by family and group: every IPv4 (IPv6) key is
// looked up in the wildcard group (its image, or its /0 rule) and, if its
// in_port has a group, in that one too (Images.LookupLPM4/6, batched per
// group); a key takes the better ranked of the answers (on one chain of
// prefixes the longer one), a key of neither family the best any-family
// rule of its in_port.
//
// # Concurrency
//
// A Shape has no lock of its own. Its owner serializes the changes (Add,
// Remove, Sync, SetEnabled) with each other and with lookups (Lookup,
// Serves, Search, Info), which may run concurrently with each other: the
// pipeline calls the changes under its switch lock held for writing and
// the lookups under it held for reading. Lookup's scratch buffers come
// from a sync.Pool. Images must be safe for concurrent lookups.
//
// # Testing
//
// shapetest holds the generator (clustered samples of the real BGP table),
// the brute-force verdict over every pair of rules, and the property tests
// (random change sequences, a fuzzed op stream over a small prefix space)
// that this package runs on an in-memory Images and datapath/pipeline on
// its switch, over the CPU backend and over a GPU.
package lpmshape
