package pipeline

import (
	"fmt"

	"github.com/gswitch/gswitch/tables/rule"
)

// PortMod sets the OpenFlow configuration bits of a port (the agent has
// checked the port and its hardware address) and reports the change to
// the controllers with PORT_STATUS (reason MODIFY). The datapath honours
// them: PORT_DOWN stops the port sending and receiving, NO_RECV drops
// what it receives, NO_FWD drops what would leave through it, and
// NO_PACKET_IN keeps its packets from the controller. The Linux
// interface itself is not changed.
func (s *Switch) PortMod(pm *rule.PortMod) error {
	p := s.ports[pm.PortNo]
	if p == nil {
		return rule.Errorf(rule.NoSuchPort, "no port %d", pm.PortNo)
	}
	const known = rule.PortConfigDown | rule.PortConfigNoRecv | rule.PortConfigNoFwd | rule.PortConfigNoPacketIn
	for {
		old := p.config.Load()
		if p.config.CompareAndSwap(old, pm.Apply(old)&known) {
			break
		}
	}
	s.log.Info("port config", "port", pm.PortNo, "config", fmt.Sprintf("%#x", p.config.Load()))
	if c := s.controller(); c != nil {
		c.PortStatus(&rule.PortStatus{Reason: rule.PortModified, Port: p.desc()})
	}
	return nil
}

// TableMod accepts a TABLE_MOD: OpenFlow 1.3's table configuration bits
// are deprecated and carry nothing to act on.
func (s *Switch) TableMod(*rule.TableMod) error { return nil }

// Queues returns no queues (one queue per port, without configuration),
// and OFPQOFC_BAD_PORT for a port that does not exist.
func (s *Switch) Queues(port uint32) ([]rule.Queue, error) {
	if port != rule.PortAny && s.ports[port] == nil {
		return nil, rule.Errorf(rule.NoSuchPort, "no port %d", port)
	}
	return []rule.Queue{}, nil
}

// QueueStats returns no counters: there are no queues.
func (s *Switch) QueueStats(port, _ uint32) ([]rule.QueueStats, error) {
	if port != rule.PortAny && s.ports[port] == nil {
		return nil, rule.Errorf(rule.NoSuchPort, "no port %d", port)
	}
	return []rule.QueueStats{}, nil
}

// receives reports whether frames received on the port enter the
// pipeline (not PORT_DOWN or NO_RECV).
func (p *swPort) receives() bool {
	return p.config.Load()&(rule.PortConfigDown|rule.PortConfigNoRecv) == 0
}

// forwards reports whether the pipeline may send through the port (not
// NO_FWD; PORT_DOWN is in up).
func (p *swPort) forwards() bool {
	return p.config.Load()&rule.PortConfigNoFwd == 0
}

// packetIns reports whether the port's packets may go to the controller.
func (p *swPort) packetIns() bool {
	return p.config.Load()&rule.PortConfigNoPacketIn == 0
}
