package gpu

import (
	"fmt"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gswitch/gswitch/tables/flow"
)

// The auto placement (--backend auto with a device): each flow table is
// served by the CPU or by the devices, whichever a calibration finds
// cheaper per key (Choose). A calibration samples calibKeys keys from the
// table's own image (the masked keys of its entries, spread over them:
// packets that hit its rules; repeated when it has fewer), times the CPU
// backend's lookup of them, and times a device's lookup of one batch of
// AutoConfig.Batch keys tiled from them (wall clock: copy in, kernel, copy
// out), divided by the batch. Each is the best of calibRuns runs, in each
// of calibRounds rounds calibGap apart (the least of all), so that a burst
// of other work during one round does not decide.
//
// The CPU's lookups are timed in the calibrating thread's own CPU time
// (CLOCK_THREAD_CPUTIME_ID, the goroutine locked to its thread), not the
// wall clock. A calibration often runs while the switch forwards (gswitchd
// recalibrates 200 ms after the last FLOW_MOD that changed a class count;
// bench forward starts its traffic right after its rules are in), and the
// wall clock then counts every moment the datapath's goroutines and the
// kernel's network work held the calibrating thread's core: on the H200
// machine (2026-11-25) the one-class table of the trivial rule set,
// 97.6 ns a key when replayed on a quiet CPU, was timed above the device's
// 310 ns and placed on the device, where the switch then forwarded a third
// less than on the CPU. (TestEngineAutoLoadedCalibration reproduces it
// with a stall inside the timed lookups.) The device's cost stays wall
// time: it is the time a batch's frames wait.
//
// Load calibrates a table, and so does an Apply that changes its class
// count (its cuckoo classes, or linear slots: what the CPU's cost grows
// with), once the table has been quiet for AutoConfig.Delay — every Apply
// to a table waiting for its calibration restarts the wait, so a table is
// not timed halfway through an installation — but at most
// maxCalibrationWait after the first change, so a long stream of updates
// cannot put it off for ever. The calibrations run on one goroutine of the
// Engine, never on the caller's: an Apply only reads the class count and
// marks the table. Every calibration is logged at info level with its
// measured costs ("gpu: table calibrated").
//
// LPM tables (LPM-shaped flow tables, served by tables/lpm, and the
// router's route tables) are calibrated the same way, with keys of their
// own shape: calibKeys addresses, each a walk from the trie's root to a
// leaf through entries that hold a route or a pointer (the address bits
// the walk does not read random), so that the timed lookups descend to
// the depths the table's routes are at (calibsample.go). Their device
// cost is measured at AutoConfig.LPMBatch keys, the batch the datapath
// looks them up in (its --batch-size: LPM lookups are made per receive
// batch, not in the shared device batches). An LPM table's "classes" are
// its trie levels that hold a node (what a CPU lookup's dependent loads
// grow with); it is recalibrated when an update changes the words of its
// levels by half or more (a rebuild that grew or shrank the trie), or
// moves it between empty and not.

// AutoConfig configures the auto placement (EngineConfig.Mode "auto").
type AutoConfig struct {
	// Batch is the batch a device's cost is measured at (0: the Engine's
	// MinBatch, the smallest batch a device gets).
	Batch int
	// HostNsPerKey is what a device lookup costs the host's CPU per key
	// beyond the device's own time (packing keys, joining the shared
	// batch, waking the waiting goroutines), added to the measured device
	// cost before Choose compares it with the CPU's (0:
	// DefaultHostNsPerKey; negative: none). The device's wall time per
	// key shrinks with the batch, this does not: it is what keeps a cheap
	// table on the CPU.
	HostNsPerKey float64
	// Delay is how long a table must be quiet after a change of its class
	// count before it is recalibrated (0: DefaultCalibrationDelay).
	Delay time.Duration
	// LPMBatch is the batch an LPM table's device cost is measured at (0:
	// Batch). The datapath looks its LPM tables (LPM-shaped flow tables,
	// route tables) up per receive batch, not in the shared device
	// batches, so gswitchd sets it to its --batch-size: below --min-batch,
	// which keeps them on the CPU (the lookups of such batches never reach
	// a device anyway).
	LPMBatch int
	// FixedDeviceNsPerKey, when positive, is a device's cost per key
	// (before HostNsPerKey) instead of a timed lookup: a figure known in
	// advance, or a simulated device in tests. The CPU is still timed.
	FixedDeviceNsPerKey float64
	// SmallBatch is the keys of a second, small device lookup the
	// calibration of a flow table placed on the devices also times (0:
	// DefaultSmallBatch; negative: none). Its time over the CPU's cost per
	// key is the table's smallest batch worth a device (TableBackend's
	// DeviceFrom, at most MinBatch): a batch of that many keys costs the
	// CPU as long as the device's small lookup takes. Below MinBatch a
	// costly table would otherwise be looked up on the CPU: on the H200
	// machine (2026-11-26, 128K rules in 512 classes, merged) about 4.5 µs
	// of CPU a key against 18-25 µs for a device lookup of 64 keys, and a
	// CPU profile of gswitchd forwarding 500 kframes/s on the frame ring
	// (--min-batch 32) found 22% of its datapath's CPU in the CPU's
	// lookups of the shared batches below 32 keys. Not with
	// FixedDeviceNsPerKey (a cost per key has no fixed part).
	SmallBatch int
	// TrafficFloor moves a device-placed flow table's floor with the CPU's
	// cost per key on the lookups below it (observeSmall). Off by default
	// (GSWITCH_TRAFFIC_FLOOR=on turns it on): on the H200 machine
	// (2026-11-27) it lowered the device lookups' p99 at 250–500 kframes/s
	// but the rounds that ran it reached 1.5 Mframes/s without loss in
	// three of five against 2.0 M in five of five without.
	TrafficFloor bool
}

// DefaultSmallBatch is AutoConfig.SmallBatch's default.
const DefaultSmallBatch = 8

// DefaultHostNsPerKey is AutoConfig.HostNsPerKey's default, measured with
// bench forward on an H200 machine (2026-11-25, 8 pairs, gswitchd on 4
// cores): with the trivial rule set every lookup on the device (shared
// batches) forwarded 2.0 Mframes/s without loss against 3.0 M on the CPU,
// (4/2.0 − 4/3.0) µs ≈ 670 ns more CPU per frame for its two table
// lookups, about 300 ns a key.
const DefaultHostNsPerKey = 300

// DefaultCalibrationDelay is AutoConfig.Delay's default.
const DefaultCalibrationDelay = 200 * time.Millisecond

const (
	calibKeys          = 512             // keys sampled from a table's image (repeated to this many when it has fewer entries)
	maxCalibrationWait = 2 * time.Second // the longest a change waits for its calibration
	calibRuns          = 3               // timed runs per round (the best counts)
	calibRounds        = 5               // rounds per measurement, calibGap apart (the best counts)
	calibGap           = 2 * time.Millisecond
)

// The Engine's modes (EngineConfig.Mode).
const (
	ModeAuto = "auto" // calibrated placement per flow table
	ModeGPU  = "gpu"  // every table on the devices (batches of MinBatch keys or more)
	ModeCPU  = "cpu"  // no device
)

// placed is one table's placement state.
type placed struct {
	id    TableID
	kind  Kind
	place atomic.Uint32 // Placement: read without a lock by lookups, written under mu with info
	dirty atomic.Bool   // its class count changed since its last calibration
	// classes is the class count of the last calibration (-1: none).
	classes atomic.Int64
	// size is an LPM table's level words at its last calibration
	// (CPU.tableSize): a change by half or more recalibrates it.
	size atomic.Int64
	// from is the smallest batch of the table sent to a device, from its
	// last calibration (AutoConfig.SmallBatch; 0: the Engine's MinBatch),
	// then from the traffic's own CPU cost (observeSmall).
	from atomic.Int64
	// smallNs is the wall time of the device's lookup of SmallBatch keys
	// at the last calibration (0: not measured, or the table is on the
	// CPU): the floor follows it over the traffic's CPU cost per key.
	smallNs atomic.Int64
	// tick counts the table's lookups below its floor (one in
	// trafficEvery is timed); traffic holds the timed ones' nanoseconds
	// per key until a window is full; guarded by tmu.
	tick    atomic.Uint32
	tmu     sync.Mutex
	traffic []float64

	mu   sync.Mutex
	info TableBackend // the last calibration's figures; guarded by mu
}

// devCost measures a device's lookup of the keys of s in table id: the
// wall nanoseconds per key (tests replace it through
// EngineConfig.measureDev).
type devCost func(b Backend, id TableID, s *calibSample) (float64, error)

// auto is the Engine's auto placement: its tables and its calibrator.
type auto struct {
	on      bool // mode auto with a device: tables are placed
	cfg     AutoConfig
	measure devCost
	stall   func() // EngineConfig.calibStall

	mu   sync.Mutex                          // serializes writers of tabs
	tabs atomic.Pointer[map[TableID]*placed] // copied on write; read lock-free by the lookups
	gen  atomic.Uint64                       // PlacementGeneration

	kick chan struct{} // cap 1: a table needs a calibration
	done chan struct{}
	wg   sync.WaitGroup
}

// startAuto sets up the placement state; with mode auto and a device it
// starts the calibrator.
func (e *Engine) startAuto(cfg EngineConfig) {
	a := &e.auto
	a.cfg = cfg.Auto
	if a.cfg.Batch <= 0 {
		a.cfg.Batch = e.minBatch
	}
	if a.cfg.HostNsPerKey == 0 {
		a.cfg.HostNsPerKey = DefaultHostNsPerKey
	}
	if a.cfg.SmallBatch == 0 {
		a.cfg.SmallBatch = DefaultSmallBatch
	}
	a.cfg.TrafficFloor = a.cfg.TrafficFloor || os.Getenv("GSWITCH_TRAFFIC_FLOOR") == "on"
	a.cfg.HostNsPerKey = max(a.cfg.HostNsPerKey, 0)
	if a.cfg.Delay <= 0 {
		a.cfg.Delay = DefaultCalibrationDelay
	}
	a.measure, a.stall = cfg.measureDev, cfg.calibStall
	if a.cfg.LPMBatch <= 0 {
		a.cfg.LPMBatch = a.cfg.Batch
	}
	if a.measure == nil && a.cfg.FixedDeviceNsPerKey > 0 {
		a.measure = fixedDeviceCost(a.cfg.FixedDeviceNsPerKey)
	}
	if a.measure == nil {
		a.measure = timeDeviceLookup
	}
	m := map[TableID]*placed{}
	a.tabs.Store(&m)
	a.kick = make(chan struct{}, 1)
	a.done = make(chan struct{})
	a.on = e.mode == ModeAuto && len(e.devs) > 0
	if a.on {
		a.wg.Add(1)
		go e.calibrator()
	}
}

// stopAuto stops the calibrator.
func (e *Engine) stopAuto() {
	select {
	case <-e.auto.done:
	default:
		close(e.auto.done)
	}
	e.auto.wg.Wait()
}

// route returns how the Engine routes table id's lookups: the smallest
// batch a device gets (its calibrated floor, placed.from, where it has one,
// else MinBatch), and whether the auto placement keeps the table on the
// CPU. One read of the placements; it allocates nothing (it is on every
// lookup's path).
func (e *Engine) route(id TableID) (floor int, onCPU bool) {
	if !e.auto.on {
		return e.minBatch, false
	}
	p := (*e.auto.tabs.Load())[id]
	if p == nil {
		return e.minBatch, false
	}
	floor = e.minBatch
	if f := p.from.Load(); f > 0 {
		floor = int(f)
	}
	return floor, Placement(p.place.Load()) == OnCPU
}

// minBatchFor returns the smallest batch of table id that a device gets
// (route).
func (e *Engine) minBatchFor(id TableID) int {
	floor, _ := e.route(id)
	return floor
}

// PlacementGeneration returns a number that changes (after the change)
// whenever which backend serves a table may have changed: a table loaded
// anew, a calibration that moved a table, a device that could not take a
// table or took one back, a device taken out of service. A caller that
// caches what DeviceServes answered for its tables reads the generation
// first, then asks, and asks again once the generation differs (the
// datapath's choice between its synchronous and its shared-batch path).
func (e *Engine) PlacementGeneration() uint64 { return e.auto.gen.Load() }

// placementChanged moves PlacementGeneration on; called after the change.
func (e *Engine) placementChanged() { e.auto.gen.Add(1) }

// noteLoad records a loaded table: a new table starts on the CPU and is
// calibrated.
func (e *Engine) noteLoad(id TableID, kind Kind) {
	a := &e.auto
	a.mu.Lock()
	p := (*a.tabs.Load())[id]
	if p == nil || p.kind != kind { // a table loaded again keeps its place until its calibration
		p = &placed{id: id, kind: kind}
		p.classes.Store(-1)
		p.size.Store(-1)
		m := maps.Clone(*a.tabs.Load())
		m[id] = p
		a.tabs.Store(&m)
		e.placementChanged()
	}
	a.mu.Unlock()
	if a.on {
		p.dirty.Store(true)
		e.kickCalibrator()
	}
}

// noteApply marks table id for a calibration when an update changed its
// class count (a flow table) or its trie's size by half or more (an LPM
// table).
func (e *Engine) noteApply(id TableID) {
	if !e.auto.on {
		return
	}
	p := (*e.auto.tabs.Load())[id]
	if p == nil {
		return
	}
	if p.kind != Flow {
		// A table that was empty at its last calibration is recalibrated
		// after any update: routes in its root change no level's size.
		if sz, last := e.cpu.tableSize(id, p.kind), p.size.Load(); p.dirty.Load() || p.classes.Load() == 0 || sizeMoved(last, sz) {
			p.dirty.Store(true)
			e.kickCalibrator()
		}
		return
	}
	n, err := e.cpu.flowClasses(id)
	if err != nil || (int64(n) == p.classes.Load() && !p.dirty.Load()) {
		return
	}
	// A class count changed, or the table still waits for its
	// calibration: the kick restarts the calibrator's quiet period.
	p.dirty.Store(true)
	e.kickCalibrator()
}

func (e *Engine) kickCalibrator() {
	select {
	case e.auto.kick <- struct{}{}:
	default:
	}
}

// calibrator waits for tables to calibrate: after a kick, until no kick
// has come for Delay (or maxCalibrationWait has passed), then it
// calibrates every marked table.
func (e *Engine) calibrator() {
	a := &e.auto
	defer a.wg.Done()
	for {
		select {
		case <-a.done:
			return
		case <-a.kick:
		}
		deadline := time.Now().Add(maxCalibrationWait)
		t := time.NewTimer(a.cfg.Delay)
	quiet:
		for {
			select {
			case <-a.done:
				t.Stop()
				return
			case <-a.kick:
				t.Reset(min(a.cfg.Delay, max(time.Until(deadline), 0)))
			case <-t.C:
				break quiet
			}
		}
		e.calibrateMarked()
	}
}

// calibrateMarked calibrates every table marked for it.
func (e *Engine) calibrateMarked() {
	m := *e.auto.tabs.Load()
	for _, id := range slices.Sorted(maps.Keys(m)) {
		if p := m[id]; p.dirty.Swap(false) {
			e.calibrate(p)
		}
	}
}

// calibrate measures table p's costs and places it (Choose).
func (e *Engine) calibrate(p *placed) {
	smp, err := e.cpu.sample(p.id, p.kind, calibKeys)
	if err != nil {
		e.setReason(p, fmt.Sprintf("calibration failed: %v", err))
		return
	}
	classes := smp.classes
	b := e.auto.cfg.Batch
	if p.kind != Flow {
		b = e.auto.cfg.LPMBatch
	}
	keys := smp.tile(calibKeys)
	stall := e.auto.stall
	cpuNs, err := timeCPULookup(calibKeys, func() error {
		if stall != nil {
			stall()
		}
		return keys.lookupCPU(e.cpu, p.id)
	})
	if err != nil {
		e.setReason(p, fmt.Sprintf("calibration failed on the CPU: %v", err))
		return
	}
	tiled := smp.tile(b)
	// A device's error here only keeps the table on the CPU: a device
	// that is really broken is found (and taken out of service) by the
	// lookups, which fall back to the CPU.
	devNs, devWall := math.NaN(), math.NaN()
	from := 0
	var devErr error
	for _, d := range e.devs {
		if classes == 0 || !d.serves(p.id) {
			continue
		}
		ns, err := e.auto.measure(d.b, p.id, tiled)
		if err != nil {
			devErr = err
			continue
		}
		devWall, devNs = ns, ns+e.auto.cfg.HostNsPerKey
		from = e.smallFrom(d.b, p, smp, cpuNs)
		break
	}
	cur := Placement(p.place.Load())
	next, why := Choose(cur, Costs{CPUNsPerKey: cpuNs, DeviceNsPerKey: devNs, Batch: b}, e.minBatch)
	switch {
	case classes == 0:
		next, why = OnCPU, "an empty table: every lookup misses at once on the CPU"
	case math.IsNaN(devNs):
		next, why = OnCPU, "no device can serve the table"
		if devErr != nil {
			why += ": " + devErr.Error()
		}
	}
	p.classes.Store(int64(classes))
	p.size.Store(e.cpu.tableSize(p.id, p.kind))
	if next != OnDevice {
		from = 0
		p.smallNs.Store(0)
	}
	p.from.Store(int64(from))
	p.tmu.Lock()
	p.traffic = p.traffic[:0] // timed against the floor before
	p.tmu.Unlock()
	p.mu.Lock()
	// The place and the figures that chose it change together under mu,
	// so that TableBackends never shows one without the other.
	p.place.Store(uint32(next))
	p.info.Classes, p.info.CPUNsPerKey, p.info.DeviceNsPerKey, p.info.Batch = classes, cpuNs, devNs, b
	p.info.DeviceFrom, p.info.TrafficCPUNsPerKey = from, 0
	if math.IsNaN(devNs) {
		p.info.DeviceNsPerKey = 0
	}
	p.info.Calibrations++
	calibs := p.info.Calibrations
	p.info.Reason = "auto: " + why
	p.mu.Unlock()
	if next != cur {
		e.placementChanged()
	}
	dev := func(x float64) any {
		if math.IsNaN(x) {
			return "none"
		}
		return math.Round(x*10) / 10
	}
	e.log.Info("gpu: table calibrated", "table", p.id, "kind", p.kind.String(), "backend", next.String(), "was", cur.String(), "classes", classes,
		"cpu_ns_per_key", math.Round(cpuNs*10)/10, "device_ns_per_key", dev(devNs), "device_measured_ns_per_key", dev(devWall),
		"host_ns_per_key", e.auto.cfg.HostNsPerKey, "batch", b, "calibration", calibs, "device_from", from, "why", why)
	if next != cur {
		e.log.Info("gpu: table placed", "table", p.id, "kind", p.kind.String(), "backend", next.String(), "classes", classes, "why", why)
	}
}

// smallFrom times device b's lookup of AutoConfig.SmallBatch keys of
// flow table p (sample smp) and returns the smallest batch worth the
// device: the lookup's wall time over the CPU's cost per key, rounded up,
// between SmallBatch and MinBatch; 0 (MinBatch) when not measured. The
// lookup's wall time goes to p.smallNs.
func (e *Engine) smallFrom(b Backend, p *placed, smp *calibSample, cpuNs float64) int {
	p.smallNs.Store(0)
	k := e.auto.cfg.SmallBatch
	if p.kind != Flow || k <= 0 || k >= e.minBatch || e.auto.cfg.FixedDeviceNsPerKey > 0 || !(cpuNs > 0) {
		return 0
	}
	ns, err := e.auto.measure(b, p.id, smp.tile(k))
	if err != nil || !(ns > 0) {
		return 0
	}
	p.smallNs.Store(int64(ns * float64(k)))
	return int(min(max(math.Ceil(ns*float64(k)/cpuNs), float64(k)), float64(e.minBatch)))
}

// The floor on the traffic. A calibration prices the CPU's lookups on keys
// sampled from the table's own entries; the datapath's traffic may cost
// the CPU much more a key: on the H200 machine (2026-11-27, 131,072 rules
// in 512 classes, merged) the calibration's sample cost 0.6–1.6 µs a key
// and bench forward's random headers about 4.5 µs, so that batches of up
// to 10–32 keys, a datapath worker's whole batch at a few hundred
// thousand frames a second, were looked up on the CPU (95–99% of the
// table's keys at 250 kframes/s) at several times the device's cost. So
// one lookup in trafficEvery below a device-placed table's floor is timed
// (wall clock, on the caller's goroutine), and after each trafficWindow of
// them the floor becomes the device's small lookup (smallNs) over their
// median cost per key, rounded up, from 1 to MinBatch. The median keeps a
// lookup whose thread was descheduled from deciding. A table whose floor
// reached 1 has no lookups left below it to time; its next calibration
// (a change of its class count) starts over from the sample. Only with
// AutoConfig.TrafficFloor.
const (
	trafficEvery  = 16
	trafficWindow = 31
)

// smallOnCPU returns table id's placement when this lookup of n keys,
// which the CPU serves, is one to time (observeSmall): the table is on the
// devices with a measured small lookup, n is below its floor, and it is
// the trafficEvery-th such lookup; nil otherwise.
func (e *Engine) smallOnCPU(id TableID, n int) *placed {
	if !e.auto.on || !e.auto.cfg.TrafficFloor || n <= 0 {
		return nil
	}
	p := (*e.auto.tabs.Load())[id]
	if p == nil || p.kind != Flow || p.smallNs.Load() <= 0 || Placement(p.place.Load()) != OnDevice || int64(n) >= p.from.Load() {
		return nil
	}
	if p.tick.Add(1)%trafficEvery != 0 {
		return nil
	}
	return p
}

// observeSmall records that the CPU looked up n keys of table p in d, and
// moves p's floor once a window of such lookups is full.
func (e *Engine) observeSmall(p *placed, n int, d time.Duration) {
	p.tmu.Lock()
	p.traffic = append(p.traffic, float64(d.Nanoseconds())/float64(n))
	if len(p.traffic) < trafficWindow {
		p.tmu.Unlock()
		return
	}
	slices.Sort(p.traffic)
	med := p.traffic[len(p.traffic)/2]
	p.traffic = p.traffic[:0]
	p.tmu.Unlock()
	small := p.smallNs.Load()
	if small <= 0 || !(med > 0) {
		return
	}
	from := int64(min(max(math.Ceil(float64(small)/med), 1), float64(e.minBatch)))
	p.mu.Lock()
	if Placement(p.place.Load()) != OnDevice || p.smallNs.Load() != small { // recalibrated meanwhile
		p.mu.Unlock()
		return
	}
	was := p.from.Swap(from)
	p.info.DeviceFrom, p.info.TrafficCPUNsPerKey = int(from), med
	p.mu.Unlock()
	if was != from {
		e.log.Debug("gpu: device floor moved with the traffic", "table", p.id, "device_from", from, "was", was,
			"traffic_cpu_ns_per_key", math.Round(med), "device_small_lookup_ns", small)
	}
}

// tile repeats the n keys of soa (p words each, SoA order) to m keys.
func tile(soa []uint32, p, n, m int) []uint32 {
	t := make([]uint32, p*m)
	for j := 0; j < p; j++ {
		for i := 0; i < m; i++ {
			t[j*m+i] = soa[j*n+i%n]
		}
	}
	return t
}

func (e *Engine) setReason(p *placed, why string) {
	p.mu.Lock()
	p.info.Reason = "auto: " + why
	p.mu.Unlock()
}

// timeLookup runs f (a lookup of n keys) once to warm up, then calibRounds
// rounds of calibRuns runs, calibGap apart, and returns the best run's
// nanoseconds per key as 'clock' tells them.
func timeLookup(n int, clock func() time.Duration, f func() error) (float64, error) {
	if err := f(); err != nil {
		return 0, err
	}
	best := time.Duration(math.MaxInt64)
	for r := range calibRounds {
		if r > 0 {
			time.Sleep(calibGap)
		}
		for range calibRuns {
			t0 := clock()
			if err := f(); err != nil {
				return 0, err
			}
			best = min(best, clock()-t0)
		}
	}
	return float64(best.Nanoseconds()) / float64(max(n, 1)), nil
}

// wallClock is the wall clock as a duration since an arbitrary origin.
func wallClock() time.Duration { return time.Duration(time.Now().UnixNano()) }

// threadCPUTime is the calling thread's CPU time; the caller has locked
// its goroutine to the thread.
func threadCPUTime() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return wallClock()
	}
	return time.Duration(ts.Nano())
}

// timeCPULookup times a CPU lookup of n keys (timeLookup) in the thread's
// own CPU time, so that the time the thread spent descheduled — other
// goroutines and the kernel's work on its core — is not counted.
func timeCPULookup(n int, f func() error) (float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if _, err := threadCPUClock(); err != nil {
		return timeLookup(n, wallClock, f)
	}
	return timeLookup(n, threadCPUTime, f)
}

// threadCPUClock reports whether the thread CPU clock can be read.
func threadCPUClock() (time.Duration, error) {
	var ts unix.Timespec
	err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano()), err
}

// timeDeviceLookup is the default devCost: the wall time of a device's
// lookup of s's keys, the best of timeLookup's runs, per key.
func timeDeviceLookup(b Backend, id TableID, s *calibSample) (float64, error) {
	return timeLookup(s.n, wallClock, func() error { return s.lookup(b, id) })
}

// fixedDeviceCost is the devCost of AutoConfig.FixedDeviceNsPerKey: the
// device looks the keys up once (so that a device that cannot serve the
// table still says so) and costs ns a key.
func fixedDeviceCost(ns float64) devCost {
	return func(b Backend, id TableID, s *calibSample) (float64, error) {
		if err := s.lookup(b, id); err != nil {
			return 0, err
		}
		return ns, nil
	}
}

// TableBackends says, for each table the Engine holds (by id), which
// backend serves it now and why; for a calibrated flow table, with its
// class count and the costs measured.
func (e *Engine) TableBackends() []TableBackend {
	m := *e.auto.tabs.Load()
	ids := slices.Sorted(maps.Keys(m))
	out := make([]TableBackend, 0, len(ids))
	up := false
	for _, d := range e.devs {
		up = up || !d.failed.Load()
	}
	mode := e.mode
	if mode == ModeAuto && len(e.devs) == 0 {
		mode = "auto (no GPU)"
	}
	for _, id := range ids {
		p := m[id]
		p.mu.Lock()
		tb, place := p.info, Placement(p.place.Load())
		p.mu.Unlock()
		tb.Table, tb.Kind, tb.Mode = id, p.kind.String(), mode
		onDev := false
		for _, d := range e.devs {
			onDev = onDev || d.serves(id)
		}
		switch {
		case e.mode == ModeCPU:
			tb.Backend, tb.Reason = "cpu", "--backend cpu"
		case len(e.devs) == 0:
			tb.Backend, tb.Reason = "cpu", "no usable GPU: the CPU serves every table"
		case !up:
			tb.Backend, tb.Reason = "cpu", "the device failed: the CPU serves every table"
		case !onDev:
			tb.Backend, tb.Reason = "cpu", "no device can hold the table"
		case e.mode != ModeAuto:
			tb.Backend, tb.Reason = "device", fmt.Sprintf("--backend gpu: batches of %d keys or more on the device", e.minBatch)
		default:
			tb.Backend = place.String()
			if tb.Reason == "" {
				tb.Reason = "auto: not calibrated yet (on the CPU until then)"
			}
		}
		out = append(out, tb)
	}
	return out
}

// sizeMoved reports whether an LPM table's level words went from last
// (its last calibration's; -1: none) to now by half or more, or between
// none and some.
func sizeMoved(last, now int64) bool {
	switch {
	case last < 0:
		return true
	case last == 0 || now == 0:
		return last != now
	}
	return now*2 <= last || now >= last*3/2
}

// tableSize returns the words of LPM table id's levels below the root (0
// for a flow table or a table it does not hold): they grow and shrink
// with the trie (a rebuild), not with every route.
func (c *CPU) tableSize(id TableID, kind Kind) int64 {
	if kind == Flow {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	lt, err := c.lookupTable(id, kind, 0, 0)
	if err != nil {
		return 0
	}
	t, i := lt.enter()
	defer lt.leave(i)
	var n int64
	for _, lv := range t.img.Words[min(2, len(t.img.Words)):] {
		n += int64(len(lv))
	}
	return n
}

// flowClasses returns flow table id's class count: the classes in its
// order (tuple, bloom, merge) or its slot high-water mark (linear).
func (c *CPU) flowClasses(id TableID) (int, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	lt, err := c.lookupTable(id, Flow, 0, 0)
	if err != nil {
		return 0, err
	}
	t, i := lt.enter()
	defer lt.leave(i)
	return int(t.img.Words[flow.RegionHeader][flow.HdrCount]), nil
}

// flowSample returns flow table id's class count, its projection width p,
// and up to limit keys in SoA order (n of them, n >= 1) taken from its
// image's entries, spread evenly over them: each the masked key of a rule,
// a packet that hits it. A table with no entry gives one key of zeros.
func (c *CPU) flowSample(id TableID, limit int) (classes, p int, soa []uint32, n int, err error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	lt, err := c.lookupTable(id, Flow, 0, 0)
	if err != nil {
		return 0, 0, nil, 0, err
	}
	t, i := lt.enter()
	defer lt.leave(i)
	h := t.img.Words[flow.RegionHeader]
	classes, p = int(h[flow.HdrCount]), t.flay.p
	ent := t.img.Words[flow.RegionEntries]
	ew := int(h[flow.HdrEntry])
	val, idw := 0, p+flow.EntID // tuple, bloom, merge: [value P, id, ...]
	slots := len(ent) / max(ew, 1)
	if t.flay.algo == flow.Linear {
		val, idw = flow.SlotValue, flow.SlotID
		slots = min(slots, classes)
	}
	if ew < p+2 || ew <= idw {
		return 0, 0, nil, 0, fmt.Errorf("%w: flow image with %d-word entries", ErrBadUpdate, ew)
	}
	var keys [][]uint32
	for s := 0; s < slots; s++ {
		e := ent[s*ew : (s+1)*ew]
		if e[idw] != flow.EmptyID {
			keys = append(keys, e[val:val+p])
		}
	}
	if len(keys) > limit {
		step := float64(len(keys)) / float64(limit)
		picked := make([][]uint32, limit)
		for k := range picked {
			picked[k] = keys[int(float64(k)*step)]
		}
		keys = picked
	}
	n = len(keys)
	if n == 0 {
		n = 1
		keys = [][]uint32{make([]uint32, p)}
	}
	soa = make([]uint32, p*n)
	for k, key := range keys {
		for j := 0; j < p; j++ {
			soa[j*n+k] = key[j]
		}
	}
	return classes, p, soa, n, nil
}
