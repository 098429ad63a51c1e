// Package pubsub is gswitch's content-based matching (CCM, Margara & Cugola,
// DEBS'11): subscriptions, their text language, events and their encodings,
// an indexed counting matcher on the CPU, a brute-force evaluator of the
// semantics, and the device layout a GPU kernel matches from.
//
// # Model and semantics
//
// An event is a set of attributes (name, value) with distinct names. A value
// is a 64-bit integer, a 64-bit float (never NaN), a string of at most 255
// bytes or a boolean. A constraint is NAME OP VALUE; a filter is a
// conjunction of constraints (1 to 255 of them); a port's predicate is a
// disjunction of filters, gathered from all of the port's subscriptions. The
// answer for an event is the sorted list of ports whose predicate it
// satisfies.
//
//   - = and != apply to every type; < <= > >= to numbers and strings; ^=
//     (prefix), $= (suffix) and *= (substring) to strings. An operator that
//     does not apply to its value's type is an error (a syntax error in
//     text).
//   - Two numbers compare as integers when both are integers, else both as
//     float64 (so 9007199254740993 = 9007199254740992.0 holds, and
//     9223372036854775807 = 9.223372036854775807e18). -0.0 equals 0.
//   - Strings compare in byte order; the empty string is a prefix, suffix
//     and substring of every string. Booleans support = and != only.
//   - A constraint on an attribute the event lacks, or whose value is of
//     another class (number, string, boolean), is false, != included.
//
// Constraint.Eval, Filter.Matches and BruteMatch (brute.go) are these rules
// written as plainly as possible; every faster path is tested against them.
//
// # Subscription text
//
//	# a comment; blank lines are ignored
//	1: price > 10 && sym ^= "AB" || vol != 0
//	2: sym = "X\x41\"" && live = true # a trailing comment
//	1: region = "eu"
//
// One subscription per line, PORT: PREDICATE; PREDICATE is filters joined
// by ||, a filter constraints joined by &&, a constraint NAME OP VALUE.
// NAME is a word of letters, digits, _ . - (any such word: true, 7 and -x
// are names left of an operator). VALUE is an integer (decimal, optional
// sign, 64-bit), a float (with a '.' or an exponent: 1.5, 1., .5, 2e-3), a
// double-quoted string (escapes \" \\ \n \t \xHH; at most 255 bytes), true
// or false. Whitespace between tokens is spaces or tabs; a trailing \r is
// dropped; # outside a string starts a comment. Several lines of one port
// are alternatives of its predicate. Parse returns one Spec per line, and
// its errors (*SyntaxError) name the line and the byte column.
//
// # Events
//
// JSON lines (ReadJSONEvents, DecodeJSON): one object per event, one member
// per attribute. A JSON number without a fraction or an exponent is an
// integer (it must fit 64 bits), any other number a float; strings and
// booleans are themselves; null, arrays, objects and duplicate names are
// errors.
//
// The binary encoding (DecodeWire, Event.AppendWire) is the payload of an
// event packet. All integers are big-endian:
//
//	offset  size  field
//	0       4     magic "GSEV" (0x47 0x53 0x45 0x56)
//	4       1     version, 1
//	5       1     flags, 0 (anything else is rejected)
//	6       2     attribute count n (at most 4096)
//	8       ...   n attributes, each:
//	              1      name length L (1..255)
//	              L      name bytes
//	              1      type: 1 integer, 2 float, 3 string, 4 boolean
//	              value: integer 8 bytes two's complement;
//	                     float 8 bytes IEEE 754 binary64 (NaN rejected);
//	                     string 1 byte length S (0..255), then S bytes;
//	                     boolean 1 byte, 0 or 1
//
// Nothing may follow the last attribute, and names must be distinct. An
// event's names may be any bytes (an event may carry names no subscription
// can spell; they match nothing). The decoder checks every length against
// the data before it uses it; every error wraps ErrWire.
//
// # The matcher
//
// Table is Siena's SFF / CCM counting algorithm, indexed. Each filter has a
// slot. The constraints are indexed per attribute name (nameIdx), and per
// value class and operator in the structure that yields the satisfied ones
// directly:
//
//   - = on integers and on strings: hash maps from the value to the slots;
//   - < <= > >= (and = on floats, and = on integers for a float event):
//     arrays sorted by value, one per operator and per integer/float
//     constant; the satisfied constraints are one contiguous range found by
//     two binary searches, under the integer or the float comparison as the
//     semantics prescribe for the pair of types;
//   - ^= and $=: hash maps of the values plus the distinct lengths among
//     them: a string s looks up its prefixes (suffixes) of those lengths;
//   - *=: the distinct values are either scanned (strings.Contains) or, when
//     that is more work, every substring of s of a present length is looked
//     up (each value counted once);
//   - !=: arrays sorted by slot, with the value (strings by an interned id)
//     compared per entry;
//   - booleans: the slots satisfied by true, and by false.
//
// An event is matched by looking up each attribute's name and counting, per
// slot, the satisfied constraints; a filter matches when its count reaches
// its target. Per-port pruning: once a port has matched, its other filters
// are skipped, and the event ends when every port with subscriptions has
// matched.
//
// Not every constraint is counted. Constraints have ranks by how many events
// satisfy them: 0 for = ^= $= *= and booleans, 1 for the orderings, 2 for !=
// on numbers and strings (nearly every event that has the attribute
// satisfies it). Each filter counts only its constraints of its lowest rank
// (its target is their number); the others, its residual constraints, are
// checked against the event when the count reaches the target, after a
// one-AND test that the event has their names (a 64-bit mask of name
// hashes). This keeps the big, mostly satisfied != lists and the orderings
// of filters that also have an equality out of the counting: on CCM's
// default scenario it cuts the counted constraints per event several times.
//
// The counters live in a per-goroutine scratch area: 16 bits per slot, the
// event's epoch (1..255) in the high byte and the count in the low byte, so
// a counter of another epoch reads as zero and no reset stands between two
// events; every 255th event clears the array (CCM double-buffers for the
// same reason). A bulk add (AddSpecs) numbers the new slots in the order of
// each filter's first counted constraint, so that an index array's entries
// point at neighbouring slots and counting walks memory nearly in order.
//
// A subscription change leaves the index arrays the matcher reads in place
// (index.go, remove.go), so that a change writes a few words, not moved
// array tails that a matcher on another core must fetch again:
//
//   - an add appends its entries: to the hashed structures' lists, and to
//     the end of the value-sorted arrays, which keep an unsorted tail of up
//     to 16 entries (tailMax) that the matcher checks entry by entry beside
//     the binary searches of the sorted part; a longer tail is sorted and
//     merged in (one pass for 16 adds). A new ^= $= *= value or length is
//     inserted into the affix lists, not rebuilt;
//   - a removal clears its filters' slots (info 0: a count can never reach
//     the target, and the device layout sees free slots) and leaves their
//     entries as tombstones on their names' lists; a name is purged (one
//     pass over its structures, dropping the tombstones' entries) once its
//     tombstones are 16 and a 64th of its entries, or all of them, and a
//     slot is free again once every name it had entries on has purged
//     them. The matcher counts a tombstone's entries for a slot that
//     cannot match: at most a 64th of a name's entries, and no hold per
//     removal longer than the slot's bookkeeping.
//
// Deploying many subscriptions at once sorts each array once.
//
// Deploying (bulk.go): an add of at least 256 filters collects the entries
// of the hashed structures (= on integers and strings, ^=, $=, *=) instead
// of inserting them one by one, sorts them by structure and key with a
// stable radix sort (strings by length and a 32-bit hash, told apart by
// comparison when the runs are handed out) and gives each structure one run
// per key: one map operation and one copy per distinct key instead of a
// hash lookup and an append somewhere in memory per constraint. The slot
// order is a radix sort too, subscriptions are found by id in an array
// appended in id order (binary search; removed ones are holes until they
// are half), ports keep lists of their subscriptions, and the table keeps
// the specs' filters rather than copying them (AddSpecs' caller must not
// modify them). The package's BenchmarkDeploy1M gives the time.
//
// A bulk add fills the new filters' slots (slot, port index, rank) first,
// in parallel, and the indexes after. AddSpecsDevice builds the device
// image (NewDevice's, word for word) from the slots on other goroutines
// while the caller's goroutine fills the indexes, and can hand the image
// over (to load it on a device) as soon as it is built: a deploy's table,
// image and device load overlap (BenchmarkDeployDevice1M compares it with
// AddSpecs then NewDevice).
//
// # Concurrency
//
// Table.mu (a spinRW, rwlock.go) is the only lock of the package; there is no
// lock order to keep. Writers (Add, AddSpecs, Remove, RemovePort, SetPort)
// hold it exclusively for the whole change, so a change is visible to every
// match that starts after the writer returns, and SetPort replaces a port's
// predicate without any match seeing a mixture. Readers (Match, AppendMatch,
// MatchBatch, Explain, Get, List, Specs, Stats, Layout, Device.Update) hold
// it shared: MatchBatch once per event (a change made during a batch is
// seen by the batch's later events; a writer waits for one event's match,
// not a whole batch's). CountSlots (a device batch's credits) takes no
// lock: it reads the slots' owners from a table of atomic pointers that
// writers update under the lock (owners.go), so the GPU path's matching
// goroutine never waits for a change. A bulk add and a layout build (NewDevice) split
// their independent parts over short-lived goroutines (par.go, addidx.go)
// while the caller holds the lock; each works on its own names, slots or chunk and
// all are joined before the call returns. AddSpecsDevice's image build
// runs on such goroutines beside the index pass: it reads only the slots,
// the ports and the slot log, which the index pass does not write, and is
// joined (its callback included) before the call returns. A matching goroutine owns its
// scratch (from a sync.Pool) for the duration of one call. Subscription
// match counters are atomic and are the only state readers write. Nothing
// calls back into the caller under the lock. Like sync.RWMutex, the lock
// holds back new readers once a writer waits, so writers are not starved
// by a stream of matches; unlike it, a waiter spins and yields before it
// sleeps (rwlock.go says why: a change's hold is µs, and parking the
// matcher for each of 10K changes/s cost the CPU backend a quarter of its
// throughput). A waiting reader busy-polls for 20 µs (a writer for 2 µs)
// and then yields its core to the OS (sched_yield), a runtime.Gosched only
// every 8th time: a matcher that yielded to the Go scheduler for each
// change's hold went through the global run queue, where another
// processor could take it, away from its core's caches. A change's
// exclusive hold does not grow with the arrays: an add appends, a removal
// leaves tombstones, and the passes over a name's arrays (a tail's merge,
// a purge) come once for many changes.
//
// Subscription.Matches counts the events whose delivery to the port the
// subscription decided: the first filter of the port that the matcher found
// satisfied belongs to it (with per-port pruning, the port's other filters
// are not evaluated for that event). Explain evaluates every constraint
// directly and says which ones an event satisfied.
//
// # Device layout
//
// Layout (layout.go) is the table as plain 32-bit word arrays, in eight
// regions, for the GPU kernel (kernels/pubsub.cu):
//
//	header:       magic "GSPS" | version 2 | names | anchor entries | constraint words |
//	              string bytes | filter slots | ports
//	names:        per name index: first entry of its anchor list, entries
//	anchor-sig:   per anchor entry: the filter's 64-bit name signature (low, high word)
//	anchor-slot:  per anchor entry: the filter's slot
//	constraints:  per filter, its records one after another:
//	              w0 = name index<<8 | short<<7 | type<<4 | op
//	              short (2 words): w1 = an int32 (sign-extended), a boolean 0/1,
//	                or a string's byte offset<<8 | length
//	              long (3 words): w1, w2 = the value's low and high word
//	                (an int64, a float's bits; a string: offset, length)
//	strings:      the string values' bytes, each distinct string once, four per
//	              word, little-endian
//	filters:      per slot: first constraint word, port index<<8 | constraints
//	              (0: a free slot)
//	ports:        per port index: the port number
//
// A filter can match an event only if the event has every name the filter
// constrains. So every filter sits in the anchor list of one of its names
// (the one whose list is shortest when it is written), with its signature:
// bit (ni & 63) of each name index ni it constrains (NameBit). An event
// scans the lists of its own names only and evaluates a filter only when its
// own signature covers the filter's: on CCM's default scenario (1M
// constraints, 100 names, events of 3–5 attributes) about 10K 8-byte
// signature checks and a handful of filter evaluations per event, against
// 40K constraint evaluations and 16K counter increments for CCM's
// counting. There are no counters to reset between events. EvalLayout and
// EvalLayoutAttrs compute exactly the kernel's answer from the words
// alone; the tests hold them equal to the matcher and the brute-force
// evaluator.
//
// Device keeps the image in a bubble.Mirror with head-room (a sixteenth of
// the anchor, constraint and filter regions, at least 1,024 words; an
// eighth of each anchor list; half again of the names and strings, at
// least 1,024 names and 64 KB; a quarter of the ports, at least 32) and
// writes a change slot by slot: the table logs the filter slots each writer
// changes (Table.slotLog), and Update rewrites those slots only — a removed
// filter's anchor entry is replaced by its list's last, its constraint
// words go to a free list of their size; an added filter takes words from
// that free list or the end of the region, interns its strings, and is
// appended to its anchor list (a full list moves to the end of the anchor
// regions with twice the room). One subscription change is a few dozen
// bubbles (7 words on average on the default scenario, BenchmarkDeviceChange)
// and 45 µs of CPU with the table's own work. A change that does not fit
// the head-room, or an Update behind a slot log that was trimmed (more than
// 32K slot writes), builds a new generation: the whole image, compacted,
// names renumbered in sorted order. The default scenario's image is 14.5
// MB with its head-room (13.6 MB before it; the strings, each once, 2.9 KB);
// growing a table from one filter to 1,500 on new names and ports took 8
// new generations (TestDeviceGrowth).
//
// # Scenarios
//
// Scenario generates CCM's workloads (DefaultScenario: 10 interfaces,
// 22,500–27,500 filters each, 3–5 constraints per filter, 100 names, events
// of 3–5 attributes, half numeric with = != > <, half string with = != ^=
// *=) for tests and benchmarks (bench_test.go: per-event latency, batches,
// deploying 1M constraints, one change).
package pubsub
