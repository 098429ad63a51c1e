package forward

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/gswitch/gswitch/bench/benchutil"
	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/datapath/packet"
	"github.com/gswitch/gswitch/tables/flow"
	"github.com/gswitch/gswitch/tables/rule"
)

const acl1 = "../../../shared/data/classbench/acl1_20000.txt"

func TestRulesetFlags(t *testing.T) {
	f, err := parseFwdFlags([]string{"--ruleset", "synthetic:1000,20", "--targets", "plain,gswitchd-cpu,gswitchd-gpu", "--pairs", "8", "--rules", "1", "--flows", "1024", "--check", "--switch-cpus", "0-3"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if f.trivial() || f.flows != 1024 || !f.check || f.switchCPUs != "0-3" || len(f.targets) != 3 {
		t.Errorf("%+v", f)
	}
	for _, bad := range [][]string{
		{"--ruleset", "acl"}, {"--ruleset", "synthetic:5"}, {"--ruleset", "classbench:"}, {"--ruleset", "trivial:3"},
		{"--flows", "1000"}, {"--flows", "0"}, {"--switch-cpus", "0-3; rm"}, {"--targets", "gswitchd-tpu"},
	} {
		if _, err := parseFwdFlags(bad, &bytes.Buffer{}); !errors.Is(err, benchutil.ErrUsage) {
			t.Errorf("%v: err %v, want a usage error", bad, err)
		}
	}
}

// TestRuleFrames checks the rule-set traffic against a scan of every rule:
// each template's verdict is its best rule's instruction, the frame is 60
// bytes, its mark is found where the sink looks, and the pairs' frames
// only hit rules their port can match.
func TestRuleFrames(t *testing.T) {
	for _, spec := range []string{"synthetic:2000,64", "classbench:" + acl1} {
		t.Run(spec, func(t *testing.T) {
			const pairs, n = 3, 512
			rs, err := loadRuleset(spec, pairs, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			sets, err := ruleSetFrames(rs, pairs, n)
			if err != nil {
				t.Fatal(err)
			}
			var fwd, matched int
			for k, fs := range sets {
				for i, fr := range fs.tmpl {
					if len(fr) != frameLen {
						t.Fatalf("pair %d frame %d: %d bytes", k, i, len(fr))
					}
					var key flow.Key
					if why := packet.Parse(&key, fr, uint32(2*k+1)); why != packet.OK {
						t.Fatalf("parse: %v", why)
					}
					id := flow.BruteForce(rs.rules, &key)
					want := id != flow.NoMatch && !rs.drop[id]
					if id != flow.NoMatch {
						matched++
						if in, mask := rs.rules[id].Match.GetUint(flow.FieldInPort); mask != 0 && in != uint64(2*k+1) {
							t.Fatalf("pair %d frame %d matches rule %d of in_port %d", k, i, id, in)
						}
					}
					if fs.fwd[i] != want {
						t.Fatalf("pair %d frame %d (%s): verdict %v, the scan says rule %d → %v", k, i, key.String(), fs.fwd[i], id, want)
					}
					if want {
						fwd++
					}
					c := append([]byte(nil), fr...)
					fs.stamp(c, i, 77, 1<<32+uint64(i))
					if st, seq, ok := markOf(c); !ok || st != 77 || seq != uint32(i) {
						t.Fatalf("frame %d: mark %v %d %d", i, ok, st, seq)
					}
					var key2 flow.Key
					packet.Parse(&key2, c, uint32(2*k+1))
					if key2 != key {
						t.Fatalf("frame %d: the mark changed the key:\n%s\n%s", i, key.String(), key2.String())
					}
				}
				if fs.expected(uint64(3*n+5)) != 3*fs.fwdUpTo[n]+fs.fwdUpTo[5] {
					t.Error("expected")
				}
			}
			// Frames are drawn inside rules: nearly all match one, and
			// about 7 in 8 rules forward.
			if total := pairs * n; matched < total*9/10 || fwd < total/2 || fwd == total {
				t.Errorf("%d of %d frames matched a rule, %d forwarded", matched, total, fwd)
			}
		})
	}
}

func TestRulesetFlowModsAndOVS(t *testing.T) {
	rs, err := loadRuleset("synthetic:300,30", 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	msgs := rs.flowMods(2, 1)
	if len(msgs) != len(rs.rules)+2 {
		t.Fatalf("%d FLOW_MODs", len(msgs))
	}
	for i, m := range msgs {
		fm, oerr := openflow.DecodeFlowMod(m)
		if oerr != nil {
			t.Fatalf("FLOW_MOD %d: %v", i, oerr)
		}
		if i < len(rs.rules) {
			goTo := fm.Instructions.Has&rule.HasGotoTable != 0 && fm.Instructions.GotoTable == 1
			if fm.TableID != 0 || fm.Match != rs.rules[i].Match || goTo == rs.drop[i] {
				t.Fatalf("rule %d: %+v", i, fm)
			}
			continue
		}
		k := i - len(rs.rules)
		if in, _ := fm.Match.GetUint(flow.FieldInPort); fm.TableID != 1 || in != uint64(2*k+1) || fm.Instructions.Apply[0].Port != uint32(2*k+2) {
			t.Errorf("table 1 rule %d: %+v", k, fm)
		}
	}
	rs1, err := loadRuleset("synthetic:300,30", 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	text, err := rs1.ovsFile()
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) != len(rs1.rules)+1 || !strings.HasPrefix(lines[len(lines)-1], "table=1,") {
		t.Fatalf("%d lines for %d rules; last %q", len(lines), len(rs1.rules), lines[len(lines)-1])
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "table=0,priority=") || !(strings.HasSuffix(l, ",actions=goto_table:1") || strings.HasSuffix(l, ",actions=drop")) {
			t.Fatalf("line %q", l)
		}
		if strings.Contains(l, "in_port=") && !strings.Contains(l, "in_port=1,") {
			t.Fatalf("line %q: a port other than 1", l)
		}
	}
	var m flow.Match
	m.SetEthType(0x0800)
	m.SetIPProto(6)
	_ = m.SetIPv4Src(0x0a000000, 8)
	_ = m.SetL4Dst(80, 0xfff0)
	_ = m.SetVlanVID(flow.VIDPresent|5, 0x1fff)
	_ = m.SetTCPFlags(0x002, 0x1012)
	got, err := ovsMatch(&m)
	if want := ",dl_type=0x800,vlan_tci=0x1005/0x1fff,nw_proto=0x6,nw_src=10.0.0.0/255.0.0.0,tp_dst=0x50/0xfff0,tcp_flags=0x2/0x12"; err != nil || got != want {
		t.Errorf("ovsMatch %q %v, want %q", got, err, want)
	}
	_ = m.SetTCPFlags(0x1000, 0x1000)
	if _, err := ovsMatch(&m); !errors.Is(err, errNeverMatches) {
		t.Errorf("flag bit 12: %v", err)
	}
}

// TestRulesetOverOpenFlow: what the FLOW_MODs carry is the rule set itself
// (a field the OpenFlow 1.3 codec leaves out would make the switch's rules
// differ from the oracle's).
func TestRulesetOverOpenFlow(t *testing.T) {
	for _, spec := range []string{"synthetic:2000,64", "classbench:" + acl1} {
		rs, err := loadRuleset(spec, 2, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		for i, m := range rs.flowMods(2, 1)[:len(rs.rules)] {
			fm, oerr := openflow.DecodeFlowMod(m)
			if oerr != nil || fm.Match != rs.rules[i].Match || fm.Priority != rs.rules[i].Priority {
				t.Fatalf("%s rule %d: %v: sent %s, decoded %s", spec, i, oerr, rs.rules[i].Match.String(), fm.Match.String())
			}
		}
	}
}

// TestSameFrame: a received frame is its template as sent whatever its
// mark; a lost VLAN tag, another byte or another length is not.
func TestSameFrame(t *testing.T) {
	tmpl := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0, 5, 0x08, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0xaa}
	got := slices.Clone(tmpl)
	copy(got[18:], []byte{9, 9, 9, 9, 9, 9, 9, 9}) // the mark
	if !sameFrame(got, tmpl, 18) {
		t.Error("the same frame with its mark: not the same")
	}
	untagged := append(slices.Clone(got[:12]), got[16:]...)
	for _, bad := range [][]byte{untagged, append(slices.Clone(got), 0), got[:len(got)-1], append(slices.Clone(got[:26]), 0xab)} {
		if sameFrame(bad, tmpl, 18) {
			t.Errorf("% x: the same as % x", bad, tmpl)
		}
	}
	if sameFrame(got, tmpl, len(tmpl)-4) {
		t.Error("a mark past the end")
	}
}
