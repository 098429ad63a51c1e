//go:build tools

// Package gswitch pins, in go.mod, the dependencies the issues name that no
// package imports yet; each leaves this list when real code imports it.
// (netlink, gopacket and netrack/openflow are imported now: datapath/afpacket,
// the datapath tests and controlproto/openflow.)
package gswitch

import (
	_ "github.com/p4lang/p4runtime/go/p4/v1"
)
