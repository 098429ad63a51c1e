package forward

import (
	"encoding/binary"
	"slices"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/tables/pubsub"
)

// The event traffic: every template is a well-formed event packet whose
// last 8 bytes are its mark, and what the oracle says of it is what the
// brute-force evaluator of the semantics says over the same subscriptions.
func TestEventFrames(t *testing.T) {
	es, err := loadEvents("events:40", 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(es.specs); got != 3*40+3 {
		t.Fatalf("%d subscriptions, want %d", got, 3*40+3)
	}
	dst := []byte{2, 0, 0, 0, 0, 1}
	src := [][]byte{{2, 0, 0, 0, 1, 1}, {2, 0, 0, 0, 1, 2}, {2, 0, 0, 0, 1, 3}}
	fsets, err := eventFrames(es, dst, src, 256)
	if err != nil {
		t.Fatal(err)
	}
	for k, fs := range fsets {
		var fwd int
		for i, f := range fs.tmpl {
			if binary.BigEndian.Uint16(f[36:]) != eventsUDPPort || int(binary.BigEndian.Uint16(f[38:])) != len(f)-34 ||
				int(binary.BigEndian.Uint16(f[16:])) != len(f)-14 || ipChecksum(f[14:34]) != 0 {
				t.Fatalf("pair %d frame %d: headers % x", k, i, f[:42])
			}
			g := slices.Clone(f)
			fs.stamp(g, i, 9, uint64(i))
			if st, seq, ok := markOf(g); !ok || st != 9 || seq != uint32(i) {
				t.Fatalf("pair %d frame %d: mark %d %d %v", k, i, st, seq, ok)
			}
			ev, err := pubsub.DecodeWire(g[42:])
			if err != nil {
				t.Fatalf("pair %d frame %d (stamped): %v", k, i, err)
			}
			want := pubsub.BruteMatch(es.specs, &ev)
			if fs.fwd[i] != slices.Equal(want, []uint32{uint32(2*k + 2)}) || (!fs.fwd[i] && len(want) > 0) {
				t.Fatalf("pair %d frame %d (%s): oracle %v, brute force %v", k, i, ev.String(), fs.fwd[i], want)
			}
			if fs.fwd[i] {
				fwd++
			}
		}
		if fwd < 64 || fwd == len(fs.tmpl) || fs.expected(uint64(len(fs.tmpl))) != uint64(fwd) {
			t.Fatalf("pair %d: %d of %d delivered (expected() %d): want about three in four", k, fwd, len(fs.tmpl), fs.expected(uint64(len(fs.tmpl))))
		}
	}
	if m := meanWireBytes(fsets); m <= wireLen {
		t.Fatalf("mean frame %d bytes", m)
	}
}

func TestParseEvents(t *testing.T) {
	for _, s := range []string{"events", "events:1", "events:25000"} {
		if err := parseRuleset(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"events:", "events:0", "events:x", "events:-3", "events:99999999"} {
		if err := parseRuleset(s); err == nil || !strings.Contains(err.Error(), "filters per interface") {
			t.Errorf("%s: %v", s, err)
		}
	}
	if _, err := parseFwdFlags([]string{"--ruleset", "events", "--targets", "gswitchd,ovs"}, new(strings.Builder)); err == nil {
		t.Error("--ruleset events with ovs: no error")
	}
	if _, err := parseFwdFlags([]string{"--ruleset", "events:10", "--targets", "gswitchd-cpu,gswitchd-gpu,plain", "--pairs", "2"}, new(strings.Builder)); err != nil {
		t.Error(err)
	}
}
