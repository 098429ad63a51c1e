package pipeline

import (
	"testing"

	"github.com/gswitch/gswitch/datapath/packet"
	"github.com/gswitch/gswitch/datapath/packet/packettest"
	"github.com/gswitch/gswitch/tables/rule"
)

// malformedCorpus is the malformed-frame corpus as three parallel lists.
func malformedCorpus(t *testing.T) (names, reasons []string, frames [][]byte) {
	t.Helper()
	for _, f := range packettest.Malformed(t) {
		names, reasons, frames = append(names, f.Name), append(reasons, f.Reason), append(frames, f.Frame)
	}
	return names, reasons, frames
}

// TestMalformedCorpus feeds the malformed-frame corpus through the switch
// (a flow sends everything from port 1 to port 2): each malformed frame is
// counted under its reason (gswitch_malformed_frames_total{reason}) and
// in port 1's rx_dropped, and dropped; each well-formed one (long IPv6
// extension chains, jumbo frames, deep VLAN stacks) is forwarded; alone,
// in one batch of all, and from concurrent batches, with no crash.
func TestMalformedCorpus(t *testing.T) {
	names, reasons, frames := malformedCorpus(t)
	reasonOf := map[string]packet.Reason{}
	for r := packet.OK; r < packet.NumReasons; r++ {
		reasonOf[r.String()] = r
	}
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: applyOut(2)})
	copyOf := func(b []byte) [][]byte { return [][]byte{append([]byte(nil), b...)} }
	for i, f := range frames {
		want, ok := reasonOf[reasons[i]]
		if !ok {
			t.Fatalf("%s: unknown reason %q", names[i], reasons[i])
		}
		before := r.sw.malformed[want].Load()
		dropped := r.sw.ports[1].rxDropped.Load()
		r.sw.Process(1, copyOf(f))
		sent := r.devs[1].take()
		if want == packet.OK {
			// (a frame under the Ethernet minimum leaves padded to 60 bytes)
			if len(sent) != 1 || len(sent[0]) < len(f) || string(sent[0][:len(f)]) != string(f) {
				t.Errorf("%s (well-formed, %d bytes): %d frames forwarded, want it unchanged", names[i], len(f), len(sent))
			}
			continue
		}
		if got := r.sw.malformed[want].Load() - before; got != 1 {
			t.Errorf("%s: reason %q counted %d times, want 1", names[i], want, got)
		}
		if got := r.sw.ports[1].rxDropped.Load() - dropped; got != 1 {
			t.Errorf("%s: port rx_dropped +%d, want +1", names[i], got)
		}
		if len(sent) != 0 {
			t.Errorf("%s: a malformed frame was forwarded", names[i])
		}
	}

	// All at once, twice, from two goroutines: the counters add up.
	r2 := newRig(t, 2, FailSecure)
	r2.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 1, Match: matchInPort(1), Instructions: applyOut(2)})
	want := map[packet.Reason]uint64{}
	for _, rs := range reasons {
		want[reasonOf[rs]] += 2
	}
	done := make(chan struct{})
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			var batch [][]byte
			for _, f := range frames {
				batch = append(batch, append([]byte(nil), f...))
			}
			r2.sw.Process(1, batch)
		}()
	}
	<-done
	<-done
	c := r2.sw.Counters()
	for rs, n := range want {
		if rs == packet.OK {
			if got := uint64(len(r2.devs[1].take())); got != n {
				t.Errorf("batches: %d frames forwarded, want %d", got, n)
			}
			continue
		}
		if c.Malformed[rs.String()] != n {
			t.Errorf("batches: malformed{%q} = %d, want %d", rs, c.Malformed[rs.String()], n)
		}
	}
}
