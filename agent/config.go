package agent

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// defaultConfig is the configuration gswitchd starts from: the file given
// with --config and then the flags override it (DefaultConfig).
//
//go:embed default.yaml
var defaultConfig []byte

// Config is gswitchd's configuration (the YAML file's schema). Start from
// DefaultConfig: a zero Config is not valid.
type Config struct {
	DatapathID   string              `yaml:"datapath_id"`
	Ports        []PortConfig        `yaml:"ports"`
	Controllers  []string            `yaml:"controllers"`
	Listen       []string            `yaml:"listen"`
	OpenFlow     OpenFlowConfig      `yaml:"openflow"` // connection limits (openflowlimits.go)
	TLS          TLSConfig           `yaml:"tls"`
	FailMode     string              `yaml:"fail_mode"`
	Backend      string              `yaml:"backend"`
	GPUs         []int               `yaml:"gpus"`
	Resident     int                 `yaml:"resident_lookups"` // CUDA resident lookups: mailbox slots per GPU (0: off; gpu.ResidentConfig)
	ResidentIdle time.Duration       `yaml:"resident_idle"`    // with resident_lookups: how long the kernel stays with no lookup
	MaxDelay     time.Duration       `yaml:"max_delay"`
	SharedDelay  time.Duration       `yaml:"shared_delay"` // the part of max_delay a lookup may wait in a shared device batch (0: all of it, and the receive batch all of it too)
	InFlight     int                 `yaml:"in_flight"`    // with a GPU, batches of a receive queue in the pipeline at once (0: pipeline's default, 4 with 8 or more cores, else 2)
	BatchDepth   int                 `yaml:"batch_depth"`  // with a GPU, closed batches of a receive queue unfinished before its reader waits (0: pipeline's default, 8 with 4 in flight, else 3; at least in_flight)
	RxQueues     int                 `yaml:"rx_queues"`
	RxWorkers    int                 `yaml:"rx_workers"`       // datapath workers serving all receive queues (0: a goroutine per queue; workers.go of pipeline)
	WorkerFlight int                 `yaml:"worker_in_flight"` // a datapath worker's runs whose first lookup is in flight at once while it reads on (0: each run waits for its lookup; async.go of pipeline)
	WorkerShared int                 `yaml:"worker_shared"`    // with worker_in_flight: the workers' lookups ahead in shared device batches, this many in flight at most (0: a batch per run; gpu.Gatherer)
	WorkerClose  string              `yaml:"worker_close"`     // when a datapath worker closes its open batch: deadline (full or max_delay; empty: the same) or eager (as soon as its rings are empty and a run may start)
	RxRing       string              `yaml:"rx_ring"`          // auto (frame below a 1 ms max_delay, else block), block or frame
	RxBlockSize  int                 `yaml:"rx_block_size"`    // bytes of a receive ring block (0: afpacket's default, 256 KiB); the ring keeps rxRingBytes
	MinBatch     int                 `yaml:"min_batch"`
	BatchSize    int                 `yaml:"batch_size"`
	Tables       int                 `yaml:"tables"`
	MaxFlows     int                 `yaml:"max_flows"`
	Classifier   string              `yaml:"classifier"` // the flow tables' search: linear, tuple, bloom or merge (empty: linear)
	Metrics      string              `yaml:"metrics"`
	CtlSocket    string              `yaml:"ctl_socket"`
	LogLevel     string              `yaml:"log_level"`
	Router       RouterConfig        `yaml:"router"`
	P4RT         P4RTConfig          `yaml:"p4rt"`
	Routes       []StaticRouteConfig `yaml:"routes"`
	KernelFIB    KernelFIBConfig     `yaml:"kernel_fib"`
	RE           REConfig            `yaml:"re"`
	PubSub       PubSubConfig        `yaml:"pubsub"`
	Filters      []FilterConfig      `yaml:"filters"` // live filters (filters.go)
}

// TLSConfig holds the files for OpenFlow over TLS ("tls:"/"ssl:"
// controllers, "ptls:"/"pssl:" listeners), as Open vSwitch's
// --private-key, --certificate and --ca-cert: gswitchd presents its
// certificate on every TLS connection and accepts only peers whose
// certificate the CA signed (controllers it connects to, and clients of a
// TLS listener, which must present one).
type TLSConfig struct {
	PrivateKey  string `yaml:"private_key"`
	Certificate string `yaml:"certificate"`
	CACert      string `yaml:"ca_cert"`
}

// PortConfig attaches an interface as an OpenFlow port. RxQueues, when
// set, overrides the top-level rx_queues for this port.
type PortConfig struct {
	Number    uint32 `yaml:"number"`
	Interface string `yaml:"interface"`
	RxQueues  int    `yaml:"rx_queues,omitempty"`
}

// maxRxWorkers bounds rx_workers.
const maxRxWorkers = 1024

// maxRxQueues bounds rx_queues (afpacket.MaxQueues).
const maxRxQueues = afpacket.MaxQueues

// rxRing returns the receive rings' layout: rx_ring; unset, the block
// ring; auto, a TPACKET_V2 frame ring when max_delay is under a
// millisecond (a TPACKET_V3 block is handed over 1 ms after its first
// frame at the soonest, so it could not keep a shorter delay), else the
// block ring. The block ring is the default because the frame ring's
// wake-up per frame costs peak rate: on the H200 machine (2026-11-26,
// --max-delay 50us, gswitchd on 4 cores) 2.0 against 3.0 Mframes/s
// lossless with the trivial set on the CPU backend, and 2.5 against 3.0
// with 131,072 rules in 512 classes on the GPU, where the frame ring's
// latency at 1 Mframes/s was p50 / p99 0.25 / 1.1-1.2 ms against 0.73 /
// 1.4 ms. (Until the flow expiry stopped stalling the datapath, the same
// day, auto kept the block ring with a GPU: its millisecond stalls had
// queued the frame ring's many small batches longer than the block
// ring's timeout.)
func (c *Config) rxRing() afpacket.RingMode {
	switch c.RxRing {
	case "", "block":
		return afpacket.RingBlocks
	case "frame":
		return afpacket.RingFrames
	}
	if c.MaxDelay < time.Millisecond {
		return afpacket.RingFrames
	}
	return afpacket.RingBlocks
}

// batchDelays returns how long a receive batch (pipeline.Config.MaxDelay)
// and a shared device batch (gpu.CoalescerConfig.MaxDelay) may wait:
// max_delay each, or with shared_delay set (and a GPU, 'shared'), the
// receive batch max_delay minus shared_delay and the shared batch
// shared_delay, so that a frame's two waits add up to max_delay at most.
func (c *Config) batchDelays(shared bool) (rx, dev time.Duration) {
	if !shared || c.SharedDelay <= 0 {
		return c.MaxDelay, c.MaxDelay
	}
	return c.MaxDelay - c.SharedDelay, c.SharedDelay
}

// rxRingBytes is a receive queue's ring size: rx_block_size sets the
// size of its blocks, not of the ring, so smaller blocks are more of them.
const rxRingBytes = 8 << 20

// rxBlocks returns the receive rings' block size and number of blocks:
// afpacket's defaults (32 blocks of 256 KiB) without rx_block_size, else
// blocks of that size, enough of them for rxRingBytes (at least 2).
//
// A TPACKET_V3 block is handed to the reader when it is full or its
// timeout (at least 1 ms) has passed: a smaller block is full sooner, so
// a frame waits less in the ring under moderate traffic, and the reader
// takes fewer frames at a time. A frame longer than a block (less its
// headers) is truncated by the kernel and dropped (a GSO frame of 64 KiB
// needs blocks of 128 KiB; see "Receive rings" in datapath/afpacket).
func (c *Config) rxBlocks() (size, n int) {
	if c.RxBlockSize == 0 {
		return 0, 0
	}
	return c.RxBlockSize, max(rxRingBytes/c.RxBlockSize, 2)
}

// rxQueues returns the number of receive queues of port pc.
func (c *Config) rxQueues(pc PortConfig) int {
	if pc.RxQueues != 0 {
		return pc.RxQueues
	}
	return c.RxQueues
}

// calibrationBatch is the batch at which --backend auto prices a device's
// lookup (gpu.AutoConfig.Batch): the keys one batch of every receive queue
// brings to the shared device batches (BatchSize × the queues of all
// ports), between MinBatch and the Coalescer's largest batch. Under load,
// when the CPU's cost is what limits forwarding, the shared batches are
// this large; timing the device at MinBatch instead would price it at its
// least amortised and keep every table on the CPU.
func (c *Config) calibrationBatch() int {
	queues := 0
	for _, pc := range c.Ports {
		queues += max(c.rxQueues(pc), 1)
	}
	return min(max(c.BatchSize*queues, c.MinBatch), gpu.DefaultCoalescerMaxBatch)
}

// settings is a checked Config, in the types the agent uses.
type settings struct {
	Config
	dpid      uint64
	algo      flow.Algo // Classifier
	failMode  pipeline.FailMode
	logLevel  slog.Level
	tlsClient *tls.Config // for tls:/ssl: controllers; nil without such a target
	tlsServer *tls.Config // for ptls:/pssl: listeners; nil without such a target
	router    routerSettings
	p4rtTLS   *tls.Config // for the P4Runtime server; nil: plain gRPC (p4rt.go)
	re        reSettings  // redundancy elimination (re.go)
	pubsub    pubsubSettings

	// openEngine replaces gpu.OpenConfig (tests: an Engine with a CPU
	// backend standing in for a device); nil: gpu.OpenConfig.
	openEngine func(backend string, ordinals []int, cfg gpu.EngineConfig) (*gpu.Engine, error)
}

// ErrConfig marks a configuration mistake (exit status 2): every error of
// Flags' and New's checks wraps it, and its text is one line that names
// the setting.
var ErrConfig = errors.New("configuration")

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// DefaultConfig returns the embedded default configuration (default.yaml).
func DefaultConfig() Config {
	var c Config
	if err := decodeYAML(&c, defaultConfig, "embedded default"); err != nil {
		panic(err) // the embedded file is part of the build; TestDefaultConfig reads it
	}
	c.P4RT.implicitListen = true
	return c
}

// decodeYAML reads a configuration over c; unknown keys are mistakes.
func decodeYAML(c *Config, data []byte, name string) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return configErr("%s: %s", name, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return nil
}

// multiFlag is a repeatable string flag; given at all, it replaces the
// file's list.
type multiFlag struct {
	vals []string
	set  bool
}

func (m *multiFlag) String() string { return strings.Join(m.vals, ",") }
func (m *multiFlag) Set(v string) error {
	m.vals, m.set = append(m.vals, v), true
	return nil
}

// Flags are gswitchd's command-line flags (RegisterFlags); a flag given
// overrides the file's setting.
type Flags struct {
	fs                                              *flag.FlagSet
	config                                          string
	dpid, failMode, backend, gpus, metrics, ctl, lv string
	tlsKey, tlsCert, tlsCA                          string
	maxDelay, sharedDelay, residentIdle             time.Duration
	minBatch, batchSize, tables, maxFlows, rxQueues int
	rxBlockSize                                     int
	inFlight, batchDepth, rxWorkers, workerFlight   int
	workerShared, resident                          int
	classifier, rxRing, workerClose                 string
	ports, controllers, listen                      multiFlag
	printConfig                                     bool
	routerPorts                                     multiFlag
	p4                                              p4rtFlags
	rt                                              routesFlags
	neighbours                                      string
	re                                              reFlags
	of                                              ofFlags
}

// newFlags returns the flags on a FlagSet of their own.
func newFlags() *Flags {
	return RegisterFlags(flag.NewFlagSet("gswitchd", flag.ContinueOnError))
}

// RegisterFlags defines gswitchd's flags on fs; after fs.Parse, Config
// builds the configuration they give and Run runs it.
func RegisterFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.config, "config", "", "YAML configuration `FILE` (default: the embedded configuration)")
	fs.StringVar(&f.dpid, "datapath-id", "", "datapath id `N`, decimal or 0x hex (1..2^64-1)")
	fs.Var(&f.ports, "port", "attach an interface as OpenFlow port: `N=IFNAME`, or LOCAL=IFNAME for the LOCAL port (repeatable; replaces the file's ports)")
	fs.Var(&f.controllers, "controller", "connect to a controller: `tcp:HOST:PORT` or tls:HOST:PORT (repeatable; replaces the file's controllers)")
	fs.Var(&f.listen, "listen", "accept controller connections: `ptcp:PORT[:IP]` or ptls:PORT[:IP] (repeatable; replaces the file's listeners)")
	fs.StringVar(&f.tlsKey, "tls-private-key", "", "TLS: gswitchd's private key, PEM `FILE` (for tls: and ptls: targets)")
	fs.StringVar(&f.tlsCert, "tls-certificate", "", "TLS: gswitchd's certificate, PEM `FILE` (for tls: and ptls: targets)")
	fs.StringVar(&f.tlsCA, "tls-ca-cert", "", "TLS: the CA certificate(s) that must have signed a peer's certificate, PEM `FILE`")
	fs.StringVar(&f.failMode, "fail-mode", "", "without a controller: `secure` (flow tables only) or standalone (L2 learning)")
	fs.StringVar(&f.backend, "backend", "", "lookup backend: `auto` (each flow table on the CPU or the GPU, whichever a calibration at load and at every change of its class count finds cheaper per key; the CPU without a GPU), cpu or gpu (every table on the GPUs)")
	fs.StringVar(&f.gpus, "gpus", "", "GPU ordinals to use, comma separated: `LIST` (e.g. 0,1)")
	fs.IntVar(&f.resident, "resident-lookups", 0, "with a GPU (CUDA), resident lookups with `N` mailbox slots (0, the default: off; at most 1024): a kernel stays on each GPU and takes flow lookups of at most 64 keys from a mailbox in pinned host memory, with no launch or driver call per lookup; for datapath workers' small runs (--rx-workers, --min-batch 1, --worker-close eager)")
	fs.DurationVar(&f.residentIdle, "resident-idle", 0, "with --resident-lookups, how long the kernel stays on the GPU with no lookup before it leaves: `DURATION` (default 2ms; the next lookup launches it again)")
	fs.DurationVar(&f.maxDelay, "max-delay", 0, "longest a received frame waits for its batch to fill: `DURATION` (e.g. 100us)")
	fs.DurationVar(&f.sharedDelay, "shared-delay", 0, "with a GPU, the part of --max-delay a lookup may wait in a shared device batch: `DURATION`; receive batches then close after --max-delay minus it, so that a frame waits at most --max-delay in both (0, the default: each waits up to --max-delay)")
	fs.IntVar(&f.inFlight, "in-flight", 0, "with a GPU, batches of a receive queue in the pipeline at once, their lookups in the shared device batches while the reader reads on: `N` (0: 4 with 8 or more cores, else 2)")
	fs.IntVar(&f.batchDepth, "batch-depth", 0, "with a GPU, closed batches of a receive queue that may be unfinished before its reader waits: `N` (0: 8 with 4 in flight, else 3; at least --in-flight)")
	fs.IntVar(&f.minBatch, "min-batch", 0, "smallest batch sent to a GPU; smaller ones are classified on the CPU, except a costly flow table's under --backend auto (from the size whose CPU lookup takes as long as the GPU's small lookup): `N`")
	fs.IntVar(&f.batchSize, "batch-size", 0, "frames per batch at most: `N`")
	fs.IntVar(&f.rxQueues, "rx-queues", 0, "receive queues per port: `N` (1..64) AF_PACKET rings in a PACKET_FANOUT group, each read by its own goroutine; 1: one ring, no fanout")
	fs.IntVar(&f.rxWorkers, "rx-workers", 0, "datapath workers: `N` goroutines (0, the default: one per receive queue) among which the receive queues of all ports are dealt round robin; each reads its queues' rings and runs their frames through the switch together, lookups straight to the engine (no shared device batches, no hand-off between goroutines: the lowest latency), waiting in the kernel on its own thread. At most the number of queues is used")
	fs.IntVar(&f.workerFlight, "worker-in-flight", 0, "with --rx-workers, `N` runs of a worker whose first table's lookup is on the device at once while the worker reads on, finished in order as their results come in (0, the default: each run waits for its lookup before the worker reads again)")
	fs.IntVar(&f.workerShared, "worker-shared", 0, "with --worker-in-flight, the workers' lookups ahead go into shared device batches, `N` in flight at most: a run's keys join the batch the other workers' runs are filling while N are in flight, and a batch goes to the device as soon as a slot is free (0, the default: a device call per run)")
	fs.StringVar(&f.workerClose, "worker-close", "", "with --rx-workers, when a worker closes its open batch: `deadline` (the default: when full or when its oldest frame has waited --max-delay) or eager (as soon as its rings are empty and a run may start: fewer than --worker-in-flight runs in flight, or synchronous runs; group commit, for a device whose small lookups are cheap to start, such as resident lookups)")
	fs.StringVar(&f.rxRing, "rx-ring", "", "receive ring layout: `auto` (frame when --max-delay is under 1ms, else block), block (TPACKET_V3: blocks handed over when full or after a timeout of at least 1ms) or frame (TPACKET_V2: each frame handed over at once)")
	fs.IntVar(&f.rxBlockSize, "rx-block-size", 0, "bytes of a receive ring block: `N`, a multiple of the page size from 4096 to 4194304 (0: 262144); each queue's ring keeps 8 MiB (2 blocks at least), so smaller blocks are more of them. A block ring hands a block over when it is full or 1ms or more after its first frame: smaller blocks fill sooner and hold a frame less long under moderate traffic; a frame longer than a block is dropped (GSO frames of 64 KiB need 131072)")
	fs.IntVar(&f.tables, "tables", 0, "number of OpenFlow flow tables: `N` (1..254)")
	fs.IntVar(&f.maxFlows, "max-flows", 0, "flow entries per table at most: `N`")
	fs.StringVar(&f.classifier, "classifier", "", "the flow tables' search: `ALGO` of linear (the default), tuple, bloom or merge (merged tuple search, fastest on many classes)")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics on http://`ADDR`/metrics (e.g. 127.0.0.1:9100; empty: off, the default; an address beyond loopback is warned about)")
	fs.StringVar(&f.ctl, "ctl-socket", "", "control socket for gswitchctl: `PATH` (mode 0600)")
	fs.StringVar(&f.lv, "log-level", "", "log level: `debug`, info, warn or error")
	fs.BoolVar(&f.printConfig, "print-config", false, "print the effective configuration as YAML and exit")
	fs.Var(&f.routerPorts, "router-port", "make a port a router port: `N=ADDR/LEN[,ADDR/LEN...][,table=T][,mac=MAC]` (repeatable; replaces the file's router ports)")
	fs.StringVar(&f.neighbours, "neighbours", "", "how router ports resolve next hops: `own` (ARP/ND by gswitchd) or kernel (the kernel's neighbour table)")
	f.p4.register(fs)
	f.rt.register(fs)
	f.re.register(fs)
	f.of.register(fs)
	return f
}

// Config returns the effective, checked configuration: the embedded
// default, the file of --config, then the flags given (a mistake wraps
// ErrConfig).
func (f *Flags) Config() (Config, error) {
	st, err := f.load()
	if err != nil {
		return Config{}, err
	}
	return st.Config, nil
}

// PrintConfig reports whether --print-config was given.
func (f *Flags) PrintConfig() bool { return f.printConfig }

// load builds the effective configuration: the embedded default, the file,
// then the flags.
func (f *Flags) load() (*settings, error) {
	var c Config
	if err := decodeYAML(&c, defaultConfig, "embedded default"); err != nil {
		return nil, err
	}
	c.P4RT.implicitListen = true
	if f.config != "" {
		data, err := os.ReadFile(f.config)
		if err != nil {
			return nil, configErr("--config: %v", err)
		}
		if err := decodeYAML(&c, data, f.config); err != nil {
			return nil, err
		}
		if p4rtListenIn(data) {
			c.P4RT.implicitListen = false
		}
	}
	if err := f.override(&c); err != nil {
		return nil, err
	}
	return check(c)
}

// setIf puts v in *dst where the flag name was given on the command line.
func setIf[T any](set map[string]bool, name string, dst *T, v T) {
	if set[name] {
		*dst = v
	}
}

// override puts the flags given on the command line over c.
func (f *Flags) override(c *Config) error {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	setIf(set, "datapath-id", &c.DatapathID, f.dpid)
	setIf(set, "fail-mode", &c.FailMode, f.failMode)
	setIf(set, "backend", &c.Backend, f.backend)
	setIf(set, "metrics", &c.Metrics, f.metrics)
	setIf(set, "ctl-socket", &c.CtlSocket, f.ctl)
	setIf(set, "log-level", &c.LogLevel, f.lv)
	setIf(set, "min-batch", &c.MinBatch, f.minBatch)
	setIf(set, "batch-size", &c.BatchSize, f.batchSize)
	setIf(set, "tables", &c.Tables, f.tables)
	setIf(set, "max-flows", &c.MaxFlows, f.maxFlows)
	setIf(set, "classifier", &c.Classifier, f.classifier)
	setIf(set, "max-delay", &c.MaxDelay, f.maxDelay)
	setIf(set, "resident-lookups", &c.Resident, f.resident)
	setIf(set, "resident-idle", &c.ResidentIdle, f.residentIdle)
	setIf(set, "shared-delay", &c.SharedDelay, f.sharedDelay)
	setIf(set, "in-flight", &c.InFlight, f.inFlight)
	setIf(set, "batch-depth", &c.BatchDepth, f.batchDepth)
	setIf(set, "rx-workers", &c.RxWorkers, f.rxWorkers)
	setIf(set, "worker-in-flight", &c.WorkerFlight, f.workerFlight)
	setIf(set, "worker-shared", &c.WorkerShared, f.workerShared)
	setIf(set, "rx-queues", &c.RxQueues, f.rxQueues)
	setIf(set, "rx-ring", &c.RxRing, f.rxRing)
	setIf(set, "worker-close", &c.WorkerClose, f.workerClose)
	setIf(set, "rx-block-size", &c.RxBlockSize, f.rxBlockSize)
	setIf(set, "tls-private-key", &c.TLS.PrivateKey, f.tlsKey)
	setIf(set, "tls-certificate", &c.TLS.Certificate, f.tlsCert)
	setIf(set, "tls-ca-cert", &c.TLS.CACert, f.tlsCA)
	setIf(set, "neighbours", &c.Router.Neighbours, f.neighbours)
	if f.routerPorts.set {
		c.Router.Ports = nil
		for _, v := range f.routerPorts.vals {
			rp, err := parseRouterPortFlag(v)
			if err != nil {
				return err
			}
			c.Router.Ports = append(c.Router.Ports, rp)
		}
	}
	f.p4.override(set, &c.P4RT)
	f.rt.override(set, &c.KernelFIB)
	f.re.override(set, &c.RE)
	f.of.override(set, &c.OpenFlow)
	if set["gpus"] {
		gpus, err := parseGPUs(f.gpus)
		if err != nil {
			return err
		}
		c.GPUs = gpus
	}
	if f.controllers.set {
		c.Controllers = f.controllers.vals
	}
	if f.listen.set {
		c.Listen = f.listen.vals
	}
	if f.ports.set {
		c.Ports = nil
		for _, p := range f.ports.vals {
			pc, err := parsePortFlag(p)
			if err != nil {
				return err
			}
			c.Ports = append(c.Ports, pc)
		}
	}
	return nil
}

func parseGPUs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, configErr("--gpus %q: want a comma-separated list of GPU ordinals", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func parsePortFlag(s string) (PortConfig, error) {
	num, name, ok := strings.Cut(s, "=")
	if strings.EqualFold(num, "local") && ok && name != "" {
		return PortConfig{Number: rule.PortLocal, Interface: name}, nil
	}
	n, err := strconv.ParseUint(num, 10, 32)
	if !ok || err != nil || name == "" {
		return PortConfig{}, configErr("--port %q: want N=IFNAME or LOCAL=IFNAME (e.g. 1=veth0)", s)
	}
	return PortConfig{Number: uint32(n), Interface: name}, nil
}

// parseDPID reads a datapath id: decimal or 0x hex, not zero.
func parseDPID(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil || v == 0 {
		return 0, configErr("datapath id %q: want a number 1..2^64-1, decimal or 0x hex", s)
	}
	return v, nil
}

// check validates a configuration completely: every mistake is a
// one-line error naming the setting.
func check(c Config) (*settings, error) {
	st := &settings{Config: c}
	var err error
	if st.dpid, err = parseDPID(c.DatapathID); err != nil {
		return nil, err
	}
	if st.failMode, err = pipeline.ParseFailMode(c.FailMode); err != nil {
		return nil, configErr("%v", err)
	}
	st.algo = flow.Linear // gswitchd's search before the setting existed
	if c.Classifier != "" {
		if st.algo, err = flow.ParseAlgo(c.Classifier); err != nil {
			return nil, configErr("classifier: %v", err)
		}
	}
	if err := st.logLevel.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return nil, configErr("log level %q: want debug, info, warn or error", c.LogLevel)
	}
	if err := checkPorts(c.Ports); err != nil {
		return nil, err
	}
	if err := checkTargets(c.Controllers, c.Listen); err != nil {
		return nil, err
	}
	if err := c.OpenFlow.check(); err != nil {
		return nil, err
	}
	if st.tlsClient, st.tlsServer, err = loadTLS(c); err != nil {
		return nil, err
	}
	if st.router, err = checkRouter(c.Router, c.Ports); err != nil {
		return nil, err
	}
	if st.p4rtTLS, err = checkP4RT(&c); err != nil {
		return nil, err
	}
	if _, err := staticRoutes(&c); err != nil {
		return nil, err
	}
	if err := checkKernelFIB(&c); err != nil {
		return nil, err
	}
	if st.re, err = checkRE(&c); err != nil {
		return nil, err
	}
	if st.pubsub, err = checkPubSub(&c); err != nil {
		return nil, err
	}
	if err := checkFilters(&c); err != nil {
		return nil, err
	}
	return st, checkNumbers(&c)
}

func checkPorts(ports []PortConfig) error {
	nums := map[uint32]string{}
	names := map[string]uint32{}
	for _, p := range ports {
		switch {
		case (p.Number == 0 || p.Number > rule.PortMax) && p.Number != rule.PortLocal:
			return configErr("port %d (%s): port numbers are 1..%d, or %d (%#x) for the LOCAL port", p.Number, p.Interface, rule.PortMax, rule.PortLocal, rule.PortLocal)
		case p.Interface == "":
			return configErr("port %d: no interface name", p.Number)
		case nums[p.Number] != "":
			return configErr("port number %d given twice (%s and %s)", p.Number, nums[p.Number], p.Interface)
		case names[p.Interface] != 0:
			return configErr("interface %s given twice (ports %d and %d)", p.Interface, names[p.Interface], p.Number)
		case p.RxQueues < 0 || p.RxQueues > maxRxQueues:
			return configErr("port %d (%s): rx_queues %d: want 1..%d (0 or absent: the top-level rx_queues)", p.Number, p.Interface, p.RxQueues, maxRxQueues)
		}
		if _, err := afpacket.LookupLink(p.Interface); err != nil {
			return configErr("port %d: unknown interface %q", p.Number, p.Interface)
		}
		nums[p.Number], names[p.Interface] = p.Interface, p.Number
	}
	return nil
}

func checkTargets(controllers, listen []string) error {
	for _, t := range controllers {
		tg, err := openflow.ParseTarget(t)
		if err != nil || tg.Passive {
			return configErr("controller %q: want tcp:HOST[:PORT] or tls:HOST[:PORT]", t)
		}
	}
	for _, t := range listen {
		tg, err := openflow.ParseTarget(t)
		if err != nil || !tg.Passive {
			return configErr("listen %q: want ptcp:PORT[:IP] or ptls:PORT[:IP]", t)
		}
	}
	return nil
}

// loadTLS reads the TLS files when some target uses TLS: all three are
// needed then (gswitchd authenticates itself and its peers, as Open
// vSwitch does); without a TLS target they are not read.
func loadTLS(c Config) (client, server *tls.Config, err error) {
	var active, passive bool
	for _, t := range append(append([]string(nil), c.Controllers...), c.Listen...) {
		if tg, err := openflow.ParseTarget(t); err == nil && tg.TLS {
			active, passive = active || !tg.Passive, passive || tg.Passive
		}
	}
	if !active && !passive {
		return nil, nil, nil
	}
	f := c.TLS
	switch {
	case f.PrivateKey == "":
		return nil, nil, configErr("tls: a TLS target needs tls.private_key (--tls-private-key)")
	case f.Certificate == "":
		return nil, nil, configErr("tls: a TLS target needs tls.certificate (--tls-certificate)")
	case f.CACert == "":
		return nil, nil, configErr("tls: a TLS target needs tls.ca_cert (--tls-ca-cert) to check its peers")
	}
	cert, err := loadKeyPair("tls", f.Certificate, f.PrivateKey)
	if err != nil {
		return nil, nil, err
	}
	pool, err := loadCAPool("tls", f.CACert)
	if err != nil {
		return nil, nil, err
	}
	if active {
		client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if passive {
		server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
			ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12}
	}
	return client, server, nil
}

func checkNumbers(c *Config) error {
	switch {
	case c.Backend != "auto" && c.Backend != "cpu" && c.Backend != "gpu":
		return configErr("backend %q: want auto, cpu or gpu", c.Backend)
	case c.Tables < 1 || c.Tables > int(rule.TableMax):
		return configErr("tables %d: want 1..%d", c.Tables, rule.TableMax)
	case c.MaxDelay <= 0 || c.MaxDelay > time.Second:
		return configErr("max delay %v: want more than 0 and at most 1s", c.MaxDelay)
	case c.InFlight < 0 || c.InFlight > 64 || c.BatchDepth < 0 || c.BatchDepth > 256:
		return configErr("in flight %d, batch depth %d: want 0 (the default) to 64 and 0 to 256", c.InFlight, c.BatchDepth)
	case c.RxWorkers < 0 || c.RxWorkers > maxRxWorkers:
		return configErr("rx workers %d: want 0 (a goroutine per receive queue) to %d", c.RxWorkers, maxRxWorkers)
	case c.WorkerFlight < 0 || c.WorkerFlight > 64:
		return configErr("worker in flight %d: want 0 (each run waits for its lookup) to 64", c.WorkerFlight)
	case c.WorkerFlight > 0 && c.RxWorkers == 0:
		return configErr("worker in flight %d: takes datapath workers (rx_workers, --rx-workers)", c.WorkerFlight)
	case c.WorkerShared < 0 || c.WorkerShared > 64:
		return configErr("worker shared %d: want 0 (a device call per run) to 64", c.WorkerShared)
	case c.WorkerShared > 0 && c.WorkerFlight == 0:
		return configErr("worker shared %d: takes a worker's runs in flight (worker_in_flight, --worker-in-flight)", c.WorkerShared)
	case c.SharedDelay < 0 || c.SharedDelay >= c.MaxDelay:
		return configErr("shared delay %v: want 0 (off) or more, and less than the max delay %v", c.SharedDelay, c.MaxDelay)
	case c.MinBatch < 1:
		return configErr("min batch %d: want at least 1", c.MinBatch)
	case c.BatchSize < 1 || c.BatchSize > 1<<16:
		return configErr("batch size %d: want 1..65536", c.BatchSize)
	case c.RxRing != "" && c.RxRing != "auto" && c.RxRing != "block" && c.RxRing != "frame":
		return configErr("rx ring %q: want auto, block or frame", c.RxRing)
	case c.Resident < 0 || c.Resident > gpu.MaxResidentSlots:
		return configErr("resident lookups %d: want 0 (off) to %d mailbox slots", c.Resident, gpu.MaxResidentSlots)
	case c.ResidentIdle < time.Microsecond || c.ResidentIdle > 10*time.Second:
		return configErr("resident idle %v: want 1us to 10s", c.ResidentIdle)
	case c.WorkerClose != "" && c.WorkerClose != "deadline" && c.WorkerClose != "eager":
		return configErr("worker close %q: want deadline or eager", c.WorkerClose)
	case c.WorkerClose == "eager" && c.RxWorkers == 0:
		return configErr("worker close eager: takes datapath workers (rx_workers, --rx-workers)")
	case c.RxBlockSize != 0 && (c.RxBlockSize < 4096 || c.RxBlockSize > 4<<20 || c.RxBlockSize%os.Getpagesize() != 0):
		return configErr("rx block size %d: want 0 (the default) or a multiple of the page size %d from 4096 to 4194304", c.RxBlockSize, os.Getpagesize())
	case c.RxQueues < 1 || c.RxQueues > maxRxQueues:
		return configErr("rx queues %d: want 1..%d", c.RxQueues, maxRxQueues)
	case c.MaxFlows < 1 || c.MaxFlows > 1<<24:
		return configErr("max flows %d: want 1..16777216", c.MaxFlows)
	case c.CtlSocket == "":
		return configErr("ctl socket: a path is needed")
	}
	for _, g := range c.GPUs {
		if g < 0 {
			return configErr("gpus: ordinal %d", g)
		}
	}
	return nil
}

// loadKeyPair reads a PEM certificate and its private key for the settings
// named by what ("tls", "p4rt").
func loadKeyPair(what, certFile, keyFile string) (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return cert, configErr("%s: certificate %s with key %s: %v", what, certFile, keyFile, err)
	}
	return cert, nil
}

// loadCAPool reads the PEM CA certificate(s) that must sign peers'
// certificates.
func loadCAPool(what, file string) (*x509.CertPool, error) {
	caPEM, err := os.ReadFile(file)
	if err != nil {
		return nil, configErr("%s: ca_cert: %v", what, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, configErr("%s: ca_cert %s: no PEM certificate in it", what, file)
	}
	return pool, nil
}
