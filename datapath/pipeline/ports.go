package pipeline

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/tables/rule"
)

// swPort is one port of the switch: its device and the counters the
// switch keeps beside the device's own.
type swPort struct {
	no    uint32
	dev   Device
	added time.Time

	config    atomic.Uint32 // OpenFlow port config bits set by PORT_MOD
	rxDropped atomic.Uint64 // frames received and dropped: malformed, no rule, no route
	txDropped atomic.Uint64 // frames the device refused or could not take

	stages portStages  // receive stages (stage.go)
	split  atomic.Bool // stages and processing on two goroutines (split.go)
}

// OpenFlow port config and state bits (enum ofp_port_config, ofp_port_state)
// and the speed advertised for veth and other virtual links.
const (
	portConfigDown = 1 << 0
	portStateDown  = 1 << 0
	portStateLive  = 1 << 2
	feature10GbFD  = 1 << 6
	featureCopper  = 1 << 11
	speed10G       = 10_000_000 // kbps
)

// desc describes the port as ofp_port.
func (p *swPort) desc() rule.Port {
	l := p.dev.Link()
	op := rule.Port{No: p.no, Name: l.Name, Curr: feature10GbFD | featureCopper, CurrSpeed: speed10G, MaxSpeed: speed10G}
	copy(op.HWAddr[:], l.MAC)
	op.Config = p.config.Load()
	if !l.AdminUp {
		op.Config |= portConfigDown
	}
	if l.OperUp {
		op.State |= portStateLive
	} else {
		op.State |= portStateDown
	}
	return op
}

// up reports whether frames can leave through the port.
func (p *swPort) up() bool {
	l := p.dev.Link()
	return l.AdminUp && l.OperUp && !l.Deleted && p.config.Load()&portConfigDown == 0
}

// Ports describes the ports (OFPMP_PORT_DESC), ascending.
func (s *Switch) Ports() []rule.Port {
	out := make([]rule.Port, len(s.portList))
	for i, p := range s.portList {
		out[i] = p.desc()
	}
	return out
}

// PortStats returns the counters of one port, or of every port for
// PortAny: the device's receive and transmit counters, the frames the
// switch dropped (rx_dropped: malformed, table miss, no route; tx_dropped:
// refused by the device) and the kernel's ring drops (rx_over_err).
func (s *Switch) PortStats(no uint32) ([]rule.PortStats, error) {
	var out []rule.PortStats
	for _, p := range s.portList {
		if no == rule.PortAny || no == p.no {
			out = append(out, p.stats())
		}
	}
	if len(out) == 0 {
		return nil, rule.Errorf(rule.NoSuchPort, "no port %d", no)
	}
	return out, nil
}

func (p *swPort) stats() rule.PortStats {
	st, _ := p.dev.Stats() // a closed device still reports its counters
	d := time.Since(p.added)
	return rule.PortStats{
		PortNo: p.no, RxPackets: st.RxPackets, TxPackets: st.TxPackets, RxBytes: st.RxBytes, TxBytes: st.TxBytes,
		RxDropped: p.rxDropped.Load(), TxDropped: p.txDropped.Load() + st.TxErrors,
		RxErrors: st.RxErrors, TxErrors: st.TxErrors, RxOverErr: st.RingDrops,
		DurationSec: uint32(d / time.Second), DurationNsec: uint32(d % time.Second),
	}
}

// WatchPort forwards the link events of port no (a closed channel ends
// it) to the controller as PORT_STATUS until ctx is done: reason DELETE
// for an interface that went away, ADD for the first state after a
// deletion (afpacket re-attached the port to a new interface of the same
// name, as Open vSwitch adds the port back), MODIFY otherwise.
func (s *Switch) WatchPort(ctx context.Context, no uint32, events <-chan afpacket.LinkInfo) {
	p := s.ports[no]
	if p == nil || events == nil {
		return
	}
	deleted := false
	for {
		select {
		case <-ctx.Done():
			return
		case l, ok := <-events:
			if !ok {
				return
			}
			reason := uint8(rule.PortModified)
			switch {
			case l.Deleted:
				reason = rule.PortDeleted
			case deleted:
				reason = rule.PortAdded
				s.log.Info("port re-attached", "port", no, "link", l.String())
			}
			deleted = l.Deleted
			s.log.Info("port state", "port", no, "link", l.String())
			if c := s.controller(); c != nil {
				c.PortStatus(&rule.PortStatus{Reason: reason, Port: p.desc()})
			}
		}
	}
}
