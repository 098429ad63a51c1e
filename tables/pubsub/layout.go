package pubsub

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gswitch/gswitch/tables/bubble"
)

// The regions of the device image (see the package documentation).
const (
	RegionHeader bubble.Region = iota
	RegionNames
	RegionAnchorSig
	RegionAnchorSlot
	RegionConstraints
	RegionStrings
	RegionFilters
	RegionPorts
	NumRegions
)

var regionNames = []string{"header", "names", "anchor-sig", "anchor-slot", "constraints", "strings", "filters", "ports"}

// Header words.
const (
	HdrMagic       = 0
	HdrVersion     = 1
	HdrNames       = 2 // name indices in use
	HdrAnchors     = 3 // anchor entries allocated (lists and their room)
	HdrConsWords   = 4 // constraint words allocated
	HdrStringBytes = 5 // bytes of the strings region in use
	HdrFilters     = 6 // filter slots
	HdrPorts       = 7 // port indices
	HeaderWords    = 8
)

// Layout identification and record sizes.
const (
	LayoutMagic   = 0x47535053 // "GSPS"
	LayoutVersion = 2
	// FilterWords is the size of a filter slot's record: the offset of its
	// constraint records, port index<<8 | number of constraints.
	FilterWords = 2
	// MaxLayoutSlots is the most filter slots a layout can name.
	MaxLayoutSlots = 1 << 24
	// MaxLayoutNames is the most names a layout can number (24 bits).
	MaxLayoutNames = 1 << 24
	// ShortRecord marks a constraint record of 2 words (bit 7 of word 0).
	ShortRecord = 0x80
)

// Head-room of a device image: the anchor, constraint and filter regions
// get 1/HeadroomDiv of their size, at least HeadroomMin (1,024) words, beyond what
// is in use, and each name's anchor list 1/8 of its length (at least 2
// entries); names and strings half again (at least 1,024 names, 64 KB),
// ports a quarter (at least 32). A change that does not fit the room costs
// one full image (a new generation, compacted).
const (
	HeadroomDiv = 16
	HeadroomMin = 1024
)

// NameBit is the bit of the 64-bit name signature that name index ni sets.
func NameBit(ni uint32) uint64 { return 1 << (ni & 63) }

// Layout is the device form of a table: the image, and the name table the
// CPU uses to turn each event attribute's name into a name index.
type Layout struct {
	Image *bubble.Image
	Names map[string]uint32
}

// Layout builds the table's device layout (with the head-room a Device
// keeps).
func (t *Table) Layout() *Layout {
	return NewDevice(t).Layout()
}

// Device keeps a table's device image in a bubble.Mirror and brings it up
// to date change by change: Update writes the filter slots the table
// changed since the previous Update (Table's slot log) into the image
// through the mirror, so a mirror receives bubbles for those words only.
// A change that does not fit the head-room (a region full, a slot past the
// filters region, a name past the names region) builds a new generation
// (a full image, compacted, with fresh head-room).
//
// Device is not safe for concurrent use: one goroutine (the subscription
// service's barrier) calls Update; it takes the table's read lock.
type Device struct {
	m     *bubble.Mirror
	names map[string]uint32 // copy-on-write: a new map when a name is added
	nameN int
	lists []alist // per name index
	// Allocation state of the image.
	anchors, anchorCap int
	cons               int
	freeCons           map[uint32][]uint32 // record words -> free offsets
	strs               map[string]uint32   // interned strings: byte offset
	strUsed            int
	nports             int
	slots              []dslot
	seq                uint64 // the table's slot log, consumed up to here
	direct             [][]uint32
	// Rebuilds counts the full images built (NewDevice's first included).
	Rebuilds int
	// BuildTime is how long the latest full image took to build.
	BuildTime time.Duration
}

// alist is a name's anchor list: entries [off, off+n) of the anchor
// regions, room for cap.
type alist struct{ off, n, cap uint32 }

// dslot is what the image holds of a filter slot.
type dslot struct {
	filt     Filter // nil: empty
	pi       uint32
	anchor   uint32 // name index of its anchor list
	pos      uint32 // entry within the list
	coff, cw uint32 // constraint records: word offset and words
}

// NewDevice returns a device image of the table's current layout.
func NewDevice(t *Table) *Device {
	t.mu.RLock()
	defer t.mu.RUnlock()
	d := &Device{}
	d.build(t)
	return d
}

// Mirror returns the device's mirror (for Sync).
func (d *Device) Mirror() *bubble.Mirror { return d.m }

// Layout returns the current layout (image and name table); callers must
// not write to either.
func (d *Device) Layout() *Layout { return &Layout{Image: d.m.Image(), Names: d.names} }

// Update brings the image up to date with the table and returns the update
// a mirror needs (bubble.Mirror.Sync).
func (d *Device) Update(t *Table) bubble.Update {
	t.mu.RLock()
	if !d.apply(t) {
		d.build(t)
	}
	t.mu.RUnlock()
	return d.m.Sync()
}

func (d *Device) set(r bubble.Region, off uint32, v uint32) {
	if d.direct != nil {
		d.direct[r][off] = v
		return
	}
	d.m.Set(r, off, v)
}

func (d *Device) get(r bubble.Region, off uint32) uint32 {
	if d.direct != nil {
		return d.direct[r][off]
	}
	return d.m.Get(r, off)
}

func (d *Device) region(r bubble.Region) int {
	if d.direct != nil {
		return len(d.direct[r])
	}
	return len(d.m.Words(r))
}

func room(n int) int { return n + max(n/HeadroomDiv, HeadroomMin) }

// build makes a new generation from the table (t.mu held): names numbered
// in sorted order, each filter anchored on the name of its constraints
// whose list is shortest so far, lists and records written in slot order.
func (d *Device) build(t *Table) {
	t0 := time.Now()
	defer func() { d.BuildTime = time.Since(t0) }()
	if len(t.info) > MaxLayoutSlots {
		panic(fmt.Sprintf("pubsub: %d filter slots do not fit the layout", len(t.info)))
	}
	fp := firstPass(t)
	names, nameList, count := fp.names, fp.nameList, fp.count
	strs, strBytes, consWords := fp.strs, fp.strBytes, fp.consWords
	entries := 0
	d.lists = make([]alist, len(nameList))
	for i, n := range count {
		c := n + max(n/8, 2)
		d.lists[i] = alist{off: uint32(entries), cap: c}
		entries += int(c)
	}
	d.anchors = entries
	d.anchorCap = room(entries)
	// Names and strings are cheap and new ones come with new
	// subscriptions: room for half as many again, at least 1,024 names and
	// 64 KB of strings; ports a quarter, at least 32 (a port word per 32
	// in every event's answer).
	nn, sw := len(nameList), (strBytes+3)/4
	sizes := []int{HeaderWords, 2 * (nn + max(nn/2, 1024)), 2 * d.anchorCap, d.anchorCap, room(consWords),
		sw + max(sw/2, 16<<10), room(FilterWords * len(t.info)), len(t.ports) + max(len(t.ports)/4, 32)}
	im := bubble.NewImage(regionNames, sizes)
	d.direct = im.Words
	d.names, d.nameN = names, len(nameList)
	d.cons, d.freeCons = 0, map[uint32][]uint32{}
	d.strs, d.strUsed = strs, strBytes
	d.nports = 0
	d.slots = make([]dslot, len(t.info))
	w := im.Words
	for i, l := range d.lists {
		w[RegionNames][2*i] = l.off
	}
	sb := make([]byte, 4*len(w[RegionStrings]))
	for str, off := range strs {
		copy(sb[off:], str)
	}
	for i := range w[RegionStrings] {
		w[RegionStrings][i] = uint32(sb[4*i]) | uint32(sb[4*i+1])<<8 | uint32(sb[4*i+2])<<16 | uint32(sb[4*i+3])<<24
	}
	d.writeSlots(t, &fp)
	d.writePorts(t)
	d.direct = nil
	d.header(im.Words[RegionHeader], len(t.info), len(t.ports))
	if d.m == nil {
		d.m = bubble.NewMirror(im)
	} else {
		d.m.Replace(im)
	}
	d.seq = t.logBase + uint64(len(t.slotLog))
	d.Rebuilds++
}

func (d *Device) header(h []uint32, slots, ports int) {
	v := []uint32{LayoutMagic, LayoutVersion, uint32(d.nameN), uint32(d.anchors), uint32(d.cons), uint32(d.strUsed),
		uint32(slots), uint32(ports)}
	for i, x := range v {
		if h != nil {
			h[i] = x
		} else {
			d.m.Set(RegionHeader, uint32(i), x)
		}
	}
}

func (d *Device) writePorts(t *Table) bool {
	if len(t.ports) > d.region(RegionPorts) {
		return false
	}
	for i := d.nports; i < len(t.ports); i++ {
		d.set(RegionPorts, uint32(i), t.ports[i])
	}
	d.nports = len(t.ports)
	return true
}

// apply writes the slots the table changed since the previous Update;
// false when they do not fit (the caller builds a new generation).
func (d *Device) apply(t *Table) bool {
	if FilterWords*len(t.info) > d.region(RegionFilters) || !d.writePorts(t) {
		return false
	}
	if n := len(t.info); n > len(d.slots) {
		d.slots = append(d.slots, make([]dslot, n-len(d.slots))...)
	}
	end := t.logBase + uint64(len(t.slotLog))
	if d.seq >= t.logBase && d.seq <= end {
		for _, s := range t.slotLog[d.seq-t.logBase:] {
			if !d.syncSlot(t, s) {
				return false
			}
		}
	} else { // the log was trimmed past us: compare every slot
		for s := range d.slots {
			if !d.syncSlot(t, uint32(s)) {
				return false
			}
		}
	}
	d.seq = end
	d.header(nil, len(t.info), len(t.ports))
	return true
}

func sameFilter(a, b Filter) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

func (d *Device) syncSlot(t *Table, s uint32) bool {
	var f Filter
	var pi uint32
	if int(s) < len(t.info) && t.info[s] != 0 {
		f, pi = t.meta[s].filt, t.info[s]>>8
	}
	ds := &d.slots[s]
	if sameFilter(ds.filt, f) && (f == nil || ds.pi == pi) {
		return true
	}
	if ds.filt != nil {
		d.removeSlot(s)
	}
	if f == nil {
		return true
	}
	best, ok := uint32(0), false
	for k := range f {
		ni, have := d.names[f[k].Name]
		if !have {
			if ni, have = d.addName(f[k].Name); !have {
				return false
			}
		}
		if !ok || d.lists[ni].n < d.lists[best].n {
			best, ok = ni, true
		}
	}
	return d.addSlot(s, f, pi, best)
}

// addName numbers a new name (the names map is copied: the previous one
// may be held by a matcher).
func (d *Device) addName(name string) (uint32, bool) {
	ni := uint32(d.nameN)
	if 2*(d.nameN+1) > d.region(RegionNames) || d.nameN >= MaxLayoutNames {
		return 0, false
	}
	nm := make(map[string]uint32, len(d.names)+1)
	for k, v := range d.names {
		nm[k] = v
	}
	nm[name] = ni
	d.names = nm
	d.nameN++
	d.lists = append(d.lists, alist{})
	return ni, true
}

func shortValue(v Value) bool {
	switch v.Type {
	case TypeInt:
		return v.Int >= math.MinInt32 && v.Int <= math.MaxInt32
	case TypeBool, TypeString:
		return true
	}
	return false
}

// addSlot writes filter f of port index pi into slot s, anchored on name
// index anchor; false when a region is full.
func (d *Device) addSlot(s uint32, f Filter, pi, anchor uint32) bool {
	ids := make([]uint32, len(f))
	soffs := make([]uint32, len(f))
	for k := range f {
		c := &f[k]
		ni, ok := d.names[c.Name]
		if !ok {
			if ni, ok = d.addName(c.Name); !ok {
				return false
			}
		}
		ids[k] = ni
		if c.Value.Type == TypeString {
			if soffs[k], ok = d.intern(c.Value.Str); !ok {
				return false
			}
		}
	}
	return d.addSlotIDs(s, f, pi, anchor, ids, soffs)
}

// addSlotIDs is addSlot with each constraint's name index and (a string)
// offset in the strings region known.
func (d *Device) addSlotIDs(s uint32, f Filter, pi, anchor uint32, ids, soffs []uint32) bool {
	var sig uint64
	words := uint32(0)
	for k := range f {
		c := &f[k]
		sig |= NameBit(ids[k])
		if c.Value.Type == TypeString && soffs[k] < 1<<24 || c.Value.Type != TypeString && shortValue(c.Value) {
			words += 2
		} else {
			words += 3
		}
	}
	coff, ok := d.allocCons(words)
	if !ok {
		return false
	}
	d.writeCons(coff, f, ids, soffs)
	pos, ok := d.appendAnchor(anchor, s, sig)
	if !ok {
		return false
	}
	d.set(RegionFilters, FilterWords*s, coff)
	d.set(RegionFilters, FilterWords*s+1, pi<<8|uint32(len(f)))
	d.slots[s] = dslot{filt: f, pi: pi, anchor: anchor, pos: pos, coff: coff, cw: words}
	return true
}

// consWords is the record words of filter f's constraints (with their
// strings' offsets soffs).
func consWords(f Filter, soffs []uint32) uint32 {
	words := uint32(0)
	for k := range f {
		c := &f[k]
		if c.Value.Type == TypeString && soffs[k] < 1<<24 || c.Value.Type != TypeString && shortValue(c.Value) {
			words += 2
		} else {
			words += 3
		}
	}
	return words
}

// writeSlot writes slot sl's records into the direct regions of a bulk
// build: its constraints (ids and soffs, the filter's name ids and string
// offsets), its place in its anchor's list with the filter's name
// signature, and its filter record. Slots write disjoint words, so several
// goroutines may write different slots at once.
func (d *Device) writeSlot(sl int, ds *dslot, ids, soffs []uint32) {
	f := ds.filt
	var sig uint64
	for _, ni := range ids {
		sig |= NameBit(ni)
	}
	d.writeCons(ds.coff, f, ids, soffs)
	e := d.lists[ds.anchor].off + ds.pos
	d.direct[RegionAnchorSlot][e] = uint32(sl)
	d.direct[RegionAnchorSig][2*e] = uint32(sig)
	d.direct[RegionAnchorSig][2*e+1] = uint32(sig >> 32)
	d.direct[RegionFilters][FilterWords*sl] = ds.coff
	d.direct[RegionFilters][FilterWords*sl+1] = ds.pi<<8 | uint32(len(f))
}

// writeCons writes filter f's constraint records from word o on.
func (d *Device) writeCons(o uint32, f Filter, ids, soffs []uint32) {
	for k := range f {
		c := &f[k]
		v := c.Value
		w0 := ids[k]<<8 | uint32(v.Type)<<4 | uint32(c.Op)
		var w1, w2 uint32
		short := true
		switch v.Type {
		case TypeInt, TypeBool:
			w1, w2 = uint32(v.Int), uint32(uint64(v.Int)>>32)
			short = shortValue(v)
		case TypeFloat:
			b := math.Float64bits(v.Float)
			w1, w2, short = uint32(b), uint32(b>>32), false
		case TypeString:
			off := soffs[k]
			if off < 1<<24 {
				w1 = off<<8 | uint32(len(v.Str))
			} else {
				w1, w2, short = off, uint32(len(v.Str)), false
			}
		}
		if short {
			d.set(RegionConstraints, o, w0|ShortRecord)
			d.set(RegionConstraints, o+1, w1)
			o += 2
		} else {
			d.set(RegionConstraints, o, w0)
			d.set(RegionConstraints, o+1, w1)
			d.set(RegionConstraints, o+2, w2)
			o += 3
		}
	}
}

// writeSlots writes every live slot of a fresh build (d.direct set, the
// anchor lists empty and roomy, no free constraint words): records at
// offsets handed out in slot order and anchor entries at positions in
// slot order — what addSlotIDs does slot after slot — fixed in one
// sequential pass, then the words written by several goroutines, each on
// its own slots.
func (d *Device) writeSlots(t *Table, fp *passResult) {
	anchorOf, ids, soffs := fp.anchorOf, fp.ids, fp.soffs
	w := workers(len(t.info), parMin)
	if w > 1 && fp.slotCW != nil {
		d.writeSlotsPar(t, fp, w)
		return
	}
	if w == 1 {
		j := 0
		for sl, in := range t.info {
			if in == 0 {
				continue
			}
			f := t.meta[sl].filt
			if !d.addSlotIDs(uint32(sl), f, in>>8, anchorOf[sl], ids[j:j+len(f)], soffs[j:j+len(f)]) {
				panic("pubsub: a fresh device layout has no room for its own filters")
			}
			j += len(f)
		}
		return
	}
	first := make([]uint32, len(t.info)) // each slot's first constraint in ids
	j := uint32(0)
	for sl, in := range t.info {
		if in == 0 {
			continue
		}
		f := t.meta[sl].filt
		first[sl] = j
		cw := consWords(f, soffs[j:int(j)+len(f)])
		coff, ok := d.allocCons(cw)
		l := &d.lists[anchorOf[sl]]
		if !ok || l.n == l.cap {
			panic("pubsub: a fresh device layout has no room for its own filters")
		}
		d.slots[sl] = dslot{filt: f, pi: in >> 8, anchor: anchorOf[sl], pos: l.n, coff: coff, cw: cw}
		l.n++
		j += uint32(len(f))
	}
	parallelRanges(len(t.info), w, func(lo, hi int) {
		for sl := lo; sl < hi; sl++ {
			ds := &d.slots[sl]
			if ds.filt == nil {
				continue
			}
			n := len(ds.filt)
			d.writeSlot(sl, ds, ids[first[sl]:int(first[sl])+n], soffs[first[sl]:int(first[sl])+n])
		}
	})
	for ni, l := range d.lists {
		d.direct[RegionNames][2*ni+1] = l.n
	}
}

// removeSlot takes slot s out: its anchor entry (the list's last entry
// takes its place), its record, its constraint words (to the free list of
// their size).
func (d *Device) removeSlot(s uint32) {
	ds := d.slots[s]
	l := &d.lists[ds.anchor]
	last := l.n - 1
	if ds.pos != last {
		from, to := l.off+last, l.off+ds.pos
		moved := d.get(RegionAnchorSlot, from)
		d.set(RegionAnchorSlot, to, moved)
		d.set(RegionAnchorSig, 2*to, d.get(RegionAnchorSig, 2*from))
		d.set(RegionAnchorSig, 2*to+1, d.get(RegionAnchorSig, 2*from+1))
		d.slots[moved].pos = ds.pos
	}
	e := l.off + last
	d.set(RegionAnchorSlot, e, 0)
	d.set(RegionAnchorSig, 2*e, 0)
	d.set(RegionAnchorSig, 2*e+1, 0)
	l.n--
	d.set(RegionNames, 2*ds.anchor+1, l.n)
	d.set(RegionFilters, FilterWords*s, 0)
	d.set(RegionFilters, FilterWords*s+1, 0)
	d.freeCons[ds.cw] = append(d.freeCons[ds.cw], ds.coff)
	d.slots[s] = dslot{}
}

func (d *Device) appendAnchor(ni, s uint32, sig uint64) (uint32, bool) {
	l := &d.lists[ni]
	if l.n == l.cap {
		c := 2*l.cap + 4
		if d.anchors+int(c) > d.anchorCap {
			return 0, false
		}
		off := uint32(d.anchors)
		for i := uint32(0); i < l.n; i++ {
			from, to := l.off+i, off+i
			d.set(RegionAnchorSlot, to, d.get(RegionAnchorSlot, from))
			d.set(RegionAnchorSig, 2*to, d.get(RegionAnchorSig, 2*from))
			d.set(RegionAnchorSig, 2*to+1, d.get(RegionAnchorSig, 2*from+1))
		}
		d.anchors += int(c)
		l.off, l.cap = off, c
		d.set(RegionNames, 2*ni, off)
	}
	e := l.off + l.n
	d.set(RegionAnchorSlot, e, s)
	d.set(RegionAnchorSig, 2*e, uint32(sig))
	d.set(RegionAnchorSig, 2*e+1, uint32(sig>>32))
	pos := l.n
	l.n++
	d.set(RegionNames, 2*ni+1, l.n)
	return pos, true
}

func (d *Device) allocCons(words uint32) (uint32, bool) {
	if fl := d.freeCons[words]; len(fl) > 0 {
		off := fl[len(fl)-1]
		d.freeCons[words] = fl[:len(fl)-1]
		return off, true
	}
	if d.cons+int(words) > d.region(RegionConstraints) {
		return 0, false
	}
	off := uint32(d.cons)
	d.cons += int(words)
	return off, true
}

// intern returns the byte offset of s in the strings region, writing it
// there the first time (strings stay until the next generation).
func (d *Device) intern(s string) (uint32, bool) {
	if off, ok := d.strs[s]; ok {
		return off, true
	}
	if d.strUsed+len(s) > 4*d.region(RegionStrings) {
		return 0, false
	}
	off := uint32(d.strUsed)
	for i := 0; i < len(s); i++ {
		p := off + uint32(i)
		d.set(RegionStrings, p/4, d.get(RegionStrings, p/4)|uint32(s[i])<<(8*(p%4)))
	}
	d.strUsed += len(s)
	d.strs[s] = off
	return off, true
}

// LayoutAttr is an event attribute as the kernel sees it: its name index,
// type and value words (a string: its bytes).
type LayoutAttr struct {
	Name, Type, Lo, Hi uint32
	Str                []byte
}

// LayoutAttrs turns an event into the attributes a kernel matches: those
// whose name the layout numbers, the first of each name (as Event.Get).
func LayoutAttrs(names map[string]uint32, e *Event) []LayoutAttr {
	var out []LayoutAttr
	for i, a := range e.Attrs {
		ni, ok := names[a.Name]
		if !ok || slices.IndexFunc(e.Attrs[:i], func(x Attr) bool { return x.Name == a.Name }) >= 0 {
			continue
		}
		r := LayoutAttr{Name: ni, Type: uint32(a.Value.Type)}
		switch a.Value.Type {
		case TypeInt, TypeBool:
			r.Lo, r.Hi = uint32(a.Value.Int), uint32(uint64(a.Value.Int)>>32)
		case TypeFloat:
			b := math.Float64bits(a.Value.Float)
			r.Lo, r.Hi = uint32(b), uint32(b>>32)
		case TypeString:
			r.Str, r.Hi = []byte(a.Value.Str), uint32(len(a.Value.Str))
		default:
			continue
		}
		out = append(out, r)
	}
	return out
}

// EvalLayout matches an event using only the layout's words and its name
// table: what the kernel does. It returns the sorted matching ports; it
// assumes a well-formed layout (one a Device built).
func EvalLayout(l *Layout, e *Event) []uint32 {
	w := l.Image.Words
	var ports []uint32
	EvalLayoutAttrs(l.Image, LayoutAttrs(l.Names, e), func(slot, pi uint32) {
		ports = append(ports, w[RegionPorts][pi])
	})
	slices.Sort(ports)
	return slices.Compact(ports)
}

// EvalLayoutAttrs is the kernel pubsub_match over one event's attributes:
// the event's signature (NameBit of each attribute's name), each
// attribute's anchor list scanned for entries whose signature the event's
// covers, and those filters evaluated constraint by constraint. It calls
// match with the slot and port index of every filter that matched.
func EvalLayoutAttrs(im *bubble.Image, attrs []LayoutAttr, match func(slot, pi uint32)) {
	w := im.Words
	var sig uint64
	for _, a := range attrs {
		sig |= NameBit(a.Name)
	}
	nw, as, asl, fw := w[RegionNames], w[RegionAnchorSig], w[RegionAnchorSlot], w[RegionFilters]
	for _, a := range attrs {
		off, n := nw[2*a.Name], nw[2*a.Name+1]
		for e := off; e < off+n; e++ {
			fs := uint64(as[2*e+1])<<32 | uint64(as[2*e])
			if fs&^sig != 0 {
				continue
			}
			s := asl[e]
			if ok, pi := evalFilter(w, fw[FilterWords*s], fw[FilterWords*s+1], attrs); ok {
				match(s, pi)
			}
		}
	}
}

// evalFilter evaluates the records of one filter against the event.
func evalFilter(w [][]uint32, coff, info uint32, attrs []LayoutAttr) (bool, uint32) {
	cw := w[RegionConstraints]
	o := coff
	for k := uint32(0); k < info&0xff; k++ {
		c0 := cw[o]
		ct, op := c0>>4&7, c0&15
		var c1, c2 uint32
		if c0&ShortRecord != 0 {
			c1 = cw[o+1]
			switch ct {
			case uint32(TypeString):
				c1, c2 = cw[o+1]>>8, cw[o+1]&255
			default:
				c2 = uint32(int32(c1) >> 31)
			}
			o += 2
		} else {
			c1, c2 = cw[o+1], cw[o+2]
			o += 3
		}
		ni := c0 >> 8
		i := slices.IndexFunc(attrs, func(a LayoutAttr) bool { return a.Name == ni })
		if i < 0 || !evalWords(w[RegionStrings], ct, op, c1, c2, &attrs[i]) {
			return false, 0
		}
	}
	return true, info >> 8
}

func cls(t uint32) uint32 {
	if t == uint32(TypeFloat) {
		return uint32(TypeInt)
	}
	return t
}

func asFloat(t, lo, hi uint32) float64 {
	v := uint64(hi)<<32 | uint64(lo)
	if t == uint32(TypeInt) {
		return float64(int64(v))
	}
	return math.Float64frombits(v)
}

// evalWords is the kernel's eval: constraint (type ct, op, value words c1,
// c2; a string: offset and length in the strings region) against a.
func evalWords(sw []uint32, ct, op, c1, c2 uint32, a *LayoutAttr) bool {
	if cls(a.Type) != cls(ct) {
		return false
	}
	if cls(ct) == uint32(TypeString) {
		y := make([]byte, c2)
		for k := range y {
			p := c1 + uint32(k)
			y[k] = byte(sw[p/4] >> (8 * (p % 4)))
		}
		x := a.Str
		switch Op(op) {
		case OpPrefix:
			return bytes.HasPrefix(x, y)
		case OpSuffix:
			return bytes.HasSuffix(x, y)
		case OpContains:
			return bytes.Contains(x, y)
		}
		return cmpOp(op, bytes.Compare(x, y))
	}
	var r int
	if cls(a.Type) == uint32(TypeInt) && !(a.Type == uint32(TypeInt) && ct == uint32(TypeInt)) {
		x, y := asFloat(a.Type, a.Lo, a.Hi), asFloat(ct, c1, c2)
		r = 0
		if x < y {
			r = -1
		} else if x > y {
			r = 1
		}
	} else {
		x, y := int64(uint64(a.Hi)<<32|uint64(a.Lo)), int64(uint64(c2)<<32|uint64(c1))
		r = int64Cmp(x, y)
	}
	return cmpOp(op, r)
}

func cmpOp(op uint32, r int) bool {
	switch Op(op) {
	case OpEq:
		return r == 0
	case OpNe:
		return r != 0
	case OpLt:
		return r < 0
	case OpLe:
		return r <= 0
	case OpGt:
		return r > 0
	case OpGe:
		return r >= 0
	}
	return false
}

// passResult is the layout build's first pass: the names (numbered in
// sorted order) and their list, each name's anchored filters, each
// constraint's name index and string offset (in slot order), each slot's
// anchor name, the interned strings and the record words.
type passResult struct {
	names               map[string]uint32
	nameList            []string // by provisional (first seen) number
	count               []uint32 // per name index: filters anchored
	ids, soffs          []uint32
	anchorOf            []uint32
	strs                map[string]uint32
	strBytes, consWords int
	// Per slot, from the parallel pass (nil from the sequential one): its
	// record words, its constraint records' offset (handed out in slot
	// order), its first constraint in ids and its entry in its anchor
	// list — what writeSlots' sequential pass fixes, for writeSlotsPar.
	slotCW, slotCoff, slotFirst, slotPos []uint32
	totalCons                            int
}

// firstPass is the build's first pass, over the cores where the table is
// large (firstPassPar).
func firstPass(t *Table) passResult {
	if w := workers(len(t.info), parMin); w > 1 {
		return firstPassPar(t, w)
	}
	return firstPassSeq(t)
}

// firstPassSeq is the first pass on one goroutine.
func firstPassSeq(t *Table) passResult {
	// One pass over the constraints (their memory is walked twice in
	// all: here and when the records are written) numbers the names
	// provisionally (first seen) and the strings, keeps each constraint's
	// name and string offset, counts the record words and anchors each
	// filter on the name whose list is shortest so far; the names are then
	// renumbered in sorted order.
	prov := map[string]uint32{}
	var nameList []string
	var count []uint32 // per provisional name: filters anchored
	ids := make([]uint32, 0, t.constraints)
	soffs := make([]uint32, 0, t.constraints)
	anchorOf := make([]uint32, len(t.info))
	strs := map[string]uint32{}
	strBytes, consWords := 0, 0
	lastName, lastID := "", uint32(0)
	for sl, in := range t.info {
		if in == 0 {
			continue
		}
		f := t.meta[sl].filt
		j := len(ids)
		for k := range f {
			c := &f[k]
			id := lastID
			if c.Name != lastName || len(ids) == 0 {
				var ok bool
				if id, ok = prov[c.Name]; !ok {
					id = uint32(len(nameList))
					prov[c.Name] = id
					nameList = append(nameList, c.Name)
					count = append(count, 0)
				}
				lastName, lastID = c.Name, id
			}
			ids = append(ids, id)
			so, w := uint32(0), 2
			switch {
			case c.Value.Type == TypeString:
				var ok bool
				if so, ok = strs[c.Value.Str]; !ok {
					so = uint32(strBytes)
					strs[c.Value.Str] = so
					strBytes += len(c.Value.Str)
				}
				if so >= 1<<24 {
					w = 3
				}
			case !shortValue(c.Value):
				w = 3
			}
			soffs = append(soffs, so)
			consWords += w
		}
		best := ids[j]
		for _, ni := range ids[j+1:] {
			if count[ni] < count[best] {
				best = ni
			}
		}
		anchorOf[sl] = best
		count[best]++
	}
	order := make([]uint32, len(nameList))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(nameList[a], nameList[b]) })
	renum := make([]uint32, len(nameList))
	names := make(map[string]uint32, len(nameList))
	for ni, p := range order {
		renum[p] = uint32(ni)
		names[nameList[p]] = uint32(ni)
	}
	for i, id := range ids {
		ids[i] = renum[id]
	}
	for sl, in := range t.info {
		if in != 0 {
			anchorOf[sl] = renum[anchorOf[sl]]
		}
	}
	provCount := count
	count = make([]uint32, len(nameList))
	for p, n := range provCount {
		count[renum[p]] = n
	}
	return passResult{names: names, nameList: nameList, count: count, ids: ids, soffs: soffs, anchorOf: anchorOf,
		strs: strs, strBytes: strBytes, consWords: consWords}
}
