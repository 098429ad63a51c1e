package flow

import (
	"fmt"

	"github.com/gswitch/gswitch/tables/bubble"
)

// linear is linear search: one slot per distinct match,
// [priority, id, value P words, mask P words], scanned up to the high-water
// mark in the header. Freed slots are reused lowest first.
type linear struct {
	m      *bubble.Mirror
	cfg    *Config
	proj   []int
	p, s   int // projected words, words per slot
	nslots int
	hwm    int
	free   minHeap[int]
	isFree []bool
	owner  []*dmatch
}

func newLinear(m *bubble.Mirror, cfg *Config) *linear { return &linear{m: m, cfg: cfg} }

func (l *linear) rebuild(proj []int, ds []*dmatch) error {
	p := len(proj)
	s := SlotWords(p)
	nslots := max(l.cfg.minUnits, 2*len(ds))
	if int64(nslots)*int64(s) > 1<<31 {
		return fmt.Errorf("flow: linear image of %d slots too large", nslots)
	}
	live := l.m
	tmp := bubble.NewMirror(newImage([numRegions]int{RegionHeader: HeaderWords, RegionEntries: nslots * s}))
	l.m, l.proj, l.p, l.s, l.nslots = tmp, proj, p, s, nslots
	l.hwm, l.free = 0, l.free[:0]
	l.isFree = make([]bool, nslots)
	l.owner = make([]*dmatch, nslots)
	writeHeader(tmp, Linear, proj, 0, s, 0)
	for i := 0; i < nslots; i++ {
		tmp.Set(RegionEntries, uint32(i*s+1), EmptyID)
	}
	for _, d := range ds {
		l.put(d, l.hwm)
		l.hwm++
	}
	tmp.Set(RegionHeader, HdrCount, uint32(l.hwm))
	live.Replace(tmp.Image())
	l.m = live
	return nil
}

// put writes d into slot i.
func (l *linear) put(d *dmatch, i int) {
	base := uint32(i * l.s)
	l.m.Set(RegionEntries, base, uint32(d.hprio))
	l.m.Set(RegionEntries, base+1, uint32(d.hid))
	for j, w := range l.proj {
		l.m.Set(RegionEntries, base+2+uint32(j), d.m.Value[w])
		l.m.Set(RegionEntries, base+2+uint32(l.p+j), d.m.Mask[w])
	}
	d.slot = i
	l.owner[i] = d
	l.isFree[i] = false
}

func (l *linear) insert(d *dmatch) error {
	for l.free.len() > 0 {
		i := l.free.pop()
		if i < l.hwm && l.isFree[i] {
			l.put(d, i)
			return nil
		}
	}
	if l.hwm >= l.nslots {
		return errNoRoom
	}
	l.put(d, l.hwm)
	l.hwm++
	l.m.Set(RegionHeader, HdrCount, uint32(l.hwm))
	return nil
}

func (l *linear) setHead(d *dmatch, id RuleID, prio uint16) {
	d.hid, d.hprio = id, prio
	base := uint32(d.slot * l.s)
	l.m.Set(RegionEntries, base, uint32(prio))
	l.m.Set(RegionEntries, base+1, uint32(id))
}

func (l *linear) remove(d *dmatch) {
	i := d.slot
	l.m.Set(RegionEntries, uint32(i*l.s+1), EmptyID)
	l.owner[i] = nil
	l.isFree[i] = true
	l.free.push(i)
	for l.hwm > 0 && l.isFree[l.hwm-1] {
		l.hwm--
		l.isFree[l.hwm] = false // above the mark: given out by the mark, not the heap
	}
	l.m.Set(RegionHeader, HdrCount, uint32(l.hwm))
}

func (l *linear) stats(s *Stats) {
	s.Entries = s.Matches
	s.MaxClassEntries = s.Matches
}
