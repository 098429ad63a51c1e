package pipeline

import (
	"fmt"
	"strings"

	"github.com/gswitch/gswitch/tables/rule"
)

// FormatInstructions writes instructions roughly as ovs-ofctl does:
// "actions=output:2", "write_actions(...)", "goto_table:1".
func FormatInstructions(in *rule.Instructions) string {
	var parts []string
	if in.Has&rule.HasMeter != 0 {
		parts = append(parts, fmt.Sprintf("meter:%d", in.Meter))
	}
	if in.Has&rule.HasApplyActions != 0 {
		parts = append(parts, "apply_actions("+formatActions(in.Apply)+")")
	}
	if in.Has&rule.HasClearActions != 0 {
		parts = append(parts, "clear_actions")
	}
	if in.Has&rule.HasWriteActions != 0 {
		parts = append(parts, "write_actions("+formatActions(in.Write)+")")
	}
	if in.Has&rule.HasWriteMetadata != 0 {
		parts = append(parts, fmt.Sprintf("write_metadata:%#x/%#x", in.Metadata, in.MetadataMask))
	}
	if in.Has&rule.HasGotoTable != 0 {
		parts = append(parts, fmt.Sprintf("goto_table:%d", in.GotoTable))
	}
	if len(parts) == 0 {
		return "drop"
	}
	return strings.Join(parts, ",")
}

var reservedPorts = map[uint32]string{
	rule.PortInPort: "IN_PORT", rule.PortTable: "TABLE", rule.PortNormal: "NORMAL",
	rule.PortFlood: "FLOOD", rule.PortAll: "ALL", rule.PortController: "CONTROLLER",
	rule.PortLocal: "LOCAL", rule.PortAny: "ANY",
}

func formatActions(as []rule.Action) string {
	out := make([]string, len(as))
	for i, a := range as {
		switch a.Kind {
		case rule.ActOutput:
			p, ok := reservedPorts[a.Port]
			if !ok {
				p = fmt.Sprint(a.Port)
			}
			out[i] = "output:" + p
		case rule.ActSetField:
			out[i] = fmt.Sprintf("set_field:%x->%s", a.Value, a.Field)
		case rule.ActPushVLAN:
			out[i] = fmt.Sprintf("push_vlan:%#04x", a.EthType)
		case rule.ActGroup:
			out[i] = fmt.Sprintf("group:%d", a.ID)
		case rule.ActSetNwTTL:
			out[i] = fmt.Sprintf("set_nw_ttl:%d", a.TTL)
		default:
			out[i] = a.Kind.String()
		}
	}
	return strings.Join(out, ",")
}
