// Package lpm is gswitch's longest-prefix match: GAMT's multi-bit trie
// encoded as a state-jump table (GAMT §3.1), for IPv4 and for IPv6 with full
// 128-bit prefixes, kept on the CPU and mirrored word for word to a device
// through write bubbles (package bubble).
//
// # What
//
// A Table holds one family's routes: prefix -> next-hop index (1..2^24-1; 0
// means "no route"). It is the authoritative copy. Its lookup structure is a
// device image of 32-bit words that a backend copies once and then keeps up
// to date with the bubbles of each change; the CPU answers lookups from the
// same words through a View, so the CPU's answer is by construction the
// answer of any mirror holding the same words, and of the GPU kernel, which
// implements the same loop. NextHops interns the next hops themselves
// (gateway, port) as those indices; the trie never sees more than the index.
//
// # The encoding
//
// The trie is leaf-pushed and multi-bit: level i consumes the address bits
// [off_i, off_i+s_i), the strides s_0..s_{L-1} summing to the address width.
// Level 0 is one node, the root; every other level is an array of nodes of
// 2^{s_i} entries each, node n's entries at n<<s_i .. (n+1)<<s_i - 1. Each
// level is one region of the image; region 0, "meta", describes the layout,
// so that a mirror is self-describing:
//
//	region 0 (meta):  "GAMT" | family (4, 6) | L | s_0 | s_1 | ... | s_{L-1}
//	region 1+i:       level i, nodes x 2^{s_i} entries
//
//	entry (uint32):   31            8 7       0
//	                 +---------------+---------+
//	                 |  inf (24)     | jump (8)|
//	                 +---------------+---------+
//	  jump == 0: a leaf; inf is the next-hop index (0: no route)
//	  jump != 0: a pointer to node inf of level jump (here always i+1; the
//	             field is 8 bits so that a layout may skip levels)
//
// A lookup is a tight loop with one load per level and no allocation:
//
//	e := L0[chunk_0(a)]
//	for e&0xff != 0 { j := e & 0xff; e = L_j[(e>>8)<<s_j | chunk_j(a)] }
//	return e >> 8
//
// View precomputes per level how to cut chunk_j out of an address (shifts
// for IPv4, a 64-bit window select for IPv6), indexes its levels by the
// 8-bit jump field, and keeps the walk below the root out of line, so a
// lookup that ends at the root (most random traffic) costs one load. The
// batch lookups walk a block of 64 addresses level by level, keeping the
// block's loads in flight together. NewView checks the meta region, the
// region sizes and every pointer entry, so a corrupt image is an error and a
// View never indexes outside its image.
//
// # Leaf pushing and the CPU-side metadata
//
// Every entry of a node answers for its whole address range: a leaf holds
// the next hop of the longest prefix covering the range (pushed down from
// shorter prefixes), so a lookup stops at the first leaf. To keep that true
// under updates, the table keeps beside the image, never on the device:
// per entry the length of the prefix whose next hop it holds; per node its
// default (the next hop and length pushed into it from its parent entry when
// it was made, kept up to date since) and the number of prefixes in its
// subtree; the prefix set (a Go map); per level the nodes in use, the
// capacity and the garbage nodes.
//
// A prefix of length l lives at the level with off_i < l <= off_i+s_i (the
// default route at level 0) and covers 2^{off_i+s_i-l} consecutive entries of
// one node there.
//
// Insert creates the missing nodes on the prefix's path, each initialised
// with its parent entry's current leaf (which becomes the pointer), then
// visits the covered entries: a leaf whose prefix is not longer takes the new
// next hop; a pointer passes it down into the child, which takes it as its
// default and in every entry not held by a longer prefix, recursively; a
// child whose default is already longer is skipped whole.
//
// Delete is lazy (GAMT §4.3): the entries that held the prefix (same length,
// in its range, recursively into children whose default it was) take the
// next-longest covering prefix, found as the longest present truncation
// above the level's first bit, else the node's default. No node is unlinked;
// a node whose subtree count drops to 0 becomes garbage, still linked and
// still answering correctly, and is reused as it is when a later insert goes
// through it.
//
// Every word is written through bubble.Mirror.Set, so each changed word
// becomes one bubble and Sync hands a mirror exactly the words that changed.
// A failed call (invalid prefix, host bits, other family, next hop out of
// range, delete of an absent prefix) changes nothing.
//
// # Head-room and rebuilds
//
// Regions have a fixed size within a generation. Each level is allocated
// with nodes + max(nodes x HeadRoom, MinFree) nodes (defaults 10% and 64).
// When an insert needs a node its level cannot give, or a delete leaves a
// level with more garbage than GarbageThreshold (25%) of its nodes (and at
// least MinFree garbage nodes), the table is rebuilt off-line from the prefix
// set, strides chosen anew, and installed with Mirror.Replace: a new
// generation, which the next Sync carries whole. The old image, and a View of
// it, stay valid for whoever holds them.
//
// The off-line build (Build, and every rebuild) counts the nodes each level
// start would have, chooses the strides, sizes the levels, and inserts the
// prefixes shortest first: in that order a prefix's range holds only leaves
// of shorter prefixes, so each insert is one walk and one fill, and no
// bubbles are recorded. The full IPv4 table (900K prefixes) builds in about
// 0.6-0.9 s on one core of the development machine. Duplicate prefixes in
// Build's input: the last one wins.
//
// # Stride selection (GAMT Algorithm 3)
//
// D[b], the number of distinct b-bit truncations among the prefixes longer
// than b, is the number of nodes a level starting at bit b has; one sort of
// the prefixes gives all of it. For a level count L, two exact dynamic
// programs over (levels left, first bit) choose strides of 1..MaxStride bits:
// the first finds the smallest possible widest level (bytes = capacity x
// 2^s x 4, head-room included, so an empty table does not get a 2^24-entry
// level), the second the fewest 128-byte transactions over all levels among
// the layouts within that bound (ties to the wider first stride). Options
// can fix L or the strides outright.
//
// L itself was measured (BenchmarkStrideStudy, real table
// ../shared/data/fib/bgp-full-table.txt.gz: 901,899 IPv4 and 160,147 IPv6
// prefixes; medians of 5 runs on the 2-core development VM, whose timings
// swing by 2x with the load of its host; "levels" is the mean number of
// levels a lookup reads, a figure free of that noise):
//
//	IPv4  L  strides            B/prefix  levels rnd/in-table  ns rnd/in-table
//	      2  24 8                   75.0     1.00 / 1.00         35 / 39
//	      3  21 3 8                 17.7     1.10 / 1.86         34 / 48
//	      4  19 3 2 8               11.6     1.25 / 2.70         27 / 63
//	      5  19 3 1 1 8             12.4     1.29 / 3.34         40 / 82
//	IPv6 10  22 11 8 7 13 ...      648.2     1.00 / 3.47          6 / 100
//	     12  18 11 5 6 6 5 13 ...  298.4     1.00 / 4.93          6 / 98
//	     13  19 11 5 5 4 4 11 ...  165.0     1.00 / 4.94          7 / 77
//	     14  17 11 4 4 4 4 4 11 .. 129.6     1.00 / 5.78          4 / 92
//	     16  18 10 4 4 4 3 2 3 ..   78.6     1.00 / 6.39         10 / 173
//	     20  16 10 3 3 2 3 3 ...    50.3     1.00 / 8.65          3 / 104
//
// So the defaults are L = 3 for IPv4 (21/3/8: a wide first level that ends
// most random lookups at once, 17.7 bytes per prefix, a quarter of L = 2's)
// and L = 13 for IPv6 (165 bytes per prefix; fewer levels cut few loads more
// but double the memory, more levels add loads). IPv6 needs many levels
// because all 128 bits must be covered: the levels past bit 48 hold only the
// few hundred long prefixes, and lookups stop at the first leaf, so they cost
// only lookups that reach them. Algorithm 3 balances level sizes, which gives
// the dense bits 19..48 narrow strides: an in-table IPv6 lookup reads about 5
// levels.
//
// # How it is checked
//
// Reference is a trivially correct LPM (a map per length, tried from the
// longest). The tests run random clustered prefix sets of both families
// (real length mix, /0, full-length prefixes, deep nesting) through random
// interleavings of inserts, deletes and next-hop changes on several layouts,
// including one with no head-room that rebuilds all the time, and after every
// batch compare lookups with the Reference and with a linear scan, batch with
// single lookups, the node counts and garbage with a recount, and a mirror
// kept only by Sync with the image (and a View over it with the table). The
// real table is checked the same way before and after 50K trace updates.
// Invalid inputs must leave image, bubbles and lookups untouched; Algorithm 3
// is compared with an exhaustive search; fuzz targets cover the prefix
// reader, operation sequences and corrupt images.
//
// # Measured against bart
//
// BenchmarkLookup runs gamt and github.com/gaissmai/bart v0.30.0 on the same
// real table, traffic (2^18 addresses: uniform random, or uniform inside a
// uniformly drawn prefix) and process; gamt takes the same netip.Addr input
// as bart, gamt-batch takes raw address words in batches of 256. Medians of
// 3 runs, ns per address, on the 2-core development VM:
//
//	              gamt  gamt-batch   bart
//	v4 random     14.6      9.2      86.4
//	v4 in-table   46.0     20.3     280.5
//	v6 random      4.9      2.8      11.1
//	v6 in-table  145.3    109.9     372.2
//
// The image takes 17.7 (IPv4) and 165 (IPv6) bytes per prefix; with the CPU
// side (prefix map and metadata) the heap holds 85 and 283 bytes per prefix,
// bart 23 and 43 (BenchmarkMemory). Builds take 0.75 s (IPv4) and 0.17 s
// (IPv6), bart 0.10 and 0.03 s. Updates cost about 1 µs (IPv4) and 0.75 µs
// (IPv6), bart 0.2 µs (BenchmarkUpdate): a few map probes for the prefix set
// and the replacement search, and a handful of bubbles.
package lpm
