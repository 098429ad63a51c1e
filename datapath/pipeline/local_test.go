package pipeline

import (
	"testing"

	"github.com/gswitch/gswitch/tables/rule"
)

// The LOCAL port: output:LOCAL reaches it, its frames match in_port
// LOCAL, FLOOD and ALL include it (a standard port, OpenFlow 1.3 §4.1),
// it is described and counted like the others, and PORT_MOD reaches it.
func TestLocalPort(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	local := &fakeDev{name: "br0"}
	if err := r.sw.AddPort(rule.PortLocal, local); err != nil {
		t.Fatal(err)
	}
	if err := r.sw.AddPort(rule.PortLocal, &fakeDev{name: "br1"}); err == nil {
		t.Error("a second LOCAL port was accepted")
	}
	if err := r.sw.AddPort(rule.PortController, &fakeDev{name: "c"}); err == nil {
		t.Error("port CONTROLLER was accepted as a port number")
	}
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: applyOut(rule.PortLocal)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(rule.PortLocal), Instructions: applyOut(2)})
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(2), Instructions: applyOut(rule.PortAll)})
	in := udpFrame(t, "10.0.0.1", "10.0.0.2")
	r.sw.Process(1, [][]byte{append([]byte(nil), in...)})
	if out := local.take(); len(out) != 1 {
		t.Fatalf("output:LOCAL: the LOCAL port got %d frames, want 1", len(out))
	}
	r.sw.Process(rule.PortLocal, [][]byte{append([]byte(nil), in...)})
	if out := r.devs[1].take(); len(out) != 1 {
		t.Fatalf("in_port=LOCAL: port 2 got %d frames, want 1", len(out))
	}
	r.sw.Process(2, [][]byte{append([]byte(nil), in...)})
	if a, l, b := len(r.devs[0].take()), len(local.take()), len(r.devs[1].take()); a != 1 || l != 1 || b != 0 {
		t.Fatalf("output:ALL from port 2: port 1 %d, LOCAL %d, port 2 %d frames; want 1, 1, 0", a, l, b)
	}
	ports := r.sw.Ports()
	if last := ports[len(ports)-1]; len(ports) != 3 || last.No != rule.PortLocal || last.Name != "br0" {
		t.Fatalf("port description %+v, want ports 1, 2 and LOCAL (br0) last", ports)
	}
	if st, err := r.sw.PortStats(rule.PortLocal); err != nil || len(st) != 1 {
		t.Fatalf("port stats of LOCAL: %v, %v", st, err)
	}
	if err := r.sw.PortMod(&rule.PortMod{PortNo: rule.PortLocal, Config: rule.PortConfigNoFwd, Mask: rule.PortConfigNoFwd}); err != nil {
		t.Fatal(err)
	}
	r.sw.Process(1, [][]byte{append([]byte(nil), in...)})
	if out := local.take(); len(out) != 0 {
		t.Fatalf("LOCAL with NO_FWD got %d frames", len(out))
	}
}
