// Package filtertest holds what the tests of the packages that evaluate
// compiled filter sets (gpu's PacketFilter, datapath/gpfscan's scans)
// share: tables/filter's test captures, read as plainly as possible, and
// a generated set of monitoring filters.
package filtertest

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gswitch/gswitch/tables/filter"
)

// Packet is one captured packet: its bytes and its length on the wire.
type Packet struct {
	Data []byte
	Wire uint32
}

// Captures returns the paths of tables/filter's test captures (classic
// pcap files), found from this source file (tests run in the source tree).
func Captures(t testing.TB) []string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	cs, err := filepath.Glob(filepath.Join(filepath.Dir(file), "..", "testdata", "captures", "*.pcap"))
	if err != nil || len(cs) == 0 {
		t.Fatalf("no test captures: %v", err)
	}
	return cs
}

// ReadCapture reads a classic pcap file (either byte order): its link type
// and packets. Enough for the test captures; a reader independent of
// datapath/pcapfile, whose output the tests compare against.
func ReadCapture(t testing.TB, path string) (uint32, []Packet) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 {
		t.Fatalf("%s: short", path)
	}
	var bo binary.ByteOrder = binary.LittleEndian
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4, 0xa1b23c4d:
	case 0xd4c3b2a1, 0x4d3cb2a1:
		bo = binary.BigEndian
	default:
		t.Fatalf("%s: not a pcap file", path)
	}
	link := bo.Uint32(b[20:])
	var ps []Packet
	for off := 24; off+16 <= len(b); {
		incl, orig := int(bo.Uint32(b[off+8:])), bo.Uint32(b[off+12:])
		off += 16
		if off+incl > len(b) {
			break
		}
		ps = append(ps, Packet{b[off : off+incl], orig})
		off += incl
	}
	return link, ps
}

// Specs returns n monitoring filters (as tables/filter's benchmark) and a
// few whose criteria are expressions, some with offsets read from the
// packet.
func Specs(n int) []filter.Spec {
	specs := []filter.Spec{
		{Name: "x0", Expr: "ip[2:2] > 100"},
		{Name: "x1", Expr: "len > 200 and tcp"},
		{Name: "x2", Expr: "tcp[13] & 2 != 0 or udp[8:2] = 0"},
		{Name: "x3", Expr: "ip[0] & 0xf > 5"},
		{Name: "x4", Expr: "ip[6:2] & 0x1fff = 0 and ip[9] + 1 = 7"},
	}
	for i := 0; len(specs) < n; i++ {
		var e string
		switch i % 8 {
		case 0:
			e = fmt.Sprintf("host 10.0.%d.%d", i/250, i%250)
		case 1:
			e = fmt.Sprintf("tcp port %d", 1000+i)
		case 2:
			e = fmt.Sprintf("net 192.168.%d.0/24 and udp", i%256)
		case 3:
			e = fmt.Sprintf("src host 10.0.0.%d and dst port %d", i%250, 80+i)
		case 4:
			e = "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0"
		case 5:
			e = fmt.Sprintf("vlan %d and ip", i%4000)
		case 6:
			e = fmt.Sprintf("ip6 and udp portrange %d-%d", i, i+100)
		case 7:
			e = fmt.Sprintf("icmp or arp host 10.0.0.%d or port 53", i%250)
		}
		specs = append(specs, filter.Spec{Name: fmt.Sprintf("f%d", i), Expr: e})
	}
	return specs[:n]
}
