package eventfwd

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// Matcher matches a batch of events: out[i] is the sorted ports event i's
// predicate matched (MatchBatch's contract of tables/pubsub.Table, the CPU
// matcher; a device backend implements the same). It is called from
// several goroutines at once.
type Matcher interface {
	MatchBatch(evs []pubsub.Event, out [][]uint32) [][]uint32
}

// Transmitter sends frames out of a port outside a batch
// (pipeline.Switch.Transmit): it copies them before it returns.
type Transmitter interface {
	Transmit(port uint32, frames [][]byte)
}

// Config is a Stage's configuration.
type Config struct {
	UDPPort uint16 // the event packets' UDP destination port (1..65535)
	Matcher Matcher
	Out     Transmitter
}

// Stage is content-based forwarding's receive stage (a pipeline.RxStage):
// see the package documentation.
type Stage struct {
	port uint16
	out  Transmitter
	m    atomic.Pointer[matcherBox]

	received, malformed, matched, delivered atomic.Uint64

	mu      sync.Mutex // guards perPort's map (not the counters in it)
	perPort map[uint32]*atomic.Uint64

	pool sync.Pool // *work
}

type matcherBox struct{ m Matcher }

// work is one Rx call's scratch, owned by the calling goroutine.
type work struct {
	evs    []pubsub.Event
	frames [][]byte
	res    [][]uint32
	byPort map[uint32][][]byte
}

// New returns a stage; it checks the configuration.
func New(c Config) (*Stage, error) {
	switch {
	case c.UDPPort == 0:
		return nil, errors.New("eventfwd: UDP port 0")
	case c.Matcher == nil:
		return nil, errors.New("eventfwd: no matcher")
	case c.Out == nil:
		return nil, errors.New("eventfwd: no transmitter")
	}
	s := &Stage{port: c.UDPPort, out: c.Out, perPort: map[uint32]*atomic.Uint64{}}
	s.m.Store(&matcherBox{c.Matcher})
	s.pool.New = func() any { return &work{byPort: map[uint32][][]byte{}} }
	return s, nil
}

// SetMatcher replaces the matcher from the next batch on (a backend
// change); batches under way finish with the one they loaded.
func (s *Stage) SetMatcher(m Matcher) { s.m.Store(&matcherBox{m}) }

// UDPPort returns the event packets' UDP destination port.
func (s *Stage) UDPPort() uint16 { return s.port }

// Rx takes the event packets out of a received batch, matches them as one
// batch and transmits each, unchanged, to the ports its predicate matched
// except in (the port it came in on); a malformed event is counted and
// dropped. The other frames are returned, in order, for the flow tables.
// It implements pipeline.RxStage; scratch is not used.
func (s *Stage) Rx(in uint32, frames [][]byte, scratch []byte) ([][]byte, []byte) {
	w := s.pool.Get().(*work)
	defer s.put(w)
	rest := frames[:0]
	for _, f := range frames {
		pl, ok := UDPPayload(f, s.port)
		if !ok {
			rest = append(rest, f)
			continue
		}
		ev, err := pubsub.DecodeWire(pl)
		if err != nil {
			s.malformed.Add(1)
			continue
		}
		w.evs = append(w.evs, ev)
		w.frames = append(w.frames, f)
	}
	if len(w.evs) == 0 {
		return rest, scratch
	}
	s.received.Add(uint64(len(w.evs)))
	w.res = s.m.Load().m.MatchBatch(w.evs, w.res)
	var matched uint64
	for i, ports := range w.res {
		hit := false
		for _, p := range ports {
			if p != in {
				w.byPort[p] = append(w.byPort[p], w.frames[i])
				hit = true
			}
		}
		if hit {
			matched++
		}
	}
	s.matched.Add(matched)
	for _, p := range slices.Sorted(maps.Keys(w.byPort)) {
		fs := w.byPort[p]
		s.out.Transmit(p, fs)
		s.delivered.Add(uint64(len(fs)))
		s.portCounter(p).Add(uint64(len(fs)))
	}
	return rest, scratch
}

// put clears w's references to the batch's frames and returns it.
func (s *Stage) put(w *work) {
	clear(w.evs)
	clear(w.frames)
	w.evs, w.frames = w.evs[:0], w.frames[:0]
	for p, fs := range w.byPort {
		clear(fs)
		w.byPort[p] = fs[:0]
	}
	if len(w.byPort) > 64 {
		clear(w.byPort)
	}
	s.pool.Put(w)
}

func (s *Stage) portCounter(p uint32) *atomic.Uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.perPort[p]
	if c == nil {
		c = new(atomic.Uint64)
		s.perPort[p] = c
	}
	return c
}

// Counters are a stage's counters.
type Counters struct {
	// Received counts the well-formed event packets taken out of received
	// batches; Malformed those whose payload did not decode (dropped).
	Received, Malformed uint64
	// Matched counts the events delivered to at least one port;
	// Delivered the copies sent (one per event and port).
	Matched, Delivered uint64
	// PortDeliveries counts the copies sent per output port.
	PortDeliveries map[uint32]uint64
}

// Counters returns the stage's counters.
func (s *Stage) Counters() Counters {
	c := Counters{Received: s.received.Load(), Malformed: s.malformed.Load(),
		Matched: s.matched.Load(), Delivered: s.delivered.Load(), PortDeliveries: map[uint32]uint64{}}
	s.mu.Lock()
	for p, n := range s.perPort {
		c.PortDeliveries[p] = n.Load()
	}
	s.mu.Unlock()
	return c
}
