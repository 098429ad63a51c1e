package pubsubapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// Counters are the datapath's event counters as Stats reports them.
type Counters struct {
	UDPPort                                 uint16
	Received, Malformed, Matched, Delivered uint64
	PortDeliveries                          map[uint32]uint64
}

// Config is a Server's configuration.
type Config struct {
	Table *pubsub.Table
	// Barrier returns once every change made to Table before the call is
	// visible to the datapath's matching. nil: the table's own writer lock
	// is the barrier (the CPU matcher reads the table directly, and a
	// change is visible to every batch matched after the writer returns).
	// A device backend passes its push of the pending bubbles.
	Barrier func(context.Context) error
	// Port checks that a subscription may name port (it exists); nil:
	// every port 1..pubsub.MaxPorts-1.
	Port func(port uint32) error
	// Counters reports the datapath's counters; nil: zeros.
	Counters func() Counters
}

// Server is the PubSub gRPC service over a subscription table.
//
// Concurrency: writeMu serializes the changing calls (Subscribe,
// Unsubscribe) from the table change through the barrier, so a response
// is sent only after its change, and every change before it, is visible;
// readers (List, Stats, Explain) take only the table's own lock. Lock
// order: writeMu > the table's lock (taken and released inside its
// calls); the barrier is called under writeMu and must not call back.
type Server struct {
	UnimplementedPubSubServer
	cfg     Config
	writeMu sync.Mutex
}

// New returns the service for cfg.Table.
func New(cfg Config) (*Server, error) {
	if cfg.Table == nil {
		return nil, errors.New("pubsubapi: no table")
	}
	return &Server{cfg: cfg}, nil
}

// Register registers the service on g.
func (s *Server) Register(g *grpc.Server) { RegisterPubSubServer(g, s) }

// Serve serves the service alone on l until ctx is done.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	g := grpc.NewServer()
	s.Register(g)
	stop := context.AfterFunc(ctx, g.Stop)
	defer stop()
	err := g.Serve(l)
	if ctx.Err() != nil || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

func (s *Server) checkPort(p uint32) error {
	if p == 0 || p >= pubsub.MaxPorts {
		return status.Errorf(codes.InvalidArgument, "port %d: want 1..%d", p, pubsub.MaxPorts-1)
	}
	if s.cfg.Port != nil {
		if err := s.cfg.Port(p); err != nil {
			return status.Errorf(codes.InvalidArgument, "port %d: %v", p, err)
		}
	}
	return nil
}

// barrier waits for the change to reach the datapath; called under writeMu.
func (s *Server) barrier(ctx context.Context) error {
	if s.cfg.Barrier == nil {
		return nil
	}
	if err := s.cfg.Barrier(ctx); err != nil {
		return status.Errorf(codes.Unavailable, "the change is made but the datapath did not confirm it: %v", err)
	}
	return nil
}

// Subscribe adds a subscription (or replaces the port's predicate).
func (s *Server) Subscribe(ctx context.Context, r *SubscribeRequest) (*SubscribeResponse, error) {
	if err := s.checkPort(r.Port); err != nil {
		return nil, err
	}
	fs, err := pubsub.ParsePredicate(r.Predicate)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "predicate: %v", err)
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	resp := &SubscribeResponse{}
	if r.Replace {
		id, old, err := s.cfg.Table.SetPort(r.Port, fs)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		resp.Id = uint64(id)
		for _, o := range old {
			resp.Removed = append(resp.Removed, uint64(o))
		}
	} else {
		id, err := s.cfg.Table.Add(r.Port, fs)
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		resp.Id = uint64(id)
	}
	return resp, s.barrier(ctx)
}

// Unsubscribe removes subscriptions by id (all of them or none: an
// unknown id is NOT_FOUND and removes nothing) or every one of a port.
func (s *Server) Unsubscribe(ctx context.Context, r *UnsubscribeRequest) (*UnsubscribeResponse, error) {
	if (len(r.Ids) == 0) == (r.Port == 0) {
		return nil, status.Error(codes.InvalidArgument, "give either ids or a port")
	}
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	resp := &UnsubscribeResponse{}
	if r.Port != 0 {
		for _, id := range s.cfg.Table.RemovePort(r.Port) {
			resp.Removed = append(resp.Removed, uint64(id))
		}
		slices.Sort(resp.Removed)
		return resp, s.barrier(ctx)
	}
	for _, id := range r.Ids {
		if _, ok := s.cfg.Table.Get(pubsub.ID(id)); !ok {
			return nil, status.Errorf(codes.NotFound, "no subscription %d", id)
		}
	}
	for _, id := range r.Ids {
		if err := s.cfg.Table.Remove(pubsub.ID(id)); err == nil { // a repeated id: removed once
			resp.Removed = append(resp.Removed, id)
		}
	}
	return resp, s.barrier(ctx)
}

func describe(sub pubsub.Subscription) *Subscription {
	return &Subscription{Id: uint64(sub.ID), Port: sub.Port, Predicate: pubsub.FormatPredicate(sub.Filters), Matches: sub.Matches}
}

// List describes the subscriptions (of one port, or all), by id.
func (s *Server) List(_ context.Context, r *ListRequest) (*ListResponse, error) {
	resp := &ListResponse{}
	for _, sub := range s.cfg.Table.List() {
		if r.Port == 0 || sub.Port == r.Port {
			resp.Subscriptions = append(resp.Subscriptions, describe(sub))
		}
	}
	return resp, nil
}

// Stats reports the table's sizes, the match counters and the datapath's.
func (s *Server) Stats(context.Context, *StatsRequest) (*StatsResponse, error) {
	st := s.cfg.Table.Stats()
	resp := &StatsResponse{Subscriptions: uint64(st.Subscriptions), Filters: uint64(st.Filters),
		Constraints: uint64(st.Constraints), Names: uint64(st.Names), Ports: uint64(st.Ports)}
	for _, sub := range s.cfg.Table.List() {
		resp.SubscriptionMatches = append(resp.SubscriptionMatches, &Subscription{Id: uint64(sub.ID), Port: sub.Port, Matches: sub.Matches})
	}
	if s.cfg.Counters != nil {
		k := s.cfg.Counters()
		resp.UdpPort = uint32(k.UDPPort)
		resp.EventsReceived, resp.EventsMalformed, resp.EventsMatched, resp.EventsDelivered = k.Received, k.Malformed, k.Matched, k.Delivered
		for _, p := range slices.Sorted(maps.Keys(k.PortDeliveries)) {
			resp.PortDeliveries = append(resp.PortDeliveries, &PortDeliveries{Port: p, Events: k.PortDeliveries[p]})
		}
	}
	return resp, nil
}

// Explain evaluates an event against one subscription or all of them.
func (s *Server) Explain(_ context.Context, r *ExplainRequest) (*ExplainResponse, error) {
	ev, err := pubsub.DecodeJSON([]byte(r.EventJson))
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "event: %v", err)
	}
	xs, err := s.cfg.Table.Explain(&ev, pubsub.ID(r.Id))
	if err != nil {
		return nil, status.Error(codes.NotFound, err.Error())
	}
	resp := &ExplainResponse{Ports: s.cfg.Table.Match(&ev)}
	subs := map[pubsub.ID]pubsub.Subscription{}
	for _, x := range xs {
		sub, ok := subs[x.ID]
		if !ok {
			if sub, ok = s.cfg.Table.Get(x.ID); !ok {
				continue // removed meanwhile
			}
			subs[x.ID] = sub
		}
		if x.Filter >= len(sub.Filters) {
			continue
		}
		e := &Explanation{Id: uint64(x.ID), Port: x.Port, Filter: uint32(x.Filter), Satisfied: x.Satisfied, Matched: x.Matched}
		for _, c := range sub.Filters[x.Filter] {
			e.Constraints = append(e.Constraints, c.String())
		}
		resp.Explanations = append(resp.Explanations, e)
	}
	return resp, nil
}

// String names the service for logs.
func (s *Server) String() string {
	return fmt.Sprintf("pubsubapi(%d subscriptions)", s.cfg.Table.Stats().Subscriptions)
}
