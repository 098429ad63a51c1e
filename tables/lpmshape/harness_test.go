package lpmshape_test

import (
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
	"github.com/gswitch/gswitch/tables/lpmshape"
	"github.com/gswitch/gswitch/tables/rule"
)

// images is an in-memory lpmshape.Images: the images by id, looked up
// through tables/lpm's View (what the CPU backend does).
type images struct {
	mu    sync.Mutex
	ims   map[uint32]*bubble.Image
	views map[uint32]*lpm.View
}

func newImages() *images {
	return &images{ims: map[uint32]*bubble.Image{}, views: map[uint32]*lpm.View{}}
}

func (m *images) Load(id uint32, _ lpm.Family, im *bubble.Image) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, err := lpm.NewView(im); err != nil {
		return err
	}
	m.ims[id] = im.Clone()
	delete(m.views, id)
	return nil
}

func (m *images) Apply(id uint32, u bubble.Update) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	im, ok := m.ims[id]
	if !ok {
		return errors.New("no such image")
	}
	if err := u.ApplyTo(&im); err != nil {
		return err
	}
	m.ims[id] = im
	delete(m.views, id)
	return nil
}

func (m *images) view(id uint32) (*lpm.View, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v, ok := m.views[id]; ok {
		return v, nil
	}
	im, ok := m.ims[id]
	if !ok {
		return nil, errors.New("no such image")
	}
	v, err := lpm.NewView(im)
	if err != nil {
		return nil, err
	}
	m.views[id] = v
	return v, nil
}

func (m *images) LookupLPM4(id uint32, addrs []uint32, out []uint32) error {
	v, err := m.view(id)
	if err == nil {
		v.LookupBatch4(addrs, out)
	}
	return err
}

func (m *images) LookupLPM6(id uint32, addrs []lpm.Addr6, out []uint32) error {
	v, err := m.view(id)
	if err == nil {
		v.LookupBatch6(addrs, out)
	}
	return err
}

// harness is a switch's use of Shapes without the switch: flow tables,
// each with its Shape, changed as the pipeline changes them (a replacing
// add and a modify leave the shape as it is; every removal is reported;
// Sync after each change). It is a shapetest.Target.
type harness struct {
	tables []*harnessTable
	img    *images
}

type harnessTable struct {
	ft   *flow.Table
	sh   *lpmshape.Shape
	hard map[flow.RuleID]time.Time
}

func newHarness(tb testing.TB, tables int) *harness {
	tb.Helper()
	h := &harness{img: newImages()}
	for i := range tables {
		ft, err := flow.NewTable(flow.Config{Algo: flow.Tuple, MaxEntries: 1 << 21, Seed: uint64(i) + 1})
		if err != nil {
			tb.Fatal(err)
		}
		sh := lpmshape.New(lpmshape.Config{Table: uint8(i), Images: h.img, Logger: slog.New(slog.DiscardHandler)})
		h.tables = append(h.tables, &harnessTable{ft: ft, sh: sh, hard: map[flow.RuleID]time.Time{}})
	}
	return h
}

func (h *harness) FlowMod(tb testing.TB, fm *rule.FlowMod) {
	tb.Helper()
	var tabs []*harnessTable
	switch {
	case fm.TableID == rule.TableAll:
		tabs = h.tables
	case int(fm.TableID) < len(h.tables):
		tabs = h.tables[fm.TableID : fm.TableID+1]
	default:
		tb.Fatalf("table %d of %d", fm.TableID, len(h.tables))
	}
	for _, t := range tabs {
		switch {
		case fm.Command == rule.FlowAdd:
			r := flow.Rule{Match: fm.Match, Priority: fm.Priority, Cookie: fm.Cookie}
			id, replaced, err := t.ft.Add(r, 0)
			if err != nil {
				tb.Fatalf("add %+v: %v", fm, err)
			}
			if !replaced {
				t.sh.Add(id, &r)
			}
			delete(t.hard, id)
			if fm.HardTimeout != 0 {
				t.hard[id] = time.Now().Add(time.Duration(fm.HardTimeout) * time.Second)
			}
		case fm.Command.IsDelete():
			for _, r := range t.ft.Delete(fm.Selector()) {
				t.sh.Remove(r.ID)
				delete(t.hard, r.ID)
			}
		default:
			t.ft.Modify(fm.Selector(), 0)
		}
		t.sh.Sync()
	}
}

func (h *harness) Expire(now time.Time) {
	for _, t := range h.tables {
		for id, at := range t.hard {
			if !now.Before(at) {
				t.ft.DeleteID(id)
				t.sh.Remove(id)
				delete(t.hard, id)
			}
		}
		t.sh.Sync()
	}
}

func (h *harness) Inspect(tid uint8, f func(*flow.Table, *lpmshape.Shape)) {
	t := h.tables[tid]
	f(t.ft, t.sh)
}
