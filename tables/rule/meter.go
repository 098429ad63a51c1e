package rule

// Meter ids.
const (
	MeterMax        uint32 = 0xffff0000 // the last ordinary meter id
	MeterSlowpath   uint32 = 0xfffffffd // a virtual meter (not supported)
	MeterController uint32 = 0xfffffffe // a virtual meter (not supported)
	MeterAll        uint32 = 0xffffffff // every meter (deletes, statistics)
)

// ValidMeterID reports whether id names an ordinary meter (1..MeterMax);
// the virtual meters are not supported.
func ValidMeterID(id uint32) bool { return id != 0 && id <= MeterMax }

// MeterCommand is what a MeterMod does.
type MeterCommand uint16

// The commands.
const (
	MeterAdd    MeterCommand = 0
	MeterModify MeterCommand = 1
	MeterDelete MeterCommand = 2
)

// MeterFlags are a meter's flags.
type MeterFlags uint16

// The flags: rates in kb/s or packets/s, burst sizes given, statistics
// collected.
const (
	MeterKbps      MeterFlags = 1 << 0
	MeterPktps     MeterFlags = 1 << 1
	MeterBurst     MeterFlags = 1 << 2
	MeterStatsFlag MeterFlags = 1 << 3
	// MeterFlagsAll covers every flag.
	MeterFlagsAll MeterFlags = 1<<4 - 1
)

// ValidMeterFlags reports whether f holds only known flags and not kb/s
// and packets/s together.
func ValidMeterFlags(f MeterFlags) bool {
	return f&^MeterFlagsAll == 0 && f&(MeterKbps|MeterPktps) != MeterKbps|MeterPktps
}

// BandType is a meter band's type.
type BandType uint16

// The band types.
const (
	BandDrop       BandType = 1
	BandDSCPRemark BandType = 2
)

// MeterBand is one band: Rate in kb/s or packets/s (the meter's flags),
// BurstSize in kilobits or packets (used with MeterBurst, kept as sent),
// PrecLevel the drop-precedence increase of a DSCP-remark band.
type MeterBand struct {
	Type      BandType
	Rate      uint32
	BurstSize uint32
	PrecLevel uint8
}

// MeterConfig is a meter as a controller describes it.
type MeterConfig struct {
	ID    uint32
	Flags MeterFlags
	Bands []MeterBand
}

// MeterMod adds, modifies or deletes a meter. For MeterDelete only ID
// means something (MeterAll: every meter).
type MeterMod struct {
	Command MeterCommand
	MeterConfig
}

// MaxBands bounds a meter's bands (a meter table may bound them lower).
const MaxBands = 255

// MeterStats are a meter's counters: FlowCount counts the flow entries
// using it; Bands has one counter per band.
type MeterStats struct {
	ID                        uint32
	FlowCount                 uint32
	PacketsIn, BytesIn        uint64
	DurationSec, DurationNsec uint32
	Bands                     []Counter
}

// MeterFeatures describes a meter table: BandTypes has bit 1<<BandType per
// supported type, Capabilities the supported MeterFlags.
type MeterFeatures struct {
	MaxMeter     uint32
	BandTypes    uint32
	Capabilities uint32
	MaxBands     uint8
	MaxColor     uint8
}
