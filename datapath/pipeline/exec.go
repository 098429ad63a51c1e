package pipeline

import (
	"slices"
	"time"

	"github.com/gswitch/gswitch/datapath/packet"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// done is pkt.next once a packet has left the pipeline.
const done = -1

// pkt is one packet on its way through the pipeline.
type pkt struct {
	data     []byte
	rxLen    int // len(data) as received
	inPort   uint32
	key      flow.Key
	next     int  // the table to look it up in next, or done
	drop     bool // dropped: no further action runs
	dirty    bool // data changed since key was parsed
	metadata uint64
	tunnelID uint64 // set by set_field: this datapath has no tunnel ports
	actset   []rule.Action

	// What a packet-in reports: the table and cookie of the entry whose
	// action sent it, and whether that was a table-miss entry.
	tableID uint8
	cookie  uint64
	miss    bool
}

// worker holds one goroutine's buffers for running batches: keys in SoA
// order, lookup results, and the frames to send per port.
type worker struct {
	s    *Switch
	pkts []pkt
	idx  []int
	keys []flow.Key
	soa  []uint32
	res  []flow.RuleID
	// touched keeps touchEntries' loads from being optimised away.
	touched uint64
	// txq holds the frames to send, one queue per output port the batch
	// used, in the order the ports were first output to; txLast is the
	// queue emit used last (a batch's frames mostly go to one port).
	txq    []txQueue
	txLast int
	// txArena holds the copies emit makes of output frames, from begin
	// until flush has sent them: one allocation per chunk, not per frame.
	txArena []byte
	now     int64
	run     entryRun // the matches being counted (see countEntry)
	matched uint64   // packets of the table stage running now that matched an entry
	// emitFn is emit as a func value, made once (the router's output).
	emitFn func(port uint32, frame []byte)

	depth     int  // group nesting of the actions running now
	packetOut bool // running a PACKET_OUT: output:TABLE is allowed
	resubmit  bool // output:TABLE was executed
	// direct: the batch runs on the synchronous path (rx.go,
	// queueRunner.next): its lookups go to the Classifier, not through
	// the Coalescer.
	direct bool
	// lookupNs adds up the time of the batch's Classifier calls while
	// timed (processParts: a datapath worker's run, RunPartStats).
	timed    bool
	lookupNs int64
	// pre: the first table's results for the packets, looked up ahead
	// under write generation preGen (a datapath worker's run in flight,
	// async.go); nil: none. classify takes them, once.
	pre    []flow.RuleID
	preGen uint64
}

func newWorker(s *Switch) *worker {
	w := &worker{s: s}
	w.emitFn = w.emit
	return w
}

// Process runs a batch of frames received on port inPort through the
// switch: key extraction (malformed frames are counted and dropped), the
// flow tables (or, in standalone fail mode without a controller, MAC
// learning) and the actions, then sends what the actions output. Frames
// are edited in place: the caller gives them up.
func (s *Switch) Process(inPort uint32, frames [][]byte) { s.process(inPort, frames, nil, nil, false) }

// process is Process; with 'turn' it transmits only once it has taken
// turn's token (the previous batch of the receive queue has transmitted),
// and it puts a token in 'sent' (capacity 1) once it has transmitted (or
// had nothing to), so that batches of
// one queue run concurrently still leave in the order they arrived
// (queueRunner). With direct its lookups bypass the Coalescer (the
// synchronous path of a receive queue while no table is coalesced).
func (s *Switch) process(inPort uint32, frames [][]byte, turn <-chan int64, sent chan int64, direct bool) {
	w := s.workers.Get().(*worker)
	defer s.workers.Put(w)
	w.begin()
	w.direct = direct
	w.admit(inPort, frames)
	w.decide() // before waiting for the turn: a FLOW_MOD waiting for mu must not wait on an earlier batch
	if turn != nil {
		s.batches.takeTurn(turn)
	}
	w.flush()
	if sent != nil {
		sent <- monoNs()
	}
}

// rxPart is one receive queue's batch in a datapath worker's run
// (workers.go): its port and the frames its receive stages left.
type rxPart struct {
	no     uint32
	frames [][]byte
}

// processParts runs the batches of several ports as one (a datapath
// worker's, workers.go): each port's frames are admitted as Process admits
// them, and then all their packets go through the tables together, so
// that each table stage makes one lookup for all of them, straight to the
// Classifier (a batch of every port of the worker reaches a device's
// floor sooner), and each output port gets one Send. A timed run has its
// parts recorded (RunPartStats): the worker times one run in
// runPartEvery, as the shared histograms' atomic adds and the clock reads
// of every run would cost its frames more than the sample is worth.
func (s *Switch) processParts(parts []rxPart, timed bool) {
	w := s.workers.Get().(*worker)
	defer s.workers.Put(w)
	w.begin()
	w.direct, w.timed, w.lookupNs = true, timed, 0
	t0 := clockIf(timed)
	for _, p := range parts {
		w.admit(p.no, p.frames)
	}
	t1 := clockIf(timed)
	w.decide()
	t2 := clockIf(timed)
	w.flush()
	if !timed {
		return
	}
	t3 := time.Now()
	w.timed = false
	s.runParts[RunParse].recordN(int64(t1.Sub(t0)), 1)
	s.runParts[RunLookup].recordN(w.lookupNs, 1)
	s.runParts[RunDecide].recordN(int64(t2.Sub(t1))-w.lookupNs, 1)
	s.runParts[RunSend].recordN(int64(t3.Sub(t2)), 1)
}

// runPartEvery: a datapath worker times one of this many runs by part.
const runPartEvery = 8

// clockIf is the time when on, else the zero time (no clock read).
func clockIf(on bool) time.Time {
	if on {
		return time.Now()
	}
	return time.Time{}
}

// admit takes a batch of frames received on port inPort into the worker's
// batch: a port that does not receive (PORT_MOD's NO_RECV, PORT_DOWN)
// counts them dropped, a router port's go to the Router (what it sends
// is queued for the flush), the rest are parsed into packets (a malformed
// frame is counted by reason and dropped).
func (w *worker) admit(inPort uint32, frames [][]byte) {
	s := w.s
	s.batches.observe(len(frames))
	in := s.ports[inPort]
	if in != nil && !in.receives() {
		in.rxDropped.Add(uint64(len(frames)))
		return
	}
	if r := s.cfg.Router; r != nil && r.Owns(inPort) {
		r.Route(inPort, frames, w.emitFn)
		return
	}
	for _, f := range frames {
		// Parsed in place: a pkt is a few hundred bytes.
		p := w.newPkt()
		p.data, p.rxLen, p.inPort = f, len(f), inPort
		if r := packet.Parse(&p.key, f, inPort); r != packet.OK {
			w.pkts = w.pkts[:len(w.pkts)-1]
			s.malformed[r].Add(1)
			if in != nil {
				in.rxDropped.Add(1)
			}
		}
	}
}

// decide runs the admitted packets through the flow tables under the
// read lock (or, in standalone fail mode without a controller, the
// learning switch); what they output waits in the worker's send queues.
func (w *worker) decide() {
	if len(w.pkts) == 0 {
		return
	}
	if w.s.standalone() {
		for i := range w.pkts {
			w.normal(&w.pkts[i])
		}
		return
	}
	w.s.mu.RLock()
	w.pipeline(0)
	w.s.mu.RUnlock()
}

// newPkt appends a packet to the batch and returns it, empty but for its
// key, which Parse writes whole, and its action set's storage, kept from
// an earlier batch. It is the append of a pkt{} without writing the key
// twice and copying the packet from a temporary: per frame, that took
// about a tenth of the switch's CPU time.
func (w *worker) newPkt() *pkt {
	n := len(w.pkts)
	if n == cap(w.pkts) {
		w.pkts = append(w.pkts, pkt{})
	} else {
		w.pkts = w.pkts[:n+1]
	}
	p := &w.pkts[n]
	p.data, p.rxLen, p.inPort = nil, 0, 0
	p.next, p.drop, p.dirty = 0, false, false
	p.metadata, p.tunnelID, p.actset = 0, 0, p.actset[:0]
	p.tableID, p.cookie, p.miss = 0, 0, false
	return p // (TestNewPktResets checks that every field but the key is reset)
}

func (w *worker) begin() {
	w.pkts = w.pkts[:0]
	if cap(w.txArena) > maxTxArena {
		w.txArena = nil // a burst of big frames: do not keep it
	}
	w.txArena = w.txArena[:0]
	w.now = time.Now().UnixNano()
	w.packetOut, w.resubmit, w.direct = false, false, false
}

// pipeline runs every packet whose next table is from or later through
// the tables, stage by stage: all packets at table t are classified in one
// batch, then their instructions run; goto_table only goes forward, so one
// pass over the tables finishes every packet.
func (w *worker) pipeline(from int) {
	for t := from; t < len(w.s.tables); t++ {
		w.idx = w.idx[:0]
		for i := range w.pkts {
			if !w.pkts[i].drop && w.pkts[i].next == t {
				w.idx = append(w.idx, i)
			}
		}
		if len(w.idx) == 0 {
			continue
		}
		tab := w.s.tables[t]
		w.classify(tab)
		tab.lookups.Add(uint64(len(w.idx)))
		w.matched = 0
		w.touchEntries(tab)
		for k, i := range w.idx {
			w.applyEntry(&w.pkts[i], tab, w.res[k])
		}
		w.flushRun()
		if w.matched > 0 {
			tab.matched.Add(w.matched)
		}
	}
}

// touchEntries reads a word of each cache line of the hit entries' hot
// fields (entry), a load per line and nothing done with it, before the
// stage applies them one by one: the loads do not depend on one another, so
// the processor has the cache misses of a batch that hits a large table at
// random in flight together, and applyEntry then finds the lines cached,
// instead of waiting for each entry's misses in turn behind the work of the
// packet before.
func (w *worker) touchEntries(tab *table) {
	var sum uint64
	for _, id := range w.res[:len(w.idx)] {
		if e := tab.entry(id); e != nil {
			sum += e.cookie + uint64(e.in.GotoTable)
		}
	}
	w.touched += sum
}

// entryRun counts the packets in a row of one table stage that matched
// one entry: its counters then take one atomic add per run instead of
// several per packet, which in a batch of one flow is once per batch.
// flushRun adds the run before the stage ends, under the same lock the
// stage holds. The table's matched count is added once per stage
// (worker.matched): with traffic that hits the table's entries at random
// (a run per packet) the table's counter, which every receive queue
// shares, would otherwise take an atomic add per packet.
type entryRun struct {
	e              *entry
	packets, bytes uint64
}

func (w *worker) countEntry(e *entry, bytes int) {
	w.matched++
	if w.run.e != e {
		w.flushRun()
		w.run = entryRun{e: e}
	}
	w.run.packets++
	w.run.bytes += uint64(bytes)
}

func (w *worker) flushRun() {
	r := &w.run
	if r.e == nil {
		return
	}
	r.e.packets.Add(r.packets)
	r.e.bytes.Add(r.bytes)
	if r.e.idle {
		r.e.used.Store(w.now)
	}
	*r = entryRun{}
}

// classify looks the packets of w.idx up in tab through the classifier;
// should it fail, the table's own (authoritative) copy answers. The
// classifier's keys are packed straight from the packets (packSoA); the
// whole keys are gathered (w.keys) only for an LPM-shaped table and the
// fallback, which take them.
func (w *worker) classify(tab *table) {
	for _, i := range w.idx {
		if p := &w.pkts[i]; p.dirty {
			p.reparse()
		}
	}
	n := len(w.idx)
	w.res = slices.Grow(w.res[:0], n)[:n]
	if w.pre != nil && w.lookedAhead(tab) { // a worker's run in flight (async.go)
		return
	}
	if tab.lpm != nil && tab.lpm.Serves() { // an LPM-shaped table (lpm.go, tables/lpmshape)
		err := tab.lpm.Lookup(w.gatherKeys(), w.res)
		if err == nil {
			return
		}
		w.s.log.Error("pipeline: LPM lookup failed; table answered by the classifier", "table", tab.id, "err", err)
	}
	w.soa = w.packSoA(tab.proj, w.soa)
	var err error
	if co := w.s.cfg.Coalescer; co != nil && !w.direct {
		err = co.LookupFlow(gpu.TableID(tab.id), w.soa, n, w.res)
	} else {
		t0 := clockIf(w.timed)
		err = w.s.cfg.Classifier.LookupFlow(gpu.TableID(tab.id), w.soa, n, w.res)
		if w.timed {
			w.lookupNs += int64(time.Since(t0))
		}
	}
	if err != nil {
		w.s.log.Error("pipeline: classifier lookup failed; table answered on the CPU", "table", tab.id, "err", err)
		tab.ft.LookupBatch(w.gatherKeys(), w.res)
	}
}

// gatherKeys returns the keys of the packets of w.idx, in order.
func (w *worker) gatherKeys() []flow.Key {
	w.keys = w.keys[:0]
	for _, i := range w.idx {
		w.keys = append(w.keys, w.pkts[i].key)
	}
	return w.keys
}

// packSoA is flow.PackSoA(w.gatherKeys(), words, dst) without the copy of
// the whole keys: word words[j] of the k-th packet of w.idx goes to
// dst[j*n+k] (n packets), a word index outside the key reads as 0. Each
// packet's key is read once (its words are adjacent) and written into the
// columns.
func (w *worker) packSoA(words []int, dst []uint32) []uint32 {
	n := len(w.idx)
	size := n * len(words)
	if cap(dst) < size {
		dst = make([]uint32, size)
	}
	dst = dst[:size]
	w.packSoAInto(words, dst, n)
	return dst
}

// reparse extracts the key again after actions changed the frame, keeping
// the pipeline fields.
func (p *pkt) reparse() {
	p.key = flow.Key{}
	packet.Parse(&p.key, p.data, p.inPort)
	p.setMetadata()
	p.dirty = false
}

func (p *pkt) setMetadata() {
	if p.metadata != 0 {
		_ = p.key.SetUint(flow.FieldMetadata, p.metadata)
	}
	if p.tunnelID != 0 {
		_ = p.key.SetUint(flow.FieldTunnelID, p.tunnelID)
	}
}

// applyEntry counts a lookup's result and runs the matched entry's
// instructions (OpenFlow 1.3 §5.9 order). A miss without a table-miss
// entry drops the packet.
func (w *worker) applyEntry(p *pkt, tab *table, id flow.RuleID) {
	var e *entry
	if id != flow.NoMatch {
		e = tab.entry(id)
	}
	if e == nil {
		w.s.missDrops.Add(1)
		w.dropRx(p)
		return
	}
	w.countEntry(e, len(p.data))
	p.tableID, p.cookie = tab.id, e.cookie
	p.miss = e.tableMiss
	in := &e.in
	if in.Has&rule.HasMeter != 0 {
		w.meter(p, in.Meter)
		if p.drop {
			return
		}
	}
	if in.Has&rule.HasApplyActions != 0 {
		w.execList(p, in.Apply)
		if p.drop {
			return
		}
	}
	if in.Has&rule.HasClearActions != 0 {
		p.actset = p.actset[:0]
	}
	if in.Has&rule.HasWriteActions != 0 {
		p.actset = writeActions(p.actset, in.Write)
	}
	if in.Has&rule.HasWriteMetadata != 0 {
		p.metadata = p.metadata&^in.MetadataMask | in.Metadata&in.MetadataMask
		_ = p.key.SetUint(flow.FieldMetadata, p.metadata)
	}
	if in.Has&rule.HasGotoTable != 0 && int(in.GotoTable) > int(tab.id) {
		p.next = int(in.GotoTable)
		return
	}
	p.next = done
	w.execList(p, orderActionSet(p.actset))
}

func (w *worker) dropRx(p *pkt) {
	p.drop = true
	if in := w.s.ports[p.inPort]; in != nil {
		in.rxDropped.Add(1)
	}
}

// execList executes actions in order, stopping when one drops the packet.
func (w *worker) execList(p *pkt, as []rule.Action) {
	for i := range as {
		w.exec(p, &as[i])
		if p.drop {
			return
		}
	}
}

func (w *worker) exec(p *pkt, a *rule.Action) {
	switch a.Kind {
	case rule.ActOutput:
		w.output(p, a.Port, a.MaxLen)
		return
	case rule.ActGroup:
		w.group(p, a.ID)
		return
	case rule.ActSetQueue:
		return // one queue per port: nothing to do
	case rule.ActSetField:
		if setPipelineField(p, a) {
			return
		}
	}
	ok, alive := edit(p, a)
	p.dirty = p.dirty || ok
	if !ok {
		w.s.unsupported.Add(1)
	}
	if !alive {
		w.invalidTTL(p)
		w.dropRx(p)
	}
}

// edit runs an action that changes the frame. ok is false when the frame
// cannot take it (it is left alone); alive is false when a TTL ran out.
func edit(p *pkt, a *rule.Action) (ok, alive bool) {
	switch a.Kind {
	case rule.ActSetField:
		return setField(p.data, a.Field, a.Value), true
	case rule.ActSetNwTTL, rule.ActDecNwTTL:
		return setTTL(p.data, a.Kind == rule.ActDecNwTTL, a.TTL)
	case rule.ActSetMPLSTTL, rule.ActDecMPLSTTL:
		return setMPLSTTL(p.data, a.Kind == rule.ActDecMPLSTTL, a.TTL)
	case rule.ActCopyTTLIn, rule.ActCopyTTLOut:
		return copyTTL(p.data, a.Kind == rule.ActCopyTTLIn), true
	}
	p.data, ok = reshape(p.data, a)
	return ok, true
}

// reshape runs an action that adds or removes a header, returning the new
// frame (the old one when it cannot).
func reshape(frame []byte, a *rule.Action) ([]byte, bool) {
	switch a.Kind {
	case rule.ActPushVLAN:
		return pushVLAN(frame, a.EthType)
	case rule.ActPopVLAN:
		return popVLAN(frame)
	case rule.ActPushMPLS:
		return pushMPLS(frame, a.EthType)
	case rule.ActPopMPLS:
		return popMPLS(frame, a.EthType)
	case rule.ActPushPBB:
		return pushPBB(frame, a.EthType)
	case rule.ActPopPBB:
		return popPBB(frame)
	}
	return frame, false
}

// writeActions merges actions into an action set: one action per kind,
// one set-field per field, the later replacing the earlier (§5.10).
func writeActions(set, as []rule.Action) []rule.Action {
	for _, a := range as {
		i := slices.IndexFunc(set, func(b rule.Action) bool {
			return b.Kind == a.Kind && (a.Kind != rule.ActSetField || b.Field == a.Field)
		})
		if i >= 0 {
			set[i] = a
		} else {
			set = append(set, a)
		}
	}
	return set
}

// actionSetRank is the execution order of an action set (§5.10): copy TTL
// in, pop, push-MPLS, push-PBB, push-VLAN, copy TTL out, decrement TTL,
// set, qos, group, output. It is indexed by the kind (an array, not a map:
// every packet leaving the pipeline looks its actions up); a kind beyond
// it ranks 0, as a kind missing from it.
var actionSetRank = [...]int{
	rule.ActCopyTTLIn: 0, rule.ActPopVLAN: 1, rule.ActPopMPLS: 1, rule.ActPopPBB: 1,
	rule.ActPushMPLS: 2, rule.ActPushPBB: 3, rule.ActPushVLAN: 4, rule.ActCopyTTLOut: 5,
	rule.ActDecMPLSTTL: 6, rule.ActDecNwTTL: 6, rule.ActSetField: 7, rule.ActSetNwTTL: 7,
	rule.ActSetMPLSTTL: 7, rule.ActSetQueue: 8, rule.ActGroup: 9, rule.ActOutput: 10,
}

func rankOf(k rule.ActionKind) int {
	if int(k) < len(actionSetRank) {
		return actionSetRank[k]
	}
	return 0
}

// orderActionSet sorts an action set into execution order, in place; with
// a group action the output action is not executed.
func orderActionSet(set []rule.Action) []rule.Action {
	if len(set) == 0 { // the common case: apply-actions only
		return set
	}
	slices.SortStableFunc(set, func(a, b rule.Action) int { return rankOf(a.Kind) - rankOf(b.Kind) })
	if slices.ContainsFunc(set, func(a rule.Action) bool { return a.Kind == rule.ActGroup }) {
		set = slices.DeleteFunc(set, func(a rule.Action) bool { return a.Kind == rule.ActOutput })
	}
	return set
}

// output sends the packet, as it is now, to a port or reserved port.
func (w *worker) output(p *pkt, port uint32, maxLen uint16) {
	switch port {
	case rule.PortInPort:
		w.emit(p.inPort, p.data)
	case rule.PortFlood, rule.PortAll:
		w.flood(p)
	case rule.PortController:
		w.packetIn(p, maxLen)
	case rule.PortNormal:
		w.normal(p)
	case rule.PortTable:
		if w.packetOut {
			w.resubmit = true
		} else {
			w.s.unsupported.Add(1)
		}
	default:
		if port == p.inPort { // §4.5: a packet leaves by its in_port only through IN_PORT
			w.s.noRoute.Add(1)
			return
		}
		w.emit(port, p.data)
	}
}

func (w *worker) flood(p *pkt) {
	for _, sp := range w.s.portList {
		if sp.no != p.inPort {
			w.emit(sp.no, p.data)
		}
	}
}

// txQueue is a batch's frames for one output port.
type txQueue struct {
	no     uint32
	sp     *swPort // nil: no such port
	ok     bool    // the port was up and forwarding when the batch first output to it
	frames [][]byte
}

// emit queues a copy of data for port no., padded to the Ethernet minimum.
// Whether the port can send (link up, not PORT_DOWN or NO_FWD) is looked
// at once per batch and port, when the batch first outputs to it: its
// frames leave in one Send at the end of the batch anyway.
func (w *worker) emit(no uint32, data []byte) {
	q := w.txQueueOf(no)
	switch {
	case q.sp == nil:
		w.s.noRoute.Add(1)
	case !q.ok:
		q.sp.txDropped.Add(1)
	default:
		q.frames = append(q.frames, w.txCopy(data))
	}
}

// txQueueOf returns the batch's queue for port no, made on the batch's
// first output to it.
func (w *worker) txQueueOf(no uint32) *txQueue {
	if w.txLast < len(w.txq) && w.txq[w.txLast].no == no {
		return &w.txq[w.txLast]
	}
	for i := range w.txq {
		if w.txq[i].no == no {
			w.txLast = i
			return &w.txq[i]
		}
	}
	// A new queue, reusing the frames slice a queue of an earlier batch
	// left at that index.
	n := len(w.txq)
	if n < cap(w.txq) {
		w.txq = w.txq[:n+1]
	} else {
		w.txq = append(w.txq, txQueue{})
	}
	q := &w.txq[n]
	sp := w.s.ports[no]
	q.no, q.sp, q.ok, q.frames = no, sp, sp != nil && sp.up() && sp.forwards(), q.frames[:0]
	w.txLast = n
	return q
}

// maxTxArena bounds the output arena a worker keeps between batches.
const maxTxArena = 4 << 20

// txCopy returns a copy of data padded like padded's, in the worker's
// output arena. The copy is needed (a later action may edit the packet
// the frame was output from); the arena saves an allocation per frame.
// When the arena is full a new chunk starts, and the frames in the old
// one keep it alive until they are sent.
func (w *worker) txCopy(data []byte) []byte {
	n := max(len(data), minFrame)
	start := len(w.txArena)
	if cap(w.txArena)-start < n {
		w.txArena = make([]byte, 0, max(2*cap(w.txArena), 64<<10, n))
		start = 0
	}
	w.txArena = w.txArena[:start+n]
	out := w.txArena[start : start+n : start+n]
	clear(out[copy(out, data):])
	return out
}

// minFrame is the shortest Ethernet frame without its FCS.
const minFrame = 60

// padded returns a copy of data padded with zeros to minFrame bytes, as
// a NIC pads on the wire (a veth does not): a frame that a pop made
// shorter than that leaves as Open vSwitch and os-ken's expected packets
// have it.
func padded(data []byte) []byte {
	out := make([]byte, max(len(data), minFrame))
	copy(out, data)
	return out
}

// packetIn sends the packet to the controllers: reason ACTION, or
// NO_MATCH from a table-miss entry; at most maxLen bytes (the agent keeps
// no buffers: OFP_NO_BUFFER).
func (w *worker) packetIn(p *pkt, maxLen uint16) {
	c := w.s.controller()
	if c == nil {
		w.s.noRoute.Add(1)
		return
	}
	if in := w.s.ports[p.inPort]; in != nil && !in.packetIns() {
		return
	}
	pi := &rule.PacketIn{Reason: rule.ReasonAction, TableID: p.tableID, Cookie: p.cookie, MaxLen: maxLen,
		Data: p.packetInData()}
	if p.miss {
		pi.Reason = rule.ReasonNoMatch
	}
	pi.Match.SetInPort(p.inPort)
	if p.metadata != 0 {
		_ = pi.Match.SetExact(flow.FieldMetadata, p.metadata)
	}
	c.PacketIn(pi)
}

// invalidTTL sends a packet whose dec_nw_ttl or dec_mpls_ttl found a TTL
// of 0 or 1 (the frame unchanged) to the controllers as a packet-in of
// reason OFPR_INVALID_TTL; the agent delivers it only to connections
// whose async configuration asks for that reason (SET_ASYNC; OpenFlow 1.3
// has no OFPC_INVALID_TTL_TO_CONTROLLER), cut to their miss_send_len. The
// packet is dropped either way (the caller drops it).
func (w *worker) invalidTTL(p *pkt) {
	c := w.s.controller()
	if c == nil {
		return
	}
	if in := w.s.ports[p.inPort]; in != nil && !in.packetIns() {
		return
	}
	pi := &rule.PacketIn{Reason: rule.ReasonInvalidTTL, TableID: p.tableID, Cookie: p.cookie,
		MaxLen: rule.MaxLenNoBuffer, Data: p.packetInData()}
	pi.Match.SetInPort(p.inPort)
	if p.metadata != 0 {
		_ = pi.Match.SetExact(flow.FieldMetadata, p.metadata)
	}
	c.PacketIn(pi)
}

// packetInData copies the frame for a packet-in: as it is, but a frame
// that actions shortened below 60 bytes is padded with zeros back to its
// received length or 60 bytes, whichever is less (as outputs pad it; a
// short frame received as such is sent up as received).
func (p *pkt) packetInData() []byte {
	n := len(p.data)
	if n < minFrame && p.rxLen > n {
		n = min(p.rxLen, minFrame)
	}
	out := make([]byte, n)
	copy(out, p.data)
	return out
}

// flush sends the queued frames, one Send per port, and empties the
// queues.
func (w *worker) flush() {
	for i := range w.txq {
		q := &w.txq[i]
		frames := q.frames
		if len(frames) == 0 {
			continue
		}
		n, err := q.sp.dev.Send(frames)
		if n < len(frames) {
			q.sp.txDropped.Add(uint64(len(frames) - n))
			if err != nil {
				w.s.log.Debug("pipeline: send", "port", q.no, "sent", n, "of", len(frames), "err", err)
			}
		}
		clear(frames)
		q.frames, q.sp = frames[:0], nil
	}
	w.txq, w.txLast = w.txq[:0], 0
}

// Transmit sends frames the router originates outside a batch (its
// solicitation retries) on port no, padded to the Ethernet minimum; a
// missing or down port drops them (counted as the port's tx drops).
func (s *Switch) Transmit(no uint32, frames [][]byte) {
	sp := s.ports[no]
	if sp == nil {
		s.noRoute.Add(uint64(len(frames)))
		return
	}
	if !sp.up() || !sp.forwards() {
		sp.txDropped.Add(uint64(len(frames)))
		return
	}
	out := make([][]byte, len(frames))
	for i, f := range frames {
		out[i] = padded(f)
	}
	if n, _ := sp.dev.Send(out); n < len(out) {
		sp.txDropped.Add(uint64(len(out) - n))
	}
}

// PacketOut sends a controller's packet through its actions; output:TABLE
// runs it through the flow tables from table 0.
func (s *Switch) PacketOut(po *rule.PacketOut) error {
	if err := checkActions(po.Actions); err != nil {
		return err
	}
	w := s.workers.Get().(*worker)
	defer s.workers.Put(w)
	w.begin()
	w.packetOut = true
	w.pkts = append(w.pkts, pkt{data: append([]byte(nil), po.Data...), rxLen: len(po.Data), inPort: po.InPort})
	p := &w.pkts[0]
	parsed := packet.Parse(&p.key, p.data, po.InPort) == packet.OK
	s.mu.RLock()
	w.execList(p, po.Actions)
	if w.resubmit && parsed && !p.drop {
		p.next, p.actset = 0, nil
		p.reparse()
		w.pipeline(0)
	}
	s.mu.RUnlock()
	w.flush()
	return nil
}
