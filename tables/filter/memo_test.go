package filter

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// memoSets are the programs the memo tests run: a monitoring set, a set
// with len tests and IPv4-relative loads, loads at computed offsets, and
// single filters.
func memoSets() [][]Spec {
	return [][]Spec{
		benchSpecs(200),
		{{"a", "less 100 or greater 1400"}, {"b", "tcp[tcpflags] & tcp-syn != 0"}, {"c", "udp dst port 53 and ip[8] < 64"},
			{"d", "icmp[icmptype] = icmp-echo"}, {"e", "vlan 2 and tcp port 80"}, {"f", "ip6 and tcp"}, {"g", "ether host 02:00:00:00:00:01"},
			{"h", "ip[6:2] & 0x1fff = 0 and udp[4:2] > 20"}},
		{{"v", "tcp[tcp[12] >> 4] = 1"}, {"w", "ip[ip[0] & 0xf] > 3 or len > 90"}, {"u", "udp"}},
		{{"x", "tcp port 80"}},
	}
}

// TestMemoExact: every answer the memo gives equals Eval's, over a stream
// of corpus packets and their mutations (bytes changed, cut shorter,
// zeros appended, another wire length), repeated so that most take a kept
// answer; and the memo does hit.
func TestMemoExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	corpus := ethernetCorpus()
	for si, specs := range memoSets() {
		p, err := Compile(specs, LinkEthernet, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		ev := NewEvaluator(p)
		m := NewMemo(p)
		want := make([]uint64, p.Words())
		// Groups of three corpus packets with six mutations each, shuffled
		// within the group and sent twice: a link's few flows at a time.
		var stream []testPacket
		for g := 0; g < len(corpus); g += 3 {
			var group []testPacket
			for _, pk := range corpus[g:min(g+3, len(corpus))] {
				group = append(group, pk)
				for range 6 {
					group = append(group, mutate(r, pk))
				}
			}
			for range 2 {
				r.Shuffle(len(group), func(i, j int) { group[i], group[j] = group[j], group[i] })
				stream = append(stream, group...)
			}
		}
		looks := 0
		for i, pk := range stream {
			if i%64 == 0 {
				m.Begin()
			}
			got, _ := m.Eval(pk.data, pk.wire)
			looks++
			ev.Eval(pk.data, pk.wire, want)
			if !slices.Equal(got, want) {
				t.Fatalf("set %d: memo %x, Eval %x\n packet %x wire %d", si, got, want, pk.data, pk.wire)
			}
		}
		hits, evals := m.Stats()
		if int(hits+evals) != looks {
			t.Fatalf("set %d: %d hits and %d evaluations of %d lookups", si, hits, evals, looks)
		}
		if int(hits) < looks/3 {
			t.Fatalf("set %d: %d hits of %d lookups (bypass %d): the test does not test", si, hits, looks, m.bypass)
		}
		t.Logf("set %d: %d lookups, %d hits, %d shapes", si, looks, hits, m.nshape)
	}
}

// TestMemoSlotsKeptForTheBatch: the slots Eval returns since Begin keep
// their answers until the next Begin, however many packets follow.
func TestMemoSlotsKeptForTheBatch(t *testing.T) {
	p, err := Compile(memoSets()[1], LinkEthernet, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMemo(p)
	r := rand.New(rand.NewPCG(3, 4))
	corpus := ethernetCorpus()
	kept := map[int][]uint64{}
	m.Begin()
	for range 2000 {
		pk := corpus[r.IntN(len(corpus))]
		b := slices.Clone(pk.data)
		if len(b) > 20 {
			b[12+r.IntN(len(b)-12)] = byte(r.IntN(256))
		}
		got, slot := m.Eval(b, uint32(len(b)))
		if slot < 0 {
			continue
		}
		if old, ok := kept[slot]; ok && !slices.Equal(old, got) {
			t.Fatalf("slot %d changed within the batch: %x then %x", slot, old, got)
		}
		kept[slot] = slices.Clone(got)
	}
	for slot, a := range kept {
		if !slices.Equal(m.Answers(slot), a) {
			t.Fatalf("slot %d changed within the batch", slot)
		}
	}
	if len(kept) < 20 {
		t.Fatalf("only %d slots kept", len(kept))
	}
}

// TestMemoBypassOnDistinctTraffic: packets that never repeat turn the
// lookups off (plain evaluations), and the answers stay Eval's.
func TestMemoBypassOnDistinctTraffic(t *testing.T) {
	p, err := Compile(benchSpecs(50), LinkEthernet, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, ev := NewMemo(p), NewEvaluator(p)
	want := make([]uint64, p.Words())
	r := rand.New(rand.NewPCG(5, 6))
	corpus := ethernetCorpus()
	for i := range 3 * memoWindow {
		pk := corpus[i%len(corpus)]
		b := slices.Clone(pk.data)
		for j := 12; j < len(b) && j < 60; j++ {
			b[j] = byte(r.IntN(256))
		}
		got, _ := m.Eval(b, uint32(len(b)))
		ev.Eval(b, uint32(len(b)), want)
		if !slices.Equal(got, want) {
			t.Fatalf("packet %d: memo %x, Eval %x", i, got, want)
		}
	}
	if m.bypass == 0 {
		t.Fatal("no bypass on traffic that never repeats")
	}
}

// mutate returns pk changed: another wire length, zeros appended (the
// bytes a load past the end would read), cut shorter, or a few bytes
// changed.
func mutate(r *rand.Rand, pk testPacket) testPacket {
	b := slices.Clone(pk.data)
	wb := pk.wire
	switch r.IntN(5) {
	case 0:
		wb += uint32(r.IntN(100))
	case 1:
		b = append(b, make([]byte, 1+r.IntN(40))...)
	case 2:
		b = b[:r.IntN(len(b)+1)]
	default:
		for range 1 + r.IntN(3) {
			if len(b) > 0 {
				b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
			}
		}
	}
	return testPacket{b, wb}
}

// FuzzMemo: a packet and variants of it (a byte flipped at an offset the
// input picks, cut at another, the wire length changed) through one Memo
// per program, kept across inputs, give Eval's answers; the variants
// usually share the packet's key, so hits are checked, not only misses.
func FuzzMemo(f *testing.F) {
	for _, p := range ethernetCorpus()[:40] {
		f.Add(p.data, p.wire, uint16(len(p.data)-1), uint16(len(p.data)/2))
	}
	var progs []*Program
	for _, specs := range memoSets() {
		p, err := Compile(specs, LinkEthernet, false, nil)
		if err != nil {
			f.Fatal(err)
		}
		progs = append(progs, p)
	}
	memos := make([]*Memo, len(progs))
	evs := make([]*Evaluator, len(progs))
	for i, p := range progs {
		memos[i], evs[i] = NewMemo(p), NewEvaluator(p)
	}
	f.Fuzz(func(t *testing.T, data []byte, wire uint32, flip, cut uint16) {
		variants := [][]byte{data, data}
		if len(data) > 0 {
			b := slices.Clone(data)
			b[int(flip)%len(b)] ^= 0x5a
			variants = append(variants, b, data[:int(cut)%len(data)])
		}
		for i, p := range progs {
			want := make([]uint64, p.Words())
			m := memos[i]
			m.Begin()
			for j, v := range variants {
				w := wire
				if j == 1 {
					w = wire + uint32(flip)
				}
				got, _ := m.Eval(v, w)
				evs[i].Eval(v, w, want)
				if !slices.Equal(got, want) {
					t.Fatalf("program %d, variant %d: memo %x, Eval %x", i, j, got, want)
				}
			}
		}
	})
}
