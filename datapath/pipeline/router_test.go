package pipeline

import "testing"

// fakeRouter owns port 1 and sends every frame it gets to port 2.
type fakeRouter struct{ got int }

func (r *fakeRouter) Owns(port uint32) bool { return port == 1 }
func (r *fakeRouter) Route(in uint32, frames [][]byte, out func(uint32, []byte)) {
	for _, f := range frames {
		r.got++
		out(2, f)
	}
}

// TestRouterPortsBypassTables: frames of a router port go to the router
// (not to the flow tables), and what it sends leaves padded in one batch;
// the other ports keep OpenFlow semantics.
func TestRouterPortsBypassTables(t *testing.T) {
	r := newRig(t, 3, FailSecure)
	fr := &fakeRouter{}
	r.sw.cfg.Router = fr
	r.sw.Process(1, [][]byte{make([]byte, 20), make([]byte, 70)})
	if fr.got != 2 {
		t.Fatalf("router got %d frames, want 2", fr.got)
	}
	sent := r.devs[1].take()
	if len(sent) != 2 || len(sent[0]) != 60 || len(sent[1]) != 70 {
		t.Fatalf("port 2 sent %d frames", len(sent))
	}
	r.sw.Process(3, [][]byte{make([]byte, 60)})
	if fr.got != 2 || r.sw.Counters().MissDrops != 1 {
		t.Fatalf("a frame of a switch port went to the router (%d) or missed no table (%d)", fr.got, r.sw.Counters().MissDrops)
	}
	r.sw.Transmit(3, [][]byte{make([]byte, 42)})
	if sent := r.devs[2].take(); len(sent) != 1 || len(sent[0]) != 60 {
		t.Fatalf("Transmit sent %d frames", len(sent))
	}
}
