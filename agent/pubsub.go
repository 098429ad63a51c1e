package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/controlproto/pubsubapi"
	"github.com/gswitch/gswitch/datapath/eventfwd"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// PubSubConfig configures content-based forwarding (the YAML file's
// pubsub:): event packets, UDP datagrams to UDPPort received on Ports, are
// delivered to the ports whose subscriptions they match.
type PubSubConfig struct {
	// UDPPort is the event packets' UDP destination port; 0: off.
	UDPPort int `yaml:"udp_port"`
	// Ports are the switch ports whose received frames are searched for
	// event packets; empty: every port.
	Ports []uint32 `yaml:"ports"`
	// Subscriptions are lines of the subscription language, PORT:
	// PREDICATE; SubscriptionsFile a file of them. Both may be given.
	Subscriptions     []string `yaml:"subscriptions"`
	SubscriptionsFile string   `yaml:"subscriptions_file"`
	// APIListen is the gRPC subscription service's address, HOST:PORT;
	// empty or off: no service.
	APIListen string `yaml:"api_listen"`
	// MinBatch: with a GPU (backend auto or gpu, a CUDA build), received
	// batches of at least this many events are matched on the device,
	// smaller ones on the CPU; 0: eventfwd.DefaultMinBatch (16).
	MinBatch int `yaml:"min_batch"`
}

// pubsubSettings is a checked PubSubConfig.
type pubsubSettings struct {
	on    bool
	ports []uint32
	specs []pubsub.Spec
}

// checkPubSub validates the pubsub: section against the switch ports and
// parses its subscriptions.
func checkPubSub(c *Config) (pubsubSettings, error) {
	p := c.PubSub
	if p.UDPPort == 0 {
		if len(p.Ports) > 0 || len(p.Subscriptions) > 0 || p.SubscriptionsFile != "" || (p.APIListen != "" && p.APIListen != "off") {
			return pubsubSettings{}, configErr("pubsub: udp_port is needed to turn content-based forwarding on")
		}
		return pubsubSettings{}, nil
	}
	if p.UDPPort < 1 || p.UDPPort > 65535 {
		return pubsubSettings{}, configErr("pubsub udp_port %d: want 1..65535 (0: off)", p.UDPPort)
	}
	have := map[uint32]bool{}
	var all []uint32
	for _, pc := range c.Ports {
		have[pc.Number] = true
		all = append(all, pc.Number)
	}
	st := pubsubSettings{on: true, ports: slices.Clone(p.Ports)}
	if len(st.ports) == 0 {
		st.ports = all
	}
	for _, n := range p.Ports {
		if !have[n] {
			return pubsubSettings{}, configErr("pubsub ports: %d is not a configured port", n)
		}
	}
	text := strings.Join(p.Subscriptions, "\n")
	if p.SubscriptionsFile != "" {
		data, err := os.ReadFile(p.SubscriptionsFile)
		if err != nil {
			return pubsubSettings{}, configErr("pubsub subscriptions_file: %v", err)
		}
		text += "\n" + string(data)
	}
	specs, err := pubsub.Parse(text)
	if err != nil {
		return pubsubSettings{}, configErr("pubsub subscriptions: %v", err)
	}
	for _, s := range specs {
		if !have[s.Port] {
			return pubsubSettings{}, configErr("pubsub subscription %q: port %d is not a configured port", s.String(), s.Port)
		}
	}
	st.specs = specs
	if p.MinBatch < 0 {
		return pubsubSettings{}, configErr("pubsub min_batch %d: want at least 0 (0: %d)", p.MinBatch, eventfwd.DefaultMinBatch)
	}
	if p.APIListen != "" && p.APIListen != "off" {
		if _, _, err := net.SplitHostPort(p.APIListen); err != nil {
			return pubsubSettings{}, configErr("pubsub api_listen %q: want HOST:PORT or off", p.APIListen)
		}
	}
	return st, nil
}

// pubsubPart is content-based forwarding in a running agent: the
// subscription table, the receive stage on the event ports and the gRPC
// service with its listener.
type pubsubPart struct {
	table *pubsub.Table
	dev   *eventfwd.Hybrid // nil: the CPU matches every batch
	stage *eventfwd.Stage
	api   *pubsubapi.Server
	apiL  net.Listener
	ports []uint32
}

// startPubSub builds the table from the configured subscriptions, puts the
// receive stage on the event ports and opens the API's listener (nothing
// when pubsub is off). Called after the ports are open.
func (d *Agent) startPubSub() error {
	ps := d.st.pubsub
	if !ps.on {
		return nil
	}
	p := &pubsubPart{table: pubsub.New(), ports: ps.ports}
	if _, err := p.table.AddSpecs(ps.specs); err != nil {
		return fmt.Errorf("pubsub: %w", err)
	}
	var matcher eventfwd.Matcher = p.table
	var barrier func(context.Context) error
	switch {
	case d.st.Backend == "gpu" && !eventDeviceBuilt:
		return fmt.Errorf("pubsub: the GPU matcher: %w", gpu.ErrNoCUDA)
	case d.st.Backend != "cpu" && eventDeviceBuilt:
		h, err := eventfwd.NewHybrid(eventfwd.HybridConfig{Table: p.table, MinBatch: d.st.PubSub.MinBatch, Log: d.log,
			Open: func(l *pubsub.Layout) (eventfwd.Device, error) { return openEventDevice(l) }})
		switch {
		case err == nil:
			p.dev, matcher, barrier = h, h, h.Sync
		case d.st.Backend == "gpu":
			return fmt.Errorf("pubsub: the GPU matcher: %w", err)
		default:
			d.log.Warn("pubsub: no GPU matcher; events are matched on the CPU", "err", err)
		}
	}
	var err error
	if p.stage, err = eventfwd.New(eventfwd.Config{UDPPort: uint16(d.st.PubSub.UDPPort), Matcher: matcher, Out: d.sw}); err != nil {
		p.close()
		return err
	}
	for _, no := range p.ports {
		if err := d.addRxStage(no, p.stage); err != nil {
			return err
		}
	}
	p.api, err = pubsubapi.New(pubsubapi.Config{Table: p.table, Barrier: barrier,
		Port: func(no uint32) error {
			if d.ports[no] == nil {
				return errors.New("not a port of this switch")
			}
			return nil
		},
		Counters: func() pubsubapi.Counters {
			k := p.stage.Counters()
			return pubsubapi.Counters{UDPPort: p.stage.UDPPort(), Received: k.Received, Malformed: k.Malformed,
				Matched: k.Matched, Delivered: k.Delivered, PortDeliveries: k.PortDeliveries}
		}})
	if err != nil {
		p.close()
		return err
	}
	if l := d.st.PubSub.APIListen; l != "" && l != "off" {
		if p.apiL, err = net.Listen("tcp", l); err != nil {
			p.close()
			return fmt.Errorf("pubsub api_listen: %w", err)
		}
	}
	d.ps = p
	d.log.Info("pubsub: content-based forwarding on", "udp_port", d.st.PubSub.UDPPort, "ports", p.ports,
		"subscriptions", len(ps.specs), "api", addrOf(p.apiL), "matcher", p.backend())
	return nil
}

// openEventDevice opens the GPU matcher, and eventDeviceBuilt says whether
// this build has one (variables: tests put in a Go device). Without one,
// no device layout is built.
var (
	openEventDevice  = func(l *pubsub.Layout) (eventfwd.Device, error) { return gpu.OpenEventDevice(l) }
	eventDeviceBuilt = gpu.EventDeviceBuilt
)

// backend names what matches the events: "cpu", or the device's name
// and description.
func (p *pubsubPart) backend() string {
	if p.dev == nil || p.dev.Backend() == "cpu" {
		return "cpu"
	}
	return p.dev.Backend() + ": " + p.dev.Counters().Device
}

// close closes the device matcher (the CPU serves from then on).
func (p *pubsubPart) close() {
	if p.dev != nil {
		p.dev.Close()
	}
}

// runPubSub starts the API server's goroutine.
func (d *Agent) runPubSub(ctx context.Context, goRun func(string, func() error)) {
	if d.ps == nil || d.ps.apiL == nil {
		return
	}
	goRun("pubsub api", func() error { return d.ps.api.Serve(ctx, d.ps.apiL) })
}

// closePubSub closes the API's listener and the device matcher.
func (d *Agent) closePubSub() {
	if d.ps != nil && d.ps.apiL != nil {
		d.ps.apiL.Close()
	}
	if d.ps != nil {
		d.ps.close()
	}
}

// pubsubCollectors are the metrics of content-based forwarding: the
// stage's counters and the table's sizes.
func (d *Agent) pubsubCollectors() []prometheus.Collector {
	if d.ps == nil {
		return nil
	}
	t := d.ps.table
	gauge := func(name, help string, f func(pubsub.Stats) int) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f(t.Stats())) })
	}
	return []prometheus.Collector{d.ps.stage.Collector(),
		gauge("gswitch_pubsub_subscriptions", "Subscriptions in the content-based forwarding table.", func(s pubsub.Stats) int { return s.Subscriptions }),
		gauge("gswitch_pubsub_constraints", "Constraints of the subscriptions.", func(s pubsub.Stats) int { return s.Constraints }),
	}
}

// PubSubTable returns the subscription table; nil with pubsub off.
func (d *Agent) PubSubTable() *pubsub.Table {
	if d.ps == nil {
		return nil
	}
	return d.ps.table
}

// PubSubStage returns the event receive stage; nil with pubsub off.
func (d *Agent) PubSubStage() *eventfwd.Stage {
	if d.ps == nil {
		return nil
	}
	return d.ps.stage
}

// PubSubAPIAddr returns the subscription service's address; nil when off.
func (d *Agent) PubSubAPIAddr() net.Addr {
	if d.ps == nil {
		return nil
	}
	return addrOf(d.ps.apiL)
}

// PubSub answers the control socket's /v1/pubsub.
func (s ctlSource) PubSub() ctl.PubSubInfo {
	d := s.d
	p := d.ps
	if p == nil {
		return ctl.PubSubInfo{Counters: eventfwd.Counters{PortDeliveries: map[uint32]uint64{}}}
	}
	info := ctl.PubSubInfo{Enabled: true, UDPPort: p.stage.UDPPort(), Ports: p.ports, Table: p.table.Stats(), Counters: p.stage.Counters(),
		Matcher: p.backend()}
	if p.dev != nil {
		k := p.dev.Counters()
		info.Device = &k
	}
	if a := addrOf(p.apiL); a != nil {
		info.APIListen = a.String()
	}
	for _, sub := range p.table.List() {
		info.Subscriptions = append(info.Subscriptions, ctl.PubSubSubscription{ID: uint64(sub.ID), Port: sub.Port,
			Predicate: pubsub.FormatPredicate(sub.Filters), Matches: sub.Matches})
	}
	return info
}
