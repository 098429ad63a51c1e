package pipeline

import (
	"fmt"
	"strings"

	"github.com/gswitch/gswitch/controlproto/openflow"
)

// FormatInstructions writes instructions roughly as ovs-ofctl does:
// "actions=output:2", "write_actions(...)", "goto_table:1".
func FormatInstructions(in *openflow.Instructions) string {
	var parts []string
	if in.Has&openflow.HasMeter != 0 {
		parts = append(parts, fmt.Sprintf("meter:%d", in.Meter))
	}
	if in.Has&openflow.HasApplyActions != 0 {
		parts = append(parts, "apply_actions("+formatActions(in.Apply)+")")
	}
	if in.Has&openflow.HasClearActions != 0 {
		parts = append(parts, "clear_actions")
	}
	if in.Has&openflow.HasWriteActions != 0 {
		parts = append(parts, "write_actions("+formatActions(in.Write)+")")
	}
	if in.Has&openflow.HasWriteMetadata != 0 {
		parts = append(parts, fmt.Sprintf("write_metadata:%#x/%#x", in.Metadata, in.MetadataMask))
	}
	if in.Has&openflow.HasGotoTable != 0 {
		parts = append(parts, fmt.Sprintf("goto_table:%d", in.GotoTable))
	}
	if len(parts) == 0 {
		return "drop"
	}
	return strings.Join(parts, ",")
}

var reservedPorts = map[uint32]string{
	openflow.PortInPort: "IN_PORT", openflow.PortTable: "TABLE", openflow.PortNormal: "NORMAL",
	openflow.PortFlood: "FLOOD", openflow.PortAll: "ALL", openflow.PortController: "CONTROLLER",
	openflow.PortLocal: "LOCAL", openflow.PortAny: "ANY",
}

func formatActions(as []openflow.Action) string {
	out := make([]string, len(as))
	for i, a := range as {
		switch a.Kind {
		case openflow.ActOutput:
			p, ok := reservedPorts[a.Port]
			if !ok {
				p = fmt.Sprint(a.Port)
			}
			out[i] = "output:" + p
		case openflow.ActSetField:
			out[i] = fmt.Sprintf("set_field:%x->%s", a.Value, a.Field)
		case openflow.ActPushVLAN:
			out[i] = fmt.Sprintf("push_vlan:%#04x", a.EthType)
		case openflow.ActGroup:
			out[i] = fmt.Sprintf("group:%d", a.ID)
		case openflow.ActSetNwTTL:
			out[i] = fmt.Sprintf("set_nw_ttl:%d", a.TTL)
		default:
			out[i] = a.Kind.String()
		}
	}
	return strings.Join(out, ",")
}
