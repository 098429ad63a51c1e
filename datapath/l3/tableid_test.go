package l3

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/route"
)

// loadRecorder is an Engine that records the table ids images are loaded
// under and serves lookups from a real CPU engine.
type loadRecorder struct {
	*gpu.Engine
	loads map[gpu.TableID]gpu.Kind
}

func (e *loadRecorder) Load(id gpu.TableID, kind gpu.Kind, im *bubble.Image) error {
	e.loads[id] = kind
	return e.Engine.Load(id, kind, im)
}

// TestTableIDBase: route tables' images go to Config.TableIDBase+2i
// (IPv4) and +2i+1 (IPv6), DefaultTableIDBase without one; MaxTables
// refuses a table beyond the range, and lookups use the configured ids.
func TestTableIDBase(t *testing.T) {
	ports := []PortConfig{
		{No: 1, MAC: mac1, Table: 10, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.1.1/24")}},
		{No: 2, MAC: mac2, Table: 20, Addrs: []netip.Prefix{netip.MustParsePrefix("10.0.2.1/24")}},
	}
	for _, c := range []struct {
		base, want gpu.TableID
		max        int
		attached   int
	}{
		{0, DefaultTableIDBase, 0, 3},
		{5 << 20, 5 << 20, 0, 3},
		{7 << 20, 7 << 20, 2, 2},
	} {
		eng := &loadRecorder{Engine: gpu.NewEngine(gpu.EngineConfig{}), loads: map[gpu.TableID]gpu.Kind{}}
		r, err := New(Config{Engine: eng, Ports: ports, TableIDBase: c.base, MaxTables: c.max, Transmit: func(uint32, [][]byte) {}})
		if err != nil {
			t.Fatal(err)
		}
		attached := 0
		for _, id := range []uint32{10, 20, 30} {
			tab, err := route.New(id, route.Options{PortOK: r.Owns})
			if err != nil {
				t.Fatal(err)
			}
			err = r.AttachTable(tab)
			if err != nil {
				if c.max == 0 || attached < c.max || !strings.Contains(err.Error(), "hold 2 route tables") {
					t.Fatalf("base %#x max %d: AttachTable(%d): %v", c.base, c.max, id, err)
				}
				continue
			}
			attached++
		}
		if attached != c.attached || len(eng.loads) != 2*c.attached {
			t.Fatalf("base %#x max %d: %d tables attached, loads %v; want %d tables", c.base, c.max, attached, eng.loads, c.attached)
		}
		for i := range gpu.TableID(c.attached) {
			if eng.loads[c.want+2*i] != gpu.LPM4 || eng.loads[c.want+2*i+1] != gpu.LPM6 {
				t.Fatalf("base %#x: loads %v, want LPM4 at %#x and LPM6 at %#x", c.base, eng.loads, c.want+2*i, c.want+2*i+1)
			}
		}
		// The router's lookups go to the configured ids: table 10's
		// connected route answers through them.
		tab := r.tables[10].t
		for _, rt := range r.ConnectedRoutes(10) {
			if err := tab.Add(rt); err != nil {
				t.Fatal(err)
			}
		}
		out := make([]uint32, 1)
		if err := eng.LookupLPM4(c.want, []uint32{0x0a000105}, out); err != nil || out[0] == 0 {
			t.Fatalf("base %#x: lookup of 10.0.1.5 in table 10's image: %v, %v", c.base, out, err)
		}
		eng.Close()
	}
	if _, err := New(Config{Engine: gpu.NewEngine(gpu.EngineConfig{}), MaxTables: -1}); err == nil {
		t.Fatal("MaxTables -1 accepted")
	}
}
