package filter

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// runBPF is the reference interpreter: libpcap's bpf_filter.c on a
// program, reporting accept (a non-zero return).
func runBPF(prog []BPFInsn, data []byte, wire uint32) bool {
	var a, x uint32
	var m [16]uint32
	ld := func(k uint32, size uint32) (uint32, bool) {
		if k > uint32(len(data)) || size > uint32(len(data))-k {
			return 0, false
		}
		v, _ := load(data, uint64(k), uint8(size))
		return v, true
	}
	sizes := map[uint16]uint32{bpfW: 4, bpfH: 2, bpfB: 1}
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		var ok bool
		switch in.Code {
		case 0x20, 0x28, 0x30:
			if a, ok = ld(in.K, sizes[in.Code&0x18]); !ok {
				return false
			}
		case 0x40, 0x48, 0x50:
			if a, ok = ld(x+in.K, sizes[in.Code&0x18]); !ok {
				return false
			}
		case 0xb1:
			var b uint32
			if b, ok = ld(in.K, 1); !ok {
				return false
			}
			x = (b & 0xf) << 2
		case 0x00:
			a = in.K
		case 0x01:
			x = in.K
		case 0x80:
			a = wire
		case 0x81:
			x = wire
		case 0x60:
			a = m[in.K]
		case 0x61:
			x = m[in.K]
		case 0x02:
			m[in.K] = a
		case 0x03:
			m[in.K] = x
		case 0x06:
			return in.K != 0
		case 0x16:
			return a != 0
		case 0x07:
			x = a
		case 0x87:
			a = x
		case 0x05:
			pc += int(in.K)
		case 0x84:
			a = -a
		default:
			b := in.K
			if in.Code&bpfX != 0 {
				b = x
			}
			if in.Code&0x07 == bpfJMP {
				var t bool
				switch in.Code & 0xf0 {
				case bpfJEQ:
					t = a == b
				case bpfJGT:
					t = a > b
				case bpfJGE:
					t = a >= b
				case bpfJSET:
					t = a&b != 0
				}
				if t {
					pc += int(in.Jt)
				} else {
					pc += int(in.Jf)
				}
				continue
			}
			var ok bool
			if a, ok = alu(bpfALUOps[in.Code&0xf0], a, b); !ok {
				return false
			}
		}
	}
	return false
}

// tcpdumpProgram returns tcpdump -ddd's program for expr on file's link
// type, one line (instructions separated by commas), or ok false when
// tcpdump rejects the expression.
func tcpdumpProgram(file, expr string) (string, bool) {
	out, err := exec.Command("tcpdump", "-ddd", "-r", file, "--", expr).Output()
	if err != nil {
		return "", false
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", ",")), " "), true
}

// checkLifted compiles the program and checks, packet by packet, that
// the lifted filter answers as the reference interpreter, in every form
// (control flow, three stages, device layout), alone and in a set with
// extra (whose answers must not change either).
func checkLifted(t *testing.T, what, text string, link uint32, pkts []testPacket, extra []Spec) []int {
	t.Helper()
	insns, err := ParseBPF(text)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var ok []Spec
	for _, s := range extra {
		if _, err := CompileOne(s.Expr, link, false, nil); err == nil {
			ok = append(ok, s) // the extra filters that this link type supports
		}
	}
	extra = ok
	specs := append([]Spec{{Name: "bpf", Expr: BPFPrefix + text}}, extra...)
	prog, err := Compile(specs, link, false, nil)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var alone []*Evaluator
	for _, s := range extra {
		p, err := CompileOne(s.Expr, link, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		alone = append(alone, NewEvaluator(p))
	}
	ev := NewEvaluator(prog)
	le, err := NewLayoutEvaluator(prog.Layout())
	if err != nil {
		t.Fatal(err)
	}
	out, st, lw := make([]uint64, prog.Words()), make([]uint64, prog.Words()), make([]uint64, prog.Words())
	var matches []int
	for i, p := range pkts {
		want := runBPF(insns, p.data, p.wire)
		ev.Eval(p.data, p.wire, out)
		ev.EvalStages(p.data, p.wire, st)
		le.Eval(p.data, p.wire, lw)
		if got := out[0]&1 == 1; got != want {
			t.Fatalf("%s: packet %d (%d bytes): lifted %v, BPF %v", what, i, len(p.data), got, want)
		}
		if st[0] != out[0] || lw[0] != out[0] {
			t.Fatalf("%s: packet %d: control flow %b, three stages %b, layout %b", what, i, out[0], st[0], lw[0])
		}
		for j, a := range alone {
			if got := out[0]>>(j+1)&1 == 1; got != a.Match(p.data, p.wire) {
				t.Fatalf("%s: packet %d: %q in the set with the program %v, alone %v", what, i, extra[j].Expr, got, !got)
			}
		}
		if want {
			matches = append(matches, i)
		}
	}
	return matches
}

// TestBPFLiftedEqualsTcpdump lifts tcpdump -ddd's program of every
// oracle expression on every generated capture's link type and checks it
// packet by packet against the reference interpreter, the expression's
// compiled filter (which the oracle tests hold equal to tcpdump's) and,
// on the generated Ethernet capture, the packets tcpdump writes.
func TestBPFLiftedEqualsTcpdump(t *testing.T) {
	requireTcpdump(t)
	dir := t.TempDir()
	files := rewrap(ethernetCorpus())
	for i := range files {
		files[i].name = filepath.Join(dir, files[i].name+".pcap")
		if err := writePcap(files[i].name, files[i].link, files[i].bigEndian, files[i].pkts); err != nil {
			t.Fatal(err)
		}
	}
	paths, _ := filepath.Glob(filepath.Join("testdata", "captures", "*.pcap"))
	for _, p := range paths {
		lf, err := readPcap(p)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, lf)
	}
	extra := []Spec{{Name: "x1", Expr: "tcp port 80"}, {Name: "x2", Expr: "not udp"}, {Name: "x3", Expr: "vlan and ip"}}
	// tcpdump -ddd's program depends on the link type only: one per link
	// type, checked on every capture of it.
	type linkKey struct {
		link uint32
		be   bool
	}
	byLink := map[linkKey][]linkFile{}
	var keys []linkKey
	for _, lf := range files {
		k := linkKey{lf.link, lf.bigEndian}
		if byLink[k] == nil {
			keys = append(keys, k)
		}
		byLink[k] = append(byLink[k], lf)
	}
	var mu sync.Mutex
	lifted, direct := 0, 0
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for _, k := range keys {
		lfs := byLink[k]
		for ei, e := range oracleExprs {
			if (testing.Short() || raceEnabled) && ei%5 != 0 {
				continue
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				text, ok := tcpdumpProgram(lfs[0].name, e)
				if !ok {
					return
				}
				for fi, lf := range lfs {
					what := fmt.Sprintf("%s %q", filepath.Base(lf.name), e)
					got := checkLifted(t, what, text, lf.link, lf.pkts, extra)
					want, err := ourMatches(e, lf)
					if err != nil {
						t.Errorf("%s: %v", what, err)
						return
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("%s: lifted program matches %v, the expression %v", what, got, want)
					}
					mu.Lock()
					lifted++
					mu.Unlock()
					if fi > 0 || k.link != LinkEthernet {
						continue
					}
					// On the generated Ethernet capture, tcpdump itself.
					theirs, _, _ := tcpdumpPackets(t, lf.name, e)
					if len(theirs) != len(got) || !samePacketList(lf.pkts, got, theirs) {
						t.Errorf("%s: lifted program matches %d packets, tcpdump writes %d", what, len(got), len(theirs))
					}
					mu.Lock()
					direct++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("%d tcpdump -ddd programs lifted and checked (%d also against tcpdump -w)", lifted, direct)
}

// bpfHand is a set of programs tcpdump does not write: scratch memory,
// indirect loads, ALU on loaded values, ret a, dead loads, ja.
var bpfHand = []string{
	// ldh [12]; ldb [200] (dead: still rejects short packets); ldh [12]; jeq 0x800
	"6,40 0 0 12,48 0 0 200,40 0 0 12,21 0 1 2048,6 0 0 65535,6 0 0 0",
	// A = [14]&0xf; A *= 4; X = A; ldb [x+14+9] == 6 (IPv4 protocol through a computed offset)
	"9,48 0 0 14,84 0 0 15,36 0 0 4,7 0 0 0,80 0 0 9,21 0 1 6,6 0 0 1,6 0 0 0,6 0 0 0",
	// ret a: the low byte of the ether type
	"2,48 0 0 13,22 0 0 0",
	// st/ld scratch: M[3] = [12:2]; A = len; X = M[3]; A > X?
	"7,40 0 0 12,2 0 0 3,128 0 0 0,97 0 0 3,45 0 1 0,6 0 0 1,6 0 0 0",
	// division by X ([15], zero on most IPv4 packets: rejects), kept dead
	"6,48 0 0 15,7 0 0 0,0 0 0 100,60 0 0 0,6 0 0 1,6 0 0 0",
	// the same division tested: A/X > 10
	"7,48 0 0 15,7 0 0 0,0 0 0 100,60 0 0 0,37 0 1 10,6 0 0 1,6 0 0 0",
	// ja over a reject; msh then transport port through ldh [x+14]
	"7,5 0 0 1,6 0 0 0,177 0 0 14,72 0 0 16,21 0 1 80,6 0 0 1,6 0 0 0",
	// jset with X, neg, mod, xor, rsh by X
	"10,48 0 0 23,7 0 0 0,48 0 0 14,132 0 0 0,156 0 0 0,172 0 0 0,124 0 0 0,77 0 1 0,6 0 0 1,6 0 0 0",
	// join with A equal on both paths (same load), then used
	"6,40 0 0 12,21 1 0 2048,21 0 2 34525,69 0 1 1,6 0 0 1,6 0 0 0",
	// ldx len; txa; jge #100; ret a
	"5,129 0 0 0,135 0 0 0,53 0 1 100,22 0 0 0,6 0 0 0",
	// A differs by path at the join (instruction 3), then tested and returned
	"5,40 0 0 12,21 0 1 2048,48 0 0 23,21 0 0 0,22 0 0 0",
	// X + k wraps past 2^32 to 12: ldb [x + 13] reads byte 12
	"3,1 0 0 4294967295,80 0 0 13,22 0 0 0",
	"1,6 0 0 0", "1,6 0 0 1",
}

// TestBPFHandPrograms checks bpfHand's programs against the reference
// interpreter.
func TestBPFHandPrograms(t *testing.T) {
	pkts := ethernetCorpus()
	for _, r := range rewrap(pkts)[1:4] {
		pkts = append(pkts, r.pkts...)
	}
	for _, text := range bpfHand {
		if _, err := ParseBPF(text); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if _, err := CompileOne(BPFPrefix+text, LinkEthernet, false, nil); err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		checkLifted(t, text, text, LinkEthernet, pkts, []Spec{{Name: "t", Expr: "tcp port 80"}})
	}
}

// TestBPFRejections: what cannot be lifted is rejected with one line
// naming the filter and the position.
func TestBPFRejections(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"", "position 4: empty BPF program"},
		{"2,6 0 0 1", "2, but 1 instructions follow"},
		{"1,6 0 1", "position 6: instruction 0: want \"code jt jf k\""},
		{"1,6 0 0 x", "k \"x\""},
		{"1,6 0 300 0", "jf \"300\""},
		{"1,40 0 0 12", "position 6: instruction 0: the program runs past its last instruction"},
		{"2,21 0 5 1,6 0 0 1", "instruction 0: jump past the end"},
		{"2,5 0 0 9,6 0 0 1", "instruction 0: jump past the end"},
		{"2,255 0 0 0,6 0 0 1", "unknown opcode 0xff"},
		{"2,56 0 0 0,6 0 0 1", "unknown load opcode 0x38"},
		{"2,52 0 0 0,6 0 0 1", "division by the constant 0"},
		{"2,100 0 0 32,6 0 0 1", "shift by 32"},
		{"2,96 0 0 3,22 0 0 0", "M[3] read before it is written"},
		{"2,96 0 0 16,22 0 0 0", "M[16] out of range"},
		{"@/etc/filter.bpf", "the file is read by"},
		{"0", "instruction count 0"},
	} {
		_, err := CompileOne(BPFPrefix+c.text, LinkEthernet, false, nil)
		if err == nil {
			t.Errorf("%q: compiled", c.text)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "filter f: position ") || strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
			t.Errorf("%q: error %q, want one line naming the filter and a position, with %q", c.text, msg, c.want)
		}
	}
	// Scratch words set differently on each side of 16 diamonds: 2^16
	// register states, past maxBPFStates.
	var dm []string
	for j := 0; j < 16; j++ {
		dm = append(dm, fmt.Sprintf("48 0 0 %d", j), "69 0 2 1", fmt.Sprintf("48 0 0 %d", 100+j), "5 0 0 1", fmt.Sprintf("48 0 0 %d", 200+j), fmt.Sprintf("2 0 0 %d", j))
	}
	dm = append(dm, "6 0 0 1")
	if _, err := CompileOne(BPFPrefix+strconv.Itoa(len(dm))+","+strings.Join(dm, ","), LinkEthernet, false, nil); err == nil || !strings.Contains(err.Error(), "too many paths") {
		t.Errorf("diamonds: %v", err)
	}
	// A register whose expression would grow without bound.
	var sb strings.Builder
	sb.WriteString("42,48 0 0 14")
	for i := 0; i < 20; i++ {
		sb.WriteString(",7 0 0 0,12 0 0 0")
	}
	sb.WriteString(",22 0 0 0")
	if _, err := CompileOne(BPFPrefix+sb.String(), LinkEthernet, false, nil); err == nil || !strings.Contains(err.Error(), "expression of more than") {
		t.Errorf("doubling program: %v", err)
	}
}

// TestBPFTextForms: tcpdump -ddd's lines and the one-line comma form are
// the same program.
func TestBPFTextForms(t *testing.T) {
	a, err := ParseBPF("4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ParseBPF(" 4, 40 0 0 12 ,21 0 1 2048;6 0 0 262144,6 0 0 0")
	if err != nil {
		t.Fatal(err)
	}
	for i := range a {
		a[i].pos, b[i].pos = 0, 0
	}
	if fmt.Sprint(a) != fmt.Sprint(b) || len(a) != 4 || a[1].K != 2048 {
		t.Fatalf("%v != %v", a, b)
	}
}

// FuzzBPF: any program text either lifts or is rejected with one line
// naming the filter and a position; a lifted program answers every packet
// as the reference interpreter does, in the set and in every form.
func FuzzBPF(f *testing.F) {
	for _, text := range bpfHand {
		f.Add(text, []byte("\x00\x11\x22\x33\x44\x55\x66\x77\x88\x99\xaa\xbb\x08\x00\x45\x00\x00\x28\x00\x01\x00\x00\x40\x06"))
	}
	pkts := ethernetCorpus()[:40]
	f.Fuzz(func(t *testing.T, text string, pkt []byte) {
		p, err := CompileOne(BPFPrefix+text, LinkEthernet, false, nil)
		if err != nil {
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "filter f: position ") {
				t.Fatalf("error %q: want one line naming the filter and a position", msg)
			}
			return
		}
		insns, err := ParseBPF(text)
		if err != nil {
			t.Fatalf("compiled but does not parse: %v", err)
		}
		ev := NewEvaluator(p)
		le, err := NewLayoutEvaluator(p.Layout())
		if err != nil {
			t.Fatal(err)
		}
		var out, st, lw [1]uint64
		try := func(data []byte, wire uint32) {
			want := runBPF(insns, data, wire)
			ev.Eval(data, wire, out[:])
			ev.EvalStages(data, wire, st[:])
			le.Eval(data, wire, lw[:])
			if got := out[0] == 1; got != want || st[0] != out[0] || lw[0] != out[0] {
				t.Fatalf("%d bytes: lifted %v (stages %v, layout %v), BPF %v", len(data), got, st[0], lw[0], want)
			}
		}
		for n := 0; n <= len(pkt); n += 5 {
			try(pkt[:n], uint32(len(pkt)))
		}
		for _, q := range pkts {
			try(q.data, q.wire)
		}
	})
}

// TestWriteBPFFuzzCorpus writes FuzzBPF's committed seeds
// (GSWITCH_WRITE_CORPUS=1): the hand programs and tcpdump -ddd's of a few
// expressions.
func TestWriteBPFFuzzCorpus(t *testing.T) {
	if os.Getenv("GSWITCH_WRITE_CORPUS") == "" {
		t.Skip("set GSWITCH_WRITE_CORPUS=1 to rewrite the committed seed corpus")
	}
	requireTcpdump(t)
	file := filepath.Join(t.TempDir(), "e.pcap")
	if err := writePcap(file, LinkEthernet, false, ethernetCorpus()[:1]); err != nil {
		t.Fatal(err)
	}
	seeds := append([]string(nil), bpfHand...)
	for _, e := range []string{"tcp port 80", "vlan 100 and host 10.0.0.1", "ip[8] / ip[9] = 10", "tcp[((tcp[12] & 0xf0) >> 2)] = 0x68",
		"mpls and udp", "ip6 and tcp", "portrange 50-90", "ether[len - 1] = 0"} {
		text, ok := tcpdumpProgram(file, e)
		if !ok {
			t.Fatalf("tcpdump -ddd %q failed", e)
		}
		seeds = append(seeds, text)
	}
	seeds = append(seeds, "2,6 0 0 1", "1,40 0 0 12", "2,96 0 0 3,22 0 0 0")
	dir := filepath.Join("testdata", "fuzz", "FuzzBPF")
	os.MkdirAll(dir, 0o755)
	pk := ethernetCorpus()[3].data
	for i, s := range seeds {
		c := "go test fuzz v1\nstring(" + strconv.Quote(s) + ")\n[]byte(" + strconv.Quote(string(pk[:min(len(pk), 20+i*3)])) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, "seed"+strconv.Itoa(i)), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBPFRandomPrograms lifts thousands of random well-formed programs
// (loads of every mode, ALU with K and X, scratch memory, forward jumps
// of every kind, ret #k and ret a) and checks each against the
// reference interpreter on the corpus and on truncated copies.
func TestBPFRandomPrograms(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 7))
	pkts := ethernetCorpus()
	var short []testPacket
	for i, p := range pkts {
		if i%3 == 0 && len(p.data) > 14+i%30 {
			short = append(short, testPacket{p.data[:14+i%30], p.wire})
		}
	}
	pkts = append(pkts, short...)
	n := 3000
	if testing.Short() {
		n = 500
	}
	lifted, mixed := 0, 0
	for it := 0; it < n; it++ {
		text := randomBPF(rng)
		insns, err := ParseBPF(text)
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		p, err := CompileOne(BPFPrefix+text, LinkEthernet, false, nil)
		if err != nil {
			if strings.Contains(err.Error(), "read before it is written") || strings.Contains(err.Error(), "expression of more than") {
				continue
			}
			t.Fatalf("%q: %v", text, err)
		}
		lifted++
		ev := NewEvaluator(p)
		le, err := NewLayoutEvaluator(p.Layout())
		if err != nil {
			t.Fatal(err)
		}
		var out, st, lw [1]uint64
		acc := 0
		for i, q := range pkts {
			want := runBPF(insns, q.data, q.wire)
			if want {
				acc++
			}
			ev.Eval(q.data, q.wire, out[:])
			ev.EvalStages(q.data, q.wire, st[:])
			le.Eval(q.data, q.wire, lw[:])
			if got := out[0] == 1; got != want || st[0] != out[0] || lw[0] != out[0] {
				t.Fatalf("%q packet %d (%d bytes): lifted %v (stages %v, layout %v), BPF %v", text, i, len(q.data), got, st[0], lw[0], want)
			}
		}
		if acc > 0 && acc < len(pkts) {
			mixed++
		}
	}
	if lifted < n/2 {
		t.Fatalf("only %d of %d random programs lifted", lifted, n)
	}
	t.Logf("%d random programs lifted and checked, %d of them accept some packets and reject others", lifted, mixed)
}

// randomBPF returns a random well-formed program: every jump forward and
// inside, the last instruction a ret.
func randomBPF(rng *rand.Rand) string {
	n := 2 + rng.IntN(14)
	offs := []uint32{0, 6, 12, 13, 14, 15, 16, 20, 22, 23, 26, 30, 34, 36, 38, 47, 54, 60, 200}
	var lines []string
	add := func(code uint16, jt, jf uint8, k uint32) {
		lines = append(lines, fmt.Sprintf("%d %d %d %d", code, jt, jf, k))
	}
	for i := 0; i < n-1; i++ {
		left := n - 1 - i // instructions after this one
		k := offs[rng.IntN(len(offs))]
		switch rng.IntN(12) {
		case 0, 1:
			add([]uint16{0x20, 0x28, 0x30}[rng.IntN(3)], 0, 0, k)
		case 2:
			add([]uint16{0x40, 0x48, 0x50}[rng.IntN(3)], 0, 0, k)
		case 3:
			add(0xb1, 0, 0, []uint32{14, 18, 22}[rng.IntN(3)])
		case 4:
			add([]uint16{0x00, 0x01, 0x80, 0x81, 0x07, 0x87}[rng.IntN(6)], 0, 0, uint32(rng.IntN(64)))
		case 5:
			add([]uint16{0x02, 0x03, 0x60, 0x61}[rng.IntN(4)], 0, 0, uint32(rng.IntN(3)))
		case 6:
			ops := []uint16{0x00, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60, 0x70, 0x90, 0xa0}
			op := ops[rng.IntN(len(ops))]
			if rng.IntN(2) == 0 {
				add(0x04|op|0x08, 0, 0, 0)
			} else {
				kk := uint32(1 + rng.IntN(31))
				add(0x04|op, 0, 0, kk)
			}
		case 7:
			add(0x84, 0, 0, 0)
		case 8:
			add(0x05, 0, 0, uint32(rng.IntN(left)))
		default:
			code := []uint16{0x15, 0x25, 0x35, 0x45}[rng.IntN(4)] | uint16(rng.IntN(2))*0x08
			kk := []uint32{0, 1, 6, 17, 0x800, 0x86dd, 0x45, 80, uint32(rng.IntN(256))}[rng.IntN(9)]
			add(code, uint8(rng.IntN(left)), uint8(rng.IntN(left)), kk)
		}
	}
	if rng.IntN(3) == 0 {
		add(0x16, 0, 0, 0)
	} else {
		add(0x06, 0, 0, uint32(rng.IntN(2)))
	}
	return strconv.Itoa(len(lines)) + "," + strings.Join(lines, ",")
}

func TestExpandBPFFile(t *testing.T) {
	files := map[string]string{"/p.bpf": "# tcpdump -ddd ip\n4\n40 0 0 12\n21 0 1 2048\n6 0 0 262144\n6 0 0 0\n"}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	got, err := ExpandBPFFile("bpf:@/p.bpf", read)
	if err != nil || got != "bpf:4,40 0 0 12,21 0 1 2048,6 0 0 262144,6 0 0 0" {
		t.Fatalf("%q, %v", got, err)
	}
	if _, err := CompileOne(got, LinkEthernet, false, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := ExpandBPFFile("tcp port 80", read); err != nil || got != "tcp port 80" {
		t.Fatalf("%q, %v", got, err)
	}
	if got, err := ExpandBPFFile("bpf:1,6 0 0 1", read); err != nil || got != "bpf:1,6 0 0 1" {
		t.Fatalf("%q, %v", got, err)
	}
	if _, err := ExpandBPFFile("bpf:@/missing", read); err == nil || !strings.HasPrefix(err.Error(), "position 5: bpf:@/missing") {
		t.Fatalf("%v", err)
	}
}
