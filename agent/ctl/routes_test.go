package ctl

import (
	"context"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gswitch/gswitch/tables/route"
)

// routeSource is fakeSource with two route tables.
type routeSource struct {
	fakeSource
	tables map[uint32]*route.Table
}

func (s routeSource) RouteTables() (map[uint32]*route.Table, map[uint32]map[string]map[string]uint64) {
	return s.tables, map[uint32]map[string]map[string]uint64{100: {"kernel": {"adds": 1}}}
}

// TestRoutes queries /v1/routes over a real socket: all tables, one table,
// an unknown table (404) and a bad table id (400), with route and next-hop
// counters.
func TestRoutes(t *testing.T) {
	src := routeSource{tables: map[uint32]*route.Table{}}
	for _, id := range []uint32{254, 100} {
		tb, err := route.New(id, route.Options{})
		if err != nil {
			t.Fatal(err)
		}
		src.tables[id] = tb
	}
	gw := netip.MustParseAddr("192.0.2.1")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(src.tables[100].Add(route.Route{Table: 100, Prefix: netip.MustParsePrefix("10.0.0.0/8"), Source: route.SourceKernel,
		NextHops: []route.NextHop{{Gateway: gw, Port: 1, Weight: 1}, {Port: 2, Weight: 3}}}))
	must(src.tables[254].Add(route.Route{Table: 254, Prefix: netip.MustParsePrefix("2001:db8::/32"), Source: route.SourceStatic,
		NextHops: []route.NextHop{{Port: 2, Weight: 1}}}))
	e, _ := src.tables[100].Get(netip.MustParsePrefix("10.0.0.0/8"))
	e.Count(1, 2, 200)

	path := filepath.Join(t.TempDir(), "ctl.sock")
	l, err := Listen(path)
	must(err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() { done <- Serve(sctx, l, src) }()
	defer func() { stop(); <-done }()
	c := NewClient(path)
	defer c.Close()

	all, err := c.Routes(ctx, 0, 0)
	must(err)
	if len(all.Tables) != 2 || all.Tables[0].ID != 100 || all.Tables[1].ID != 254 || len(all.Routes) != 2 {
		t.Fatalf("all tables: %+v", all)
	}
	if all.Tables[0].Sources["kernel"]["adds"] != 1 || all.Tables[0].Stats.Routes != 1 {
		t.Errorf("table info: %+v", all.Tables[0])
	}
	r := all.Routes[0]
	if r.Prefix != "10.0.0.0/8" || r.Packets != 2 || r.Bytes != 200 || len(r.NextHops) != 2 ||
		r.NextHops[0].Gateway != "192.0.2.1" || r.NextHops[0].Packets != 0 || r.NextHops[1].Gateway != "" || r.NextHops[1].Packets != 2 || r.NextHops[1].Weight != 3 {
		t.Errorf("route: %+v", r)
	}
	one, err := c.Routes(ctx, 254, 0)
	must(err)
	if len(one.Tables) != 1 || len(one.Routes) != 1 || one.Routes[0].Prefix != "2001:db8::/32" || one.Routes[0].Source != "static" {
		t.Errorf("table 254: %+v", one)
	}
	if _, err := c.Routes(ctx, 7, 0); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("unknown table: %v", err)
	}
	var v Routes
	if err := c.get(ctx, "/v1/routes?table=x", &v); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("bad table id: %v", err)
	}
	if err := c.get(ctx, "/v1/routes?limit=-1", &v); err == nil || !strings.Contains(err.Error(), "400") {
		t.Errorf("bad limit: %v", err)
	}
	lim, err := c.Routes(ctx, 0, 1)
	if err != nil || len(lim.Routes) != 1 || !lim.Truncated || len(lim.Tables) != 2 {
		t.Errorf("limit 1: %+v, %v", lim, err)
	}
	if all.Truncated {
		t.Error("an answer without a limit says it is truncated")
	}
	// A daemon without route tables answers none.
	if out, ok := RoutesOf(nil, nil, 0, 0); !ok || len(out.Tables) != 0 {
		t.Errorf("no tables: %+v %v", out, ok)
	}
}
