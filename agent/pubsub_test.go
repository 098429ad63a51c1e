package agent

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/controlproto/pubsubapi"
	"github.com/gswitch/gswitch/datapath/eventfwd"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/pubsub"
)

func TestPubSubConfig(t *testing.T) {
	file := filepath.Join(t.TempDir(), "subs.txt")
	if err := os.WriteFile(file, []byte("# file\n1: y = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := func() Config {
		c := DefaultConfig()
		c.Ports = []PortConfig{{Number: 1, Interface: "lo"}}
		return c
	}
	ok := base()
	ok.PubSub = PubSubConfig{UDPPort: 7400, Subscriptions: []string{`1: x > 5 || s ^= "a"`}, SubscriptionsFile: file, APIListen: "127.0.0.1:0"}
	st, err := check(ok)
	if err != nil {
		t.Fatal(err)
	}
	if !st.pubsub.on || len(st.pubsub.specs) != 2 || len(st.pubsub.ports) != 1 || st.pubsub.ports[0] != 1 {
		t.Fatalf("settings %+v", st.pubsub)
	}
	if st, err := check(base()); err != nil || st.pubsub.on {
		t.Fatalf("default: %+v %v", st.pubsub, err)
	}
	for _, c := range []struct {
		ps   PubSubConfig
		want string
	}{
		{PubSubConfig{Subscriptions: []string{"1: x = 1"}}, "udp_port is needed"},
		{PubSubConfig{UDPPort: 70000}, "udp_port 70000"},
		{PubSubConfig{UDPPort: 7400, Ports: []uint32{2}}, "2 is not a configured port"},
		{PubSubConfig{UDPPort: 7400, Subscriptions: []string{"1: x >"}}, "line 1"},
		{PubSubConfig{UDPPort: 7400, Subscriptions: []string{"5: x = 1"}}, "port 5 is not a configured port"},
		{PubSubConfig{UDPPort: 7400, SubscriptionsFile: file + ".missing"}, "subscriptions_file"},
		{PubSubConfig{UDPPort: 7400, APIListen: "nowhere"}, "api_listen"},
	} {
		cfg := base()
		cfg.PubSub = c.ps
		_, err := check(cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.ps, err, c.want)
		}
	}
}

// TestPubSubAgent runs an agent with content-based forwarding on the
// loopback interface: the subscriptions of the file, the gRPC service,
// /v1/pubsub and the metrics.
func TestPubSubAgent(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("an AF_PACKET port needs root")
	}
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Ports = []PortConfig{{Number: 1, Interface: "lo"}}
	cfg.PubSub = PubSubConfig{UDPPort: 7400, Subscriptions: []string{"1: x > 5"}, APIListen: "127.0.0.1:0"}
	a, err := New(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, a)
	if a.PubSubTable() == nil || a.PubSubStage() == nil || a.PubSubAPIAddr() == nil {
		t.Fatal("pubsub parts missing")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cc, err := grpc.DialContext(ctx, a.PubSubAPIAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	api := pubsubapi.NewPubSubClient(cc)
	r, err := api.Subscribe(ctx, &pubsubapi.SubscribeRequest{Port: 1, Predicate: `s *= "b"`})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Subscribe(ctx, &pubsubapi.SubscribeRequest{Port: 2, Predicate: `s *= "b"`}); err == nil {
		t.Error("a subscription of a port the switch lacks was accepted")
	}
	l, err := api.List(ctx, &pubsubapi.ListRequest{})
	if err != nil || len(l.Subscriptions) != 2 || l.Subscriptions[1].Id != r.Id {
		t.Fatalf("List: %v %v", l, err)
	}
	cl := ctl.NewClient(a.CtlSocket())
	defer cl.Close()
	info, err := cl.PubSub(ctx)
	if err != nil || !info.Enabled || info.UDPPort != 7400 || info.Table.Subscriptions != 2 || len(info.Subscriptions) != 2 ||
		info.Subscriptions[0].Predicate != "x > 5" || info.APIListen == "" {
		t.Fatalf("/v1/pubsub: %+v %v", info, err)
	}
	resp, err := http.Get("http://" + a.MetricsAddr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"gswitch_pubsub_events_received_total 0\n", "gswitch_pubsub_events_malformed_total 0\n",
		"gswitch_pubsub_subscriptions 2\n", "gswitch_pubsub_events_delivered_total 0\n"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// Without pubsub, /v1/pubsub says it is off.
func TestPubSubOff(t *testing.T) {
	a, err := New(testConfig(t.TempDir()), quietLog())
	if err != nil {
		t.Fatal(err)
	}
	startAgent(t, a)
	cl := ctl.NewClient(a.CtlSocket())
	defer cl.Close()
	info, err := cl.PubSub(context.Background())
	if err != nil || info.Enabled || a.PubSubTable() != nil {
		t.Fatalf("/v1/pubsub without pubsub: %+v %v", info, err)
	}
}

// TestPubSubAgentDevice runs the agent with backend auto and a Go device
// in place of the GPU matcher (gpu.LayoutDevice: the kernel's computation
// over the mirrored layout words): /v1/pubsub names it, and a subscription
// acknowledged by the API has reached it as a layout update (the barrier).
// Without a device (this build's gpu.OpenEventDevice), auto falls back to
// the CPU.
func TestPubSubAgentDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("an AF_PACKET port needs root")
	}
	run := func(open func(*pubsub.Layout) (eventfwd.Device, error)) (*Agent, *ctl.Client) {
		saved, built := openEventDevice, eventDeviceBuilt
		openEventDevice, eventDeviceBuilt = open, true
		t.Cleanup(func() { openEventDevice, eventDeviceBuilt = saved, built })
		dir := t.TempDir()
		cfg := testConfig(dir)
		cfg.Backend = "auto"
		cfg.Ports = []PortConfig{{Number: 1, Interface: "lo"}}
		cfg.PubSub = PubSubConfig{UDPPort: 7400, Subscriptions: []string{"1: x > 5"}, APIListen: "127.0.0.1:0", MinBatch: 4}
		a, err := New(cfg, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		startAgent(t, a)
		cl := ctl.NewClient(a.CtlSocket())
		t.Cleanup(func() { cl.Close() })
		return a, cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a, cl := run(func(l *pubsub.Layout) (eventfwd.Device, error) {
		d := &gpu.LayoutDevice{}
		return d, d.Update(bubble.Update{Full: l.Image.Clone()}, l.Names)
	})
	cc, err := grpc.DialContext(ctx, a.PubSubAPIAddr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := pubsubapi.NewPubSubClient(cc).Subscribe(ctx, &pubsubapi.SubscribeRequest{Port: 1, Predicate: `s *= "b"`}); err != nil {
		t.Fatal(err)
	}
	info, err := cl.PubSub(ctx)
	if err != nil || !strings.HasPrefix(info.Matcher, "layout: ") || info.Device == nil || info.Device.Updates != 1 || info.Device.MinBatch != 4 {
		t.Fatalf("/v1/pubsub with a device: matcher %q, device %+v, %v", info.Matcher, info.Device, err)
	}
	_, cl = run(func(l *pubsub.Layout) (eventfwd.Device, error) { return gpu.OpenEventDevice(l) })
	if info, err := cl.PubSub(ctx); err != nil || (info.Matcher != "cpu" && !strings.HasPrefix(info.Matcher, "cuda")) {
		t.Fatalf("/v1/pubsub, auto: matcher %q, %v", info.Matcher, err)
	}
}
