package openflow

import (
	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

// This file holds the codecs of OFPT_PORT_MOD, OFPT_TABLE_MOD,
// OFPT_QUEUE_GET_CONFIG_REQUEST/REPLY and the OFPMP_QUEUE multipart.

func portModFailed(c ofp.ErrCode, format string, args ...any) *Error {
	return errf(ofp.ErrTypePortModFailed, c, format, args...)
}

// DecodePortMod decodes and checks OFPT_PORT_MOD (the parts that do not
// depend on the switch's ports; CheckPort checks against one).
func DecodePortMod(msg []byte) (*rule.PortMod, *Error) {
	if len(msg) != 40 {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "port_mod of %d bytes, want 40", len(msg))
	}
	pm := &rule.PortMod{PortNo: be32(msg[8:]), Config: be32(msg[24:]), Mask: be32(msg[28:]), Advertise: be32(msg[32:])}
	copy(pm.HWAddr[:], msg[16:22])
	if (pm.PortNo == 0 || pm.PortNo > rule.PortMax) && pm.PortNo != rule.PortLocal {
		return nil, portModFailed(ofp.ErrCodePortModFailedBadPort, "port %#x", pm.PortNo)
	}
	if (pm.Config|pm.Mask)&^rule.PortConfigAll != 0 {
		return nil, portModFailed(ofp.ErrCodePortModFailedBadConfig, "config %#x mask %#x", pm.Config, pm.Mask)
	}
	if pm.Advertise&^rule.PortFeaturesAll != 0 {
		return nil, portModFailed(ofp.ErrCodePortModFailedBadAdvertise, "advertise %#x", pm.Advertise)
	}
	return pm, nil
}

// CheckPort checks a PORT_MOD against the switch's ports: the port exists
// (OFPPMFC_BAD_PORT), the hardware address is the port's
// (OFPPMFC_BAD_HW_ADDR), and the port supports what it is to advertise
// (OFPPMFC_BAD_ADVERTISE). It returns the port.
func CheckPort(pm *rule.PortMod, ports []rule.Port) (*rule.Port, *Error) {
	for i := range ports {
		p := &ports[i]
		if p.No != pm.PortNo {
			continue
		}
		if p.HWAddr != pm.HWAddr {
			return nil, portModFailed(ofp.ErrCodePortModFailedBadHwAddr, "port %d has address %x, not %x", p.No, p.HWAddr, pm.HWAddr)
		}
		if pm.Advertise&^p.Supported != 0 {
			return nil, portModFailed(ofp.ErrCodePortModFailedBadAdvertise, "port %d supports %#x, not %#x", p.No, p.Supported, pm.Advertise)
		}
		return p, nil
	}
	return nil, portModFailed(ofp.ErrCodePortModFailedBadPort, "no port %d", pm.PortNo)
}

// EncodePortMod encodes a PORT_MOD (for tests and tools).
func EncodePortMod(xid uint32, pm *rule.PortMod) []byte {
	e := newMsg(of.TypePortMod, xid)
	e.u32(pm.PortNo)
	e.pad(4)
	e.raw(pm.HWAddr[:])
	e.pad(2)
	e.u32(pm.Config)
	e.u32(pm.Mask)
	e.u32(pm.Advertise)
	e.pad(4)
	return e.finish()
}

// tableConfigDeprecated is OFPTC_DEPRECATED_MASK.
const tableConfigDeprecated = 3

// DecodeTableMod decodes and checks OFPT_TABLE_MOD against a switch with
// nTables tables.
func DecodeTableMod(msg []byte, nTables uint8) (*rule.TableMod, *Error) {
	if len(msg) != 16 {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "table_mod of %d bytes, want 16", len(msg))
	}
	tm := &rule.TableMod{TableID: msg[8], Config: be32(msg[12:])}
	if tm.TableID != rule.TableAll && tm.TableID >= nTables {
		return nil, errf(ofp.ErrTypeTableModFailed, ofp.ErrCodeTableModFailedBadTable, "table %d of %d", tm.TableID, nTables)
	}
	if tm.Config&^tableConfigDeprecated != 0 {
		return nil, errf(ofp.ErrTypeTableModFailed, ofp.ErrCodeTableModFailedBadConfig, "config %#x", tm.Config)
	}
	return tm, nil
}

// Queue property types (enum ofp_queue_properties).
const (
	queuePropMinRate = 1
	queuePropMaxRate = 2
)

func queueOpFailed(c ofp.ErrCode, format string, args ...any) *Error {
	return errf(ofp.ErrTypeQueueOpFailed, c, format, args...)
}

// decodeQueueGetConfig reads OFPT_QUEUE_GET_CONFIG_REQUEST: a physical
// port or PortAny.
func decodeQueueGetConfig(msg []byte) (uint32, *Error) {
	if len(msg) != 16 {
		return 0, badRequest(ofp.ErrCodeBadRequestLen, "queue_get_config_request of %d bytes, want 16", len(msg))
	}
	p := be32(msg[8:])
	if (p == 0 || p > rule.PortMax) && p != rule.PortAny {
		return 0, queueOpFailed(ofp.ErrCodeQueueOpFailedBadPort, "port %#x", p)
	}
	return p, nil
}

// encodeQueueGetConfigReply builds OFPT_QUEUE_GET_CONFIG_REPLY.
func encodeQueueGetConfigReply(xid, port uint32, qs []rule.Queue) []byte {
	e := newMsg(of.TypeQueueGetConfigReply, xid)
	e.u32(port)
	e.pad(4)
	for _, q := range qs {
		start := len(e.b)
		e.u32(q.ID)
		e.u32(q.Port)
		e.u16(0)
		e.pad(6)
		for _, p := range []struct {
			t    uint16
			rate uint16
		}{{queuePropMinRate, q.MinRate}, {queuePropMaxRate, q.MaxRate}} {
			if p.rate <= 1000 {
				e.u16(p.t)
				e.u16(16)
				e.pad(4)
				e.u16(p.rate)
				e.pad(6)
			}
		}
		n := len(e.b) - start
		e.b[start+8], e.b[start+9] = byte(n>>8), byte(n)
		if len(e.b) > 0xffff-64 {
			break // the rest would not fit in one message
		}
	}
	return e.finish()
}

func encodeQueueStats(qs *rule.QueueStats) []byte {
	e := &enc{}
	e.u32(qs.PortNo)
	e.u32(qs.QueueID)
	e.u64(qs.TxBytes)
	e.u64(qs.TxPackets)
	e.u64(qs.TxErrors)
	e.u32(qs.DurationSec)
	e.u32(qs.DurationNsec)
	return e.b
}

// decodeQueueStatsRequest reads ofp_queue_stats_request: a physical port,
// LOCAL or PortAny, and a queue id or QueueAll.
func decodeQueueStatsRequest(body []byte) (port, queue uint32, err *Error) {
	if len(body) != 8 {
		return 0, 0, badRequest(ofp.ErrCodeBadRequestLen, "queue stats request of %d bytes, want 8", len(body))
	}
	port, queue = be32(body), be32(body[4:])
	if (port == 0 || port > rule.PortMax) && port != rule.PortAny && port != rule.PortLocal {
		return 0, 0, queueOpFailed(ofp.ErrCodeQueueOpFailedBadPort, "port %#x", port)
	}
	return port, queue, nil
}
