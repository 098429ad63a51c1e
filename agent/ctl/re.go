package ctl

import (
	"context"

	"github.com/gswitch/gswitch/datapath/re"
)

// REInfo is the answer to /v1/re: redundancy elimination on the WAN port
// (datapath/re), its settings and its counters. Enabled is false, and the
// rest zero, when it is off.
type REInfo struct {
	Enabled   bool
	Port      uint32
	Interface string
	Match     string // the pcap-filter expression; empty: every TCP segment
	LogBytes  int
	Impaired  bool // the impairment test stage is on
	Encoder   re.EncoderCounters
	Decoder   re.DecoderCounters
}

// RESource is what a daemon with redundancy elimination adds to Source:
//
//	GET /v1/re  REInfo  the WAN port's encoder and decoder counters
//
// A Source without it answers REInfo{} (off).
type RESource interface {
	RE() REInfo
}

func reInfo(src Source) any {
	if rs, ok := src.(RESource); ok {
		return rs.RE()
	}
	return REInfo{}
}

// RE returns /v1/re.
func (c *Client) RE(ctx context.Context) (REInfo, error) {
	var v REInfo
	return v, c.get(ctx, "/v1/re", &v)
}
