package forward

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/tables/pubsub"
)

// Content-based forwarding through the switch (--ruleset events[:F]):
// the traffic is event packets, and gswitchd delivers them by its
// subscriptions (datapath/eventfwd), not by flow rules.
//
// The subscriptions are CCM's default scenario (tables/pubsub's
// DefaultScenario: 22,500–27,500 filters of 3–5 constraints per interface,
// 100 names, half numeric, half string) with one interface per pair, or F
// filters per interface with events:F. Interface k's filters go to pair
// k's sink port 2k+2, each with one more constraint, pair = k, so that an
// event of pair k's generator can match only its own sink; and each sink
// also takes pair = k && sel < 6, so that about three events in four are
// delivered whatever the scenario's filters say (the others only when one
// of them matches). Every event is still matched against all the
// constraints of its names (the counting algorithm), so the matching cost
// is the scenario's.
//
// The frames: pair k's --flows events are the scenario's events (a stream
// of its own per pair) plus pair = k, sel (0..7, drawn) and mark, an
// 8-byte string that is the frame's last 8 bytes: the bench's mark (step
// and sequence number), which no constraint reads. Each is one UDP
// datagram (checksum 0, as IPv4 allows) to eventsUDPPort, in tables/pubsub's
// binary encoding. What gswitchd must do with each template is known in
// advance from the CPU matcher over the same subscriptions (the oracle):
// delivered to the sink (its ports are exactly [2k+2]) or dropped (none).
// gswitchd's flow tables hold the trivial in_port rules, which no event
// packet reaches.

// eventsUDPPort is the event packets' UDP destination port.
const eventsUDPPort = 7400

// eventSet is the subscriptions of --ruleset events[:F].
type eventSet struct {
	sc    pubsub.Scenario
	specs []pubsub.Spec // the sinks' subscriptions, as gswitchd gets them
}

// isEvents reports whether a --ruleset value is the event traffic.
func isEvents(ruleset string) bool {
	kind, _, _ := strings.Cut(ruleset, ":")
	return kind == "events"
}

// parseEvents reads events or events:F (filters per interface, 1 to 1M)
// into the scenario it asks for, for 'pairs' interfaces.
func parseEvents(ruleset string, pairs int) (pubsub.Scenario, error) {
	sc := pubsub.DefaultScenario()
	sc.Interfaces = pairs
	_, arg, has := strings.Cut(ruleset, ":")
	if has {
		f, err := strconv.Atoi(arg)
		if err != nil || f < 1 || f > 1<<20 {
			return sc, fmt.Errorf("events:%s: want filters per interface, 1 to %d", arg, 1<<20)
		}
		sc.FiltersMin, sc.FiltersMax = f, f
	}
	return sc, sc.Validate()
}

// loadEvents builds the subscriptions of --ruleset events[:F].
func loadEvents(ruleset string, pairs int) (*eventSet, error) {
	sc, err := parseEvents(ruleset, pairs)
	if err != nil {
		return nil, err
	}
	es := &eventSet{sc: sc}
	for _, s := range sc.Subscriptions() {
		k := int64(s.Port - 1)
		fs := make([]pubsub.Filter, len(s.Filters))
		for i, f := range s.Filters {
			fs[i] = append(pubsub.Filter{{Name: "pair", Op: pubsub.OpEq, Value: pubsub.Int(k)}}, f...)
		}
		es.specs = append(es.specs, pubsub.Spec{Port: uint32(2*k + 2), Filters: fs})
	}
	for k := range pairs {
		es.specs = append(es.specs, pubsub.Spec{Port: uint32(2*k + 2), Filters: []pubsub.Filter{{
			{Name: "pair", Op: pubsub.OpEq, Value: pubsub.Int(int64(k))},
			{Name: "sel", Op: pubsub.OpLt, Value: pubsub.Int(6)},
		}}})
	}
	return es, nil
}

// constraints counts the subscriptions' constraints.
func (es *eventSet) constraints() int {
	n := 0
	for _, s := range es.specs {
		for _, f := range s.Filters {
			n += len(f)
		}
	}
	return n
}

// writeSubscriptions writes the subscriptions in the subscription
// language, one PORT: PREDICATE a line, into dir and returns the path.
func (es *eventSet) writeSubscriptions(dir string) (string, error) {
	var b strings.Builder
	for _, s := range es.specs {
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, "subscriptions.txt")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// eventFrames builds every pair's event templates (flows each, a power of
// two) and, with the CPU matcher over the same subscriptions, which of
// them the switch must deliver. dst and src[k] are the frames' MACs.
func eventFrames(es *eventSet, dst []byte, src [][]byte, flows int) ([]*frameSet, error) {
	if flows < 1 || bits.OnesCount(uint(flows)) != 1 {
		return nil, fmt.Errorf("--flows %d: a power of two", flows)
	}
	oracle := pubsub.New()
	if _, err := oracle.AddSpecs(es.specs); err != nil {
		return nil, fmt.Errorf("oracle: %w", err)
	}
	pairs := len(src)
	evs := es.sc.Events(pairs * flows)
	out := make([]*frameSet, pairs)
	errs := make([]error, pairs)
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for k := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[k], errs[k] = pairEventFrames(oracle, evs[k*flows:(k+1)*flows], k, dst, src[k])
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pairEventFrames builds pair k's templates from its events.
func pairEventFrames(oracle *pubsub.Table, evs []pubsub.Event, k int, dst, src []byte) (*frameSet, error) {
	n := len(evs)
	fs := &frameSet{tmpl: make([][]byte, n), markOff: make([]int, n), fwd: make([]bool, n), fwdUpTo: make([]uint64, n+1)}
	sink := uint32(2*k + 2)
	var ports []uint32
	for i := range evs {
		e := pubsub.Event{Attrs: append(evs[i].Attrs[:len(evs[i].Attrs):len(evs[i].Attrs)],
			pubsub.Attr{Name: "pair", Value: pubsub.Int(int64(k))},
			pubsub.Attr{Name: "sel", Value: pubsub.Int(int64((uint(i)*0x9e3779b9)>>29) & 7)},
			pubsub.Attr{Name: "mark", Value: pubsub.Str("\x00\x00\x00\x00\x00\x00\x00\x00")})}
		payload, err := e.AppendWire(nil)
		if err != nil {
			return nil, fmt.Errorf("pair %d event %d: %w", k, i, err)
		}
		fs.tmpl[i] = eventFrame(dst, src, payload)
		if len(fs.tmpl[i]) != 42+len(payload) {
			return nil, fmt.Errorf("pair %d event %d: a frame under the Ethernet minimum cannot end in its mark", k, i)
		}
		fs.markOff[i] = len(fs.tmpl[i]) - 8
		ports = oracle.AppendMatch(ports[:0], &e)
		switch {
		case len(ports) == 0:
		case len(ports) == 1 && ports[0] == sink:
			fs.fwd[i] = true
		default:
			return nil, fmt.Errorf("pair %d event %d (%s) matches ports %v: the subscriptions should send it to port %d only", k, i, e.String(), ports, sink)
		}
		fs.fwdUpTo[i+1] = fs.fwdUpTo[i]
		if fs.fwd[i] {
			fs.fwdUpTo[i+1]++
		}
	}
	return fs, nil
}

// eventFrame is an Ethernet/IPv4/UDP frame to eventsUDPPort carrying
// payload (UDP checksum 0), padded to the Ethernet minimum.
func eventFrame(dst, src, payload []byte) []byte {
	n := 14 + 20 + 8 + len(payload)
	f := make([]byte, max(n, frameLen))
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(n-14))
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:], []byte{10, 74, 0, 1})
	copy(ip[16:], []byte{10, 74, 0, 2})
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], 40000)
	binary.BigEndian.PutUint16(udp[2:], eventsUDPPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(payload)))
	copy(f[42:], payload)
	return f
}

// meanWireBytes is the templates' mean length on the wire (FCS included).
func meanWireBytes(fsets []*frameSet) int {
	var sum, n int
	for _, fs := range fsets {
		for _, t := range fs.tmpl {
			sum += len(t) + 4
			n++
		}
	}
	if n == 0 {
		return wireLen
	}
	return (sum + n/2) / n
}

// makeEventTraffic loads --ruleset events[:F]: the subscriptions (written
// to the run's directory for gswitchd's subscriptions_file) and each
// pair's event frames.
func (e *fwdEnv) makeEventTraffic(t0 time.Time) error {
	es, err := loadEvents(e.f.ruleset, len(e.pairs))
	if err != nil {
		return fmt.Errorf("--ruleset: %w", err)
	}
	if e.subsFile, err = es.writeSubscriptions(e.dir); err != nil {
		return err
	}
	src := make([][]byte, len(e.pairs))
	for k, pr := range e.pairs {
		src[k] = pr.genMAC
	}
	if e.frames, err = eventFrames(es, e.dstMAC, src, e.f.flows); err != nil {
		return fmt.Errorf("--ruleset %s: %w", e.f.ruleset, err)
	}
	e.events = es
	fmt.Fprintf(e.log, "bench forward: --ruleset %s: %d subscriptions, %d constraints; %d event frames per pair (%d bytes on the wire on average), %.1f%% of them delivered by the subscriptions (%v)\n",
		e.f.ruleset, len(es.specs), es.constraints(), e.f.flows, meanWireBytes(e.frames), forwardedPct(e.frames), time.Since(t0).Round(time.Millisecond))
	return nil
}

// gswitchdConfig writes gswitchd's configuration file for the target being
// started: the live filters of --filters (target gswitchd-filters) and,
// with --ruleset events, content-based forwarding of the event packets
// received on the generators' ports; "" when it needs none.
func (e *fwdEnv) gswitchdConfig(filters bool) (string, error) {
	var b strings.Builder
	if filters {
		b.WriteString(filtersYAML(e.f.filterSpecs))
	}
	if e.events != nil {
		fmt.Fprintf(&b, "pubsub:\n  udp_port: %d\n  api_listen: \"off\"\n  subscriptions_file: %s\n  ports: [", eventsUDPPort, strconv.Quote(e.subsFile))
		for k := range e.pairs {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprint(&b, 2*k+1)
		}
		b.WriteString("]\n")
		if e.f.eventMinBatch > 0 {
			fmt.Fprintf(&b, "  min_batch: %d\n", e.f.eventMinBatch)
		}
	}
	if b.Len() == 0 {
		return "", nil
	}
	path := filepath.Join(e.dir, "gswitchd.yaml")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// eventCounters reads the running gswitchd's content-based forwarding
// (its control socket) after a series and puts what matched its events
// into the series' steps: an error when it has content-based forwarding
// off or did not load every subscription.
func (e *fwdEnv) eventCounters(target string, steps []Step) error {
	c := ctl.NewClient(e.ctlSocket)
	defer c.Close()
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	info, err := c.PubSub(ctx)
	if err != nil {
		return fmt.Errorf("%s: reading its content-based forwarding: %w", target, err)
	}
	if !info.Enabled || info.Table.Constraints != e.events.constraints() {
		return fmt.Errorf("%s: content-based forwarding on: %v with %d constraints, want %d", target, info.Enabled, info.Table.Constraints, e.events.constraints())
	}
	var dev, cpu uint64
	split := "no device"
	if d := info.Device; d != nil {
		dev, cpu = d.DeviceEvents, d.CPUEvents
		split = fmt.Sprintf("%d on the device, %d on the CPU (batches under %d)", dev, cpu, d.MinBatch)
	}
	fmt.Fprintf(e.log, "bench forward: %s: events matched by %s: %d received, %d delivered, %d malformed; %s\n",
		target, info.Matcher, info.Counters.Received, info.Counters.Delivered, info.Counters.Malformed, split)
	for i := range steps {
		steps[i].EventMatcher, steps[i].EventsOnGPU, steps[i].EventsOnCPU = info.Matcher, dev, cpu
	}
	return nil
}
