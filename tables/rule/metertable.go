package rule

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// MeterTableConfig bounds a MeterTable. Zero fields take the defaults.
type MeterTableConfig struct {
	// MaxMeters bounds the number of meters (default 4096).
	MaxMeters uint32
	// MaxBands bounds a meter's bands (default 8).
	MaxBands uint8
	// MaxBurst, when not zero, bounds burst_size (BadBurst).
	MaxBurst uint32
	// Now is the clock for durations and new meters' buckets (default
	// time.Now).
	Now func() time.Time
}

// MeterTable is the model's meter table, with OpenFlow 1.3 meter table
// semantics: MeterMod validation and application,
// configurations echoed as set, counters, features, the flow entries'
// reference counts, and the Meters the datapath runs packets through. It
// is safe for concurrent use.
type MeterTable struct {
	mu     sync.Mutex
	cfg    MeterTableConfig
	meters map[uint32]*Meter
}

// NewMeterTable returns an empty meter table.
func NewMeterTable(cfg MeterTableConfig) *MeterTable {
	if cfg.MaxMeters == 0 {
		cfg.MaxMeters = 4096
	}
	if cfg.MaxBands == 0 {
		cfg.MaxBands = 8
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &MeterTable{cfg: cfg, meters: map[uint32]*Meter{}}
}

// Mod applies a MeterMod, or changes nothing and returns an *Error of
// kind MeterExists, UnknownMeter, InvalidMeter, BadMeterCommand,
// BadMeterFlags, BadRate, BadBurst, BadBand, BadBandValue, OutOfMeters or
// OutOfBands. It returns the ids of the deleted meters, whose flow entries
// the switch must remove. A modified meter keeps its *Meter (and
// counters); its buckets start full.
func (t *MeterTable) Mod(mm *MeterMod) (deleted []uint32, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch mm.Command {
	case MeterAdd:
		return nil, asError(t.add(&mm.MeterConfig))
	case MeterModify:
		return nil, asError(t.modify(&mm.MeterConfig))
	case MeterDelete:
		return t.delete(mm.ID), nil
	}
	return nil, Errorf(BadMeterCommand, "command %d", mm.Command)
}

func (t *MeterTable) add(mc *MeterConfig) *Error {
	if _, ok := t.meters[mc.ID]; ok {
		return Errorf(MeterExists, "meter %d exists", mc.ID)
	}
	if uint32(len(t.meters)) >= t.cfg.MaxMeters {
		return Errorf(OutOfMeters, "%d meters already", t.cfg.MaxMeters)
	}
	if err := t.check(mc); err != nil {
		return err
	}
	now := t.cfg.Now()
	m := &Meter{added: now}
	m.configure(mc, now)
	t.meters[mc.ID] = m
	return nil
}

func (t *MeterTable) modify(mc *MeterConfig) *Error {
	m, ok := t.meters[mc.ID]
	if !ok {
		return Errorf(UnknownMeter, "meter %d does not exist", mc.ID)
	}
	if err := t.check(mc); err != nil {
		return err
	}
	m.mu.Lock()
	m.configure(mc, t.cfg.Now())
	m.mu.Unlock()
	return nil
}

// check checks a configuration against the wire rules (for callers that
// build MeterMods themselves) and the table's limits.
func (t *MeterTable) check(mc *MeterConfig) *Error {
	switch {
	case !ValidMeterID(mc.ID):
		return Errorf(InvalidMeter, "meter %#x", mc.ID)
	case !ValidMeterFlags(mc.Flags):
		return Errorf(BadMeterFlags, "flags %#x", uint16(mc.Flags))
	case len(mc.Bands) > int(t.cfg.MaxBands):
		return Errorf(OutOfBands, "%d bands, at most %d", len(mc.Bands), t.cfg.MaxBands)
	}
	for _, b := range mc.Bands {
		switch {
		case b.Type != BandDrop && b.Type != BandDSCPRemark:
			return Errorf(BadBand, "band type %d", uint16(b.Type))
		case b.Rate == 0:
			return Errorf(BadRate, "band rate 0")
		case b.Type == BandDSCPRemark && (b.PrecLevel == 0 || b.PrecLevel > 63):
			return Errorf(BadBandValue, "prec_level %d", b.PrecLevel)
		case mc.Flags&MeterBurst != 0 && t.cfg.MaxBurst != 0 && b.BurstSize > t.cfg.MaxBurst:
			return Errorf(BadBurst, "burst_size %d, at most %d", b.BurstSize, t.cfg.MaxBurst)
		}
	}
	return nil
}

func (t *MeterTable) delete(id uint32) []uint32 {
	if id == MeterAll {
		ids := slices.Sorted(maps.Keys(t.meters))
		clear(t.meters)
		return ids
	}
	if _, ok := t.meters[id]; !ok {
		return nil // deleting a missing meter is not an error
	}
	delete(t.meters, id)
	return []uint32{id}
}

// Exists reports whether meter id exists.
func (t *MeterTable) Exists(id uint32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.meters[id]
	return ok
}

// Get returns meter id for the datapath to run packets through.
func (t *MeterTable) Get(id uint32) *Meter {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.meters[id]
}

// AddFlowRef counts a flow entry using meter id; false when the meter
// does not exist (the flow must then be refused with
// UnknownMeter).
func (t *MeterTable) AddFlowRef(id uint32) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	m, ok := t.meters[id]
	if ok {
		m.flowRefs++
	}
	return ok
}

// ReleaseFlowRef forgets a flow entry counted by AddFlowRef.
func (t *MeterTable) ReleaseFlowRef(id uint32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if m, ok := t.meters[id]; ok && m.flowRefs > 0 {
		m.flowRefs--
	}
}

// ids returns id, or every meter's id for MeterAll, ascending.
func (t *MeterTable) ids(id uint32) []uint32 {
	if id == MeterAll {
		return slices.Sorted(maps.Keys(t.meters))
	}
	if _, ok := t.meters[id]; ok {
		return []uint32{id}
	}
	return nil
}

// Config returns the configuration of meter id, or of every meter for
// MeterAll, exactly as set (burst_size included).
func (t *MeterTable) Config(id uint32) []MeterConfig {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []MeterConfig
	for _, mid := range t.ids(id) {
		m := t.meters[mid]
		m.mu.Lock()
		out = append(out, MeterConfig{ID: mid, Flags: m.cfg.Flags, Bands: slices.Clone(m.cfg.Bands)})
		m.mu.Unlock()
	}
	return out
}

// Stats returns the counters of meter id, or of every meter for MeterAll.
func (t *MeterTable) Stats(id uint32) []MeterStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	var out []MeterStats
	for _, mid := range t.ids(id) {
		m := t.meters[mid]
		m.mu.Lock()
		d := max(now.Sub(m.added), 0)
		ms := MeterStats{
			ID: mid, FlowCount: m.flowRefs, PacketsIn: m.packetsIn, BytesIn: m.bytesIn,
			DurationSec: uint32(d / time.Second), DurationNsec: uint32(d % time.Second),
		}
		for _, b := range m.bands {
			ms.Bands = append(ms.Bands, b.count)
		}
		m.mu.Unlock()
		out = append(out, ms)
	}
	return out
}

// Features describes the table: drop and DSCP-remark bands, every flag.
func (t *MeterTable) Features() MeterFeatures {
	return MeterFeatures{
		MaxMeter:     t.cfg.MaxMeters,
		BandTypes:    1<<BandDrop | 1<<BandDSCPRemark,
		Capabilities: uint32(MeterFlagsAll),
		MaxBands:     t.cfg.MaxBands,
		MaxColor:     0,
	}
}

// Meter is one meter's token buckets and counters: one bucket per band,
// filled at the band's rate up to its burst size. Methods are safe for
// concurrent use.
type Meter struct {
	mu                 sync.Mutex
	cfg                MeterConfig
	bands              []bucketState
	added              time.Time
	flowRefs           uint32 // guarded by the table's mu
	packetsIn, bytesIn uint64
}

// bucketState is one band's token bucket. Tokens are counted in units of
// 1e-6 bit for kb/s meters and 1e-9 packet for packets/s meters, so that
// a band of rate R adds R tokens per nanosecond either way.
type bucketState struct {
	tokens, capacity int64
	last             time.Time
	count            Counter
}

// Default burst when MeterBurst is not given: 100 ms at the band's rate,
// at least one full-size frame (kb/s) or one packet.
const (
	defaultBurstDiv = 10
	minBurstKbit    = 12  // 1500 bytes
	tokensPerUnit   = 1e9 // per kilobit or per packet
)

func (m *Meter) configure(mc *MeterConfig, now time.Time) {
	m.cfg = MeterConfig{ID: mc.ID, Flags: mc.Flags, Bands: slices.Clone(mc.Bands)}
	m.bands = make([]bucketState, len(mc.Bands))
	for i, b := range mc.Bands {
		burst := uint64(b.BurstSize)
		if mc.Flags&MeterBurst == 0 || burst == 0 {
			burst = max(uint64(b.Rate)/defaultBurstDiv, 1)
			if mc.Flags&MeterPktps == 0 {
				burst = max(burst, minBurstKbit)
			}
		}
		c := int64(burst * tokensPerUnit) // at most 2^32 * 1e9 < 2^63
		m.bands[i] = bucketState{tokens: c, capacity: c, last: now}
	}
}

// Allow runs a packet of n bytes arriving at now through the meter. Every
// band's bucket is refilled and pays for the packet when it can; of the
// bands that could not (whose rate the traffic exceeds), the one with the
// highest rate applies (OpenFlow 1.3 §5.7): drop reports a drop band,
// precLevel a DSCP-remark band's drop-precedence increase (0: none; see
// RemarkDSCP).
func (m *Meter) Allow(now time.Time, n int) (drop bool, precLevel int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.packetsIn++
	m.bytesIn += uint64(max(n, 0))
	cost := int64(1e9)
	if m.cfg.Flags&MeterPktps == 0 {
		cost = int64(max(n, 0)) * 8 * 1e6
	}
	hit := -1
	for i := range m.bands {
		b := &m.bands[i]
		b.refill(now, int64(m.cfg.Bands[i].Rate))
		if b.tokens >= cost {
			b.tokens -= cost
			continue
		}
		if hit < 0 || m.cfg.Bands[i].Rate > m.cfg.Bands[hit].Rate {
			hit = i
		}
	}
	if hit < 0 {
		return false, 0
	}
	m.bands[hit].count.Packets++
	m.bands[hit].count.Bytes += uint64(max(n, 0))
	band := m.cfg.Bands[hit]
	if band.Type == BandDrop {
		return true, 0
	}
	return false, int(band.PrecLevel)
}

// refill adds the tokens of the time since the last refill at rate (per
// nanosecond), up to the capacity; a clock that went back adds none.
func (b *bucketState) refill(now time.Time, rate int64) {
	el := now.Sub(b.last).Nanoseconds()
	if el <= 0 || rate <= 0 {
		return
	}
	b.last = now
	if el > b.capacity/rate+1 {
		b.tokens = b.capacity
		return
	}
	b.tokens = min(b.capacity, b.tokens+el*rate) // el*rate <= capacity+rate
}

// RemarkDSCP raises the drop precedence of an Assured Forwarding DSCP
// (AFxy, RFC 2597: class x 1-4, drop precedence y 1-3) by prec levels,
// capped at 3; other code points are returned unchanged, since they have
// no drop precedence to raise.
func RemarkDSCP(dscp uint8, prec int) uint8 {
	class, dp := dscp>>3, dscp>>1&3
	if dscp&1 != 0 || class < 1 || class > 4 || dp == 0 {
		return dscp
	}
	return class<<3 | uint8(min(int(dp)+max(prec, 0), 3))<<1
}
