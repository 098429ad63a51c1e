package openflow

import (
	"bytes"
	"testing"

	of "github.com/netrack/openflow"
)

// checkRejected checks what every decoder promises about an error: an
// *Error whose OFPT_ERROR reply is well-formed.
func checkRejected(t *testing.T, msg []byte, err *Error) {
	t.Helper()
	if err.Detail == "" {
		t.Fatalf("error without detail: %v", err)
	}
	checkErrorReply(t, msg, EncodeError(msg, err))
}

func addFlowModSeeds(f *testing.F) {
	f.Add(unhex(f, flowModHex))
	f.Add(flowModWith(f, add0, ethIP+"80 00 18 04 0a 00 00 01", outPort2))
	f.Add(flowModWith(f, add0, "80 00 0d 04 10 00 10 00 80 00 0e 01 03", "00 04 00 20 00 00 00 00 00 11 00 08 81 00 00 00 00 19 00 10 80 00 0e 01 05 00 00 00 00 00 00 00"))
	f.Add(flowModWith(f, "00 03", "", "00 01 00 08 02 00 00 00"))
}

func FuzzDecodeFlowMod(f *testing.F) {
	addFlowModSeeds(f)
	f.Fuzz(func(t *testing.T, msg []byte) {
		fm, err := DecodeFlowMod(msg)
		if err != nil {
			checkRejected(t, msg, err)
			return
		}
		// What was accepted re-encodes, from its values alone, into a
		// message that decodes to the same thing.
		fm.Match.Wire, fm.Wire = nil, nil
		again, err := DecodeFlowMod(EncodeFlowMod(1, fm))
		if err != nil {
			t.Fatalf("re-encoded flow_mod rejected: %v", err)
		}
		if again.Match.Match != fm.Match.Match || !bytes.Equal(EncodeInstructions(&again.Instructions), EncodeInstructions(&fm.Instructions)) {
			t.Fatalf("round trip changed the flow_mod")
		}
	})
}

func FuzzDecodeMatch(f *testing.F) {
	f.Add(unhex(f, flowModHex)[48:72])
	f.Add(unhex(f, "00 01 00 04 00 00 00 00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, n, err := DecodeMatch(b)
		if err != nil {
			checkRejected(t, b, err)
			return
		}
		if n > len(b) || n%8 != 0 || !bytes.Equal(m.Wire, b[:n]) {
			t.Fatalf("length %d of %d, wire %x", n, len(b), m.Wire)
		}
		if err := m.Match.Validate(); err != nil {
			t.Fatalf("accepted an invalid match: %v", err)
		}
	})
}

func FuzzDecodePacketOut(f *testing.F) {
	f.Add(unhex(f, "04 0d 00 28 00 00 00 05 ff ff ff ff ff ff ff fd 00 10 00 00 00 00 00 00 00 00 00 10 00 00 00 01 ff e5 00 00 00 00 00 00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		po, err := DecodePacketOut(msg)
		if err != nil {
			checkRejected(t, msg, err)
			return
		}
		if len(po.Data) > len(msg) {
			t.Fatalf("data longer than the message")
		}
	})
}

func FuzzDecodeFlowStatsRequest(f *testing.F) {
	f.Add(unhex(f, "ff 00 00 00 ff ff ff ff ff ff ff ff 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 04 00 00 00 00"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := DecodeFlowStatsRequest(body); err != nil {
			checkRejected(t, body, err)
		}
	})
}

func FuzzNegotiateHello(f *testing.F) {
	f.Add(EncodeHello(1))
	f.Add(unhex(f, "01 00 00 08 00 00 00 01"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		if err := NegotiateHello(msg); err != nil {
			checkErrorReply(t, msg, EncodeError(msg, err))
		}
	})
}

// FuzzSession feeds any message (framed: version and length set) to a
// session after the handshake: every reply must be a well-formed message,
// an error reply must be well-formed, and a rejected message must leave
// the switch's tables as they were.
func FuzzSession(f *testing.F) {
	addFlowModSeeds(f)
	for _, typ := range []of.Type{of.TypeFeaturesRequest, of.TypeBarrierRequest, of.TypeGetConfigRequest, of.TypeGetAsyncRequest, of.TypeEchoRequest} {
		f.Add(newMsg(typ, 9).finish())
	}
	f.Add(unhex(f, "04 12 00 10 00 00 00 03 00 0d 00 00 00 00 00 00"))
	f.Add(unhex(f, "04 18 00 18 00 00 00 04 00 00 00 02 00 00 00 00 00 00 00 00 00 00 00 01"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) < HeaderLen || len(msg) > 0xffff {
			return
		}
		msg[0] = Version
		fixLen(msg)
		sw := newTableSwitch(2, 8)
		a := NewAgent(sw, Options{})
		s := newSession(a, nil)
		s.feat = sw.Features()
		before := sw.rules()
		for _, r := range s.handle(msg) {
			h, ok := ParseHeader(r)
			if !ok || int(h.Length) != len(r) || h.Version != Version {
				t.Fatalf("malformed reply %x", r)
			}
			if h.Type == of.TypeError {
				checkErrorReply(t, msg, r)
				if sw.rules() != before {
					t.Fatalf("a rejected message changed the tables")
				}
			}
		}
	})
}
