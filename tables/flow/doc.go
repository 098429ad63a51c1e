// Package flow is gswitch's OpenFlow flow table: wildcard packet
// classification with OpenFlow 1.3 semantics, kept as an authoritative CPU
// copy and as a device image of 32-bit words that a GPU (or the CPU
// backend) searches with one of three classifiers from GSwitch §4: linear
// search, tuple-space search over cuckoo hash tables, and Bloom search.
//
// # The packet key
//
// A packet is classified on a Key: KeyWords (27) words holding the OpenFlow
// 1.3 OXM basic fields (ids 0-39) and tcp_flags (id 42), big-endian values
// packed into words. Fields that never occur in the same packet share words;
// their prerequisites keep them apart (a rule matching arp_op must match
// eth_type=0x0806, one matching ip_proto eth_type 0x0800 or 0x86dd, so no
// rule is ever ambiguous about which of the two its bits mean):
//
//	w0   in_port                          w1   in_phy_port
//	w2   metadata[63:32]                  w3   metadata[31:0]
//	w4   tunnel_id[63:32]                 w5   tunnel_id[31:0]
//	w6   eth_dst bytes 0-3                w7   eth_src bytes 0-3
//	w8   eth_dst bytes 4-5 <<16 | eth_src bytes 4-5
//	w9   eth_type<<16 | IPv4/IPv6: ip_proto<<8 | ip_dscp<<2 | ip_ecn
//	                  | ARP: arp_op
//	w10  vlan_vid (13 bits, OFPVID_PRESENT included)<<16 | vlan_pcp<<13
//	     | ipv6_exthdr (9 bits)
//	w11  IPv6: ipv6_flabel | MPLS: mpls_label<<12 | mpls_tc<<9 | mpls_bos<<8
//	     | PBB: pbb_isid
//	w12-15  ipv6_src | IPv4: ipv4_src = w12
//	        | ARP: arp_spa = w12, arp_sha bytes 0-3 = w13,
//	          w14 = arp_sha bytes 4-5 <<16 | arp_tha bytes 4-5, arp_tha bytes 0-3 = w15
//	w16-19  ipv6_dst | IPv4: ipv4_dst = w16 | ARP: arp_tpa = w16
//	w20  TCP/UDP/SCTP: src<<16 | dst | ICMPv4, ICMPv6: type<<16 | code
//	w21-24  ipv6_nd_target
//	w25  ipv6_nd_sll or ipv6_nd_tll bytes 0-3 (icmpv6_type 135 or 136)
//	w26  nd ll bytes 4-5 <<16 | tcp_flags
//
// The field table (FieldInfo: name, OXM id, width, parts, OpenFlow
// maskability, prerequisites of OpenFlow 1.3 §7.2.3.8 table 12) drives
// everything else: Match.SetField and Get, Validate, String and ParseMatch,
// and Key.Set.
//
// A Match is a value and a mask over the key; a packet k matches when
// k&Mask == Value word by word. Match.Validate checks bits: no value bit
// outside the mask, no mask bit where no field lives, and every masked bit
// owned by a field whose prerequisites are matched exactly. Because it sees
// bits, a decoder that builds a match field by field also checks each field
// with Match.CheckField (eth_type=0x0800 with arp_op=1 is, bit for bit,
// eth_type=0x0800 with ip_ecn=1). Covers (the non-strict relation: every
// packet matching o matches m) and Overlaps (some packet matches both) are
// word-wise mask arithmetic.
//
// # Rules and ranking
//
// A Table holds Rules (match, priority, cookie, and an opaque Action: the
// instructions stay on the CPU, as GSwitch keeps them off the GPU) under
// dense RuleIDs, the lowest free id first, so that ids index CPU arrays and
// GPU results. One ranking is used everywhere — the three classifiers, the
// CPU and GPU backends, the brute-force reference: the higher priority wins
// and, among equal priorities, the lower id. It is one 64-bit integer,
//
//	Rank(prio, id) = prio<<32 | ^uint32(id)
//
// so a GPU resolves a lookup with a 64-bit atomicMax, and rank 0 means no
// match. Add, Modify and Delete follow OpenFlow 1.3 §6.4: a rule with the
// match and priority of an existing one replaces it (same id); CheckOverlap
// refuses a rule that overlaps one of the same priority; a selector picks
// rules strictly (identical match and priority, found through a map without
// a scan) or non-strictly (the selector's match covers the rule's; the scan
// skips every mask group whose mask does not contain the selector's), with
// a cookie mask and an optional filter (out_port); Modify changes only the
// action and never adds. Errors are typed (MatchError, OverlapError,
// ErrTableFull, all with sentinels for errors.Is) so the OpenFlow layer maps
// them to OFPBMC_* and OFPFMFC_* codes, and a failed Add changes nothing.
//
// Rules with an identical match are one distinct match: the image holds only
// the best-ranked of them (the head); the others wait in a CPU-side chain,
// as in Open vSwitch, so a delete promotes the next one with a two-word
// update, and LookupAll returns the whole chain.
//
// # The device image
//
// A table's image is a bubble.Image of six regions (RegionHeader,
// RegionSeeds, RegionClasses, RegionOrder, RegionEntries, RegionBloom; an
// algorithm leaves the ones it does not use empty). The header
// (HeaderWords words) holds LayoutMagic, LayoutVersion, the Algo, the
// projection width P and the projection itself (HdrProj: key word indices,
// ascending), the number of hash families, a count (HdrCount: the linear
// high-water mark, or the classes in the order) and the entry and
// descriptor sizes.
//
// Projection. The image stores only the P key words that some rule's mask
// uses (gPF's packet reduction): packets are reduced to those words, in that
// order, before a lookup (Table.UsedWords, PackSoA), and every entry and
// descriptor is P words wide. When a rule needs a word outside the
// projection, the image is rebuilt off-line with the wider one; the
// projection never shrinks within a generation (Compact narrows it).
//
// Linear search. RegionEntries holds slots of SlotWords(P) = 2+2P words,
// [priority, id, value P words, mask P words], one per distinct match; the
// header's HdrCount is the high-water mark; a freed slot gets id EmptyID
// (0xFFFFFFFF) and is reused lowest first, and the mark drops when the top
// slots empty. A lookup scans every slot below the mark and keeps the
// highest rank whose masked key equals the value.
//
// Tuple-space search (Srinivasan's tuple space, GSwitch §4.2). One class per
// distinct mask — several when a mask outgrows ClassCapacity and is split —
// each a cuckoo hash table of CuckooWays (3) subtables of 2^b buckets, one
// entry per bucket. An entry is EntryWords(P) = P+2 words: the masked
// projected key, the id, the priority. Hashing is vector multiply-shift,
//
//	h(x) = ((a0 + Σ a[1+i]·x[i]) mod 2^64) >> (64-b)
//
// over the P masked key words with random 64-bit coefficients. To keep
// descriptors small the seeds region holds K hash families (HashFuncs = 5
// functions each: 3 for the subtables, 2 for the Bloom filter; HashCoefs =
// 28 coefficients per function, each as two words, low then high) and a
// class names its family. A class descriptor is ClassWords(P) = P+16 words,
// [mask P words, family, table offset (words), log2 buckets, max priority,
// entry count, Bloom offset (words), log2 Bloom bits, prefilter selector,
// prefilter bitmap 8 words]. The prefilter (PreSelector, PreBucket) takes
// 8 bits of the key within the class mask (the lowest four mask bits of
// the two words the mask covers most) and the bitmap has a bit set for each
// such value among the class's entries (counted on the CPU, so deletions
// clear them): a lookup skips a class whose bit is clear before it hashes
// anything, with the same answers. RegionOrder lists the
// classes in descending max priority, and a lookup stops as soon as the
// best rank found beats every remaining class's max priority. The order and
// the descriptors change only through the mirror, like everything else.
//
// An insertion goes into an empty candidate bucket, else evicts along a
// random cuckoo walk of at most 500 kicks whose writes are kept aside and
// applied only if it succeeds; on failure the class is re-hashed off to the
// side with the next families (all its words rewritten: bubbles); after K
// failed families its table doubles (again trying each family), up to the
// size that holds ClassCapacity entries; then the class is closed and a new
// class with the same mask is opened (a split). Class tables live in
// RegionEntries, carved by an allocator of power-of-two blocks (in units of
// one bucket of each subtable) with free lists; when it has no room the
// whole image is rebuilt compactly, with twice the room it needs, and
// installed as a new generation (Mirror.Replace).
//
// Bloom search (GSwitch §4.3). The same classes with a Bloom filter in front
// of each: k = 2 functions of the class's family, a power-of-two bit array
// of about 16 bits per entry (512 bits at least; regrown to that when it
// falls under 8 bits per entry) in RegionBloom. The CPU keeps a counting filter
// (uint16 counters, sticky when saturated) so deletes are exact: a bit is
// cleared in the image when its count drops to 0. A lookup probes a class's
// cuckoo table only when both bits are set.
//
// Merged tuple search (Algo Merge; merge.go, after TupleMerge). The same
// classes, descriptors, cuckoo tables and Bloom filters, but a class's mask
// is a relaxed mask within each of its rules' masks, and an entry is
// EntryWordsFor(Merge, P) = 2P+2 words: the rule's value, id, priority and
// the rule's own mask. Entries are placed by hashing their value under the
// class mask (the class key); the Bloom filter holds class keys. A lookup
// masks the packet with the class mask, hashes it, and compares each of the
// three candidate entries under the entry's own mask: any may match, and the
// best rank wins. At most three rules of a class share a class key.
//
// # Updates and bubbles
//
// Every change to the image goes through bubble.Mirror.Set, so each word an
// operation changed becomes one bubble; a backend calls Mirror().Sync before
// a batch and applies the update to its copy, which then equals the table's
// image word for word. A rebuild (a wider projection, an allocator with no
// room, no free class slot) lays out a fresh image and Replaces the old one:
// the next Sync carries it whole.
//
// # Lookups
//
// Lookups run on the image words: a View (NewView) validates an image (a
// corrupt one gives an error, never a panic or an out-of-range read),
// caches only what cannot change within a generation (the projection and
// the hash coefficients) and reads everything else in place, checking every
// offset it follows. View.Lookup takes a projected key and returns the best
// id and its rank; View.LookupBatchSoA takes a batch in structure-of-arrays
// order (GSwitch Algorithm 3, PackSoA). Table.Lookup projects the key and
// asks its own View, so the CPU answer is by construction what a mirror of
// the same words answers; the GPU kernels implement the same functions on
// the same words. Batches (Table.LookupBatch, View.LookupBatchSoA) go
// through the classes 32 packets at a time, class by class as GPU threads
// do, loading every candidate Bloom word and bucket id before comparing so
// that cache misses overlap; the answers are the same. View.LookupBatchSoA
// searches a run of equal projected keys once: a key equal to the one
// before it takes that answer (a queue's batch in a table matched on
// in_port alone is one search, not one a packet).
//
// # Data
//
// ReadClassBench reads ClassBench filter sets and ExpandClassBench turns
// them into rules (port ranges expanded into prefixes, priority by line);
// ClassBenchTraffic draws headers in the style of ClassBench's trace
// generator. SynthSpec generates the synthetic rule sets of GSwitch §6 (N
// rules in C classes, F full, Cm overlapping, f fields; see SynthSpec for
// the exact definitions) and SynthTraffic packets for them. BruteForce and
// BruteForceAll scan every rule: the reference.
//
// # How it is checked
//
// The tests compare every classifier with the brute-force reference on
// random rule sets of 1 to 50 classes over every protocol family (shared
// words, duplicate matches at other priorities, equal priorities,
// overlaps), run random interleavings of Add, Modify and Delete against a
// reference model of OpenFlow semantics on tiny sizes that force re-hashes,
// grows, splits and rebuilds, keep a mirror current only with bubbles and
// compare it word for word and answer for answer, run the ClassBench acl1
// set against both the reference and ClassBench's own range semantics, and
// fuzz every decoder and the image validation.
package flow
