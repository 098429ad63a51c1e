package pipeline

import (
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/lpmshape"
)

// LPM-shaped flow tables (see the package documentation, "LPM-shaped
// tables"): every flow table has a tables/lpmshape Shape beside its
// flow.Table, told of every rule added and removed under s.mu, synced
// with the table, and asked at each batch whether it serves the table.

// LPMInfo describes a flow table's LPM shape, for the control socket and
// metrics.
type LPMInfo = lpmshape.Info

// lpmClassifier is what LPM serving needs of the switch's Classifier
// (gpu.Engine has it): the LPM images are loaded, updated and looked up
// beside the flow tables' images.
type lpmClassifier interface {
	Load(id gpu.TableID, kind gpu.Kind, im *bubble.Image) error
	Apply(id gpu.TableID, u bubble.Update) error
	LookupLPM4(id gpu.TableID, addrs []uint32, out []uint32) error
	LookupLPM6(id gpu.TableID, addrs []lpm.Addr6, out []uint32) error
}

// lpmImages adapts an lpmClassifier to lpmshape.Images: image ids are
// gpu table ids, families gpu kinds.
type lpmImages struct{ c lpmClassifier }

func lpmKind(fam lpm.Family) gpu.Kind {
	if fam == lpm.IPv6 {
		return gpu.LPM6
	}
	return gpu.LPM4
}

func (a lpmImages) Load(id uint32, fam lpm.Family, im *bubble.Image) error {
	return a.c.Load(gpu.TableID(id), lpmKind(fam), im)
}

func (a lpmImages) Apply(id uint32, u bubble.Update) error { return a.c.Apply(gpu.TableID(id), u) }

func (a lpmImages) LookupLPM4(id uint32, addrs []uint32, out []uint32) error {
	return a.c.LookupLPM4(gpu.TableID(id), addrs, out)
}

func (a lpmImages) LookupLPM6(id uint32, addrs []lpm.Addr6, out []uint32) error {
	return a.c.LookupLPM6(gpu.TableID(id), addrs, out)
}

// shapeOf returns table t's shape tracker, made on first use; nil when the
// Classifier cannot look up LPM images (the table is then always served
// by the classifier).
func (s *Switch) shapeOf(t *table) *lpmshape.Shape {
	if t.lpm == nil {
		if c, ok := s.cfg.Classifier.(lpmClassifier); ok {
			t.lpm = lpmshape.New(lpmshape.Config{Table: t.id, IDBase: uint32(s.cfg.LPMIDBase), Images: lpmImages{c}, Logger: s.log})
		}
	}
	return t.lpm
}

// setLPMServing turns LPM serving of LPM-shaped tables on (the default)
// or off, so that a benchmark compares both on one table.
func (s *Switch) setLPMServing(on bool) {
	defer s.unlockWrite(WriteOther, s.lockWrite())
	for _, t := range s.tables {
		if l := s.shapeOf(t); l != nil {
			l.SetEnabled(on)
		}
	}
}
