package filter

import (
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestOracleDiff prints the packets on which this package and tcpdump
// disagree, for GSWITCH_FILTER_DIFF="FILE-KIND|EXPR" (a debugging aid).
func TestOracleDiff(t *testing.T) {
	spec := os.Getenv("GSWITCH_FILTER_DIFF")
	if spec == "" {
		t.Skip("set GSWITCH_FILTER_DIFF=kind|expr")
	}
	var kind, expr string
	for i := range spec {
		if spec[i] == '|' {
			kind, expr = spec[:i], spec[i+1:]
			break
		}
	}
	dir := t.TempDir()
	for _, lf := range rewrap(ethernetCorpus()) {
		if lf.name != kind {
			continue
		}
		in := filepath.Join(dir, "in.pcap")
		out := filepath.Join(dir, "out.pcap")
		if err := writePcap(in, lf.link, lf.bigEndian, lf.pkts); err != nil {
			t.Fatal(err)
		}
		if b, err := exec.Command("tcpdump", "-r", in, "-w", out, "--", expr).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, b)
		}
		b, _ := os.ReadFile(out)
		theirs := map[int]bool{}
		for off := 24; off+16 <= len(b); {
			sec := binary.LittleEndian.Uint32(b[off:])
			n := binary.LittleEndian.Uint32(b[off+8:])
			theirs[int(sec-1700000000)] = true
			off += 16 + int(n)
		}
		prog, err := CompileOne(expr, lf.link, lf.bigEndian, nil)
		if err != nil {
			t.Fatal(err)
		}
		ev := NewEvaluator(prog)
		for i, p := range lf.pkts {
			ours := ev.Match(p.data, p.wire)
			if ours != theirs[i] {
				t.Errorf("packet %d (captured %d, wire %d): tcpdump %v, ours %v\n%s", i, len(p.data), p.wire, theirs[i], ours, hex.Dump(p.data))
			}
		}
		for i, c := range prog.Criteria {
			t.Logf("criterion %d: %s", i, c.String())
		}
		g := prog.cfgs[0]
		t.Logf("cfg root %d pre %v", g.root, g.pre)
		for i, n := range g.nodes {
			t.Logf("node %d: crit %d jt %d jf %d", i, n.crit, n.jt, n.jf)
		}
	}
}
