package openflow

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// TestMalformedCorpusOVS sends the malformed corpus to another switch, an
// Open vSwitch bridge listening at GSWITCH_OVS_OF (host:port, e.g. a
// bridge with "ovs-vsctl set-controller br0 ptcp:16653:127.0.0.1", ports 1
// and 2, after the set-up of malformedSetup), and logs where its answers
// differ from the corpus's: a comparison, not a check (skipped without
// the variable).
func TestMalformedCorpusOVS(t *testing.T) {
	addr := os.Getenv("GSWITCH_OVS_OF")
	if addr == "" {
		t.Skip("GSWITCH_OVS_OF not set: no Open vSwitch bridge to compare with")
	}
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := ReadMessage(conn); err != nil {
			t.Fatal(err)
		}
		conn.Write(EncodeHello(1))
		return conn
	}
	conn := dial()
	defer func() { conn.Close() }()
	for _, m := range malformedSetup() {
		conn.Write(m)
	}
	cases := malformedCases()
	same := 0
	var diffs bytes.Buffer
	for i := range cases {
		cs := &cases[i]
		xid := uint32(0x10000 + i)
		if len(cs.msg) >= HeaderLen {
			cs.msg[4], cs.msg[5], cs.msg[6], cs.msg[7] = byte(xid>>24), byte(xid>>16), byte(xid>>8), byte(xid)
		}
		conn.Write(cs.msg)
		conn.Write(msg(of.TypeEchoRequest, 0xeeee0000+uint32(i), ""))
		got := "no error"
		for {
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			r, err := ReadMessage(conn)
			if err != nil {
				got = fmt.Sprintf("connection ended (%v)", err)
				conn.Close()
				conn = dial()
				break
			}
			h, _ := ParseHeader(r)
			if h.Type == of.TypeEchoReply && h.Xid == 0xeeee0000+uint32(i) {
				break
			}
			if typ, code, _, ok := ParseError(r); ok && h.Xid == xid {
				got = ofp.Error{Type: typ, Code: code}.Error()
				if typ == cs.typ && code == cs.code {
					got = ""
				}
			}
		}
		if got == "" {
			same++
			continue
		}
		fmt.Fprintf(&diffs, "  %s: Open vSwitch %s; gswitchd %s\n", cs.name, got, ofp.Error{Type: cs.typ, Code: cs.code})
	}
	t.Logf("Open vSwitch answers %d of %d cases as gswitchd does; the others:\n%s", same, len(cases), diffs.String())
}
