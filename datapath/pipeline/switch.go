package pipeline

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/packet"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpmshape"
	"github.com/gswitch/gswitch/tables/rule"
)

// Classifier is what the switch needs of a lookup backend: gpu.Engine (and
// every gpu.Backend) has it. A table's image is loaded once and then kept
// current with the updates of its mirror; lookups take keys packed with
// flow.PackSoA over the table's projection.
type Classifier interface {
	Load(id gpu.TableID, kind gpu.Kind, im *bubble.Image) error
	Apply(id gpu.TableID, u bubble.Update) error
	LookupFlow(id gpu.TableID, soa []uint32, n int, out []flow.RuleID) error
}

// Device is one port's interface as the switch uses it: *afpacket.Port has
// these methods; tests use fakes.
type Device interface {
	Send(frames [][]byte) (int, error)
	Link() afpacket.LinkInfo
	Stats() (afpacket.Stats, error)
}

// Router is the L3 stage (datapath/l3's Router has these methods): the
// frames received on its ports go to Route instead of the flow tables,
// which sends what it forwards or answers through out.
type Router interface {
	Owns(port uint32) bool
	Route(inPort uint32, frames [][]byte, out func(port uint32, frame []byte))
}

// Controller receives the asynchronous messages and says whether any
// controller is connected: controlproto/openflow's *Agent has these
// methods. Controllers counts the connections to the controllers the
// agent dialled (they decide the fail mode); Connections every session,
// passive ones too.
type Controller interface {
	PacketIn(pi *rule.PacketIn) int
	FlowRemoved(fr *rule.FlowRemoved) int
	PortStatus(ps *rule.PortStatus) int
	Connections() int
	Controllers() int
}

// FailMode says what the switch does while no controller is connected.
type FailMode uint8

const (
	// FailSecure keeps forwarding by the flow tables alone (the default).
	FailSecure FailMode = iota
	// FailStandalone makes the switch an L2 learning switch while no
	// controller is connected.
	FailStandalone
)

// String returns "secure" or "standalone".
func (m FailMode) String() string {
	if m == FailStandalone {
		return "standalone"
	}
	return "secure"
}

// ParseFailMode reads "secure" or "standalone".
func ParseFailMode(s string) (FailMode, error) {
	switch s {
	case "secure", "":
		return FailSecure, nil
	case "standalone":
		return FailStandalone, nil
	}
	return 0, fmt.Errorf("fail mode %q: want secure or standalone", s)
}

// Config configures a Switch. Zero fields take the defaults.
type Config struct {
	DatapathID uint64
	// Tables is the number of flow tables (default 4, at most 254).
	Tables int
	// MaxFlows bounds each table's entries (default 65536).
	MaxFlows int
	// Algo is the classifier of every table (the zero value is
	// flow.Linear: the agent sets it from its classifier setting).
	Algo flow.Algo
	// Classifier serves the lookups (required).
	Classifier Classifier
	FailMode   FailMode
	// MaxDelay bounds how long a received frame waits for its batch to
	// fill (default 100µs); BatchSize is the batch's capacity (default 256).
	MaxDelay  time.Duration
	BatchSize int
	// LearnAge is how long a learned MAC address stays (default 300 s).
	LearnAge time.Duration
	// Router, if set, takes the frames received on its router ports (see
	// the package documentation, "Router ports").
	Router Router
	// LPMIDBase is the first gpu.TableID of the LPM images of LPM-shaped
	// flow tables (tables/lpmshape: flow table t's group slot s is at
	// LPMIDBase | t<<16 | s); default lpmshape.DefaultIDBase (1<<24), above
	// the flow tables' ids 0..253 and datapath/l3's route tables at 1<<20.
	// The daemon's allocator of engine table ids sets it.
	LPMIDBase gpu.TableID
	// Coalescer, if set, serves the flow tables' lookups instead of
	// Classifier.LookupFlow (its backend is the Classifier), gathering
	// the lookups of all ports and queues into shared device batches, and
	// RunPort runs asynchronously: a receive queue's batches are run by a
	// goroutine of their own while its reader goes on reading the ring
	// (see the package documentation, "Shared device batches"). Nil: the
	// synchronous path.
	Coalescer *gpu.Coalescer
	// Depth is, with a Coalescer, how many closed batches of a receive
	// queue may be unfinished (the ones being run included) before its
	// reader waits (default 3, or 8 with the default InFlight of 4; at
	// least InFlight).
	Depth int
	// InFlight is, with a Coalescer, how many batches of a receive queue
	// run at once (default: flightDefaults, 4 with 8 or more Go
	// processors, else 2): the runner starts batch k+1's pipeline
	// (and so its lookups) while batch k's lookup is on the device, and
	// each batch transmits only after the one before it, so frames still
	// leave in the order they arrived. 1 runs them one after the other.
	InFlight int
	// WorkerInFlight is, for the datapath workers (RunWorker), how many of
	// a worker's runs may have their first table's lookup on the device
	// at once while the worker reads on (async.go); 0 runs each run to its
	// end before the next read, the lookup waited for. It takes a
	// Classifier with batches submitted apart from their wait (gpu.Engine,
	// every gpu.Backend); with another the runs stay synchronous.
	WorkerInFlight int
	// WorkerEager closes a datapath worker's open batch as soon as its
	// rings are empty and a run may start (fewer than WorkerInFlight runs
	// in flight, or synchronous runs), rather than when it is full or its
	// oldest frame has waited MaxDelay: GSwitch's group commit, batches as
	// large as what comes during a lookup. It suits a device whose small
	// lookups are cheap to start (gpu's resident lookups); with every run
	// in flight the batch still closes at MaxDelay or when full.
	WorkerEager bool
	// Gatherer, with WorkerInFlight, takes the workers' lookups ahead
	// into shared batches (gpu.Gatherer: the keys of all workers' runs
	// that close while the batches before are in flight go in one device
	// call) instead of a batch per run. Its backend is the Classifier.
	Gatherer *gpu.Gatherer
	Logger   *slog.Logger
}

// flightDefaults sets InFlight and Depth where they are unset, for procs
// Go processors. A queue's batches in flight are goroutines that want a
// processor each while they run their actions and transmit; with 8 or
// more (gswitchd on 8 cores) 4 in flight and a depth of 8 kept the queues'
// readers from waiting where 2 and 3 let them wait for most of a step, and
// raised the lossless rate (H200 machine, 2026-11-27, 131,072 rules in 512
// classes, 8 pairs: 4.0–5.0 against 3.5–4.5 Mframes/s, alternated in three
// calls); on 4 cores 2 and 3 did as well or better. Depth is at least
// InFlight.
func (c *Config) flightDefaults(procs int) {
	if c.InFlight <= 0 {
		c.InFlight = 2
		if procs >= 8 {
			c.InFlight = 4
			if c.Depth <= 0 {
				c.Depth = 8
			}
		}
	}
	if c.Depth <= 0 {
		c.Depth = 3
	}
	c.Depth = max(c.Depth, c.InFlight)
}

func (c *Config) normalize() error {
	if c.Tables == 0 {
		c.Tables = 4
	}
	if c.Tables < 1 || c.Tables > int(rule.TableMax) {
		return fmt.Errorf("pipeline: %d tables: want 1..%d", c.Tables, rule.TableMax)
	}
	if c.MaxFlows == 0 {
		c.MaxFlows = 1 << 16
	}
	if c.Classifier == nil {
		return errors.New("pipeline: no classifier")
	}
	if c.MaxDelay <= 0 {
		c.MaxDelay = 100 * time.Microsecond
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 256
	}
	c.flightDefaults(runtime.GOMAXPROCS(0))
	if c.LearnAge <= 0 {
		c.LearnAge = 300 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.LPMIDBase == 0 {
		c.LPMIDBase = gpu.TableID(lpmshape.DefaultIDBase)
	}
	return nil
}

// Switch is a switch with OpenFlow 1.3's semantics (tables/rule's model)
// over flow tables classified by a Classifier and ports given as Devices.
// See the package documentation.
type Switch struct {
	cfg   Config
	log   *slog.Logger
	start time.Time

	// mu orders control against the datapath: FlowMod, expiry and every
	// change of the tables, their entries and the classifier's images take
	// it for writing; a batch holds it for reading from its first lookup to
	// its last action. So when a change returns, no batch decided with the
	// old state is still deciding.
	mu     sync.RWMutex
	tables []*table
	// wgen counts the holds of mu for writing (lockWrite adds one under
	// it): a lookup made under the read lock is still the tables' answer
	// when the read lock is taken again and wgen has not moved (a datapath
	// worker's lookups in flight, async.go).
	wgen atomic.Uint64

	ports    map[uint32]*swPort // fixed before Start
	portList []*swPort          // ascending port number

	groups *rule.GroupTable
	meters *rule.MeterTable

	ctrl    atomic.Pointer[controllerBox]
	learn   macTable
	workers sync.Pool

	malformed   [packet.NumReasons]atomic.Uint64
	unsupported atomic.Uint64 // actions the switch cannot execute (dropped)
	noRoute     atomic.Uint64 // outputs to a missing or down port
	missDrops   atomic.Uint64 // table misses without a table-miss flow
	groupDrops  atomic.Uint64 // packets of a group with no live bucket
	meterDrops  atomic.Uint64 // packets a meter's drop band dropped

	offloadDrops atomic.Uint64             // received frames whose checksum/GSO offload could not be finished, or truncated
	batches      batchStats                // batches Process ran
	latency      latencyStats              // per-frame latency, receive ring to the end of the pipeline (latency.go)
	stages       [numStages]latencyStats   // the same by stage: ring, batch, run (LatencyStage)
	writeHolds   [numWriteOps]latencyStats // how long each kind of change held the datapath back (writelock.go)
	runParts     [numRunParts]latencyStats // a datapath worker's runs, by part (RunPart)
}

type controllerBox struct{ c Controller }

// New returns a switch with empty tables, their images loaded into the
// classifier.
func New(cfg Config) (*Switch, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	s := &Switch{cfg: cfg, log: cfg.Logger, start: time.Now(), ports: map[uint32]*swPort{},
		groups: rule.NewGroupTable(rule.GroupTableConfig{}), meters: rule.NewMeterTable(rule.MeterTableConfig{})}
	s.learn.init(cfg.LearnAge)
	for i := range cfg.Tables {
		ft, err := flow.NewTable(flow.Config{Algo: cfg.Algo, MaxEntries: cfg.MaxFlows, Seed: uint64(i) + 1})
		if err != nil {
			return nil, fmt.Errorf("pipeline: table %d: %w", i, err)
		}
		t := &table{id: uint8(i), ft: ft}
		u := ft.Mirror().Sync()
		if u.Full == nil {
			return nil, fmt.Errorf("pipeline: table %d: first sync carried no image", i)
		}
		if err := cfg.Classifier.Load(gpu.TableID(i), gpu.Flow, u.Full); err != nil {
			return nil, fmt.Errorf("pipeline: table %d: load: %w", i, err)
		}
		t.proj = ft.UsedWords()
		s.tables = append(s.tables, t)
	}
	s.workers.New = func() any { return newWorker(s) }
	return s, nil
}

// SetController connects the switch to its controller side (the agent).
func (s *Switch) SetController(c Controller) { s.ctrl.Store(&controllerBox{c}) }

func (s *Switch) controller() Controller {
	if b := s.ctrl.Load(); b != nil {
		return b.c
	}
	return nil
}

// standalone reports whether the switch acts as a learning switch now:
// in standalone fail mode while no controller it dialled is connected (an
// ovs-ofctl session on a listener does not stop the learning).
func (s *Switch) standalone() bool {
	if s.cfg.FailMode != FailStandalone {
		return false
	}
	c := s.controller()
	return c == nil || c.Controllers() == 0
}

// AddPort attaches a device as OpenFlow port no: 1..PortMax, or
// rule.PortLocal for the LOCAL port (the host's own interface into
// the switch, as Open vSwitch's bridge interface: a standard port that
// output:LOCAL, FLOOD and ALL reach and whose frames come in with in_port
// LOCAL). Ports are added before traffic starts; the set is fixed
// afterwards.
func (s *Switch) AddPort(no uint32, dev Device) error {
	if (no == 0 || no > rule.PortMax) && no != rule.PortLocal {
		return fmt.Errorf("pipeline: port number %d: want 1..%d or LOCAL (%d)", no, rule.PortMax, rule.PortLocal)
	}
	if _, dup := s.ports[no]; dup {
		return fmt.Errorf("pipeline: port number %d given twice", no)
	}
	p := &swPort{no: no, dev: dev, added: time.Now()}
	s.ports[no] = p
	s.portList = append(s.portList, p)
	slices.SortFunc(s.portList, func(a, b *swPort) int { return int(int64(a.no) - int64(b.no)) })
	return nil
}

// Features describes the switch (FEATURES_REPLY).
func (s *Switch) Features() rule.Features {
	return rule.Features{
		DatapathID:   s.cfg.DatapathID,
		NTables:      uint8(len(s.tables)),
		Capabilities: rule.CapFlowStats | rule.CapTableStats | rule.CapPortStats,
		MaxEntries:   uint32(s.cfg.MaxFlows),
		Desc: rule.Desc{
			Manufacturer: "gswitch", Hardware: "gswitch datapath (AF_PACKET)",
			Software: "gswitchd", Serial: "none", Datapath: fmt.Sprintf("dpid %#016x", s.cfg.DatapathID),
		},
	}
}

// Barrier returns once every earlier change is visible to the datapath.
// Changes are applied to the classifier before FlowMod returns, under the
// write lock that batches hold for reading, so taking and releasing it is
// enough: it waits for a change still in progress on another connection.
func (s *Switch) Barrier() error {
	s.unlockWrite(WriteBarrier, s.lockWrite()) // an empty critical section is the point
	return nil
}

// TableStats returns one entry per table.
func (s *Switch) TableStats() []rule.TableStats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]rule.TableStats, len(s.tables))
	for i, t := range s.tables {
		out[i] = rule.TableStats{TableID: t.id, Active: uint32(t.ft.Len()), Lookups: t.lookups.Load(), Matched: t.matched.Load()}
	}
	return out
}
