package pipeline

import (
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

// settable is the set of fields set_field can write: header fields that
// setField edits and the pipeline fields metadata and tunnel_id.
var settable = map[flow.Field]bool{
	flow.FieldEthDst: true, flow.FieldEthSrc: true, flow.FieldEthType: true, flow.FieldVlanVID: true, flow.FieldVlanPCP: true,
	flow.FieldIPDSCP: true, flow.FieldIPECN: true, flow.FieldIPProto: true, flow.FieldIPv4Src: true, flow.FieldIPv4Dst: true,
	flow.FieldTCPSrc: true, flow.FieldTCPDst: true, flow.FieldUDPSrc: true, flow.FieldUDPDst: true,
	flow.FieldSCTPSrc: true, flow.FieldSCTPDst: true,
	flow.FieldICMPv4Type: true, flow.FieldICMPv4Code: true, flow.FieldARPOp: true, flow.FieldARPSPA: true,
	flow.FieldARPTPA: true, flow.FieldARPSHA: true, flow.FieldARPTHA: true, flow.FieldIPv6Src: true,
	flow.FieldIPv6Dst: true, flow.FieldIPv6FLabel: true, flow.FieldICMPv6Type: true, flow.FieldICMPv6Code: true,
	flow.FieldIPv6NDTarget: true, flow.FieldIPv6NDSLL: true, flow.FieldIPv6NDTLL: true,
	flow.FieldMPLSLabel: true, flow.FieldMPLSTC: true, flow.FieldMPLSBOS: true, flow.FieldPBBISID: true,
	flow.FieldMetadata: true, flow.FieldTunnelID: true,
}

// checkActions refuses, when a FLOW_MOD, GROUP_MOD or PACKET_OUT arrives,
// the actions this datapath would not execute: set_field on a field it
// cannot write gets rule.BadSetField (OFPBAC_BAD_SET_TYPE). Every header
// field OpenFlow 1.3 lets set_field write is settable (eth_type included),
// so only the pipeline fields a packet arrives with (in_port, in_phy_port)
// and the ipv6_exthdr pseudo-field, which the OpenFlow codec already
// refuses, reach this error; every other action kind the codec decodes is
// executed.
func checkActions(as []rule.Action) error {
	for i := range as {
		if a := &as[i]; a.Kind == rule.ActSetField && !settable[a.Field] {
			return rule.Errorf(rule.BadSetField, "set_field %s is not supported by this datapath", a.Field)
		}
	}
	return nil
}

func checkInstructionActions(in *rule.Instructions) error {
	if err := checkActions(in.Apply); err != nil {
		return err
	}
	return checkActions(in.Write)
}

func checkBuckets(g *rule.Group) error {
	for i := range g.Buckets {
		if err := checkActions(g.Buckets[i].Actions); err != nil {
			return err
		}
	}
	return nil
}

// setPipelineField runs set_field on metadata or tunnel_id, which live in
// the key and not in the frame; it reports whether a.Field is one.
func setPipelineField(p *pkt, a *rule.Action) bool {
	if a.Field != flow.FieldMetadata && a.Field != flow.FieldTunnelID {
		return false
	}
	var v uint64
	for _, b := range a.Value {
		v = v<<8 | uint64(b)
	}
	if a.Field == flow.FieldMetadata {
		p.metadata = v
	} else {
		p.tunnelID = v
	}
	_ = p.key.SetUint(a.Field, v)
	return true
}
