package agent

// Redundancy elimination on one port (the re: section; datapath/re).

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gswitch/gswitch/agent/ctl"
	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/datapath/re"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/filter"
	"github.com/gswitch/gswitch/tables/rule"
)

// REConfig is the re: section: redundancy elimination on the port that
// faces another gswitchd (the "WAN" port). Both ends run it on their WAN
// port with the same window and bits; each encodes what it sends there and
// decodes what it receives there.
type REConfig struct {
	// Port is the WAN port's number (one of ports:); 0: off.
	Port uint32 `yaml:"port"`
	// Match is a pcap-filter expression (tables/filter) selecting the
	// frames the encoder logs and encodes; empty: every TCP segment. Only
	// TCP payloads are ever encoded.
	Match string `yaml:"match"`
	// LogBytes bounds each side's payload log (0: 64 MiB).
	LogBytes int `yaml:"log_bytes"`
	// Window and Bits are the marker window in bytes (0: 32) and mask bits
	// (0: 8, about one marker per 256 bytes).
	Window int `yaml:"window"`
	Bits   int `yaml:"bits"`
	// AckInterval is how often the decoder's acknowledgements go back to
	// the peer (0: 10ms).
	AckInterval time.Duration `yaml:"ack_interval"`
	// Pipeline says which of the WAN port's RE work runs on goroutines of
	// its own beside the switch's forwarding: "on" both, "encoder" the
	// encoder only (re.Link.RunEncoder), "decoder" only the split of the
	// port's receive path (the decoder on the port's reader, the switch's
	// work on the restored frames on another goroutine: pipeline's
	// SetRxSplit), "off" neither (all of it on the port goroutines, in
	// series with their forwarding). "auto" (or empty, the default): on
	// with at least autoPipelineProcs Go processors (GOMAXPROCS); below,
	// "decoder" when bundles are on, else off. On two cores that the
	// hosts' TCP and the kernel also need, the encoder's hand-offs cost
	// CPU (a copy of each frame, wake-ups, frames crossing cores) and
	// bought no throughput; with bundles the decoder's split costs no
	// measurable CPU (the reader hands over a dozen frames per bundle it
	// read), and with it iperf3 through RE ran at 82.5% of RE off (median
	// of 24 runs; main's serial path 72%) (docs/benchmarks.md, 2026-11-26).
	Pipeline string `yaml:"pipeline"`
	// Bundle says whether the WAN port packs the frames of a send batch
	// that go to the peer with the same addresses into bundle frames of
	// up to the port's MTU (the encoded frames of a repeated stream are
	// ~90 bytes each: one frame, one transmit and one receive for a dozen
	// or more): "on" (or empty, the default) or "off". The peer's decoder
	// opens bundles whatever its own setting.
	Bundle string `yaml:"bundle"`
	// Impair is a test stage: frames the WAN port sends (encoded, plain and
	// control frames alike) are lost and reordered at these rates, for
	// kernels without netem. Off unless loss or reorder is set.
	Impair ImpairConfig `yaml:"impair"`
}

// ImpairConfig is re.impair: the chance that a frame is lost, and that it
// is held back and sent after the next one, and the generator's seed.
type ImpairConfig struct {
	Loss    float64 `yaml:"loss"`
	Reorder float64 `yaml:"reorder"`
	Seed    uint64  `yaml:"seed"`
}

const defaultAckInterval = 10 * time.Millisecond

// autoPipelineProcs is the least GOMAXPROCS at which re.pipeline auto
// turns the RE goroutines on.
const autoPipelineProcs = 4

// reFlags are the redundancy elimination flags.
type reFlags struct {
	port     uint
	match    string
	logBytes int
}

func (r *reFlags) register(fs *flag.FlagSet) {
	fs.UintVar(&r.port, "re-port", 0, "redundancy elimination on this port, the one facing another gswitchd: `N` (0: off)")
	fs.StringVar(&r.match, "re-match", "", "redundancy elimination: the frames to encode, a pcap-filter `EXPR` (default: every TCP segment)")
	fs.IntVar(&r.logBytes, "re-log-bytes", 0, "redundancy elimination: payload log size in `BYTES` (0: 64 MiB)")
}

func (r *reFlags) override(set map[string]bool, c *REConfig) {
	if set["re-port"] {
		c.Port = uint32(min(r.port, 1<<32-1))
	}
	setIf(set, "re-match", &c.Match, r.match)
	setIf(set, "re-log-bytes", &c.LogBytes, r.logBytes)
}

// reSettings is a checked re: section.
type reSettings struct {
	on bool
	// encPipe and rxSplit: the encoder's goroutine, the split receive path
	// (REConfig.Pipeline).
	encPipe, rxSplit bool
	bundle           bool      // REConfig.Bundle
	cfg              re.Config // Match is set per link (reMatcher)
	match            *filter.Program
	ack              time.Duration
}

// checkRE validates the re: section; errors are one line.
func checkRE(c *Config) (reSettings, error) {
	r := c.RE
	if r.Port == 0 {
		if r.Match != "" || r.Impair != (ImpairConfig{}) {
			return reSettings{}, configErr("re: match or impair given without re.port (--re-port)")
		}
		return reSettings{}, nil
	}
	found := false
	for _, p := range c.Ports {
		found = found || p.Number == r.Port
	}
	switch {
	case r.Port == rule.PortLocal:
		return reSettings{}, configErr("re: port LOCAL: redundancy elimination runs on a port facing another gswitchd")
	case !found:
		return reSettings{}, configErr("re: port %d is not one of ports:", r.Port)
	case r.LogBytes < 0 || r.LogBytes > 1<<32:
		return reSettings{}, configErr("re: log_bytes %d: want 65536..4294967296 (0: 64 MiB)", r.LogBytes)
	case r.Window < 0 || r.Bits < 0 || r.Bits > 32:
		return reSettings{}, configErr("re: window %d, bits %d: want a positive window and 1..32 bits (0: 32 and 8)", r.Window, r.Bits)
	case r.AckInterval < 0 || r.AckInterval > time.Second:
		return reSettings{}, configErr("re: ack_interval %v: want at most 1s (0: %v)", r.AckInterval, defaultAckInterval)
	case r.Impair.Loss < 0 || r.Impair.Loss >= 1 || r.Impair.Reorder < 0 || r.Impair.Reorder >= 1:
		return reSettings{}, configErr("re: impair loss %g, reorder %g: want probabilities in [0, 1)", r.Impair.Loss, r.Impair.Reorder)
	case !slices.Contains([]string{"", "auto", "on", "off", "encoder", "decoder"}, r.Pipeline):
		return reSettings{}, configErr("re: pipeline %q: want auto, on, off, encoder or decoder (default auto)", r.Pipeline)
	case !slices.Contains([]string{"", "on", "off"}, r.Bundle):
		return reSettings{}, configErr("re: bundle %q: want on or off (default on)", r.Bundle)
	}
	pipe := r.Pipeline
	if pipe == "" || pipe == "auto" {
		switch {
		case runtime.GOMAXPROCS(0) >= autoPipelineProcs:
			pipe = "on"
		case r.Bundle != "off":
			pipe = "decoder"
		default:
			pipe = "off"
		}
	}
	st := reSettings{on: true, cfg: re.Config{LogBytes: r.LogBytes, Window: r.Window, Bits: r.Bits}, ack: r.AckInterval,
		encPipe: pipe == "on" || pipe == "encoder", rxSplit: pipe == "on" || pipe == "decoder", bundle: r.Bundle != "off"}
	if st.ack == 0 {
		st.ack = defaultAckInterval
	}
	if r.Window > 48 { // the shortest match replaced must cover a window
		st.cfg.MinMatch = r.Window
	}
	if _, err := re.NewEncoder(st.cfg); err != nil { // the window, bits and log size
		return reSettings{}, configErr("%v", err)
	}
	if r.Match != "" {
		p, err := filter.CompileOne(r.Match, filter.LinkEthernet, false, nil)
		if err != nil {
			return reSettings{}, configErr("re: match %q: %v", r.Match, err)
		}
		st.match = p
	}
	return st, nil
}

// reMatcher evaluates the match program on frames from several goroutines
// at once (the switch's senders): an Evaluator is one goroutine's, so each
// call takes one from a pool.
type reMatcher struct{ pool sync.Pool }

func newREMatcher(p *filter.Program) *reMatcher {
	m := &reMatcher{}
	m.pool.New = func() any { return filter.NewEvaluator(p) }
	return m
}

func (m *reMatcher) match(frame []byte) bool {
	ev := m.pool.Get().(*filter.Evaluator)
	defer m.pool.Put(ev)
	return ev.Match(frame, uint32(len(frame)))
}

// reLink is the agent's redundancy elimination: the link on the WAN port
// (nil when off).
type reLink struct {
	link  *re.Link
	port  uint32
	iface string
}

// rePort is the WAN port's device as the switch sees it: the AF_PACKET
// port (its queues and counters visible through the embedding) whose Send
// encodes.
type rePort struct {
	*afpacket.Port
	link *re.Link
}

func (p rePort) Send(frames [][]byte) (int, error) { return p.link.Send(frames) }

// Stats is the AF_PACKET port's, with the frames the port refused on the
// encoder's goroutine (which Send had reported sent) among its TxErrors,
// so that the port's tx_dropped counts them.
func (p rePort) Stats() (afpacket.Stats, error) {
	st, err := p.Port.Stats()
	st.TxErrors += p.link.Enc.Stats.TxDropped.Load()
	return st, err
}

// reDevice returns the device to add as port no: p itself, or for the
// WAN port p wrapped by a new re.Link.
func (d *Agent) reDevice(no uint32, p *afpacket.Port) (pipeline.Device, error) {
	rs := d.st.re
	if !rs.on || no != d.st.RE.Port {
		return p, nil
	}
	cfg := rs.cfg
	if rs.match != nil {
		cfg.Match = newREMatcher(rs.match).match
	}
	var mac [6]byte
	copy(mac[:], p.Link().MAC)
	if rs.bundle {
		// Bundles of up to the port's MTU (Ethernet's when unknown).
		cfg.Bundle = cmpOr(p.Link().MTU, 1500)
	}
	var im *re.Impair
	if ic := d.st.RE.Impair; ic.Loss > 0 || ic.Reorder > 0 {
		im = re.NewImpair(ic.Loss, ic.Reorder, ic.Seed)
	}
	if dm := d.reMarkers(cfg); dm != nil {
		cfg.Markers = dm
	}
	l, err := re.NewLink(cfg, p, mac, im)
	if err != nil {
		return nil, fmt.Errorf("re: port %d: %w", no, err)
	}
	d.re = &reLink{link: l, port: no, iface: p.Link().Name}
	return rePort{Port: p, link: l}, nil
}

// reMarkers returns the encoder's device markers when the engine has a
// device in service that computes them (the cuda build on a GPU), else nil:
// the encoder fingerprints on the CPU. The device's resources go with the
// engine's Close, after the ports.
func (d *Agent) reMarkers(cfg re.Config) re.Markers {
	if d.eng == nil {
		return nil
	}
	m, err := cfg.Marker()
	if err != nil {
		return nil // checkRE refused the configuration already
	}
	mk, err := d.eng.DeviceMarkers(m)
	if err != nil {
		if !errors.Is(err, gpu.ErrNoMarkersGPU) {
			d.log.Warn("re: markers on the GPU unavailable; the CPU computes them", "err", err)
		}
		return nil
	}
	dm, err := re.NewDeviceMarkers(mk, 4)
	if err != nil {
		mk.Close()
		d.log.Warn("re: markers on the GPU unavailable; the CPU computes them", "err", err)
		return nil
	}
	d.log.Info("re: the encoder's markers of large batches on the GPU", "markers", mk.Name())
	return dm
}

// reStage installs the decoder as the WAN port's first receive stage
// (after AddPort) and splits the port's receive path (pipeline's
// SetRxSplit): the decoder runs on the port's reader, the switch's work on
// the frames it restored on another goroutine.
func (d *Agent) reStage(no uint32) error {
	if d.re == nil || no != d.re.port {
		return nil
	}
	if err := d.addRxStage(no, d.re.link); err != nil {
		return err
	}
	return d.sw.SetRxSplit(no, d.st.re.rxSplit)
}

// runRE runs the acknowledgement loop and the encoder's goroutine (the
// WAN port's Send hands its batches to it) until ctx is done.
func (d *Agent) runRE(ctx context.Context, goRun func(string, func() error)) {
	if d.re == nil {
		return
	}
	d.log.Info("redundancy elimination on", "port", d.re.port, "interface", d.re.iface, "match", d.st.RE.Match,
		"encoder_epoch", d.re.link.Enc.Epoch(), "decoder_epoch", d.re.link.Dec.Epoch(), "impaired", d.st.RE.Impair != (ImpairConfig{}),
		"encoder_goroutine", d.st.re.encPipe, "split_receive", d.st.re.rxSplit)
	goRun("re acks", func() error { d.re.link.RunAcks(ctx, d.st.re.ack); return nil })
	if d.st.re.encPipe {
		goRun("re encoder", func() error { d.re.link.RunEncoder(ctx, 0); return nil })
	}
}

// RE is /v1/re (ctl.RESource).
func (s ctlSource) RE() ctl.REInfo {
	d := s.d
	if d.re == nil {
		return ctl.REInfo{}
	}
	r := d.st.RE
	return ctl.REInfo{Enabled: true, Port: d.re.port, Interface: d.re.iface, Match: r.Match, LogBytes: cmpOr(r.LogBytes, 64<<20),
		Impaired: r.Impair.Loss > 0 || r.Impair.Reorder > 0, Encoder: d.re.link.Enc.Counters(), Decoder: d.re.link.Dec.Counters()}
}

// reCollector is the gswitch_re_* families, read from the link's counters
// at scrape time.
type reCollector struct {
	l                                                    *re.Link
	port                                                 string
	bytesIn, bytesOut, saved, refs, frames, failures, rx *prometheus.Desc
	resets, acks, rxBytes                                *prometheus.Desc
	pipelined, waits, txDropped                          *prometheus.Desc
	bundles, bundled                                     *prometheus.Desc
}

func newRECollector(l *reLink) *reCollector {
	port := []string{"port"}
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("gswitch_re_"+name, help, append(port, labels...), nil)
	}
	return &reCollector{l: l.link, port: fmt.Sprint(l.port),
		bytesIn:   d("encoder_in_bytes_total", "Bytes of the frames the redundancy elimination encoder was given to send on the WAN port."),
		bytesOut:  d("encoder_out_bytes_total", "Bytes the encoder sent for them (encoded or unchanged)."),
		saved:     d("saved_bytes_total", "Bytes the encoder removed: encoder_in minus encoder_out over the encoded frames."),
		refs:      d("references_total", "References to bytes the peer holds in the frames the encoder sent."),
		frames:    d("encoder_frames_total", "Frames the encoder handled, by outcome: encoded, raw (eligible but sent unchanged), passed (not eligible).", "outcome"),
		failures:  d("decode_failures_total", "Encoded frames the decoder could not restore and dropped, by reason.", "reason"),
		rx:        d("decoder_frames_total", "Frames the decoder passed on, by kind: restored or plain.", "kind"),
		rxBytes:   d("decoder_out_bytes_total", "Bytes of the frames the decoder passed on (plain and restored)."),
		resets:    d("resets_total", "Epoch changes: the peer's decoder (side encoder) or encoder (side decoder) restarted.", "side"),
		acks:      d("acknowledgements_total", "Payload ids the decoder acknowledged (ack) or refused (nak) to the peer.", "kind"),
		pipelined: d("encoder_pipelined_batches_total", "Batches the encoder encoded and sent on its own goroutine."),
		waits:     d("encoder_queue_waits_total", "Hand-offs to the encoder's goroutine that waited for room in its queue (back-pressure)."),
		txDropped: d("encoder_tx_dropped_total", "Frames the WAN port refused on the encoder's goroutine (also in the port's tx_dropped)."),
		bundles:   d("bundles_total", "Bundle frames (several frames packed into one) the WAN port sent (side encoder) or opened (side decoder).", "side"),
		bundled:   d("bundled_frames_total", "Frames the WAN port sent inside bundle frames."),
	}
}

func (c *reCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.bytesIn, c.bytesOut, c.saved, c.refs, c.frames, c.failures, c.rx, c.rxBytes, c.resets, c.acks,
		c.pipelined, c.waits, c.txDropped, c.bundles, c.bundled} {
		ch <- d
	}
}

func (c *reCollector) Collect(ch chan<- prometheus.Metric) {
	e, dc := c.l.Enc.Counters(), c.l.Dec.Counters()
	m := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), append([]string{c.port}, labels...)...)
	}
	m(c.bytesIn, e.BytesIn)
	m(c.bytesOut, e.BytesOut)
	m(c.saved, e.Saved)
	m(c.refs, e.Refs)
	m(c.frames, e.Encoded, "encoded")
	m(c.frames, e.Raw, "raw")
	m(c.frames, e.Passed, "passed")
	m(c.failures, dc.Missing, "missing")
	m(c.failures, dc.BadCRC, "bad_crc")
	m(c.failures, dc.Malformed, "malformed")
	m(c.rx, dc.Restored, "restored")
	m(c.rx, dc.Plain, "plain")
	m(c.rxBytes, dc.BytesOut)
	m(c.resets, e.Resets, "encoder")
	m(c.resets, dc.Resets, "decoder")
	m(c.acks, dc.Acks, "ack")
	m(c.acks, dc.Naks, "nak")
	m(c.pipelined, e.Pipelined)
	m(c.waits, e.QueueWaits)
	m(c.txDropped, e.TxDropped)
	m(c.bundles, e.Bundles, "encoder")
	m(c.bundles, dc.Bundles, "decoder")
	m(c.bundled, e.Bundled)
}

// reCollectors returns the redundancy elimination collector, none when off.
func (d *Agent) reCollectors() []prometheus.Collector {
	if d.re == nil {
		return nil
	}
	return []prometheus.Collector{newRECollector(d.re)}
}
