package openflow

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"

	of "github.com/netrack/openflow"

	"github.com/gswitch/gswitch/tables/rule"
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
		fm.Echo = rule.Echo{}
		again, err := DecodeFlowMod(EncodeFlowMod(1, fm))
		if err != nil {
			t.Fatalf("re-encoded flow_mod rejected: %v", err)
		}
		if again.Match != fm.Match || !bytes.Equal(EncodeInstructions(&again.Instructions), EncodeInstructions(&fm.Instructions)) {
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

// decodeModRoundTrip decodes a modify message for a fuzz target. ok is
// false where decode rejects msg (checked with checkRejected) or where
// skip(m) holds (a delete, whose body the encoder does not write back);
// otherwise m has been checked to come back unchanged from encode and
// decode.
func decodeModRoundTrip[M any](t *testing.T, msg []byte, decode func([]byte) (M, *Error), encode func(uint32, M) []byte, skip func(M) bool) (m M, ok bool) {
	t.Helper()
	m, err := decode(msg)
	if err != nil {
		checkRejected(t, msg, err)
		return m, false
	}
	if skip(m) {
		return m, false
	}
	again, err := decode(encode(1, m))
	if err != nil || !reflect.DeepEqual(again, m) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, again, m)
	}
	return m, true
}

func FuzzDecodeGroupMod(f *testing.F) {
	f.Add(unhex(f, groupModHex))
	f.Add(groupModWith(0, 3, 1, "00 10 00 00 ff ff ff ff 00 00 00 02 00 00 00 00"))
	f.Add(groupModWith(2, 0, rule.GroupAll, ""))
	f.Fuzz(func(t *testing.T, msg []byte) {
		gm, ok := decodeModRoundTrip(t, msg, DecodeGroupMod, EncodeGroupMod,
			func(gm *rule.GroupMod) bool { return gm.Command == rule.GroupDelete })
		if !ok {
			return
		}
		// What the decoder accepts, a table accepts or refuses with a
		// *rule.Error of a kind that has an OpenFlow code, changing
		// nothing when it refuses.
		gt := rule.NewGroupTable(rule.GroupTableConfig{})
		if _, err := gt.Mod(gm); err != nil {
			var re *rule.Error
			if !errors.As(err, &re) || ruleCodes[re.Kind] == (code{}) || len(gt.Desc()) != 0 {
				t.Fatalf("table: %v, %d groups", err, len(gt.Desc()))
			}
		}
	})
}

func FuzzDecodeMeterMod(f *testing.F) {
	f.Add(unhex(f, meterModHex))
	f.Add(meterModWith(2, 0, rule.MeterAll, ""))
	f.Fuzz(func(t *testing.T, msg []byte) {
		mm, ok := decodeModRoundTrip(t, msg, DecodeMeterMod, EncodeMeterMod,
			func(mm *rule.MeterMod) bool { return mm.Command == rule.MeterDelete })
		if !ok {
			return
		}
		mt := rule.NewMeterTable(rule.MeterTableConfig{MaxBands: 255})
		if _, err := mt.Mod(mm); err == nil && mm.Command == rule.MeterAdd {
			m := mt.Get(mm.ID)
			m.Allow(time.Now(), len(msg)) // any configuration runs without overflow panics
		}
	})
}

func FuzzDecodePortMod(f *testing.F) {
	f.Add(EncodePortMod(1, &rule.PortMod{PortNo: 1, HWAddr: [6]byte{2, 0, 0, 0, 0, 1}, Config: 1, Mask: 1}))
	f.Fuzz(func(t *testing.T, msg []byte) {
		pm, err := DecodePortMod(msg)
		if err != nil {
			checkRejected(t, msg, err)
			return
		}
		if _, err := CheckPort(pm, newTableSwitch(1, 1).Ports()); err != nil {
			checkRejected(t, msg, err)
		}
	})
}

func FuzzDecodeSmallRequests(f *testing.F) {
	f.Add(unhex(f, "04 11 00 10 00 00 00 01 00 00 00 00 00 00 00 00"))
	f.Add(unhex(f, "04 16 00 10 00 00 00 01 00 00 00 01 00 00 00 00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		if _, err := DecodeTableMod(msg, 3); err != nil {
			checkRejected(t, msg, err)
		}
		if _, err := decodeQueueGetConfig(msg); err != nil {
			checkRejected(t, msg, err)
		}
		for _, dec := range []func([]byte) (uint32, *Error){decodeGroupStatsRequest, decodeMeterRequest} {
			if _, err := dec(msg); err != nil {
				checkRejected(t, msg, err)
			}
		}
		if _, _, err := decodeQueueStatsRequest(msg); err != nil {
			checkRejected(t, msg, err)
		}
	})
}

// FuzzSessionFull is FuzzSession against a switch with every optional
// interface and some groups, meters and flows installed: a message
// answered with an error must leave everything as it was.
func FuzzSessionFull(f *testing.F) {
	addFlowModSeeds(f)
	f.Add(unhex(f, groupModHex))
	f.Add(unhex(f, meterModHex))
	f.Add(groupModWith(1, 0, 1, bucketGroup5))
	f.Add(groupModWith(2, 0, 1, ""))
	f.Add(meterModWith(1, 1, 1, dropBand))
	f.Add(EncodePortMod(1, &rule.PortMod{PortNo: 1, HWAddr: [6]byte{2, 0, 0, 0, 0, 1}, Config: 1, Mask: 1}))
	f.Add(unhex(f, "04 11 00 10 00 00 00 01 00 00 00 00 00 00 00 00"))
	f.Add(unhex(f, "04 16 00 10 00 00 00 01 00 00 00 01 00 00 00 00"))
	for _, mp := range []string{"00 06", "00 07", "00 08", "00 09", "00 0a", "00 0b", "00 05"} {
		f.Add(unhex(f, "04 12 00 18 00 00 00 03 "+mp+" 00 00 00 00 00 00 ff ff ff ff 00 00 00 00"))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if len(msg) < HeaderLen || len(msg) > 0xffff {
			return
		}
		msg[0] = Version
		fixLen(msg)
		sw := newFullSwitch(2, 8)
		s := newSession(NewAgent(sw, Options{}), nil)
		s.feat = sw.Features()
		for _, m := range [][]byte{
			EncodeGroupMod(1, addGroup(1, rule.GroupTypeAll, bucket(out(1)))),
			EncodeGroupMod(2, addGroup(5, rule.GroupTypeAll, bucket(toGroup(1)))),
			EncodeMeterMod(3, &rule.MeterMod{Command: rule.MeterAdd, MeterConfig: rule.MeterConfig{ID: 1, Flags: rule.MeterKbps, Bands: []rule.MeterBand{{Type: rule.BandDrop, Rate: 10}}}}),
			flowModWith(t, add0, "", "00 06 00 08 00 00 00 01 00 04 00 10 00 00 00 00 00 16 00 08 00 00 00 05"),
		} {
			if r := s.handle(m); len(r) != 0 {
				t.Fatalf("set-up message %x answered %x", m, r)
			}
		}
		before := sw.state()
		for _, r := range s.handle(msg) {
			h, ok := ParseHeader(r)
			if !ok || int(h.Length) != len(r) || h.Version != Version {
				t.Fatalf("malformed reply %x", r)
			}
			if h.Type == of.TypeError {
				checkErrorReply(t, msg, r)
				if after := sw.state(); after != before {
					t.Fatalf("a rejected message changed the switch:\n%s\n%s", before, after)
				}
			}
		}
	})
}

// FuzzMultipartParts feeds a session a sequence of multipart request
// parts, interleaved by xid: each chunk of the input is xid (1 byte), type
// (1 byte, mod 16), flags (1 byte) and a body length (1 byte) then the
// body. Every reply is well formed, the requests held open stay within
// MaxMultipartOpen and MaxMultipartRequest bytes, and the bytes counted
// are the bytes held.
func FuzzMultipartParts(f *testing.F) {
	f.Add([]byte{1, 4, 1, 4, 0, 0, 0, 2, 2, 3, 0, 0, 1, 4, 0, 4, 0, 0, 0, 0})
	f.Add([]byte{1, 4, 1, 4, 0, 0, 0, 2, 1, 3, 0, 0})
	f.Add([]byte{1, 1, 1, 8, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 2, 4, 1, 4, 0, 0, 0, 1, 1, 1, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		sw := newFullSwitch(2, 8)
		s := newSession(NewAgent(sw, Options{MaxMultipartOpen: 3, MaxMultipartRequest: 64}), nil)
		s.feat = sw.Features()
		for len(in) >= 4 {
			n := min(int(in[3]), len(in)-4)
			e := newMsg(of.TypeMultipartRequest, uint32(in[0]))
			e.u16(uint16(in[1] % 16))
			e.u16(uint16(in[2] & 1))
			e.pad(4)
			e.raw(in[4 : 4+n])
			m := e.finish()
			in = in[4+n:]
			for _, r := range s.handle(m) {
				h, ok := ParseHeader(r)
				if !ok || int(h.Length) != len(r) || h.Version != Version {
					t.Fatalf("malformed reply %x", r)
				}
				if h.Type == of.TypeError {
					checkErrorReply(t, m, r)
				}
			}
			held := 0
			for _, p := range s.mp {
				held += len(p.body)
			}
			if held != s.mpLen || held > 64 || len(s.mp) > 3 {
				t.Fatalf("%d requests open holding %d bytes (counted %d)", len(s.mp), held, s.mpLen)
			}
		}
	})
}
