package pubsub

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"

	"github.com/gswitch/gswitch/tables/bubble"
)

// The regions of the device image (see the package documentation).
const (
	RegionHeader bubble.Region = iota
	RegionNames
	RegionConstraints
	RegionStrings
	RegionFilters
	RegionPorts
	numRegions
)

var regionNames = []string{"header", "names", "constraints", "strings", "filters", "ports"}

// Header words.
const (
	HdrMagic       = 0
	HdrVersion     = 1
	HdrNames       = 2 // names in use
	HdrConstraints = 3 // constraint records in use
	HdrStringBytes = 4 // bytes of the strings region in use
	HdrFilters     = 5 // filter slots
	HdrPorts       = 6 // port indices
	HeaderWords    = 7
)

// Layout identification and record sizes.
const (
	LayoutMagic   = 0x47535053 // "GSPS"
	LayoutVersion = 1
	// ConstraintWords is the size of a constraint record.
	ConstraintWords = 3
	// MaxLayoutSlots is the most filter slots a layout can name (24 bits).
	MaxLayoutSlots = 1 << 24
)

// Layout is the device form of a table: the image, and the name table the
// CPU uses to select each event attribute's constraints (CCM selects by name
// on the CPU).
type Layout struct {
	Image *bubble.Image
	Names map[string]uint32
}

type layoutCons struct {
	slot uint32
	c    *Constraint
}

// Layout builds the table's device layout, with regions of exactly the
// sizes in use.
func (t *Table) Layout() *Layout {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.layoutLocked(nil)
}

// layoutLocked builds the layout; with caps, each region is at least
// caps[r] words (head-room), else exactly its size.
func (t *Table) layoutLocked(caps []int) *Layout {
	if len(t.info) > MaxLayoutSlots {
		panic(fmt.Sprintf("pubsub: %d filter slots do not fit the layout's 24 bits", len(t.info)))
	}
	byName := map[string][]layoutCons{}
	for _, sub := range t.subs {
		for fi, f := range sub.filters {
			for k := range f {
				byName[f[k].Name] = append(byName[f[k].Name], layoutCons{sub.slots[fi], &f[k]})
			}
		}
	}
	names := make([]string, 0, len(byName))
	strBytes := 0
	for n, cs := range byName {
		names = append(names, n)
		for _, lc := range cs {
			if lc.c.Value.Type == TypeString {
				strBytes += len(lc.c.Value.Str)
			}
		}
	}
	sort.Strings(names)
	sizes := []int{HeaderWords, 2 * len(names), ConstraintWords * t.constraints, (strBytes + 3) / 4, len(t.info), len(t.ports)}
	for r := range sizes {
		if caps != nil && caps[r] > sizes[r] {
			sizes[r] = caps[r]
		}
	}
	im := bubble.NewImage(regionNames, sizes)
	w := im.Words
	w[RegionHeader][HdrMagic] = LayoutMagic
	w[RegionHeader][HdrVersion] = LayoutVersion
	w[RegionHeader][HdrNames] = uint32(len(names))
	w[RegionHeader][HdrConstraints] = uint32(t.constraints)
	w[RegionHeader][HdrStringBytes] = uint32(strBytes)
	w[RegionHeader][HdrFilters] = uint32(len(t.info))
	w[RegionHeader][HdrPorts] = uint32(len(t.ports))
	l := &Layout{Image: im, Names: make(map[string]uint32, len(names))}
	cw, sw := w[RegionConstraints], w[RegionStrings]
	ci, sb := 0, 0
	for ni, n := range names {
		l.Names[n] = uint32(ni)
		cs := byName[n]
		slices.SortFunc(cs, func(a, b layoutCons) int { return int(a.slot) - int(b.slot) })
		w[RegionNames][2*ni] = uint32(ci)
		w[RegionNames][2*ni+1] = uint32(len(cs))
		for _, lc := range cs {
			v := lc.c.Value
			rec := cw[ci*ConstraintWords : (ci+1)*ConstraintWords]
			rec[0] = lc.slot<<8 | uint32(v.Type)<<4 | uint32(lc.c.Op)
			switch v.Type {
			case TypeInt, TypeBool:
				rec[1], rec[2] = uint32(v.Int), uint32(uint64(v.Int)>>32)
			case TypeFloat:
				b := math.Float64bits(v.Float)
				rec[1], rec[2] = uint32(b), uint32(b>>32)
			case TypeString:
				rec[1], rec[2] = uint32(sb), uint32(len(v.Str))
				for i := 0; i < len(v.Str); i++ {
					sw[(sb+i)/4] |= uint32(v.Str[i]) << (8 * ((sb + i) % 4))
				}
				sb += len(v.Str)
			}
			ci++
		}
	}
	for sl, in := range t.info {
		if in != 0 {
			w[RegionFilters][sl] = in&^0xff | uint32(len(t.meta[sl].filt))
		}
	}
	copy(w[RegionPorts], t.ports)
	return l
}

// EvalLayout matches an event using only the layout's words and its name
// table: what a kernel does. It returns the sorted matching ports; it
// assumes a well-formed layout (one built by Table.Layout).
func EvalLayout(l *Layout, e *Event) []uint32 {
	w := l.Image.Words
	cw, sw, fw := w[RegionConstraints], w[RegionStrings], w[RegionFilters]
	count := map[uint32]uint32{}
	for _, a := range e.Attrs {
		ni, ok := l.Names[a.Name]
		if !ok {
			continue
		}
		off, n := w[RegionNames][2*ni], w[RegionNames][2*ni+1]
		for i := off; i < off+n; i++ {
			rec := cw[i*ConstraintWords : (i+1)*ConstraintWords]
			c := Constraint{Op: Op(rec[0] & 15)}
			lo, hi := uint64(rec[1]), uint64(rec[2])
			switch t := Type(rec[0] >> 4 & 15); t {
			case TypeInt:
				c.Value = Int(int64(hi<<32 | lo))
			case TypeBool:
				c.Value = Bool(lo != 0)
			case TypeFloat:
				c.Value = Float(math.Float64frombits(hi<<32 | lo))
			case TypeString:
				b := make([]byte, hi)
				for k := range b {
					p := int(lo) + k
					b[k] = byte(sw[p/4] >> (8 * (p % 4)))
				}
				c.Value = Str(string(b))
			}
			if c.Eval(a.Value) {
				count[rec[0]>>8]++
			}
		}
	}
	var ports []uint32
	for s, n := range count {
		if in := fw[s]; n == in&0xff {
			ports = append(ports, w[RegionPorts][in>>8])
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports)
}

// Device keeps a table's device image in a bubble.Mirror: Update rebuilds
// the layout and writes it into the mirror word by word, so that a mirror
// receives bubbles for the words that changed only; regions have head-room
// (sizes rounded up to a power of two), and a table that outgrows them gets
// a new generation (a full image).
type Device struct {
	m     *bubble.Mirror
	names map[string]uint32
}

// NewDevice returns a device image of the table's current layout.
func NewDevice(t *Table) *Device {
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := t.layoutLocked(headroom(t.layoutLocked(nil).Image))
	return &Device{m: bubble.NewMirror(l.Image), names: l.Names}
}

func headroom(im *bubble.Image) []int {
	caps := make([]int, len(im.Words))
	for r, ws := range im.Words {
		if len(ws) > 0 {
			caps[r] = 1 << bits.Len(uint(len(ws)-1))
		}
	}
	return caps
}

// Mirror returns the device's mirror (for Sync).
func (d *Device) Mirror() *bubble.Mirror { return d.m }

// Layout returns the current layout (image and name table); callers must not
// write to it.
func (d *Device) Layout() *Layout { return &Layout{Image: d.m.Image(), Names: d.names} }

// Update brings the image up to date with the table and returns the update
// a mirror needs (bubble.Mirror.Sync).
func (d *Device) Update(t *Table) bubble.Update {
	t.mu.RLock()
	cur := d.m.Image()
	caps := make([]int, len(cur.Words))
	for r, ws := range cur.Words {
		caps[r] = len(ws)
	}
	l := t.layoutLocked(caps)
	t.mu.RUnlock()
	fits := true
	for r, ws := range l.Image.Words {
		fits = fits && len(ws) == caps[r]
	}
	if !fits {
		t.mu.RLock()
		l = t.layoutLocked(headroom(t.layoutLocked(nil).Image))
		t.mu.RUnlock()
		d.m.Replace(l.Image)
	} else {
		for r, ws := range l.Image.Words {
			for off, v := range ws {
				d.m.Set(bubble.Region(r), uint32(off), v)
			}
		}
	}
	d.names = l.Names
	return d.m.Sync()
}
