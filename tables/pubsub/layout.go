package pubsub

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

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

// Head-room of a device image (NewDevice, and a new generation when the
// table outgrows the old one): each region gets 1/HeadroomDiv of its size,
// at least HeadroomMin words, beyond what is in use. A table that grows
// past it costs one full image; a power-of-two rounding would double the
// device memory of a large table for little gain.
const (
	HeadroomDiv = 16
	HeadroomMin = 64
)

// Layout is the device form of a table: the image, and the name table the
// CPU uses to select each event attribute's constraints (CCM selects by name
// on the CPU).
type Layout struct {
	Image *bubble.Image
	Names map[string]uint32
}

// Layout builds the table's device layout, with regions of exactly the
// sizes in use.
func (t *Table) Layout() *Layout {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.layoutLocked(nil, false)
}

// layoutLocked builds the layout in two passes over the filter slots in
// order: the first numbers the names and counts each name's records and
// string bytes, the second writes every record at its name's cursor (so
// that a name's records come out in slot order without sorting). With caps,
// each region is at least caps[r] words; with room, each region gets
// head-room (HeadroomDiv, HeadroomMin).
func (t *Table) layoutLocked(caps []int, room bool) *Layout {
	if len(t.info) > MaxLayoutSlots {
		panic(fmt.Sprintf("pubsub: %d filter slots do not fit the layout's 24 bits", len(t.info)))
	}
	type nameAcc struct {
		name        string
		recs, bytes int
		rec, str    int // cursors of the second pass
	}
	nid := make(map[string]uint32, len(t.names))
	var acc []nameAcc
	ids := make([]uint32, 0, t.constraints) // per record, in slot order: its name's number
	last, lastID := "", uint32(0)
	for sl, in := range t.info {
		if in == 0 {
			continue
		}
		f := t.meta[sl].filt
		for k := range f {
			c := &f[k]
			id := lastID
			if c.Name != last || len(ids) == 0 {
				var ok bool
				if id, ok = nid[c.Name]; !ok {
					id = uint32(len(acc))
					nid[c.Name] = id
					acc = append(acc, nameAcc{name: c.Name})
				}
				last, lastID = c.Name, id
			}
			ids = append(ids, id)
			acc[id].recs++
			if c.Value.Type == TypeString {
				acc[id].bytes += len(c.Value.Str)
			}
		}
	}
	order := make([]uint32, len(acc))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(acc[a].name, acc[b].name) })
	strBytes := 0
	for _, a := range acc {
		strBytes += a.bytes
	}
	sizes := []int{HeaderWords, 2 * len(acc), ConstraintWords * len(ids), (strBytes + 3) / 4, len(t.info), len(t.ports)}
	for r := range sizes {
		if caps != nil && caps[r] > sizes[r] {
			sizes[r] = caps[r]
		}
		if room {
			sizes[r] += max(sizes[r]/HeadroomDiv, HeadroomMin)
		}
	}
	im := bubble.NewImage(regionNames, sizes)
	w := im.Words
	w[RegionHeader][HdrMagic] = LayoutMagic
	w[RegionHeader][HdrVersion] = LayoutVersion
	w[RegionHeader][HdrNames] = uint32(len(acc))
	w[RegionHeader][HdrConstraints] = uint32(len(ids))
	w[RegionHeader][HdrStringBytes] = uint32(strBytes)
	w[RegionHeader][HdrFilters] = uint32(len(t.info))
	w[RegionHeader][HdrPorts] = uint32(len(t.ports))
	l := &Layout{Image: im, Names: make(map[string]uint32, len(acc))}
	ci, sb := 0, 0
	for ni, id := range order {
		a := &acc[id]
		l.Names[a.name] = uint32(ni)
		w[RegionNames][2*ni] = uint32(ci)
		w[RegionNames][2*ni+1] = uint32(a.recs)
		a.rec, a.str = ci, sb
		ci += a.recs
		sb += a.bytes
	}
	cw, sw := w[RegionConstraints], w[RegionStrings]
	sbuf := make([]byte, 4*len(sw))
	j := 0
	for sl, in := range t.info {
		if in == 0 {
			continue
		}
		f := t.meta[sl].filt
		for k := range f {
			c := &f[k]
			a := &acc[ids[j]]
			j++
			v := c.Value
			rec := cw[a.rec*ConstraintWords : (a.rec+1)*ConstraintWords : (a.rec+1)*ConstraintWords]
			a.rec++
			rec[0] = uint32(sl)<<8 | uint32(v.Type)<<4 | uint32(c.Op)
			switch v.Type {
			case TypeInt, TypeBool:
				rec[1], rec[2] = uint32(v.Int), uint32(uint64(v.Int)>>32)
			case TypeFloat:
				b := math.Float64bits(v.Float)
				rec[1], rec[2] = uint32(b), uint32(b>>32)
			case TypeString:
				rec[1], rec[2] = uint32(a.str), uint32(len(v.Str))
				a.str += copy(sbuf[a.str:], v.Str)
			}
		}
		w[RegionFilters][sl] = in&^0xff | uint32(len(f))
	}
	for i := range sw {
		sw[i] = binary.LittleEndian.Uint32(sbuf[4*i:])
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
// (a sixteenth of their size), and a table that outgrows them gets a new
// generation (a full image).
type Device struct {
	m     *bubble.Mirror
	names map[string]uint32
}

// NewDevice returns a device image of the table's current layout.
func NewDevice(t *Table) *Device {
	t.mu.RLock()
	defer t.mu.RUnlock()
	l := t.layoutLocked(nil, true)
	return &Device{m: bubble.NewMirror(l.Image), names: l.Names}
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
	l := t.layoutLocked(caps, false)
	t.mu.RUnlock()
	fits := true
	for r, ws := range l.Image.Words {
		fits = fits && len(ws) == caps[r]
	}
	if !fits {
		t.mu.RLock()
		l = t.layoutLocked(nil, true)
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
