package openflow

import (
	of "github.com/netrack/openflow"
	"github.com/netrack/openflow/ofp"

	"github.com/gswitch/gswitch/tables/rule"
)

// This file holds the codecs of the fixed-layout messages other than
// FLOW_MOD and multipart: HELLO, FEATURES_REPLY, switch config, role,
// async config, PACKET_OUT, and the asynchronous PACKET_IN, FLOW_REMOVED
// and PORT_STATUS.

// hello element types.
const helloElemVersionBitmap = 1

// EncodeHello builds the switch's HELLO: version 1.3 and a version bitmap
// element naming only 1.3.
func EncodeHello(xid uint32) []byte {
	e := newMsg(of.TypeHello, xid)
	e.u16(helloElemVersionBitmap)
	e.u16(8)
	e.u32(1 << Version)
	return e.finish()
}

// NegotiateHello checks a peer's HELLO (OpenFlow 1.3 §6.3.1): with a
// version bitmap element, 1.3 must be in it; without one, the peer's
// version must be 1.3 or later (the lower of the two is used). Anything
// else is OFPET_HELLO_FAILED/OFPHFC_INCOMPATIBLE.
func NegotiateHello(msg []byte) *Error {
	h, ok := ParseHeader(msg)
	if !ok || h.Type != of.TypeHello {
		return errf(ofp.ErrTypeHelloFailed, ofp.ErrCodeHelloFailedIncompatible, "first message is not a HELLO")
	}
	bitmap, found, err := helloBitmap(msg[HeaderLen:])
	if err != nil {
		return err
	}
	switch {
	case found && bitmap&(1<<Version) == 0:
		return errf(ofp.ErrTypeHelloFailed, ofp.ErrCodeHelloFailedIncompatible, "peer's version bitmap %#x lacks OpenFlow 1.3 (0x04)", bitmap)
	case !found && h.Version < Version:
		return errf(ofp.ErrTypeHelloFailed, ofp.ErrCodeHelloFailedIncompatible, "peer speaks version %#02x, the agent only 0x04", h.Version)
	}
	return nil
}

// helloBitmap finds the first word of the version bitmap among the hello
// elements in b (versions 0..31, which is all there are).
func helloBitmap(b []byte) (bitmap uint32, found bool, err *Error) {
	for len(b) >= 4 {
		t, n := be16(b), int(be16(b[2:]))
		if n < 4 || n > len(b) {
			return 0, false, badRequest(ofp.ErrCodeBadRequestLen, "hello element of length %d", n)
		}
		if t == helloElemVersionBitmap && n >= 8 && !found {
			bitmap, found = be32(b[4:]), true
		}
		b = b[min(n+pad8(n), len(b)):]
	}
	return bitmap, found, nil
}

// encodeFeaturesReply builds OFPT_FEATURES_REPLY.
func encodeFeaturesReply(xid uint32, f *rule.Features) []byte {
	e := newMsg(of.TypeFeaturesReply, xid)
	e.u64(f.DatapathID)
	e.u32(f.NBuffers)
	e.u8(f.NTables)
	e.u8(0) // auxiliary_id: the main connection
	e.pad(2)
	e.u32(uint32(f.Capabilities))
	e.u32(0) // reserved
	return e.finish()
}

// SwitchConfig is ofp_switch_config's contents.
type SwitchConfig struct {
	Flags       uint16
	MissSendLen uint16
}

// configFragMask covers the OFPC_FRAG_* bits; the agent supports only
// OFPC_FRAG_NORMAL (0).
const configFragMask = 3

func encodeConfigReply(xid uint32, c SwitchConfig) []byte {
	e := newMsg(of.TypeGetConfigReply, xid)
	e.u16(c.Flags)
	e.u16(c.MissSendLen)
	return e.finish()
}

// decodeSetConfig reads OFPT_SET_CONFIG.
func decodeSetConfig(msg []byte) (SwitchConfig, *Error) {
	if len(msg) != 12 {
		return SwitchConfig{}, badRequest(ofp.ErrCodeBadRequestLen, "set_config of %d bytes, want 12", len(msg))
	}
	c := SwitchConfig{Flags: be16(msg[8:]), MissSendLen: be16(msg[10:])}
	if c.Flags != 0 {
		// OpenFlow 1.3 has only the OFPC_FRAG_* bits: 1.1 and 1.2's
		// OFPC_INVALID_TTL_TO_CONTROLLER (1<<2) is gone, the async
		// configuration's OFPR_INVALID_TTL bit replaces it (Open vSwitch
		// refuses it in 1.3 too).
		return SwitchConfig{}, errf(ofp.ErrTypeSwitchConfigFailed, ofp.ErrCodeSwitchConfigFailedBadFlags, "flags %#x: only OFPC_FRAG_NORMAL is supported", c.Flags)
	}
	return c, nil
}

// Role is a controller's role (enum ofp_controller_role).
type Role uint32

// The roles of OpenFlow 1.3 §6.3.5.
const (
	RoleNoChange Role = 0
	RoleEqual    Role = 1
	RoleMaster   Role = 2
	RoleSlave    Role = 3
)

// String returns the role's name.
func (r Role) String() string {
	switch r {
	case RoleNoChange:
		return "nochange"
	case RoleEqual:
		return "equal"
	case RoleMaster:
		return "master"
	case RoleSlave:
		return "slave"
	}
	return "role?"
}

// decodeRoleRequest reads OFPT_ROLE_REQUEST.
func decodeRoleRequest(msg []byte) (Role, uint64, *Error) {
	if len(msg) != 24 {
		return 0, 0, badRequest(ofp.ErrCodeBadRequestLen, "role_request of %d bytes, want 24", len(msg))
	}
	r := Role(be32(msg[8:]))
	if r > RoleSlave {
		return 0, 0, errf(ofp.ErrTypeRoleRequestFailed, ofp.ErrCodeRoleRequestFailedBadRole, "role %d", r)
	}
	return r, be64(msg[16:]), nil
}

func encodeRoleReply(xid uint32, r Role, gen uint64) []byte {
	e := newMsg(of.TypeRoleReply, xid)
	e.u32(uint32(r))
	e.pad(4)
	e.u64(gen)
	return e.finish()
}

// AsyncConfig is ofp_async_config: per message, the reasons a connection
// receives, [0] in the master or equal role and [1] in the slave role.
type AsyncConfig struct {
	PacketIn, PortStatus, FlowRemoved [2]uint32
}

// DefaultAsync is the async configuration a connection starts with
// (OpenFlow 1.3 §6.1.1, as Open vSwitch sets it): master/equal receive
// packet-ins for no-match and action (not invalid TTL: a controller asks
// for those with SET_ASYNC), every port status and every flow removal;
// slaves only port status.
var DefaultAsync = AsyncConfig{
	PacketIn:    [2]uint32{1<<rule.ReasonNoMatch | 1<<rule.ReasonAction, 0},
	PortStatus:  [2]uint32{0x7, 0x7},
	FlowRemoved: [2]uint32{0xf, 0},
}

func decodeSetAsync(msg []byte) (AsyncConfig, *Error) {
	if len(msg) != 32 {
		return AsyncConfig{}, badRequest(ofp.ErrCodeBadRequestLen, "set_async of %d bytes, want 32", len(msg))
	}
	var a AsyncConfig
	for i := range 2 {
		a.PacketIn[i] = be32(msg[8+4*i:])
		a.PortStatus[i] = be32(msg[16+4*i:])
		a.FlowRemoved[i] = be32(msg[24+4*i:])
	}
	return a, nil
}

func encodeAsyncReply(xid uint32, a *AsyncConfig) []byte {
	e := newMsg(of.TypeGetAsyncReply, xid)
	for _, v := range [][2]uint32{a.PacketIn, a.PortStatus, a.FlowRemoved} {
		e.u32(v[0])
		e.u32(v[1])
	}
	return e.finish()
}

// DecodePacketOut decodes and checks OFPT_PACKET_OUT.
func DecodePacketOut(msg []byte) (*rule.PacketOut, *Error) {
	if len(msg) < 24 {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "packet_out of %d bytes", len(msg))
	}
	po := &rule.PacketOut{BufferID: be32(msg[8:]), InPort: be32(msg[12:])}
	n := int(be16(msg[16:]))
	if 24+n > len(msg) {
		return nil, badRequest(ofp.ErrCodeBadRequestLen, "actions_len %d beyond the message", n)
	}
	// OpenFlow 1.3.5 §7.3.7: in_port "must be set to either a valid
	// standard switch port or OFPP_CONTROLLER" (LOCAL is accepted too, as
	// in Open vSwitch); anything else, OFPP_ANY included, is
	// OFPBRC_BAD_PORT, Open vSwitch's code for a bad in_port.
	if !(po.InPort != 0 && po.InPort <= rule.PortMax) && po.InPort != rule.PortController && po.InPort != rule.PortLocal {
		return nil, badRequest(ofp.ErrCodeBadRequestBadPort, "in_port %#x", po.InPort)
	}
	var err *Error
	if po.Actions, err = DecodeActions(msg[24 : 24+n]); err != nil {
		return nil, err
	}
	po.Data = append([]byte(nil), msg[24+n:]...)
	return po, nil
}

// EncodePacketIn builds OFPT_PACKET_IN.
func EncodePacketIn(xid uint32, pi *rule.PacketIn) []byte {
	data := pi.Data
	if pi.MaxLen != rule.MaxLenNoBuffer && len(data) > int(pi.MaxLen) {
		data = data[:pi.MaxLen]
	}
	e := newMsg(of.TypePacketIn, xid)
	e.u32(rule.NoBuffer)
	e.u16(uint16(min(len(pi.Data), 0xffff)))
	e.u8(pi.Reason)
	e.u8(pi.TableID)
	e.u64(pi.Cookie)
	e.raw(EncodeMatch(&pi.Match))
	e.pad(2)
	e.raw(data)
	return e.finish()
}

// EncodeFlowRemoved builds OFPT_FLOW_REMOVED.
func EncodeFlowRemoved(xid uint32, fr *rule.FlowRemoved) []byte {
	e := newMsg(of.TypeFlowRemoved, xid)
	e.u64(fr.Cookie)
	e.u16(fr.Priority)
	e.u8(fr.Reason)
	e.u8(fr.TableID)
	e.u32(fr.DurationSec)
	e.u32(fr.DurationNsec)
	e.u16(fr.IdleTimeout)
	e.u16(fr.HardTimeout)
	e.u64(fr.Packets)
	e.u64(fr.Bytes)
	e.raw(echoMatch(fr.Echo.Match, &fr.Match))
	return e.finish()
}

func appendPort(e *enc, p *rule.Port) {
	e.u32(p.No)
	e.pad(4)
	e.raw(p.HWAddr[:])
	e.pad(2)
	e.str(p.Name, 16)
	for _, v := range []uint32{p.Config, p.State, p.Curr, p.Advertised, p.Supported, p.Peer, p.CurrSpeed, p.MaxSpeed} {
		e.u32(v)
	}
}

// EncodePortStatus builds OFPT_PORT_STATUS.
func EncodePortStatus(xid uint32, ps *rule.PortStatus) []byte {
	e := newMsg(of.TypePortStatus, xid)
	e.u8(ps.Reason)
	e.pad(7)
	appendPort(e, &ps.Port)
	return e.finish()
}
