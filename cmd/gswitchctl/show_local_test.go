package main

import (
	"bytes"
	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/gpu"
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

// show tables: an LPM-shaped table shows its LPM images' backend (the
// agent marks them with the table's number), a flow table its own, each
// with the path of its lookups; the receive batches by path close it.
func TestShowTablesPathAndLPM(t *testing.T) {
	var b bytes.Buffer
	printTables(&b, tablesView{
		tables: []pipeline.TableInfo{{ID: 0, Search: "merge"}, {ID: 1, Search: "lpm"}, {ID: 2, Search: "tuple"}},
		backends: []gpu.TableBackend{
			{Table: 0, Kind: "flow", Backend: "device", Path: "shared", Owner: "flow tables", Calibrations: 2, Classes: 512, Reason: "auto: the device is cheaper"},
			{Table: 1, Kind: "flow", Backend: "cpu", Path: "direct", Owner: "flow tables", Reason: "auto: not calibrated yet"},
			{Table: 0x4010000, Kind: "lpm4", Backend: "cpu", Path: "direct", Owner: "lpm-shaped flow tables", OwnerTable: 1, Calibrations: 1, Classes: 3, Reason: "auto: batches of 256 keys are below --min-batch 2048"},
			{Table: 0x4010001, Kind: "lpm6", Backend: "device", Path: "direct", Owner: "lpm-shaped flow tables", OwnerTable: 1, Calibrations: 1, Classes: 5, Reason: "auto: the device is cheaper"},
			{Table: 2, Kind: "flow", Backend: "cpu"}, // an older daemon: no path
		},
		batches: ctl.BatchPaths{Direct: 7, Shared: 9},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"TABLE\tACTIVE\tLOOKUPS\tMATCHED\tSEARCH\tBACKEND\tPATH\tWHY",
		"0\t0\t0\t0\tmerge\tdevice\tshared\tauto: the device is cheaper (512 classes)",
		"1\t0\t0\t0\tlpm\tcpu+device\tdirect\tauto: batches of 256 keys are below --min-batch 2048 (lpm4 image, 3 trie levels); 2 images",
		"2\t0\t0\t0\ttuple\tcpu\t-\t",
		"receive batches: 7 direct (in the port loop, lookups straight to the engine), 9 shared (device tables' lookups in the shared device batches)",
	}
	if len(lines) != len(want) {
		t.Fatalf("show tables:\n%s", b.String())
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %q\nwant %q", i, lines[i], want[i])
		}
	}
}

// show tables with datapath workers (--rx-workers): their batches get a
// line of their own, and no direct/shared line when there are none.
func TestShowTablesWorkerBatches(t *testing.T) {
	var b bytes.Buffer
	printTables(&b, tablesView{
		tables:   []pipeline.TableInfo{{ID: 0, Search: "merge"}},
		backends: []gpu.TableBackend{{Table: 0, Kind: "flow", Backend: "device", Path: "direct", Owner: "flow tables"}},
		batches:  ctl.BatchPaths{Worker: 12},
	})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := "receive batches: 12 run by datapath workers (--rx-workers: each worker's queues together, lookups straight to the engine)"
	if len(lines) != 3 || lines[2] != want || strings.Contains(b.String(), "shared (") {
		t.Fatalf("show tables:\n%s", b.String())
	}
}
