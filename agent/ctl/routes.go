package ctl

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gswitch/gswitch/tables/route"
)

// RouteSource is what a daemon with route tables adds to Source:
//
//	GET /v1/routes[?table=N][&limit=M]  Routes  the route tables (all, or table N): per
//	        table its change counters and those of its sources, per route its next hops
//	        with per-route and per-next-hop counters; at most M routes (0: all), Truncated
//	        saying whether some were left out
//
// A Source without it answers no tables; a table id it does not hold gets
// 404.
type RouteSource interface {
	// RouteTables returns the route tables by id, and for each the counters
	// of the sources that feed it (such as the kernel FIB mirror's), by
	// source name.
	RouteTables() (map[uint32]*route.Table, map[uint32]map[string]map[string]uint64)
}

// Routes is the answer to /v1/routes.
type Routes struct {
	Tables    []RouteTableInfo
	Routes    []RouteInfo
	Truncated bool `json:",omitempty"` // the limit left routes out
}

// RouteTableInfo describes one route table.
type RouteTableInfo struct {
	ID    uint32
	Stats route.Stats
	// Sources holds counters of the table's feeds by source ("kernel":
	// events, adds, deletes, rejected, skipped, overflows, resyncs).
	Sources map[string]map[string]uint64 `json:",omitempty"`
}

// RouteInfo is one route with its counters.
type RouteInfo struct {
	Table    uint32
	Prefix   string
	Source   string
	Metric   uint32
	Packets  uint64
	Bytes    uint64
	NextHops []NextHopInfo
}

// NextHopInfo is one next hop of a route with its counters. Gateway is
// empty for an on-link next hop.
type NextHopInfo struct {
	Gateway string `json:",omitempty"`
	Port    uint32
	Weight  uint32
	Packets uint64
	Bytes   uint64
}

// RoutesOf builds the answer for route tables (table 0: all of them), with
// at most limit routes (0: all).
func RoutesOf(tables map[uint32]*route.Table, sources map[uint32]map[string]map[string]uint64, table uint32, limit int) (Routes, bool) {
	out := Routes{Tables: []RouteTableInfo{}, Routes: []RouteInfo{}}
	ids := make([]uint32, 0, len(tables))
	for id := range tables {
		if table == 0 || id == table {
			ids = append(ids, id)
		}
	}
	if table != 0 && len(ids) == 0 {
		return out, false
	}
	sortUint32(ids)
	for _, id := range ids {
		t := tables[id]
		out.Tables = append(out.Tables, RouteTableInfo{ID: id, Stats: t.Stats(), Sources: sources[id]})
		for _, e := range t.List() {
			if limit > 0 && len(out.Routes) >= limit {
				out.Truncated = true
				break
			}
			pk, by, nhs := e.Counters()
			ri := RouteInfo{Table: id, Prefix: e.Prefix.String(), Source: e.Source, Metric: e.Metric, Packets: pk, Bytes: by}
			for _, h := range nhs {
				ni := NextHopInfo{Port: h.NextHop.Port, Weight: h.NextHop.Weight, Packets: h.Packets, Bytes: h.Bytes}
				if h.NextHop.Gateway.IsValid() {
					ni.Gateway = h.NextHop.Gateway.String()
				}
				ri.NextHops = append(ri.NextHops, ni)
			}
			out.Routes = append(out.Routes, ri)
		}
	}
	return out, true
}

func sortUint32(s []uint32) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// routesHandler serves /v1/routes.
func routesHandler(src Source) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writeJSON(w, http.StatusMethodNotAllowed, errorBody{"only GET is supported"})
			return
		}
		var table uint64
		if s := r.URL.Query().Get("table"); s != "" {
			var err error
			if table, err = strconv.ParseUint(s, 10, 32); err != nil || table == 0 {
				writeJSON(w, http.StatusBadRequest, errorBody{fmt.Sprintf("table %q: want a table id 1..2^32-1", s)})
				return
			}
		}
		var limit uint64
		if s := r.URL.Query().Get("limit"); s != "" {
			var err error
			if limit, err = strconv.ParseUint(s, 10, 31); err != nil {
				writeJSON(w, http.StatusBadRequest, errorBody{fmt.Sprintf("limit %q: want a number of routes (0: all)", s)})
				return
			}
		}
		var tables map[uint32]*route.Table
		var sources map[uint32]map[string]map[string]uint64
		if rs, ok := src.(RouteSource); ok {
			tables, sources = rs.RouteTables()
		}
		out, ok := RoutesOf(tables, sources, uint32(table), int(limit))
		if !ok {
			writeJSON(w, http.StatusNotFound, errorBody{fmt.Sprintf("no route table %d", table)})
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// Routes returns /v1/routes: every route table, or only table (0: all),
// with at most limit routes (0: all; a full BGP table's listing is
// hundreds of megabytes, beyond what the client reads).
func (c *Client) Routes(ctx context.Context, table uint32, limit int) (Routes, error) {
	var v Routes
	path := fmt.Sprintf("/v1/routes?limit=%d", max(limit, 0))
	if table != 0 {
		path += "&table=" + strconv.FormatUint(uint64(table), 10)
	}
	return v, c.get(ctx, path, &v)
}
