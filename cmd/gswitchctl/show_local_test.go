package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/tables/rule"
)

// show ports names the LOCAL port LOCAL, as ovs-ofctl does.
func TestShowPortsLocal(t *testing.T) {
	var b bytes.Buffer
	printPorts(&b, []pipeline.PortInfo{{Desc: rule.Port{No: 1, Name: "veth1"}, Up: true, RxQueues: 4},
		{Desc: rule.Port{No: rule.PortLocal, Name: "gsw0"}}})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "1\tveth1\tup") || !strings.HasPrefix(lines[2], "LOCAL\tgsw0\tdown") {
		t.Fatalf("show ports:\n%s", b.String())
	}
	// The receive queues are the last column (a PortInfo without them, from
	// an older daemon, shows 1).
	if !strings.HasSuffix(lines[0], "\tRX_QUEUES") || !strings.HasSuffix(lines[1], "\t4") || !strings.HasSuffix(lines[2], "\t1") {
		t.Fatalf("show ports: receive queues column:\n%s", b.String())
	}
}
