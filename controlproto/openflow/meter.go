package openflow

import (
	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

// This file holds the codecs of OFPT_METER_MOD and of the meter multipart
// requests and replies (OpenFlow 1.3.5 §7.3.4.4, §7.3.5.12-14).

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

// DecodeMeterMod decodes and checks a whole OFPT_METER_MOD message: what
// does not depend on the switch's meters. Errors are OFPMMFC_* codes, or
// OFPBRC_BAD_LEN for a truncated message.
func DecodeMeterMod(msg []byte) (*rule.MeterMod, *Error) {
	if len(msg) < meterModFixed {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "meter_mod of %d bytes", len(msg))
	}
	mm := &rule.MeterMod{Command: rule.MeterCommand(be16(msg[8:]))}
	mm.Flags, mm.ID = rule.MeterFlags(be16(msg[10:])), be32(msg[12:])
	switch mm.Command {
	case rule.MeterDelete:
		if !rule.ValidMeterID(mm.ID) && mm.ID != rule.MeterAll {
			return nil, meterModFailed(ofp.ErrCodeMeterModFailedInvalidMeter, "delete meter %#x", mm.ID)
		}
		return mm, nil // flags and bands are ignored
	case rule.MeterAdd, rule.MeterModify:
	default:
		return nil, meterModFailed(ofp.ErrCodeMeterModFailedBadCommand, "command %d", mm.Command)
	}
	if !rule.ValidMeterID(mm.ID) {
		return nil, meterModFailed(ofp.ErrCodeMeterModFailedInvalidMeter, "meter %#x", mm.ID)
	}
	if !rule.ValidMeterFlags(mm.Flags) {
		return nil, meterModFailed(ofp.ErrCodeMeterModFailedBadFlags, "flags %#x", uint16(mm.Flags))
	}
	var err *Error
	mm.Bands, err = decodeBands(msg[meterModFixed:])
	return mm, err
}

// decodeBands reads the bands filling b exactly.
func decodeBands(b []byte) ([]rule.MeterBand, *Error) {
	var bs []rule.MeterBand
	for len(b) > 0 {
		if len(b) < 4 {
			return nil, badRequest(ofp.ErrCodeBadRequestLen, "meter band truncated (%d bytes)", len(b))
		}
		t, n := rule.BandType(be16(b)), int(be16(b[2:]))
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
func decodeBand(t rule.BandType, b []byte) (rule.MeterBand, *Error) {
	if t != rule.BandDrop && t != rule.BandDSCPRemark {
		return rule.MeterBand{}, meterModFailed(ofp.ErrCodeMeterModFailedBadBand, "band type %d", uint16(t))
	}
	if len(b) != bandLen {
		return rule.MeterBand{}, badRequest(ofp.ErrCodeBadRequestLen, "meter band of %d bytes, want %d", len(b), bandLen)
	}
	bd := rule.MeterBand{Type: t, Rate: be32(b[4:]), BurstSize: be32(b[8:])}
	if bd.Rate == 0 {
		return rule.MeterBand{}, meterModFailed(ofp.ErrCodeMeterModFailedBadRate, "band rate 0")
	}
	if t == rule.BandDSCPRemark {
		bd.PrecLevel = b[12]
		if bd.PrecLevel == 0 || bd.PrecLevel > 63 {
			return rule.MeterBand{}, meterModFailed(ofp.ErrCodeMeterModFailedBadBandValue, "dscp_remark prec_level %d", bd.PrecLevel)
		}
	}
	return bd, nil
}

// EncodeMeterMod encodes a METER_MOD (for tests and tools).
func EncodeMeterMod(xid uint32, mm *rule.MeterMod) []byte {
	e := newMsg(of.TypeMeterMod, xid)
	e.u16(uint16(mm.Command))
	e.u16(uint16(mm.Flags))
	e.u32(mm.ID)
	appendBands(e, mm.Bands)
	return e.finish()
}

func appendBands(e *enc, bs []rule.MeterBand) {
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
func encodeMeterConfig(mc *rule.MeterConfig) []byte {
	e := &enc{}
	e.u16(0)
	e.u16(uint16(mc.Flags))
	e.u32(mc.ID)
	appendBands(e, mc.Bands[:min(len(mc.Bands), MaxBands)])
	putLen16(e.b, 0)
	return e.b
}

func encodeMeterStats(ms *rule.MeterStats) []byte {
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

func encodeMeterFeatures(f *rule.MeterFeatures) []byte {
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
	if !rule.ValidMeterID(id) && id != rule.MeterAll {
		return 0, meterModFailed(ofp.ErrCodeMeterModFailedInvalidMeter, "meter request for %#x", id)
	}
	return id, nil
}
