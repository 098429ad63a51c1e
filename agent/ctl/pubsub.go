package ctl

import (
	"context"

	"github.com/gswitch/gswitch/datapath/eventfwd"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// PubSubInfo is /v1/pubsub: content-based forwarding's configuration, the
// subscription table's sizes and the datapath's event counters.
type PubSubInfo struct {
	Enabled   bool
	UDPPort   uint16
	Ports     []uint32 // the ports whose received batches are searched for events
	APIListen string   // the gRPC subscription service's address; "" when off
	Table     pubsub.Stats
	Counters  eventfwd.Counters
	// Matcher names what matches the events: "cpu", or the device (its
	// name and description); Device has its counters when there is one.
	Matcher string
	Device  *eventfwd.HybridCounters `json:",omitempty"`
	// Subscriptions are the subscriptions with their match counters.
	Subscriptions []PubSubSubscription
}

// PubSubSubscription is one subscription as /v1/pubsub lists it.
type PubSubSubscription struct {
	ID        uint64
	Port      uint32
	Predicate string
	Matches   uint64
}

// PubSubSource is what a daemon with content-based forwarding adds to
// Source:
//
//	GET /v1/pubsub  PubSubInfo  the configuration, table sizes, event counters, subscriptions
//
// A Source without it answers Enabled false.
type PubSubSource interface {
	PubSub() PubSubInfo
}

func pubsubInfo(src Source) any {
	if ps, ok := src.(PubSubSource); ok {
		return ps.PubSub()
	}
	return PubSubInfo{Counters: eventfwd.Counters{PortDeliveries: map[uint32]uint64{}}}
}

// PubSub returns /v1/pubsub.
func (c *Client) PubSub(ctx context.Context) (PubSubInfo, error) {
	var v PubSubInfo
	return v, c.get(ctx, "/v1/pubsub", &v)
}
