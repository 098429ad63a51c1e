// Package pubsub is gswitch's content-based matching (CCM, Margara & Cugola,
// DEBS'11): subscriptions, their text language, events and their encodings,
// an indexed counting matcher on the CPU, a brute-force evaluator of the
// semantics, and the device layout a GPU kernel counts from.
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
// Writers keep the index sorted incrementally: an add appends to the arrays
// it touches and re-sorts them once per call (binary insertion for a few
// entries); a removal marks its slots dead and compacts each touched array
// once. So a change costs time in the size of the arrays of its names, not
// of the table, and deploying many subscriptions at once sorts each array
// once.
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
// # Concurrency
//
// Table.mu (a sync.RWMutex) is the only lock of the package; there is no
// lock order to keep. Writers (Add, AddSpecs, Remove, RemovePort, SetPort)
// hold it exclusively for the whole change, so a change is visible to every
// match that starts after the writer returns, and SetPort replaces a port's
// predicate without any match seeing a mixture. Readers (Match, AppendMatch,
// MatchBatch, Explain, Get, List, Specs, Stats, Layout, Device.Update) hold
// it shared: MatchBatch for the whole batch. A matching goroutine owns its
// scratch (from a sync.Pool) for the duration of one call. Subscription
// match counters are atomic and are the only state readers write. Nothing
// calls back into the caller under the lock. The Go RWMutex blocks new
// readers once a writer waits, so writers are not starved by a stream of
// matches.
//
// Subscription.Matches counts the events whose delivery to the port the
// subscription decided: the first filter of the port that the matcher found
// satisfied belongs to it (with per-port pruning, the port's other filters
// are not evaluated for that event). Explain evaluates every constraint
// directly and says which ones an event satisfied.
//
// # Device layout
//
// Layout (layout.go) is the table as plain 32-bit word arrays, in six
// regions, for a CCM kernel:
//
//	header:       magic "GSPS" | version | names | constraints | string bytes | filter slots | ports
//	names:        per name index: first constraint record, number of records
//	constraints:  3 words per constraint, grouped by name and within a name by slot:
//	              w0 = slot<<8 | type<<4 | op;  w1, w2 = the value:
//	              integer (and boolean 0/1) low and high 32 bits; float's bits low, high;
//	              string: byte offset into the strings region, length
//	strings:      string bytes, four per word, little-endian
//	filters:      per slot: port index<<8 | size (all constraints; 0: a free slot)
//	ports:        per port index: the port number
//
// The CPU resolves an event's attribute names to name indices (Layout.Names:
// CCM selects constraints by name on the CPU); the kernel evaluates a name's
// records and counts per slot, a slot matches when its count equals its
// size. The device counts every constraint (no ranks): EvalLayout does
// exactly that from the words alone, and the tests hold it equal to the
// matcher and the brute-force evaluator. The layout is built in two passes
// over the filter slots in order (names numbered and counted, then every
// record written at its name's cursor), so a name's records come out in
// slot order without a sort. Device keeps the image in a bubble.Mirror with
// head-room (a sixteenth of each region, at least 64 words): Update
// rebuilds the words and writes them through the mirror, so a mirror
// receives bubbles for the words that changed; a table that outgrows the
// head-room gets a new generation. Constraint records are kept in name
// order, so an insertion shifts the records after it: a change costs as
// many bubbles as words it moves (a few hundred on small tables, up to the
// whole constraints region on CCM's default scenario); gaps per name are
// the next step. The layout is 12 bytes per constraint plus 4 per filter
// slot and the string bytes: 15.5 MB for CCM's default scenario (1M
// constraints), 16.5 MB (15.7 MiB) with the head-room.
//
// # Scenarios
//
// Scenario generates CCM's workloads (DefaultScenario: 10 interfaces,
// 22,500–27,500 filters each, 3–5 constraints per filter, 100 names, events
// of 3–5 attributes, half numeric with = != > <, half string with = != ^=
// *=) for tests and benchmarks (bench_test.go: per-event latency, batches,
// deploying 1M constraints, one change).
package pubsub
