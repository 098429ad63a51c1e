package p4rt

import (
	"slices"
	"time"

	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/grpc/codes"

	"github.com/gswitch/gswitch/tables/rule"
)

// StreamChannel runs one controller's stream: arbitration (the first
// message must be a MasterArbitrationUpdate), packet-out from the primary,
// and, from the server, arbitration notices and packet-ins. Arbitration
// errors end the stream with their code; a bad packet-out gets a
// StreamError and the stream goes on.
func (s *Server) StreamChannel(stream p4v1.P4Runtime_StreamChannelServer) error {
	c := &client{send: make(chan *p4v1.StreamMessageResponse, s.cfg.QueueLen), done: make(chan struct{}), overflow: make(chan struct{})}
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for {
			select {
			case <-c.done:
				return
			default:
			}
			select {
			case m := <-c.send:
				if err := stream.Send(m); err != nil {
					return
				}
			case <-c.done:
				return
			}
		}
	}()
	defer func() {
		s.arb.leave(c)
		close(c.done)
		// The sender finishes its message in flight, unless the client
		// stopped reading: then its Send is blocked by flow control and
		// fails once this handler has returned and the stream is reset.
		select {
		case <-sent:
		case <-c.overflow:
		case <-time.After(time.Second):
		}
	}()
	reqs := make(chan *p4v1.StreamMessageRequest)
	go func() {
		defer close(reqs)
		for {
			req, err := stream.Recv()
			if err != nil {
				return // the client closed the stream, or the handler returned
			}
			select {
			case reqs <- req:
			case <-c.done:
				return
			}
		}
	}()
	for {
		var req *p4v1.StreamMessageRequest
		select {
		case r, ok := <-reqs:
			if !ok {
				return nil
			}
			req = r
		case <-c.overflow:
			return rpcErr(errf(codes.ResourceExhausted, "the stream's send queue is full (%d messages): the client does not read", s.cfg.QueueLen))
		}
		switch u := req.GetUpdate().(type) {
		case *p4v1.StreamMessageRequest_Arbitration:
			if err := s.arb.update(c, u.Arbitration); err != nil {
				return rpcErr(err)
			}
		case *p4v1.StreamMessageRequest_Packet:
			if err := s.packetOut(c, u.Packet); err != nil {
				c.push(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Error{Error: &p4v1.StreamError{
					CanonicalCode: int32(err.Code), Message: err.Msg,
					Details: &p4v1.StreamError_PacketOut{PacketOut: &p4v1.PacketOutError{PacketOut: u.Packet}},
				}}}, false)
			}
		default:
			if !c.arbitrated {
				return rpcErr(errf(codes.FailedPrecondition, "the first message of a stream must be a MasterArbitrationUpdate"))
			}
			c.push(&p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Error{Error: &p4v1.StreamError{
				CanonicalCode: int32(codes.Unimplemented), Message: "gswitch's pipeline has no digests",
				Details: &p4v1.StreamError_Other{Other: &p4v1.StreamOtherError{}},
			}}}, false)
		}
	}
}

// packetOut checks a PacketOut (the sender is a primary, the pipeline is
// committed, the metadata is exactly egress_port, naming a port of the
// switch) and sends its payload out of that port.
func (s *Server) packetOut(c *client, po *p4v1.PacketOut) *Error {
	if !s.arb.clientIsPrimary(c) {
		return errf(codes.PermissionDenied, "only the primary controller may send packets")
	}
	if !s.owns.Load() {
		return errf(codes.FailedPrecondition, "no forwarding pipeline config has been committed")
	}
	port, err := egressPort(po.GetMetadata())
	if err != nil {
		return err
	}
	if len(po.GetPayload()) < 14 {
		return errf(codes.InvalidArgument, "payload of %d bytes: an Ethernet frame has at least 14", len(po.GetPayload()))
	}
	if !slices.ContainsFunc(s.cfg.Switch.Ports(), func(p rule.Port) bool { return p.No == port }) {
		return errf(codes.InvalidArgument, "egress_port %d: the switch has no such port", port)
	}
	out := &rule.PacketOut{BufferID: rule.NoBuffer, InPort: rule.PortController, Data: slices.Clone(po.GetPayload()),
		Actions: []rule.Action{{Kind: rule.ActOutput, Port: port, MaxLen: rule.MaxLenNoBuffer}}}
	if err := s.cfg.Switch.PacketOut(out); err != nil {
		return errf(codes.Internal, "packet-out: %v", err)
	}
	return nil
}

// egressPort reads the packet_out header: one metadata field, id 1
// (egress_port, bit<32>).
func egressPort(md []*p4v1.PacketMetadata) (uint32, *Error) {
	var port []byte
	for _, m := range md {
		if m.GetMetadataId() != 1 {
			return 0, errf(codes.InvalidArgument, "packet_out metadata id %d does not exist (egress_port is 1)", m.GetMetadataId())
		}
		if port != nil {
			return 0, errf(codes.InvalidArgument, "packet_out metadata egress_port given twice")
		}
		v, err := fit(m.GetValue(), 32, "packet_out egress_port")
		if err != nil {
			return 0, err
		}
		port = v
	}
	if port == nil {
		return 0, errf(codes.InvalidArgument, "packet_out metadata egress_port is missing")
	}
	return uint32(toUint(port)), nil
}
