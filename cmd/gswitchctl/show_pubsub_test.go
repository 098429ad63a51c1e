package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/eventfwd"
)

func TestPrintPubSub(t *testing.T) {
	var b bytes.Buffer
	printPubSub(&b, ctl.PubSubInfo{})
	if b.String() != "pubsub\toff\n" {
		t.Errorf("off: %q", b.String())
	}
	b.Reset()
	printPubSub(&b, ctl.PubSubInfo{Enabled: true, UDPPort: 7400, Ports: []uint32{1, 2},
		Counters:      eventfwd.Counters{Received: 5, Malformed: 1, Matched: 3, Delivered: 4, PortDeliveries: map[uint32]uint64{2: 4}},
		Subscriptions: []ctl.PubSubSubscription{{ID: 1, Port: 2, Predicate: "x > 1", Matches: 3}}})
	for _, want := range []string{"udp port 7400", "received 5\tmalformed 1\tmatched 3\tdelivered 4", "port 2\tdelivered 4", "1\t2\t3\tx > 1"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
	if !strings.Contains(b.String(), "matcher\tcpu\n") {
		t.Errorf("lacks the matcher:\n%s", b.String())
	}
	b.Reset()
	printPubSub(&b, ctl.PubSubInfo{Enabled: true, Matcher: "cuda: pubsub_match", Device: &eventfwd.HybridCounters{DeviceBatches: 7, DeviceEvents: 700,
		CPUBatches: 2, CPUEvents: 3, MinBatch: 16, Fallbacks: 1, LastError: "lost", Updates: 4, Bubbles: 90}})
	for _, want := range []string{"matcher\tcuda: pubsub_match\n", "batches 7 (700 events)", "fallbacks 1", "updates 4 (90 bubbles)", "last error: lost"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("lacks %q:\n%s", want, b.String())
		}
	}
	if _, _, _, err := showArgs([]string{"pubsub"}, &b); err != nil {
		t.Errorf("show pubsub: %v", err)
	}
}
