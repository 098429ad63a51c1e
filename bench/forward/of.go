package forward

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// The rule set of a forwarding series: n-1 exact ipv4_dst rules at a higher
// priority that the test traffic (to 10.0.0.2) never matches, and one
// in_port=1 → output:2 rule that every test frame matches. The same set is
// written as an ovs-ofctl add-flows file (Open vSwitch) and sent as
// FLOW_MODs (gswitchd).
const (
	missPriority  = 200
	matchPriority = 100
)

// missDst is the i-th non-matching destination: 10.128.0.1 upwards
// (outside 10.0.0.0/24, the traffic's subnet).
func missDst(i int) uint32 { return 10<<24 | 128<<16 + uint32(i) + 1 }

func ipString(a uint32) string {
	return fmt.Sprintf("%d.%d.%d.%d", a>>24, a>>16&255, a>>8&255, a&255)
}

// ruleFile is the ovs-ofctl add-flows text of a set of n rules.
func ruleFile(n int) string {
	var b strings.Builder
	for i := range n - 1 {
		fmt.Fprintf(&b, "priority=%d,ip,nw_dst=%s,actions=drop\n", missPriority, ipString(missDst(i)))
	}
	fmt.Fprintf(&b, "priority=%d,in_port=1,actions=output:2\n", matchPriority)
	return b.String()
}

// ruleFlowMods is the same set as FLOW_MOD messages (xids from 'xid').
func ruleFlowMods(n, pairs int, xid uint32) [][]byte {
	out := make([][]byte, 0, n)
	for i := range n - pairs {
		out = append(out, missFlowMod(xid+uint32(i), i))
	}
	for k := range pairs {
		var m flow.Match
		m.SetInPort(uint32(2*k + 1))
		fm := &rule.FlowMod{
			Command: rule.FlowAdd, Priority: matchPriority,
			BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny,
			Match: m,
			Instructions: rule.Instructions{
				Has:   rule.HasApplyActions,
				Apply: []rule.Action{{Kind: rule.ActOutput, Port: uint32(2*k + 2)}},
			},
		}
		out = append(out, openflow.EncodeFlowMod(xid+uint32(len(out)), fm))
	}
	return out
}

// missFlowMod is the i-th non-matching rule: ip,nw_dst=missDst(i),
// no instructions (drop).
func missFlowMod(xid uint32, i int) []byte {
	var m flow.Match
	m.SetEthType(0x0800)
	if err := m.SetIPv4Dst(missDst(i), 32); err != nil {
		panic(err) // a /32 is always valid
	}
	return openflow.EncodeFlowMod(xid, &rule.FlowMod{
		Command: rule.FlowAdd, Priority: missPriority,
		BufferID: rule.NoBuffer, OutPort: rule.PortAny, OutGroup: rule.GroupAny,
		Match: m,
	})
}

// OpenFlow 1.3 message types the client uses.
const (
	ofVersion        = 4
	ofTypeHello      = 0
	ofTypeError      = 1
	ofTypeEchoReq    = 2
	ofTypeEchoReply  = 3
	ofTypeBarrierReq = 20
	ofTypeBarrierRep = 21
	ofHeaderLen      = 8
)

// ofClient is a controller's side of one OpenFlow 1.3 connection, enough
// to send FLOW_MODs and barriers and answer echoes.
type ofClient struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
	xid  uint32
}

// newOFClient exchanges HELLOs on an open connection.
func newOFClient(conn net.Conn) (*ofClient, error) {
	c := &ofClient{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), w: bufio.NewWriterSize(conn, 256<<10), xid: 1}
	c.w.Write(openflow.EncodeHello(c.xid))
	if err := c.w.Flush(); err != nil {
		return nil, fmt.Errorf("openflow: sending HELLO: %w", err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	defer conn.SetReadDeadline(time.Time{})
	for {
		typ, _, _, err := c.read()
		if err != nil {
			return nil, fmt.Errorf("openflow: waiting for HELLO: %w", err)
		}
		if typ == ofTypeHello {
			return c, nil
		}
	}
}

// read reads one message: its type, xid and body (after the header).
func (c *ofClient) read() (uint8, uint32, []byte, error) {
	var h [ofHeaderLen]byte
	if _, err := io.ReadFull(c.r, h[:]); err != nil {
		return 0, 0, nil, err
	}
	n := int(binary.BigEndian.Uint16(h[2:]))
	if n < ofHeaderLen {
		return 0, 0, nil, fmt.Errorf("openflow: message of length %d", n)
	}
	body := make([]byte, n-ofHeaderLen)
	if _, err := io.ReadFull(c.r, body); err != nil {
		return 0, 0, nil, err
	}
	return h[1], binary.BigEndian.Uint32(h[4:]), body, nil
}

// send queues messages (written by the next barrier).
func (c *ofClient) send(msgs ...[]byte) error {
	for _, m := range msgs {
		if _, err := c.w.Write(m); err != nil {
			return err
		}
	}
	return nil
}

// barrier sends a BARRIER_REQUEST after what is queued and waits for its
// reply, answering echoes; an OFPT_ERROR before it is returned as an error.
// The latency is from the request's write to the reply's arrival.
func (c *ofClient) barrier(timeout time.Duration) (time.Duration, error) {
	c.xid++
	xid := c.xid
	var req [ofHeaderLen]byte
	req[0], req[1] = ofVersion, ofTypeBarrierReq
	binary.BigEndian.PutUint16(req[2:], ofHeaderLen)
	binary.BigEndian.PutUint32(req[4:], xid)
	if err := c.w.Flush(); err != nil {
		return 0, fmt.Errorf("openflow: sending: %w", err)
	}
	start := time.Now()
	c.w.Write(req[:])
	if err := c.w.Flush(); err != nil {
		return 0, fmt.Errorf("openflow: sending BARRIER_REQUEST: %w", err)
	}
	c.conn.SetReadDeadline(start.Add(timeout))
	defer c.conn.SetReadDeadline(time.Time{})
	for {
		typ, rxid, body, err := c.read()
		if err != nil {
			return 0, fmt.Errorf("openflow: waiting for BARRIER_REPLY: %w", err)
		}
		switch typ {
		case ofTypeBarrierRep:
			if rxid == xid {
				return time.Since(start), nil
			}
		case ofTypeError:
			var et, ec uint16
			if len(body) >= 4 {
				et, ec = binary.BigEndian.Uint16(body), binary.BigEndian.Uint16(body[2:])
			}
			return 0, fmt.Errorf("openflow: the switch answered xid %d with OFPT_ERROR type %d code %d", rxid, et, ec)
		case ofTypeEchoReq:
			rep := make([]byte, ofHeaderLen+len(body))
			rep[0], rep[1] = ofVersion, ofTypeEchoReply
			binary.BigEndian.PutUint16(rep[2:], uint16(len(rep)))
			binary.BigEndian.PutUint32(rep[4:], rxid)
			copy(rep[ofHeaderLen:], body)
			c.w.Write(rep)
			c.w.Flush()
		}
	}
}

// installFlowMods sends 'msgs' in batches of 'batch' with a barrier after
// each: it returns the FLOW_MODs per second over the whole run (first send
// to last barrier reply) and the barrier latencies, sorted.
func (c *ofClient) installFlowMods(msgs [][]byte, batch int) (float64, []time.Duration, error) {
	var lat []time.Duration
	start := time.Now()
	for i := 0; i < len(msgs); i += batch {
		if err := c.send(msgs[i:min(i+batch, len(msgs))]...); err != nil {
			return 0, nil, fmt.Errorf("openflow: sending FLOW_MODs: %w", err)
		}
		d, err := c.barrier(60 * time.Second)
		if err != nil {
			return 0, nil, fmt.Errorf("after FLOW_MOD %d of %d: %w", min(i+batch, len(msgs)), len(msgs), err)
		}
		lat = append(lat, d)
	}
	rate := float64(len(msgs)) / time.Since(start).Seconds()
	slices.Sort(lat)
	return rate, lat, nil
}
