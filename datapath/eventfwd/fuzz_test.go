package eventfwd

import (
	"testing"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// FuzzUDPPayload feeds arbitrary frames to the parser and the stage: no
// panic, a payload within the frame, and every frame either returned or
// taken (delivered or counted malformed).
func FuzzUDPPayload(f *testing.F) {
	f.Add(udpFrame(f, "10.0.0.1", "10.0.0.2", 7400, []byte("GSEV\x01\x00\x00\x00"), 0))
	f.Add(udpFrame(f, "fd00::1", "fd00::2", 7400, []byte("GSEV\x01\x00\x00\x01\x01x\x04\x01"), 1))
	tab := pubsub.New()
	if _, err := tab.Add(2, []pubsub.Filter{{{Name: "x", Op: pubsub.OpEq, Value: pubsub.Bool(true)}}}); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		pl, ok := UDPPayload(frame, 7400)
		if ok && len(pl) > len(frame) {
			t.Fatalf("payload of %d bytes from a %d-byte frame", len(pl), len(frame))
		}
		out := &sink{}
		st, _ := New(Config{UDPPort: 7400, Matcher: tab, Out: out})
		rest, _ := st.Rx(1, [][]byte{frame}, nil)
		k := st.Counters()
		if uint64(len(rest))+k.Received+k.Malformed != 1 {
			t.Fatalf("frame neither returned nor taken: rest %d, %+v", len(rest), k)
		}
		if ok != (len(rest) == 0) {
			t.Fatalf("UDPPayload ok=%v but the stage returned %d frames", ok, len(rest))
		}
	})
}
