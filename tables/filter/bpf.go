package filter

import (
	"fmt"
	"strconv"
	"strings"
)

// Classic BPF input. A filter written "bpf:PROGRAM" is a classic BPF
// program in the text form "tcpdump -ddd" prints: the instruction count,
// then one "code jt jf k" line per instruction (decimal), lines separated
// by newlines or commas (the one-line form iptables' bpf match takes:
// "4,40 0 0 12,21 0 1 2048,6 0 0 262144,6 0 0 0"). The program is lifted
// into the same graph as an expression's:
//
//   - the program runs symbolically: every register (A, X, the 16 words
//     of scratch memory) holds an expression of the packet (a load, the
//     wire length, arithmetic); each (instruction, registers) pair is
//     lifted once, so code after a join is shared while the registers
//     agree and lifted once per state where they differ (libpcap's
//     optimizer joins paths that compare different loads with the same
//     constant);
//   - each conditional jump becomes a criterion, its expression compared
//     with k or X: "ldh [12]; jeq #0x800" the criterion [12:2] == 0x800,
//     "ldb [14]; and #0xf; jeq #5" a masked load, "ldxb 4*([14]&0xf);
//     ldh [x + 16]" a load from the IPv4 transport header, anything else
//     a general relation;
//   - "ret #k" is accept (k != 0) or reject, "ret a" the criterion A > 0;
//   - a load (or a division by X) whose value no later test of its own
//     straight-line run reads still rejects the packet when it runs past
//     the captured length: it gets a check criterion (expr >= 0: true
//     unless it aborts) on its path.
//
// The program's control-flow DAG, with those criteria, is the filter's
// control-flow form exactly (libpcap's optimizer has already run: nothing
// is re-optimized), and the boolean form of the DAG (each test "c ? T :
// F" as (c and T) or (not c and F), shared sub-DAGs shared) is its graph
// for the three-stage evaluation. Loads at computed offsets, scratch
// memory and arithmetic on loaded values all lift; what does not is
// rejected with the instruction and its position: an unknown opcode, a
// jump out of the program, a path that falls off its end, a scratch word
// read before any write, a constant division by zero or shift by 32 or
// more, an expression grown past maxBPFExpr nodes, more than
// maxBPFStates (instruction, registers) pairs. Backward jumps cannot be written in
// classic BPF (offsets are unsigned).

// BPFPrefix marks a filter given as a classic BPF program.
const BPFPrefix = "bpf:"

// MaxBPFInsns is the longest program accepted (BPF_MAXINSNS).
const MaxBPFInsns = 4096

// maxBPFExpr bounds the size of one register's expression tree (a
// program of "tax; add x" doubles it at every step).
const maxBPFExpr = 256

// BPFInsn is one classic BPF instruction.
type BPFInsn struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
	pos    int // byte offset of its text in the program
}

// BPF instruction classes and fields (linux/filter.h, pcap/bpf.h).
const (
	bpfLD   = 0x00
	bpfLDX  = 0x01
	bpfST   = 0x02
	bpfSTX  = 0x03
	bpfALU  = 0x04
	bpfJMP  = 0x05
	bpfRET  = 0x06
	bpfMISC = 0x07

	bpfW   = 0x00
	bpfH   = 0x08
	bpfB   = 0x10
	bpfIMM = 0x00
	bpfABS = 0x20
	bpfIND = 0x40
	bpfMEM = 0x60
	bpfLEN = 0x80
	bpfMSH = 0xa0

	bpfK = 0x00
	bpfX = 0x08
	bpfA = 0x10

	bpfJA   = 0x00
	bpfJEQ  = 0x10
	bpfJGT  = 0x20
	bpfJGE  = 0x30
	bpfJSET = 0x40

	bpfTAX = 0x00
	bpfTXA = 0x80
)

// bpfLoadCodes are the load opcodes of classic BPF.
var bpfLoadCodes = map[uint16]bool{0x00: true, 0x20: true, 0x28: true, 0x30: true, 0x40: true, 0x48: true,
	0x50: true, 0x60: true, 0x80: true, 0x01: true, 0x61: true, 0x81: true, 0xb1: true}

var bpfALUOps = map[uint16]aop{0x00: aAdd, 0x10: aSub, 0x20: aMul, 0x30: aDiv, 0x40: aOr, 0x50: aAnd,
	0x60: aLsh, 0x70: aRsh, 0x90: aMod, 0xa0: aXor}

// ParseBPF parses the text form of a program (without the "bpf:" prefix).
// Positions in errors count from the start of text.
func ParseBPF(text string) ([]BPFInsn, error) { return parseBPF(text, 0) }

// parseBPF parses a program whose text starts at position off of the
// filter's expression.
func parseBPF(text string, off int) ([]BPFInsn, error) {
	type field struct {
		s   string
		pos int
	}
	var lines [][]field
	start := 0
	for i := 0; i <= len(text); i++ {
		if i < len(text) && text[i] != '\n' && text[i] != ',' && text[i] != ';' {
			continue
		}
		var fs []field
		for j := start; j < i; {
			for j < i && (text[j] == ' ' || text[j] == '\t' || text[j] == '\r') {
				j++
			}
			k := j
			for k < i && text[k] != ' ' && text[k] != '\t' && text[k] != '\r' {
				k++
			}
			if k > j {
				fs = append(fs, field{text[j:k], off + j})
			}
			j = k
		}
		if len(fs) > 0 {
			lines = append(lines, fs)
		}
		start = i + 1
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("position %d: empty BPF program (want the instruction count, then \"code jt jf k\" per instruction, as tcpdump -ddd prints)", off)
	}
	num := func(f field, bits int, what string) (uint64, error) {
		v, err := strconv.ParseUint(f.s, 10, bits)
		if err != nil {
			return 0, fmt.Errorf("position %d: %s %q: want a decimal number of %d bits", f.pos, what, f.s, bits)
		}
		return v, nil
	}
	if len(lines[0]) != 1 {
		return nil, fmt.Errorf("position %d: want the instruction count first (tcpdump -ddd's first line)", lines[0][0].pos)
	}
	n, err := num(lines[0][0], 16, "instruction count")
	if err != nil {
		return nil, err
	}
	if n == 0 || n > MaxBPFInsns {
		return nil, fmt.Errorf("position %d: instruction count %d: want 1 to %d", lines[0][0].pos, n, MaxBPFInsns)
	}
	if int(n) != len(lines)-1 {
		return nil, fmt.Errorf("position %d: instruction count %d, but %d instructions follow", lines[0][0].pos, n, len(lines)-1)
	}
	prog := make([]BPFInsn, 0, n)
	for _, l := range lines[1:] {
		if len(l) != 4 {
			return nil, fmt.Errorf("position %d: instruction %d: want \"code jt jf k\", got %d fields", l[0].pos, len(prog), len(l))
		}
		var v [4]uint64
		for i, w := range []struct {
			bits int
			what string
		}{{16, "code"}, {8, "jt"}, {8, "jf"}, {32, "k"}} {
			if v[i], err = num(l[i], w.bits, w.what); err != nil {
				return nil, err
			}
		}
		prog = append(prog, BPFInsn{Code: uint16(v[0]), Jt: uint8(v[1]), Jf: uint8(v[2]), K: uint32(v[3]), pos: l[0].pos})
	}
	return prog, nil
}

// bpfState is the symbolic machine at an instruction: a nil scratch
// word has not been written.
type bpfState struct {
	a, x *arith
	m    [16]*arith
}

// lifted is a program lifted to criteria: its control-flow DAG (nodes
// referenced by index, cAccept and cReject leaves) and its boolean form.
type lifted struct {
	crits []*Criterion
	nodes []cnode // crit indexes crits
	root  int32
	tree  *bnode
	key   string // canonical program text: filters of one program share a form
}

type bpfLifter struct {
	prog     []BPFInsn
	size     map[*arith]int
	keys     map[*arith]string
	err      error
	out      lifted
	nodes    map[cnode]int32
	crits    map[string]int32
	memo     map[string]*liftRes
	interned map[string]int // expression text -> its number in state keys
	tTrue    *bnode
	tFalse   *bnode
}

func (l *bpfLifter) fail(i int, format string, args ...any) {
	if l.err == nil {
		l.err = fmt.Errorf("position %d: instruction %d: %s", l.prog[i].pos, i, fmt.Sprintf(format, args...))
	}
}

func (l *bpfLifter) key(e *arith) string {
	if k, ok := l.keys[e]; ok {
		return k
	}
	var sb strings.Builder
	e.key(&sb)
	l.keys[e] = sb.String()
	return l.keys[e]
}

func (l *bpfLifter) mk(i int, e *arith) *arith {
	n := 1
	if e.a != nil {
		n += l.size[e.a]
	}
	if e.b != nil {
		n += l.size[e.b]
	}
	if n > maxBPFExpr {
		l.fail(i, "expression of more than %d operations", maxBPFExpr)
	}
	l.size[e] = n
	return e
}

func (l *bpfLifter) konst(k uint32) *arith { return l.mk(0, &arith{op: aConst, k: k}) }

// mshNet reports whether e is "4*([k]&0xf)", ldx msh's value, and its k.
func mshNet(e *arith) (uint32, bool) {
	if e == nil || e.op != aLsh || e.b.op != aConst || e.b.k != 2 {
		return 0, false
	}
	m := e.a
	if m.op != aAnd || m.b.op != aConst || m.b.k != 0xf {
		return 0, false
	}
	ld := m.a
	if ld.op != aLoad || ld.a != nil || ld.load.Base != BaseAbs || ld.load.Size != 1 {
		return 0, false
	}
	return ld.load.Off, true
}

// load is the value of a load of size at x+k (x nil: absolute).
func (l *bpfLifter) load(i int, x *arith, k uint32, size uint8) *arith {
	if x == nil {
		return l.mk(i, &arith{op: aLoad, load: Load{Off: k, Size: size}})
	}
	if x.op == aConst {
		return l.mk(i, &arith{op: aLoad, load: Load{Off: x.k + k, Size: size}})
	}
	if net, ok := mshNet(x); ok && k >= net && k < 1<<16 {
		// x is at most 60: x+k cannot wrap.
		return l.mk(i, &arith{op: aLoad, load: Load{Base: BaseIPv4, NetOff: net, Off: k - net, Size: size}})
	}
	// BPF adds X and k in 32 bits (a sum past 2^32 wraps to a small
	// offset): the index is that sum.
	if k != 0 {
		x = l.alu(i, aAdd, x, l.konst(k))
	}
	return l.mk(i, &arith{op: aLoad, load: Load{Size: size}, a: x})
}

func (l *bpfLifter) alu(i int, op aop, a, b *arith) *arith {
	if a.op == aConst && b.op == aConst && op != aDiv && op != aMod {
		v, _ := alu(op, a.k, b.k)
		return l.konst(v)
	}
	return l.mk(i, &arith{op: op, a: a, b: b})
}

// abortable reports whether evaluating e can reject the packet.
func abortable(e *arith) bool {
	switch e.op {
	case aConst, aLen:
		return false
	case aLoad, aDiv, aMod:
		return true
	case aNeg:
		return abortable(e.a)
	}
	return abortable(e.a) || abortable(e.b)
}

// contains adds to set the keys of e's sub-expressions that can abort,
// counting a load from the IPv4 transport header as also reading the
// IPv4 header's first byte (ldx msh's load).
func (l *bpfLifter) contains(e *arith, set map[string]bool) {
	if e == nil {
		return
	}
	switch e.op {
	case aLoad:
		if e.load.Base == BaseIPv4 {
			set[l.key(&arith{op: aLoad, load: Load{Off: e.load.NetOff, Size: 1}})] = true
		}
		set[l.key(e)] = true
	case aDiv, aMod:
		set[l.key(e)] = true
	}
	l.contains(e.a, set)
	l.contains(e.b, set)
}

// criterion is "a rel b" in the graph's form; const reports a relation
// of two constants (then v is its value).
func criterion(rel Rel, a, b *arith) (c *Criterion, v, isConst bool) {
	if a.op == aConst && b.op == aConst {
		return nil, relTrue(rel, a.k, b.k) == vTrue, true
	}
	if b.op == aConst {
		switch {
		case a.op == aLoad && a.a == nil:
			return &Criterion{Load: a.load, Mask: 0xffffffff, Rel: rel, K: b.k}, false, false
		case a.op == aAnd && a.b.op == aConst && a.a.op == aLoad && a.a.a == nil:
			return &Criterion{Load: a.a.load, Mask: a.b.k, Rel: rel, K: b.k}, false, false
		case a.op == aLen:
			return &Criterion{Len: true, Rel: rel, K: b.k}, false, false
		}
	}
	return &Criterion{expr: &relation{rel: rel, l: a, r: b}}, false, false
}

// check is the criterion "e >= 0": true, unless evaluating e rejects the
// packet.
func check(e *arith) *Criterion {
	return &Criterion{expr: &relation{rel: RelGE, l: e, r: &arith{op: aConst}}}
}

func (l *bpfLifter) critID(c *Criterion) int32 {
	k := c.String()
	if id, ok := l.crits[k]; ok {
		return id
	}
	l.out.crits = append(l.out.crits, c)
	l.crits[k] = int32(len(l.out.crits) - 1)
	return l.crits[k]
}

func (l *bpfLifter) node(c *Criterion, t, f int32) int32 {
	n := cnode{crit: l.critID(c), jt: t, jf: f}
	if id, ok := l.nodes[n]; ok {
		return id
	}
	l.out.nodes = append(l.out.nodes, n)
	l.nodes[n] = int32(len(l.out.nodes) - 1)
	return l.nodes[n]
}

// liftBPF lifts a program's text; off is its position in the expression
// (for errors).
func liftBPF(text string, off int) (*lifted, error) {
	if strings.HasPrefix(strings.TrimSpace(text), "@") {
		return nil, fmt.Errorf("position %d: bpf:@FILE: the file is read by the command or the agent that loads the filter, not by the compiler", off)
	}
	prog, err := parseBPF(text, off)
	if err != nil {
		return nil, err
	}
	l := &bpfLifter{prog: prog, size: map[*arith]int{}, keys: map[*arith]string{},
		nodes: map[cnode]int32{}, crits: map[string]int32{}, memo: map[string]*liftRes{}, interned: map[string]int{}}
	l.tTrue, l.tFalse = constNode(true), constNode(false)
	zero := l.konst(0)
	r := l.lift(0, bpfState{a: zero, x: zero})
	if l.err != nil {
		return nil, l.err
	}
	l.out.root, l.out.tree = r.entry, r.tree
	var kb strings.Builder
	for _, in := range prog {
		fmt.Fprintf(&kb, "%d %d %d %d,", in.Code, in.Jt, in.Jf, in.K)
	}
	l.out.key = kb.String()
	return &l.out, nil
}

// maxBPFStates bounds the (instruction, machine state) pairs a lift
// visits: a join whose registers differ by path is lifted once per
// state.
const maxBPFStates = 1 << 13

// liftRes is the lift of an instruction in one machine state: the
// control-flow node where execution from it starts, its boolean form, the
// abortable values that the first test (or ret) reached from it by
// falling through reads (covered), and whether that end is "ret #0"
// (then any abort is a reject anyway).
type liftRes struct {
	entry    int32
	tree     *bnode
	covered  map[string]bool
	toReject bool
}

// stateKey identifies (pc, registers): each register by the number of
// its expression's canonical text (interned), so that keys stay short.
func (l *bpfLifter) stateKey(pc int, s *bpfState) string {
	var sb strings.Builder
	sb.WriteString(strconv.Itoa(pc))
	for _, v := range append([]*arith{s.a, s.x}, s.m[:]...) {
		sb.WriteByte('|')
		if v != nil {
			k := l.key(v)
			id, ok := l.interned[k]
			if !ok {
				id = len(l.interned) + 1
				l.interned[k] = id
			}
			sb.WriteString(strconv.Itoa(id))
		}
	}
	return sb.String()
}

var errLift = &liftRes{entry: cReject}

// lift runs instruction pc symbolically in state s (every jump goes
// forward, so the recursion ends), memoized by (pc, state): code after a
// join is shared while the registers agree and lifted once per state
// where they differ (libpcap's optimizer joins paths whose tests compare
// different loads with the same constant).
func (l *bpfLifter) lift(pc int, s bpfState) *liftRes {
	if l.err != nil {
		return errLift
	}
	key := l.stateKey(pc, &s)
	if r, ok := l.memo[key]; ok {
		return r
	}
	if len(l.memo) >= maxBPFStates {
		l.fail(pc, "more than %d distinct (instruction, register) states: too many paths to lift", maxBPFStates)
		return errLift
	}
	r := l.lift1(pc, s)
	l.memo[key] = r
	return r
}

func (l *bpfLifter) lift1(i int, s bpfState) *liftRes {
	prog := l.prog
	n := len(prog)
	in := prog[i]
	cls := in.Code & 0x07
	var effects []*arith // abortable values this instruction computes
	next := func(to int) *liftRes {
		switch {
		case to >= n && to == i+1 && cls != bpfJMP:
			l.fail(i, "the program runs past its last instruction (it must end in ret)")
			return errLift
		case to >= n:
			l.fail(i, "jump past the end of the program")
			return errLift
		}
		return l.lift(to, s)
	}
	switch cls {
	case bpfLD, bpfLDX:
		if !bpfLoadCodes[in.Code] {
			l.fail(i, "unknown load opcode %#x", in.Code)
			return errLift
		}
		var v *arith
		size := map[uint16]uint8{bpfW: 4, bpfH: 2, bpfB: 1}[in.Code&0x18]
		switch in.Code & 0xe0 {
		case bpfIMM:
			v = l.konst(in.K)
		case bpfLEN:
			v = l.mk(i, &arith{op: aLen})
		case bpfMEM:
			if in.K >= 16 {
				l.fail(i, "scratch memory M[%d] out of range (0-15)", in.K)
				return errLift
			}
			if v = s.m[in.K]; v == nil {
				l.fail(i, "scratch memory M[%d] read before it is written", in.K)
				return errLift
			}
		case bpfABS:
			v = l.load(i, nil, in.K, size)
			effects = append(effects, v)
		case bpfIND:
			v = l.load(i, s.x, in.K, size)
			effects = append(effects, v)
		case bpfMSH:
			b := l.load(i, nil, in.K, 1)
			effects = append(effects, b)
			v = l.alu(i, aLsh, l.alu(i, aAnd, b, l.konst(0xf)), l.konst(2))
		}
		if cls == bpfLD {
			s.a = v
		} else {
			s.x = v
		}
	case bpfST, bpfSTX:
		if in.Code != bpfST && in.Code != bpfSTX {
			l.fail(i, "unknown store opcode %#x", in.Code)
			return errLift
		}
		if in.K >= 16 {
			l.fail(i, "scratch memory M[%d] out of range (0-15)", in.K)
			return errLift
		}
		if cls == bpfST {
			s.m[in.K] = s.a
		} else {
			s.m[in.K] = s.x
		}
	case bpfALU:
		if in.Code == bpfALU|0x80 { // neg
			if s.a.op == aConst {
				s.a = l.konst(-s.a.k)
			} else {
				s.a = l.mk(i, &arith{op: aNeg, a: s.a})
			}
			break
		}
		op, ok := bpfALUOps[in.Code&0xf0]
		if !ok || in.Code > 0xff {
			l.fail(i, "unknown ALU opcode %#x", in.Code)
			return errLift
		}
		b := l.konst(in.K)
		if in.Code&bpfX != 0 {
			b = s.x
		} else if (op == aDiv || op == aMod) && in.K == 0 {
			l.fail(i, "division by the constant 0")
			return errLift
		} else if (op == aLsh || op == aRsh) && in.K >= 32 {
			l.fail(i, "shift by %d (32 or more)", in.K)
			return errLift
		}
		div := op == aDiv || op == aMod
		if div && s.a.op == aConst && b.op == aConst && b.k != 0 {
			v, _ := alu(op, s.a.k, b.k)
			s.a = l.konst(v)
		} else {
			s.a = l.alu(i, op, s.a, b)
		}
		if div && s.a.op != aConst && (b.op != aConst || b.k == 0) {
			effects = append(effects, s.a)
		}
	case bpfJMP:
		if in.Code == bpfJMP|bpfJA {
			if uint64(i)+1+uint64(in.K) >= uint64(n) {
				l.fail(i, "jump past the end of the program")
				return errLift
			}
			return next(i + 1 + int(in.K))
		}
		rel, ok := map[uint16]Rel{bpfJEQ: RelEQ, bpfJGT: RelGT, bpfJGE: RelGE, bpfJSET: RelSet}[in.Code&0xf0]
		if !ok || in.Code&^0xf8 != bpfJMP {
			l.fail(i, "unknown jump opcode %#x", in.Code)
			return errLift
		}
		b := l.konst(in.K)
		if in.Code&bpfX != 0 {
			b = s.x
		}
		c, v, isConst := criterion(rel, s.a, b)
		if isConst { // two constants: decided here
			if v {
				return next(i + 1 + int(in.Jt))
			}
			return next(i + 1 + int(in.Jf))
		}
		t, f := next(i+1+int(in.Jt)), next(i+1+int(in.Jf))
		r := &liftRes{entry: l.node(c, t.entry, f.entry), tree: l.ite(c, t.tree, f.tree), covered: map[string]bool{}}
		l.contains(s.a, r.covered)
		l.contains(b, r.covered)
		return r
	case bpfRET:
		switch {
		case in.Code == bpfRET|bpfA:
			c, v, isConst := criterion(RelGT, s.a, l.konst(0))
			if isConst {
				if v {
					return &liftRes{entry: cAccept, tree: l.tTrue}
				}
				return &liftRes{entry: cReject, tree: l.tFalse, toReject: true}
			}
			r := &liftRes{entry: l.node(c, cAccept, cReject), tree: atom(c), covered: map[string]bool{}}
			l.contains(s.a, r.covered)
			return r
		case in.Code != bpfRET|bpfK:
			l.fail(i, "unknown return opcode %#x", in.Code)
			return errLift
		case in.K != 0:
			return &liftRes{entry: cAccept, tree: l.tTrue}
		}
		return &liftRes{entry: cReject, tree: l.tFalse, toReject: true}
	case bpfMISC:
		switch in.Code {
		case bpfMISC | bpfTAX:
			s.x = s.a
		case bpfMISC | bpfTXA:
			s.a = s.x
		default:
			l.fail(i, "unknown opcode %#x", in.Code)
			return errLift
		}
	}
	nx := next(i + 1)
	if l.err != nil {
		return errLift
	}
	r := nx
	for _, e := range effects {
		if nx.toReject || nx.covered[l.key(e)] {
			continue
		}
		// A value no test of this run reads: it still rejects the packet
		// if it aborts. The check is absent from the boolean form, which
		// the three stages use only when no criterion is unknown (then
		// every check is true).
		if r == nx {
			cp := *nx
			r = &cp
		}
		r.entry = l.node(check(e), r.entry, r.entry)
	}
	return r
}

// ite is "c ? t : f" as a boolean tree.
func (l *bpfLifter) ite(c *Criterion, t, f *bnode) *bnode {
	a := atom(c)
	switch {
	case t == f:
		return t
	case t == l.tTrue && f == l.tFalse:
		return a
	case t == l.tFalse && f == l.tTrue:
		return not(a)
	case t == l.tTrue:
		return or(a, f)
	case f == l.tFalse:
		return and(a, t)
	case t == l.tFalse:
		return and(not(a), f)
	case f == l.tTrue:
		return or(not(a), t)
	}
	return or(and(a, t), and(not(a), f))
}

// ExpandBPFFile turns a filter "bpf:@PATH" into "bpf:" and the program
// that the file holds (tcpdump -ddd's output, one instruction a line),
// put on one line with commas; any other expression is returned as it
// is. read reads the file: this package does no I/O of its own.
func ExpandBPFFile(expr string, read func(path string) ([]byte, error)) (string, error) {
	if !strings.HasPrefix(expr, BPFPrefix) {
		return expr, nil
	}
	rest := strings.TrimSpace(expr[len(BPFPrefix):])
	if !strings.HasPrefix(rest, "@") {
		return expr, nil
	}
	path := strings.TrimSpace(rest[1:])
	if path == "" {
		return "", fmt.Errorf("position %d: bpf:@FILE: no file name", len(BPFPrefix)+1)
	}
	b, err := read(path)
	if err != nil {
		return "", fmt.Errorf("position %d: bpf:@%s: %v", len(BPFPrefix)+1, path, err)
	}
	if len(b) > MaxBPFInsns*32 {
		return "", fmt.Errorf("position %d: bpf:@%s: larger than %d bytes", len(BPFPrefix)+1, path, MaxBPFInsns*32)
	}
	var lines []string
	for _, ln := range strings.Split(string(b), "\n") {
		if ln = strings.TrimSpace(ln); ln != "" && !strings.HasPrefix(ln, "#") {
			lines = append(lines, ln)
		}
	}
	return BPFPrefix + strings.Join(lines, ","), nil
}
