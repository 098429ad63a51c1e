package gpu

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gswitch/gswitch/tables/bubble"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/lpm"
)

// Engine is the Backend the agent runs on: the CPU backend, which always
// holds every table (the authoritative mirror of the tables' images), and
// zero or more device backends holding replicas. It routes each lookup:
//
//   - batches smaller than MinBatch, and every lookup while no device is
//     usable, go to the CPU (CCM §5: small problems are not worth a launch);
//   - the others go to the devices, round robin batch by batch (a slice
//     lookup is split across all of them);
//   - a device that fails — a Load or Apply it cannot do although the CPU
//     accepted it, a failing launch or copy — is taken out of service for
//     good: the Engine logs it once, counts it, and answers the lookup that
//     failed, and every later one, on the CPU with the same results. Nothing
//     of the tables is lost: the CPU copy was updated first.
//
// An Update the CPU rejects is rejected (and reaches no device). Engine is
// safe for concurrent use.
type Engine struct {
	cpu      *CPU
	devs     []*engineDev
	minBatch int
	log      *slog.Logger
	mode     string // ModeAuto, ModeGPU or ModeCPU
	auto     auto   // the per-table placement (autoplace.go)

	rr        atomic.Uint64
	fallbacks atomic.Uint64 // lookups (calls or batches) a device failed and the CPU answered
	onCPU     atomic.Uint64 // keys looked up on the CPU
	onDev     atomic.Uint64 // keys looked up on devices
}

// engineDev is one device backend of an Engine and its health.
type engineDev struct {
	b      Backend
	keys   atomic.Uint64 // keys it looked up
	failed atomic.Bool
	once   sync.Once
	err    atomic.Value // error: why it failed
	// noTable lists tables the device could not take (e.g. more trie
	// levels than its kernels handle): they are served by the CPU.
	mu      sync.Mutex
	noTable map[TableID]bool
}

// EngineConfig configures NewEngine.
type EngineConfig struct {
	// Devices are opened device backends (OpenCUDA); none: CPU only.
	Devices []Backend
	// MinBatch is the smallest batch sent to a device (0: DefaultMinBatch).
	MinBatch int
	// Logger gets one line per device failure (nil: slog.Default()).
	Logger *slog.Logger
	// Mode is how tables are placed: ModeAuto (each flow table on the
	// backend a calibration finds cheaper per key; see Choose and
	// autoplace.go), ModeGPU (every table on the devices; "" means it)
	// or ModeCPU (Devices must be empty).
	Mode string
	// Auto configures ModeAuto's calibrations.
	Auto AutoConfig
	// Resident configures the CUDA devices' resident lookups, for
	// OpenConfig, which opens them (Devices given here are as they are).
	Resident ResidentConfig

	measureDev devCost // tests: a device's cost per key (nil: timed)
	// calibStall (tests) runs inside each timed CPU lookup of a
	// calibration: a stand-in for the datapath's goroutines and the
	// kernel taking the calibrating thread's core (nil: nothing).
	calibStall func()
}

// DefaultMinBatch is the smallest batch the Engine sends to a device by
// default: below it one CPU core answers faster than a launch's round trip
// (measured: README, "GPU engine").
const DefaultMinBatch = 2048

// NewEngine returns an Engine over a new CPU backend and cfg's devices.
func NewEngine(cfg EngineConfig) *Engine {
	e := &Engine{cpu: NewCPU(), minBatch: cfg.MinBatch, log: cfg.Logger, mode: cfg.Mode}
	if e.mode == "" {
		e.mode = ModeGPU
	}
	if e.minBatch <= 0 {
		e.minBatch = DefaultMinBatch
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	for _, d := range cfg.Devices {
		e.devs = append(e.devs, &engineDev{b: d, noTable: make(map[TableID]bool)})
	}
	e.startAuto(cfg)
	return e
}

// CPU returns the Engine's CPU backend (the authoritative mirror).
func (e *Engine) CPU() *CPU { return e.cpu }

// Name returns "engine".
func (e *Engine) Name() string { return "engine" }

// Device describes what serves lookups now.
func (e *Engine) Device() string {
	s := ""
	for i, d := range e.devs {
		state := "up"
		if d.failed.Load() {
			state = "failed"
		}
		s += fmt.Sprintf("; device %d: %s (%s)", i, d.b.Device(), state)
	}
	return e.cpu.Device() + s
}

// fail takes d out of service, logging once.
func (e *Engine) fail(i int, d *engineDev, err error) {
	d.once.Do(func() {
		d.err.Store(err)
		d.failed.Store(true)
		e.placementChanged()
		e.log.Error("gpu: device failed; its lookups now run on the CPU backend", "device", i, "backend", d.b.Name(), "err", err)
	})
}

// tableFault says whether a device's error rejects only a table or update
// (the device stays in service for other tables) rather than the device.
func tableFault(err error) bool {
	return errors.Is(err, ErrBadUpdate) || errors.Is(err, ErrTooManyLevel) || errors.Is(err, ErrKind)
}

// Load installs im on the CPU and on every device in service.
func (e *Engine) Load(id TableID, kind Kind, im *bubble.Image) error {
	if err := e.cpu.Load(id, kind, im); err != nil {
		return err
	}
	e.eachDev(id, func(d *engineDev) error { return d.b.Load(id, kind, im) }, true)
	e.noteLoad(id, kind)
	return nil
}

// Apply applies u on the CPU and on every device in service holding id.
func (e *Engine) Apply(id TableID, u bubble.Update) error {
	if err := e.cpu.Apply(id, u); err != nil {
		return err
	}
	e.eachDev(id, func(d *engineDev) error {
		du := u
		if _, keeps := d.b.(*CPU); keeps && u.Full != nil {
			// A CPU backend keeps the Full image it is given as its
			// table (the CPU backend above took u.Full already): each
			// gets a copy of its own, or one's bubbles would write the
			// image the other's lookups read.
			du.Full = u.Full.Clone()
		}
		return d.b.Apply(id, du)
	}, u.Full != nil)
	e.noteApply(id)
	return nil
}

// eachDev runs f on the devices in service that hold id (all of them when
// load), handling their errors: a table fault leaves id to the CPU on that
// device, any other error takes the device out of service.
func (e *Engine) eachDev(id TableID, f func(d *engineDev) error, load bool) {
	for i, d := range e.devs {
		if d.failed.Load() {
			continue
		}
		d.mu.Lock()
		skip := d.noTable[id] && !load
		d.mu.Unlock()
		if skip {
			continue
		}
		err := f(d)
		d.mu.Lock()
		changed := d.noTable[id] != (err != nil)
		d.noTable[id] = err != nil
		d.mu.Unlock()
		if changed {
			e.placementChanged()
		}
		switch {
		case err == nil:
		case tableFault(err):
			e.log.Warn("gpu: device cannot hold the table; the CPU backend serves it", "device", i, "table", id, "err", err)
		default:
			e.fail(i, d, err)
		}
	}
}

// anyTable is a table id no device is told it cannot hold: pick(anyTable)
// returns every device in service.
const anyTable = TableID(1<<32 - 1)

// pick returns the devices that can serve table id, in round-robin order.
func (e *Engine) pick(id TableID) []int {
	var ok []int
	for i, d := range e.devs {
		if d.serves(id) {
			ok = append(ok, i)
		}
	}
	if len(ok) > 1 {
		r := int(e.rr.Add(1) % uint64(len(ok)))
		ok = append(ok[r:], ok[:r]...)
	}
	return ok
}

// cpuServes reports whether a lookup of n keys in table id is the CPU
// backend's: below MinBatch, placed on the CPU (ModeAuto), or no device in
// service can serve id. It
// allocates nothing, so that the CPU path allocates nothing either (split
// takes a closure, which escapes: every lookup call through it allocated,
// and a lookup goroutine that allocates is drafted into the collector's
// marking whenever a GC runs).
func (e *Engine) cpuServes(id TableID, n int) bool {
	if floor, onCPU := e.route(id); onCPU || n < floor {
		return true
	}
	for _, d := range e.devs {
		if d.serves(id) {
			return false
		}
	}
	return true
}

// serves reports whether the device is in service and can hold table id.
func (d *engineDev) serves(id TableID) bool {
	if d.failed.Load() {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.noTable[id]
}

// split runs a slice lookup of n keys: on the CPU below MinBatch or with no
// device, else cut into one part per device, the parts run concurrently; a
// part whose device fails is redone on the CPU. run(b, lo, hi) looks up keys
// [lo, hi) on b.
func (e *Engine) split(id TableID, n int, run func(b Backend, lo, hi int) error) error {
	devs := e.pick(id)
	if n < e.minBatchFor(id) || len(devs) == 0 {
		e.onCPU.Add(uint64(n))
		return run(e.cpu, 0, n)
	}
	errs := make([]error, len(devs))
	part := func(k, i int) {
		lo, hi := k*n/len(devs), (k+1)*n/len(devs)
		d := e.devs[i]
		errs[k] = e.devResult(i, d, hi-lo, run(d.b, lo, hi), func() error { return run(e.cpu, lo, hi) })
	}
	if len(devs) == 1 { // one device: on the caller's goroutine (no hop to a goroutine and back)
		part(0, devs[0])
		return errs[0]
	}
	var wg sync.WaitGroup
	for k, i := range devs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			part(k, i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// devResult accounts for a device's part of a lookup, 'keys' keys that
// came back with err: counted on the device when err is nil; returned as
// it is when it is the caller's mistake (the CPU would say the same);
// else the device is taken out of service and the CPU answers (redo).
func (e *Engine) devResult(i int, d *engineDev, keys int, err error, redo func() error) error {
	if err == nil {
		e.onDev.Add(uint64(keys))
		d.keys.Add(uint64(keys))
		return nil
	}
	if tableFault(err) || errors.Is(err, ErrNoTable) || errors.Is(err, ErrShortOut) || errors.Is(err, ErrShortKeys) {
		return err
	}
	e.fail(i, d, err)
	e.fallbacks.Add(1)
	e.onCPU.Add(uint64(keys))
	return redo()
}

// soleDevice returns the index of the one device in service that can
// hold table id, or -1 when none or several can (split then cuts the
// lookup). Unlike pick it allocates nothing: a lookup on one device goes
// to it straight, with split's accounting and fallback (devResult), and
// no garbage (a datapath worker makes one a run).
func (e *Engine) soleDevice(id TableID) int {
	i := -1
	for k, d := range e.devs {
		if d.serves(id) {
			if i >= 0 {
				return -1
			}
			i = k
		}
	}
	return i
}

// LookupLPM4 looks up IPv4 addresses (see split).
func (e *Engine) LookupLPM4(id TableID, addrs []uint32, out []uint32) error {
	if len(out) < len(addrs) {
		return ErrShortOut
	}
	if e.cpuServes(id, len(addrs)) {
		e.onCPU.Add(uint64(len(addrs)))
		return e.cpu.LookupLPM4(id, addrs, out)
	}
	if i := e.soleDevice(id); i >= 0 {
		d := e.devs[i]
		return e.devResult(i, d, len(addrs), d.b.LookupLPM4(id, addrs, out), func() error { return e.cpu.LookupLPM4(id, addrs, out) })
	}
	return e.split(id, len(addrs), func(b Backend, lo, hi int) error { return b.LookupLPM4(id, addrs[lo:hi], out[lo:hi]) })
}

// LookupLPM6 looks up IPv6 addresses (see split).
func (e *Engine) LookupLPM6(id TableID, addrs []lpm.Addr6, out []uint32) error {
	if len(out) < len(addrs) {
		return ErrShortOut
	}
	if e.cpuServes(id, len(addrs)) {
		e.onCPU.Add(uint64(len(addrs)))
		return e.cpu.LookupLPM6(id, addrs, out)
	}
	if i := e.soleDevice(id); i >= 0 {
		d := e.devs[i]
		return e.devResult(i, d, len(addrs), d.b.LookupLPM6(id, addrs, out), func() error { return e.cpu.LookupLPM6(id, addrs, out) })
	}
	return e.split(id, len(addrs), func(b Backend, lo, hi int) error { return b.LookupLPM6(id, addrs[lo:hi], out[lo:hi]) })
}

// LookupFlow classifies n packets (see split): on several devices the SoA
// columns are cut into one part per device.
func (e *Engine) LookupFlow(id TableID, soa []uint32, n int, out []flow.RuleID) error {
	if n < 0 || len(out) < n {
		return ErrShortOut
	}
	if e.cpuServes(id, n) {
		e.onCPU.Add(uint64(n))
		if p := e.smallOnCPU(id, n); p != nil {
			t0 := time.Now()
			err := e.cpu.LookupFlow(id, soa, n, out)
			if err == nil {
				e.observeSmall(p, n, time.Since(t0))
			}
			return err
		}
		return e.cpu.LookupFlow(id, soa, n, out)
	}
	if i := e.soleDevice(id); i >= 0 {
		d := e.devs[i]
		return e.devResult(i, d, n, d.b.LookupFlow(id, soa, n, out), func() error { return e.cpu.LookupFlow(id, soa, n, out) })
	}
	if len(e.pick(id)) == 0 { // taken out of service meanwhile
		e.onCPU.Add(uint64(n))
		return e.cpu.LookupFlow(id, soa, n, out)
	}
	p, err := e.cpu.flowWidth(id)
	if err != nil {
		return err
	}
	if int64(len(soa)) < int64(p)*int64(n) {
		return fmt.Errorf("%w: %d words for %d packets of %d words", ErrShortKeys, len(soa), n, p)
	}
	return e.split(id, n, func(b Backend, lo, hi int) error {
		m := hi - lo
		part := make([]uint32, p*m)
		for j := 0; j < p; j++ {
			copy(part[j*m:(j+1)*m], soa[j*n+lo:j*n+hi])
		}
		return b.LookupFlow(id, part, m, out[lo:hi])
	})
}

// NewBatch allocates a batch on the next device in service, round robin
// (pinned memory, so the device copies it asynchronously), or on the CPU
// when none is.
func (e *Engine) NewBatch(kind Kind, width, capacity int) (*Batch, error) {
	if err := checkNewBatch(kind, width, capacity); err != nil {
		return nil, err
	}
	for _, i := range e.pick(anyTable) {
		d := e.devs[i]
		b, err := d.b.NewBatch(kind, width, capacity)
		if err == nil {
			b.eng, b.dev = e, i
			return b, nil
		}
		e.fail(i, d, err)
	}
	b, err := e.cpu.NewBatch(kind, width, capacity)
	if b != nil {
		b.eng, b.dev = e, -1
	}
	return b, err
}

// Submit starts b's lookups on the device that made it when that device is
// in service, holds table id, the table is not placed on the CPU (ModeAuto)
// and b holds MinBatch keys or more; else on the
// CPU, at once. A device failure, at Submit or at Wait, is answered by the
// CPU (the batch's memory is host memory): Wait then returns the CPU's
// result.
func (e *Engine) Submit(id TableID, b *Batch) error {
	if b == nil {
		return fmt.Errorf("gpu: submit of a nil batch")
	}
	b.onDevice = false
	if floor, onCPU := e.route(id); b.eng == e && b.dev >= 0 && b.N >= floor && !onCPU {
		d := e.devs[b.dev]
		d.mu.Lock()
		no := d.noTable[id]
		d.mu.Unlock()
		if !d.failed.Load() && !no {
			err := d.b.Submit(id, b)
			if err == nil {
				e.onDev.Add(uint64(b.N))
				d.keys.Add(uint64(b.N))
				b.onDevice, b.table = true, id
				return nil
			}
			if tableFault(err) || errors.Is(err, ErrNoTable) {
				return err
			}
			e.fail(b.dev, d, err)
			e.fallbacks.Add(1)
		}
	}
	e.onCPU.Add(uint64(b.N))
	return e.cpu.Submit(id, b)
}

// deviceFailed answers batch b, submitted to its device (b.onDevice),
// whose Wait failed with err: a table fault is b's own error; any other
// takes the device out of service and the CPU looks b up.
func (e *Engine) deviceFailed(b *Batch, err error) error {
	if tableFault(err) {
		return err
	}
	d := e.devs[b.dev]
	e.fail(b.dev, d, err)
	e.fallbacks.Add(1)
	e.onDev.Add(^uint64(b.N - 1))
	d.keys.Add(^uint64(b.N - 1))
	e.onCPU.Add(uint64(b.N))
	return e.cpu.lookupOnCPU(b.table, b)
}

// MemoryUsed returns the bytes held on the CPU and the devices in service.
func (e *Engine) MemoryUsed() int64 {
	n := e.cpu.MemoryUsed()
	for _, d := range e.devs {
		if !d.failed.Load() {
			n += d.b.MemoryUsed()
		}
	}
	return n
}

// Close stops the calibrations and closes the devices and the CPU backend.
func (e *Engine) Close() error {
	e.stopAuto()
	var errs []error
	for _, d := range e.devs {
		if err := d.b.Close(); err != nil && !d.failed.Load() {
			errs = append(errs, err)
		}
	}
	return errors.Join(append(errs, e.cpu.Close())...)
}

// EngineStats is the state of an Engine, for metrics and gswitchctl.
type EngineStats struct {
	Devices      []DeviceStats
	Fallbacks    uint64 // device lookups that failed and were answered by the CPU
	KeysOnCPU    uint64 // keys looked up on the CPU (small batches, fallbacks, no device)
	KeysOnDevice uint64
	MinBatch     int
	// Tables says which backend serves each table, and why
	// (TableBackends).
	Tables []TableBackend
}

// DeviceStats is one device's state.
type DeviceStats struct {
	Name    string
	Device  string
	Up      bool
	Err     string // why it failed
	Memory  int64
	Keys    uint64    // keys it looked up
	CPUOnly []TableID // tables it could not hold
	// Resident lookups (a CUDA device with ResidentConfig, --resident-lookups; see
	// docs/gpu.md): whether they are on, the lookups posted to the
	// resident kernel and its launches.
	Resident         bool
	ResidentLookups  uint64
	ResidentLaunches uint64
}

// residentStater is what a device with resident lookups offers (CUDA).
type residentStater interface {
	ResidentStats() (on bool, posts, launches uint64)
}

// Stats returns the Engine's state.
func (e *Engine) Stats() EngineStats {
	s := EngineStats{Fallbacks: e.fallbacks.Load(), KeysOnCPU: e.onCPU.Load(), KeysOnDevice: e.onDev.Load(), MinBatch: e.minBatch,
		Tables: e.TableBackends()}
	for _, d := range e.devs {
		ds := DeviceStats{Name: d.b.Name(), Device: d.b.Device(), Up: !d.failed.Load(), Keys: d.keys.Load()}
		if err, ok := d.err.Load().(error); ok {
			ds.Err = err.Error()
		}
		if ds.Up {
			ds.Memory = d.b.MemoryUsed()
		}
		if r, ok := d.b.(residentStater); ok {
			ds.Resident, ds.ResidentLookups, ds.ResidentLaunches = r.ResidentStats()
		}
		d.mu.Lock()
		for id, no := range d.noTable {
			if no {
				ds.CPUOnly = append(ds.CPUOnly, id)
			}
		}
		d.mu.Unlock()
		s.Devices = append(s.Devices, ds)
	}
	return s
}

var _ Backend = (*Engine)(nil)

// streamer is what a device backend offers for pipelining (CUDA.SetStreams).
type streamer interface {
	SetStreams(n, chunk int) error
}

// SetStreams sets the streams and chunk of every device that has them.
func (e *Engine) SetStreams(n, chunk int) error {
	for _, d := range e.devs {
		if s, ok := d.b.(streamer); ok {
			if err := s.SetStreams(n, chunk); err != nil {
				return err
			}
		}
	}
	return nil
}

// kernelTimer is what a device backend offers for timing its kernels alone.
type kernelTimer interface {
	KernelTimeLPM4(id TableID, addrs []uint32, iters int) (float64, error)
	KernelTimeLPM6(id TableID, addrs []lpm.Addr6, iters int) (float64, error)
	KernelTimeFlow(id TableID, soa []uint32, n, iters int) (float64, error)
}

// timer returns the first device in service that times kernels.
func (e *Engine) timer() (kernelTimer, error) {
	for _, d := range e.devs {
		if k, ok := d.b.(kernelTimer); ok && !d.failed.Load() {
			return k, nil
		}
	}
	return nil, fmt.Errorf("gpu: engine: no device in service times kernels")
}

// KernelTimeLPM4 times the IPv4 kernel alone on the first device.
func (e *Engine) KernelTimeLPM4(id TableID, addrs []uint32, iters int) (float64, error) {
	k, err := e.timer()
	if err != nil {
		return 0, err
	}
	return k.KernelTimeLPM4(id, addrs, iters)
}

// KernelTimeLPM6 times the IPv6 kernel alone on the first device.
func (e *Engine) KernelTimeLPM6(id TableID, addrs []lpm.Addr6, iters int) (float64, error) {
	k, err := e.timer()
	if err != nil {
		return 0, err
	}
	return k.KernelTimeLPM6(id, addrs, iters)
}

// KernelTimeFlow times the flow kernel alone on the first device.
func (e *Engine) KernelTimeFlow(id TableID, soa []uint32, n, iters int) (float64, error) {
	k, err := e.timer()
	if err != nil {
		return 0, err
	}
	return k.KernelTimeFlow(id, soa, n, iters)
}
