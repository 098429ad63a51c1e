package gpu

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"sync"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// Content-based matching (CCM): an EventMatcher answers, for each event of a
// batch, the sorted ports whose subscriptions it satisfies — what
// pubsub.Table.MatchBatch answers on the CPU (CPUEventMatcher). The CUDA
// one (CUDA.PubsubMatcher, kernel pubsub_match of kernels/pubsub.cu) holds
// the table's device layout (pubsub.Layout) and scans, per event, the
// anchor lists of its attributes' names for filters whose name signature
// the event covers, and evaluates those; events go through EventBatch,
// encoded on the host by name (EncodeEvents).

// EventMatcher matches batches of events.
type EventMatcher interface {
	Name() string
	// Match returns out with out[i] the sorted ports of evs[i].
	Match(evs []pubsub.Event, out [][]uint32) ([][]uint32, error)
	Close() error
}

// CPUEventMatcher is pubsub.Table.MatchBatch.
type CPUEventMatcher struct{ T *pubsub.Table }

// Name returns "cpu".
func (c CPUEventMatcher) Name() string { return "cpu" }

// Match matches the events on the caller's goroutine.
func (c CPUEventMatcher) Match(evs []pubsub.Event, out [][]uint32) ([][]uint32, error) {
	return c.T.MatchBatch(evs, out), nil
}

// Close does nothing.
func (c CPUEventMatcher) Close() error { return nil }

// AttrWords is the size of an encoded event attribute: name index, type,
// value low and high word (a string: its offset in the batch's bytes, its
// length).
const AttrWords = 4

// EventBatch is a batch of encoded events: Off[k]..Off[k+1] index event
// k's attributes in Attrs (AttrWords each), string values in Str. Out
// receives PortWords words per event: bit p set when a filter of the
// layout's port index p matched; then (Hits) the number of deliveries and
// the slots of the filters that decided them.
type EventBatch struct {
	Off       []uint32 // N+1 used
	Attrs     []uint32 // AttrWords*Off[N] used
	Str       []byte   // StrBytes used
	Out       []uint32
	N         int
	StrBytes  int
	PortWords int

	impl any
	err  error
	// namesVer is the version of the name table the batch was encoded
	// for (0: not known; the CUDA matcher's own batches set it and Submit
	// refuses them after a live update numbered new names), seen the
	// version of the words it is matched against (set by Submit), since
	// the version its caller's call began at (0: none): Submit may leave
	// the words of updates made after it pending (see Submit).
	namesVer, seen, since uint64
}

// EncodeEvents encodes evs into b (replacing its contents) for a layout's
// name table: attributes whose name no constraint uses are left out (they
// satisfy nothing), and of two attributes of one name the first counts, as
// pubsub.Event.Get reads it. It returns how many events fit (all, unless b
// is full).
func EncodeEvents(b *EventBatch, names map[string]uint32, evs []pubsub.Event) int {
	b.N, b.StrBytes = 0, 0
	if len(b.Off) == 0 {
		return 0
	}
	b.Off[0] = 0
	na := 0
	for k := range evs {
		if k+1 >= len(b.Off) {
			return k
		}
		e := &evs[k]
		s0 := b.StrBytes
		full := false
		for i, a := range e.Attrs {
			ni, ok := names[a.Name]
			if !ok || slices.IndexFunc(e.Attrs[:i], func(x pubsub.Attr) bool { return x.Name == a.Name }) >= 0 {
				continue
			}
			if AttrWords*(na+1) > len(b.Attrs) {
				full = true
				break
			}
			r := b.Attrs[AttrWords*na : AttrWords*(na+1)]
			v := a.Value
			r[0], r[1] = ni, uint32(v.Type)
			switch v.Type {
			case pubsub.TypeInt, pubsub.TypeBool:
				r[2], r[3] = uint32(v.Int), uint32(uint64(v.Int)>>32)
			case pubsub.TypeFloat:
				f := math.Float64bits(v.Float)
				r[2], r[3] = uint32(f), uint32(f>>32)
			case pubsub.TypeString:
				if b.StrBytes+len(v.Str) > len(b.Str) {
					full = true
				} else {
					r[2], r[3] = uint32(b.StrBytes), uint32(len(v.Str))
					b.StrBytes += copy(b.Str[b.StrBytes:], v.Str)
				}
			default:
				continue
			}
			if full {
				break
			}
			na++
		}
		if full {
			b.StrBytes = s0
			return k
		}
		b.N = k + 1
		b.Off[k+1] = uint32(na)
	}
	return len(evs)
}

// Hits returns the slots of the filters that decided the batch's
// deliveries (after Wait), and whether they are all there (false: more
// deliveries than the batch brings slots back for).
func (b *EventBatch) Hits() ([]uint32, bool) {
	o := b.N * b.PortWords
	if o >= len(b.Out) {
		return nil, false
	}
	n := int(b.Out[o])
	have := min(n, hitCap(b.N), len(b.Out)-o-1)
	return b.Out[o+1 : o+1+have], have == n
}

// hitCap is the deciding filters' slots a batch of n events brings back
// (two deliveries per event on average; past it a matcher says the slots
// are incomplete and the caller counts on the CPU).
func hitCap(n int) int { return 2*n + 256 }

func appendHits(slots []uint32, b *EventBatch) ([]uint32, bool) {
	h, ok := b.Hits()
	return append(slots, h...), ok
}

// decodeInto sets out[k] to the sorted ports of event k of b (after Wait).
func decodeInto(out [][]uint32, b *EventBatch, ports []uint32) error {
	for k := 0; k < b.N; k++ {
		var ps []uint32
		for w := 0; w < b.PortWords; w++ {
			x := b.Out[k*b.PortWords+w]
			for x != 0 {
				i := w*32 + trailingZeros(x)
				x &= x - 1
				if i >= len(ports) {
					return fmt.Errorf("gpu: event %d matched port index %d of %d", k, i, len(ports))
				}
				ps = append(ps, ports[i])
			}
		}
		if len(ps) > 1 {
			slices.Sort(ps)
			ps = slices.Compact(ps)
		}
		out[k] = ps
	}
	return nil
}

// DecodePorts appends to dst[k] the sorted ports of event k of b, after
// Wait, from the layout's ports region (port index → port).
func DecodePorts(dst [][]uint32, b *EventBatch, ports []uint32) ([][]uint32, error) {
	for k := 0; k < b.N; k++ {
		var ps []uint32
		for w := 0; w < b.PortWords; w++ {
			x := b.Out[k*b.PortWords+w]
			for x != 0 {
				i := w*32 + trailingZeros(x)
				x &= x - 1
				if i >= len(ports) {
					return dst, fmt.Errorf("gpu: event %d matched port index %d of %d", k, i, len(ports))
				}
				ps = append(ps, ports[i])
			}
		}
		slices.Sort(ps)
		dst = append(dst, slices.Compact(ps))
	}
	return dst, nil
}

func trailingZeros(x uint32) int {
	n := 0
	for x&1 == 0 {
		x >>= 1
		n++
	}
	return n
}

var _ EventMatcher = CPUEventMatcher{}

// EventDevice is a matcher that holds a copy of a subscription table's
// device layout (pubsub.Device) and is kept up to date with its bubble
// updates: what gswitchd's event forwarding matches batches on
// (datapath/eventfwd.Hybrid). OpenEventDevice opens the CUDA one;
// LayoutDevice is its Go twin (no device).
type EventDevice interface {
	EventMatcher
	// Update applies u (a full image, or bubbles of the generation held)
	// and the layout's name table; batches matched after it returns see
	// it. It is not called concurrently with Match, unless the device
	// says it UpdatesLive (eventfwd.LiveDevice) and u is bubbles.
	Update(u bubble.Update, names map[string]uint32) error
	// Describe says how the device matches.
	Describe() string
	// MatchSlots is Match that also appends the slots of the filters
	// that decided each delivery (per event and port, one filter: for
	// pubsub.Table.CountSlots); complete is false when some were not
	// brought back.
	MatchSlots(evs []pubsub.Event, out [][]uint32, slots []uint32) (res [][]uint32, s []uint32, complete bool, err error)
}

// LayoutDevice is an EventDevice without a device: it keeps the image by
// applying the updates (bubble.Update.ApplyTo) and matches each event from
// the words alone (pubsub.EvalLayout, what the kernel computes). Tests use
// it to check the bubble path end to end without a GPU.
//
// Its updates are live (UpdatesLive): Update holds its lock exclusively
// and a batch holds it shared, so each batch sees one version of the words.
type LayoutDevice struct {
	mu    sync.RWMutex
	img   *bubble.Image
	names map[string]uint32
}

// UpdatesLive says that Update may run while batches are matched.
func (d *LayoutDevice) UpdatesLive() bool { return true }

// Name returns "layout".
func (d *LayoutDevice) Name() string { return "layout" }

// Describe says what it is.
func (d *LayoutDevice) Describe() string {
	d.mu.RLock()
	defer d.mu.RUnlock()
	n := 0
	if d.img != nil {
		n = d.img.Bytes()
	}
	return fmt.Sprintf("layout words in Go (pubsub.EvalLayout), %d bytes", n)
}

// Update applies u.
func (d *LayoutDevice) Update(u bubble.Update, names map[string]uint32) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := u.ApplyTo(&d.img); err != nil {
		return err
	}
	d.names = names
	return nil
}

// Match evaluates each event from the words.
func (d *LayoutDevice) Match(evs []pubsub.Event, out [][]uint32) ([][]uint32, error) {
	out, _, _, err := d.MatchSlots(evs, out, nil)
	return out, err
}

// MatchSlots evaluates each event from the words (pubsub.EvalLayoutAttrs),
// the first matching filter of each port deciding its delivery.
func (d *LayoutDevice) MatchSlots(evs []pubsub.Event, out [][]uint32, slots []uint32) ([][]uint32, []uint32, bool, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.img == nil {
		return out[:0], slots, false, fmt.Errorf("gpu: layout device: no image")
	}
	ports := d.img.Words[pubsub.RegionPorts]
	out = out[:0]
	for i := range evs {
		var ps []uint32
		pubsub.EvalLayoutAttrs(d.img, pubsub.LayoutAttrs(d.names, &evs[i]), func(slot, pi uint32) {
			if !slices.Contains(ps, ports[pi]) {
				ps = append(ps, ports[pi])
				slots = append(slots, slot)
			}
		})
		slices.Sort(ps)
		out = append(out, ps)
	}
	return out, slots, true, nil
}

// Close does nothing.
func (d *LayoutDevice) Close() error { return nil }

var _ EventDevice = (*LayoutDevice)(nil)

// The small-batch path's mode and times (its CUDA side:
// pubsub_small_cuda.go).

// SmallBatchEvents is the largest batch the small-batch path takes.
const SmallBatchEvents = 16

// SmallMode selects how the small-batch path brings a batch to the device.
type SmallMode int

// The small-batch path's modes.
const (
	SmallOff    SmallMode = iota // small batches go through the pooled batches
	SmallCopy                    // one copy in, launch, copy out
	SmallMapped                  // the kernel reads mapped host memory
	SmallFlag                    // copy in, launch; the kernel writes the answers to mapped host memory and raises a flag
	SmallGraph                   // SmallFlag's copy and launch as one CUDA graph launch
)

func (s SmallMode) String() string {
	switch s {
	case SmallOff:
		return "off"
	case SmallCopy:
		return "copy"
	case SmallMapped:
		return "mapped"
	case SmallFlag:
		return "flag"
	case SmallGraph:
		return "graph"
	}
	return fmt.Sprintf("SmallMode(%d)", int(s))
}

// ParseSmallMode parses "off", "copy", "mapped", "flag" or "graph".
func ParseSmallMode(s string) (SmallMode, error) {
	for _, m := range []SmallMode{SmallOff, SmallCopy, SmallMapped, SmallFlag, SmallGraph} {
		if m.String() == s {
			return m, nil
		}
	}
	return SmallOff, fmt.Errorf("gpu: small-batch mode %q: want off, copy, mapped, flag or graph", s)
}

// SmallModeEnv overrides the default small-batch mode, flag (H200 machine,
// 2026-11-26: one event 15.4–16.6 µs p50 against 19.8–20.6 µs with copy).
const SmallModeEnv = "GSWITCH_PUBSUB_SMALL"

func defaultSmallMode() SmallMode {
	if v := os.Getenv(SmallModeEnv); v != "" {
		if mode, err := ParseSmallMode(v); err == nil {
			return mode
		}
	}
	return SmallFlag
}

// SmallPath is what a matcher with a small-batch path (the CUDA one) also
// does: its mode, selected before matching, and the parts of its last
// call.
type SmallPath interface {
	SetSmallMode(SmallMode) error
	SmallMode() SmallMode
	// SetSmallSplits sets the blocks per event of small batches (0: the
	// matcher's rule, up to 64 for a single event).
	SetSmallSplits(n int) error
	SmallTimes() SmallTimes
	SmallError() error
}

// SmallTimes is one small-batch call's parts, in nanoseconds.
type SmallTimes struct {
	Encode, Queue, Wait, Decode int64
}

// decodeFlat is decodeInto with the events' ports in one allocation.
func decodeFlat(out [][]uint32, b *EventBatch, ports []uint32) error {
	n := 0
	for _, x := range b.Out[:b.N*b.PortWords] {
		n += bits.OnesCount32(x)
	}
	var flat []uint32
	if n > 0 {
		flat = make([]uint32, 0, n)
	}
	for k := 0; k < b.N; k++ {
		start := len(flat)
		for w := 0; w < b.PortWords; w++ {
			x := b.Out[k*b.PortWords+w]
			for x != 0 {
				i := w*32 + bits.TrailingZeros32(x)
				x &= x - 1
				if i >= len(ports) {
					return fmt.Errorf("gpu: event %d matched port index %d of %d", k, i, len(ports))
				}
				flat = append(flat, ports[i])
			}
		}
		ps := flat[start:len(flat):len(flat)]
		if len(ps) > 1 {
			sortSmall(ps)
			ps = compactSorted(ps)
		}
		if len(ps) == 0 {
			ps = nil
		}
		out[k] = ps
	}
	return nil
}

// sortSmall sorts a few ports (insertion sort).
func sortSmall(ps []uint32) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j] < ps[j-1]; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

func compactSorted(ps []uint32) []uint32 {
	n := 1
	for i := 1; i < len(ps); i++ {
		if ps[i] != ps[n-1] {
			ps[n] = ps[i]
			n++
		}
	}
	return ps[:n]
}
