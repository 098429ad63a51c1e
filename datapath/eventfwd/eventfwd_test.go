package eventfwd

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// udpFrame builds an Ethernet frame with tags VLAN tags carrying a UDP
// datagram from src to dst (IPv4 or IPv6) to dport.
func udpFrame(t testing.TB, src, dst string, dport uint16, payload []byte, tags int) []byte {
	s, d := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	udp := binary.BigEndian.AppendUint16(nil, 40000)
	udp = binary.BigEndian.AppendUint16(udp, dport)
	udp = binary.BigEndian.AppendUint16(udp, uint16(8+len(payload)))
	udp = append(udp, 0, 0)
	udp = append(udp, payload...)
	f := []byte{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 6}
	for range tags {
		f = append(f, 0x81, 0x00, 0, 7)
	}
	if s.Is4() {
		f = append(f, 0x08, 0x00)
		ip := []byte{0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, protoUDP, 0, 0}
		binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
		ip = append(append(ip, s.AsSlice()...), d.AsSlice()...)
		return append(append(f, ip...), udp...)
	}
	f = append(f, 0x86, 0xdd)
	ip := []byte{0x60, 0, 0, 0, 0, 0, protoUDP, 64}
	binary.BigEndian.PutUint16(ip[4:], uint16(len(udp)))
	ip = append(append(ip, s.AsSlice()...), d.AsSlice()...)
	return append(append(f, ip...), udp...)
}

func wire(t testing.TB, js string) []byte {
	t.Helper()
	ev, err := pubsub.DecodeJSON([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	b, err := ev.AppendWire(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUDPPayload(t *testing.T) {
	pl := []byte("GSEV-payload")
	v4 := udpFrame(t, "10.0.0.1", "10.0.0.2", 7400, pl, 0)
	v6 := udpFrame(t, "fd00::1", "fd00::2", 7400, pl, 0)
	tagged := udpFrame(t, "10.0.0.1", "10.0.0.2", 7400, pl, 2)
	padded := append(slices.Clone(v4), make([]byte, 30)...)
	frag := slices.Clone(v4)
	frag[14+6] = 0x20 // MF
	short := v4[:len(v4)-3]
	badLen := slices.Clone(v4)
	binary.BigEndian.PutUint16(badLen[14+20+4:], 200)
	// IPv6 with a destination options header before UDP.
	v6opt := udpFrame(t, "fd00::1", "fd00::2", 7400, pl, 0)
	ipOff := 14
	udp := slices.Clone(v6opt[ipOff+40:])
	v6opt = append(v6opt[:ipOff+40:ipOff+40], append([]byte{protoUDP, 0, 1, 4, 0, 0, 0, 0}, udp...)...)
	v6opt[ipOff+6] = 60
	binary.BigEndian.PutUint16(v6opt[ipOff+4:], uint16(8+len(udp)))
	v6frag := slices.Clone(v6opt)
	v6frag[ipOff+6] = 44
	for _, c := range []struct {
		name  string
		frame []byte
		port  uint16
		want  bool
	}{
		{"ipv4", v4, 7400, true}, {"ipv6", v6, 7400, true}, {"two tags", tagged, 7400, true},
		{"padding", padded, 7400, true}, {"ipv6 dest options", v6opt, 7400, true},
		{"other port", v4, 7401, false}, {"fragment", frag, 7400, false}, {"truncated", short, 7400, false},
		{"udp length beyond ip", badLen, 7400, false}, {"ipv6 fragment header", v6frag, 7400, false},
		{"empty", nil, 7400, false}, {"ethernet only", v4[:14], 7400, false},
	} {
		got, ok := UDPPayload(c.frame, c.port)
		if ok != c.want || (ok && string(got) != string(pl)) {
			t.Errorf("%s: got %q, %v; want ok=%v", c.name, got, ok, c.want)
		}
	}
}

// sink records transmitted frames per port (copies, as Transmit makes).
type sink struct {
	mu  sync.Mutex
	got map[uint32][][]byte
}

func (s *sink) Transmit(p uint32, frames [][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.got == nil {
		s.got = map[uint32][][]byte{}
	}
	for _, f := range frames {
		s.got[p] = append(s.got[p], slices.Clone(f))
	}
}

func TestStageDelivers(t *testing.T) {
	tab := pubsub.New()
	specs, err := pubsub.Parse("1: x > 5\n2: x > 5 && s ^= \"ab\"\n3: s = \"abc\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tab.AddSpecs(specs); err != nil {
		t.Fatal(err)
	}
	out := &sink{}
	st, err := New(Config{UDPPort: 7400, Matcher: tab, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	e1 := udpFrame(t, "10.0.0.1", "10.0.0.2", 7400, wire(t, `{"x": 7, "s": "abc"}`), 0) // 1 2 3
	e2 := udpFrame(t, "fd00::1", "fd00::2", 7400, wire(t, `{"x": 9}`), 0)               // 1
	e3 := udpFrame(t, "10.0.0.1", "10.0.0.2", 7400, wire(t, `{"x": 1}`), 0)             // none
	bad := udpFrame(t, "10.0.0.1", "10.0.0.2", 7400, []byte("GSEV\x01\x00\x00\x05"), 0)
	other := udpFrame(t, "10.0.0.1", "10.0.0.2", 53, []byte("dns"), 0)
	rest, _ := st.Rx(1, [][]byte{e1, other, e2, bad, e3}, nil)
	if len(rest) != 1 || string(rest[0]) != string(other) {
		t.Fatalf("rest: %d frames, want the non-event frame", len(rest))
	}
	want := map[uint32][][]byte{2: {e1}, 3: {e1}} // not back to port 1
	if len(out.got) != len(want) {
		t.Fatalf("delivered to %d ports, want %d: %v", len(out.got), len(want), out.got)
	}
	for p, fs := range want {
		if !slices.EqualFunc(out.got[p], fs, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Errorf("port %d: got %d frames, want %d", p, len(out.got[p]), len(fs))
		}
	}
	k := st.Counters()
	if k.Received != 3 || k.Malformed != 1 || k.Matched != 1 || k.Delivered != 2 || k.PortDeliveries[2] != 1 || k.PortDeliveries[3] != 1 {
		t.Errorf("counters %+v", k)
	}
	// From port 3, e2 goes to 1; e1 to 1 and 2.
	out.got = nil
	st.Rx(3, [][]byte{e1, e2}, nil)
	if len(out.got[1]) != 2 || len(out.got[2]) != 1 || len(out.got[3]) != 0 {
		t.Errorf("from port 3: %v", out.got)
	}
}

// TestStageAgainstOracle runs random events through the stage from
// several goroutines and checks every port received exactly the events the
// brute-force evaluator says, in order per sender.
func TestStageAgainstOracle(t *testing.T) {
	sc := pubsub.Scenario{Interfaces: 4, FiltersMin: 20, FiltersMax: 40, ConstraintsMin: 1, ConstraintsMax: 3,
		Names: 6, AttrsMin: 2, AttrsMax: 5, NumericShare: 0.5, Values: 8, Words: 8, Seed: 3}
	specs := sc.Subscriptions()
	tab := pubsub.New()
	if _, err := tab.AddSpecs(specs); err != nil {
		t.Fatal(err)
	}
	evs := sc.Events(400)
	out := &sink{}
	st, _ := New(Config{UDPPort: 9, Matcher: tab, Out: out})
	frames := make([][]byte, len(evs))
	for i := range evs {
		b, err := evs[i].AppendWire(nil)
		if err != nil {
			t.Fatal(err)
		}
		frames[i] = udpFrame(t, "10.0.0.1", "10.0.0.2", 9, b, 0)
	}
	var wg sync.WaitGroup
	in := uint32(1)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g * 100; i < (g+1)*100; i += 10 {
				st.Rx(in, slices.Clone(frames[i:i+10]), nil)
			}
		}()
	}
	wg.Wait()
	want := map[uint32]int{}
	for i := range evs {
		for _, p := range pubsub.BruteMatch(specs, &evs[i]) {
			if p != in {
				want[p]++
			}
		}
	}
	total := 0
	for p, n := range want {
		if len(out.got[p]) != n {
			t.Errorf("port %d: %d events, oracle says %d", p, len(out.got[p]), n)
		}
		total += n
	}
	if k := st.Counters(); k.Delivered != uint64(total) || k.Received != uint64(len(evs)) {
		t.Errorf("counters %+v, want delivered %d", k, total)
	}
}

func TestNewChecks(t *testing.T) {
	tab := pubsub.New()
	for _, c := range []Config{{Matcher: tab, Out: &sink{}}, {UDPPort: 1, Out: &sink{}}, {UDPPort: 1, Matcher: tab}} {
		if _, err := New(c); err == nil {
			t.Errorf("New(%+v): no error", c)
		}
	}
}
