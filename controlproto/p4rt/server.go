package p4rt

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	p4cfg "github.com/p4lang/p4runtime/go/p4/config/v1"
	p4v1 "github.com/p4lang/p4runtime/go/p4/v1"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/reflection"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// APIVersion is the P4Runtime version Capabilities reports.
const APIVersion = "1.4.1"

// Connection limits (Config): defaults, and the largest gRPC message in
// either direction (a bigger one is refused with RESOURCE_EXHAUSTED by
// gRPC itself).
const (
	DefaultConnectionTimeout = 10 * time.Second
	DefaultKeepaliveTime     = time.Minute
	DefaultKeepaliveTimeout  = 20 * time.Second
	MaxMessageSize           = 256 << 20
)

// Config configures a Server.
type Config struct {
	// DeviceID is the P4Runtime device id (default 1).
	DeviceID uint64
	// Switch is the switch the pipeline is realized on (required).
	Switch Switch
	// Tables is the switch's number of pipeline tables (0: enough); a
	// switch with fewer than NumPipelineTables cannot realize the program.
	Tables int
	// Claim is asked before a pipeline is first committed; an error refuses
	// the commit with FAILED_PRECONDITION (gswitchd: an OpenFlow controller
	// is connected). Nil: always granted.
	Claim func() error
	// TLS, when set, serves gRPC over TLS (with ClientAuth for mTLS).
	TLS *tls.Config
	// Reflection registers gRPC server reflection (for grpcurl).
	Reflection bool
	// QueueLen is each stream's send queue (default 4096); packet-ins
	// beyond it are dropped and counted.
	QueueLen int
	// ConnectionTimeout bounds a new connection's handshake: TLS, the
	// HTTP/2 client preface and settings (default 10 s; gRPC's own is
	// 120 s). A connection that sends part of it and goes silent is
	// closed then; until then it costs a goroutine and a socket, and
	// holds up no other connection.
	ConnectionTimeout time.Duration
	// KeepaliveTime: a connection quiet this long is pinged (default 1
	// min); KeepaliveTimeout: unanswered that long, it is closed (default
	// 20 s), and its streams end (a primary's end is an arbitration
	// change).
	KeepaliveTime, KeepaliveTimeout time.Duration
	Logger                          *slog.Logger
}

// Server is gswitch's P4Runtime server. See the package documentation.
type Server struct {
	p4v1.UnimplementedP4RuntimeServer
	cfg Config
	log *slog.Logger
	arb arbiter

	// wmu serializes the mutating RPCs (Write, SetForwardingPipelineConfig),
	// which makes them strictly serializable; mu guards the state below,
	// held for writing while a change is applied and for reading by Read.
	wmu       sync.Mutex
	mu        sync.RWMutex
	committed bool
	saved     *p4v1.ForwardingPipelineConfig // VERIFY_AND_SAVE, not yet committed
	config    *p4v1.ForwardingPipelineConfig // the committed one
	st        *store

	owns             atomic.Bool
	packetIns        atomic.Uint64
	packetInDrops    atomic.Uint64
	packetInFiltered atomic.Uint64
}

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Switch == nil {
		return nil, errors.New("p4rt: no switch")
	}
	if cfg.DeviceID == 0 {
		cfg.DeviceID = 1
	}
	if cfg.QueueLen <= 0 {
		cfg.QueueLen = 4096
	}
	if cfg.ConnectionTimeout <= 0 {
		cfg.ConnectionTimeout = DefaultConnectionTimeout
	}
	if cfg.KeepaliveTime <= 0 {
		cfg.KeepaliveTime = DefaultKeepaliveTime
	}
	if cfg.KeepaliveTimeout <= 0 {
		cfg.KeepaliveTimeout = DefaultKeepaliveTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Server{cfg: cfg, log: cfg.Logger, arb: arbiter{deviceID: cfg.DeviceID, roles: map[string]*roleState{}}, st: newStore()}, nil
}

// Owns reports whether a P4Runtime pipeline has been committed: from then
// on the P4Runtime server owns the pipeline tables.
func (s *Server) Owns() bool { return s.owns.Load() }

// Connections returns the number of arbitrated stream channels.
func (s *Server) Connections() int { return s.arb.count() }

// Stats are the server's counters.
type Stats struct {
	PacketIns, PacketInDrops uint64
	// PacketInsFiltered counts the datapath's packet-ins that the P4
	// program did not send to the CPU (INVALID_TTL): never sent.
	PacketInsFiltered uint64
	Entries           int
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.RLock()
	n := len(s.st.entries)
	s.mu.RUnlock()
	return Stats{PacketIns: s.packetIns.Load(), PacketInDrops: s.packetInDrops.Load(), PacketInsFiltered: s.packetInFiltered.Load(), Entries: n}
}

// GRPCServer returns a gRPC server with the P4Runtime service (and
// reflection when configured) registered, over TLS when configured.
func (s *Server) GRPCServer() *grpc.Server {
	var opts []grpc.ServerOption
	if s.cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.cfg.TLS)))
	}
	opts = append(opts, grpc.MaxRecvMsgSize(MaxMessageSize), grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.ConnectionTimeout(s.cfg.ConnectionTimeout),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: s.cfg.KeepaliveTime, Timeout: s.cfg.KeepaliveTimeout}),
		// Clients may ping every 10 s, streams open or not (grpc-go's
		// default, 5 min, would close a controller that keeps its
		// connection alive more often with GOAWAY "too_many_pings").
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	g := grpc.NewServer(opts...)
	p4v1.RegisterP4RuntimeServer(g, s)
	if s.cfg.Reflection {
		reflection.Register(g)
	}
	return g
}

// Serve serves P4Runtime on l until ctx is done.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	g := s.GRPCServer()
	stop := context.AfterFunc(ctx, g.Stop)
	defer stop()
	if err := g.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// transact runs f under Switch.TransactGroups.
func (s *Server) transact(f func(tx txn) error) error {
	return s.cfg.Switch.TransactGroups(func(fl func(*rule.FlowMod) error, gr func(*rule.GroupMod) error) error {
		return f(txn{flow: fl, group: gr})
	})
}

func rpcErr(e *Error) error { return grpcstatus.Error(e.Code, e.Msg) }

func (s *Server) checkDevice(id uint64) *Error {
	if id != s.cfg.DeviceID {
		return errf(codes.NotFound, "device_id %d: this server is device %d", id, s.cfg.DeviceID)
	}
	return nil
}

// Capabilities reports the P4Runtime version.
func (s *Server) Capabilities(context.Context, *p4v1.CapabilitiesRequest) (*p4v1.CapabilitiesResponse, error) {
	return &p4v1.CapabilitiesResponse{P4RuntimeApiVersion: APIVersion}, nil
}

// SetForwardingPipelineConfig verifies, saves and commits a pipeline
// config: its P4Info must describe gswitch's fixed pipeline (sameAsFixed).
func (s *Server) SetForwardingPipelineConfig(_ context.Context, req *p4v1.SetForwardingPipelineConfigRequest) (*p4v1.SetForwardingPipelineConfigResponse, error) {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return nil, rpcErr(err)
	}
	if err := s.arb.isPrimary(req.GetRole(), req.GetElectionId()); err != nil {
		return nil, rpcErr(err)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	verify := func() *Error {
		c := req.GetConfig()
		if c == nil || c.GetP4Info() == nil {
			return errf(codes.InvalidArgument, "%s needs a config with a P4Info", req.GetAction())
		}
		if err := sameAsFixed(c.GetP4Info()); err != nil {
			return errf(codes.InvalidArgument, "the P4Info does not describe gswitch's fixed pipeline: %v", err)
		}
		if t := s.cfg.Tables; t != 0 && t < NumPipelineTables {
			return errf(codes.InvalidArgument, "the switch has %d flow tables: gswitch's P4 pipeline needs %d (gswitchd --tables)", t, NumPipelineTables)
		}
		return nil
	}
	var err *Error
	switch req.GetAction() {
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY:
		err = verify()
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_SAVE:
		if err = verify(); err == nil {
			s.mu.Lock()
			s.saved = proto.Clone(req.GetConfig()).(*p4v1.ForwardingPipelineConfig)
			s.mu.Unlock()
		}
	case p4v1.SetForwardingPipelineConfigRequest_VERIFY_AND_COMMIT:
		if err = verify(); err == nil {
			err = s.commit(req.GetConfig(), true)
		}
	case p4v1.SetForwardingPipelineConfigRequest_COMMIT:
		s.mu.RLock()
		saved := s.saved
		s.mu.RUnlock()
		switch {
		case req.GetConfig() != nil:
			err = errf(codes.InvalidArgument, "COMMIT takes no config (it commits the one VERIFY_AND_SAVE saved)")
		case saved == nil:
			err = errf(codes.NotFound, "COMMIT: no config was saved with VERIFY_AND_SAVE")
		default:
			err = s.commit(saved, true)
		}
	case p4v1.SetForwardingPipelineConfigRequest_RECONCILE_AND_COMMIT:
		// The pipeline is fixed, so a config that passes verify is the
		// one in place: the forwarding state is kept as it is.
		if err = verify(); err == nil {
			err = s.commit(req.GetConfig(), false)
		}
	default:
		err = errf(codes.InvalidArgument, "action %s", req.GetAction())
	}
	if err != nil {
		return nil, rpcErr(err)
	}
	return &p4v1.SetForwardingPipelineConfigResponse{}, nil
}

// commit realizes a verified config; clear empties the P4 tables (for
// VERIFY_AND_COMMIT and COMMIT; RECONCILE_AND_COMMIT keeps them once a
// pipeline is in place).
func (s *Server) commit(c *p4v1.ForwardingPipelineConfig, clear bool) *Error {
	if !s.owns.Load() && s.cfg.Claim != nil {
		if err := s.cfg.Claim(); err != nil {
			return errf(codes.FailedPrecondition, "the switch cannot be handed to P4Runtime: %v", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if clear || !s.committed {
		err := s.transact(func(tx txn) error { return s.st.reset(tx, fixed) })
		if err != nil {
			return errf(codes.Internal, "realizing the pipeline: %v", err)
		}
	}
	s.config = proto.Clone(c).(*p4v1.ForwardingPipelineConfig)
	s.saved = nil
	s.committed = true
	s.owns.Store(true)
	s.log.Info("p4rt: pipeline committed", "cookie", c.GetCookie().GetCookie(), "cleared", clear)
	return nil
}

// GetForwardingPipelineConfig returns the committed config, or no config
// before one is committed.
func (s *Server) GetForwardingPipelineConfig(_ context.Context, req *p4v1.GetForwardingPipelineConfigRequest) (*p4v1.GetForwardingPipelineConfigResponse, error) {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return nil, rpcErr(err)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.config == nil {
		return &p4v1.GetForwardingPipelineConfigResponse{}, nil
	}
	c := s.config
	out := &p4v1.ForwardingPipelineConfig{Cookie: proto.Clone(c.GetCookie()).(*p4v1.ForwardingPipelineConfig_Cookie)}
	if c.GetCookie() == nil {
		out.Cookie = nil
	}
	switch req.GetResponseType() {
	case p4v1.GetForwardingPipelineConfigRequest_ALL:
		out.P4Info = proto.Clone(c.GetP4Info()).(*p4cfg.P4Info)
		out.P4DeviceConfig = slices.Clone(c.GetP4DeviceConfig())
	case p4v1.GetForwardingPipelineConfigRequest_COOKIE_ONLY:
	case p4v1.GetForwardingPipelineConfigRequest_P4INFO_AND_COOKIE:
		out.P4Info = proto.Clone(c.GetP4Info()).(*p4cfg.P4Info)
	case p4v1.GetForwardingPipelineConfigRequest_DEVICE_CONFIG_AND_COOKIE:
		out.P4DeviceConfig = slices.Clone(c.GetP4DeviceConfig())
	default:
		return nil, grpcstatus.Errorf(codes.InvalidArgument, "response_type %d", req.GetResponseType())
	}
	return &p4v1.GetForwardingPipelineConfigResponse{Config: out}, nil
}

// Write applies a batch of updates; see write.go.
func (s *Server) Write(_ context.Context, req *p4v1.WriteRequest) (*p4v1.WriteResponse, error) {
	if err := s.checkDevice(req.GetDeviceId()); err != nil {
		return nil, rpcErr(err)
	}
	if err := s.arb.isPrimary(req.GetRole(), req.GetElectionId()); err != nil {
		return nil, rpcErr(err)
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.committed {
		return nil, grpcstatus.Error(codes.FailedPrecondition, "no forwarding pipeline config has been committed")
	}
	errs, top := s.write(req.GetUpdates(), req.GetAtomicity())
	if top != nil {
		return nil, rpcErr(top)
	}
	if err := batchStatus(errs); err != nil {
		return nil, err
	}
	return &p4v1.WriteResponse{}, nil
}

// batchStatus builds the Write status (§12.3): OK when every update
// succeeded, else UNKNOWN with one p4.v1.Error per update, in order.
func batchStatus(errs []*Error) error {
	if !slices.ContainsFunc(errs, func(e *Error) bool { return e != nil }) {
		return nil
	}
	st := &status.Status{Code: int32(codes.Unknown), Message: "write failure: see the details for each update"}
	failed := 0
	for _, e := range errs {
		pe := &p4v1.Error{CanonicalCode: int32(codes.OK)}
		if e != nil {
			pe.CanonicalCode, pe.Message = int32(e.Code), e.Msg
			failed++
		}
		a, err := anypb.New(pe)
		if err != nil {
			return grpcstatus.Errorf(codes.Internal, "encoding error details: %v", err)
		}
		st.Details = append(st.Details, a)
	}
	st.Message = fmt.Sprintf("write failure: %d of %d updates failed (see the details)", failed, len(errs))
	return grpcstatus.ErrorProto(st)
}

// PacketIn delivers a packet the pipeline punted (send_to_cpu) to every
// primary, with its ingress_port; it returns how many streams took it.
//
// Only packets the P4 program sends to the CPU reach the client: outputs
// to CONTROLLER (send_to_cpu, a replica to the CPU port). Their OpenFlow
// reason is ACTION, or NO_MATCH when the last entry the packet hit was a
// priority-0 match-all one (the ACL's default entry: OpenFlow calls that
// the table-miss entry). The datapath's INVALID_TTL packet-ins (a
// decrement_ttl or set_next_hop that found TTL 0 or 1) are OpenFlow's,
// not the program's: gswitch.p4 drops such a packet (meta.ttl_expired),
// so they are dropped here and counted in Stats.PacketInsFiltered.
func (s *Server) PacketIn(pi *rule.PacketIn) int {
	if !s.owns.Load() {
		return 0
	}
	if pi.Reason == rule.ReasonInvalidTTL {
		s.packetInFiltered.Add(1)
		return 0
	}
	port, _ := pi.Match.GetUint(flow.FieldInPort)
	m := &p4v1.StreamMessageResponse{Update: &p4v1.StreamMessageResponse_Packet{Packet: &p4v1.PacketIn{
		Payload:  slices.Clone(pi.Data),
		Metadata: []*p4v1.PacketMetadata{{MetadataId: 1, Value: canonical(uint32Bytes(uint32(port)))}},
	}}}
	n := 0
	for _, c := range s.arb.primaries() {
		if c.push(m, false) {
			n++
		} else {
			s.packetInDrops.Add(1)
		}
	}
	if n > 0 {
		s.packetIns.Add(1)
	}
	return n
}

func uint32Bytes(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }
