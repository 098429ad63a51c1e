package ctl

import (
	"context"

	"github.com/gswitch/gswitch/datapath/l3"
)

// RouterSource is what a daemon with router ports adds to Source:
//
//	GET /v1/neighbours  []l3.NeighInfo  the neighbour table: port, address, MAC, state, age, queued packets
//	GET /v1/l3          l3.Counters     the router's counters: forwarded, drops by reason, frames it sent
//
// A Source without it answers an empty list and zero counters.
type RouterSource interface {
	Neighbours() []l3.NeighInfo
	L3Counters() l3.Counters
}

func neighbours(src Source) any {
	if rs, ok := src.(RouterSource); ok {
		return rs.Neighbours()
	}
	return []l3.NeighInfo{}
}

func l3Counters(src Source) any {
	if rs, ok := src.(RouterSource); ok {
		return rs.L3Counters()
	}
	return l3.Counters{Drops: map[string]uint64{}}
}

// Neighbours returns /v1/neighbours.
func (c *Client) Neighbours(ctx context.Context) ([]l3.NeighInfo, error) {
	var v []l3.NeighInfo
	return v, c.get(ctx, "/v1/neighbours", &v)
}

// L3 returns /v1/l3.
func (c *Client) L3(ctx context.Context) (l3.Counters, error) {
	var v l3.Counters
	return v, c.get(ctx, "/v1/l3", &v)
}
