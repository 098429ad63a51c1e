package main

import (
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/gswitch/gswitch/datapath/l3"
)

func TestPrintNeighboursAndL3(t *testing.T) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printShow(tw, []l3.NeighInfo{
		{Port: 2, Addr: "10.0.2.2", MAC: "02:00:00:00:02:02", State: "reachable", AgeMS: 1500},
		{Port: 2, Addr: "10.0.2.9", State: "incomplete", AgeMS: -1, Queued: 3},
	})
	tw.Flush()
	tw = tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printShow(tw, l3.Counters{Forwarded: 7, Drops: map[string]uint64{"no_route": 2, "ttl_expired": 0}})
	tw.Flush()
	out := b.String()
	for _, want := range []string{"10.0.2.2  02:00:00:00:02:02  reachable   1.5s", "10.0.2.9  -                  incomplete  -     3", "forwarded   7 packets", "dropped     no_route       2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ttl_expired") {
		t.Errorf("a zero drop counter is shown:\n%s", out)
	}
}
