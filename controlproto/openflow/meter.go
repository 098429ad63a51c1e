package openflow

import (
	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"
)

// This file holds the codecs of OFPT_METER_MOD and of the meter multipart
// requests and replies (OpenFlow 1.3.5 §7.3.4.4, §7.3.5.12-14).

// Meter ids (enum ofp_meter).
const (
	MeterMax        uint32 = 0xffff0000 // OFPM_MAX
	MeterSlowpath   uint32 = 0xfffffffd // OFPM_SLOWPATH
	MeterController uint32 = 0xfffffffe // OFPM_CONTROLLER
	MeterAll        uint32 = 0xffffffff // OFPM_ALL
)

// MeterCommand is a METER_MOD command (enum ofp_meter_mod_command).
type MeterCommand uint16

// The commands of OpenFlow 1.3.
const (
	MeterAdd    MeterCommand = 0
	MeterModify MeterCommand = 1
	MeterDelete MeterCommand = 2
)

// MeterFlags are a meter's flags (enum ofp_meter_flags).
type MeterFlags uint16

// The flags of OpenFlow 1.3: rates in kb/s or packets/s, burst sizes
// given, statistics collected.
const (
	MeterKbps      MeterFlags = 1 << 0
	MeterPktps     MeterFlags = 1 << 1
	MeterBurst     MeterFlags = 1 << 2
	MeterStatsFlag MeterFlags = 1 << 3
	meterFlagsAll             = 1<<4 - 1
)

// BandType is a meter band's type (enum ofp_meter_band_type).
type BandType uint16

// The band types of OpenFlow 1.3 (experimenter bands are not supported).
const (
	BandDrop       BandType = 1
	BandDSCPRemark BandType = 2
	bandExp        BandType = 0xffff
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

// MeterConfig is a meter as a controller describes it
// (OFPMP_METER_CONFIG).
type MeterConfig struct {
	ID    uint32
	Flags MeterFlags
	Bands []MeterBand
}

// MeterMod is a decoded METER_MOD. For MeterDelete only ID means something
// (MeterAll: every meter).
type MeterMod struct {
	Command MeterCommand
	MeterConfig
}

const (
	meterModFixed = 16
	bandLen       = 16
	// MaxBands bounds a meter's bands (ofp_meter_features.max_bands is
	// one byte).
	MaxBands = 255
)

func meterModFailed(c ofp.ErrCode, format string, args ...any) *Error {
	return errf(ofp.ErrTypeMeterModFailed, c, format, args...)
}

// validMeterID reports whether id names an ordinary meter (1..OFPM_MAX);
// the virtual meters SLOWPATH and CONTROLLER are not supported.
func validMeterID(id uint32) bool { return id != 0 && id <= MeterMax }

// DecodeMeterMod decodes and checks a whole OFPT_METER_MOD message: what
// does not depend on the switch's meters. Errors are OFPMMFC_* codes, or
// OFPBRC_BAD_LEN for a truncated message.
func DecodeMeterMod(msg []byte) (*MeterMod, *Error) {
	if len(msg) < meterModFixed {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "meter_mod of %d bytes", len(msg))
	}
	mm := &MeterMod{Command: MeterCommand(be16(msg[8:]))}
	mm.Flags, mm.ID = MeterFlags(be16(msg[10:])), be32(msg[12:])
	switch mm.Command {
	case MeterDelete:
		if !validMeterID(mm.ID) && mm.ID != MeterAll {
			return nil, meterModFailed(ofp.ErrCodeMeterModFailedInvalidMeter, "delete meter %#x", mm.ID)
		}
		return mm, nil // flags and bands are ignored
	case MeterAdd, MeterModify:
	default:
		return nil, meterModFailed(ofp.ErrCodeMeterModFailedBadCommand, "command %d", mm.Command)
	}
	if !validMeterID(mm.ID) {
		return nil, meterModFailed(ofp.ErrCodeMeterModFailedInvalidMeter, "meter %#x", mm.ID)
	}
	if mm.Flags&^meterFlagsAll != 0 || mm.Flags&(MeterKbps|MeterPktps) == MeterKbps|MeterPktps {
		return nil, meterModFailed(ofp.ErrCodeMeterModFailedBadFlags, "flags %#x", uint16(mm.Flags))
	}
	var err *Error
	mm.Bands, err = decodeBands(msg[meterModFixed:])
	return mm, err
}

// decodeBands reads the bands filling b exactly.
func decodeBands(b []byte) ([]MeterBand, *Error) {
	var bs []MeterBand
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, badRequest(ofp.ErrCodeBadRequestLen, "meter band truncated (%d bytes)", len(b))
		}
		t, n := BandType(be16(b)), int(be16(b[2:]))
		if n > len(b) || n < 4 {
			return nil, badRequest(ofp.ErrCodeBadRequestLen, "meter band length %d (%d bytes left)", n, len(b))
		}
		if len(bs) == MaxBands {
			return nil, meterModFailed(ofp.ErrCodeMeterModFailedOutOfBands, "more than %d bands", MaxBands)
		}
		bd, err := decodeBand(t, b[:n])
		if err != nil {
			return nil, err
		}
		bs = append(bs, bd)
		b = b[n:]
	}
	return bs, nil
}

// decodeBand reads one band (b is its whole TLV).
func decodeBand(t BandType, b []byte) (MeterBand, *Error) {
	if t != BandDrop && t != BandDSCPRemark {
		return MeterBand{}, meterModFailed(ofp.ErrCodeMeterModFailedBadBand, "band type %d", uint16(t))
	}
	if len(b) != bandLen {
		return MeterBand{}, badRequest(ofp.ErrCodeBadRequestLen, "meter band of %d bytes, want %d", len(b), bandLen)
	}
	bd := MeterBand{Type: t, Rate: be32(b[4:]), BurstSize: be32(b[8:])}
	if bd.Rate == 0 {
		return MeterBand{}, meterModFailed(ofp.ErrCodeMeterModFailedBadRate, "band rate 0")
	}
	if t == BandDSCPRemark {
		bd.PrecLevel = b[12]
		if bd.PrecLevel == 0 || bd.PrecLevel > 63 {
			return MeterBand{}, meterModFailed(ofp.ErrCodeMeterModFailedBadBandValue, "dscp_remark prec_level %d", bd.PrecLevel)
		}
	}
	return bd, nil
}

// EncodeMeterMod encodes a METER_MOD (for tests and tools).
func EncodeMeterMod(xid uint32, mm *MeterMod) []byte {
	e := newMsg(of.TypeMeterMod, xid)
	e.u16(uint16(mm.Command))
	e.u16(uint16(mm.Flags))
	e.u32(mm.ID)
	appendBands(e, mm.Bands)
	return e.finish()
}

func appendBands(e *enc, bs []MeterBand) {
	for _, b := range bs {
		e.u16(uint16(b.Type))
		e.u16(bandLen)
		e.u32(b.Rate)
		e.u32(b.BurstSize)
		e.u8(b.PrecLevel)
		e.pad(3)
	}
}

// encodeMeterConfig encodes ofp_meter_config.
func encodeMeterConfig(mc *MeterConfig) []byte {
	e := &enc{}
	e.u16(0)
	e.u16(uint16(mc.Flags))
	e.u32(mc.ID)
	appendBands(e, mc.Bands[:min(len(mc.Bands), MaxBands)])
	putLen16(e.b, 0)
	return e.b
}

// MeterStats is ofp_meter_stats: FlowCount counts the flow entries using
// the meter; Bands has one counter per band.
type MeterStats struct {
	ID                        uint32
	FlowCount                 uint32
	PacketsIn, BytesIn        uint64
	DurationSec, DurationNsec uint32
	Bands                     []Counter
}

func encodeMeterStats(ms *MeterStats) []byte {
	e := &enc{}
	e.u32(ms.ID)
	e.u16(0)
	e.pad(6)
	e.u32(ms.FlowCount)
	e.u64(ms.PacketsIn)
	e.u64(ms.BytesIn)
	e.u32(ms.DurationSec)
	e.u32(ms.DurationNsec)
	for _, c := range ms.Bands[:min(len(ms.Bands), MaxBands)] {
		e.u64(c.Packets)
		e.u64(c.Bytes)
	}
	n := len(e.b)
	e.b[4], e.b[5] = byte(n>>8), byte(n)
	return e.b
}

// MeterFeatures is ofp_meter_features: BandTypes has bit 1<<BandType per
// supported type, Capabilities the supported MeterFlags.
type MeterFeatures struct {
	MaxMeter     uint32
	BandTypes    uint32
	Capabilities uint32
	MaxBands     uint8
	MaxColor     uint8
}

func encodeMeterFeatures(f *MeterFeatures) []byte {
	e := &enc{}
	e.u32(f.MaxMeter)
	e.u32(f.BandTypes)
	e.u32(f.Capabilities)
	e.u8(f.MaxBands)
	e.u8(f.MaxColor)
	e.pad(2)
	return e.b
}

// decodeMeterRequest reads ofp_meter_multipart_request: an ordinary meter
// id or MeterAll.
func decodeMeterRequest(body []byte) (uint32, *Error) {
	if len(body) != 8 {
		return 0, badRequest(ofp.ErrCodeBadRequestLen, "meter request of %d bytes, want 8", len(body))
	}
	id := be32(body)
	if !validMeterID(id) && id != MeterAll {
		return 0, meterModFailed(ofp.ErrCodeMeterModFailedInvalidMeter, "meter request for %#x", id)
	}
	return id, nil
}
