package forward

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gswitch/gswitch/controlproto/openflow"
	"github.com/gswitch/gswitch/datapath/afpacket"
	"github.com/gswitch/gswitch/datapath/packet"
	"github.com/gswitch/gswitch/datapath/pipeline"
	"github.com/gswitch/gswitch/gpu"
	"github.com/gswitch/gswitch/tables/flow"
)

// recDev is a pipeline port that counts the frames sent through it.
type recDev struct {
	mu   sync.Mutex
	sent int
}

func (d *recDev) Send(frames [][]byte) (int, error) {
	d.mu.Lock()
	d.sent += len(frames)
	d.mu.Unlock()
	return len(frames), nil
}

func (d *recDev) Link() afpacket.LinkInfo {
	return afpacket.LinkInfo{Name: "rec", AdminUp: true, OperUp: true, MAC: net.HardwareAddr{2, 0, 0, 0, 0, 9}}
}

func (d *recDev) Stats() (afpacket.Stats, error) { return afpacket.Stats{}, nil }

func (d *recDev) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.sent
}

// variants returns fr and frames next to it: for TCP and UDP, its source
// and destination ports one up and one down, and for TCP its SYN and ACK
// flags flipped (frames at the edges of the rules' ranges and flag masks).
func variants(fr []byte) [][]byte {
	out := [][]byte{fr}
	if binary.BigEndian.Uint16(fr[12:]) != 0x0800 || fr[14]>>4 != 4 {
		return out
	}
	l4 := 14 + int(fr[14]&15)*4
	proto := fr[14+9]
	if proto != flow.IPProtoTCP && proto != flow.IPProtoUDP {
		return out
	}
	edit := func(f func(c []byte)) {
		c := append([]byte(nil), fr...)
		f(c)
		out = append(out, c)
	}
	for _, off := range []int{l4, l4 + 2} {
		for _, d := range []int{1, -1} {
			edit(func(c []byte) { binary.BigEndian.PutUint16(c[off:], uint16(int(binary.BigEndian.Uint16(c[off:]))+d)) })
		}
	}
	if proto == flow.IPProtoTCP {
		edit(func(c []byte) { c[l4+13] ^= 0x02 })
		edit(func(c []byte) { c[l4+13] ^= 0x10 })
	}
	return out
}

// TestRulesetFidelity: the rules gswitchd gets are the rule set. A
// ClassBench set with port ranges (masked port entries) and TCP flags is
// loaded as bench forward loads it, its FLOW_MODs are decoded by the
// switch's OpenFlow codec and installed in a pipeline.Switch, and frames
// drawn inside the rules (and at the edges of their ranges and flags) meet
// the same fate in the pipeline as a tuple-space table of the original
// ClassBench rules gives them: forwarded to port 2, or dropped (by a rule
// or a miss).
func TestRulesetFidelity(t *testing.T) {
	for _, file := range []string{"testdata/ranges_flags.cb", acl1} {
		t.Run(file, func(t *testing.T) {
			// The original rules, read apart from the bench.
			fh, err := os.Open(file)
			if err != nil {
				t.Fatal(err)
			}
			cb, err := flow.ReadClassBench(fh, file)
			fh.Close()
			if err != nil {
				t.Fatal(err)
			}
			orig, err := flow.ExpandClassBench(cb)
			if err != nil {
				t.Fatal(err)
			}
			ranges, flags := 0, 0
			for i := range orig {
				_, ms := orig[i].Match.GetUint(flow.FieldTCPSrc) // tcp, udp: the same key bits
				_, md := orig[i].Match.GetUint(flow.FieldTCPDst)
				if ms != 0 && ms != 0xffff || md != 0 && md != 0xffff {
					ranges++
				}
				if orig[i].Match.Has(flow.FieldTCPFlags) {
					flags++
				}
			}
			if ranges == 0 || flags == 0 {
				t.Fatalf("%s: %d masked-port entries, %d with tcp_flags: the test needs both", file, ranges, flags)
			}
			rs, err := loadRuleset("classbench:"+file, 1, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs.rules) != len(orig) {
				t.Fatalf("the bench has %d rules, the set %d", len(rs.rules), len(orig))
			}
			oracle, err := flow.NewTable(flow.Config{Algo: flow.Tuple, MaxEntries: len(orig) + 16, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			id2rule := map[flow.RuleID]int{}
			for i := range orig {
				id, _, err := oracle.Add(orig[i], 0)
				if err != nil {
					t.Fatal(err)
				}
				id2rule[id] = i
			}

			// gswitchd's side: the FLOW_MODs through the codec into a switch.
			eng, err := gpu.Open("cpu", nil, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer eng.Close()
			sw, err := pipeline.New(pipeline.Config{DatapathID: 1, Tables: 2, Classifier: eng, Algo: flow.Merge})
			if err != nil {
				t.Fatal(err)
			}
			out := &recDev{}
			if err := sw.AddPort(1, &recDev{}); err != nil {
				t.Fatal(err)
			}
			if err := sw.AddPort(2, out); err != nil {
				t.Fatal(err)
			}
			for i, m := range rs.flowMods(1, 1) {
				fm, oerr := openflow.DecodeFlowMod(m)
				if oerr != nil {
					t.Fatalf("FLOW_MOD %d: the codec refuses it: %v", i, oerr)
				}
				if i < len(orig) && (fm.Match != orig[i].Match || fm.Priority != orig[i].Priority) {
					t.Fatalf("rule %d: installed %s priority %d, the set has %s priority %d", i, fm.Match.String(), fm.Priority, orig[i].Match.String(), orig[i].Priority)
				}
				if err := sw.FlowMod(fm); err != nil {
					t.Fatalf("FLOW_MOD %d (%s): %v", i, fm.Match.String(), err)
				}
			}

			sets, err := ruleSetFrames(rs, 1, 1024)
			if err != nil {
				t.Fatal(err)
			}
			var frames, fwd, hitFlags, hitRange int
			for _, tmpl := range sets[0].tmpl {
				for _, fr := range variants(tmpl) {
					var key flow.Key
					if why := packet.Parse(&key, fr, 1); why != packet.OK {
						t.Fatalf("parse: %v", why)
					}
					want := false
					if id, ok := oracle.Lookup(&key); ok {
						ri := id2rule[id]
						want = !rs.drop[ri]
						if orig[ri].Match.Has(flow.FieldTCPFlags) {
							hitFlags++
						}
						if _, m := orig[ri].Match.GetUint(flow.FieldTCPDst); m != 0 && m != 0xffff {
							hitRange++
						}
					}
					before := out.count()
					sw.Process(1, [][]byte{append([]byte(nil), fr...)})
					got := out.count() > before
					if got != want {
						id, _ := oracle.Lookup(&key)
						t.Fatalf("frame %s: the pipeline forwards it: %v; the original rules (rule %d) say %v", key.String(), got, id, want)
					}
					frames++
					if want {
						fwd++
					}
				}
			}
			if fwd == 0 || fwd == frames || hitFlags == 0 || hitRange == 0 {
				t.Errorf("%d frames, %d forwarded, %d hit a tcp_flags rule, %d a masked-port rule: want some of each", frames, fwd, hitFlags, hitRange)
			}
			t.Logf("%s: %d rules (%d masked-port, %d tcp_flags); %d frames, %d forwarded, %d hit a tcp_flags rule, %d a masked tcp_dst rule",
				file, len(orig), ranges, flags, frames, fwd, hitFlags, hitRange)
		})
	}
}

// TestRulesetOVSFile: Open vSwitch takes the ovs-ofctl file of a set with
// masked ports and tcp_flags as OpenFlow 1.3 flows (ovs-ofctl parse-flows,
// Debian package openvswitch-common).
func TestRulesetOVSFile(t *testing.T) {
	if _, err := exec.LookPath("ovs-ofctl"); err != nil {
		t.Fatalf("ovs-ofctl not found (%v): install the Debian package openvswitch-common", err)
	}
	rs, err := loadRuleset("classbench:testdata/ranges_flags.cb", 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	text, err := rs.ovsFile()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "flows")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ovs-ofctl", "-O", "OpenFlow13", "parse-flows", path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "chosen protocol: OXM-OpenFlow13") {
		t.Fatalf("ovs-ofctl parse-flows: %v\n%s\n%s", err, out, text)
	}
	for _, want := range []string{"tp_dst=0x400/0xfc00,tcp_flags=+syn-ack", "tp_src=0x1770/0xfff0,tp_dst=80,tcp_flags=-[200]", "tcp_flags=+ack"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	// The rule wanting flag bit 12 (no frame has it) is the one left out.
	if n, want := strings.Count(string(out), "OFPT_FLOW_MOD"), len(rs.rules)-1+1; n != want {
		t.Errorf("%d flows, want %d (%d rules, one never matching, and table 1's)", n, want, len(rs.rules))
	}
}
