package main

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/gswitch/gswitch/agent/ctl"
)

// printPubSub writes content-based forwarding's state: the configuration,
// the table's sizes, the event counters, deliveries per port and the
// subscriptions with their match counters.
func printPubSub(w io.Writer, p ctl.PubSubInfo) {
	if !p.Enabled {
		fmt.Fprintln(w, "pubsub\toff")
		return
	}
	api := p.APIListen
	if api == "" {
		api = "off"
	}
	fmt.Fprintf(w, "pubsub\tudp port %d\tevent ports %v\tapi %s\n", p.UDPPort, p.Ports, api)
	t := p.Table
	fmt.Fprintf(w, "table\t%d subscriptions\t%d filters\t%d constraints\t%d names\t%d ports\n", t.Subscriptions, t.Filters, t.Constraints, t.Names, t.Ports)
	m := p.Matcher
	if m == "" {
		m = "cpu"
	}
	fmt.Fprintf(w, "matcher\t%s\n", m)
	if d := p.Device; d != nil {
		off := ""
		if d.Off != "" {
			off = "\toff: " + d.Off
		}
		fmt.Fprintf(w, "device\tbatches %d (%d events)\tcpu batches %d (%d events, below %d events or fallbacks)\tfallbacks %d\tupdates %d (%d bubbles)%s\n",
			d.DeviceBatches, d.DeviceEvents, d.CPUBatches, d.CPUEvents, d.MinBatch, d.Fallbacks, d.Updates, d.Bubbles, off)
		if d.LastError != "" {
			fmt.Fprintf(w, "device\tlast error: %s\n", d.LastError)
		}
	}
	k := p.Counters
	fmt.Fprintf(w, "events\treceived %d\tmalformed %d\tmatched %d\tdelivered %d\n", k.Received, k.Malformed, k.Matched, k.Delivered)
	for _, port := range slices.Sorted(maps.Keys(k.PortDeliveries)) {
		fmt.Fprintf(w, "port %d\tdelivered %d\n", port, k.PortDeliveries[port])
	}
	if len(p.Subscriptions) > 0 {
		fmt.Fprintln(w, "ID\tPORT\tMATCHES\tPREDICATE")
		for _, s := range p.Subscriptions {
			fmt.Fprintf(w, "%d\t%d\t%d\t%s\n", s.ID, s.Port, s.Matches, s.Predicate)
		}
	}
}
