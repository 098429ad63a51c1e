package filter

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzCompile: any expression either compiles or returns a one-line error
// naming the filter and a position; it never panics. A compiled program
// evaluates any bytes without panicking.
func FuzzCompile(f *testing.F) {
	for _, e := range oracleExprs {
		f.Add(e, uint16(LinkEthernet))
	}
	for _, e := range randomPrims {
		f.Add(e, uint16(LinkLinuxSLL))
	}
	f.Fuzz(func(t *testing.T, expr string, link uint16) {
		links := []uint32{LinkEthernet, LinkRaw, LinkLinuxSLL, LinkLinuxSLL2, LinkNull, LinkLoop, LinkIPv4, LinkIPv6}
		l := links[int(link)%len(links)]
		p, err := CompileOne(expr, l, link&0x100 != 0, nil)
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "filter f: ") {
				t.Fatalf("error %q: want one line naming the filter", msg)
			}
			return
		}
		ev := NewEvaluator(p)
		pkt := []byte(expr)
		for n := 0; n <= len(pkt); n += 7 {
			ev.Match(pkt[:n], uint32(len(pkt)))
		}
	})
}

// FuzzEval evaluates a fixed set of filters (every criterion kind:
// constant and variable offsets, IPv4 header lengths, arithmetic with
// division, VLAN and MPLS shifts) on arbitrary packets and checks the
// multi-filter result against each filter compiled alone.
func FuzzEval(f *testing.F) {
	for _, p := range ethernetCorpus()[:80] {
		f.Add(p.data, p.wire)
	}
	exprs := []string{"tcp port 80", "not udp port 53", "tcp[((tcp[12] & 0xf0) >> 2)] = 0x47",
		"ip[8] / (ip[9] - 6) = 5", "ip[0] << (ip[1] & 0x3f) = 0", "tcp[0:4] >> ip[8] = 0", "vlan 100 and host 10.0.0.1", "mpls and mpls 2000 and udp",
		"ether[len - 1] = 0", "icmp6[0] = 128 or ip6 proto 44", "tcp[100] = 1 or tcp", "portrange 50-100",
		"not (host 10.0.0.1 and port 80)", "ip[0] & 0xf > 5", "greater 60 and less 100", "arp or rarp"}
	var specs []Spec
	for i, e := range exprs {
		specs = append(specs, Spec{Name: "f" + strconv.Itoa(i), Expr: e})
	}
	all, err := Compile(specs, LinkEthernet, false, nil)
	if err != nil {
		f.Fatal(err)
	}
	var singles []*Evaluator
	for _, s := range specs {
		p, err := CompileOne(s.Expr, LinkEthernet, false, nil)
		if err != nil {
			f.Fatal(err)
		}
		singles = append(singles, NewEvaluator(p))
	}
	ev := NewEvaluator(all)
	out := make([]uint64, all.Words())
	stages := make([]uint64, all.Words())
	words := make([]uint64, all.Words())
	le, err := NewLayoutEvaluator(all.Layout())
	if err != nil {
		f.Fatal(err)
	}
	big, err := Compile(benchSpecs(200), LinkEthernet, false, nil)
	if err != nil {
		f.Fatal(err)
	}
	bigEv := NewEvaluator(big)
	bigA, bigB := make([]uint64, big.Words()), make([]uint64, big.Words())
	f.Fuzz(func(t *testing.T, data []byte, wire uint32) {
		// A large set: the CPU path's index must skip only rejecting filters.
		bigEv.Eval(data, wire, bigA)
		bigEv.EvalStages(data, wire, bigB)
		for w := range bigA {
			if bigA[w] != bigB[w] {
				t.Fatalf("200 filters, word %d: indexed %x, three stages %x", w, bigA[w], bigB[w])
			}
		}
		ev.Eval(data, wire, out)
		ev.EvalStages(data, wire, stages)
		le.Eval(data, wire, words)
		if words[0] != stages[0] {
			t.Fatalf("layout interpreter %b, three stages %b", words[0], stages[0])
		}
		for i, s := range singles {
			if got, want := out[0]>>i&1 == 1, s.Match(data, wire); got != want {
				t.Fatalf("filter %q: in the set %v, alone %v", exprs[i], got, want)
			}
			if got, want := stages[0]>>i&1 == 1, out[0]>>i&1 == 1; got != want {
				t.Fatalf("filter %q: three stages %v, control flow %v", exprs[i], got, want)
			}
		}
	})
}

// TestWriteFuzzCorpus rewrites testdata/fuzz with a small committed seed
// corpus (GSWITCH_WRITE_CORPUS=1).
func TestWriteFuzzCorpus(t *testing.T) {
	if os.Getenv("GSWITCH_WRITE_CORPUS") == "" {
		t.Skip("set GSWITCH_WRITE_CORPUS=1 to rewrite the committed seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzCompile")
	os.MkdirAll(dir, 0o755)
	for i, e := range []string{"tcp port 80 and host 10.0.0.1", "vlan 100 or mpls 5", "tcp[tcpflags] & tcp-syn != 0",
		"host 10.0.0.1 or 10.0.0.2", "ip6 net 2001:db8::/32", "ether[0:4] % 3 ^ 2 = 1", "(", "port 70000"} {
		c := "go test fuzz v1\nstring(" + strconv.Quote(e) + ")\nuint16(" + strconv.Itoa(i*37) + ")\n"
		os.WriteFile(filepath.Join(dir, "seed"+strconv.Itoa(i)), []byte(c), 0o644)
	}
	dir = filepath.Join("testdata", "fuzz", "FuzzEval")
	os.MkdirAll(dir, 0o755)
	for i, p := range ethernetCorpus()[:6] {
		c := "go test fuzz v1\n[]byte(" + strconv.Quote(string(p.data[:min(len(p.data), 40+i*10)])) + ")\nuint32(" + strconv.Itoa(int(p.wire)) + ")\n"
		os.WriteFile(filepath.Join(dir, "seed"+strconv.Itoa(i)), []byte(c), 0o644)
	}
}
