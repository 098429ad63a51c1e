//go:build tools

// This file pins the project's dependencies that no package imports yet, so
// that go.mod names the tagged versions every later package builds on. A
// dependency leaves this list as soon as real code imports it.
package gswitch

import (
	_ "github.com/google/gopacket"
	_ "github.com/netrack/openflow"
	_ "github.com/p4lang/p4runtime/go/p4/v1"
	_ "github.com/vishvananda/netlink"
)
