package main

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/gswitch/gswitch/datapath/l3"
)

// printNeighbours writes the neighbour table: port, address, MAC, state,
// milliseconds since the last confirmation, packets waiting.
func printNeighbours(w io.Writer, ns []l3.NeighInfo) {
	fmt.Fprintln(w, "PORT\tADDRESS\tMAC\tSTATE\tAGE\tQUEUED")
	for _, n := range ns {
		mac, age := n.MAC, "-"
		if mac == "" {
			mac = "-"
		}
		if n.AgeMS >= 0 {
			age = fmt.Sprintf("%.1fs", float64(n.AgeMS)/1000)
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\n", n.Port, n.Addr, mac, n.State, age, n.Queued)
	}
}

// printL3 writes the router's counters, drops by reason (those not zero).
func printL3(w io.Writer, c l3.Counters) {
	fmt.Fprintf(w, "forwarded\t%d packets\t%d bytes\n", c.Forwarded, c.ForwardedBytes)
	fmt.Fprintf(w, "sent\tarp replies %d\tnd adverts %d\tsolicitations %d\techo replies %d\ticmp errors %d (rate-limited %d)\n",
		c.ARPReplies, c.NDAdverts, c.Solicitations, c.EchoReplies, c.ICMPErrors, c.ICMPLimited)
	fmt.Fprintf(w, "neighbours\t%d entries\t%d packets queued so far\n", c.Neighbours, c.Queued)
	for _, r := range slices.Sorted(maps.Keys(c.Drops)) {
		if c.Drops[r] > 0 {
			fmt.Fprintf(w, "dropped\t%s\t%d\n", r, c.Drops[r])
		}
	}
}
