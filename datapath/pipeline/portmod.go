package pipeline

import (
	"fmt"

	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/controlproto/openflow"
)

// PortMod sets the OpenFlow configuration bits of a port (the agent has
// checked the port and its hardware address) and reports the change to
// the controllers with PORT_STATUS (reason MODIFY). The datapath honours
// them: PORT_DOWN stops the port sending and receiving, NO_RECV drops
// what it receives, NO_FWD drops what would leave through it, and
// NO_PACKET_IN keeps its packets from the controller. The Linux
// interface itself is not changed.
func (s *Switch) PortMod(pm *openflow.PortMod) error {
	p := s.ports[pm.PortNo]
	if p == nil {
		return &openflow.Error{Type: ofp.ErrTypePortModFailed, Code: ofp.ErrCodePortModFailedBadPort, Detail: fmt.Sprintf("no port %d", pm.PortNo)}
	}
	const known = openflow.PortConfigDown | openflow.PortConfigNoRecv | openflow.PortConfigNoFwd | openflow.PortConfigNoPacketIn
	for {
		old := p.config.Load()
		if p.config.CompareAndSwap(old, pm.Apply(old)&known) {
			break
		}
	}
	s.log.Info("port config", "port", pm.PortNo, "config", fmt.Sprintf("%#x", p.config.Load()))
	if c := s.controller(); c != nil {
		c.PortStatus(&openflow.PortStatus{Reason: openflow.PortModified, Port: p.desc()})
	}
	return nil
}

// TableMod accepts a TABLE_MOD: OpenFlow 1.3's table configuration bits
// are deprecated and carry nothing to act on.
func (s *Switch) TableMod(*openflow.TableMod) error { return nil }

// Queues returns no queues (one queue per port, without configuration),
// and OFPQOFC_BAD_PORT for a port that does not exist.
func (s *Switch) Queues(port uint32) ([]openflow.Queue, error) {
	if port != openflow.PortAny && s.ports[port] == nil {
		return nil, &openflow.Error{Type: ofp.ErrTypeQueueOpFailed, Code: ofp.ErrCodeQueueOpFailedBadPort, Detail: fmt.Sprintf("no port %d", port)}
	}
	return []openflow.Queue{}, nil
}

// QueueStats returns no counters: there are no queues.
func (s *Switch) QueueStats(port, _ uint32) ([]openflow.QueueStats, error) {
	if port != openflow.PortAny && s.ports[port] == nil {
		return nil, &openflow.Error{Type: ofp.ErrTypeQueueOpFailed, Code: ofp.ErrCodeQueueOpFailedBadPort, Detail: fmt.Sprintf("no port %d", port)}
	}
	return []openflow.QueueStats{}, nil
}

// receives reports whether frames received on the port enter the
// pipeline (not PORT_DOWN or NO_RECV).
func (p *swPort) receives() bool {
	return p.config.Load()&(openflow.PortConfigDown|openflow.PortConfigNoRecv) == 0
}

// forwards reports whether the pipeline may send through the port (not
// NO_FWD; PORT_DOWN is in up).
func (p *swPort) forwards() bool {
	return p.config.Load()&openflow.PortConfigNoFwd == 0
}

// packetIns reports whether the port's packets may go to the controller.
func (p *swPort) packetIns() bool {
	return p.config.Load()&openflow.PortConfigNoPacketIn == 0
}
