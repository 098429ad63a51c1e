package main

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/agent/ctl"
)

// TestPrintRoutes checks the table form of gswitchctl routes.
func TestPrintRoutes(t *testing.T) {
	rs := ctl.Routes{
		Tables: []ctl.RouteTableInfo{{ID: 100, Sources: map[string]map[string]uint64{"kernel": {"adds": 3, "resyncs": 1}}}},
		Routes: []ctl.RouteInfo{{Table: 100, Prefix: "10.0.0.0/8", Source: "kernel", Packets: 9, Bytes: 900, NextHops: []ctl.NextHopInfo{
			{Gateway: "192.0.2.1", Port: 1, Weight: 1, Packets: 4, Bytes: 400}, {Port: 2, Weight: 2, Packets: 5, Bytes: 500}}}},
	}
	var b bytes.Buffer
	printRoutes(&b, rs)
	out := b.String()
	for _, want := range []string{"kernel: adds=3 resyncs=1", "10.0.0.0/8", "192.0.2.1", "on-link", "500"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "10.0.0.0/8") != 1 || strings.Count(out, "\n") != 6 {
		t.Errorf("want the prefix once and one line per next hop:\n%s", out)
	}
}

// TestRoutesNotRunning: gswitchctl routes against no daemon says so.
func TestRoutesNotRunning(t *testing.T) {
	var out, errb bytes.Buffer
	err := run([]string{"routes", "--socket", filepath.Join(t.TempDir(), "none.sock")}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "not running") {
		t.Fatalf("got %v, want a not-running error", err)
	}
}

func TestRoutesUsage(t *testing.T) {
	for _, args := range [][]string{
		{"routes", "stray"},
		{"routes", "--table", "x"},
		{"routes", "--table", "4294967296"},
		{"routes", "--limit", "-1"},
	} {
		var out, errb bytes.Buffer
		if err := run(args, &out, &errb); !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}
