// Package filter is gPF's filter compiler and multi-match evaluator: many
// tcpdump filters (the pcap-filter language, with libpcap's semantics)
// evaluated at once on every packet, each packet's answer a bitmap of the
// filters that accept it. It is pure Go and does no I/O; capture files are
// read by datapath/pcapfile.
//
// # From expression to graph
//
// lex.go splits an expression with the longest-match rules of libpcap's
// scanner.l (keywords, numbers in decimal, 0x hex and leading-0 octal,
// dotted and IPv6 addresses, MAC addresses, the named constants icmptype,
// tcp-syn, icmp6-echo, ...). parse.go is a recursive-descent reading of
// grammar.y: "and" and "or" of equal precedence, left-associative; an
// operand that is a bare value inherits the qualifiers of the operand before
// it ("host a or b"); arithmetic with grammar.y's precedences, including its
// quirk that '%' and '^', which have none, bind tighter to the left than
// anything and take everything to their right. Like libpcap, the parser
// generates while it parses, in textual order, which is what makes "vlan"
// and "mpls" shift the offsets of everything written after them, across
// "or" too.
//
// gen.go is the counterpart of libpcap's gencode.c for the supported
// subset: it builds each filter as a boolean tree (and, or, not) over
// criteria, in libpcap's evaluation order. A Criterion is one comparison:
// (load & mask) rel constant, with the load at a constant packet offset or
// at an offset from the IPv4 transport header (4 × IHL past the IPv4
// header); the wire length compared with a constant; or, for byte access
// with arithmetic or a computed index ("tcp[tcp[12] >> 2]"), a general
// relation between two expressions. Offsets are resolved for one link type
// at compile time (EN10MB, LINUX_SLL, LINUX_SLL2, RAW, IPV4, IPV6, NULL in
// either byte order, LOOP), as libpcap does; a program is compiled per link
// type.
//
// graph.go compiles a set of filters into a Program: every unique criterion
// once across all filters (by canonical text), every unique sub-predicate
// (an and, or or not of two values) once, and one root per filter; constant
// operands are folded. It also computes the BytePlan of gPF's packet
// reduction: the byte ranges some criterion reads (relative to the packet
// or to an IPv4 transport header), whether any reads at a computed offset
// (then the whole packet is needed) and whether any uses the wire length.
//
// # Incremental compilation
//
// A Compiler (incremental.go) keeps each expression's compiled unit (its
// criteria with their canonical texts, sub-predicates, optimized
// control-flow form and range cut), so that a set differing from the
// previous one by a filter compiles that filter alone and assembles the
// others from their units: criteria and sub-predicates merged by
// identity, forms renumbered, then the per-set groups and indexes. The
// result is the Program Compile gives (TestCompilerEqualsCompile checks
// the device layout word for word); Compile is a Compiler used once.
//
// # Classic BPF programs
//
// A filter written "bpf:" and a program in tcpdump -ddd's text form is
// lifted into the same graph (bpf.go): the program runs symbolically,
// once per (instruction, register contents), its conditional jumps
// become criteria (a load and mask compared with a constant when they
// are one, a general relation otherwise) and its control-flow DAG is the
// filter's control-flow form as it stands (libpcap's optimizer has
// already run), its boolean form the filter's graph. Loads that no test
// reads still reject a truncated packet, through a check criterion on
// their path. FuzzBPF, TestBPFRandomPrograms and
// TestBPFLiftedEqualsTcpdump check lifted programs against a reference
// interpreter of bpf_filter.c and against tcpdump.
//
// # Evaluation
//
// A criterion's value is true, false or unknown: a load past the captured
// length (or a run-time division by zero) makes BPF reject the packet for
// the whole filter, also under "not", wherever it is reached; "len",
// "less" and "greater" use the length on the wire, loads the captured
// length.
//
// Evaluator.EvalStages is gPF's form, the one the device layout follows:
// every criterion once per packet (equality criteria of one value, as
// ether types, protocols, addresses and ports are, share one load), then
// every sub-predicate in topological order, then each filter's root. On
// packets where no criterion is unknown that is exactly libpcap's answer.
//
// Evaluator.Eval is the CPU path: each filter runs its optimized
// control-flow form (below), and a criterion is computed the first time a
// filter reaches it in the packet and then shared by all filters (at most
// once per packet). With many filters, an index (index.go) skips the
// filters that cannot accept: a filter whose accepting paths all take a
// true equality test of large groups (addresses, ports, VLAN ids) is
// walked only when the packet's value of one of those groups is one of
// its constants. Any group of two or more constants may serve (ether
// types and IP protocols too: "tcp" is then walked on IP packets only);
// each index group keeps a 4 Kibit bitmap of its constants' hashes, so
// that the usual value, one no filter tests, costs one load and one bit
// test (in the L1 cache) instead of a map look-up. An
// equality group's value is loaded once per packet when first needed and
// each member compared when a filter reaches it. Filters of the same
// boolean graph (one expression on several ports or under several names)
// share one control-flow form, walked once, their bits copied. Port
// ranges, which no equality indexes, have a range index (rangeindex.go):
// a filter each of whose accepting paths bounds a 16-bit value to a
// narrow interval is walked only when the packet's value lies in one of
// its intervals. The walks read every form from one contiguous array
// (Program.flat, jumps absolute) rather than a per-filter object. A
// program of one filter has nothing to share: its form is walked
// computing each criterion where it is reached, without the per-packet
// marks (the program tcpdump would run, as cheaply).
// Short-circuiting and the index make it several times faster than the
// three stages on a CPU; the oracle and fuzz tests check that the two
// agree packet by packet.
//
// Memo (memo.go) keeps answers for packets that read alike: a miss is
// evaluated with the Evaluator tracing every byte range a load reads
// (every filter walked, without the indexes, whose loads are speculative),
// and a later packet whose bytes at those ranges, captured length and wire
// length are equal gets the same answers without an evaluation (the
// evaluation is deterministic in what it has read). The live filters
// (datapath/filters) use it: a port's few flows share a handful of
// entries, whatever their payloads.
//
// # Truncated packets and libpcap's optimizer
//
// tcpdump runs libpcap's optimized program by default, and the optimizer
// removes tests, and with them loads that would have run past the end of a
// truncated packet. So each filter also has a control-flow form (cfg.go),
// which answers it whenever some criterion is unknown, built as
// gencode lays out blocks and transformed by the jump optimizations of
// optimize.c that change which loads run: opt_j (an edge is threaded past a
// block whose branches agree, or whose test a dominating edge decides: the
// same test, or an equality of the same value with another constant known
// true), or_pullup and and_pullup (a test of the value the predecessors
// test is moved up a chain of tests with a common target), iterated level
// by level to a fixed point; then intern_blocks and opt_root (a root whose
// branches agree is skipped but its loads still run). Details that matter
// and that the oracle tests pinned down: a masked comparison with zero
// becomes a jset (libpcap's peephole), relations written with byte access
// are never decided by primitives' tests nor the other way round (libpcap
// compiles them through scratch memory and the X register), and
// libpcap's gen_arth keeps only its left operand's protocol check ("2 +
// ip[8]" checks nothing). A filter whose optimized form is a bare reject is
// an error, "expression rejects all packets", as tcpdump reports it.
//
// # Verification
//
// The oracle tests run tcpdump --count on generated captures of every link
// type (VLAN, QinQ with 0x88a8 and 0x9100, MPLS stacks, IPv6 with fragment
// and hop-by-hop headers, IPv4 fragments and options, ARP, RARP, LLC,
// truncated copies, random frames) and on real captures, for a corpus of
// expressions (and ones tcpdump rejects) and for thousands of random
// combinations; every count must equal tcpdump's and every rejection must
// be ours too. FuzzCompile and FuzzEval (seed corpora in testdata/fuzz)
// check that no input panics and that a filter's answer in a set equals
// its answer alone.
//
// # Not supported
//
// Host and network names (no resolver in a filter compiler), gateway,
// protochain, the 802.11, ATM, MTP, PPPoE, Geneve, DECnet, ISO and other
// protocol qualifiers, "byte", inbound/outbound/ifindex, and "ether proto"
// of IPX, AppleTalk and AARP: each is a compile error naming the filter and
// the position, never a silent difference.
package filter
