package pipeline

import (
	"bytes"
	"testing"

	"github.com/gswitch/gswitch/tables/rule"
)

// markStage drops frames whose last byte is 0xdd and replaces those whose
// last byte is 0xee by a copy (in scratch) with the byte set to 0xff.
type markStage struct{ seen int }

func (m *markStage) Rx(port uint32, frames [][]byte, scratch []byte) ([][]byte, []byte) {
	kept := frames[:0]
	for _, f := range frames {
		m.seen++
		switch f[len(f)-1] {
		case 0xdd:
			continue
		case 0xee:
			start := len(scratch)
			scratch = append(scratch, f...)
			g := scratch[start:]
			g[len(g)-1] = 0xff
			kept = append(kept, g)
		default:
			kept = append(kept, f)
		}
	}
	return kept, scratch
}

func TestRxStages(t *testing.T) {
	r := newRig(t, 2, FailSecure)
	r.flowMod(t, &rule.FlowMod{Command: rule.FlowAdd, Priority: 10, Match: matchInPort(1), Instructions: applyOut(2)})
	frame := func(last byte) []byte {
		f := udpFrame(t, "10.0.0.1", "10.0.0.2")
		return append(f, last)
	}
	b := newBatcher(8)
	batch := func(lasts ...byte) {
		b.reset()
		for _, l := range lasts {
			b.frames = append(b.frames, frame(l))
		}
		r.sw.receive(1, b)
	}
	batch(0x01, 0xdd, 0xee)
	if got := len(r.devs[1].take()); got != 3 {
		t.Fatalf("without stages: %d frames out, want 3", got)
	}
	st := &markStage{}
	if err := r.sw.SetRxStages(1, st, st); err != nil {
		t.Fatal(err)
	}
	batch(0x01, 0xdd, 0xee)
	out := r.devs[1].take()
	if len(out) != 2 || out[1][len(out[1])-1] != 0xff || !bytes.Equal(out[0], frame(0x01)) || st.seen != 5 {
		t.Fatalf("with two stages: %d frames out (%x), stage saw %d; want the plain one and the rewritten one, 3+2 seen", len(out), out, st.seen)
	}
	batch(0xdd, 0xdd)
	if got := len(r.devs[1].take()); got != 0 {
		t.Fatalf("all frames taken by the stage: %d out", got)
	}
	if err := r.sw.SetRxStages(1); err != nil {
		t.Fatal(err)
	}
	batch(0xdd)
	if got := len(r.devs[1].take()); got != 1 {
		t.Fatalf("stages removed: %d out, want 1", got)
	}
	if err := r.sw.SetRxStages(9, st); err == nil {
		t.Error("a stage on a missing port: no error")
	}
}
