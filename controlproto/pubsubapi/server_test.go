package pubsubapi

import (
	"context"
	"errors"
	"net"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/gswitch/gswitch/tables/pubsub"
)

func serve(t *testing.T, cfg Config) PubSubClient {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	cc, err := grpc.Dial(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return NewPubSubClient(cc)
}

func code(err error) codes.Code { return status.Code(err) }

func TestService(t *testing.T) {
	tab := pubsub.New()
	barriers := 0
	c := serve(t, Config{Table: tab,
		Barrier: func(context.Context) error { barriers++; return nil },
		Port: func(p uint32) error {
			if p > 4 {
				return errors.New("no such port")
			}
			return nil
		},
		Counters: func() Counters { return Counters{UDPPort: 7400, Received: 3, PortDeliveries: map[uint32]uint64{2: 1}} }})
	ctx := context.Background()
	r1, err := c.Subscribe(ctx, &SubscribeRequest{Port: 1, Predicate: `x > 5 || s ^= "ab"`})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Subscribe(ctx, &SubscribeRequest{Port: 2, Predicate: `x = 7`})
	if err != nil {
		t.Fatal(err)
	}
	if barriers != 2 {
		t.Errorf("%d barriers after two changes", barriers)
	}
	if got := tab.Match(&pubsub.Event{Attrs: []pubsub.Attr{{Name: "x", Value: pubsub.Int(7)}}}); !slices.Equal(got, []uint32{1, 2}) {
		t.Errorf("match after Subscribe: %v", got)
	}
	if _, err := c.Subscribe(ctx, &SubscribeRequest{Port: 1, Predicate: `x >`}); code(err) != codes.InvalidArgument {
		t.Errorf("bad predicate: %v", err)
	}
	if _, err := c.Subscribe(ctx, &SubscribeRequest{Port: 9, Predicate: `x = 1`}); code(err) != codes.InvalidArgument {
		t.Errorf("bad port: %v", err)
	}
	if _, err := c.Subscribe(ctx, &SubscribeRequest{Port: 0, Predicate: `x = 1`}); code(err) != codes.InvalidArgument {
		t.Errorf("port 0: %v", err)
	}
	l, err := c.List(ctx, &ListRequest{})
	if err != nil || len(l.Subscriptions) != 2 || l.Subscriptions[0].Predicate != `x > 5 || s ^= "ab"` {
		t.Fatalf("List: %v %v", l, err)
	}
	x, err := c.Explain(ctx, &ExplainRequest{EventJson: `{"x": 7, "s": "zz"}`})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.Ports, []uint32{1, 2}) || len(x.Explanations) != 2 || !x.Explanations[0].Matched || x.Explanations[0].Constraints[0] != "x > 5" {
		t.Errorf("Explain: %v", x)
	}
	if _, err := c.Explain(ctx, &ExplainRequest{EventJson: `{"x": }`}); code(err) != codes.InvalidArgument {
		t.Errorf("bad event: %v", err)
	}
	if _, err := c.Explain(ctx, &ExplainRequest{EventJson: `{}`, Id: 99}); code(err) != codes.NotFound {
		t.Errorf("unknown id: %v", err)
	}
	rp, err := c.Subscribe(ctx, &SubscribeRequest{Port: 1, Predicate: `y = true`, Replace: true})
	if err != nil || !slices.Equal(rp.Removed, []uint64{r1.Id}) {
		t.Fatalf("replace: %v %v", rp, err)
	}
	if _, err := c.Unsubscribe(ctx, &UnsubscribeRequest{Ids: []uint64{r2.Id, 12345}}); code(err) != codes.NotFound {
		t.Errorf("unknown id: %v", err)
	}
	if _, ok := tab.Get(pubsub.ID(r2.Id)); !ok {
		t.Error("a refused Unsubscribe removed a subscription")
	}
	u, err := c.Unsubscribe(ctx, &UnsubscribeRequest{Ids: []uint64{r2.Id}})
	if err != nil || !slices.Equal(u.Removed, []uint64{r2.Id}) {
		t.Errorf("Unsubscribe: %v %v", u, err)
	}
	u, err = c.Unsubscribe(ctx, &UnsubscribeRequest{Port: 1})
	if err != nil || !slices.Equal(u.Removed, []uint64{rp.Id}) {
		t.Errorf("Unsubscribe port: %v %v", u, err)
	}
	if _, err := c.Unsubscribe(ctx, &UnsubscribeRequest{}); code(err) != codes.InvalidArgument {
		t.Errorf("empty Unsubscribe: %v", err)
	}
	st, err := c.Stats(ctx, &StatsRequest{})
	if err != nil || st.Subscriptions != 0 || st.UdpPort != 7400 || st.EventsReceived != 3 || len(st.PortDeliveries) != 1 {
		t.Errorf("Stats: %v %v", st, err)
	}
}

func TestBarrierFailure(t *testing.T) {
	c := serve(t, Config{Table: pubsub.New(), Barrier: func(context.Context) error { return errors.New("device lost") }})
	if _, err := c.Subscribe(context.Background(), &SubscribeRequest{Port: 1, Predicate: `x = 1`}); code(err) != codes.Unavailable {
		t.Errorf("failed barrier: %v", err)
	}
}

func TestPublisher(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	p, err := Dial(pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ev := pubsub.Event{Attrs: []pubsub.Attr{{Name: "x", Value: pubsub.Int(-3)}, {Name: "s", Value: pubsub.Str("hi")}}}
	if err := p.Publish(&ev); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pubsub.DecodeWire(buf[:n])
	if err != nil || got.String() != ev.String() {
		t.Fatalf("received %v, %v; want %v", got.String(), err, ev.String())
	}
	bad := pubsub.Event{Attrs: []pubsub.Attr{{Name: "", Value: pubsub.Int(1)}}}
	if err := p.Publish(&bad); err == nil {
		t.Error("an invalid event was published")
	}
}
